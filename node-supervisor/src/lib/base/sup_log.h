/* Supervisor logging: one line per event on stderr, with a level and a
 * timestamp. Safe to call from worker threads (one write(2) per line).
 * It owns only the output format; JSON logs come later behind the same calls.
 * It must not allocate without bound or block the loop for long. */
#ifndef SUP_LOG_H
#define SUP_LOG_H

typedef enum sup_log_level {
	SUP_LOG_DEBUG = 0,
	SUP_LOG_INFO,
	SUP_LOG_WARN,
	SUP_LOG_ERROR,
} sup_log_level;

/* Messages below level are dropped (default: info). */
void sup_log_set_level(sup_log_level level);
/* Parse "debug", "info", "warn", "error"; -EINVAL otherwise. */
int sup_log_level_parse(const char *s, sup_log_level *out);

void sup_log(sup_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define sup_debug(...) sup_log(SUP_LOG_DEBUG, __VA_ARGS__)
#define sup_info(...) sup_log(SUP_LOG_INFO, __VA_ARGS__)
#define sup_warn(...) sup_log(SUP_LOG_WARN, __VA_ARGS__)
#define sup_error(...) sup_log(SUP_LOG_ERROR, __VA_ARGS__)

#endif
