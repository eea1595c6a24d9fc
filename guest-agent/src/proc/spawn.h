/* Starting one command: jail, tree, fork, set up the child, exec.
 *
 * Before the fork the jail is prepared (user, rlimits, seccomp program:
 * agent_jail.h). The command is forked by its tree's holder (tree.h), which
 * reaps it and reports its end through exit_fn. The child gets its own process group, or with a terminal its own session with the
 * terminal as controlling tty, stdin, stdout and stderr (owned by the
 * command's user); otherwise the given fds as stdin/stdout/stderr. Every
 * other fd is closed on exec, signal handling is the default, then the jail
 * is entered (last before chdir and exec: the seccomp filter applies from
 * there), then the spec's cwd, env (HOME, USER, LOGNAME of the user under
 * the request's env) and argv (PATH lookup as execvp does, but in the
 * request's PATH). When it cannot exec it writes "sandbox-agent: ..." to its
 * stderr and exits as a shell would: 127 when the program is not found, 126
 * when it cannot be run (not executable, bad format, unusable cwd, a jail
 * step failed). The parent learns that only from the exit status, so it
 * never waits on the child.
 *
 * This module owns the fork/exec step only: no reaping, no stdio. The
 * child path does no allocation. */
#ifndef AGENT_SPAWN_H
#define AGENT_SPAWN_H

#include <sys/types.h>

#include "sbx/err.h"
#include "exec_spec.h"
#include "tree.h"

typedef struct agent_spawn_fds {
	int in;  /* becomes fd 0 in the child */
	int out; /* fd 1 */
	int err; /* fd 2 */
	int tty; /* >= 0: a terminal's slave, taken for all three instead */
} agent_spawn_fds;

/* Exit codes of a child that could not exec, as sh uses them. */
#define AGENT_SPAWN_EXIT_NOT_FOUND 127
#define AGENT_SPAWN_EXIT_CANNOT_RUN 126

/* The nice value commands start with; the agent and its holders keep 0.
 * Within the sandbox's cgroup (its CPU limit), a command that saturates
 * the CPU, or a fork bomb's hundreds, then still leaves the agent its turn
 * as soon as it wakes: timeouts, kills and answers are not queued behind
 * them. Across sandboxes nice means nothing (each cgroup has its share). A
 * command may go up from here, never below without CAP_SYS_NICE. */
#define AGENT_SPAWN_NICE 10

/* Raise the agent's own open-file limit to the hard limit (each running
 * command holds up to three pipe ends here); children get the original
 * soft limit back, so they run with what the sandbox was configured with. */
int agent_spawn_raise_nofile(sbx_err *err);

/* Start spec; returns once the holder is forked. *tree is the command's
 * process tree (one reference for the caller); cbs(ud) get its pid (leader
 * of its own process group, or session with a tty) and its end. Fails with
 * the jail's error (-EPERM: root not allowed or a hard limit too high,
 * -ENOENT: no such user, -EINVAL: a bad user name or limits; -EIO: the
 * seccomp profile is broken) or when the holder cannot be made. */
int agent_spawn(struct event_base *base, const agent_exec_spec *spec, const agent_spawn_fds *fds,
		const agent_tree_cbs *cbs, void *ud, agent_tree **tree, sbx_err *err);

#endif
