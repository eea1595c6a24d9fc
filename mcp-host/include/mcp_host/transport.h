/* MCP Streamable HTTP (revisions 2025-06-18 and 2025-11-25) as decisions
 * over plain strings and the session table: whether a request may go on
 * (Origin against an allowlist, Accept, MCP-Protocol-Version), what a POSTed
 * message asks of its session, and on which SSE stream a server's message
 * belongs. The caller (the supervisor's mcp route family) does every I/O:
 * this knows no sockets, no HTTP library and no agent. */
#ifndef MCP_HOST_TRANSPORT_H
#define MCP_HOST_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "mcp_host/rpc.h"
#include "mcp_host/session.h"

/* Transport-level refusals carry this JSON-RPC code, as MCP servers do. */
#define MCP_TX_ERROR (-32000)

/* An Origin header: none (not a browser) passes; otherwise it must equal
 * one entry of allow (comma-separated, case-insensitive; NULL or "": none),
 * else -EPERM: the DNS-rebinding protection the spec asks for. */
int mcp_tx_origin(const char *allow, const char *origin, sbx_err *err);

/* How a POSTed request is answered, from its Accept: SSE when the client
 * takes text/event-stream (server-to-client messages may then ride along
 * before the answer), JSON when it takes only application/json (or any
 * type); -ENOTSUP (406) when neither. */
typedef enum mcp_tx_reply { MCP_TX_JSON = 1, MCP_TX_SSE } mcp_tx_reply;
int mcp_tx_post_accept(const char *accept, mcp_tx_reply *out, sbx_err *err);
/* GET's Accept must take text/event-stream: 0, or -ENOTSUP. */
int mcp_tx_get_accept(const char *accept, sbx_err *err);

/* MCP-Protocol-Version after initialize: absent passes (the session's
 * version holds), else it must be a revision served (-EINVAL: 400). */
int mcp_tx_version(const char *hdr, sbx_err *err);

/* What a POSTed message asks, given whether it named a session. */
typedef enum mcp_tx_post {
	MCP_TX_INIT = 1,  /* initialize: a new session, answer owed */
	MCP_TX_CALL,      /* a request: answer owed on its stream */
	MCP_TX_PASS,      /* a notification or a response: 202 once sent */
	MCP_TX_CANCEL,    /* notifications/cancelled: PASS, and the request's
			   * stream ends (the server owes no answer now) */
} mcp_tx_post;
/* -EINVAL (400) for initialize inside a session or anything else without
 * one. *key (MCP_SESSION_KEY_MAX) is the id key of a request (INIT, CALL)
 * or of the request a CANCEL names ("" when it names none). */
int mcp_tx_post_kind(const mcp_rpc_msg *m, bool in_session, mcp_tx_post *kind, char *key, sbx_err *err);

/* Where a server's message goes. */
typedef enum mcp_tx_route {
	MCP_TX_STREAM = 1, /* an answer: on *stream, which then ends */
	MCP_TX_LATEST,     /* a request or notification of the server's: on
			    * the newest open POST stream, else the GET stream */
	MCP_TX_DROP,       /* an answer nobody waits for (cancelled, or never
			    * asked): dropped */
} mcp_tx_route;
/* Route one message (a line checked by the agent client) of session s; an
 * answer to initialize sets the session's version. -EINVAL: not JSON-RPC
 * (the caller drops it and counts). */
int mcp_tx_route_msg(mcp_session *s, const char *line, size_t len, mcp_tx_route *route, uint32_t *stream,
		     sbx_err *err);

/* The message as one line for a stdio server: the body itself when it has
 * no newline, else re-serialized compactly (JSON strings escape theirs).
 * *out is body or malloc'ed (*owned). -ENOMEM. */
int mcp_tx_line(const mcp_rpc_msg *m, const char *body, size_t len, const char **out, size_t *out_len,
		char **owned, sbx_err *err);

#endif
