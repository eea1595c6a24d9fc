/* sbx_proto_conn: lifecycle, handshake and the read path (see proto_conn.h).
 *
 * Re-entrancy: every libevent callback runs between enter() and leave(). An
 * owner's callback may call sbx_proto_conn_free(); that closes the socket at
 * once but leaves the struct to leave(), and every loop here checks
 * c->freed before touching the conn again.
 *
 * Writes: frames are written once the loop pass that made them is done,
 * in one writev (sbx/bev_flush.h); only what the socket does not take is
 * left to libevent's EV_WRITE. libevent's own way, an EV_WRITE armed for
 * each burst, cost two epoll_ctl and a loop pass more per message: a third
 * of the supervisor's syscalls on small MCP messages. */
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "proto_conn_int.h"
#include "sbx/bev_fill.h"
#include "sbx/bev_flush.h"

#define MIN_OUT_HIGH (256u * 1024u)
/* Bytes per read/write syscall and kernel socket buffer: libevent's default
 * of 16 KiB per syscall costs several reads per DATA frame and the default
 * socket buffer (about 200 KiB) a wake-up per few frames. Bounded: the
 * input still holds at most one frame beyond what was decoded (watermark)
 * and the output at most out_high. */
#define IO_CHUNK (1u << 20)
#define SOCK_BUF (2u << 20)
/* Bytes per read of our own (fill_input) and per read callback. */
#define FILL_CHUNK (256u * 1024u)
#define FILL_BUDGET (4u << 20)
/* Frames are handled one after another and one may take long (the agent
 * forks a command for each exec: tens of ms on a starved machine). After
 * this much time on one connection's frames it yields to the loop, so a
 * burst of requests does not keep every other event waiting (the replies
 * to the requests already handled, other connections) for seconds. */
#define INPUT_SLICE_NS (20L * 1000 * 1000)

/* Best effort: larger kernel buffers on the connection's socket (a unix
 * socket in practice). SO_*BUFFORCE passes net.core.[rw]mem_max when we
 * may; otherwise the kernel caps the plain request at that limit. */
static void size_socket(int fd)
{
	int v = (int)SOCK_BUF;
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &v, sizeof(v)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &v, sizeof(v)) < 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}

/* libevent may close the fd only on a later loop pass; shut the socket down
 * now so the peer sees EOF at once, as the header promises. */
static void release_bev(sbx_proto_conn *c)
{
	if (!c->bev)
		return;
	evutil_socket_t fd = bufferevent_getfd(c->bev);
	if (fd >= 0)
		shutdown(fd, SHUT_RDWR);
	sbx_bev_flush_release(&c->out);
	bufferevent_free(c->bev);
	c->bev = NULL;
}

static void destroy(sbx_proto_conn *c)
{
	conn_block_unref(c->blk);
	if (c->frame_timer)
		event_free(c->frame_timer);
	if (c->resume)
		event_free(c->resume);
	release_bev(c);
	conn_table_destroy(c->t);
	if (c->pending)
		evbuffer_free(c->pending);
	sbx_proto_writer_destroy(&c->w);
	for (size_t i = 0; i < c->peer_ncaps; i++)
		free(c->peer_caps[i]);
	free(c->peer_caps);
	free(c->peer_agent);
	free(c);
}

static void enter(sbx_proto_conn *c)
{
	c->in_dispatch++;
}

static void leave(sbx_proto_conn *c)
{
	if (--c->in_dispatch == 0 && c->freed)
		destroy(c);
}

void sbx_proto_conn_free(sbx_proto_conn *c)
{
	if (!c || c->freed)
		return;
	if (c->in_dispatch == 0) {
		destroy(c);
		return;
	}
	c->freed = true;
	release_bev(c);
}

/* The connection is over; tell the owner once, then forget the streams. */
static void close_conn(sbx_proto_conn *c, const sbx_err *why)
{
	if (c->closed || c->freed)
		return;
	c->closed = true;
	if (c->frame_timer)
		event_del(c->frame_timer);
	event_del(c->resume);
	if (c->out.ev)
		event_del(c->out.ev);
	c->input_yielded = false;
	bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	shutdown(bufferevent_getfd(c->bev), SHUT_RDWR);
	if (c->cbs.on_close)
		c->cbs.on_close(c, why, c->ud);
	if (!c->freed)
		conn_close_all_streams(c);
}

/* A connection error: ERR id 0 to the peer (best effort), then close. */
static void conn_fail(sbx_proto_conn *c, sbx_proto_code code, int errnum, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void conn_fail(sbx_proto_conn *c, sbx_proto_code code, int errnum, const char *fmt, ...)
{
	if (c->closed || c->freed)
		return;
	char msg[SBX_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	sbx_proto_writer_reset(&c->w);
	if (sbx_proto_encode_err(&c->w, 0, code, msg, conn_out_max_frame(c), NULL) == 0) {
		/* write now, as bufferevent's own write callback does (its output
		 * is frozen at the front between writes): the socket is about to
		 * be shut down */
		struct evbuffer *out = bufferevent_get_output(c->bev);
		c->resv.active = false;
		evbuffer_add(out, c->w.buf.data, c->w.buf.size);
		evbuffer_unfreeze(out, 1);
		evbuffer_write(out, bufferevent_getfd(c->bev));
		evbuffer_freeze(out, 1);
	}
	sbx_proto_writer_reset(&c->w);
	sbx_err why;
	sbx_err_set(&why, errnum, "protocol error (%s): %s", sbx_proto_code_name(code), msg);
	close_conn(c, &why);
}

static void deliver(sbx_proto_conn *c, const sbx_proto_frame *f)
{
	if (c->cbs.on_frame)
		c->cbs.on_frame(c, f, c->ud);
}

static uint32_t clamp32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static void set_initial_credit(struct conn_stream *s, void *arg)
{
	s->send_credit = ((sbx_proto_conn *)arg)->peer_window;
}

static int copy_peer_hello(sbx_proto_conn *c, const sbx_proto_frame *f)
{
	uint32_t n = f->caps.type == MSGPACK_OBJECT_ARRAY ? f->caps.via.array.size : 0;
	if (n) {
		c->peer_caps = calloc(n, sizeof(*c->peer_caps));
		if (!c->peer_caps)
			return -ENOMEM;
		for (uint32_t i = 0; i < n; i++) {
			char *cap = sbx_proto_strdup(&f->caps.via.array.ptr[i]);
			if (cap) /* a name with a NUL in it can match nothing */
				c->peer_caps[c->peer_ncaps++] = cap;
		}
	}
	if (f->agent) {
		c->peer_agent = strndup(f->agent, f->agent_len);
		if (!c->peer_agent)
			return -ENOMEM;
	}
	return 0;
}

static void handle_hello(sbx_proto_conn *c, const sbx_proto_frame *f)
{
	uint64_t v = f->version < SBX_PROTO_VERSION ? f->version : SBX_PROTO_VERSION;
	if (v < 1) {
		conn_fail(c, SBX_PROTO_E_UNSUPPORTED, -EPROTONOSUPPORT,
			  "protocol version %llu not supported (this side speaks 1..%d)",
			  (unsigned long long)f->version, SBX_PROTO_VERSION);
		return;
	}
	if (f->max_frame < SBX_PROTO_MIN_MAX_FRAME || f->max_streams < 1 ||
	    f->window < SBX_PROTO_MIN_WINDOW) {
		conn_fail(c, SBX_PROTO_E_UNSUPPORTED, -EPROTONOSUPPORT,
			  "hello limits below the minimum (max_frame >= %u, max_streams >= 1, window >= %u)",
			  SBX_PROTO_MIN_MAX_FRAME, SBX_PROTO_MIN_WINDOW);
		return;
	}
	if (copy_peer_hello(c, f) < 0) {
		conn_fail(c, SBX_PROTO_E_INTERNAL, -ENOMEM, "out of memory");
		return;
	}
	c->version = v;
	c->peer_max_frame = f->max_frame > SBX_PROTO_HARD_MAX_FRAME ? SBX_PROTO_HARD_MAX_FRAME
								     : (uint32_t)f->max_frame;
	c->peer_max_streams = clamp32(f->max_streams);
	c->peer_window = clamp32(f->window);
	/* a peer's large max_frame must not make us queue more than a few MiB */
	c->out_high = 2u * (c->peer_max_frame < SBX_PROTO_DEFAULT_MAX_FRAME ? c->peer_max_frame
									   : SBX_PROTO_DEFAULT_MAX_FRAME);
	if (c->out_high < MIN_OUT_HIGH)
		c->out_high = MIN_OUT_HIGH;
	bufferevent_setwatermark(c->bev, EV_WRITE, c->out_high / 2, 0);
	c->ready = true;
	conn_foreach(c, set_initial_credit, c);
	if (evbuffer_add_buffer(bufferevent_get_output(c->bev), c->pending) < 0) {
		conn_fail(c, SBX_PROTO_E_INTERNAL, -ENOMEM, "out of memory");
		return;
	}
	if (c->cbs.on_ready)
		c->cbs.on_ready(c, c->ud);
	if (!c->freed && !c->closed)
		conn_notify_blocked(c);
}

static void handle_req(sbx_proto_conn *c, const sbx_proto_frame *f)
{
	if (f->id == 0 || conn_id_is_local(c, f->id) || f->id <= c->highest_remote_id) {
		conn_fail(c, SBX_PROTO_E_PROTOCOL, -EPROTO,
			  "req with id %llu: wrong parity or not above %llu",
			  (unsigned long long)f->id, (unsigned long long)c->highest_remote_id);
		return;
	}
	c->highest_remote_id = f->id;
	if (c->n_remote >= c->max_streams) {
		char msg[96];
		snprintf(msg, sizeof(msg), "%zu streams open, max_streams is %u", c->n_remote,
			 c->max_streams);
		if (sbx_proto_encode_err(&c->w, f->id, SBX_PROTO_E_TOO_MANY_STREAMS, msg,
					 conn_out_max_frame(c), NULL) == 0)
			conn_emit(c, NULL);
		return;
	}
	if (!conn_open_stream(c, f->id, false)) {
		conn_fail(c, SBX_PROTO_E_INTERNAL, -ENOMEM, "out of memory");
		return;
	}
	deliver(c, f);
}

static bool was_opened(const sbx_proto_conn *c, uint64_t id)
{
	return conn_id_is_local(c, id) ? id < c->next_local_id : id <= c->highest_remote_id;
}

static void handle_stream_frame(sbx_proto_conn *c, const sbx_proto_frame *f)
{
	const char *kind = sbx_proto_kind_name(f->kind);
	if (f->id == 0) {
		conn_fail(c, SBX_PROTO_E_PROTOCOL, -EPROTO, "%s with id 0", kind);
		return;
	}
	struct conn_stream *s = conn_find(c, f->id);
	if (!s) {
		if (was_opened(c, f->id))
			return; /* crossed our END/ERR on the wire */
		conn_fail(c, SBX_PROTO_E_PROTOCOL, -EPROTO, "%s for stream %llu, never opened",
			  kind, (unsigned long long)f->id);
		return;
	}
	switch (f->kind) {
	case SBX_PROTO_DATA:
	case SBX_PROTO_EVENT:
		if (f->kind == SBX_PROTO_EVENT || f->data_len > 0) {
			if (f->body_len > s->recv_credit) {
				conn_fail(c, SBX_PROTO_E_FLOW_CONTROL, -EPROTO,
					  "%s of %zu bytes on stream %llu, credit %llu", kind,
					  f->body_len, (unsigned long long)f->id,
					  (unsigned long long)s->recv_credit);
				return;
			}
			s->recv_credit -= f->body_len;
		}
		if (s->local && s->cancelled)
			return; /* we abandoned it; only its END/ERR matters */
		deliver(c, f);
		return;
	case SBX_PROTO_CREDIT:
		if (s->send_credit + f->credit > UINT32_MAX || f->credit > UINT32_MAX) {
			conn_fail(c, SBX_PROTO_E_FLOW_CONTROL, -EPROTO,
				  "credit on stream %llu beyond 2^32", (unsigned long long)f->id);
			return;
		}
		s->send_credit += f->credit;
		conn_unblock(c, s);
		if (c->cbs.on_writable)
			c->cbs.on_writable(c, f->id, c->ud);
		return;
	case SBX_PROTO_CTL:
	case SBX_PROTO_CANCEL:
		if (s->local) {
			conn_fail(c, SBX_PROTO_E_PROTOCOL, -EPROTO,
				  "%s on stream %llu, which we opened", kind, (unsigned long long)f->id);
			return;
		}
		deliver(c, f);
		return;
	case SBX_PROTO_END:
	case SBX_PROTO_ERR:
		if (!s->local) {
			conn_fail(c, SBX_PROTO_E_PROTOCOL, -EPROTO,
				  "%s on stream %llu, which the peer opened", kind,
				  (unsigned long long)f->id);
			return;
		}
		deliver(c, f);
		if (!c->freed && !c->closed && (s = conn_find(c, f->id)))
			conn_close_stream(c, s);
		return;
	default:
		conn_fail(c, SBX_PROTO_E_PROTOCOL, -EPROTO, "unexpected %s", kind);
		return;
	}
}

static void handle_frame(sbx_proto_conn *c, const sbx_proto_frame *f)
{
	if (f->kind == SBX_PROTO_ERR && f->id == 0) {
		sbx_err why;
		sbx_err_set(&why, -ECONNABORTED, "peer closed the connection with %.*s: %.*s",
			    (int)(f->code_name_len > 64 ? 64 : f->code_name_len), f->code_name,
			    (int)(f->msg_len > 256 ? 256 : f->msg_len), f->msg ? f->msg : "");
		close_conn(c, &why);
		return;
	}
	if (!c->ready) {
		if (f->kind != SBX_PROTO_HELLO) {
			conn_fail(c, SBX_PROTO_E_PROTOCOL, -EPROTO, "%s before hello",
				  sbx_proto_kind_name(f->kind));
			return;
		}
		handle_hello(c, f);
		return;
	}
	if (f->kind == SBX_PROTO_HELLO) {
		conn_fail(c, SBX_PROTO_E_PROTOCOL, -EPROTO, "second hello");
		return;
	}
	if (f->kind == SBX_PROTO_REQ) {
		handle_req(c, f);
		return;
	}
	handle_stream_frame(c, f);
}

/* Output beyond which we stop reading: a peer that sends but does not read
 * (e.g. floods requests we refuse) cannot grow our output without bound. */
static bool output_full(const sbx_proto_conn *c)
{
	size_t high = c->ready ? 2 * c->out_high + c->peer_max_frame : 4 * MIN_OUT_HIGH;
	return evbuffer_get_length(bufferevent_get_output(c->bev)) > high;
}

void sbx_proto_tune_allocator(void)
{
	/* Both set explicitly: glibc's own sliding threshold only moves up
	 * after a mapped chunk was freed and still trims at twice that. */
	(void)mallopt(M_MMAP_THRESHOLD, (int)(4u << 20));
	(void)mallopt(M_TRIM_THRESHOLD, (int)SBX_PROTO_HEAP_KEEP);
}

static long ns_since(const struct timespec *t0)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)(t.tv_sec - t0->tv_sec) * 1000000000L + (t.tv_nsec - t0->tv_nsec);
}

/* Decode and handle one whole frame at p[0..want); false when the
 * connection failed. In place: p stays valid through the handling. */
static bool handle_bytes(sbx_proto_conn *c, const uint8_t *p, size_t want, bool in_place,
			 size_t *used)
{
	sbx_proto_frame f;
	sbx_proto_code pc;
	sbx_err err;
	int rc = in_place ? sbx_proto_frame_decode_in_place(p, want, c->max_frame, &f, used, &pc, &err)
			  : sbx_proto_frame_decode(p, want, c->max_frame, &f, used, &pc, &err);
	if (rc <= 0) {
		conn_fail(c, pc ? pc : SBX_PROTO_E_BAD_FRAME, rc < 0 ? rc : -EBADMSG, "%s", err.msg);
		return false;
	}
	if (!in_place)
		evbuffer_drain(bufferevent_get_input(c->bev), *used);
	c->frames_in++;
	handle_frame(c, &f);
	sbx_proto_frame_release(&f);
	return true;
}

/* The block's frame is whole: decoded in place, handed on, let go (the
 * owner may hold parts of it: sbx_proto_conn_add_data). */
static bool handle_block(sbx_proto_conn *c)
{
	struct conn_block *b = c->blk;
	size_t len, have, used;
	const uint8_t *p = conn_block_bytes(b, &len, &have);
	c->blk = NULL;
	c->cur = b;
	c->blk_last = true;
	bool ok = handle_bytes(c, p, len, true, &used);
	c->cur = NULL;
	conn_block_unref(b);
	return ok;
}

static void process_input(sbx_proto_conn *c)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	c->input_yielded = false;
	while (!c->freed && !c->closed) {
		if (output_full(c)) {
			c->read_paused = true;
			bufferevent_disable(c->bev, EV_READ);
			return;
		}
		struct evbuffer *in = bufferevent_get_input(c->bev);
		if (c->blk) {
			if (!conn_block_take_input(c) || !handle_block(c))
				return;
		} else {
			size_t avail = evbuffer_get_length(in);
			uint8_t h[SBX_PROTO_HEADER_LEN];
			if (evbuffer_copyout(in, h, sizeof(h)) < (ev_ssize_t)sizeof(h))
				return;
			size_t body = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
			size_t want = body > c->max_frame ? sizeof(h) : sizeof(h) + body;
			if (want > sizeof(h) && conn_block_wanted(body)) {
				if (conn_block_begin(c, want) < 0) {
					conn_fail(c, SBX_PROTO_E_INTERNAL, -ENOMEM, "out of memory");
					return;
				}
				continue;
			}
			if (avail < want)
				return;
			size_t used;
			c->blk_last = false;
			if (!handle_bytes(c, evbuffer_pullup(in, (ev_ssize_t)want), want, false, &used))
				return;
		}
		if (!c->freed && !c->closed && ns_since(&t0) > INPUT_SLICE_NS &&
		    evbuffer_get_length(bufferevent_get_input(c->bev)) > 0) {
			/* on the next turn of the loop, after what became ready */
			static const struct timeval now = { 0, 0 };
			c->input_yielded = true;
			evtimer_add(c->resume, &now);
			return;
		}
	}
}

/* The frame deadline: it runs while the input holds part of a frame and
 * we are reading. A frame completed since the last look (progressed) starts
 * it afresh for the one begun behind it; otherwise a running clock goes on,
 * so a trickle of bytes does not reset it. */
static void frame_clock(sbx_proto_conn *c, bool progressed)
{
	if (!c->frame_timer || c->freed || c->closed)
		return;
	/* whole frames waiting for us (paused, yielded) are not the peer's delay */
	if (c->read_paused || c->input_yielded || c->peer_held ||
	    (!c->blk && evbuffer_get_length(bufferevent_get_input(c->bev)) == 0)) {
		event_del(c->frame_timer);
		return;
	}
	if (progressed || !evtimer_pending(c->frame_timer, NULL)) {
		struct timeval tv = { c->frame_timeout_ms / 1000, (c->frame_timeout_ms % 1000) * 1000 };
		evtimer_add(c->frame_timer, &tv);
	}
}

static void frame_late(evutil_socket_t fd, short what, void *arg)
{
	sbx_proto_conn *c = arg;
	(void)fd;
	(void)what;
	enter(c);
	struct evbuffer *in = bufferevent_get_input(c->bev);
	uint8_t h[SBX_PROTO_HEADER_LEN] = { 0 };
	size_t have = evbuffer_get_length(in);
	evbuffer_copyout(in, h, sizeof(h));
	size_t body = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
	if (c->blk) {
		size_t len;
		const uint8_t *p = conn_block_bytes(c->blk, &len, &have);
		body = (size_t)p[0] << 24 | (size_t)p[1] << 16 | (size_t)p[2] << 8 | p[3];
	}
	if (have < sizeof(h))
		conn_fail(c, SBX_PROTO_E_PROTOCOL, -ETIMEDOUT,
			  "a frame header was not complete %u ms after its first byte (%zu of 4 bytes came)",
			  c->frame_timeout_ms, have);
	else
		conn_fail(c, SBX_PROTO_E_PROTOCOL, -ETIMEDOUT,
			  "a frame of %zu bytes was not complete %u ms after its first byte (%zu of its %zu bytes came)",
			  body, c->frame_timeout_ms, have, body + sizeof(h));
	leave(c);
}

/* After libevent's read (4 KiB at most, see sbx/bev_fill.h) we read the
 * socket ourselves, within the same bound as its watermark: the input holds
 * at most one frame beyond what was decoded. */
static size_t fill_input(sbx_proto_conn *c, bool *more)
{
	if (c->blk)
		return conn_block_read(c, more);
	return sbx_bev_fill(c->bev, SBX_PROTO_HEADER_LEN + (size_t)c->max_frame,
			    c->blk_last ? CONN_BLOCK_PEEK : FILL_CHUNK, more);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	sbx_proto_conn *c = arg;
	enter(c);
	uint64_t frames = c->frames_in;
	process_input(c);
	/* Only while a frame is incomplete: a read that ended on a frame
	 * boundary most likely emptied the socket (a small exchange then costs
	 * no extra syscall); if not, the next read event comes at once. The
	 * budget keeps one busy connection from starving the loop. */
	bool more = !c->freed && !c->closed &&
		    (c->blk || evbuffer_get_length(bufferevent_get_input(c->bev)) > 0);
	for (size_t budget = FILL_BUDGET;
	     more && !c->freed && !c->closed && !c->read_paused && !c->input_yielded && budget > 0;) {
		size_t n = fill_input(c, &more);
		if (n == 0)
			break;
		budget = n < budget ? budget - n : 0;
		process_input(c);
	}
	frame_clock(c, c->frames_in != frames);
	leave(c);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	sbx_proto_conn *c = arg;
	(void)fd;
	(void)what;
	enter(c);
	if (c->input_yielded && !c->freed && !c->closed) {
		process_input(c);
		frame_clock(c, true);
	}
	leave(c);
}

/* The output went down to its low watermark: reading stopped for it may
 * go on, streams waiting for room may write. */
static void output_drained(sbx_proto_conn *c)
{
	if (c->read_paused && !output_full(c)) {
		c->read_paused = false;
		bufferevent_enable(c->bev, EV_READ);
		process_input(c); /* frames already buffered get no new read event */
		frame_clock(c, true);
	}
	if (!c->freed && !c->closed && c->ready)
		conn_notify_blocked(c);
}

/* libevent wrote what flush_cb left, down to the low watermark. */
static void write_cb(struct bufferevent *bev, void *arg)
{
	sbx_proto_conn *c = arg;
	(void)bev;
	enter(c);
	sbx_bev_flush_written(&c->out);
	output_drained(c);
	leave(c);
}

static void flush_cb(evutil_socket_t fd, short what, void *arg)
{
	sbx_proto_conn *c = arg;
	(void)fd;
	(void)what;
	enter(c);
	/* a reservation (data_begin) ends within its caller's callback; its
	 * commit activates us again */
	if (c->bev && !c->freed && !c->closed && !c->resv.active &&
	    sbx_bev_flush_write(&c->out, IO_CHUNK) > 0 &&
	    evbuffer_get_length(bufferevent_get_output(c->bev)) <= c->out_high / 2)
		output_drained(c);
	leave(c);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	sbx_proto_conn *c = arg;
	enter(c);
	sbx_err why;
	if (what & BEV_EVENT_EOF)
		sbx_err_set(&why, -ECONNRESET, "peer closed the connection");
	else
		sbx_err_sys(&why, errno ? -errno : -EIO, "connection I/O error");
	close_conn(c, &why);
	leave(c);
}

sbx_proto_conn *sbx_proto_conn_new(struct event_base *base, int fd,
				   const sbx_proto_conn_opts *opts,
				   const sbx_proto_conn_cbs *cbs, void *ud, sbx_err *err)
{
	uint32_t max_frame = opts->max_frame ? opts->max_frame : SBX_PROTO_DEFAULT_MAX_FRAME;
	uint32_t window = opts->window ? opts->window : SBX_PROTO_DEFAULT_WINDOW;
	if (max_frame < SBX_PROTO_MIN_MAX_FRAME || max_frame > SBX_PROTO_HARD_MAX_FRAME ||
	    window < SBX_PROTO_MIN_WINDOW) {
		close(fd);
		sbx_err_set(err, -EINVAL, "conn: max_frame must be %u..%u and window >= %u",
			    SBX_PROTO_MIN_MAX_FRAME, SBX_PROTO_HARD_MAX_FRAME, SBX_PROTO_MIN_WINDOW);
		return NULL;
	}
	sbx_proto_conn *c = calloc(1, sizeof(*c));
	if (!c || conn_table_init(&c->t) < 0 || !(c->pending = evbuffer_new())) {
		close(fd);
		goto oom;
	}
	sbx_proto_writer_init(&c->w);
	evutil_make_socket_nonblocking(fd);
	size_socket(fd);
	c->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev) {
		close(fd);
		goto oom;
	}
	bufferevent_set_max_single_read(c->bev, SBX_PROTO_HEADER_LEN + (size_t)max_frame);
	bufferevent_set_max_single_write(c->bev, IO_CHUNK);
	c->cbs = *cbs;
	c->ud = ud;
	c->is_client = opts->is_client;
	c->max_frame = max_frame;
	c->window = window;
	c->max_streams = opts->max_streams ? opts->max_streams : SBX_PROTO_DEFAULT_MAX_STREAMS;
	c->next_local_id = c->is_client ? 1 : 2;
	c->out_high = MIN_OUT_HIGH;
	c->frame_timeout_ms = opts->frame_timeout_ms;
	if (c->frame_timeout_ms && !(c->frame_timer = evtimer_new(base, frame_late, c)))
		goto oom;
	if (!(c->resume = evtimer_new(base, resume_cb, c)))
		goto oom;
	if (sbx_bev_flush_init(&c->out, c->bev, flush_cb, c) < 0)
		goto oom;

	bufferevent_setcb(c->bev, read_cb, write_cb, event_cb, c);
	/* the input never holds more than one whole frame beyond what we decoded */
	bufferevent_setwatermark(c->bev, EV_READ, 0, SBX_PROTO_HEADER_LEN + (size_t)max_frame);
	bufferevent_setwatermark(c->bev, EV_WRITE, c->out_high / 2, 0);
	int rc = sbx_proto_encode_hello(&c->w, max_frame, c->max_streams, window, opts->caps,
					opts->ncaps, opts->agent, err);
	if (rc < 0 || bufferevent_write(c->bev, c->w.buf.data, c->w.buf.size) < 0 ||
	    bufferevent_enable(c->bev, EV_READ) < 0) {
		if (rc == 0)
			sbx_err_set(err, -ENOMEM, "conn: cannot queue hello");
		destroy(c);
		return NULL;
	}
	sbx_proto_writer_reset(&c->w);
	return c;
oom:
	if (c)
		destroy(c);
	sbx_err_set(err, -ENOMEM, "conn: out of memory");
	return NULL;
}

bool sbx_proto_conn_ready(const sbx_proto_conn *c)
{
	return c->ready && !c->closed;
}

bool sbx_proto_conn_peer_has_cap(const sbx_proto_conn *c, const char *cap)
{
	for (size_t i = 0; i < c->peer_ncaps; i++)
		if (strcmp(c->peer_caps[i], cap) == 0)
			return true;
	return false;
}

const char *sbx_proto_conn_peer_agent(const sbx_proto_conn *c)
{
	return c->peer_agent;
}

uint32_t sbx_proto_conn_peer_max_frame(const sbx_proto_conn *c)
{
	return c->peer_max_frame;
}

uint32_t sbx_proto_conn_peer_max_streams(const sbx_proto_conn *c)
{
	return c->peer_max_streams;
}

void sbx_proto_conn_peer_held(sbx_proto_conn *c, bool held)
{
	c->peer_held = held;
	/* released: a frame begun before the hold gets a whole deadline again */
	frame_clock(c, true);
}

void sbx_proto_conn_set_stream_data(sbx_proto_conn *c, uint64_t id, void *p)
{
	struct conn_stream *s = conn_find(c, id);
	if (s)
		s->user = p;
}

void *sbx_proto_conn_stream_data(const sbx_proto_conn *c, uint64_t id)
{
	struct conn_stream *s = conn_find(c, id);
	return s ? s->user : NULL;
}

size_t sbx_proto_conn_open_streams(const sbx_proto_conn *c)
{
	return c->n_local + c->n_remote;
}

size_t sbx_proto_conn_pending_output(const sbx_proto_conn *c)
{
	size_t n = evbuffer_get_length(c->pending);
	if (c->bev)
		n += evbuffer_get_length(bufferevent_get_output(c->bev));
	return n;
}

struct foreach_arg {
	void (*fn)(uint64_t id, void *stream_data, void *ud);
	void *ud;
};

static void foreach_one(struct conn_stream *s, void *arg)
{
	struct foreach_arg *a = arg;
	a->fn(s->id, s->user, a->ud);
}

void sbx_proto_conn_foreach_stream(const sbx_proto_conn *c,
				   void (*fn)(uint64_t id, void *stream_data, void *ud), void *ud)
{
	struct foreach_arg a = { fn, ud };
	conn_foreach(c, foreach_one, &a);
}
