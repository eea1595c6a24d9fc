/* Running the OCI runtime binary (runc, or crun standing in): an explicit
 * argv, never a shell; /dev/null as stdin; default signal dispositions, an
 * empty signal mask and a session of its own (so neither the supervisor's
 * ignored/blocked signals nor its terminal's ^C reach the runtime or the
 * containers it starts); bounded in time and in how much output is kept.
 * Owns no state; it must not interpret what the runtime says. */
#ifndef SUP_RUNC_CMD_H
#define SUP_RUNC_CMD_H

#include <stddef.h>

#include "sbx/err.h"

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
} sup_runc_cmd;

/* Run it and wait. Returns its exit status (0-255), or a negative errno when
 * it could not be started, was killed by a signal, timed out, or wrote more
 * stdout than out_cap - 1 (-E2BIG; out then holds the beginning). */
int sup_runc_cmd_run(sup_runc_cmd *c, sbx_err *err);

#endif
