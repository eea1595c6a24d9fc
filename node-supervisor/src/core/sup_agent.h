/* Agent client: one protocol connection (sbx_proto_conn, client side) to a
 * sandbox's agent socket, and the operations the supervisor runs over it.
 * Owns the connection, the handshake deadline, one call object per
 * request in flight, and distrust of the guest: a deadline on every call,
 * the liveness ping, the frame deadline, limits on what one agent may hold
 * of ours, and the translation of every guest fault into an agent error
 * (never a client's 4xx). Everything the agent sends is untrusted: results
 * are type- and range-checked here before anyone else sees them.
 * It must not know about HTTP, pools or the registry; all of its callbacks
 * run on the event-loop thread.
 *
 * Streaming: stdout/stderr bytes reach the caller through on_data with a
 * `cost`; the caller gives the cost back with sup_agent_exec_consumed()
 * once it has passed the bytes on. Until then the agent holds back (its
 * credit is spent), so a slow consumer blocks the command, never our
 * memory. A caller that buffers consumes at once.
 *
 * Deadlines (the supervisor's, whatever the agent promises):
 * - a call with its own timeout (exec's) must end within it plus grace_ms;
 * - any other call that waits for an answer must see a frame of its stream
 *   at least every idle_ms;
 * - neither clock runs while the caller holds cost it has not given back
 *   (a client reading slowly is not the agent's fault), nor, for a call
 *   that streams input first, while that input waits for the client;
 *   but past its timeout plus grace a call may bring SUP_AGENT_LATE_BYTES
 *   more at most (what an agent that stopped the command at its timeout
 *   can still hold), so a flood within credit meets its deadline too;
 * - a call that passes its deadline ends with -ETIME (the stream is
 *   cancelled on the agent); the connection goes on;
 * - a connection quiet for ping_after_ms is pinged; nothing at all from
 *   the agent for ping_timeout_ms before the answer (a busy agent answers
 *   what we queued before the ping first), or a frame not whole frame_ms
 *   after its first byte, and the connection is lost (on_lost), as on any
 *   protocol violation. */
#ifndef SUP_AGENT_H
#define SUP_AGENT_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#include "sbx/err.h"
#include "sbx/proto.h"
#include "sbx/proto_args.h"
#include "sup_types.h"

struct event_base;
struct evbuffer;
/* What the agent may send on one stream before the supervisor credits it
 * back: 1 MiB (as the agent grants for uploads), which cuts the wake-ups
 * per GiB of a download (GET /files, the port proxy) about threefold
 * against the library's 256 KiB. The HTTP edge counts it in its
 * per-connection budget (sup_http_cfg.credit_window), so a stalled client
 * still holds at most one window of the agent's bytes here. */
#define SUP_AGENT_RECV_WINDOW (1u << 20)
/* What an agent may still send on a call past its timeout plus grace:
 * what it held when it stopped the command (the sandbox-agent's stdout
 * and stderr pipes of 1 MiB each) and a window on its way, with room to
 * spare. */
#define SUP_AGENT_LATE_BYTES (4u * SUP_AGENT_RECV_WINDOW)

typedef struct sup_agent sup_agent;
typedef struct sup_exec_call sup_exec_call;

/* What one agent holds of ours now (for the sandbox's view). */
typedef struct sup_agent_stats {
	unsigned streams; /* our calls open on the connection, cancelled ones included */
	unsigned waiting; /* of them, calls a caller still waits on */
	size_t queued;    /* bytes queued towards the agent */
} sup_agent_stats;

typedef struct sup_agent_cbs {
	/* Handshake done; requests may be sent. */
	void (*on_ready)(sup_agent *a, void *ud);
	/* The connection is over (or the handshake failed or timed out, the
	 * agent broke the protocol or missed a ping). why->code is -EPROTO for
	 * what the agent did wrong, -ECONNRESET when it went away. Calls in
	 * flight have already had their on_done. The owner frees the agent
	 * (it may do so inside this call). */
	void (*on_lost)(sup_agent *a, const sbx_err *why, void *ud);
} sup_agent_cbs;

/* Connect to the agent and start the handshake. address: a unix socket's
 * path (or unix:PATH), vsock:CID:PORT or hvsock:PATH:PORT (sup_agent_dial.h);
 * a bad address or a connect that fails at once is an error here, a vsock
 * or hybrid vsock connect that fails later is on_lost (-ECONNRESET), and
 * the handshake deadline covers the connect and the hello together. name
 * (the sandbox's id) is for logs. */
int sup_agent_connect(struct event_base *base, const char *address, const char *name,
		      unsigned handshake_timeout_ms, const sup_agent_opts *opts,
		      const sup_agent_cbs *cbs, void *ud, sup_agent **out, sbx_err *err);
/* The same over a connected stream socket (taken). */
int sup_agent_open(struct event_base *base, int fd, const char *name,
		   unsigned handshake_timeout_ms, const sup_agent_opts *opts,
		   const sup_agent_cbs *cbs, void *ud, sup_agent **out, sbx_err *err);
/* Close the connection. Calls still in flight get on_done(-ECONNABORTED).
 * No agent callback runs after this returns. */
void sup_agent_free(sup_agent *a);
/* Peer's software name from its hello (for logs); "" before ready. */
const char *sup_agent_peer(const sup_agent *a);
/* The connection is over (lost or freed): a call failing now fails with
 * it, and on_lost follows unless the owner freed it. */
bool sup_agent_gone(const sup_agent *a);
void sup_agent_stats_get(const sup_agent *a, sup_agent_stats *st);

/* Every connection's figures since start, for /metrics. */
typedef struct sup_agent_totals {
	uint64_t bytes_from; /* data bytes the agents sent (command output, files read) */
	uint64_t bytes_to;   /* data bytes sent to the agents (stdin, uploads) */
	uint64_t timeouts;   /* calls the agents let pass their deadline */
	uint64_t faults;     /* connections dropped for what the agent did (-EPROTO) */
} sup_agent_totals;
void sup_agent_totals_get(sup_agent_totals *t);
/* The agent's processes are frozen (held, a paused sandbox) or thawed:
 * while held no deadline runs (no call's, no ping, no frame deadline) and
 * no ping is sent, so a paused sandbox is not taken for dead; thawed,
 * each clock starts again with what was left of it. */
void sup_agent_hold(sup_agent *a, bool held);
/* The guest broke a promise above the framing (an answer of the wrong
 * shape, bytes it did not announce): the connection is dropped on the next
 * turn of the loop, so on_lost reports why (-EPROTO) and every call in
 * flight ends as an agent error. Safe inside any callback. */
void sup_agent_blame(sup_agent *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- generic request streams (any operation) ---- */

typedef struct sup_agent_call sup_agent_call;

/* How a call waits on the agent, for its deadline. */
typedef enum sup_agent_wait {
	SUP_AGENT_WAIT_ANSWER = 0, /* an answer is due: idle_ms between frames */
	SUP_AGENT_WAIT_SENDS,      /* the caller streams input first (upload, stdin): the
				    * idle clock runs only while a send waits for the
				    * agent's credit, and after the input's eof */
	SUP_AGENT_WAIT_QUIET,      /* may rightly be silent for long (a watch, followed
				    * output, a command without timeout): no call
				    * deadline; the ping watches the agent */
} sup_agent_wait;

typedef struct sup_agent_call_cbs {
	/* DATA bytes on a channel (name not NUL-terminated). Give the cost back
	 * with sup_agent_call_consumed() once the bytes are passed on. */
	void (*on_data)(sup_agent_call *call, const char *ch, size_t ch_len, const uint8_t *p,
			size_t n, size_t cost, void *ud);
	/* Send credit grew (or the socket drained): a sender waiting may go on.
	 * Optional. */
	void (*on_writable)(sup_agent_call *call, void *ud);
	/* EVENT with its map. Optional: without it the cost is given back at once. */
	void (*on_event)(sup_agent_call *call, const msgpack_object *map, size_t cost, void *ud);
	/* Exactly once, unless cancelled first: rc 0 with the END result map,
	 * or rc < 0 with err (mapping as for exec below; -ETIME: the call's
	 * deadline passed, the stream was cancelled). The call is invalid
	 * after return. */
	void (*on_done)(sup_agent_call *call, int rc, const msgpack_object *result,
			const sbx_err *err, void *ud);
} sup_agent_call_cbs;

/* Open a stream: op with args (an encoded msgpack map, or NULL/0).
 * timeout_ms: the operation's own timeout (the call's deadline is that
 * plus grace_ms), 0 for none (the deadline follows wait). -EAGAIN when
 * the agent already holds max_streams / max_waiting calls or max_queued
 * bytes of ours. */
int sup_agent_call_start(sup_agent *a, const char *op, const void *args, size_t args_len,
			 sup_agent_wait wait, uint64_t timeout_ms, const sup_agent_call_cbs *cbs,
			 void *ud, sup_agent_call **out, sbx_err *err);
void sup_agent_call_consumed(sup_agent_call *call, size_t cost);
/* Inside on_data: append p[0..n) (a part of the bytes it was given) to
 * dst, by reference to the agent's frame where the frame allows it
 * (sbx_proto_conn_add_data), else copied. -ENOMEM. */
int sup_agent_call_add_data(sup_agent_call *call, const uint8_t *p, size_t n,
			    struct evbuffer *dst);
/* Send bytes on channel ch towards the agent, as many as its credit and
 * the socket's room allow: returns how many went (0: none fit, on_writable
 * says when to try again), or < 0 when the stream is gone. eof goes with
 * the last byte (alone when n is 0), only once all n went. */
int sup_agent_call_send(sup_agent_call *call, const char *ch, const uint8_t *p, size_t n,
			bool eof, sbx_err *err);
/* The same for the first n bytes of src, moved (not copied) into the
 * frame as far as they fit; never eof (send that with sup_agent_call_send). */
int sup_agent_call_send_from(sup_agent_call *call, const char *ch, struct evbuffer *src, size_t n,
			     sbx_err *err);
/* Abandon the stream (CANCEL); no callback of this call runs any more. */
void sup_agent_call_cancel(sup_agent_call *call);
/* The agent a call runs on (to blame it). */
sup_agent *sup_agent_call_agent(const sup_agent_call *call);

/* ---- exec, typed on top of a call (sup_agent_exec.c) ---- */

/* The output stream a data frame's channel names; 0 for another channel. */
sup_chan sup_agent_chan(const char *ch, size_t ch_len);

typedef struct sup_exec_cbs {
	void (*on_data)(sup_exec_call *call, sup_chan ch, const uint8_t *p, size_t n, size_t cost,
			void *ud);
	/* Exactly once, unless the call was cancelled first. rc 0: st is valid.
	 * rc < 0: err says why (-EINVAL the agent refused the request, -EPROTO
	 * it broke the protocol, -ECONNRESET/-ECONNABORTED the connection went,
	 * -EAGAIN too many requests in flight, -ETIME the supervisor's
	 * deadline passed: then, for a command with a timeout, st is the
	 * timed-out status (signal 9, timed_out, kill_unconfirmed), else NULL).
	 * The call is freed after return. */
	void (*on_done)(sup_exec_call *call, int rc, const sup_exec_status *st, const sbx_err *err,
			void *ud);
} sup_exec_cbs;

/* Start spec on the agent. base_env (the sandbox env) is merged under
 * spec->env. On success *out is the call, owned by the agent module; it
 * takes spec->stdin_data (the caller clears its pointer) and sends it
 * within the agent's credit, then EOF. */
int sup_agent_exec(sup_agent *a, const sup_exec_spec *spec, const sup_env *base_env,
		   const sup_exec_cbs *cbs, void *ud, sup_exec_call **out, sbx_err *err);
/* Give back the cost of bytes delivered by on_data. */
void sup_agent_exec_consumed(sup_exec_call *call, size_t cost);
/* Abandon the call: the agent kills the command; no callback of this call
 * runs any more. The handle is invalid after this. */
void sup_agent_exec_cancel(sup_exec_call *call);

/* The exec args' pairs into a (proc.start adds its own after them). */
int sup_agent_encode_exec_args(const sup_exec_spec *spec, const sup_env *base_env,
			       sbx_proto_args *a, sbx_err *err);
/* Validate an exec END result map from the agent (exposed for unit tests). */
int sup_agent_parse_exec_result(const msgpack_object *r, sup_exec_status *st, sbx_err *err);

#endif
