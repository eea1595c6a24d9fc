/* JSON-RPC 2.0 as MCP uses it: one message per HTTP body or per line.
 *
 * Parses a message with jansson and checks its shape (MCP 2025-06-18 and
 * 2025-11-25: one object, "jsonrpc": "2.0", ids strings or integers and
 * never null in requests, no batches), sorts it into request, notification
 * or response, and builds the error bodies the transport answers with. Also
 * the line splitter for a stdio server's output as it arrives from the
 * agent: bounded, since nothing from a guest is trusted.
 * No I/O, no HTTP, no sessions. */
#ifndef MCP_HOST_RPC_H
#define MCP_HOST_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "sbx/err.h"

/* JSON-RPC's error codes. */
#define MCP_RPC_PARSE_ERROR (-32700)
#define MCP_RPC_INVALID_REQUEST (-32600)
#define MCP_RPC_METHOD_NOT_FOUND (-32601)
#define MCP_RPC_INVALID_PARAMS (-32602)
#define MCP_RPC_INTERNAL_ERROR (-32603)

typedef enum mcp_rpc_kind {
	MCP_RPC_REQUEST = 1,  /* method and id: an answer is owed */
	MCP_RPC_NOTIFICATION, /* method, no id */
	MCP_RPC_RESPONSE,     /* id and result */
	MCP_RPC_ERROR,        /* id (maybe null) and error */
} mcp_rpc_kind;

typedef struct mcp_rpc_msg {
	mcp_rpc_kind kind;
	json_t *root;       /* owned */
	const char *method; /* requests and notifications; borrowed from root */
	const json_t *id;   /* requests and responses; borrowed (json null for
			     * an error response to an unreadable request) */
} mcp_rpc_msg;

/* Parse one message of len bytes. On failure *rpc_code is the JSON-RPC
 * code to answer with (parse error, invalid request, or invalid params for
 * "params" not an object), err says why, and
 * -EINVAL (or -ENOMEM) is returned; *out is then empty. */
int mcp_rpc_parse(const char *buf, size_t len, mcp_rpc_msg *out, int *rpc_code, sbx_err *err);
void mcp_rpc_msg_free(mcp_rpc_msg *m);

/* The MCP revisions this host serves (Streamable HTTP): 2025-06-18 and
 * 2025-11-25. The newest is what it offers a client that asks for another. */
#define MCP_RPC_VERSION_LATEST "2025-11-25"
bool mcp_rpc_version_supported(const char *v);

/* An initialize request, with its params.protocolVersion (NULL if none). */
bool mcp_rpc_is_initialize(const mcp_rpc_msg *m, const char **version);

/* {"jsonrpc":"2.0","id":<id or null>,"error":{"code":code,"message":msg}}
 * as one line without newline, malloc'ed (NULL when out of memory). */
char *mcp_rpc_error_body(const json_t *id, int code, const char *msg, size_t *len);

/* The id as a short key ("s:" + string or "n:" + integer) for tables of
 * pending requests; -ENAMETOOLONG when it does not fit cap. */
int mcp_rpc_id_key(const json_t *id, char *buf, size_t cap);

/* Newline-delimited messages as they arrive in pieces. The line being
 * assembled is bounded by max_line (bytes without the newline). */
typedef struct mcp_rpc_lines {
	char *buf;
	size_t len, cap, max_line;
} mcp_rpc_lines;

void mcp_rpc_lines_init(mcp_rpc_lines *l, size_t max_line);
void mcp_rpc_lines_free(mcp_rpc_lines *l);
/* Feed n bytes; cb gets each whole line (without '\n', never empty or
 * blank) and may stop the feed by returning < 0 (returned as is). A line
 * over max_line is -EMSGSIZE (the splitter is then unusable until reset). */
typedef int (*mcp_rpc_line_cb)(const char *line, size_t len, void *ud);
int mcp_rpc_lines_feed(mcp_rpc_lines *l, const char *p, size_t n, mcp_rpc_line_cb cb, void *ud, sbx_err *err);
/* Bytes of an unfinished line held. */
size_t mcp_rpc_lines_pending(const mcp_rpc_lines *l);

#endif
