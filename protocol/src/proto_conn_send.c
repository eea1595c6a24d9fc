/* The owner's calls on a connection: open, send, close streams; credit. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proto_conn_int.h"

size_t conn_out_max_frame(const sbx_proto_conn *c)
{
	/* before the peer's hello only the protocol's floor is safe */
	return c->ready ? c->peer_max_frame : SBX_PROTO_MIN_MAX_FRAME;
}

bool conn_id_is_local(const sbx_proto_conn *c, uint64_t id)
{
	return (id & 1) == (c->is_client ? 1u : 0u);
}

int conn_emit(sbx_proto_conn *c, sbx_err *err)
{
	struct evbuffer *out = c->ready ? bufferevent_get_output(c->bev) : c->pending;
	c->resv.active = false; /* the add may use the reserved space */
	int rc = evbuffer_add(out, c->w.buf.data, c->w.buf.size);
	sbx_proto_writer_reset(&c->w);
	if (rc < 0)
		return sbx_err_set(err, -ENOMEM, "queue frame: out of memory");
	return 0;
}

enum opener { ANY, LOCAL, REMOTE };

/* Find open stream id, which must have been opened by `who`; NULL with *rc
 * and err set when it cannot be used. */
static struct conn_stream *lookup(sbx_proto_conn *c, uint64_t id, enum opener who,
				  const char *what, int *rc, sbx_err *err)
{
	struct conn_stream *s = NULL;
	if (c->closed || c->freed)
		*rc = sbx_err_set(err, -ENOTCONN, "%s: connection closed", what);
	else if (!(s = conn_find(c, id)))
		*rc = sbx_err_set(err, -ENOENT, "%s: stream %llu is not open", what,
				  (unsigned long long)id);
	else if ((who == LOCAL && !s->local) || (who == REMOTE && s->local)) {
		*rc = sbx_err_set(err, -EINVAL, "%s: stream %llu was opened by the %s", what,
				  (unsigned long long)id, s->local ? "us" : "peer");
		s = NULL;
	}
	return s;
}

static size_t output_len(const sbx_proto_conn *c)
{
	return evbuffer_get_length(bufferevent_get_output(c->bev));
}

int sbx_proto_conn_request(sbx_proto_conn *c, const char *op, const void *args,
			   size_t args_len, uint64_t *id, sbx_err *err)
{
	if (c->closed || c->freed)
		return sbx_err_set(err, -ENOTCONN, "request %s: connection closed", op);
	uint32_t limit = c->ready ? c->peer_max_streams : SBX_PROTO_DEFAULT_MAX_STREAMS;
	if (c->n_local >= limit)
		return sbx_err_set(err, -EBUSY, "request %s: %zu streams open, peer allows %u", op,
				   c->n_local, limit);
	uint64_t new_id = c->next_local_id;
	int rc = sbx_proto_encode_req(&c->w, new_id, op, args, args_len, conn_out_max_frame(c), err);
	if (rc < 0)
		return sbx_err_wrap(err, "request %s", op);
	if (!conn_open_stream(c, new_id, true)) {
		sbx_proto_writer_reset(&c->w);
		return sbx_err_set(err, -ENOMEM, "request %s: out of memory", op);
	}
	rc = conn_emit(c, err);
	if (rc < 0) {
		conn_close_stream(c, conn_find(c, new_id));
		return rc;
	}
	c->next_local_id += 2;
	*id = new_id;
	return 0;
}

size_t sbx_proto_conn_data_room(const sbx_proto_conn *c, uint64_t id)
{
	struct conn_stream *s = conn_find(c, id);
	if (!s || c->closed || c->freed || s->cancelled)
		return 0;
	uint64_t lim = s->send_credit < c->peer_max_frame ? s->send_credit : c->peer_max_frame;
	if (!c->ready || output_len(c) >= c->out_high || lim <= SBX_PROTO_DATA_OVERHEAD) {
		conn_block(c, s);
		return 0;
	}
	return (size_t)(lim - SBX_PROTO_DATA_OVERHEAD);
}

/* Charge a DATA/EVENT frame just encoded in c->w, then send it. */
static int send_charged(sbx_proto_conn *c, struct conn_stream *s, sbx_err *err)
{
	uint64_t body = c->w.buf.size - SBX_PROTO_HEADER_LEN;
	if (body > s->send_credit || !c->ready) {
		sbx_proto_writer_reset(&c->w);
		conn_block(c, s);
		return sbx_err_set(err, -EAGAIN, "stream %llu: no credit", (unsigned long long)s->id);
	}
	s->send_credit -= body;
	return conn_emit(c, err);
}

int sbx_proto_conn_send_data(sbx_proto_conn *c, uint64_t id, const char *ch,
			     const void *data, size_t len, bool eof, sbx_err *err)
{
	int rc = 0;
	struct conn_stream *s = lookup(c, id, ANY, "send data", &rc, err);
	if (!s)
		return rc;
	if (len > 0 && len > sbx_proto_conn_data_room(c, id))
		return sbx_err_set(err, -EAGAIN, "send data on %llu: %zu bytes over room",
				   (unsigned long long)id, len);
	rc = sbx_proto_encode_data(&c->w, id, ch, data, len, eof, conn_out_max_frame(c), err);
	if (rc < 0)
		return rc;
	if (len == 0) /* an empty data frame is free so that eof can always be sent */
		return conn_emit(c, err);
	return send_charged(c, s, err);
}

int sbx_proto_conn_data_begin(sbx_proto_conn *c, uint64_t id, const char *ch, size_t max,
			      void **buf, sbx_err *err)
{
	int rc = 0;
	struct conn_stream *s = lookup(c, id, ANY, "send data", &rc, err);
	if (!s)
		return rc;
	if (max == 0 || max > sbx_proto_conn_data_room(c, id))
		return sbx_err_set(err, -EAGAIN, "send data on %llu: %zu bytes over room",
				   (unsigned long long)id, max);
	rc = sbx_proto_encode_data_head(&c->w, id, ch, max, conn_out_max_frame(c), err);
	if (rc < 0)
		return rc;
	size_t head = c->w.buf.size;
	sbx_proto_writer_reset(&c->w);
	if (evbuffer_reserve_space(bufferevent_get_output(c->bev), (ev_ssize_t)(head + max), &c->resv.v, 1) < 1)
		return sbx_err_set(err, -ENOMEM, "send data on %llu: out of memory", (unsigned long long)id);
	c->resv.active = true;
	c->resv.id = id;
	snprintf(c->resv.ch, sizeof(c->resv.ch), "%s", ch);
	c->resv.max = max;
	c->resv.head = head;
	*buf = (uint8_t *)c->resv.v.iov_base + head;
	return 0;
}

int sbx_proto_conn_data_commit(sbx_proto_conn *c, size_t n, sbx_err *err)
{
	if (!c->resv.active)
		return sbx_err_set(err, -ESTALE, "send data: nothing reserved, or other output since");
	c->resv.active = false;
	if (n == 0)
		return 0;
	if (n > c->resv.max)
		return sbx_err_set(err, -EINVAL, "send data: %zu bytes, %zu reserved", n, c->resv.max);
	int rc = 0;
	struct conn_stream *s = lookup(c, c->resv.id, ANY, "send data", &rc, err);
	if (!s)
		return rc;
	rc = sbx_proto_encode_data_head(&c->w, s->id, c->resv.ch, n, conn_out_max_frame(c), err);
	if (rc < 0)
		return rc;
	size_t head = c->w.buf.size;
	uint64_t body = head - SBX_PROTO_HEADER_LEN + n;
	if (body > s->send_credit) { /* begin checked the room: not reached */
		sbx_proto_writer_reset(&c->w);
		return sbx_err_set(err, -EAGAIN, "stream %llu: no credit", (unsigned long long)s->id);
	}
	uint8_t *base = c->resv.v.iov_base;
	/* a shorter length field (bin8/bin16) when fewer bytes came than asked:
	 * the payload moves up to the header, at most 64 KiB */
	if (head != c->resv.head)
		memmove(base + head, base + c->resv.head, n);
	memcpy(base, c->w.buf.data, head);
	sbx_proto_writer_reset(&c->w);
	c->resv.v.iov_len = head + n;
	if (evbuffer_commit_space(bufferevent_get_output(c->bev), &c->resv.v, 1) < 0)
		return sbx_err_set(err, -ESTALE, "send data on %llu: reservation lost",
				   (unsigned long long)s->id);
	s->send_credit -= body;
	return 0;
}

int sbx_proto_conn_send_data_from(sbx_proto_conn *c, uint64_t id, const char *ch,
				  struct evbuffer *src, size_t n, sbx_err *err)
{
	int rc = 0;
	struct conn_stream *s = lookup(c, id, ANY, "send data", &rc, err);
	if (!s)
		return rc;
	if (n == 0 || n > evbuffer_get_length(src))
		return sbx_err_set(err, -EINVAL, "send data on %llu: %zu bytes of %zu buffered",
				   (unsigned long long)id, n, evbuffer_get_length(src));
	if (n > sbx_proto_conn_data_room(c, id))
		return sbx_err_set(err, -EAGAIN, "send data on %llu: %zu bytes over room",
				   (unsigned long long)id, n);
	rc = sbx_proto_encode_data_head(&c->w, id, ch, n, conn_out_max_frame(c), err);
	if (rc < 0)
		return rc;
	uint64_t body = c->w.buf.size - SBX_PROTO_HEADER_LEN + n;
	/* The frame is put together in the pre-handshake queue, empty once
	 * ready (data_room is 0 before), and goes to the output whole: a
	 * payload that cannot be moved never leaves a header without it. */
	struct evbuffer *stage = c->pending;
	size_t head = c->w.buf.size;
	rc = evbuffer_add(stage, c->w.buf.data, head);
	sbx_proto_writer_reset(&c->w);
	if (rc < 0)
		return sbx_err_set(err, -ENOMEM, "send data on %llu: out of memory", (unsigned long long)id);
	/* whole chains move; only a chain split at n is copied, in part */
	if (evbuffer_remove_buffer(src, stage, n) != (int)n) {
		evbuffer_drain(stage, evbuffer_get_length(stage));
		return sbx_err_set(err, -EINVAL, "send data on %llu: payload buffer cannot be taken from",
				   (unsigned long long)id);
	}
	if (evbuffer_add_buffer(bufferevent_get_output(c->bev), stage) < 0) {
		evbuffer_drain(stage, head);
		evbuffer_prepend_buffer(src, stage);
		return sbx_err_set(err, -ENOMEM, "send data on %llu: output refused", (unsigned long long)id);
	}
	c->resv.active = false;
	s->send_credit -= body;
	return 0;
}

int sbx_proto_conn_send_event(sbx_proto_conn *c, uint64_t id, const void *map,
			      size_t map_len, sbx_err *err)
{
	int rc = 0;
	struct conn_stream *s = lookup(c, id, ANY, "send event", &rc, err);
	if (!s)
		return rc;
	if (!c->ready || output_len(c) >= c->out_high) {
		conn_block(c, s);
		return sbx_err_set(err, -EAGAIN, "send event on %llu: wait", (unsigned long long)id);
	}
	rc = sbx_proto_encode_event(&c->w, id, map, map_len, conn_out_max_frame(c), err);
	if (rc < 0)
		return rc;
	if (c->w.buf.size - SBX_PROTO_HEADER_LEN > c->peer_window) {
		sbx_proto_writer_reset(&c->w);
		return sbx_err_set(err, -EMSGSIZE, "send event on %llu: larger than the peer's window",
				   (unsigned long long)id);
	}
	return send_charged(c, s, err);
}

int sbx_proto_conn_send_ctl(sbx_proto_conn *c, uint64_t id, const void *map,
			    size_t map_len, sbx_err *err)
{
	int rc = 0;
	struct conn_stream *s = lookup(c, id, LOCAL, "send ctl", &rc, err);
	if (!s)
		return rc;
	rc = sbx_proto_encode_ctl(&c->w, id, map, map_len, conn_out_max_frame(c), err);
	return rc < 0 ? rc : conn_emit(c, err);
}

int sbx_proto_conn_cancel(sbx_proto_conn *c, uint64_t id, sbx_err *err)
{
	int rc = 0;
	struct conn_stream *s = lookup(c, id, LOCAL, "cancel", &rc, err);
	if (!s)
		return rc;
	if (s->cancelled)
		return 0;
	rc = sbx_proto_encode_cancel(&c->w, id, err);
	if (rc < 0 || (rc = conn_emit(c, err)) < 0)
		return rc;
	s->cancelled = true;
	conn_unblock(c, s);
	return 0;
}

int sbx_proto_conn_end(sbx_proto_conn *c, uint64_t id, const void *result_map,
		       size_t map_len, sbx_err *err)
{
	int rc = 0;
	struct conn_stream *s = lookup(c, id, REMOTE, "end", &rc, err);
	if (!s)
		return rc;
	rc = sbx_proto_encode_end(&c->w, id, result_map, map_len, conn_out_max_frame(c), err);
	if (rc < 0 || (rc = conn_emit(c, err)) < 0)
		return rc;
	conn_close_stream(c, s);
	return 0;
}

int sbx_proto_conn_fail(sbx_proto_conn *c, uint64_t id, sbx_proto_code code,
			const char *msg, sbx_err *err)
{
	int rc = 0;
	struct conn_stream *s = lookup(c, id, REMOTE, "fail", &rc, err);
	if (!s)
		return rc;
	rc = sbx_proto_encode_err(&c->w, id, code, msg, conn_out_max_frame(c), err);
	if (rc < 0 || (rc = conn_emit(c, err)) < 0)
		return rc;
	conn_close_stream(c, s);
	return 0;
}

void sbx_proto_conn_consumed(sbx_proto_conn *c, uint64_t id, size_t n)
{
	struct conn_stream *s = conn_find(c, id);
	if (!s || c->closed || c->freed)
		return;
	/* never return more than was charged */
	uint64_t charged = c->window - s->recv_credit - s->owed;
	s->owed += n < charged ? n : charged;
	if (s->owed < c->window / 2)
		return;
	if (sbx_proto_encode_credit(&c->w, id, s->owed, NULL) < 0 || conn_emit(c, NULL) < 0)
		return; /* out of memory: retried with the next consumed() */
	s->recv_credit += s->owed;
	s->owed = 0;
}
