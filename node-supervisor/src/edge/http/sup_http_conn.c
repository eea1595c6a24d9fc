/* A connection: bytes in. Heads are scanned as they arrive and parsed once
 * whole; bodies are read (buffered) or handed to the act (streamed) by
 * sup_http_body.c; one request at a time, the next one's bytes waiting in
 * the input (or the kernel) until the answer before it is out; a deadline
 * for each state; the end (lingering after Connection: close so the client
 * reads our answer, not a reset).
 *
 * Reading stays on while an act works (bounded: it stops at
 * SUP_HTTP_BODY_HWM bytes of input), so the client's end is read, not
 * watched for; a streamed body and raw bytes turn it on and off as their
 * taker reads. The client's end is not its going away: HTTP/1.1 lets a
 * client shut its sending side once its request is out and read the answer
 * (a half-close). Every request it sent before its end is answered, then
 * the connection closes. Only a reset tells a client that closed for good
 * from one that half-closed, and only bytes sent to it bring the reset: a
 * request in flight then gets an interim "100 Continue" (any HTTP/1.1
 * client reads past a 1xx), and the reset it brings from a client that is
 * gone wakes the watch (sup_conn_peer_ended).
 *
 * A reset ends the request at once, as the client's going does: read (an
 * error) while reading is on; otherwise seen by the watch, which is on
 * whenever a request is in flight and the connection does not read (held,
 * input at its bound, a paused body or pipe, the client's end read).
 *
 * Writes go out once per loop pass, in one writev, by sbx/bev_flush.h;
 * libevent's EV_WRITE only for what the socket did not take. With reading
 * left on, an answer costs no epoll_ctl (it cost six: reading off and the
 * EV_CLOSED watch on for the act, EV_WRITE on and off, both back after).
 *
 * TLS (sup_http_cfg.tls, sup_http_tls_conn.c): the input and output above
 * hold plaintext, so all of this is the same; what reads or writes the
 * socket itself does not apply and is left to libevent (sbx/bev_flush.h's
 * writev, sbx/bev_fill.h's readv), and shutdown(2) comes after a
 * close_notify. */
#include "sup_http_int.h"

#include <errno.h>
#include <fcntl.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sup_log.h"

static void conn_read(struct bufferevent *bev, void *arg);
static void conn_write(struct bufferevent *bev, void *arg);
static void conn_event(struct bufferevent *bev, short what, void *arg);
static void conn_deadline(evutil_socket_t fd, short what, void *arg);
static void conn_watched(evutil_socket_t fd, short what, void *arg);
static void conn_kicked(evutil_socket_t fd, short what, void *arg);
static void conn_flush(evutil_socket_t fd, short what, void *arg);
static void conn_probe(evutil_socket_t fd, short what, void *arg);

struct evbuffer *sup_conn_output(const sup_conn *c)
{
	return bufferevent_get_output(c->bev);
}

struct evbuffer *sup_conn_input(const sup_conn *c)
{
	return bufferevent_get_input(c->bev);
}

static void conn_free(sup_conn *c)
{
	/* The watch's descriptor first: the socket's file must go with the
	 * bufferevent's close, or epoll would keep reporting it under the
	 * closed descriptor's number (epoll forgets a descriptor only once
	 * its file is closed). */
	if (c->watch)
		event_free(c->watch);
	if (c->wfd >= 0)
		close(c->wfd);
	if (c->bev) {
		sbx_bev_flush_release(&c->out);
		bufferevent_free(c->bev);
	}
	if (c->timer)
		event_free(c->timer);
	if (c->kick)
		event_free(c->kick);
	if (c->probe)
		event_free(c->probe);
	free(c);
}

void sup_conn_new(sup_http *h, int fd)
{
	sup_conn *c = calloc(1, sizeof(*c));
	int one = 1;
	if (!c) {
		close(fd);
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->h = h;
	c->fd = fd;
	c->wfd = -1;
	c->tls = h->cfg.tls != NULL;
	c->bev = c->tls ? sup_conn_tls_bev(h, fd)
			: bufferevent_socket_new(h->base, fd, BEV_OPT_CLOSE_ON_FREE);
	c->timer = evtimer_new(h->base, conn_deadline, c);
	c->kick = event_new(h->base, -1, 0, conn_kicked, c);
	/* conn_flush writes; libevent only what the socket did not take */
	if (!c->bev || !c->timer || !c->kick ||
	    (!c->tls && sbx_bev_flush_init(&c->out, c->bev, conn_flush, c) < 0)) {
		if (!c->bev)
			close(fd);
		conn_free(c);
		return;
	}
	TAILQ_INSERT_TAIL(&h->conns, c, link);
	h->nconns++;
	bufferevent_setcb(c->bev, conn_read, conn_write, conn_event, c);
	/* A client that stops reading an answer for this long is dropped. */
	struct timeval wt = { (time_t)h->cfg.idle_timeout_s, 0 };
	bufferevent_set_timeouts(c->bev, NULL, &wt);
	bufferevent_set_max_single_write(c->bev, SUP_HTTP_HWM);
	bufferevent_enable(c->bev, EV_READ);
	c->st = C_IDLE;
	/* a handshake is due as a head is: a client that starts one and
	 * stalls holds a connection no longer than one that sends half a
	 * head */
	sup_conn_timer(c, c->tls ? h->cfg.head_timeout_s : h->cfg.idle_timeout_s);
}

/* The socket's TCP state (TCP_CLOSE once a reset came); -1 if unknown. */
static int tcp_state(const sup_conn *c, struct tcp_info *ti)
{
	socklen_t len = sizeof(*ti);
	if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, ti, &len) < 0)
		return -1;
	return ti->tcpi_state;
}

/* The whole answer of a known length went out and the client's stack
 * acknowledged every byte: it was answered, whatever ends the connection
 * now. A download's client reads Content-Length bytes and closes, often
 * before the act's own end (the agent's last frame) comes: no 499. */
static bool answer_delivered(const sup_conn *c, const sup_http_req *r)
{
	struct tcp_info ti;
	return r->started && !r->raw && !r->chunked_out && r->out_len != SUP_HTTP_CHUNKED &&
	       r->out_len != SUP_HTTP_NO_BODY && r->out_sent == r->out_len &&
	       !evbuffer_get_length(sup_conn_output(c)) && tcp_state(c, &ti) >= 0 &&
	       ti.tcpi_unacked == 0;
}

void sup_conn_close(sup_conn *c, const char *why)
{
	sup_http *h = c->h;
	sup_http_req *r = c->req;
	if (r) {
		if (!r->done && answer_delivered(c, r)) {
			r->done = true;
			sup_http_log(r);
		} else if (!r->done) {
			r->gone = true;
			r->status = 499;
			snprintf(r->note, sizeof(r->note), "%s", why ? why : "connection closed");
			sup_http_log(r);
		}
		c->req = NULL;
		sup_http_req_free(r);
	}
	TAILQ_REMOVE(&h->conns, c, link);
	h->nconns--;
	conn_free(c);
	sup_http_conn_gone(h);
}

void sup_conn_kick(sup_conn *c)
{
	event_active(c->kick, EV_READ, 0);
}

/* The watch: a second descriptor of the socket, edge-triggered, woken by
 * the client's end and by a reset (and by room to write) whether or not
 * the connection reads; conn_watched looks at the socket. Not on the
 * socket's own descriptor: libevent 2.1 hands a reset (EPOLLERR, EPOLLHUP)
 * to read and write events only, so an EV_CLOSED event there missed it
 * and the loop spun on it (level-triggered, never cleared), and a
 * descriptor's events are all edge- or all level-triggered (the
 * bufferevent's are level). Made once, on the first need; without it
 * (out of descriptors) the next read or write tells. */
static void watch(sup_conn *c, bool on)
{
	if (!on || c->fd < 0) {
		if (c->watch)
			event_del(c->watch);
		return;
	}
	if (!c->watch) {
		short what = EV_WRITE | EV_ET | EV_PERSIST;
		if (event_base_get_features(c->h->base) & EV_FEATURE_EARLY_CLOSE)
			what |= EV_CLOSED;
		c->wfd = c->wfd >= 0 ? c->wfd : fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
		c->watch = c->wfd >= 0 ? event_new(c->h->base, c->wfd, what, conn_watched, c) : NULL;
		if (!c->watch)
			return;
	}
	event_add(c->watch, NULL);
}

static bool conn_reads(const sup_conn *c)
{
	return !c->rd_eof && (bufferevent_get_enabled(c->bev) & EV_READ);
}

/* On once a request in flight stops reading, until it ends (after_request):
 * an upload's body pauses reading at every 256 KiB, and each watch added
 * costs an epoll_ctl and a wake (edge-triggered, added to a socket that is
 * writable already). */
static void watch_update(sup_conn *c)
{
	if (!conn_reads(c) && c->req && !c->req->done)
		watch(c, true);
}

void sup_conn_reading(sup_conn *c, bool on)
{
	bool is_on = bufferevent_get_enabled(c->bev) & EV_READ;
	if (on && !c->rd_eof) {
		if (!is_on)
			bufferevent_enable(c->bev, EV_READ);
	} else if (is_on) {
		bufferevent_disable(c->bev, EV_READ);
	}
	watch_update(c);
}

void sup_conn_timer(sup_conn *c, unsigned secs)
{
	struct timeval tv = { (time_t)secs, 0 };
	if (secs)
		evtimer_add(c->timer, &tv);
	else
		evtimer_del(c->timer);
}

/* ---- writing ---- */

static void drained(sup_conn *c);

static void conn_flush(evutil_socket_t fd, short what, void *arg)
{
	sup_conn *c = arg;
	(void)fd;
	(void)what;
	if (sbx_bev_flush_write(&c->out, SUP_HTTP_HWM) > 0 &&
	    !evbuffer_get_length(sup_conn_output(c)))
		drained(c);
}

/* ---- closing ---- */

static void linger(sup_conn *c)
{
	if (c->shut)
		return;
	c->shut = true;
	sup_conn_tls_close_notify(c);
	if (c->fd >= 0)
		shutdown(c->fd, SHUT_WR);
	sup_conn_timer(c, SUP_HTTP_LINGER_S);
	if (c->rd_eof)
		sup_conn_close(c, NULL);
}

/* No request is in flight and no other can come (the client's end was
 * read): close once the answers before are out. */
static void input_ended(sup_conn *c)
{
	if (!evbuffer_get_length(sup_conn_output(c))) {
		sup_conn_close(c, NULL);
		return;
	}
	c->st = C_CLOSING;
	sup_conn_timer(c, c->h->cfg.idle_timeout_s);
}

/* The request in flight is over: its interim answer's question too. */
static void asked_end(sup_conn *c)
{
	c->asked = false;
	if (!c->probe_ms)
		return;
	c->probe_ms = 0;
	evtimer_del(c->probe);
}

/* The answer before is out (or on its way): the next request, or the end.
 * Requests sent before the client's end are still answered. */
static void after_request(sup_conn *c)
{
	sup_http_req *r = c->req;
	/* A body left unread: what follows it cannot be told from it. */
	if (!r->body_done)
		c->close_after = true;
	c->req = NULL;
	sup_http_req_free(r);
	watch(c, false);
	asked_end(c);
	if (c->close_after || (c->rd_eof && !evbuffer_get_length(sup_conn_input(c)))) {
		c->st = C_CLOSING;
		sup_conn_reading(c, true);
		evbuffer_drain(sup_conn_input(c), evbuffer_get_length(sup_conn_input(c)));
		sup_conn_timer(c, c->h->cfg.idle_timeout_s);
		if (!evbuffer_get_length(sup_conn_output(c)))
			linger(c);
		return;
	}
	c->st = C_IDLE;
	memset(&c->scan, 0, sizeof(c->scan));
	sup_conn_timer(c, c->h->cfg.idle_timeout_s);
	sup_conn_reading(c, true);
	if (evbuffer_get_length(sup_conn_input(c)))
		sup_conn_kick(c);
}

/* ---- heads ---- */

/* An answer to bytes that are not a request we read: then the end. */
static void refuse_bytes(sup_conn *c, int status, const char *code, const char *msg)
{
	sup_http_req *r = calloc(1, sizeof(*r));
	if (!r) {
		sup_conn_close(c, "out of memory");
		return;
	}
	r->c = c;
	clock_gettime(CLOCK_MONOTONIC, &r->t0);
	c->req = r;
	c->st = C_ACTIVE;
	c->close_after = true;
	sup_conn_reading(c, false);
	sup_http_refuse(r, status, code, msg);
}

/* NUL-terminate the parsed parts in our copy of the head. */
static void terminate(sup_http_req *r)
{
	sup_httpin_head *ph = &r->ph;
	char *target = (char *)ph->target;
	((char *)ph->method)[ph->method_len] = '\0';
	target[ph->target_len] = '\0';
	for (size_t i = 0; i < ph->nhdrs; i++) {
		((char *)ph->hdrs[i].name)[ph->hdrs[i].name_len] = '\0';
		((char *)ph->hdrs[i].value)[ph->hdrs[i].value_len] = '\0';
		r->hdrs[i] = (sup_http_hdr){ ph->hdrs[i].name, ph->hdrs[i].value };
	}
	char *q = strchr(target, '?');
	if (q)
		*q++ = '\0';
	r->in = (sup_http_in){ .method = ph->method, .path = target, .query = q,
			       .hdrs = r->hdrs, .nhdrs = ph->nhdrs };
}

static void read_head(sup_conn *c)
{
	struct evbuffer *in = sup_conn_input(c);
	size_t avail = evbuffer_get_length(in);
	if (evbuffer_get_length(sup_conn_output(c)) >= SUP_HTTP_HWM) {
		/* the client reads its answers first (drained kicks); what it
		 * pipelines meanwhile waits in the kernel */
		if (avail >= SUP_HTTP_BODY_HWM)
			sup_conn_reading(c, false);
		return;
	}
	sup_conn_reading(c, true);
	if (!avail) {
		if (c->rd_eof)
			input_ended(c);
		return;
	}
	if (c->st == C_IDLE) {
		c->st = C_HEAD;
		sup_conn_timer(c, c->h->cfg.head_timeout_s);
	}
	int rc = 0;
	size_t e = 0;
	while (rc == 0 && c->scan.total < avail) {
		struct evbuffer_ptr ptr;
		struct evbuffer_iovec v[4];
		if (evbuffer_ptr_set(in, &ptr, c->scan.total, EVBUFFER_PTR_SET) < 0)
			break;
		int nv = evbuffer_peek(in, -1, &ptr, v, 4);
		for (int i = 0; i < nv && i < 4 && rc == 0; i++)
			rc = sup_httpin_headscan_feed(&c->scan, v[i].iov_base, v[i].iov_len, &e);
	}
	if (rc == -E2BIG) {
		refuse_bytes(c, 431, "too_large", "request head over 64 KiB");
		return;
	}
	if (rc < 0) {
		refuse_bytes(c, 400, "bad_request",
			     "malformed request head (a bare CR or LF, a control byte or a folded line)");
		return;
	}
	if (rc == 0) {
		if (c->rd_eof) /* a head cut short by the client's end */
			input_ended(c);
		return;
	}
	size_t hl = c->scan.total;
	sup_http_req *r = calloc(1, sizeof(*r));
	char *head = r ? malloc(hl + 1) : NULL;
	if (!head) {
		free(r);
		sup_conn_close(c, "out of memory");
		return;
	}
	evbuffer_remove(in, head, hl);
	head[hl] = '\0';
	r->c = c;
	r->head = head;
	clock_gettime(CLOCK_MONOTONIC, &r->t0);
	c->req = r;
	c->st = C_ACTIVE;
	sup_conn_timer(c, 0);
	/* Reading goes on until the act turns out to answer later (run). */
	rc = sup_httpin_parse_head(head, hl, &r->ph);
	if (rc < 0) {
		c->close_after = true;
		if (rc == -E2BIG)
			sup_http_refuse(r, 431, "too_large", "more than 100 header lines");
		else
			sup_http_refuse(r, 400, "bad_request", "malformed request line or header");
		return;
	}
	terminate(r);
	sup_http_dispatch(r);
}

/* ---- events ---- */

static void conn_read(struct bufferevent *bev, void *arg)
{
	sup_conn *c = arg;
	sup_http_req *r = c->req;
	switch (c->st) {
	case C_IDLE:
	case C_HEAD:
		read_head(c);
		break;
	case C_BODY:
		sup_conn_body(r);
		break;
	case C_ACTIVE:
		if (r && !r->done && r->on_ready)
			r->on_ready(r->ready_ud);
		else if (evbuffer_get_length(sup_conn_input(c)) >= SUP_HTTP_BODY_HWM)
			sup_conn_reading(c, false); /* pipelined: after_request reads on
						     * (a reset seen by the watch) */
		break;
	case C_CLOSING:
		evbuffer_drain(sup_conn_input(c), evbuffer_get_length(sup_conn_input(c)));
		break;
	}
}

/* The output went out whole. */
static void drained(sup_conn *c)
{
	sup_http_req *r = c->req;
	if (c->st == C_CLOSING) {
		linger(c);
		return;
	}
	if (r && !r->done) {
		sup_http_give_credit(r);
		if (r->on_drained)
			r->on_drained(r->drained_ud);
	} else if (c->st == C_IDLE && (evbuffer_get_length(sup_conn_input(c)) || c->rd_eof)) {
		sup_conn_kick(c);
	}
}

/* libevent wrote what conn_flush left: adds go to conn_flush again. */
static void conn_write(struct bufferevent *bev, void *arg)
{
	sup_conn *c = arg;
	if (!c->tls)
		sbx_bev_flush_written(&c->out);
	drained(c);
}

void sup_conn_peer_ended(sup_conn *c)
{
	static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
	sup_http_req *r = c->req;
	struct tcp_info ti;
	if (!r || r->done || c->asked)
		return; /* after_request ends the connection, or asked already */
	/* Reset already (with the end, or since): gone, nothing to ask. */
	if (tcp_state(c, &ti) == TCP_CLOSE) {
		sup_conn_close(c, "client went away (reset)");
		return;
	}
	watch_update(c); /* an end read before the request ran (pipelined) */
	/* Bytes of the answer started already (nothing may come between
	 * them), and HTTP/1.0 has no interim answer: its end is its going. */
	if (r->raw || r->started || r->ph.minor == 0) {
		sup_conn_close(c, "client went away");
		return;
	}
	evbuffer_add(sup_conn_output(c), cont, sizeof(cont) - 1);
	c->asked = true;
	/* A client that is gone answers with a reset, which wakes the watch
	 * (on: reading is over). Only without one (out of descriptors) is
	 * the socket looked at on a timer. */
	if (c->watch)
		return;
	if (!c->probe)
		c->probe = evtimer_new(c->h->base, conn_probe, c);
	if (!c->probe)
		return; /* the next write tells */
	c->probe_ms = SUP_HTTP_PROBE_MS;
	struct timeval tv = { 0, (suseconds_t)c->probe_ms * 1000 };
	evtimer_add(c->probe, &tv);
}

/* Without the watch: a client that closed for good answers our "100
 * Continue" with a reset, which leaves the socket closed; a half-closed
 * client's stack takes it (acknowledged): it is there, the request goes
 * on. Neither yet: again later. A client that half-closes and closes for
 * good afterwards is seen once its answer goes out. */
static void conn_probe(evutil_socket_t fd, short what, void *arg)
{
	sup_conn *c = arg;
	struct tcp_info ti;
	(void)fd;
	(void)what;
	int st = tcp_state(c, &ti);
	if (st < 0)
		return;
	if (st == TCP_CLOSE) {
		sup_conn_close(c, "client went away (reset)");
		return;
	}
	if (ti.tcpi_unacked == 0 && !evbuffer_get_length(sup_conn_output(c)))
		return;
	c->probe_ms = c->probe_ms * 2 > SUP_HTTP_PROBE_MAX_MS ? SUP_HTTP_PROBE_MAX_MS : c->probe_ms * 2;
	struct timeval tv = { (time_t)(c->probe_ms / 1000), (suseconds_t)(c->probe_ms % 1000) * 1000 };
	evtimer_add(c->probe, &tv);
}

static void conn_event(struct bufferevent *bev, short what, void *arg)
{
	sup_conn *c = arg;
	sup_http_req *r = c->req;
	if (c->tls && !c->handshaken) {
		sup_conn_tls_handshake(c, what); /* its end, or its failure */
		return;
	}
	if ((what & BEV_EVENT_EOF) && !(what & BEV_EVENT_ERROR)) {
		c->rd_eof = true;
		/* libevent's OpenSSL bufferevent stops writing at the end of
		 * input: the answers still owed go on */
		if (c->tls)
			bufferevent_enable(bev, EV_WRITE);
		watch_update(c); /* reading is over: a reset is the watch's */
		switch (c->st) {
		case C_IDLE:
		case C_HEAD:
			/* What came before the end is answered; then the end. */
			read_head(c);
			return;
		case C_ACTIVE:
			if (!r || r->done)
				return; /* after_request: the next request, or the end */
			/* A client may shut its side once its body is sent and
			 * still read the answer; a streamed body's taker sees the
			 * end. */
			if (!r->raw && r->route && r->route->body == SUP_BODY_STREAMED) {
				if (r->on_ready)
					r->on_ready(r->ready_ud);
				return;
			}
			/* A tunnel passes the half-close on and goes on answering. */
			if (r->raw && r->raw_half) {
				if (r->on_ready)
					r->on_ready(r->ready_ud);
				return;
			}
			sup_conn_peer_ended(c);
			return;
		case C_CLOSING:
			if (!c->shut)
				return; /* linger() closes once our answer is out */
			break;
		case C_BODY:
			break;
		}
	}
	/* libevent read or wrote -1: its errno is the socket's */
	bool reset = (what & BEV_EVENT_ERROR) && EVUTIL_SOCKET_ERROR() == ECONNRESET;
	const char *why = reset ? "client went away (reset)" : "client went away";
	if (what & BEV_EVENT_TIMEOUT)
		why = "client stopped reading";
	else if (c->st == C_BODY)
		why = reset ? "client went away mid-body (reset)" : "client went away mid-body";
	sup_conn_close(c, why);
}

/* The watch woke (a request in flight): a reset ends the request now.
 * The client's end, not read: a raw pipe's client is gone (unless the pipe
 * passes half-closes on); a held request is answered to a client that may
 * only have half-closed (sup_conn_peer_ended); anything else reads it once
 * it reads on. */
static void conn_watched(evutil_socket_t fd, short what, void *arg)
{
	sup_conn *c = arg;
	sup_http_req *r = c->req;
	struct tcp_info ti;
	int st = tcp_state(c, &ti);
	(void)fd;
	(void)what;
	if (st == TCP_CLOSE) {
		sup_conn_close(c, "client went away (reset)");
		return;
	}
	if (st != TCP_CLOSE_WAIT || !r || r->done || conn_reads(c) || c->rd_eof || c->asked)
		return;
	if (r->raw && !r->raw_half)
		sup_conn_close(c, "client went away");
	else if (!r->raw && r->hold_cancel)
		sup_conn_peer_ended(c);
}

static void conn_deadline(evutil_socket_t fd, short what, void *arg)
{
	sup_conn *c = arg;
	sup_http_req *r = c->req;
	char msg[96];
	if (c->tls && !c->handshaken) {
		sup_http_refused(c->h, "TLS handshake not complete within --head-timeout");
		sup_conn_close(c, NULL);
		return;
	}
	switch (c->st) {
	case C_HEAD:
		snprintf(msg, sizeof(msg), "request head not complete after %u s",
			 c->h->cfg.head_timeout_s);
		refuse_bytes(c, 408, "request_timeout", msg);
		break;
	case C_BODY:
		snprintf(msg, sizeof(msg), "request body not complete after %u s",
			 c->h->cfg.body_timeout_s);
		c->close_after = true;
		sup_http_refuse(r, 408, "request_timeout", msg);
		break;
	case C_ACTIVE:
		/* A streamed body that stalled: its taker answers. */
		if (r && !r->done && r->on_ready) {
			r->timed_out = true;
			r->on_ready(r->ready_ud);
		}
		break;
	default:
		sup_conn_close(c, NULL);
		break;
	}
}

static void conn_kicked(evutil_socket_t fd, short what, void *arg)
{
	sup_conn *c = arg;
	sup_http_req *r = c->req;
	if (r && r->done) {
		after_request(c);
		return;
	}
	if (r && r->ready_pending && !r->done) {
		r->ready_pending = false;
		if (r->on_ready)
			r->on_ready(r->ready_ud);
		return;
	}
	if (c->st == C_IDLE || c->st == C_HEAD)
		read_head(c);
}
