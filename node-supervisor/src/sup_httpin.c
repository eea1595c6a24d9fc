/* The filter's rules, from libevent 2.1's bufferevent_filter.c and http.c:
 * - the input filter runs only while the filter has EV_READ enabled; a
 *   BEV_OK makes the filter call evhttp's read callback, which aborts the
 *   process if the connection is answering a request (EVCON_WRITING). So
 *   during an upload the filter never moves a byte and returns
 *   BEV_NEED_MORE: the body waits in the underlying bufferevent.
 * - the filter's read timeout is re-armed only when it moves input, which an
 *   upload never does: taking body bytes re-arms it (bufferevent_enable),
 *   so a moving upload never times out and a stalled one does.
 * - the underlying's write high-water mark bounds what the filter hands
 *   down, so the filter's own output is what a slow reader leaves behind,
 *   where the download and streaming code already measure backpressure.
 * - the filter calls evhttp's write callback as soon as its output moved
 *   down, while the bytes may still wait in the underlying: evhttp would
 *   then free a "Connection: close" connection and lose them. So the output
 *   filter never reports progress, and evhttp's write callback is called
 *   from the underlying's, once everything reached the socket.
 * - enabling EV_WRITE on a filter does not move output written while it
 *   was disabled (evhttp writes a reply, then enables): a deferred flush
 *   does.
 * - a read high-water mark on the socket's bufferevent makes libevent
 *   2.1.12 call its read callback again and again (deferred, without
 *   reading) while the input stays at the mark with EV_READ enabled
 *   (bufferevent_inbuf_wm_check): a busy loop for as long as the agent
 *   holds its credit. So an upload's backpressure disables EV_READ on the
 *   socket's bufferevent instead, and enables it again once taken bytes
 *   make room. */
#include "sup_httpin.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "sbx/bev_fill.h"
#include "sup_httpin_parse.h"

/* What the filter hands down to the socket before it waits for a drain. */
#define OUT_HIGH (1024 * 1024)
/* Output pieces from this size on are moved, smaller ones copied. */
#define OUT_MOVE_MIN (16 * 1024)

typedef enum {
	ST_HEAD,        /* reading the next request head */
	ST_PASS,        /* passing a normal request's body */
	ST_TRANSPARENT, /* evhttp frames everything from here on */
	ST_BODY,        /* an upload's body, taken by its handler */
	ST_DISCARD,     /* after an upload: nothing more reaches evhttp */
} in_state;

struct sup_httpin {
	const sup_httpin_cfg *cfg;
	struct bufferevent *bev;   /* the filter evhttp uses */
	struct bufferevent *under; /* the socket */
	struct event *notify;
	struct event *flush;
	/* The filter's callbacks on the underlying, which ours wrap. */
	bufferevent_data_cb f_read, f_write;
	bufferevent_event_cb f_event;
	void *f_arg;
	in_state st;
	sup_httpin_headscan scan;
	uint64_t pass_left;
	/* the upload */
	bool upload;  /* its head went to evhttp */
	bool taken;   /* a handler took it */
	bool ended;   /* its body is complete */
	bool chunked;
	bool cont;    /* 100 Continue owed */
	bool eof;     /* the client's end came while the upload was taken */
	const char *refused;
	uint64_t length;
	uint64_t left;
	sup_httpin_chunked dec;
	void (*on_ready)(void *ud);
	void *ud;
	/* A reply whose end waits for the socket (sup_httpin_reply_end). */
	struct evhttp_request *end_req;
	LIST_ENTRY(sup_httpin) link;
};

/* Every connection's filter, so a handler finds its own from the
 * bufferevent evhttp shows it (a filter's context has no getter). */
static LIST_HEAD(, sup_httpin) conns = LIST_HEAD_INITIALIZER(conns);

/* ---- the input filter ---- */

/* Stop reading the socket while SUP_HTTPIN_BODY_HWM body bytes wait (see
 * the top), read again once there is room. */
static void body_backpressure(sup_httpin *c)
{
	bool full = evbuffer_get_length(bufferevent_get_input(c->under)) >= SUP_HTTPIN_BODY_HWM;
	bool reading = (bufferevent_get_enabled(c->under) & EV_READ) != 0;
	if (full && reading)
		bufferevent_disable(c->under, EV_READ);
	else if (!full && !reading && !c->eof)
		bufferevent_enable(c->under, EV_READ);
}

static bool method_has_body(const sup_httpin_head *h)
{
	static const char *const m[] = { "POST", "PUT", "PATCH", NULL };
	for (size_t i = 0; m[i]; i++)
		if (strlen(m[i]) == h->method_len && memcmp(m[i], h->method, h->method_len) == 0)
			return true;
	return false;
}

static bool is_upload(const sup_httpin *c, const sup_httpin_head *h)
{
	char method[16], path[1024];
	size_t pl = 0;
	while (pl < h->target_len && h->target[pl] != '?' && h->target[pl] != '#')
		pl++;
	if (h->method_len >= sizeof(method) || pl >= sizeof(path))
		return false;
	memcpy(method, h->method, h->method_len);
	method[h->method_len] = '\0';
	memcpy(path, h->target, pl);
	path[pl] = '\0';
	return c->cfg && c->cfg->is_upload && c->cfg->is_upload(method, path, c->cfg->ud);
}

static void upload_head(sup_httpin *c, const sup_httpin_head *h)
{
	c->upload = true;
	c->refused = h->bad;
	c->chunked = h->te_chunked;
	c->length = h->has_cl ? h->cl : c->chunked ? UINT64_MAX : 0;
	c->left = c->length;
	c->cont = h->expect_continue && h->minor >= 1;
	c->ended = !c->chunked && c->length == 0;
	sup_httpin_chunked_init(&c->dec);
	c->st = h->bad ? ST_DISCARD : ST_BODY;
}

/* Scan what arrived of the head; once complete, pass it (a normal request)
 * or its rewrite (an upload). true when the state moved on. */
static bool take_head(sup_httpin *c, struct evbuffer *src, struct evbuffer *dst)
{
	size_t avail = evbuffer_get_length(src);
	int r = 0;
	while (r == 0 && c->scan.total < avail) {
		struct evbuffer_ptr ptr;
		struct evbuffer_iovec v[8];
		if (evbuffer_ptr_set(src, &ptr, c->scan.total, EVBUFFER_PTR_SET) < 0)
			break;
		int nv = evbuffer_peek(src, -1, &ptr, v, 8);
		for (int i = 0; i < nv && i < 8 && r == 0; i++) {
			size_t e;
			r = sup_httpin_headscan_feed(&c->scan, v[i].iov_base, v[i].iov_len, &e);
		}
	}
	if (r == 0)
		return false;
	sup_httpin_head h;
	size_t hl = c->scan.total;
	const char *buf = r > 0 ? (const char *)evbuffer_pullup(src, (ev_ssize_t)hl) : NULL;
	if (!buf || sup_httpin_parse_head(buf, hl, &h) < 0) {
		c->st = ST_TRANSPARENT;
		return true;
	}
	memset(&c->scan, 0, sizeof(c->scan));
	if (!is_upload(c, &h)) {
		/* What evhttp would frame differently, it frames from now on. */
		if (h.has_te || h.bad || (h.cl > 0 && !method_has_body(&h)) ||
		    evbuffer_remove_buffer(src, dst, hl) != (int)hl) {
			c->st = ST_TRANSPARENT;
			return true;
		}
		c->pass_left = h.cl;
		c->st = h.cl ? ST_PASS : ST_HEAD;
		return true;
	}
	struct evbuffer *head = evbuffer_new();
	if (!head || sup_httpin_rewrite_head(buf, hl, head) < 0 ||
	    evbuffer_add_buffer(dst, head) < 0) {
		if (head)
			evbuffer_free(head);
		c->st = ST_TRANSPARENT;
		return true;
	}
	evbuffer_free(head);
	evbuffer_drain(src, hl);
	upload_head(c, &h);
	return true;
}

static enum bufferevent_filter_result in_filter(struct evbuffer *src, struct evbuffer *dst,
						ev_ssize_t lim, enum bufferevent_flush_mode mode,
						void *arg)
{
	sup_httpin *c = arg;
	size_t before = evbuffer_get_length(dst);
	(void)lim;
	(void)mode;
	for (;;) {
		size_t avail = evbuffer_get_length(src), k;
		bool more = false;
		switch (c->st) {
		case ST_TRANSPARENT:
			evbuffer_remove_buffer(src, dst, avail);
			break;
		case ST_PASS:
			k = avail < c->pass_left ? avail : (size_t)c->pass_left;
			if (k && evbuffer_remove_buffer(src, dst, k) == (int)k) {
				c->pass_left -= k;
				if (c->pass_left == 0)
					c->st = ST_HEAD;
				more = true;
			}
			break;
		case ST_HEAD:
			more = avail && take_head(c, src, dst);
			break;
		case ST_BODY:
			if (c->on_ready && avail)
				event_active(c->notify, EV_READ, 0);
			body_backpressure(c);
			break;
		case ST_DISCARD:
			evbuffer_drain(src, avail);
			break;
		}
		if (!more)
			break;
	}
	/* BEV_OK only when evhttp has something new to read (see the top). */
	return evbuffer_get_length(dst) > before ? BEV_OK : BEV_NEED_MORE;
}

static void on_notify(evutil_socket_t fd, short what, void *arg)
{
	sup_httpin *c = arg;
	(void)fd;
	(void)what;
	if (c->on_ready)
		c->on_ready(c->ud);
}

/* ---- output ---- */

static enum bufferevent_filter_result out_filter(struct evbuffer *src, struct evbuffer *dst,
						 ev_ssize_t lim, enum bufferevent_flush_mode mode,
						 void *arg)
{
	(void)mode;
	(void)arg;
	size_t n = evbuffer_get_length(src);
	if (lim >= 0 && (size_t)lim < n)
		n = (size_t)lim;
	/* Big pieces move as they are; small ones (chunk heads, SSE events)
	 * are copied into the socket's chains, since each moved alone keeps a
	 * chain of 1 KiB or more alive: a megabyte of small events held for a
	 * slow reader would cost many times that. */
	while (n > 0) {
		struct evbuffer_iovec v;
		if (evbuffer_peek(src, -1, NULL, &v, 1) < 1)
			break;
		size_t k = v.iov_len < n ? v.iov_len : n;
		int rc = k >= OUT_MOVE_MIN ? evbuffer_remove_buffer(src, dst, k)
					   : evbuffer_add(dst, v.iov_base, k);
		if (rc < 0)
			return BEV_ERROR;
		if (k < OUT_MOVE_MIN)
			evbuffer_drain(src, k);
		n -= k;
	}
	/* Never BEV_OK: evhttp hears of the write from under_write (see top). */
	return BEV_NEED_MORE;
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	sup_httpin *c = arg;
	bufferevent_event_cb ecb = NULL;
	(void)fd;
	(void)what;
	/* bufferevent_free clears the callbacks at once, while its memory (and
	 * this context) lives until libevent finalizes it: a flush scheduled
	 * before evhttp freed the connection must not touch the underlying. */
	bufferevent_getcb(c->bev, NULL, NULL, &ecb, NULL);
	if (ecb && (bufferevent_get_enabled(c->bev) & EV_WRITE))
		bufferevent_flush(c->bev, EV_WRITE, BEV_NORMAL);
}

static void out_added(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	sup_httpin *c = arg;
	(void)buf;
	/* With EV_WRITE on, the filter moved the bytes itself already. */
	if (info->n_added && !(bufferevent_get_enabled(c->bev) & EV_WRITE))
		event_active(c->flush, EV_WRITE, 0);
}

static void under_read(struct bufferevent *u, void *arg)
{
	sup_httpin *c = arg;
	c->f_read(u, c->f_arg);
}

static void under_event(struct bufferevent *u, short what, void *arg)
{
	sup_httpin *c = arg;
	/* libevent reports the client's EOF as soon as it reads it, while body
	 * bytes may still wait in the input, and evhttp would drop the
	 * connection: a client that half-closes after its body still wants
	 * the answer. The taker sees the body end or come up short instead
	 * (libevent stopped reading). Errors go on as they are. */
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR) && c->taken &&
	    (c->st == ST_BODY || c->ended)) {
		c->eof = true;
		if (c->st == ST_BODY && c->on_ready)
			event_active(c->notify, EV_READ, 0);
		return;
	}
	c->f_event(u, what, c->f_arg);
}

/* The deferred end of a reply: evhttp may free the connection in it. */
static void end_now(sup_httpin *c)
{
	struct evhttp_request *req = c->end_req;
	c->end_req = NULL;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), NULL, NULL);
	evhttp_send_reply_end(req);
}

/* The connection went away while a reply's end waited for the socket. */
static void end_on_close(struct evhttp_connection *evcon, void *arg)
{
	sup_httpin *c = arg;
	struct evhttp_request *req = c->end_req;
	c->end_req = NULL;
	/* Detached (the connection failed) it is ours to free; still attached,
	 * evhttp frees it with the connection. */
	if (req && evhttp_request_get_connection(req) != evcon)
		evhttp_send_reply_end(req);
}

static void under_write(struct bufferevent *u, void *arg)
{
	sup_httpin *c = arg;
	struct bufferevent *bev = c->bev;
	c->f_write(u, c->f_arg); /* hands down more of the filter's output */
	if (c->end_req && !evbuffer_get_length(bufferevent_get_output(u)) &&
	    !evbuffer_get_length(bufferevent_get_output(bev))) {
		end_now(c);
		return;
	}
	if (!(bufferevent_get_enabled(bev) & EV_WRITE))
		return;
	/* The socket took bytes: that re-arms the write timeout (the filter
	 * does it only when its output filter reports progress). */
	bufferevent_enable(bev, EV_WRITE);
	if (evbuffer_get_length(bufferevent_get_output(u)) ||
	    evbuffer_get_length(bufferevent_get_output(bev)))
		return;
	/* All of it reached the socket: now it is written, for evhttp too
	 * (which may free the connection in the call). */
	bufferevent_data_cb wcb = NULL;
	void *warg = NULL;
	bufferevent_getcb(bev, NULL, &wcb, NULL, &warg);
	if (wcb)
		wcb(bev, warg);
}

/* ---- connections ---- */

static void ctx_free(void *arg)
{
	sup_httpin *c = arg;
	LIST_REMOVE(c, link);
	if (c->notify)
		event_free(c->notify);
	if (c->flush)
		event_free(c->flush);
	free(c);
}

struct bufferevent *sup_httpin_bevcb(struct event_base *base, void *cfg)
{
	/* NULL makes evhttp use a plain socket bufferevent: no uploads on that
	 * connection (they are read whole, within --max-body), nothing worse. */
	sup_httpin *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->cfg = cfg;
	LIST_INSERT_HEAD(&conns, c, link);
	c->notify = event_new(base, -1, 0, on_notify, c);
	c->flush = event_new(base, -1, 0, on_flush, c);
	c->under = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (c->notify && c->flush && c->under)
		c->bev = bufferevent_filter_new(c->under, in_filter, out_filter,
						BEV_OPT_CLOSE_ON_FREE, ctx_free, c);
	if (!c->bev || !evbuffer_add_cb(bufferevent_get_output(c->bev), out_added, c)) {
		if (c->bev) {
			bufferevent_free(c->bev); /* frees c and the underlying */
			return NULL;
		}
		if (c->under)
			bufferevent_free(c->under);
		if (c->notify)
			event_free(c->notify);
		if (c->flush)
			event_free(c->flush);
		LIST_REMOVE(c, link);
		free(c);
		return NULL;
	}
	bufferevent_getcb(c->under, &c->f_read, &c->f_write, &c->f_event, &c->f_arg);
	bufferevent_setcb(c->under, under_read, under_write, under_event, c);
	/* Low mark 0: its write callback means "all reached the socket". */
	bufferevent_setwatermark(c->under, EV_WRITE, 0, OUT_HIGH);
	return c->bev;
}

sup_httpin *sup_httpin_upload_of(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
	sup_httpin *c;
	LIST_FOREACH(c, &conns, link)
		if (bev && c->bev == bev)
			return c->upload && !c->taken ? c : NULL;
	return NULL;
}

struct event *sup_httpin_watch_hangup(struct event_base *base, struct evhttp_request *req,
				      void (*cb)(evutil_socket_t fd, short what, void *ud),
				      void *ud)
{
	if (!base || !(event_base_get_features(base) & EV_FEATURE_EARLY_CLOSE))
		return NULL;
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	struct event *ev = fd >= 0 ? event_new(base, fd, EV_CLOSED, cb, ud) : NULL;
	if (ev && event_add(ev, NULL) < 0) {
		event_free(ev);
		ev = NULL;
	}
	return ev;
}

void sup_httpin_reply_end(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
	sup_httpin *c = NULL, *it;
	LIST_FOREACH(it, &conns, link)
		if (bev && it->bev == bev)
			c = it;
	/* evhttp ends a reply without chunks at once when the filter's output
	 * is empty, and frees a "Connection: close" connection with the last
	 * bytes still in the socket's bufferevent: those wait for under_write. */
	if (!c || c->end_req || evbuffer_get_length(bufferevent_get_output(bev)) ||
	    !evbuffer_get_length(bufferevent_get_output(c->under))) {
		evhttp_send_reply_end(req);
		return;
	}
	c->end_req = req;
	evhttp_connection_set_closecb(evcon, end_on_close, c);
}

/* ---- the upload's body ---- */

const char *sup_httpin_refused(const sup_httpin *c)
{
	return c->refused;
}

uint64_t sup_httpin_length(const sup_httpin *c)
{
	return c->length;
}

bool sup_httpin_wants_continue(const sup_httpin *c)
{
	return c->cont;
}

void sup_httpin_start(sup_httpin *c, void (*on_ready)(void *ud), void *ud)
{
	c->taken = true;
	c->on_ready = on_ready;
	c->ud = ud;
	if (c->st != ST_BODY)
		return;
	body_backpressure(c);
	bufferevent_enable(c->bev, EV_READ);
	if (evbuffer_get_length(bufferevent_get_input(c->under)))
		event_active(c->notify, EV_READ, 0);
}

void sup_httpin_send_continue(sup_httpin *c)
{
	static const char msg[] = "HTTP/1.1 100 Continue\r\n\r\n";
	if (!c->cont)
		return;
	c->cont = false;
	/* Straight to the socket: evhttp has nothing queued for this
	 * connection before its answer to this request. */
	bufferevent_write(c->under, msg, sizeof(msg) - 1);
}

/* The body is complete: stop reading, so a client that half-closes after
 * it still gets its answer (evhttp re-enables reading when it writes). */
static void body_ended(sup_httpin *c)
{
	c->ended = true;
	c->st = ST_DISCARD;
	bufferevent_disable(c->bev, EV_READ);
	if (!c->eof)
		bufferevent_enable(c->under, EV_READ); /* the rest is dropped */
}

/* libevent reads 4 KiB per read event (sbx/bev_fill.h): a body would go to
 * the agent in 4 KiB frames (5 s of CPU per GiB). The body's taker reads the
 * socket itself, up to the high-water mark. */
static void body_fill(sup_httpin *c)
{
	bool more;
	(void)sbx_bev_fill(c->under, SUP_HTTPIN_BODY_HWM, SUP_HTTPIN_BODY_HWM, &more);
	body_backpressure(c);
}

int sup_httpin_body(sup_httpin *c, size_t max, struct evbuffer **buf, sbx_err *err)
{
	struct evbuffer *in = bufferevent_get_input(c->under);
	if (c->ended)
		return 0;
	if (evbuffer_get_length(in) < max)
		body_fill(c);
	if (c->st != ST_BODY)
		return sbx_err_set(err, -EBADMSG, "upload body no longer readable");
	uint64_t left = c->left;
	while (c->chunked) {
		struct evbuffer_iovec v;
		size_t used = 0;
		const char *why = "";
		int n = evbuffer_peek(in, -1, NULL, &v, 1);
		int r = sup_httpin_chunked_frame(&c->dec, n > 0 ? v.iov_base : NULL,
						 n > 0 ? v.iov_len : 0, &used, &why);
		evbuffer_drain(in, used);
		if (r < 0)
			return sbx_err_set(err, -EBADMSG, "chunked body: %s", why);
		if (r == SUP_HTTPIN_END) {
			body_ended(c);
			return 0;
		}
		if (r == SUP_HTTPIN_DATA) {
			left = c->dec.left;
			break;
		}
		if (used == 0)
			return c->eof ? sbx_err_set(err, -ECONNRESET,
						    "the connection ended before the body did")
				      : -EAGAIN;
	}
	size_t n = evbuffer_get_length(in);
	if (n > max)
		n = max;
	if (n > left)
		n = (size_t)left;
	if (n == 0 && c->eof)
		return sbx_err_set(err, -ECONNRESET, "the connection ended before the body did");
	if (n == 0)
		return -EAGAIN;
	*buf = in;
	return (int)n;
}

void sup_httpin_took(sup_httpin *c, size_t n)
{
	if (n == 0 || c->st != ST_BODY)
		return;
	if (c->chunked) {
		sup_httpin_chunked_took(&c->dec, n);
	} else {
		c->left -= n;
		if (c->left == 0) {
			body_ended(c);
			return;
		}
	}
	body_backpressure(c);
	/* Progress re-arms the idle timeout. */
	bufferevent_enable(c->bev, EV_READ);
}

void sup_httpin_stop(sup_httpin *c)
{
	c->on_ready = NULL;
	c->ud = NULL;
	event_del(c->notify);
	if (c->ended)
		return;
	/* Whatever the client still sends is read and dropped, so it is not
	 * blocked writing and sees the answer. */
	c->st = ST_DISCARD;
	evbuffer_drain(bufferevent_get_input(c->under), evbuffer_get_length(bufferevent_get_input(c->under)));
	if (!c->eof)
		bufferevent_enable(c->under, EV_READ);
	bufferevent_enable(c->bev, EV_READ);
}
