/* What to run: the exec request's arguments ("a" of an exec req, see
 * PROTOCOL.md) checked and turned into plain C data for spawn.c.
 *
 * Owns validation (types, exactly one of argv/cmd, bounds) so that a bad
 * request is refused with a clear message before anything is forked. It must
 * not fork, open files or look at the file system: a missing program or cwd
 * is the child's failure (127/126 on stderr), as in a shell.
 * Whether the user exists, and whether root is allowed, is the jail's
 * check (agent_jail_prepare, in spawn.c): it reads /etc/passwd. */
#ifndef AGENT_EXEC_SPEC_H
#define AGENT_EXEC_SPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <msgpack.h>

#include "sbx/err.h"
#include "agent_jail.h"

#define AGENT_EXEC_SHELL "/bin/sh"
#define AGENT_EXEC_DEFAULT_CWD "/workspace"
#define AGENT_EXEC_MAX_ARGS 65536u
#define AGENT_EXEC_MAX_ENV 65536u
#define AGENT_EXEC_MAX_USER 32u
/* The kernel's MAX_ARG_STRLEN (32 pages): execve refuses a longer argument
 * or environment string with E2BIG, so it is refused here, with a reason,
 * instead of as exit 126 from the child. */
#define AGENT_EXEC_MAX_ARG_LEN (32u * 4096u)
/* About 24 days: far beyond any sane command, small enough for a timeval. */
#define AGENT_EXEC_MAX_TIMEOUT_MS ((uint64_t)INT32_MAX)

typedef struct agent_exec_spec {
	char **argv;         /* NULL-terminated, owned; argv[0] is looked up in PATH without '/' */
	char **env_over;     /* the request's "K=V" strings, owned, NULL-terminated */
	char **envp;         /* base merged with env_over: borrowed strings, array owned */
	char *cwd;           /* owned; NULL: /workspace if it exists, else / */
	const char *path;    /* PATH to search (points into envp), NULL: the default */
	uint64_t timeout_ms; /* 0: none */
	bool stdin_pipe;     /* the requester streams stdin */
	bool shell;          /* from "cmd": argv is {sh, -c, cmd} */
	char *user;          /* owned; NULL: the sandbox user */
	bool allow_root;     /* the requester's policy lets this command be uid 0 */
	agent_jail_rlimit rlimits[AGENT_JAIL_RLIMIT_COUNT];
	bool pty;            /* a terminal of cols x rows instead of pipes */
	uint16_t cols, rows;
} agent_exec_spec;

/* Parse args (a msgpack map, or NIL) over base_env. -EINVAL with a message
 * for the requester on bad input, -ENOMEM. On failure *out is left empty. */
int agent_exec_spec_parse(const msgpack_object *args, char *const *base_env,
			  agent_exec_spec *out, sbx_err *err);
void agent_exec_spec_free(agent_exec_spec *s);
/* {"cols", "rows"} (pty of exec, ctl resize): absent keys keep *cols /
 * *rows; each must be 1..65535. -EINVAL with a message. */
int agent_exec_spec_parse_size(const msgpack_object *o, uint16_t *cols, uint16_t *rows, sbx_err *err);

#endif
