/* The sessions' side of MCP over HTTP (sup_mcp_int.h): per sandbox a
 * session table (mcp-host), per session the agent's server process and
 * the requests it serves: the POSTs whose messages wait to go (one at a
 * time, the agent's credit pacing them) and the sinks (POST streams
 * waiting for their answer, the GET stream, resumed streams) a server's
 * messages go out on. Every event goes into the session's bounded replay
 * buffer first, so a cut stream can be resumed; the server is paused
 * (no credit to the agent) while its clients owe reading more than
 * MX_HWM, so a client that stops reading costs a bounded amount. */
#include "sbx/clock.h"
#include "sup_mcp_int.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sup_log.h"

/* Sessions per sandbox; replay per session. */
#define MX_MAX_SESSIONS 64u
#define MX_REPLAY_BYTES (256u << 10)
#define MX_REPLAY_EVENTS 256u
/* Unread bytes of a session's streams before its server is paused, and
 * when it may write again. */
#define MX_HWM (1u << 20)
#define MX_LWM (MX_HWM / 2)
#define MX_KEEPALIVE_S 15u
#define MX_TICK_MS 250

typedef struct mx_host {
	struct mx_host *prev, *next;
	struct sup_mcp_hosts *all;
	char id[SUP_ID_MAX];
	mcp_session_table *t;
} mx_host;

struct sup_mcp_hosts {
	sup_mcp_ctx *x;
	mx_host *list;
	struct event *tick;
};

struct mx_sess {
	mx_host *h;
	mcp_session *ms;
	sup_mcp_session *agent;  /* NULL once it ended */
	mq *sinks;               /* newest first */
	mq *qhead, *qtail;       /* messages waiting to go */
	bool busy;               /* one handed to the agent has not gone yet */
	bool pumping, paused, ending;
	unsigned depth;          /* inside a call that may end us */
	bool dead;               /* ended while depth > 0: free after */
	size_t owed;             /* unread by its clients */
	uint32_t last_sse;       /* the newest request answered on SSE */
	uint64_t get_seq;        /* the GET stream's events sent up to this */
};

/* ---- sandboxes' tables ---- */

static void on_tick(evutil_socket_t fd, short what, void *arg);

static mx_host *host_get(sup_mcp_ctx *x, const char *id, struct event_base *base, sbx_err *err)
{
	struct sup_mcp_hosts *hs = x->hosts;
	mcp_session_opts o = {
		.max_sessions = MX_MAX_SESSIONS,
		.idle_ms = x->idle_ms,
		.replay_bytes = MX_REPLAY_BYTES,
		.replay_events = MX_REPLAY_EVENTS,
	};
	mx_host *h;

	for (h = hs ? hs->list : NULL; h; h = h->next)
		if (strcmp(h->id, id) == 0)
			return h;
	if (!base)
		return NULL;
	if (!hs) {
		hs = calloc(1, sizeof(*hs));
		if (!hs) {
			sbx_err_set(err, -ENOMEM, "out of memory");
			return NULL;
		}
		hs->x = x;
		x->hosts = hs;
	}
	if (!hs->tick && x->idle_ms) {
		struct timeval tv = { 0, MX_TICK_MS * 1000 };

		hs->tick = event_new(base, -1, EV_PERSIST, on_tick, hs);
		if (!hs->tick || event_add(hs->tick, &tv) < 0) {
			sbx_err_set(err, -ENOMEM, "out of memory");
			return NULL;
		}
	}
	h = calloc(1, sizeof(*h));
	if (!h || mcp_session_table_new(&o, &h->t, err) < 0) {
		free(h);
		if (!err->code)
			sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(h->id, sizeof(h->id), "%s", id);
	h->all = hs;
	h->next = hs->list;
	if (hs->list)
		hs->list->prev = h;
	hs->list = h;
	return h;
}

static void host_maybe_free(mx_host *h)
{
	mcp_session_stats st;

	mcp_session_stats_get(h->t, &st);
	if (st.open)
		return;
	if (h->prev)
		h->prev->next = h->next;
	else
		h->all->list = h->next;
	if (h->next)
		h->next->prev = h->prev;
	mcp_session_table_free(h->t, NULL, NULL);
	free(h);
}

/* ---- answers ---- */

/* r's whole answer, of a known length: before (NULL: none), data, after. */
static void reply_whole(sup_http_req *r, int status, const char *type, const char *before, const char *data,
			size_t len, const char *after)
{
	struct evbuffer *b = evbuffer_new();
	size_t nb = before ? strlen(before) : 0, na = after ? strlen(after) : 0;

	sup_http_header(r, "Content-Type", type);
	if (strcmp(type, "text/event-stream") == 0)
		sup_http_header(r, "Cache-Control", "no-cache");
	sup_http_start(r, status, nb + len + na);
	if (b && (!nb || evbuffer_add(b, before, nb) == 0) && evbuffer_add(b, data, len) == 0 &&
	    (!na || evbuffer_add(b, after, na) == 0))
		sup_http_write(r, b);
	else
		sup_http_note(r, "out of memory for the answer");
	if (b)
		evbuffer_free(b);
	sup_http_end(r);
}

void sup_mcp_reply_raw(sup_http_req *r, int status, const char *data, size_t len)
{
	reply_whole(r, status, "application/json", NULL, data, len, NULL);
}

void sup_mcp_rpc_error(sup_http_req *r, const json_t *id, int status, int code, const char *msg)
{
	size_t len = 0;
	char *body = mcp_rpc_error_body(id, code, msg, &len);

	sup_http_note(r, "%s", msg);
	if (!body) {
		sup_http_json(r, 500, NULL);
		return;
	}
	sup_mcp_reply_raw(r, status, body, len);
	free(body);
}

void sup_mcp_rpc_fail(mq *q, int status, int code, const char *msg)
{
	sup_mcp_rpc_error(q->r, q->msg_ok ? q->msg.id : NULL, status, code, msg);
}

static void maybe_resume(mx_sess *m)
{
	if (m->paused && m->owed < MX_LWM && m->agent) {
		m->paused = false;
		sup_agent_mcp_resume(m->agent);
	}
}

static void on_credit(size_t cost, void *ud)
{
	mq *q = ud;
	size_t c = cost < q->owed ? cost : q->owed;

	q->owed -= c;
	if (q->sess) {
		q->sess->owed -= c < q->sess->owed ? c : q->sess->owed;
		maybe_resume(q->sess);
	}
}

static int sse_open(mq *q)
{
	if (q->s)
		return 0;
	q->s = sup_stream_start(q->r, SUP_STREAM_SSE, on_credit, q);
	if (!q->s)
		return -ENOMEM;
	(void)sup_stream_keepalive(q->s, MX_KEEPALIVE_S);
	return 0;
}

/* One event on q's stream; its cost comes back as the client reads. */
static void sse_event(mq *q, const char *id, const char *data, size_t len, bool charge)
{
	mx_sess *m = q->sess;

	if (sse_open(q) < 0) {
		sup_http_note(q->r, "out of memory for an event");
		return;
	}
	if (charge) {
		q->owed += len;
		m->owed += len;
		if (!m->paused && m->owed > MX_HWM && m->agent) {
			m->paused = true;
			sup_agent_mcp_pause(m->agent);
		}
	}
	sup_stream_sse_raw(q->s, id, data, len, charge ? len : 0);
}

/* ---- linking ---- */

static void sink_link(mx_sess *m, mq *q, uint32_t stream)
{
	q->sess = m;
	q->sink = true;
	q->stream = stream;
	q->prev = NULL;
	q->next = m->sinks;
	if (m->sinks)
		m->sinks->prev = q;
	m->sinks = q;
	mcp_session_hold(m->ms, sbx_now_ms());
}

void sup_mcp_sess_unlink(mq *q)
{
	mx_sess *m = q->sess;
	uint32_t st;

	if (!m)
		return;
	if (q->queued) {
		mq **pp = &m->qhead, *prev = NULL;

		while (*pp && *pp != q) {
			prev = *pp;
			pp = &(*pp)->qnext;
		}
		if (*pp)
			*pp = q->qnext;
		if (m->qtail == q)
			m->qtail = prev;
		q->queued = false;
		/* Never sent: nobody will answer it. */
		if (q->sink && q->key[0])
			(void)mcp_session_pending_take(m->ms, q->key, &st);
	}
	if (q->sink) {
		if (q->prev)
			q->prev->next = q->next;
		else
			m->sinks = q->next;
		if (q->next)
			q->next->prev = q->prev;
		q->sink = false;
		m->owed -= q->owed < m->owed ? q->owed : m->owed;
		q->owed = 0;
		mcp_session_release(m->ms, sbx_now_ms());
		maybe_resume(m);
	}
	q->sess = NULL;
}

static mq *sink_of(mx_sess *m, uint32_t stream)
{
	for (mq *q = m->sinks; q; q = q->next)
		if (q->stream == stream)
			return q;
	return NULL;
}

/* A server's own request or notification: the newest open stream of a
 * request (it most likely belongs to it: progress, sampling within a tool
 * call), else the newest request's stream cut by its client (kept for its
 * resumption), else the GET stream (kept for it while it is not open: a
 * server asks roots/list before the client opened it). */
static mq *latest_sink(mx_sess *m, uint32_t *stream)
{
	for (mq *q = m->sinks; q; q = q->next)
		if (q->stream != 0 && q->reply == MCP_TX_SSE) {
			*stream = q->stream;
			return q;
		}
	if (m->last_sse && mcp_session_stream_pending(m->ms, m->last_sse)) {
		*stream = m->last_sse;
		return NULL;
	}
	*stream = 0;
	return sink_of(m, 0);
}

/* q's stream is over (its answer went, or its request was cancelled). */
static void sink_end(mq *q)
{
	sup_stream *s;

	sup_mcp_sess_unlink(q);
	if (q->reply == MCP_TX_JSON && !q->s) {
		sup_http_json(q->r, 204, NULL);
		return;
	}
	if (sse_open(q) < 0) {
		sup_http_cut(q->r, "out of memory");
		return;
	}
	s = q->s;
	q->s = NULL;
	sup_stream_end(s);
}

/* ---- the server's messages ---- */

static void deliver(mx_sess *m, const char *line, size_t len)
{
	char id[MCP_REPLAY_ID_MAX] = "";
	mcp_tx_route route;
	uint32_t stream;
	sbx_err e = { 0 };
	mq *q;

	mcp_session_count(m->ms, false, len, sbx_now_ms());
	if (mcp_tx_route_msg(m->ms, line, len, &route, &stream, &e) < 0) {
		sup_warn("sandbox %s: MCP server %s: a message dropped: %s", m->h->id, mcp_session_server(m->ms),
			 e.msg);
		return;
	}
	if (route == MCP_TX_DROP)
		return;
	if (route == MCP_TX_LATEST) {
		q = latest_sink(m, &stream);
	} else {
		q = sink_of(m, stream);
	}
	if (q && q->reply == MCP_TX_JSON) {
		sup_mcp_sess_unlink(q);
		sup_mcp_reply_raw(q->r, 200, line, len);
		return;
	}
	if (mcp_replay_push(mcp_session_replay(m->ms), stream, line, len, id, &e) < 0)
		sup_warn("sandbox %s: MCP session: %s", m->h->id, e.msg);
	if (!q)
		return; /* the client cut it: kept for its resumption */
	if (stream == 0)
		m->get_seq = mcp_replay_id_seq(id);
	if (route == MCP_TX_STREAM && !q->s) {
		/* The answer is its stream's only event: one whole reply, as a
		 * JSON one (no chunks, no keepalive, no credit to wait for). */
		char head[sizeof(id) + 16];

		snprintf(head, sizeof(head), "id: %s\ndata: ", id);
		sup_mcp_sess_unlink(q);
		reply_whole(q->r, 200, "text/event-stream", id[0] ? head : "data: ", line, len, "\n\n");
		return;
	}
	sse_event(q, id, line, len, true);
	if (route == MCP_TX_STREAM)
		sink_end(q);
}

static void free_if_dead(mx_sess *m)
{
	if (m->depth == 0 && m->dead)
		free(m);
}

static void ag_message(sup_mcp_session *s, const char *msg, size_t len, void *ud)
{
	mx_sess *m = ud;

	m->depth++;
	deliver(m, msg, len);
	m->depth--;
	free_if_dead(m);
}

static void pump(mx_sess *m);

static void ag_writable(sup_mcp_session *s, void *ud)
{
	mx_sess *m = ud;

	m->busy = false;
	pump(m);
}

static void end_session(mx_sess *m, const char *why, const sbx_err *err, bool close_entry);

static void ag_done(sup_mcp_session *s, int rc, const sup_exec_status *st, const sbx_err *err, void *ud)
{
	mx_sess *m = ud;
	char why[sizeof(((sbx_err *)0)->msg) + 64];

	m->agent = NULL;
	if (rc < 0)
		snprintf(why, sizeof(why), "the MCP server's session ended: %s", err ? err->msg : "");
	else
		snprintf(why, sizeof(why), "the MCP server exited");
	sup_info("sandbox %s: MCP server %s, session ended: %s", m->h->id, mcp_session_server(m->ms), why);
	end_session(m, why, rc < 0 ? err : NULL, true);
}

static const sup_mcp_session_cbs agent_cbs = {
	.on_message = ag_message,
	.on_writable = ag_writable,
	.on_done = ag_done,
};

/* ---- the client's messages ---- */

static void pump(mx_sess *m)
{
	if (m->pumping)
		return;
	m->pumping = true;
	m->depth++;
	while (!m->busy && m->qhead && m->agent && !m->ending) {
		mq *q = m->qhead;
		const char *line;
		char *owned = NULL;
		size_t len;
		sbx_err e = { 0 };
		int rc;

		m->qhead = q->qnext;
		if (!m->qhead)
			m->qtail = NULL;
		q->queued = false;
		rc = mcp_tx_line(&q->msg, q->body, q->body_len, &line, &len, &owned, &e);
		m->busy = rc == 0;
		if (rc == 0)
			rc = sup_agent_mcp_send(m->agent, line, len, &e);
		free(owned);
		if (m->ending) {
			/* It ended meanwhile: its sinks were answered, not q. */
			if (q->sess) {
				sup_mcp_sess_unlink(q);
				sup_mcp_rpc_fail(q, 404, MCP_TX_ERROR, "the MCP session ended");
			}
			break;
		}
		if (rc < 0) {
			m->busy = false;
			sup_mcp_sess_unlink(q);
			sup_mcp_rpc_fail(q, 502, MCP_RPC_INTERNAL_ERROR, e.msg);
			continue;
		}
		q->sent = true;
		mcp_session_count(m->ms, true, len, sbx_now_ms());
		if (!q->sink) {
			sup_mcp_sess_unlink(q);
			sup_http_json(q->r, 202, NULL);
		}
	}
	m->pumping = false;
	m->depth--;
	free_if_dead(m);
}

int sup_mcp_sess_post(mx_sess *m, mq *q, sbx_err *err)
{
	uint32_t st;
	int rc;

	q->sess = m;
	if (q->kind == MCP_TX_INIT || q->kind == MCP_TX_CALL) {
		uint32_t stream = mcp_session_new_stream(m->ms);

		rc = mcp_session_pending_add(m->ms, q->key, stream);
		if (rc < 0) {
			q->sess = NULL;
			q->key[0] = '\0';
			return sbx_err_set(err, rc == -ENOSPC ? -EDQUOT : rc == -EEXIST ? -EINVAL : rc,
					   rc == -EEXIST ? "a request with this id is in flight already"
					   : rc == -ENOSPC ? "too many requests in flight"
							   : "request id too long");
		}
		sink_link(m, q, stream);
		if (q->reply == MCP_TX_SSE)
			m->last_sse = stream;
	} else if (q->kind == MCP_TX_CANCEL && q->key[0] && mcp_session_pending_take(m->ms, q->key, &st) == 0) {
		mq *c = sink_of(m, st);

		if (c)
			sink_end(c);
	}
	q->qnext = NULL;
	q->queued = true;
	if (m->qtail)
		m->qtail->qnext = q;
	else
		m->qhead = q;
	m->qtail = q;
	pump(m);
	return 0;
}

/* ---- GET: the server's stream, or a resumption ---- */

static int count_cb(const char *id, const char *data, size_t len, void *ud)
{
	return 0;
}

static int replay_cb(const char *id, const char *data, size_t len, void *ud)
{
	mq *q = ud;

	if (q->stream == 0)
		q->sess->get_seq = mcp_replay_id_seq(id);
	sse_event(q, id, data, len, false);
	return 0;
}

void sup_mcp_sess_get(mx_sess *m, mq *q)
{
	mcp_replay *rp = mcp_session_replay(m->ms);
	uint32_t stream = 0;
	sbx_err e = { 0 };
	int rc;

	q->reply = MCP_TX_SSE;
	if (q->last_event) {
		rc = mcp_replay_after(rp, q->last_event, &stream, count_cb, NULL, &e);
		if (rc < 0) {
			sup_mcp_rpc_fail(q, 400, MCP_TX_ERROR, rc == -EINVAL ? "Last-Event-ID is not an event of this session"
									   : "cannot resume: events after Last-Event-ID were dropped");
			return;
		}
	}
	if (sink_of(m, stream)) {
		sup_mcp_rpc_fail(q, 409, MCP_TX_ERROR, stream ? "that stream is open" : "the session's GET stream is open");
		return;
	}
	sink_link(m, q, stream);
	if (sse_open(q) < 0) {
		sup_mcp_sess_unlink(q);
		sup_http_cut(q->r, "out of memory");
		return;
	}
	if (q->last_event)
		(void)mcp_replay_after(rp, q->last_event, &stream, replay_cb, q, &e);
	else
		(void)mcp_replay_since(rp, 0, m->get_seq, replay_cb, q);
	if (stream != 0 && !mcp_session_stream_pending(m->ms, stream))
		sink_end(q); /* its answer was among the replayed events */
}

/* ---- sessions ---- */

mx_sess *sup_mcp_sess_find(mq *q)
{
	mx_host *h = q->sid ? host_get(q->x, q->id, NULL, NULL) : NULL;
	mcp_session *ms = h ? mcp_session_find(h->t, q->sid, strlen(q->sid)) : NULL;
	mx_sess *m = ms ? mcp_session_data(ms) : NULL;

	if (!m || m->ending || strcmp(mcp_session_server(ms), q->name) != 0)
		return NULL;
	return m;
}

int sup_mcp_sess_open(mq *q, mx_sess **out, sbx_err *err)
{
	mx_host *h = host_get(q->x, q->id, sup_http_base(q->r), err);
	mx_sess *m;
	int rc;

	if (!h)
		return err->code;
	m = calloc(1, sizeof(*m));
	if (!m) {
		host_maybe_free(h);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	m->h = h;
	rc = mcp_session_open(h->t, q->name, sbx_now_ms(), &m->ms, err);
	if (rc == -EBUSY)
		rc = err->code = -EAGAIN;
	if (rc == 0) {
		mcp_session_set_data(m->ms, m);
		rc = sup_core_mcp_open(q->x->core, q->id, q->name, 0, &agent_cbs, m, &m->agent, err);
		if (rc < 0)
			mcp_session_close(h->t, m->ms);
	}
	if (rc < 0) {
		free(m);
		host_maybe_free(h);
		return rc;
	}
	*out = m;
	return 0;
}

const char *sup_mcp_sess_id(const mx_sess *m)
{
	return mcp_session_id(m->ms);
}

mcp_session *sup_mcp_sess_table_entry(const mx_sess *m)
{
	return m->ms;
}

/* A request waiting for its answer gets a JSON-RPC error instead; an
 * initialize the server never answered gets the HTTP status of err (404:
 * no such server; 503: too many sessions; 502: it crashed). */
static void answer_gone(mq *q, const char *why, const sbx_err *err)
{
	size_t len = 0;
	char *body;

	sup_mcp_sess_unlink(q);
	if (err && q->what == MQ_POST && q->kind == MCP_TX_INIT && !q->s) {
		sup_http_fail(q->r, err);
		return;
	}
	if (q->what != MQ_POST || !q->msg_ok || q->kind == MCP_TX_PASS || q->kind == MCP_TX_CANCEL) {
		if (q->s) {
			sup_stream *s = q->s;

			q->s = NULL;
			sup_stream_end(s);
		} else {
			sup_mcp_rpc_fail(q, 404, MCP_TX_ERROR, why);
		}
		return;
	}
	body = mcp_rpc_error_body(q->msg.id, MCP_RPC_INTERNAL_ERROR, why, &len);
	if (!body) {
		sup_http_cut(q->r, "out of memory");
	} else if (q->reply == MCP_TX_JSON && !q->s) {
		sup_mcp_reply_raw(q->r, 200, body, len);
	} else if (sse_open(q) == 0) {
		sup_stream *s = q->s;

		sup_stream_sse_raw(s, NULL, body, len, 0);
		q->s = NULL;
		sup_stream_end(s);
	} else {
		sup_http_cut(q->r, "out of memory");
	}
	free(body);
}

static void end_session(mx_sess *m, const char *why, const sbx_err *err, bool close_entry)
{
	mx_host *h = m->h;
	mq *q;

	if (m->ending)
		return;
	m->ending = true;
	if (m->agent) {
		sup_mcp_session *a = m->agent;

		m->agent = NULL;
		sup_agent_mcp_cancel(a);
	}
	while ((q = m->qhead))
		answer_gone(q, why, err);
	while ((q = m->sinks))
		answer_gone(q, why, err);
	if (close_entry) {
		mcp_session_close(h->t, m->ms);
		host_maybe_free(h);
	}
	m->ms = NULL;
	m->dead = true;
	free_if_dead(m);
}

void sup_mcp_sess_end(mx_sess *m, const char *why)
{
	end_session(m, why, NULL, true);
}

static void expired(mcp_session *s, void *ud)
{
	mx_sess *m = mcp_session_data(s);

	sup_info("sandbox %s: MCP session of %s idle: ended", m->h->id, mcp_session_server(s));
	end_session(m, "the session was idle too long", NULL, false);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct sup_mcp_hosts *hs = arg;
	uint64_t now = sbx_now_ms();

	for (mx_host *h = hs->list, *next; h; h = next) {
		next = h->next;
		/* A paused sandbox's sessions wait with it (API.md): frozen time
		 * is not idle time, so they are kept as used until it resumes. */
		if (sup_core_paused(hs->x->core, h->id))
			mcp_session_touch_all(h->t, now);
		else if (mcp_session_expire(h->t, now, expired, NULL))
			host_maybe_free(h);
	}
}

typedef struct each_ctx {
	const char *name;
	mx_sess *v[MX_MAX_SESSIONS];
	unsigned n;
} each_ctx;

static void collect(const mcp_session *s, void *ud)
{
	each_ctx *c = ud;

	if ((!c->name || strcmp(mcp_session_server(s), c->name) == 0) && c->n < MX_MAX_SESSIONS)
		c->v[c->n++] = mcp_session_data(s);
}

static unsigned sessions_of(sup_mcp_ctx *x, const char *id, const char *name, each_ctx *c)
{
	mx_host *h = host_get(x, id, NULL, NULL);

	c->name = name;
	c->n = 0;
	if (h)
		mcp_session_each(h->t, collect, c);
	return c->n;
}

void sup_mcp_sess_end_server(sup_mcp_ctx *x, const char *id, const char *name)
{
	each_ctx c;

	sessions_of(x, id, name, &c);
	for (unsigned i = 0; i < c.n; i++)
		end_session(c.v[i], "the MCP server was removed", NULL, true);
}

unsigned sup_mcp_sess_count(sup_mcp_ctx *x, const char *id, const char *name)
{
	each_ctx c;

	return sessions_of(x, id, name, &c);
}

void sup_mcp_ctx_release(sup_mcp_ctx *x)
{
	struct sup_mcp_hosts *hs = x->hosts;

	sup_mcp_own_free(x);
	if (!hs)
		return;
	while (hs->list) {
		each_ctx c;
		mx_host *h = hs->list;

		sessions_of(x, h->id, NULL, &c);
		for (unsigned i = 0; i < c.n; i++)
			end_session(c.v[i], "the supervisor stops", NULL, true);
		if (hs->list == h) /* no session held it: free it here */
			host_maybe_free(h);
	}
	if (hs->tick)
		event_free(hs->tick);
	free(hs);
	x->hosts = NULL;
}
