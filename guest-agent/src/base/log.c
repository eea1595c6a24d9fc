#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static agent_log_level log_level = AGENT_LOG_INFO;

void agent_log_set_level(agent_log_level level)
{
	log_level = level;
}

bool agent_log_enabled(agent_log_level level)
{
	return level <= log_level;
}

void agent_log(agent_log_level level, const char *fmt, ...)
{
	static const char *const names[] = { "error", "warn", "info", "debug" };
	char line[1024];
	int saved = errno;
	int n, m;
	va_list ap;

	if (!agent_log_enabled(level))
		return;
	va_start(ap, fmt);
	n = snprintf(line, sizeof(line), "sandbox-agent: %s: ", names[level]);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	n += m > 0 ? m : 0;
	if (n >= (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* One write() so concurrent writers (children share stderr) do not interleave. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
	errno = saved;
}
