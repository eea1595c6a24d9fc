/* The agent's MCP servers (mcp.* in PROTOCOL.md), typed on top of agent
 * calls (sup_agent.h), as sup_agent_exec.c types exec.
 *
 * configure / remove / list answer once, with the statuses checked by the
 * protocol library (a guest's answer of the wrong shape blames the agent).
 * A session (mcp.open) is a stream: the first thing the agent sends must be
 * the event naming the server's process, then whole lines on stdout, which
 * are cut here again (bounded: the guest is not trusted to have done so) and
 * handed on one message at a time. Credit for them goes back once every
 * line of a frame was handed on, unless the owner paused the session (a
 * slow client): then the server blocks on write, and nothing piles up here.
 * Messages towards the server go one at a time, with their newline, within
 * the agent's credit. Deadlines: configure/remove/list owe an answer (the
 * idle deadline); a session may rightly be quiet for long (the agent ends
 * it after its idle_ms; the liveness ping watches the agent).
 * It must not know about HTTP, sessions' ids or the pools. */
#ifndef SUP_AGENT_MCP_H
#define SUP_AGENT_MCP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sbx/proto_mcp.h"
#include "sup_agent.h"
#include "sup_types.h"

/* The answer of configure (one status), list (n statuses) or remove (none).
 * rc < 0 with err as for any call (-ENOENT no such server, -EINVAL refused,
 * -ENOSPC too many servers, -EPROTO the agent broke the protocol). */
typedef void (*sup_agent_mcp_cb)(int rc, const sbx_proto_mcp_status *st, size_t n, const sbx_err *err,
				 void *ud);

int sup_agent_mcp_configure(sup_agent *a, const sup_mcp_server *s, sup_agent_mcp_cb cb, void *ud,
			    sup_agent_call **out, sbx_err *err);
int sup_agent_mcp_remove(sup_agent *a, const char *name, sup_agent_mcp_cb cb, void *ud, sup_agent_call **out,
			 sbx_err *err);
int sup_agent_mcp_list(sup_agent *a, sup_agent_mcp_cb cb, void *ud, sup_agent_call **out, sbx_err *err);

typedef struct sup_mcp_session sup_mcp_session;

typedef struct sup_mcp_session_cbs {
	/* The server's process runs (spare: it was started ahead). */
	void (*on_opened)(sup_mcp_session *s, int64_t pid, bool spare, void *ud);
	/* One message from the server: a line without its newline. */
	void (*on_message)(sup_mcp_session *s, const char *msg, size_t len, void *ud);
	/* The message given to sup_agent_mcp_send went; another may. Optional. */
	void (*on_writable)(sup_mcp_session *s, void *ud);
	/* Exactly once unless cancelled: rc 0 with st (the server exited after
	 * sup_agent_mcp_close); else err: -EPIPE the server crashed (its last
	 * stderr lines in the message), -EBADMSG / -E2BIG it wrote a line that
	 * is not JSON / too long, -ETIMEDOUT the agent's idle limit, -ENOENT
	 * no such server (or removed), -EAGAIN too many sessions, -EPROTO the
	 * agent broke the protocol, -ECONNRESET/-ECONNABORTED the connection.
	 * The session is freed after return. */
	void (*on_done)(sup_mcp_session *s, int rc, const sup_exec_status *st, const sbx_err *err, void *ud);
} sup_mcp_session_cbs;

/* Open a session on server name; idle_ms is the agent's idle limit (0:
 * none), max_line the longest message accepted from the agent (0: the
 * protocol's maximum). */
int sup_agent_mcp_open(sup_agent *a, const char *name, uint64_t idle_ms, size_t max_line,
		       const sup_mcp_session_cbs *cbs, void *ud, sup_mcp_session **out, sbx_err *err);
/* Send one message (len bytes, no newline in it; its newline is added):
 * -EBUSY while the last one has not gone yet (on_writable says when),
 * -EINVAL with a newline or after close, -EPIPE when the stream is gone. */
int sup_agent_mcp_send(sup_mcp_session *s, const char *msg, size_t len, sbx_err *err);
/* Hold the server's messages back (the reader is slow) / let them come. */
void sup_agent_mcp_pause(sup_mcp_session *s);
void sup_agent_mcp_resume(sup_mcp_session *s);
/* End the session's input once the pending message went: the server
 * exits and on_done reports it. */
void sup_agent_mcp_close(sup_mcp_session *s);
/* Abandon the session: the agent kills the server's tree; no callback
 * runs any more and s is freed (also from inside one of its callbacks but
 * on_done). */
void sup_agent_mcp_cancel(sup_mcp_session *s);

/* The args map of mcp.configure for s (exposed for unit tests). */
int sup_agent_mcp_encode_config(const sup_mcp_server *s, msgpack_sbuffer *sb, sbx_err *err);

#endif
