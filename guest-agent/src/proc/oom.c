/* agent_oom: see oom.h. */
#include "oom.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cgroup v1 (memory controller mounted alone, hybrid hosts included), then
 * v2: both keep an "oom_kill N" line. */
static const char *const files[] = {
	"/sys/fs/cgroup/memory/memory.oom_control",
	"/sys/fs/cgroup/memory.events",
};

static int fd = -2; /* -2: not tried yet, -1: none */

bool agent_oom_kills(uint64_t *n)
{
	char buf[512];
	ssize_t len;
	const char *line;

	for (size_t i = 0; fd == -2 && i < sizeof(files) / sizeof(files[0]); i++) {
		int f = open(files[i], O_RDONLY | O_CLOEXEC);
		if (f >= 0)
			fd = f;
	}
	if (fd == -2)
		fd = -1;
	if (fd < 0)
		return false;
	len = pread(fd, buf, sizeof(buf) - 1, 0);
	if (len <= 0)
		return false;
	buf[len] = '\0';
	for (line = buf; line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
		if (strncmp(line, "oom_kill ", 9) == 0) {
			*n = strtoull(line + 9, NULL, 10);
			return true;
		}
	return false;
}
