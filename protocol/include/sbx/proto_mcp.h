/* sbx wire protocol: the MCP server operations (PROTOCOL.md "MCP servers").
 *
 * Every key of the mcp.* arguments, events and results is spelled here and
 * nowhere else: the supervisor packs what the agent parses with these
 * functions, and the reverse. Parsers check types and bounds (the agent
 * trusts no argument, the supervisor no result) and borrow strings from the
 * decoded map. Which program a server runs (argv, env, cwd) is exec's
 * business: those keys are exec's and the agent checks them with exec's
 * parser. No I/O, no processes, no JSON. */
#ifndef SBX_PROTO_MCP_H
#define SBX_PROTO_MCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#include "sbx/err.h"

/* A server's name: 1..64 bytes of [A-Za-z0-9._-], not starting with '.'
 * (it becomes a URL path segment). */
#define SBX_MCP_NAME_MAX 64u
/* Longest line (one JSON-RPC message) a server may write. */
#define SBX_MCP_DEFAULT_MAX_LINE (4u << 20)
#define SBX_MCP_MIN_MAX_LINE 1024u
#define SBX_MCP_MAX_MAX_LINE (16u << 20)
/* A session without a message either way for this long is ended. */
#define SBX_MCP_DEFAULT_IDLE_MS 600000u
#define SBX_MCP_MAX_IDLE_MS 86400000u
/* The last stderr bytes reported for a server (whole lines). */
#define SBX_MCP_STDERR_TAIL 2048u
/* Servers one mcp.list may describe (the agent's own limit). */
#define SBX_MCP_MAX_SERVERS 32u

/* JSON-RPC ids the agent writes itself (the warm-up ping, PROTOCOL.md):
 * a requester must not send a request with such an id, since its answer
 * could be the one the agent drops. */
#define SBX_MCP_WARM_ID_PREFIX "sbx-agent-warmup-"

bool sbx_proto_mcp_name_ok(const char *s, size_t len);

/* mcp.configure's arguments (strings borrowed). */
typedef struct sbx_proto_mcp_config {
	const char *name;
	const char *const *argv; /* NULL-terminated, at least the program */
	const char *const *env;  /* "K=V", NULL-terminated; NULL: none */
	const char *cwd;         /* NULL: exec's default */
	uint64_t max_line;       /* 0: SBX_MCP_DEFAULT_MAX_LINE */
} sbx_proto_mcp_config;

/* Pack c as one map. -EINVAL with a message for a bad name, max_line or an
 * env string without '='. */
int sbx_proto_mcp_pack_config(msgpack_packer *pk, const sbx_proto_mcp_config *c, sbx_err *err);
/* Check mcp.configure's arguments: a map of only name, argv, env, cwd and
 * max_line (anything else, e.g. exec's user or pty, is refused: a server
 * runs as the sandbox user on pipes); name valid; max_line in range
 * (absent: the default). argv/env/cwd are left to exec's parser. */
int sbx_proto_mcp_parse_config(const msgpack_object *a, const char **name, size_t *name_len,
			       uint64_t *max_line, sbx_err *err);

/* mcp.open: {name, idle_ms}; idle_ms 0 means none. mcp.remove: {name}. */
void sbx_proto_mcp_pack_open(msgpack_packer *pk, const char *name, uint64_t idle_ms);
int sbx_proto_mcp_parse_open(const msgpack_object *a, const char **name, size_t *name_len,
			     uint64_t *idle_ms, sbx_err *err);
void sbx_proto_mcp_pack_name(msgpack_packer *pk, const char *name);
int sbx_proto_mcp_parse_name(const msgpack_object *a, const char **name, size_t *name_len, sbx_err *err);

/* mcp.open's first event: the session's process is bound to the stream. */
void sbx_proto_mcp_pack_opened(msgpack_packer *pk, int64_t pid, bool spare);
int sbx_proto_mcp_parse_opened(const msgpack_object *ev, int64_t *pid, bool *spare, sbx_err *err);

typedef enum sbx_proto_mcp_state {
	SBX_MCP_STARTING = 0, /* the spare process is being started */
	SBX_MCP_READY,        /* a spare process runs, waiting for a session */
	SBX_MCP_CRASHED,      /* the last process ended on its own; restart pending */
	SBX_MCP_WARMING,      /* a spare runs; its warm-up ping is not answered yet */
} sbx_proto_mcp_state;

const char *sbx_proto_mcp_state_name(sbx_proto_mcp_state s);

/* One server of mcp.list (and mcp.configure's result). */
typedef struct sbx_proto_mcp_status {
	char name[SBX_MCP_NAME_MAX + 1];
	sbx_proto_mcp_state state;
	uint64_t max_line;
	int64_t spare_pid;     /* 0: no spare running */
	uint64_t sessions;     /* open now */
	uint64_t opened;       /* sessions opened in all */
	uint64_t started;      /* processes started in all (spares included) */
	uint64_t crashes;      /* processes that ended on their own */
	uint64_t bad_output;   /* sessions failed for a bad or too long line */
	uint64_t msgs_in;      /* lines the requesters sent */
	uint64_t msgs_out;     /* lines the servers wrote */
	bool has_exit;         /* the last crash's status */
	int64_t exit_code;     /* -1: none (killed by signal) */
	int64_t exit_signal;   /* 0: none */
	char stderr_tail[SBX_MCP_STDERR_TAIL + 1]; /* its last stderr lines */
} sbx_proto_mcp_status;

void sbx_proto_mcp_pack_status(msgpack_packer *pk, const sbx_proto_mcp_status *st);
int sbx_proto_mcp_parse_status(const msgpack_object *m, sbx_proto_mcp_status *st, sbx_err *err);
/* mcp.list's result: {"servers": [status...]}. */
void sbx_proto_mcp_pack_list(msgpack_packer *pk, const sbx_proto_mcp_status *sts, size_t n);
/* *out is calloc'ed (free it), at most SBX_MCP_MAX_SERVERS entries. */
int sbx_proto_mcp_parse_list(const msgpack_object *r, sbx_proto_mcp_status **out, size_t *n, sbx_err *err);

#endif
