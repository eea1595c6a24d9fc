/* One client connection: the protocol connection (server side) and the
 * operations running on it.
 *
 * A session dispatches each REQ to its operation by name, routes the later
 * frames of a stream to the operation attached to it, passes credit on, and
 * when the connection ends aborts every operation still running (an exec's
 * process group is killed). Connection teardown is deferred to the loop so
 * an operation is never freed under its own call stack. This module owns
 * sessions; it must not run commands or interpret operation arguments. */
#ifndef AGENT_SESSION_H
#define AGENT_SESSION_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/err.h"
#include "sbx/proto_conn.h"
#include "agent.h"
#include "op.h"

/* Take over a connected socket (closed on failure). */
int agent_session_new(agent_ctx *ctx, int fd, sbx_err *err);

agent_ctx *agent_session_ctx(const agent_session *s);
sbx_proto_conn *agent_session_conn(const agent_session *s);

/* Route the stream op->id to op until detached. */
void agent_session_attach(agent_session *s, agent_op *op);
void agent_session_detach(agent_session *s, agent_op *op);

/* Capabilities the agent announces (hello and info). */
const char *const *agent_session_caps(size_t *n);

size_t agent_session_count(void);
/* Every answer went out (socket output buffers empty). */
bool agent_session_all_flushed(void);
/* Abort every operation and close every connection (shutdown). */
void agent_session_close_all(void);
/* Abort every operation of every connection but keep (reset): each
 * stream ends with an err frame of code and msg; connections stay. */
void agent_session_end_ops(const agent_op *keep, sbx_proto_code code, const char *msg);

#endif
