/* How many processes the kernel's OOM killer has killed in this sandbox, as
 * its memory cgroup counts them (the sandbox's own cgroup, seen through the
 * runtime's read-only /sys/fs/cgroup mount): proc.c compares the count at a
 * command's start and at its end to tell an OOM kill from any other SIGKILL.
 * The file is opened once and read again for each figure; where there is
 * none (no cgroup mount, gVisor), there is no figure and no command is ever
 * reported OOM-killed. This module owns that one descriptor; it must not
 * know about commands. Loop thread only. */
#ifndef AGENT_OOM_H
#define AGENT_OOM_H

#include <stdbool.h>
#include <stdint.h>

/* The count now; false when this sandbox has no such figure. */
bool agent_oom_kills(uint64_t *n);

#endif
