/* The exec operation's arguments (PROTOCOL.md "exec"; proc.start takes
 * them too): their keys and types written once. The requester fills
 * sbx_proto_exec_args and encodes it; the agent decodes the map into a
 * view of typed msgpack objects. Owns no memory (the args point at the
 * caller's strings, the view into the frame). It must not judge values
 * beyond their types: bounds and meaning are the agent's. */
#ifndef SBX_PROTO_EXEC_H
#define SBX_PROTO_EXEC_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sbx/proto_args.h"

/* Resource limits an exec may set (soft = hard), in this order. */
enum { SBX_RLIMIT_NOFILE, SBX_RLIMIT_NPROC, SBX_RLIMIT_FSIZE, SBX_RLIMIT_CPU, SBX_RLIMITS };
extern const char *const sbx_proto_rlimit_names[SBX_RLIMITS]; /* "nofile", ... */

typedef struct sbx_proto_rlimit {
	bool set;
	bool unlimited;
	uint64_t value;
} sbx_proto_rlimit;

typedef struct sbx_proto_kv {
	char *key;
	char *val;
} sbx_proto_kv;

typedef struct sbx_proto_env {
	sbx_proto_kv *v;
	size_t n;
} sbx_proto_env;

typedef struct sbx_proto_exec_args {
	char **argv;           /* NULL-terminated; exactly one of argv and cmd */
	size_t argc;
	char *cmd;             /* run as /bin/sh -c cmd */
	sbx_proto_env env;     /* over the sandbox's env, key by key */
	char *cwd;             /* NULL: the agent's default */
	uint64_t timeout_ms;   /* 0: none */
	bool stdin_pipe;       /* the requester sends stdin (else /dev/null) */
	char *user;            /* NULL: the sandbox user */
	bool allow_root;       /* the requester's policy lets it be uid 0 */
	sbx_proto_rlimit rlimits[SBX_RLIMITS];
	bool pty;              /* a terminal of cols x rows (0: the agent's default) */
	uint16_t cols, rows;
} sbx_proto_exec_args;

/* Append exec's pairs to a; base (NULL: none) under x->env. */
void sbx_proto_exec_encode(const sbx_proto_exec_args *x, const sbx_proto_env *base,
			   sbx_proto_args *a);

typedef struct sbx_proto_exec_view {
	const msgpack_object *argv;  /* an array, or NULL */
	const msgpack_object *cmd;   /* a str, or NULL; and so on */
	const msgpack_object *env;   /* a map */
	const msgpack_object *cwd;
	const msgpack_object *user;
	const msgpack_object *pty;   /* a map: "cols", "rows" */
	uint64_t timeout_ms;
	bool stdin_pipe;
	bool allow_root;
	sbx_proto_rlimit rlimits[SBX_RLIMITS];
} sbx_proto_exec_view;

/* args (a map, or NIL) into v: -EINVAL with err for a key of the wrong
 * type, an unknown or repeated rlimit. Absent and nil mean "not given". */
int sbx_proto_exec_decode(const msgpack_object *args, sbx_proto_exec_view *v, sbx_err *err);

#endif
