/* One relayed request (DESIGN.md, "Relay"): the head passed on, then bytes
 * both ways as they are, so the owner's answer (JSON, chunked streams, a
 * 101 and whatever follows it) reaches the client unchanged and the
 * client's body the owner. The head loses the hop-by-hop headers (RFC 9110
 * 7.6.1) and any node-to-node header the client sent, and gains the node
 * credentials (the cluster key, this node's token), the hop count and the
 * upgrade the client asked for.
 *
 * Kept alive: a request framed by its head (no body, a Content-Length, or
 * buffered here) goes over a connection to the owner kept from an earlier
 * one (sup_relay_keep.c) or a new one, and the owner's answer is followed
 * by its framing (RFC 9112 6.3: 1xx heads, Content-Length, chunked, none
 * for HEAD, 204 and 304) without being changed; once it is whole, the
 * connection is kept for the next request to that node, and the client's
 * connection goes on to its next request. A chunked request body or an
 * upgrade keeps the old way: Connection: close, the owner's end is the
 * answer's end, and both connections close after it. A kept connection
 * the owner closed or reset before any byte of an answer (it restarted,
 * or closed it as idle while the request was on its way) is not the
 * owner's refusal: an idempotent request without a body of its own to
 * stream (GET, HEAD, DELETE, OPTIONS; PUT with none) goes again, once, on
 * a new connection, as RFC 9112 9.3.1 allows a client.
 * Backpressure: each way at most SUP_RELAY_WINDOW waits here; the owner
 * is read only while the client's backlog is under SUP_HTTP_HWM, the
 * client only while the owner's queue is under the window. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "sup_httpin_parse.h"
#include "sup_log.h"
#include "sup_relay_int.h"

/* Hop-by-hop (with what the Connection header names), and the headers
 * between nodes, which only this node may set. */
static const char *const dropped[] = {
	"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Upgrade",
	"Proxy-Authorization", "Proxy-Authenticate", SUP_HTTP_CLUSTER_KEY, SUP_HTTP_RELAY_HOPS,
	SUP_HTTP_RELAY_FROM, SUP_HTTP_NODE_TOKEN, NULL,
};
/* A buffered body goes with a framing of our own. */
static const char *const framing[] = { "Content-Length", "Transfer-Encoding", "Expect", NULL };

enum { RESP_HEAD, RESP_LENGTH, RESP_CHUNKED, RESP_CLOSE, RESP_DONE };

static bool listed(const char *const *l, const char *name)
{
	for (size_t i = 0; l[i]; i++)
		if (strcasecmp(l[i], name) == 0)
			return true;
	return false;
}

static int build_head(sup_relay_pipe *p, const sup_http_in *in, bool upgrade)
{
	const char *conn = sup_http_in_header(in, "Connection");
	const char *upg = sup_http_in_header(in, "Upgrade");
	struct evbuffer *h = p->head;
	int rc = evbuffer_add_printf(h, "%s %s%s%s HTTP/1.1\r\n", in->method, in->path,
				     in->query ? "?" : "", in->query ? in->query : "");
	for (size_t i = 0; rc >= 0 && i < in->nhdrs; i++) {
		const char *n = in->hdrs[i].name;
		if (listed(dropped, n) || (p->body_only && listed(framing, n)) ||
		    (conn && sup_httpin_has_token(conn, strlen(conn), n)))
			continue;
		rc = evbuffer_add_printf(h, "%s: %s\r\n", n, in->hdrs[i].value);
	}
	if (rc >= 0 && upgrade)
		rc = evbuffer_add_printf(h, "Connection: Upgrade\r\nUpgrade: %s\r\n", upg);
	else if (rc >= 0 && !p->keep)
		rc = evbuffer_add_printf(h, "Connection: close\r\n");
	if (rc >= 0 && p->body_only)
		rc = evbuffer_add_printf(h, "Content-Length: %zu\r\n", in->body_len);
	if (rc >= 0 && p->x->key)
		rc = evbuffer_add_printf(h, "%s: %s\r\n", SUP_HTTP_CLUSTER_KEY, p->x->key);
	if (rc >= 0 && p->x->node_token)
		rc = evbuffer_add_printf(h, "%s: %s\r\n", SUP_HTTP_NODE_TOKEN, p->x->node_token);
	if (rc >= 0)
		rc = evbuffer_add_printf(h, "%s: 1\r\n%s: %s\r\n\r\n", SUP_HTTP_RELAY_HOPS,
					 SUP_HTTP_RELAY_FROM, p->x->node);
	if (rc >= 0 && p->body_only && in->body_len)
		rc = evbuffer_add(h, in->body, in->body_len);
	return rc < 0 ? -ENOMEM : 0;
}

/* The connection to the owner: kept for another request when this one
 * and its answer were whole, else closed. */
static void finish(sup_relay_pipe *p, bool whole)
{
	p->over = true;
	if (!p->up)
		return;
	if (whole && p->keep && !p->resp_close && p->body_left == 0)
		sup_relay_keep_put(p->x, p->url, p->up);
	else
		bufferevent_free(p->up);
	p->up = NULL;
}

/* Before the owner's first byte reached the client: our own answer. */
static void fail(sup_relay_pipe *p, const char *why)
{
	sbx_err e;
	sbx_err_set(&e, -ENETUNREACH, "node %s %s", p->node, why);
	finish(p, false);
	if (p->answered)
		sup_http_cut(p->r, e.msg);
	else
		sup_http_fail(p->r, &e);
}

/* The answer is whole: the client's connection goes on when the request
 * was read whole too. */
static void answered(sup_relay_pipe *p)
{
	bool kept = p->keep && p->body_left == 0;
	finish(p, true);
	if (kept)
		sup_http_takeover_end(p->r);
	else
		sup_http_end(p->r);
}

/* A head at the start of in (the empty line found): its framing. 0, or
 * -EBADMSG (a head we will not read). */
static int read_head(sup_relay_pipe *p, struct evbuffer *in, size_t len)
{
	const char *b = (const char *)evbuffer_pullup(in, (ssize_t)len);
	sup_httpin_head *h = calloc(1, sizeof(*h));
	int rc = h && b ? sup_httpin_parse_response(b, len, h) : -ENOMEM;
	if (rc < 0 || h->bad) {
		free(h);
		return -EBADMSG;
	}
	p->resp_close |= h->conn_close || h->minor == 0;
	p->status = h->status;
	if (h->status == 101) {
		p->resp = RESP_CLOSE; /* the upgraded bytes: until the end */
		p->resp_close = true;
	} else if (h->status < 200) {
		p->resp = RESP_HEAD; /* 100 Continue and the like: a head follows */
	} else if (p->head_req || h->status == 204 || h->status == 304) {
		p->resp = RESP_DONE;
	} else if (h->te_chunked) {
		p->resp = RESP_CHUNKED;
		sup_httpin_chunked_init(&p->dec);
	} else if (h->has_cl) {
		p->resp = h->cl ? RESP_LENGTH : RESP_DONE;
		p->resp_left = h->cl;
	} else {
		p->resp = RESP_CLOSE;
		p->resp_close = true;
	}
	free(h);
	return 0;
}

/* How many bytes at the start of in belong to the answer, following its
 * framing (p->resp moves on): -EAGAIN none yet (a head not complete),
 * -EBADMSG bad framing. */
static ssize_t frame(sup_relay_pipe *p, struct evbuffer *in)
{
	size_t avail = evbuffer_get_length(in), n = 0;
	while (n < avail && p->resp != RESP_DONE) {
		if (p->resp == RESP_CLOSE)
			return (ssize_t)avail;
		if (p->resp == RESP_LENGTH) {
			uint64_t k = avail - n < p->resp_left ? avail - n : p->resp_left;
			n += (size_t)k;
			p->resp_left -= k;
			if (!p->resp_left)
				p->resp = RESP_DONE;
			continue;
		}
		if (p->resp == RESP_HEAD) {
			/* heads come whole before any byte of them is passed on */
			if (n > 0)
				break;
			struct evbuffer_ptr at = evbuffer_search(in, "\r\n\r\n", 4, NULL);
			if (at.pos < 0) {
				if (avail > SUP_HTTPIN_HEAD_MAX)
					return -EBADMSG;
				return -EAGAIN;
			}
			size_t len = (size_t)at.pos + 4;
			if (len > SUP_HTTPIN_HEAD_MAX || read_head(p, in, len) < 0)
				return -EBADMSG;
			n = len;
			if (p->resp == RESP_HEAD)
				break; /* a 1xx: passed on; its successor is read next */
			continue;
		}
		/* chunked: framing bytes read, data bytes counted */
		if (p->dec.left) {
			uint64_t k = avail - n < p->dec.left ? avail - n : p->dec.left;
			sup_httpin_chunked_took(&p->dec, k);
			n += (size_t)k;
			continue;
		}
		struct evbuffer_ptr at;
		struct evbuffer_iovec v;
		const char *why = "";
		size_t used = 0;
		evbuffer_ptr_set(in, &at, n, EVBUFFER_PTR_SET);
		if (evbuffer_peek(in, -1, &at, &v, 1) < 1)
			break;
		int rc = sup_httpin_chunked_frame(&p->dec, v.iov_base, v.iov_len, &used, &why);
		if (rc < 0)
			return -EBADMSG;
		n += used;
		if (rc == SUP_HTTPIN_END)
			p->resp = RESP_DONE;
		else if (rc == SUP_HTTPIN_MORE && used == 0)
			break;
	}
	return (ssize_t)n;
}

/* Owner -> client, as far as the client keeps up (all: whatever it holds,
 * at the owner's end); the answer followed to its end. */
static void pump_down(sup_relay_pipe *p, bool all)
{
	if (p->over || !p->up)
		return;
	struct evbuffer *in = bufferevent_get_input(p->up);
	while (!p->over && evbuffer_get_length(in) && p->resp != RESP_DONE &&
	       (all || sup_http_backlog(p->r) < SUP_HTTP_HWM)) {
		ssize_t n = frame(p, in);
		if (n == -EAGAIN || n == 0)
			return; /* more of it first */
		if (n < 0) {
			fail(p, "answered with framing that cannot be read");
			return;
		}
		sup_http_raw_status(p->r, p->status);
		p->answered = true;
		evbuffer_remove_buffer(in, p->out, (size_t)n);
		sup_http_write(p->r, p->out);
	}
	if (p->over || p->resp != RESP_DONE)
		return;
	/* A whole answer, and more from the owner: no request asked for it. */
	if (evbuffer_get_length(in))
		p->resp_close = true;
	answered(p);
}

/* Client -> owner, as far as the owner keeps up (and, kept alive, no
 * further than this request's body); the client's half-close passed on
 * (not kept alive) once all it sent is out. */
static void pump_up(sup_relay_pipe *p)
{
	if (p->over || !p->up || p->body_only)
		return;
	struct evbuffer *in = sup_http_raw_input(p->r);
	struct evbuffer *out = bufferevent_get_output(p->up);
	size_t held = evbuffer_get_length(out);
	if (held < SUP_RELAY_WINDOW) {
		size_t room = SUP_RELAY_WINDOW - held;
		if (p->keep && room > p->body_left)
			room = (size_t)p->body_left;
		int moved = evbuffer_remove_buffer(in, out, room);
		if (p->keep && moved > 0)
			p->body_left -= (uint64_t)moved;
	}
	held = evbuffer_get_length(out);
	bool more = p->keep ? p->body_left > 0 : true;
	sup_http_raw_pause(p->r, !more || held >= SUP_RELAY_WINDOW || evbuffer_get_length(in) > 0);
	if (!p->keep && !p->up_shut && held == 0 && sup_http_raw_ended(p->r)) {
		p->up_shut = true;
		sup_relay_shut_write(p->up);
	}
}

static void on_client(void *ud)
{
	pump_up(ud);
}

/* The owner is read no further than SUP_RELAY_WINDOW ahead of the
 * client: reading off at the window, on again below it. Not a read
 * watermark: libevent's OpenSSL bufferevent, suspended by one halfway
 * through a record, keeps the rest of it unread until the socket wakes
 * again, which an answer's last record never does; turned off, it reads
 * what it decrypted first. */
static void up_window(sup_relay_pipe *p)
{
	if (p->over || !p->up)
		return;
	bool full = evbuffer_get_length(bufferevent_get_input(p->up)) >= SUP_RELAY_WINDOW;
	if (full != p->up_paused) {
		p->up_paused = full;
		if (full)
			bufferevent_disable(p->up, EV_READ);
		else
			bufferevent_enable(p->up, EV_READ);
	}
}

static void on_drained(void *ud)
{
	pump_down(ud, false);
	up_window(ud);
}

static void up_read(struct bufferevent *bev, void *ud)
{
	pump_down(ud, false);
	up_window(ud);
}

static void up_write(struct bufferevent *bev, void *ud)
{
	pump_up(ud);
}

static void started(sup_relay_pipe *p)
{
	bufferevent_enable(p->up, EV_READ | EV_WRITE);
	if (!p->body_only)
		sup_http_raw_pause(p->r, false);
	pump_up(p);
}

static void up_read(struct bufferevent *bev, void *ud);
static void up_write(struct bufferevent *bev, void *ud);
static void up_event(struct bufferevent *bev, short what, void *ud);

/* Send the request to the owner over up (head kept whole when it may go
 * again). */
static int send_head(sup_relay_pipe *p)
{
	p->up_paused = false;
	if (!p->replay)
		return bufferevent_write_buffer(p->up, p->head);
	size_t len = evbuffer_get_length(p->head);
	const void *b = evbuffer_pullup(p->head, -1);
	return len && !b ? -1 : bufferevent_write(p->up, b, len);
}

/* The kept connection p used ended (why) before any byte of an answer:
 * true when the request went again on a new one (or failed doing so). */
static bool retried_fresh(sup_relay_pipe *p, const char *why)
{
	if (!p->reused || !p->replay || p->retried || p->answered || p->status ||
	    evbuffer_get_length(bufferevent_get_input(p->up)))
		return false;
	p->retried = true;
	p->reused = false;
	bufferevent_free(p->up);
	sbx_err e;
	p->up = sup_relay_connect(p->x->base, p->x->dns, p->x->tls, p->url, p->x->connect_ms, up_read,
				  up_write, up_event, p, &e);
	if (!p->up || send_head(p) < 0) {
		fail(p, p->up ? "unreachable: out of memory" : "unreachable after a stale kept connection");
		return true;
	}
	sup_info("relay: the kept connection to node %s was stale (%s): the request goes again on a new one",
		 p->node, why);
	sup_http_log_tag(p->r, " via node %s (kept one stale: sent again)", p->tag);
	return true;
}

static void up_event(struct bufferevent *bev, short what, void *ud)
{
	sup_relay_pipe *p = ud;
	if (what & BEV_EVENT_CONNECTED) {
		sup_relay_connected(bev);
		started(p);
		return;
	}
	char why[200] = "the connection failed";
	if (what & BEV_EVENT_ERROR)
		sup_relay_dial_error(bev, why, sizeof(why));
	if ((what & (BEV_EVENT_EOF | BEV_EVENT_ERROR)) &&
	    retried_fresh(p, what & BEV_EVENT_EOF ? "closed" : why))
		return;
	if (what & BEV_EVENT_EOF) {
		/* Whatever came is passed on; then the answer is whole (read to
		 * its end, or read until the end) or cut short. */
		p->resp_close = true;
		pump_down(p, true);
		if (p->over)
			return;
		if (!p->answered)
			fail(p, "closed the connection without an answer");
		else if (p->resp != RESP_CLOSE)
			fail(p, "closed the connection before its answer ended");
		else {
			finish(p, false);
			sup_http_end(p->r);
		}
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		char late[64];
		snprintf(late, sizeof(late), "not reached within %u ms", p->x->connect_ms);
		fail(p, late);
		return;
	}
	char said[240];
	snprintf(said, sizeof(said), "%s: %s", p->answered ? "lost" : "unreachable", why);
	fail(p, said);
}

int sup_relay_pipe_start(sup_relay_pipe *p, sup_relay *x, sup_http_req *r, const char *tag,
			 bool body_only, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(r);
	const char *conn = sup_http_in_header(in, "Connection");
	bool upgrade = !body_only && sup_http_in_header(in, "Upgrade") && conn &&
		       sup_httpin_has_token(conn, strlen(conn), "upgrade");
	p->x = x;
	p->r = r;
	p->body_only = body_only;
	p->status = 0;
	p->resp = RESP_HEAD;
	p->head_req = strcmp(in->method, "HEAD") == 0;
	/* Kept alive when the request's end is known from its head. */
	p->keep = !upgrade && (body_only || in->body_expect != UINT64_MAX);
	p->body_left = body_only ? 0 : in->body_expect;
	const char *m = in->method;
	p->replay = p->keep && (body_only || in->body_expect == 0) &&
		    (!strcmp(m, "GET") || !strcmp(m, "HEAD") || !strcmp(m, "DELETE") || !strcmp(m, "OPTIONS") ||
		     !strcmp(m, "PUT"));
	p->retried = false;
	snprintf(p->tag, sizeof(p->tag), "%s", tag);
	snprintf(p->node, sizeof(p->node), "%s", tag);
	int rc = x->dir.ops ? x->dir.ops->find(x->dir.ud, tag, p->node, sizeof(p->node), p->url,
					       sizeof(p->url))
			    : -ENOENT;
	if (rc == -ENOTUNIQ)
		return sbx_err_set(err, -ENETUNREACH, "sandbox %s: its node tag %s names more than "
						      "one node of the directory (their names clash): "
						      "refused", in->id ? in->id : "", tag);
	if (rc < 0)
		return sbx_err_set(err, -ENOENT, "no sandbox %s: node %s is not known here",
				   in->id ? in->id : "", tag);
	p->head = evbuffer_new();
	p->out = evbuffer_new();
	if (!p->head || !p->out || build_head(p, in, upgrade) < 0)
		return sbx_err_set(err, -ENOMEM, "relay: out of memory");
	p->up = p->keep ? sup_relay_keep_take(x, p->url) : NULL;
	bool reused = p->reused = p->up != NULL;
	if (reused)
		bufferevent_setcb(p->up, up_read, up_write, up_event, p);
	else
		p->up = sup_relay_connect(x->base, x->dns, x->tls, p->url, x->connect_ms, up_read, up_write,
					  up_event, p, err);
	if (!p->up)
		return sbx_err_wrap(err, "node %s", p->node);
	if (send_head(p) < 0)
		return sbx_err_set(err, -ENOMEM, "relay: out of memory");
	sup_http_log_tag(r, " via node %s%s", tag, reused ? " (kept)" : "");
	sup_http_takeover(r, on_client, p);
	/* A tunnel's half-close is passed on; a request framed by its head
	 * is over when the client goes (the owner then stops its work). */
	if (!p->keep)
		sup_http_raw_half_close(r);
	sup_http_on_drained(r, on_drained, p);
	if (reused)
		started(p);
	return 0;
}

void sup_relay_pipe_release(sup_relay_pipe *p)
{
	finish(p, false);
	if (p->head)
		evbuffer_free(p->head);
	if (p->out)
		evbuffer_free(p->out);
	p->head = NULL;
	p->out = NULL;
}
