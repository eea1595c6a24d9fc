/* Agent logging: one line per message on stderr, prefixed "sandbox-agent:".
 * As PID 1 of a container, stderr is the container log the supervisor keeps.
 * This module owns formatting and the verbosity level only; it must not
 * allocate, so it is safe to call on any path (also out of memory). */
#ifndef AGENT_LOG_H
#define AGENT_LOG_H

#include <stdbool.h>

typedef enum agent_log_level {
	AGENT_LOG_ERROR = 0,
	AGENT_LOG_WARN,
	AGENT_LOG_INFO,
	AGENT_LOG_DEBUG,
} agent_log_level;

void agent_log_set_level(agent_log_level level);
bool agent_log_enabled(agent_log_level level);
void agent_log(agent_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define agent_log_error(...) agent_log(AGENT_LOG_ERROR, __VA_ARGS__)
#define agent_log_warn(...) agent_log(AGENT_LOG_WARN, __VA_ARGS__)
#define agent_log_info(...) agent_log(AGENT_LOG_INFO, __VA_ARGS__)
#define agent_log_debug(...)                                  \
	do {                                                  \
		if (agent_log_enabled(AGENT_LOG_DEBUG))       \
			agent_log(AGENT_LOG_DEBUG, __VA_ARGS__); \
	} while (0)

#endif
