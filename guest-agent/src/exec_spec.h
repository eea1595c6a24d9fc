/* What to run: the exec request's arguments ("a" of an exec req, see
 * PROTOCOL.md) checked and turned into plain C data for spawn.c.
 *
 * Owns validation (types, exactly one of argv/cmd, bounds) so that a bad
 * request is refused with a clear message before anything is forked. It must
 * not fork, open files or look at the file system: a missing program or cwd
 * is the child's failure (127/126 on stderr), as in a shell.
 * Later fields (user, rlimits, pty, stdin data) are added here. */
#ifndef AGENT_EXEC_SPEC_H
#define AGENT_EXEC_SPEC_H

#include <stdbool.h>
#include <stdint.h>
#include <msgpack.h>

#include "sbx/err.h"

#define AGENT_EXEC_SHELL "/bin/sh"
#define AGENT_EXEC_DEFAULT_CWD "/workspace"
#define AGENT_EXEC_MAX_ARGS 65536u
#define AGENT_EXEC_MAX_ENV 65536u
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
} agent_exec_spec;

/* Parse args (a msgpack map, or NIL) over base_env. -EINVAL with a message
 * for the requester on bad input, -ENOMEM. On failure *out is left empty. */
int agent_exec_spec_parse(const msgpack_object *args, char *const *base_env,
			  agent_exec_spec *out, sbx_err *err);
void agent_exec_spec_free(agent_exec_spec *s);

#endif
