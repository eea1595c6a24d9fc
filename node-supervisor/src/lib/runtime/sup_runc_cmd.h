/* Running the OCI runtime binary (runc, crun standing in, or gVisor's runsc):
 * how each is called (sup_runtime: the binary and the global flags before
 * every verb) and running one call: an explicit argv, never a shell; /dev/null as stdin; default signal dispositions, an
 * empty signal mask and a session of its own (so neither the supervisor's
 * ignored/blocked signals nor its terminal's ^C reach the runtime or the
 * containers it starts); bounded in time and in how much output is kept.
 * Owns no state; it must not interpret what the runtime says. */
#ifndef SUP_RUNC_CMD_H
#define SUP_RUNC_CMD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "sbx/err.h"

/* One runtime's calling convention. runc and runsc take the same verbs in
 * their long forms (list --quiet, run --detach --pid-file --bundle, kill,
 * delete --force): what differs is in the global flags made from this. */
typedef struct sup_runtime {
	const char *binary;   /* looked up in PATH without '/'; NULL: not offered */
	const char *root;     /* --root, the runtime's state folder; NULL: its default */
	const char *platform; /* runsc --platform (ptrace, kvm); NULL: not runsc */
	const char *network;  /* runsc --network; NULL: none (loopback only, as
			       * runc's empty network namespace) */
} sup_runtime;

/* Room for the binary, the global flags, a verb's arguments and the NULL. */
#define SUP_RUNTIME_ARGV_MAX 32

/* argv of `<binary> <global flags> <args...>` (args NULL-terminated) into
 * argv[SUP_RUNTIME_ARGV_MAX]. With a platform (runsc): --platform, --network,
 * --host-uds create (the agent's socket, bound inside on the run folder's
 * bind mount, is made on the host, where the supervisor connects; nothing
 * inside may connect to a host socket) and --oci-seccomp (the bundle's
 * container-level filter applied inside, as runc applies it). log: --log
 * (NULL: none). Returns 0, or -E2BIG when it does not fit. */
int sup_runtime_argv(const sup_runtime *rt, const char *log, const char *const *args,
		     const char **argv);

typedef struct sup_runc_cmd {
	const char *const *argv; /* argv[0] is the runtime (looked up in PATH
				  * when it has no '/'); NULL-terminated */
	int stdout_fd;           /* where stdout goes; -1: captured into out */
	int stderr_fd;           /* where stderr goes; -1: captured into errout */
	char *out;               /* captured stdout, NUL-terminated, may be NULL */
	size_t out_cap;
	char *errout;            /* captured stderr on one line, may be NULL */
	size_t errout_cap;
	unsigned timeout_ms;     /* killed (SIGKILL) after this; 0: 30 s */
	const atomic_bool *cancel; /* NULL, or killed (-ECANCELED) within 0.1 s of its setting */
} sup_runc_cmd;

/* Run it and wait. Returns its exit status (0-255), or a negative errno when
 * it could not be started, was killed by a signal, timed out, or wrote more
 * stdout than out_cap - 1 (-E2BIG; out then holds the beginning). */
int sup_runc_cmd_run(sup_runc_cmd *c, sbx_err *err);

#endif
