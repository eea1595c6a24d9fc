/* Internal to sup_mcp*.c: one request's state, and the sessions' side
 * (sup_mcp_sess.c: per-sandbox tables, the agent sessions, the streams a
 * server's messages go out on) the routes (sup_mcp.c) call. Not for other
 * modules. */
#ifndef SUP_MCP_INT_H
#define SUP_MCP_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mcp_host/replay.h"
#include "mcp_host/rpc.h"
#include "mcp_host/session.h"
#include "mcp_host/transport.h"
#include "sbx/proto_mcp.h"
#include "sup_agent_mcp.h"
#include "sup_core_mcp.h"
#include "sup_mcp.h"
#include "sup_stream.h"

typedef struct mx_sess mx_sess;

typedef enum mq_what { MQ_POST = 1, MQ_GET, MQ_DELETE, MQ_PUT, MQ_LIST } mq_what;

/* One request of the family. */
typedef struct mq {
	sup_http_req *r;
	sup_mcp_ctx *x;
	mq_what what;
	char id[SUP_ID_MAX];
	char name[SBX_MCP_NAME_MAX + 1];
	/* the transport's headers */
	const char *sid;            /* Mcp-Session-Id, or NULL */
	const char *origin, *accept, *version, *last_event;
	/* POST */
	const char *body;
	size_t body_len;
	mcp_rpc_msg msg;
	bool msg_ok;
	int rpc_code;               /* a body that is not a message: its code */
	sbx_err rpc_err;
	mcp_tx_post kind;
	mcp_tx_reply reply;
	char key[MCP_SESSION_KEY_MAX];
	/* PUT, DELETE of a server, GET of the list: the agent's answer */
	sup_mcp_server server;
	struct mq_ticket *ticket;
	/* the session it belongs to, while linked */
	mx_sess *sess;
	struct mq *prev, *next;     /* in sess->sinks */
	struct mq *qnext;           /* in sess's queue of messages to send */
	bool sink, queued, sent;
	uint32_t stream;            /* the SSE stream it carries (0: GET) */
	sup_stream *s;              /* once the SSE head went */
	size_t owed;                /* cost of events the client has not read */
} mq;

/* The session (404 when none) of sandbox q->id named by q->sid, its
 * server q->name. */
mx_sess *sup_mcp_sess_find(mq *q);
/* A new session for an initialize: table entry, agent session. */
int sup_mcp_sess_open(mq *q, mx_sess **out, sbx_err *err);
const char *sup_mcp_sess_id(const mx_sess *m);
mcp_session *sup_mcp_sess_table_entry(const mx_sess *m);
/* End a session: its server's tree is killed, its streams end, pending
 * requests get a JSON-RPC error (why), and it is gone (404 from now). */
void sup_mcp_sess_end(mx_sess *m, const char *why);
/* End the sessions of server name in sandbox id (removed). */
void sup_mcp_sess_end_server(sup_mcp_ctx *x, const char *id, const char *name);
/* Sessions open of server name in sandbox id. */
unsigned sup_mcp_sess_count(sup_mcp_ctx *x, const char *id, const char *name);

/* q (a POST) takes its message to the session's server: now or after the
 * messages before it; a PASS is answered 202 once it went, a CALL becomes
 * the sink of its stream. */
int sup_mcp_sess_post(mx_sess *m, mq *q, sbx_err *err);
/* q (a GET) becomes the session's GET stream, or resumes the stream of
 * q->last_event from the replay buffer. Answers q itself (errors too). */
void sup_mcp_sess_get(mx_sess *m, mq *q);
/* The request is over (released): unlink q from its session. */
void sup_mcp_sess_unlink(mq *q);

/* /v1/mcp's sessions and tools are freed (sup_mcp_api.c). */
void sup_mcp_own_free(sup_mcp_ctx *x);

/* Answer r with data as application/json. */
void sup_mcp_reply_raw(sup_http_req *r, int status, const char *data, size_t len);
/* Answer r with a JSON-RPC error body (id: NULL for null). */
void sup_mcp_rpc_error(sup_http_req *r, const json_t *id, int status, int code, const char *msg);
/* Answer q with a JSON-RPC error body (id: the message's, or null). */
void sup_mcp_rpc_fail(mq *q, int status, int code, const char *msg);

#endif
