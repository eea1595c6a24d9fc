/* Starting one command: fork, set up the child, exec.
 *
 * The child gets its own process group (so signals and timeouts reach the
 * whole group), the given fds as stdin/stdout/stderr, every other fd closed
 * on exec, default signal handling, the spec's cwd, env and argv (PATH
 * lookup as execvp does, but in the request's PATH). When it cannot exec it
 * writes "sandbox-agent: ..." to its stderr and exits as a shell would: 127
 * when the program is not found, 126 when it cannot be run (not executable,
 * bad format, or the cwd is unusable). The parent learns that only from the
 * exit status, so it never waits on the child.
 *
 * This module owns the fork/exec step only: no event loop, no reaping (the
 * caller registers the pid in children.c before returning to the loop). The
 * child path does no allocation, so it can move to vfork/clone(CLONE_VM) and
 * take user, rlimits, seccomp and PTY steps later without a rewrite. */
#ifndef AGENT_SPAWN_H
#define AGENT_SPAWN_H

#include <sys/types.h>

#include "sbx/err.h"
#include "exec_spec.h"

typedef struct agent_spawn_fds {
	int in;  /* becomes fd 0 in the child */
	int out; /* fd 1 */
	int err; /* fd 2 */
} agent_spawn_fds;

/* Exit codes of a child that could not exec, as sh uses them. */
#define AGENT_SPAWN_EXIT_NOT_FOUND 127
#define AGENT_SPAWN_EXIT_CANNOT_RUN 126

/* Raise the agent's own open-file limit to the hard limit (each running
 * command holds up to three pipe ends here); children get the original
 * soft limit back, so they run with what the sandbox was configured with. */
int agent_spawn_raise_nofile(sbx_err *err);

/* Fork and exec spec. *pid is the child, leader of its own process group
 * (pgid == pid). Fails only when fork itself fails. */
int agent_spawn(const agent_exec_spec *spec, const agent_spawn_fds *fds, pid_t *pid, sbx_err *err);

#endif
