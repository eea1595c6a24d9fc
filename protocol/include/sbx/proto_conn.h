/* sbx wire protocol: one connection over a libevent bufferevent.
 *
 * Owns the handshake, stream bookkeeping (ids, open/closed, who opened),
 * per-stream credit in both directions, limits (frame size, streams in
 * flight) and connection-level errors. It hands every stream frame to the
 * owner through callbacks and never interprets operations: exec, files and
 * the rest live with the agent and the supervisor.
 *
 * Flow control: each side grants the other `window` bytes per stream and
 * direction at open (its hello says how much). DATA and EVENT frames charge
 * their body length against the sender's credit; a receiver returns credit
 * with sbx_proto_conn_consumed() once it has passed the bytes on. A frame
 * beyond the credit is a connection error (flow_control). So the bytes in
 * flight on a connection never exceed max_streams * window.
 *
 * Stream ids: the connecting side (client) opens odd ids, the accepting side
 * even ids. A stream closes when END or ERR is sent (responder) / received
 * (requester). Frames that arrive for a stream already closed are dropped
 * (they crossed an END on the wire); frames for ids never opened are a
 * protocol error. */
#ifndef SBX_PROTO_CONN_H
#define SBX_PROTO_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sbx/proto.h"

struct event_base;
struct evbuffer;
typedef struct sbx_proto_conn sbx_proto_conn;

typedef struct sbx_proto_conn_cbs {
	/* The peer's hello was accepted; requests may be sent from now on
	 * (requests sent before are queued until then). Optional. */
	void (*on_ready)(sbx_proto_conn *c, void *ud);
	/* A stream frame from the peer: REQ (a new stream the peer opened),
	 * DATA, EVENT, CTL, CANCEL, END, ERR (id != 0). The frame is valid only
	 * during the call. The callback may send frames and may call
	 * sbx_proto_conn_free(). */
	void (*on_frame)(sbx_proto_conn *c, const sbx_proto_frame *f, void *ud);
	/* Send credit grew on stream id (or the socket drained): a sender that
	 * stopped on -EAGAIN may go on. Optional. */
	void (*on_writable)(sbx_proto_conn *c, uint64_t id, void *ud);
	/* The connection is over: peer closed, I/O error, protocol violation
	 * (an ERR id 0 was sent or received). Called at most once. Open streams
	 * are gone; the owner frees the conn (also allowed inside the call). */
	void (*on_close)(sbx_proto_conn *c, const sbx_err *why, void *ud);
} sbx_proto_conn_cbs;

typedef struct sbx_proto_conn_opts {
	bool is_client;            /* true: we connected; we open odd ids */
	uint32_t max_frame;        /* largest body we accept; 0: default */
	uint32_t max_streams;      /* streams the peer may have open to us; 0: default */
	uint32_t window;           /* initial credit we grant per stream; 0: default */
	const char *const *caps;   /* capabilities we announce */
	size_t ncaps;
	const char *agent;         /* software name/version we announce */
	/* A frame whose first byte has come must be whole within this many
	 * ms, or the connection fails (protocol): a peer trickling a frame a
	 * byte at a time cannot hold it open. The clock does not run while we
	 * stopped reading ourselves (our output is full). 0: no limit. */
	uint32_t frame_timeout_ms;
} sbx_proto_conn_opts;

/* Takes ownership of fd (a connected stream socket), sends our hello. */
sbx_proto_conn *sbx_proto_conn_new(struct event_base *base, int fd,
				   const sbx_proto_conn_opts *opts,
				   const sbx_proto_conn_cbs *cbs, void *ud, sbx_err *err);
/* Closes the socket at once; no callback is called after this. */
void sbx_proto_conn_free(sbx_proto_conn *c);
/* Keep the allocator from returning frame-sized buffers to the kernel.
 * Frames of up to 1 MiB come and go as evbuffer chains; glibc serves each
 * chunk over its mmap threshold (128 KiB at first) with a fresh mapping
 * and trims the heap top once 128 KiB are free, so every 256 KiB frame
 * faulted in (and zeroed) 64 new pages: most of the agent's CPU per byte
 * of an upload. Call once at start in a process that runs connections;
 * the heap then keeps up to SBX_PROTO_HEAP_KEEP of freed memory. */
#define SBX_PROTO_HEAP_KEEP (16u << 20)
void sbx_proto_tune_allocator(void);

bool sbx_proto_conn_ready(const sbx_proto_conn *c);
/* The peer's hello, valid once ready: its capabilities and name. */
bool sbx_proto_conn_peer_has_cap(const sbx_proto_conn *c, const char *cap);
const char *sbx_proto_conn_peer_agent(const sbx_proto_conn *c);
uint32_t sbx_proto_conn_peer_max_frame(const sbx_proto_conn *c);
uint32_t sbx_proto_conn_peer_max_streams(const sbx_proto_conn *c);

/* Open a stream: REQ with op and args (a msgpack map already encoded, or
 * NULL/0 for none). Returns 0 and the new id in *id; -EBUSY when the peer's
 * max_streams are all open. */
int sbx_proto_conn_request(sbx_proto_conn *c, const char *op, const void *args,
			   size_t args_len, uint64_t *id, sbx_err *err);

/* Largest DATA payload that may be sent on id right now (credit and the
 * peer's frame size allowing); 0 when the sender must wait for on_writable. */
size_t sbx_proto_conn_data_room(const sbx_proto_conn *c, uint64_t id);
/* Send bytes on a channel. len must be <= data_room (else -EAGAIN, nothing
 * sent). eof with len 0 is always allowed. -ENOENT if id is not open. */
int sbx_proto_conn_send_data(sbx_proto_conn *c, uint64_t id, const char *ch,
			     const void *data, size_t len, bool eof, sbx_err *err);
/* The same without a copy through the caller: _data_begin reserves in the
 * connection's output a DATA frame (no eof) for up to max payload bytes on
 * ch (1 <= max <= data_room) and gives where they go (e.g. for read(2));
 * _data_commit sends the first n of them (0: nothing is sent). Nothing else
 * may be sent on the connection in between: that drops the reservation and
 * the commit fails with -ESTALE, sending nothing. */
int sbx_proto_conn_data_begin(sbx_proto_conn *c, uint64_t id, const char *ch, size_t max,
			      void **buf, sbx_err *err);
int sbx_proto_conn_data_commit(sbx_proto_conn *c, size_t n, sbx_err *err);
/* The same with the payload taken from src: its first n bytes (1 <= n <=
 * data_room, n <= what src holds) are moved into a DATA frame (no eof;
 * send that alone with send_data), whole evbuffer chains without a copy.
 * The bytes on the wire and the credit charged are send_data's. On any
 * error src keeps its bytes and nothing is sent. src must not be a
 * bufferevent's output (its front is frozen). */
int sbx_proto_conn_send_data_from(sbx_proto_conn *c, uint64_t id, const char *ch,
				  struct evbuffer *src, size_t n, sbx_err *err);
/* The same with the payload the next n bytes of a pipe (1 <= n <= data_room;
 * the pipe holds them all): spliced to the socket without a copy when
 * nothing else waits to be written, else copied into the output. Errors
 * before anything was sent leave the pipe as it was (-EAGAIN); one after
 * (the output cannot take the rest) shuts the connection down, whose
 * close then comes as for any broken connection. */
int sbx_proto_conn_data_splice(sbx_proto_conn *c, uint64_t id, const char *ch, int pipe_fd,
			       size_t n, sbx_err *err);
/* EVENT (args: encoded map), charged like data; -EAGAIN without credit. */
int sbx_proto_conn_send_event(sbx_proto_conn *c, uint64_t id, const void *map,
			      size_t map_len, sbx_err *err);
/* CTL on a stream we opened (signal, resize...): not charged. */
int sbx_proto_conn_send_ctl(sbx_proto_conn *c, uint64_t id, const void *map,
			    size_t map_len, sbx_err *err);
/* Requester: abandon a stream. The stream stays open until the peer's
 * END/ERR arrives, so its id is not reused while frames may still come;
 * DATA/EVENT arriving meanwhile are dropped, the END/ERR is delivered. */
int sbx_proto_conn_cancel(sbx_proto_conn *c, uint64_t id, sbx_err *err);
/* Responder: final frames; both close the stream. */
int sbx_proto_conn_end(sbx_proto_conn *c, uint64_t id, const void *result_map,
		       size_t map_len, sbx_err *err);
int sbx_proto_conn_fail(sbx_proto_conn *c, uint64_t id, sbx_proto_code code,
			const char *msg, sbx_err *err);

/* Append p[0..n) to dst, where p is (a part of) the payload of the DATA
 * frame on_frame is delivering, during that call: by reference when the
 * frame was large enough to be read into a buffer of its own (that buffer
 * then lives until dst, or whichever evbuffer the bytes move on to, lets
 * go of them), else copied. -ENOMEM. */
int sbx_proto_conn_add_data(sbx_proto_conn *c, const void *p, size_t n, struct evbuffer *dst);

/* Receiver: n bytes of DATA/EVENT body on id were passed on; return the
 * credit to the peer (batched: sent once half a window is owed). */
void sbx_proto_conn_consumed(sbx_proto_conn *c, uint64_t id, size_t n);

/* The peer is held still by someone else (its processes frozen): while
 * held, a frame it began is not late, whatever its age; released, the
 * frame deadline starts afresh. */
void sbx_proto_conn_peer_held(sbx_proto_conn *c, bool held);

/* A pointer the owner hangs on an open stream (NULL by default). */
void sbx_proto_conn_set_stream_data(sbx_proto_conn *c, uint64_t id, void *p);
void *sbx_proto_conn_stream_data(const sbx_proto_conn *c, uint64_t id);
size_t sbx_proto_conn_open_streams(const sbx_proto_conn *c);
/* Visit every open stream (e.g. in on_close, to release stream data). fn
 * must not open or close streams. */
void sbx_proto_conn_foreach_stream(const sbx_proto_conn *c,
				   void (*fn)(uint64_t id, void *stream_data, void *ud), void *ud);

/* Bytes queued in the socket's output buffer (for diagnostics and tests). */
size_t sbx_proto_conn_pending_output(const sbx_proto_conn *c);

#endif
