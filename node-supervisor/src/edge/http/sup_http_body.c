/* A request's body as it arrives on its connection: the next piece of it
 * (Content-Length or chunked, sup_httpin_parse.h's decoder), a buffered
 * body gathered to its bound before the act runs, and a streamed one
 * handed to the act as it reads, reading turned on and off by how much
 * waits (SUP_HTTP_BODY_HWM) and a stall bounded by --body-timeout. The
 * connection (sup_http_conn.c) owns reading, timers and the end; this
 * only asks for them. */
#include "sup_http_int.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <stdio.h>

#include "sbx/bev_fill.h"

/* ---- bodies ---- */

int sup_conn_body_next(sup_http_req *r, size_t max, sbx_err *err)
{
	struct evbuffer *in = sup_conn_input(r->c);
	uint64_t left = r->body_left;
	if (r->body_done)
		return 0;
	while (r->chunked) {
		struct evbuffer_iovec v;
		size_t used = 0;
		const char *why = "";
		int n = evbuffer_peek(in, -1, NULL, &v, 1);
		int rc = sup_httpin_chunked_frame(&r->dec, n > 0 ? v.iov_base : NULL,
						  n > 0 ? v.iov_len : 0, &used, &why);
		evbuffer_drain(in, used);
		if (rc < 0)
			return sbx_err_set(err, -EINVAL, "chunked body: %s", why);
		if (rc == SUP_HTTPIN_END) {
			r->body_done = true;
			return 0;
		}
		if (rc == SUP_HTTPIN_DATA) {
			left = r->dec.left;
			break;
		}
		if (used == 0)
			break;
	}
	size_t n = evbuffer_get_length(in);
	if (n > max)
		n = max;
	if (n > left)
		n = (size_t)left;
	if (n == 0 && r->c->rd_eof)
		return sbx_err_set(err, -ENODATA, "the connection ended before the body did");
	return n ? (int)n : -EAGAIN;
}

void sup_conn_body_took(sup_http_req *r, size_t n)
{
	if (r->chunked) {
		sup_httpin_chunked_took(&r->dec, n);
		return;
	}
	r->body_left -= n;
	r->body_done = r->body_left == 0;
}

void sup_conn_body(sup_http_req *r)
{
	sup_conn *c = r->c;
	sbx_err err;
	sbx_err_clear(&err);
	int n;
	while ((n = sup_conn_body_next(r, SUP_HTTP_BODY_HWM, &err)) > 0) {
		if (evbuffer_get_length(r->body) + (size_t)n > r->body_max) {
			char msg[128];
			snprintf(msg, sizeof(msg), "request body over the limit of %zu bytes",
				 r->body_max);
			c->close_after = true;
			sup_http_refuse(r, 413, "too_large", msg);
			return;
		}
		evbuffer_remove_buffer(sup_conn_input(c), r->body, (size_t)n);
		sup_conn_body_took(r, (size_t)n);
	}
	if (n == -EAGAIN) {
		sup_conn_reading(c, true);
		return;
	}
	if (n < 0) {
		c->close_after = true;
		sup_http_refuse(r, 400, "bad_request", err.msg);
		return;
	}
	sup_http_run(r);
}

/* ---- a streamed body ---- */

/* Reading stops while SUP_HTTP_BODY_HWM bytes wait, and once the body is
 * complete (what follows is the next request's). */
static void body_backpressure(sup_http_req *r)
{
	size_t have = evbuffer_get_length(sup_conn_input(r->c));
	sup_conn_reading(r->c, !r->body_done && have < SUP_HTTP_BODY_HWM);
}

void sup_http_body_start(sup_http_req *r, void (*on_ready)(void *ud), void *ud)
{
	sup_conn *c = r->c;
	r->on_ready = on_ready;
	r->ready_ud = ud;
	if (r->cont_owed) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
		r->cont_owed = false;
		evbuffer_add(sup_conn_output(c), cont, sizeof(cont) - 1);
	}
	body_backpressure(r);
	if (!r->body_done)
		sup_conn_timer(c, c->h->cfg.body_timeout_s);
	r->ready_pending = true;
	sup_conn_kick(c);
}

int sup_http_body(sup_http_req *r, size_t max, struct evbuffer **buf, sbx_err *err)
{
	sup_conn *c = r->c;
	struct evbuffer *in = sup_conn_input(c);
	bool more;
	if (r->timed_out && !r->body_done)
		return sbx_err_set(err, -ENOLINK, "the request body sent nothing for %u s",
				   c->h->cfg.body_timeout_s);
	/* libevent reads 4 KiB per read event (sbx/bev_fill.h): a body would
	 * go on in pieces that small. */
	if (!r->body_done && !c->tls && c->fd >= 0 && evbuffer_get_length(in) < max)
		sbx_bev_fill(c->bev, SUP_HTTP_BODY_HWM, SUP_HTTP_BODY_HWM, &more);
	int n = sup_conn_body_next(r, max, err);
	body_backpressure(r);
	if (n > 0)
		*buf = in;
	return n;
}

void sup_http_body_took(sup_http_req *r, size_t n)
{
	if (!n)
		return;
	sup_conn_body_took(r, n);
	body_backpressure(r);
	/* Progress re-arms the stall timer. */
	sup_conn_timer(r->c, r->body_done ? 0 : r->c->h->cfg.body_timeout_s);
}
