#include "sup_log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static sup_log_level min_level = SUP_LOG_INFO;

static const char *const level_names[] = { "debug", "info", "warn", "error" };

void sup_log_set_level(sup_log_level level)
{
	min_level = level;
}

int sup_log_level_parse(const char *s, sup_log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (sup_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

static void __attribute__((format(printf, 2, 0))) sup_vlog(sup_log_level level, const char *fmt, va_list ap)
{
	if (level < min_level)
		return;
	char line[2048];
	struct timeval tv;
	struct tm tm;
	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	int n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
			 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
			 tm.tm_sec, (long)(tv.tv_usec / 1000), level_names[level]);
	if (n < 0 || (size_t)n >= sizeof(line) - 1)
		n = 0;
	/* NOLINTNEXTLINE(clang-analyzer-valist.Uninitialized): ap comes from sup_log's va_start */
	int m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
	if (len > sizeof(line) - 2)
		len = sizeof(line) - 2; /* truncated: still one line */
	/* A guest-provided string must not forge extra log lines. */
	for (size_t i = (size_t)n; i < len; i++)
		if (line[i] == '\n' || line[i] == '\r')
			line[i] = ' ';
	line[len++] = '\n';
	ssize_t w = write(STDERR_FILENO, line, len);
	(void)w;
}

void sup_log(sup_log_level level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	sup_vlog(level, fmt, ap);
	va_end(ap);
}
