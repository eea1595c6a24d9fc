#include "http_harness.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sup_http_int.h"
#include "sup_token.h"
#include "sup_ws.h"

typedef struct th_req th_req;
struct th_req {
	sup_http_req *r;
	sup_ws *ws;
	char accept[32];
	uint64_t got;
	size_t in_flight;    /* /produce: charged, not given back */
	bool producing;
	struct event *timer;
	struct evbuffer *tmp;
	int left;                 /* /later: loop passes before the answer */
	void (*answer)(th_req *q);
};

unsigned th_released;

static void th_release(void *state)
{
	th_req *q = state;
	th_released++;
	if (q->timer)
		event_free(q->timer);
	if (q->tmp)
		evbuffer_free(q->tmp);
	sup_ws_free(q->ws);
}

static int act_echo(sup_http_req *r, void *state, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(r);
	json_t *o = json_pack("{s:s, s:s, s:s?, s:s?, s:s?}", "method", in->method, "path", in->path,
			      "query", in->query, "id", in->id, "pid", in->pid);
	sup_http_json(r, 200, o);
	return 0;
}

static int parse_x(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	size_t n = strlen(in->pid);
	return strspn(in->pid, "0123456789") == n ? 0 : sbx_err_set(err, -EINVAL, "pid: a number");
}

static int act_body(sup_http_req *r, void *state, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(r);
	sup_http_json(r, 200, json_pack("{s:I, s:s%}", "len", (json_int_t)in->body_len, "body",
					in->body, in->body_len));
	return 0;
}

/* ?n=N of the request's query (0 when none), at most 16. */
static int query_n(const sup_http_req *r)
{
	const char *qs = sup_http_input(r)->query;
	int n = qs && strncmp(qs, "n=", 2) == 0 ? atoi(qs + 2) : 0;
	return n > 16 ? 16 : n;
}

static void later_fire(evutil_socket_t fd, short what, void *ud)
{
	th_req *q = ud;
	if (--q->left > 0) {
		struct timeval now = { 0, 0 };
		evtimer_add(q->timer, &now);
		return;
	}
	q->answer(q);
}

/* answer(q) n loop passes from now: 0 at once, 1 later in this pass (after
 * the callbacks due already), 2 and on in the passes after. */
static int later(th_req *q, int n, void (*answer)(th_req *q), sbx_err *err)
{
	if (q->answer)
		return 0; /* on its way */
	q->answer = answer;
	if (n <= 0) {
		answer(q);
		return 0;
	}
	q->left = n;
	if (!q->timer && !(q->timer = evtimer_new(sup_http_base(q->r), later_fire, q)))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	event_active(q->timer, EV_TIMEOUT, 0);
	return 0;
}

static void answer_later(th_req *q)
{
	sup_http_json(q->r, 200, json_pack("{s:i}", "later", query_n(q->r)));
}

static int act_later(sup_http_req *r, void *state, sbx_err *err)
{
	th_req *q = state;
	q->r = r;
	return later(q, query_n(r), answer_later, err);
}

bool th_never;

static int act_never(sup_http_req *r, void *state, sbx_err *err)
{
	return th_never ? 0 : sbx_err_set(err, -ENOENT, "GET /never is off");
}

static void answer_stream(th_req *q)
{
	sup_http_json(q->r, 200, json_pack("{s:I}", "len", (json_int_t)q->got));
}

static void stream_pump(void *ud)
{
	th_req *q = ud;
	for (;;) {
		struct evbuffer *buf;
		sbx_err e;
		sbx_err_clear(&e);
		int n = sup_http_body(q->r, 100000, &buf, &e);
		if (n == -EAGAIN)
			return;
		if (n < 0) {
			sup_http_fail(q->r, &e);
			return;
		}
		if (n == 0) {
			if (later(q, query_n(q->r), answer_stream, &e) < 0)
				sup_http_fail(q->r, &e);
			return;
		}
		evbuffer_drain(buf, (size_t)n);
		sup_http_body_took(q->r, (size_t)n);
		q->got += (uint64_t)n;
	}
}

static int act_stream(sup_http_req *r, void *state, sbx_err *err)
{
	th_req *q = state;
	q->r = r;
	sup_http_body_start(r, stream_pump, q);
	return 0;
}

static int act_chunks(sup_http_req *r, void *state, sbx_err *err)
{
	th_req *q = state;
	q->tmp = evbuffer_new();
	sup_http_header(r, "Content-Type", "text/plain");
	sup_http_start(r, 200, SUP_HTTP_CHUNKED);
	for (const char *p = "abc"; *p; p++) {
		evbuffer_add(q->tmp, p, 1);
		sup_http_write(r, q->tmp);
	}
	sup_http_end(r);
	return 0;
}

static void raw_read(void *ud)
{
	th_req *q = ud;
	struct evbuffer *in = sup_http_raw_input(q->r);
	struct evbuffer_ptr bye = evbuffer_search(in, "bye", 3, NULL);
	sup_http_write(q->r, in);
	if (bye.pos >= 0)
		sup_http_end(q->r);
}

static int act_raw(sup_http_req *r, void *state, sbx_err *err)
{
	static const char *const hdrs[] = { "X-Test", "1", NULL };
	th_req *q = state;
	q->r = r;
	sup_http_upgrade(r, "echo", hdrs, raw_read, q);
	return 0;
}

/* A WebSocket echo: each message back as it came; "close" closes (1000),
 * "pause" stops reading the client for good. */
static void ws_message(bool binary, const uint8_t *p, size_t n, void *ud)
{
	th_req *q = ud;
	if (!binary && n == 5 && memcmp(p, "close", 5) == 0)
		sup_ws_close(q->ws, 1000, "bye");
	else if (!binary && n == 5 && memcmp(p, "pause", 5) == 0)
		sup_ws_pause(q->ws, true);
	else
		sup_ws_send(q->ws, binary, p, n, 0);
}

static int parse_ws(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	th_req *q = state;
	return sup_ws_check(in, q->accept, err);
}

static int act_ws(sup_http_req *r, void *state, sbx_err *err)
{
	th_req *q = state;
	q->ws = sup_ws_start(r, q->accept, ws_message, q);
	return q->ws ? 0 : sbx_err_set(err, -ENOMEM, "out of memory");
}

th_produce_stats th_produced;

/* Pieces while the window allows; credit that comes back during a charge
 * is only counted (the loop below goes on). */
static void produce_more(th_req *q)
{
	static const uint8_t piece[TH_PIECE];
	size_t window = q->r->c->h->cfg.credit_window;
	if (q->producing)
		return;
	q->producing = true;
	while (th_produced.sent < TH_PRODUCE_LEN && q->in_flight + TH_PIECE <= window) {
		evbuffer_add(q->tmp, piece, TH_PIECE);
		sup_http_write(q->r, q->tmp);
		th_produced.sent += TH_PIECE;
		q->in_flight += TH_PIECE;
		if (sup_http_backlog(q->r) > th_produced.max_backlog)
			th_produced.max_backlog = sup_http_backlog(q->r);
		sup_http_charge(q->r, TH_PIECE);
	}
	q->producing = false;
	if (th_produced.sent == TH_PRODUCE_LEN)
		sup_http_end(q->r);
}

static void produce_credit(size_t cost, void *ud)
{
	th_req *q = ud;
	q->in_flight -= cost;
	produce_more(q);
}

static int act_produce(sup_http_req *r, void *state, sbx_err *err)
{
	th_req *q = state;
	q->r = r;
	if (!(q->tmp = evbuffer_new()))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	th_produced = (th_produce_stats){ 0 };
	sup_http_on_credit(r, produce_credit, q);
	sup_http_start(r, 200, TH_PRODUCE_LEN);
	th_produced.head = sup_http_backlog(r);
	produce_more(q);
	return 0;
}

static void slow_fire(evutil_socket_t fd, short what, void *ud)
{
	th_req *q = ud;
	sup_http_json(q->r, 200, json_pack("{s:s}", "slow", sup_http_input(q->r)->query));
}

static int act_slow(sup_http_req *r, void *state, sbx_err *err)
{
	th_req *q = state;
	struct timeval tv = { 0, 50 * 1000 };
	q->r = r;
	q->timer = evtimer_new(sup_http_base(r), slow_fire, q);
	evtimer_add(q->timer, &tv);
	return 0;
}

static int act_fail(sup_http_req *r, void *state, sbx_err *err)
{
	return sbx_err_set(err, -ENAMETOOLONG, "a name too long");
}

static const sup_http_route routes[] = {
	{ "GET", "/echo", "GET echo", SUP_BODY_NONE, 0, NULL, act_echo },
	{ "DELETE", "/echo", "DELETE echo", SUP_BODY_NONE, 0, NULL, act_echo },
	{ "POST", "/body", "POST body", SUP_BODY_BUFFERED, 1024, NULL, act_body },
	{ "PUT", "/stream", "PUT stream", SUP_BODY_STREAMED, 0, NULL, act_stream },
	{ "GET", "/chunks", "GET chunks", SUP_BODY_NONE, 0, NULL, act_chunks },
	{ "GET", "/raw", "GET raw", SUP_BODY_UPGRADE, 0, NULL, act_raw },
	{ "GET", "/ws", "GET ws", SUP_BODY_UPGRADE, 0, parse_ws, act_ws },
	{ "GET", "/slow", "GET slow", SUP_BODY_NONE, 0, NULL, act_slow },
	{ "GET", "/produce", "GET produce", SUP_BODY_NONE, 0, NULL, act_produce },
	{ "GET", "/fail", "GET fail", SUP_BODY_NONE, 0, NULL, act_fail },
	{ "GET", "/later", "GET later", SUP_BODY_NONE, 0, NULL, act_later },
	{ "GET", "/never", "GET never", SUP_BODY_NONE, 0, NULL, act_never },
	{ "GET", "/v1/sandboxes/{id}/x/{pid}", "GET x", SUP_BODY_NONE, 0, parse_x, act_echo },
};

static const sup_http_family th_family = {
	.name = "test",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(th_req),
	.release = th_release,
};

static const sup_http_mount th_mounts[] = { { &th_family, NULL } };

/* The one caller the harness knows: the edge never looks into it. */
struct sup_tenant {
	int unused;
};
static const struct sup_tenant th_tenant;

static const struct sup_tenant *th_auth(void *ud, const char *token, size_t len)
{
	(void)ud;
	return sup_token_equal(TH_TOKEN, token, len) ? &th_tenant : NULL;
}

void th_default_cfg(sup_http_cfg *cfg)
{
	*cfg = (sup_http_cfg){
		.host = "127.0.0.1",
		.auth = th_auth,
		.max_body = 4096,
		.max_conns = 64,
		.head_timeout_s = 2,
		.body_timeout_s = 2,
		.idle_timeout_s = 5,
		.mounts = th_mounts,
		.nmounts = 1,
	};
}

int th_start(th_server *s, const sup_http_cfg *cfg)
{
	sup_http_cfg def;
	sbx_err err;
	/* as the supervisor's main: a write to a client that is gone is EPIPE,
	 * not the end of the process (the edge writes to half-closed clients) */
	signal(SIGPIPE, SIG_IGN);
	th_default_cfg(&def);
	s->base = event_base_new();
	s->h = s->base ? sup_http_new(s->base, cfg ? cfg : &def, &err) : NULL;
	if (!s->h) {
		fprintf(stderr, "th_start: %s\n", s->base ? err.msg : "event base");
		return -1;
	}
	s->port = sup_http_port(s->h);
	return 0;
}

void th_stop(th_server *s)
{
	sup_http_free(s->h);
	event_base_free(s->base);
}

unsigned th_conns(const th_server *s)
{
	return s->h->nconns;
}

long th_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

long th_clock_slack_ms(void)
{
	struct timespec res = { 0, 0 };
	clock_getres(CLOCK_MONOTONIC_COARSE, &res);
	return res.tv_sec * 1000 + (res.tv_nsec + 999999) / 1000000 + 1;
}

void th_pump(th_server *s, int ms)
{
	long end = th_now_ms() + ms;
	do {
		struct pollfd none;
		event_base_loop(s->base, EVLOOP_NONBLOCK);
		poll(&none, 0, 1);
	} while (th_now_ms() < end);
}

char *th_talk(th_server *s, const void *req, size_t len, size_t step, bool shut, int idle_ms,
	      size_t *outlen, bool *closed)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(s->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	size_t cap = 1 << 16, got = 0, off = 0;
	char *out = malloc(cap);
	*closed = false;
	if (fd < 0 || !out || (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 && errno != EINPROGRESS)) {
		if (fd >= 0)
			close(fd);
		free(out);
		return NULL;
	}
	long last = th_now_ms();
	bool shut_done = false;
	int quiet = 0; /* idle_ms < 0: stop after -idle_ms rounds without progress */
	while (idle_ms < 0 ? quiet < -idle_ms : th_now_ms() - last < idle_ms) {
		size_t before = off + got;
		event_base_loop(s->base, EVLOOP_NONBLOCK);
		if (off < len) {
			size_t k = step && len - off > step ? step : len - off;
			ssize_t w = send(fd, (const char *)req + off, k, MSG_NOSIGNAL);
			if (w > 0) {
				off += (size_t)w;
				last = th_now_ms();
			} else if (w < 0 && errno != EAGAIN && errno != ENOTCONN) {
				off = len; /* the server is gone: read what it said */
			}
		} else if (shut && !shut_done) {
			shutdown(fd, SHUT_WR);
			shut_done = true;
		}
		if (got + 4096 > cap) {
			char *n = realloc(out, cap * 2);
			if (!n)
				break;
			out = n;
			cap *= 2;
		}
		ssize_t r = recv(fd, out + got, cap - got - 1, 0);
		if (r > 0) {
			got += (size_t)r;
			last = th_now_ms();
		} else if (r == 0 || (r < 0 && errno != EAGAIN)) {
			*closed = true;
			break;
		} else if (idle_ms >= 0) {
			struct pollfd p = { .fd = fd, .events = POLLIN };
			poll(&p, 1, 1);
		}
		quiet = off + got == before ? quiet + 1 : 0;
	}
	close(fd);
	/* Let the server see our end. */
	for (int i = 0; i < 5; i++)
		event_base_loop(s->base, EVLOOP_NONBLOCK);
	out[got] = '\0';
	*outlen = got;
	return out;
}
