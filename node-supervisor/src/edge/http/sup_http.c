/* The server: listening (with --max-connections), routing, the checks every
 * request passes before its route runs (framing, authentication, the
 * route, the body's size), the request's lifetime and its log line, the
 * graceful stop. */
#include "sup_http_int.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sup_log.h"
#include "sup_token.h"

/* ---- listening ---- */

/* One line a second at most, however many are refused. */
void sup_http_refused(sup_http *h, const char *why)
{
	time_t now = time(NULL);
	h->refused++;
	if (now == h->refused_at)
		return;
	sup_warn("http: refused %u connection(s): %s", h->refused, why);
	h->refused = 0;
	h->refused_at = now;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	sup_http *h = arg;
	if (h->nconns >= h->cfg.max_conns) {
		/* Accepted and closed at once: the backlog drains, no busy loop. */
		close(fd);
		sup_http_refused(h, "at --max-connections");
		return;
	}
	sup_conn_new(h, fd);
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
	sup_http *h = arg;
	if (h->lis)
		evconnlistener_enable(h->lis);
}

/* accept failed: out of fds (EMFILE/ENFILE) leaves the listening socket
 * readable, so listening pauses a moment instead of spinning. */
static void on_accept_error(struct evconnlistener *l, void *arg)
{
	sup_http *h = arg;
	struct timeval tv = { 0, 100 * 1000 };
	sup_http_refused(h, strerror(errno));
	evconnlistener_disable(l);
	event_add(h->resume, &tv);
}

static int listen_on(sup_http *h, sbx_err *err)
{
	struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
					 .ai_flags = EVUTIL_AI_PASSIVE | EVUTIL_AI_NUMERICHOST };
	struct evutil_addrinfo *ai = NULL;
	char port[8];
	snprintf(port, sizeof(port), "%u", (unsigned)h->cfg.port);
	int rc = evutil_getaddrinfo(h->cfg.host, port, &hints, &ai);
	if (rc != 0)
		return sbx_err_set(err, -EINVAL, "listen on %s: %s", h->cfg.host,
				   evutil_gai_strerror(rc));
	h->lis = evconnlistener_new_bind(h->base, on_accept, h,
					 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, SOMAXCONN,
					 ai->ai_addr, (int)ai->ai_addrlen);
	evutil_freeaddrinfo(ai);
	if (!h->lis)
		return sbx_err_sys(err, errno ? -errno : -EADDRNOTAVAIL, "listen on %s:%u",
				   h->cfg.host, (unsigned)h->cfg.port);
	evconnlistener_set_error_cb(h->lis, on_accept_error);
	struct sockaddr_storage ss = { 0 };
	socklen_t sl = sizeof(ss);
	if (getsockname(evconnlistener_get_fd(h->lis), (struct sockaddr *)&ss, &sl) < 0)
		return sbx_err_sys(err, -errno, "getsockname");
	if (ss.ss_family == AF_INET6)
		h->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	else if (ss.ss_family == AF_INET)
		h->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

static bool needs_auth(const char *path);

/* A listener others can reach that speaks plain HTTP: said once, at its
 * start (the hosts are numeric: listen_on asks for no name lookup). */
static void warn_clear(const sup_http_cfg *cfg)
{
	const char *h = cfg->host;
	if (cfg->tls || strncmp(h, "127.", 4) == 0 || strcmp(h, "::1") == 0 ||
	    strcmp(h, "::ffff:127.0.0.1") == 0)
		return;
	sup_warn("http: %s is reachable beyond this machine and speaks plain HTTP: tokens and "
		 "data cross the network in clear (--tls-cert and --tls-key serve HTTPS)", h);
}

sup_http *sup_http_new(struct event_base *base, const sup_http_cfg *cfg, sbx_err *err)
{
	/* A listener without authentication serves nothing under /v1. */
	for (size_t i = 0; !cfg->auth && i < cfg->nmounts; i++)
		for (size_t k = 0; k < cfg->mounts[i].family->nroutes; k++)
			if (needs_auth(cfg->mounts[i].family->routes[k].pattern)) {
				sbx_err_set(err, -EINVAL, "http: %s on a listener without authentication",
					    cfg->mounts[i].family->routes[k].pattern);
				return NULL;
			}
	sup_http *h = calloc(1, sizeof(*h));
	if (!h) {
		sbx_err_set(err, -ENOMEM, "http");
		return NULL;
	}
	h->base = base;
	h->cfg = *cfg;
	TAILQ_INIT(&h->conns);
	h->resume = evtimer_new(base, on_resume, h);
	if (!h->resume) {
		sbx_err_set(err, -ENOMEM, "http");
		sup_http_free(h);
		return NULL;
	}
	if (listen_on(h, err) < 0) {
		sup_http_free(h);
		return NULL;
	}
	warn_clear(cfg);
	return h;
}

uint16_t sup_http_port(const sup_http *h)
{
	return h->port;
}

const char *sup_http_date(sup_http *h)
{
	time_t now = time(NULL);
	struct tm tm;
	if (now != h->date_at && gmtime_r(&now, &tm)) {
		strftime(h->date, sizeof(h->date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
		h->date_at = now;
	}
	return h->date;
}

/* ---- graceful stop ---- */

static void stop_over(sup_http *h)
{
	void (*done)(void *) = h->done;
	h->done = NULL;
	if (h->drain)
		event_del(h->drain);
	if (done)
		done(h->done_ud);
}

static void on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
	sup_http *h = arg;
	sup_info("http: drain timeout; failing the requests still in flight");
	stop_over(h);
}

/* A connection went away: the last one in flight ends the drain. */
void sup_http_conn_gone(sup_http *h)
{
	if (!h->stopping || !h->done)
		return;
	sup_conn *c;
	TAILQ_FOREACH(c, &h->conns, link)
		if (c->req)
			return;
	stop_over(h);
}

void sup_http_stop(sup_http *h, unsigned drain_s, void (*done)(void *ud), void *ud)
{
	h->stopping = true;
	h->done = done;
	h->done_ud = ud;
	if (h->lis) {
		evconnlistener_free(h->lis);
		h->lis = NULL;
	}
	for (sup_conn *c = TAILQ_FIRST(&h->conns), *next; c; c = next) {
		next = TAILQ_NEXT(c, link);
		if (!c->req)
			sup_conn_close(c, NULL);
		else
			c->close_after = true;
	}
	h->drain = evtimer_new(h->base, on_drain_timeout, h);
	struct timeval tv = { (time_t)drain_s, 0 };
	if (h->drain)
		event_add(h->drain, &tv);
	sup_http_conn_gone(h);
}

void sup_http_free(sup_http *h)
{
	if (!h)
		return;
	h->done = NULL;
	sup_conn *c;
	while ((c = TAILQ_FIRST(&h->conns)) != NULL)
		sup_conn_close(c, "the supervisor is stopping");
	if (h->lis)
		evconnlistener_free(h->lis);
	if (h->resume)
		event_free(h->resume);
	if (h->drain)
		event_free(h->drain);
	free(h->shares);
	free(h);
}

/* ---- routing ---- */

/* path against pattern segment by segment; {id} takes one non-empty
 * segment into id, any other placeholder ({pid}, {ref}) one into pid (as
 * sent: the route decodes it); {*} ending a pattern takes the rest of the
 * path, nothing included (the act reads in->path). */
static bool path_match(const char *pattern, const char *path, char *id, char *pid)
{
	const char *pp = pattern, *sp = path;
	while (*pp) {
		if (strcmp(pp, "{*}") == 0)
			return true;
		if (!*sp)
			break;
		if (*pp == '{') {
			bool is_id = strncmp(pp, "{id}", 4) == 0;
			size_t n = strcspn(sp, "/"), cap = is_id ? SUP_HTTP_ID_MAX : SUP_HTTP_SEG_MAX;
			const char *close = strchr(pp, '}');
			if (n == 0 || n >= cap || !close)
				return false;
			memcpy(is_id ? id : pid, sp, n);
			(is_id ? id : pid)[n] = '\0';
			pp = close + 1;
			sp += n;
			continue;
		}
		if (*pp++ != *sp++)
			return false;
	}
	return *pp == '\0' && *sp == '\0';
}

static const sup_http_route *match(const sup_http *h, const char *method, const char *path,
				   const sup_http_mount **mount, char *id, char *pid, char *allow,
				   size_t allow_size, int *why)
{
	bool found = false;
	if (allow_size)
		allow[0] = '\0';
	*why = -ENOENT;
	for (size_t m = 0; m < h->cfg.nmounts; m++) {
		const sup_http_family *f = h->cfg.mounts[m].family;
		for (size_t i = 0; i < f->nroutes; i++) {
			const sup_http_route *rt = &f->routes[i];
			if (!path_match(rt->pattern, path, id, pid))
				continue;
			if (strcmp(rt->method, method) == 0 ||
			    (strcmp(method, "HEAD") == 0 && strcmp(rt->method, "GET") == 0)) {
				*mount = &h->cfg.mounts[m];
				return rt;
			}
			size_t l = strlen(allow);
			if (allow_size > l)
				snprintf(allow + l, allow_size - l, "%s%s", found ? ", " : "", rt->method);
			found = true;
			*why = -EPERM;
		}
	}
	return NULL;
}

const sup_http_route *sup_http_match(const sup_http *h, const char *method, const char *path,
				     const sup_http_mount **mount, char *allow, size_t allow_size,
				     int *why)
{
	char id[SUP_HTTP_ID_MAX], pid[SUP_HTTP_SEG_MAX];
	return match(h, method, path, mount, id, pid, allow, allow_size, why);
}

/* A sandbox id: [a-z0-9-], 1..40 bytes. */
static bool valid_id(const char *s)
{
	size_t n = strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-");
	return n > 0 && n <= 40 && s[n] == '\0';
}

/* ---- the request's lifetime ---- */

void sup_http_log(const sup_http_req *r)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double ms = (double)(now.tv_sec - r->t0.tv_sec) * 1e3 +
		    (double)(now.tv_nsec - r->t0.tv_nsec) / 1e6;
	char what[160];
	if (r->route)
		snprintf(what, sizeof(what), "%s%s%s%s", r->route->name, r->id[0] ? " sandbox " : "",
			 r->id, r->tag);
	else
		snprintf(what, sizeof(what), "%s %.100s", r->in.method ? r->in.method : "-",
			 r->in.path ? r->in.path : "-");
	char extra[48] = "";
	if (r->started && !r->raw)
		snprintf(extra, sizeof(extra), " (%llu bytes)", (unsigned long long)r->out_sent);
	int st = r->status;
	sup_log(st >= 500 && st != 503 ? SUP_LOG_WARN : SUP_LOG_INFO, "http %s%s%s %d%s %.3fms", what,
		r->note[0] ? ": " : "", r->note, st, extra, ms);
	const sup_http_cfg *cfg = &r->c->h->cfg;
	if (cfg->on_answered)
		cfg->on_answered(cfg->answered_ud, r->route ? r->route->name : "unmatched", st);
}

void sup_http_req_free(sup_http_req *r)
{
	if (r->hold_cancel)
		r->hold_cancel(r->hold_ud);
	if (r->state) {
		if (r->mount->family->release)
			r->mount->family->release(r->state);
		free(r->state);
	}
	if (r->body)
		evbuffer_free(r->body);
	if (r->hdr_out)
		evbuffer_free(r->hdr_out);
	free(r->vpath);
	if (r->shared)
		sup_http_share_give(r->c->h, r->in.who);
	if (r->in.who && r->release)
		r->release(r->in.who);
	free(r->head);
	free(r);
}

void sup_http_done(sup_http_req *r)
{
	if (r->done)
		return;
	r->done = true;
	sup_http_log(r);
	sup_conn_kick(r->c);
}

/* Parse, then act: the one place a route's input turns into its work. */
void sup_http_run(sup_http_req *r)
{
	sup_conn *c = r->c;
	sbx_err err;
	sbx_err_clear(&err);
	c->st = C_ACTIVE;
	sup_conn_timer(c, 0);
	r->in.body = r->body ? (const char *)evbuffer_pullup(r->body, -1) : NULL;
	r->in.body_len = r->body ? evbuffer_get_length(r->body) : 0;
	if (!r->in.body || r->route->body == SUP_BODY_NONE) {
		r->in.body = "";
		r->in.body_len = 0;
	}
	void *ctx = r->mount->ctx;
	int rc = r->route->parse ? r->route->parse(&r->in, ctx, r->state, &err) : 0;
	if (rc == 0)
		rc = r->route->act(r, r->state, &err);
	if (rc < 0 && !r->done)
		sup_http_fail(r, &err);
	/* An act that answers later: reading goes on (bounded, conn_read), so
	 * the client's end is read when it comes; one read already (a client
	 * that pipelined and half-closed) is looked at now. */
	if (!r->done && r->route->body != SUP_BODY_STREAMED && !r->raw && c->rd_eof)
		sup_conn_peer_ended(c);
}

/* /v1 and the OpenSandbox compatibility layer's /opensandbox (both the
 * tenant's token). */
static bool needs_auth(const char *path)
{
	return strcmp(path, "/v1") == 0 || strncmp(path, "/v1/", 4) == 0 ||
	       strncmp(path, "/opensandbox/", 13) == 0 || strncmp(path, "/e2b/", 5) == 0;
}

/* The request's token, the one place it is read: "Authorization: Bearer
 * <token>", or else OpenSandbox's SDKs' "OPEN-SANDBOX-API-KEY: <token>"
 * or E2B's "X-API-KEY: <token>" (so they work unchanged). NULL: none
 * given. */
static const char *request_token(const sup_http_in *in, const char **tok, size_t *len)
{
	const char *auth = sup_http_in_header(in, "Authorization");
	if (sup_token_bearer(auth, tok, len))
		return auth;
	const char *key = sup_http_in_header(in, "OPEN-SANDBOX-API-KEY");
	if (!key)
		key = sup_http_in_header(in, "X-API-KEY");
	if (!key)
		return auth;
	key += strspn(key, " \t");
	size_t n = strlen(key);
	while (n && (key[n - 1] == ' ' || key[n - 1] == '\t'))
		n--;
	*tok = key;
	*len = n;
	return n ? key : auth;
}

static int check_auth(sup_http_req *r);

/* Everything a head must pass before its route runs: 0, answered (-1), or
 * held by the relay (1: sup_http_resume goes on from check_auth). */
static int check(sup_http_req *r)
{
	sup_conn *c = r->c;
	sup_http *h = c->h;
	sup_httpin_head *ph = &r->ph;
	char msg[256];
	/* A request we could read otherwise than its sender: nothing after it
	 * on the connection is trusted. */
	const char *bad = ph->bad ? ph->bad
			  : r->in.path[0] != '/' ? "the request target must be a path"
			  : ph->minor == 1 && ph->hosts == 0 ? "an HTTP/1.1 request needs a Host header"
			  : NULL;
	if (bad) {
		snprintf(msg, sizeof(msg), "request refused: %s", bad);
		c->close_after = true;
		sup_http_refuse(r, 400, "bad_request", msg);
		return -1;
	}
	if (h->stopping) {
		sup_http_refuse(r, 503, "shutting_down", "the supervisor is shutting down");
		return -1;
	}
	sbx_err err;
	sbx_err_clear(&err);
	if (h->cfg.gate) {
		const struct sup_tenant *who = NULL;
		int vouched = h->cfg.gate(h->cfg.gate_ud, &r->in, &r->vpath, &who, &err);
		if (r->vpath) {
			r->in.sent_path = r->in.path;
			r->in.path = r->vpath;
		}
		if (who) {
			r->in.who = who;
			r->release = h->cfg.release;
		}
		if (vouched < 0) {
			const char *code;
			int status = sup_http_status(NULL, vouched, &code);
			sup_http_refuse(r, status, code, err.msg);
			return -1;
		}
		r->vouched = vouched > 0;
	}
	r->route = match(h, r->in.method, r->in.path, &r->mount, r->id, r->pid, r->allow,
			 sizeof(r->allow), &r->why);
	if (h->cfg.relay) {
		bool named = r->route && strstr(r->route->pattern, "{id}") && valid_id(r->id);
		int rc = h->cfg.relay(h->cfg.relay_ud, r, named ? r->id : NULL, &err);
		if (rc < 0) {
			const char *code;
			int status = sup_http_status(NULL, rc, &code);
			r->route = NULL;
			r->id[0] = '\0';
			sup_http_refuse(r, status, code, err.msg);
			return -1;
		}
		if (rc == 1) {
			/* Every byte of it is the owner's to read: its route too. */
			r->mount = h->cfg.relay_mount;
			r->route = &r->mount->family->routes[0];
			r->in.id = r->id;
			r->in.pid = NULL;
			return 0;
		}
		if (rc == 2)
			return 1;
	}
	return check_auth(r);
}

/* The tenant's token, the route and the sandbox the route names. */
static int check_auth(sup_http_req *r)
{
	sup_http *h = r->c->h;
	char msg[256];
	sbx_err err;
	sbx_err_clear(&err);
	bool vouched = r->vouched;
	const char *tok = NULL;
	size_t tok_len = 0;
	const char *auth = request_token(&r->in, &tok, &tok_len);
	if (h->cfg.auth && tok && tok_len && !r->in.who) {
		r->in.who = h->cfg.auth(h->cfg.auth_ud, tok, tok_len);
		r->release = h->cfg.release;
	}
	if (h->cfg.auth && !r->in.who && !vouched && needs_auth(r->in.path)) {
		r->route = NULL; /* logged and counted as before any route */
		r->id[0] = '\0';
		sup_http_header(r, "WWW-Authenticate", "Bearer realm=\"sbx\"");
		sup_http_refuse(r, 401, "unauthorized",
				auth ? "wrong token" : "missing Authorization: Bearer <token>");
		return -1;
	}
	if (r->in.who && h->cfg.max_per_who) {
		int rc = sup_http_share_take(h, r->in.who);
		if (rc < 0) {
			unsigned held = sup_http_share_held(h, r->in.who);
			r->route = NULL; /* counted as before any route: nothing ran */
			r->id[0] = '\0';
			if (rc == -EDQUOT) {
				snprintf(msg, sizeof(msg),
					 "this tenant has %u requests in flight on this node, its most: end "
					 "one (a stream, a WebSocket) and try again",
					 held);
				sup_http_header(r, "Retry-After", "1");
				sup_http_refuse(r, 429, "quota_exceeded", msg);
			} else {
				sup_http_refuse(r, 503, "unavailable", "out of memory");
			}
			return -1;
		}
		r->shared = true;
	}
	if (!r->route) {
		r->id[0] = '\0';
		if (r->why == -EPERM) {
			sup_http_header(r, "Allow", r->allow);
			snprintf(msg, sizeof(msg), "%s is not allowed on %.120s (allowed: %s)",
				 r->in.method, r->in.path, r->allow);
			sup_http_refuse(r, 405, "method_not_allowed", msg);
		} else {
			snprintf(msg, sizeof(msg), "no route %s %.120s", r->in.method, r->in.path);
			sup_http_refuse(r, 404, "not_found", msg);
		}
		return -1;
	}
	if (strstr(r->route->pattern, "{id}") && !valid_id(r->id)) {
		snprintf(msg, sizeof(msg), "no sandbox %.64s", r->id);
		r->id[0] = '\0';
		sup_http_refuse(r, 404, "not_found", msg);
		return -1;
	}
	if (r->id[0] && !vouched && h->cfg.check_id &&
	    h->cfg.check_id(h->cfg.check_ud, r->in.who, r->id, &err) < 0) {
		const char *code;
		int status = sup_http_status(NULL, err.code, &code);
		sup_http_refuse(r, status, code, err.msg);
		return -1;
	}
	r->in.id = r->id[0] ? r->id : NULL;
	r->in.pid = r->pid[0] ? r->pid : NULL;
	return 0;
}

static void proceed(sup_http_req *r);

/* A head arrived whole (parsed into r): check it, then read its body or run
 * its route. */
void sup_http_dispatch(sup_http_req *r)
{
	sup_conn *c = r->c;
	sup_httpin_head *ph = &r->ph;
	bool has_body = ph->te_chunked || ph->cl > 0;
	c->close_after = ph->minor == 0 ? !ph->conn_keepalive : ph->conn_close;
	r->chunked = ph->te_chunked;
	r->body_left = ph->cl;
	r->body_done = !has_body;
	r->cont_owed = ph->expect_continue && ph->minor >= 1 && has_body;
	r->in.body_expect = r->chunked ? UINT64_MAX : ph->cl;
	sup_httpin_chunked_init(&r->dec);
	r->body_unclaimed = has_body;
	int rc = check(r);
	if (rc < 0) {
		/* A body nobody read must not be taken for the next request. */
		c->close_after |= has_body;
		return;
	}
	if (rc > 0) {
		/* Held: nothing read meanwhile; the client's end and a reset
		 * still seen (the watch). */
		sup_conn_reading(c, false);
		return;
	}
	proceed(r);
}

void sup_http_hold(sup_http_req *r, void (*cancel)(void *ud), void *ud)
{
	r->hold_cancel = cancel;
	r->hold_ud = ud;
}

void sup_http_resume(sup_http_req *r, int rc, const sbx_err *err)
{
	sup_conn *c = r->c;
	bool has_body = r->ph.te_chunked || r->ph.cl > 0;
	r->hold_cancel = NULL;
	r->hold_ud = NULL;
	sup_conn_reading(c, true);
	if (rc < 0) {
		const char *code;
		int status = sup_http_status(NULL, rc, &code);
		r->route = NULL;
		r->id[0] = '\0';
		c->close_after |= has_body;
		sup_http_refuse(r, status, code, err ? err->msg : "refused");
		return;
	}
	if (check_auth(r) < 0) {
		c->close_after |= has_body;
		return;
	}
	proceed(r);
}

/* Checked: the route's state, then its body read or the route run. */
static void proceed(sup_http_req *r)
{
	sup_conn *c = r->c;
	sup_httpin_head *ph = &r->ph;
	bool has_body = ph->te_chunked || ph->cl > 0;
	const sup_http_family *f = r->mount->family;
	r->body_unclaimed = false; /* its route's refusals set close_after themselves */
	r->state = calloc(1, f->state_size ? f->state_size : 1);
	if (!r->state) {
		c->close_after |= has_body;
		sup_http_refuse(r, 500, "internal", "out of memory");
		return;
	}
	sup_http_body_mode mode = r->route->body;
	if (mode == SUP_BODY_UPGRADE && has_body) {
		c->close_after = true;
		sup_http_refuse(r, 400, "bad_request", "an upgrade request has no body");
		return;
	}
	if (mode == SUP_BODY_STREAMED || !has_body) {
		sup_http_run(r);
		return;
	}
	r->body_max = r->route->max_body ? r->route->max_body : c->h->cfg.max_body;
	if (!r->chunked && ph->cl > r->body_max) {
		char msg[128];
		snprintf(msg, sizeof(msg), "request body of %llu bytes is over the limit of %zu",
			 (unsigned long long)ph->cl, r->body_max);
		c->close_after = true;
		sup_http_refuse(r, 413, "too_large", msg);
		return;
	}
	r->body = evbuffer_new();
	if (!r->body) {
		c->close_after = true;
		sup_http_refuse(r, 500, "internal", "out of memory");
		return;
	}
	c->st = C_BODY;
	sup_conn_timer(c, c->h->cfg.body_timeout_s);
	if (r->cont_owed) {
		static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
		r->cont_owed = false;
		evbuffer_add(sup_conn_output(c), cont, sizeof(cont) - 1);
	}
	sup_conn_body(r);
}

/* ---- for acts ---- */

const char *sup_http_in_header(const sup_http_in *in, const char *name)
{
	for (size_t i = 0; i < in->nhdrs; i++)
		if (strcasecmp(in->hdrs[i].name, name) == 0)
			return in->hdrs[i].value;
	return NULL;
}

int sup_http_in_json(const sup_http_in *in, const char *const *keys, json_t **out, sbx_err *err)
{
	json_error_t je;
	const char *key;
	json_t *v, *j = json_loadb(in->body, in->body_len, JSON_REJECT_DUPLICATES, &je);
	*out = j;
	if (!j || !json_is_object(j))
		return sbx_err_set(err, -EINVAL, "body must be a JSON object%s%s", j ? "" : ": ",
				   j ? "" : je.text);
	json_object_foreach(j, key, v) {
		bool ok = !keys;
		for (size_t i = 0; keys && keys[i]; i++)
			ok |= strcmp(keys[i], key) == 0;
		if (!ok)
			return sbx_err_set(err, -EINVAL, "unknown field \"%.64s\"", key);
	}
	return 0;
}

struct event_base *sup_http_base(const sup_http_req *r)
{
	return r->c->h->base;
}

void *sup_http_ctx(const sup_http_req *r)
{
	return r->mount->ctx;
}

const sup_http_in *sup_http_input(const sup_http_req *r)
{
	return &r->in;
}

void sup_http_log_tag(sup_http_req *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->tag, sizeof(r->tag), fmt, ap);
	va_end(ap);
}

void sup_http_note(sup_http_req *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->note, sizeof(r->note), fmt, ap);
	va_end(ap);
}
