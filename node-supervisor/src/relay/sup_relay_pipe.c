/* One relayed request (DESIGN.md, "Relay"): the head passed on, then bytes
 * both ways as they are, so the owner's answer (JSON, chunked streams, a
 * 101 and whatever follows it) reaches the client unchanged and the
 * client's body (Content-Length or chunked, as sent) the owner. The head
 * loses the hop-by-hop headers (RFC 9110 7.6.1) and any node-to-node
 * header the client sent, and gains the cluster key, the hop count and
 * Connection: close (one request per connection to the owner: its end is
 * the answer's end, so nothing here parses the answer) or the upgrade the
 * client asked for. The client's connection closes after the answer.
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
	SUP_HTTP_RELAY_FROM, NULL,
};
/* A buffered body goes with a framing of our own. */
static const char *const framing[] = { "Content-Length", "Transfer-Encoding", "Expect", NULL };

static bool listed(const char *const *l, const char *name)
{
	for (size_t i = 0; l[i]; i++)
		if (strcasecmp(l[i], name) == 0)
			return true;
	return false;
}

static int build_head(sup_relay_pipe *p, const sup_http_in *in)
{
	const char *conn = sup_http_in_header(in, "Connection");
	const char *upg = sup_http_in_header(in, "Upgrade");
	bool upgrade = !p->body_only && upg && conn &&
		       sup_httpin_has_token(conn, strlen(conn), "upgrade");
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
	else if (rc >= 0)
		rc = evbuffer_add_printf(h, "Connection: close\r\n");
	if (rc >= 0 && p->body_only)
		rc = evbuffer_add_printf(h, "Content-Length: %zu\r\n", in->body_len);
	if (rc >= 0)
		rc = evbuffer_add_printf(h, "%s: %s\r\n%s: 1\r\n%s: %s\r\n\r\n", SUP_HTTP_CLUSTER_KEY,
					 p->x->key, SUP_HTTP_RELAY_HOPS, SUP_HTTP_RELAY_FROM, p->x->node);
	if (rc >= 0 && p->body_only && in->body_len)
		rc = evbuffer_add(h, in->body, in->body_len);
	return rc < 0 ? -ENOMEM : 0;
}

static void finish(sup_relay_pipe *p)
{
	p->over = true;
	if (p->up) {
		bufferevent_free(p->up);
		p->up = NULL;
	}
}

/* Before the owner's first byte reached the client: our own answer. */
static void fail(sup_relay_pipe *p, const char *why)
{
	sbx_err e;
	sbx_err_set(&e, -ENETUNREACH, "node %s %s", p->node, why);
	finish(p);
	if (p->answered)
		sup_http_cut(p->r, e.msg);
	else
		sup_http_fail(p->r, &e);
}

/* The status of the owner's answer, for our log line: "HTTP/1.1 NNN". */
static int sniff_status(struct evbuffer *in)
{
	unsigned char *b = evbuffer_pullup(in, 12);
	if (!b || strncmp((const char *)b, "HTTP/1.", 7) != 0 || b[8] != ' ')
		return 0;
	int s = 0;
	for (int i = 9; i < 12; i++) {
		if (b[i] < '0' || b[i] > '9')
			return 0;
		s = s * 10 + (b[i] - '0');
	}
	return s;
}

/* Owner -> client, as far as the client keeps up. */
static void pump_down(sup_relay_pipe *p, bool all)
{
	struct evbuffer *in = bufferevent_get_input(p->up);
	size_t n = evbuffer_get_length(in);
	if (p->over || n == 0 || (!all && sup_http_backlog(p->r) >= SUP_HTTP_HWM))
		return;
	if (!p->answered) {
		if (n < 12 && !all)
			return;
		sup_http_raw_status(p->r, sniff_status(in));
		p->answered = true;
	}
	sup_http_write(p->r, in);
}

/* Client -> owner, as far as the owner keeps up; its half-close passed on
 * once all it sent is out. */
static void pump_up(sup_relay_pipe *p)
{
	if (p->over || !p->up || p->body_only)
		return;
	struct evbuffer *in = sup_http_raw_input(p->r);
	struct evbuffer *out = bufferevent_get_output(p->up);
	size_t held = evbuffer_get_length(out);
	if (held < SUP_RELAY_WINDOW)
		evbuffer_remove_buffer(in, out, SUP_RELAY_WINDOW - held);
	held = evbuffer_get_length(out);
	sup_http_raw_pause(p->r, held >= SUP_RELAY_WINDOW || evbuffer_get_length(in) > 0);
	if (!p->up_shut && held == 0 && sup_http_raw_ended(p->r)) {
		p->up_shut = true;
		shutdown(bufferevent_getfd(p->up), SHUT_WR);
	}
}

static void on_client(void *ud)
{
	pump_up(ud);
}

static void on_drained(void *ud)
{
	pump_down(ud, false);
}

static void up_read(struct bufferevent *bev, void *ud)
{
	pump_down(ud, false);
}

static void up_write(struct bufferevent *bev, void *ud)
{
	pump_up(ud);
}

static void up_event(struct bufferevent *bev, short what, void *ud)
{
	sup_relay_pipe *p = ud;
	if (what & BEV_EVENT_CONNECTED) {
		sup_relay_connected(bev);
		bufferevent_enable(bev, EV_READ | EV_WRITE);
		if (!p->body_only)
			sup_http_raw_pause(p->r, false);
		pump_up(p);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		/* The owner's answer is whole (one request per connection). */
		pump_down(p, true);
		if (!p->answered) {
			fail(p, "closed the connection without an answer");
			return;
		}
		finish(p);
		sup_http_end(p->r);
		return;
	}
	if (what & BEV_EVENT_TIMEOUT) {
		char why[64];
		snprintf(why, sizeof(why), "not reached within %u ms", p->x->connect_ms);
		fail(p, why);
		return;
	}
	int e = EVUTIL_SOCKET_ERROR();
	int dns = bufferevent_socket_get_dns_error(bev);
	char why[160];
	snprintf(why, sizeof(why), "%s: %s", p->answered ? "lost" : "unreachable",
		 dns ? evutil_gai_strerror(dns) : evutil_socket_error_to_string(e));
	fail(p, why);
}

int sup_relay_pipe_start(sup_relay_pipe *p, sup_relay *x, sup_http_req *r, const char *node,
			 bool body_only, sbx_err *err)
{
	char url[512];
	const sup_http_in *in = sup_http_input(r);
	p->x = x;
	p->r = r;
	p->body_only = body_only;
	snprintf(p->node, sizeof(p->node), "%s", node);
	if (!x->dir.ops || x->dir.ops->node_url(x->dir.ud, node, url, sizeof(url)) < 0)
		return sbx_err_set(err, -ENOENT, "no sandbox %s: node %s is not known here",
				   in->id ? in->id : "", node);
	p->head = evbuffer_new();
	if (!p->head || build_head(p, in) < 0)
		return sbx_err_set(err, -ENOMEM, "relay: out of memory");
	p->up = sup_relay_connect(x->base, x->dns, url, x->connect_ms, up_read, up_write, up_event,
				  p, err);
	if (!p->up)
		return sbx_err_wrap(err, "node %s", node);
	bufferevent_setwatermark(p->up, EV_READ, 0, SUP_RELAY_WINDOW);
	if (bufferevent_write_buffer(p->up, p->head) < 0)
		return sbx_err_set(err, -ENOMEM, "relay: out of memory");
	sup_http_log_tag(r, " via node %s", node);
	sup_http_takeover(r, on_client, p);
	if (!body_only)
		sup_http_raw_half_close(r);
	sup_http_on_drained(r, on_drained, p);
	return 0;
}

void sup_relay_pipe_release(sup_relay_pipe *p)
{
	finish(p);
	if (p->head)
		evbuffer_free(p->head);
	p->head = NULL;
}
