/* sup_agent: the connection, generic calls and their deadlines, the
 * liveness ping, limits (see sup_agent.h). The exec adapter is in
 * sup_agent_exec.c. */
#include "sup_agent.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/clock.h"
#include "sbx/proto.h"
#include "sbx/proto_conn.h"
#include "sup_agent_dial.h"
#include "sup_log.h"

#define SUP_AGENT_NAME "sandbox-supervisor/0.1.0"
/* The oldest agent served: the operations this supervisor sends */
#define SUP_AGENT_MIN_VERSION "0.1.0"

struct sup_agent_call {
	sup_agent *agent;
	uint64_t id;
	const sup_agent_call_cbs *cbs; /* NULL once cancelled or timed out */
	void *ud;
	TAILQ_ENTRY(sup_agent_call) link;
	char op[24];                   /* for messages */
	/* The deadline: a budget of time the clock may run (see sup_agent.h). */
	sup_agent_wait wait;
	uint64_t timeout_ms;           /* the op's own; non-zero: the budget is never refilled */
	struct event *timer;           /* NULL: no deadline */
	/* In ns: the clock stops and starts around every frame the caller
	 * takes and gives back at once, and a budget kept in whole ms lost
	 * the fraction each time, so a flood of frames never spent it. */
	uint64_t budget_ns;
	struct timespec since;         /* while running: when the clock started */
	bool running;
	/* timeout_ms: the agent's time since the start (its frozen time not
	 * counted) against timeout plus grace, and the bytes it sent past it */
	struct timespec started;
	uint64_t frozen0_ns;           /* the agent's frozen time at the start */
	uint64_t late_bytes;
	size_t held;                   /* cost handed to the caller, not given back yet */
	bool eof_sent;                 /* SENDS: the caller's input has ended */
	bool starved;                  /* SENDS: a send found no credit */
};

TAILQ_HEAD(sup_call_list, sup_agent_call);

/* Every connection's, since start: read by /metrics (loop thread only). */
static sup_agent_totals totals;

void sup_agent_totals_get(sup_agent_totals *t)
{
	*t = totals;
}

struct sup_agent {
	sbx_proto_conn *conn;
	sup_agent_dial *dial;          /* vsock, hybrid vsock: the connect under way */
	struct event_base *base;
	sup_agent_opts o;
	char name[48];                 /* the sandbox's id, for logs */
	struct event *handshake_timer;
	struct event *live_timer;      /* quiet watch, then the ping's deadline */
	struct event *blame_ev;        /* sup_agent_blame: drop on the next turn */
	char blame[SBX_ERR_MSG_MAX];
	uint64_t ping_id;              /* 0: no ping outstanding */
	struct timespec ping_sent;
	struct timespec last_in;       /* the last frame from the agent */
	const sup_agent_cbs *cbs;
	void *ud;
	struct sup_call_list calls;
	unsigned ncalls, nwaiting;
	unsigned dispatching;          /* > 0 while inside a conn callback */
	bool freed;                    /* sup_agent_free ran while dispatching */
	bool lost;                     /* on_lost delivered */
	bool held;                     /* sup_agent_hold: frozen, no clock runs */
	uint64_t frozen_ns;            /* time held, the current hold excluded */
	struct timespec held_since;
};

static void now(struct timespec *t)
{
	clock_gettime(CLOCK_MONOTONIC, t);
}

#define NS_PER_MS 1000000ull

static void timer_add_ms(struct event *ev, uint64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	evtimer_add(ev, &tv);
}

/* Rounded up to the µs: a timer never fires before the budget is spent. */
static void timer_add_ns(struct event *ev, uint64_t ns)
{
	uint64_t us = (ns + 999) / 1000;
	struct timeval tv = { (time_t)(us / 1000000), (suseconds_t)(us % 1000000) };
	evtimer_add(ev, &tv);
}

/* ---- a call's deadline ---- */

static bool clock_should_run(const sup_agent_call *call)
{
	if (!call->timer || !call->cbs || call->held || call->agent->held)
		return false;
	if (call->wait == SUP_AGENT_WAIT_SENDS && !call->timeout_ms)
		return call->eof_sent || call->starved;
	return true;
}

/* Start or stop the clock as the call's state says; the budget keeps what
 * is left while it stands. */
static void clock_update(sup_agent_call *call)
{
	bool run = clock_should_run(call);
	if (run == call->running)
		return;
	call->running = run;
	if (!run) {
		uint64_t spent = sbx_ns_since(&call->since);
		call->budget_ns = spent < call->budget_ns ? call->budget_ns - spent : 0;
		event_del(call->timer);
		return;
	}
	now(&call->since);
	timer_add_ns(call->timer, call->budget_ns);
}

/* A frame of the call came: an idle budget starts again. */
static void clock_refill(sup_agent_call *call)
{
	if (!call->timer || call->timeout_ms)
		return;
	call->budget_ns = call->agent->o.idle_ms * NS_PER_MS;
	if (call->running) {
		now(&call->since);
		timer_add_ns(call->timer, call->budget_ns);
	}
}

static void call_free(sup_agent_call *call)
{
	sup_agent *a = call->agent;
	TAILQ_REMOVE(&a->calls, call, link);
	a->ncalls--;
	if (call->cbs)
		a->nwaiting--;
	if (call->timer)
		event_free(call->timer);
	free(call);
}

static void call_finish(sup_agent_call *call, int rc, const msgpack_object *result,
			const sbx_err *err)
{
	const sup_agent_call_cbs *cbs = call->cbs;
	void *ud = call->ud;
	sup_agent *a = call->agent;
	if (cbs) {
		call->cbs = NULL;
		a->nwaiting--;
	}
	TAILQ_REMOVE(&a->calls, call, link);
	a->ncalls--;
	if (call->timer)
		event_free(call->timer);
	if (cbs)
		cbs->on_done(call, rc, result, err, ud);
	free(call);
}

/* No caller waits any more: CANCEL, and the stream stays open (and
 * counted) until the agent's END/ERR frees it silently. */
static void call_abandon(sup_agent_call *call)
{
	sup_agent *a = call->agent;
	if (call->cbs)
		a->nwaiting--;
	call->cbs = NULL;
	call->ud = NULL;
	clock_update(call);
	if (!a->conn || a->lost) {
		call_free(call);
		return;
	}
	sbx_err e;
	if (sbx_proto_conn_cancel(a->conn, call->id, &e) == 0)
		return;
	sup_warn("agent %s: cancel stream %llu: %s", a->name, (unsigned long long)call->id, e.msg);
	sbx_proto_conn_set_stream_data(a->conn, call->id, NULL);
	call_free(call);
}

/* Our callbacks may free the agent; release it only once we unwound. */
static void agent_release(sup_agent *a)
{
	sup_agent_dial_cancel(a->dial);
	if (a->handshake_timer)
		event_free(a->handshake_timer);
	if (a->live_timer)
		event_free(a->live_timer);
	if (a->blame_ev)
		event_free(a->blame_ev);
	free(a);
}

static void dispatch_begin(sup_agent *a)
{
	a->dispatching++;
}

static void dispatch_end(sup_agent *a)
{
	a->dispatching--;
	if (a->freed && !a->dispatching)
		agent_release(a);
}

/* The call is past its deadline (e->code -ETIME). */
static void call_expire(sup_agent_call *call, const sbx_err *e)
{
	sup_agent *a = call->agent;
	call->running = false;
	call->budget_ns = 0;
	if (call->timer)
		event_del(call->timer);
	const sup_agent_call_cbs *cbs = call->cbs;
	void *cud = call->ud;
	totals.timeouts++;
	dispatch_begin(a);
	/* The caller hears first (the call is still whole for it), then the
	 * stream is cancelled, unless the caller's answer lost the agent. */
	if (cbs)
		a->nwaiting--;
	call->cbs = NULL;
	call->ud = NULL;
	if (cbs)
		cbs->on_done(call, -ETIME, NULL, e, cud);
	if (!a->lost && !a->freed)
		call_abandon(call);
	dispatch_end(a);
}

static void call_late(evutil_socket_t fd, short what, void *ud)
{
	sup_agent_call *call = ud;
	sup_agent *a = call->agent;
	(void)fd;
	(void)what;
	sbx_err e;
	if (call->timeout_ms)
		sbx_err_set(&e, -ETIME,
			    "the agent did not end %s within its timeout of %llu ms and %u ms of grace",
			    call->op, (unsigned long long)call->timeout_ms, a->o.grace_ms);
	else
		sbx_err_set(&e, -ETIME, "the agent sent nothing on %s for %u ms", call->op,
			    a->o.idle_ms);
	call_expire(call, &e);
}

static uint64_t agent_frozen_ns(const sup_agent *a)
{
	return a->frozen_ns + (a->held ? sbx_ns_since(&a->held_since) : 0);
}

/* The clock stands while the caller holds cost (sup_agent.h), so an agent
 * that floods within its credit while the caller passes its bytes on
 * slowly would never see its deadline. Past its timeout plus grace in its
 * own time (frozen time not counted) it may send what it can have held
 * at the timeout (SUP_AGENT_LATE_BYTES); a byte more and it is late,
 * whatever the caller does. True when the call ended so. */
static bool call_sends_late(sup_agent_call *call, size_t n)
{
	sup_agent *a = call->agent;
	if (!call->timeout_ms)
		return false;
	uint64_t frozen = agent_frozen_ns(a) - call->frozen0_ns;
	uint64_t ran = sbx_ns_since(&call->started);
	if ((ran > frozen ? ran - frozen : 0) <= (call->timeout_ms + a->o.grace_ms) * NS_PER_MS)
		return false;
	call->late_bytes += n;
	if (call->late_bytes <= SUP_AGENT_LATE_BYTES)
		return false;
	sbx_err e;
	sbx_err_set(&e, -ETIME,
		    "the agent did not end %s within its timeout of %llu ms and %u ms of grace "
		    "(it sent %llu bytes past it and went on)",
		    call->op, (unsigned long long)call->timeout_ms, a->o.grace_ms,
		    (unsigned long long)call->late_bytes);
	call_expire(call, &e);
	return true;
}

/* ---- the connection ---- */

static void fail_all_calls(sup_agent *a, int code, const char *why)
{
	sup_agent_call *call;
	while ((call = TAILQ_FIRST(&a->calls)) != NULL) {
		sbx_err e;
		sbx_err_set(&e, code, "%s", why);
		/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the callee unlinks it first; the analyzer cannot follow sys/queue.h */
		call_finish(call, code, NULL, &e);
	}
}

/* The connection is over: fail the calls, tell the owner once. */
static void agent_lost(sup_agent *a, int code, const char *why)
{
	if (a->lost || a->freed)
		return;
	if (code == -EPROTO)
		totals.faults++;
	a->lost = true;
	sup_agent_dial_cancel(a->dial);
	a->dial = NULL;
	if (a->conn) {
		sbx_proto_conn_free(a->conn);
		a->conn = NULL;
	}
	if (a->live_timer)
		event_del(a->live_timer);
	if (a->handshake_timer)
		event_del(a->handshake_timer);
	fail_all_calls(a, code, why);
	if (a->freed)
		return; /* a call's on_done freed us: the owner knows */
	sbx_err e;
	sbx_err_set(&e, code, "%s", why);
	a->cbs->on_lost(a, &e, a->ud);
}

/* The same from one of our own callbacks (a timer, the library's). */
static void agent_lose(sup_agent *a, int code, const char *why)
{
	dispatch_begin(a);
	agent_lost(a, code, why);
	dispatch_end(a);
}

static int map_agent_code(sbx_proto_code code)
{
	switch (code) {
	case SBX_PROTO_E_NOT_FOUND:
		return -ENOENT;
	case SBX_PROTO_E_PERMISSION:
		return -EACCES;
	case SBX_PROTO_E_EXISTS:
		return -EEXIST;
	case SBX_PROTO_E_NO_SPACE:
		return -ENOSPC;
	case SBX_PROTO_E_BAD_REQUEST:
	case SBX_PROTO_E_EXEC_FAILED:
	case SBX_PROTO_E_UNKNOWN_OP:
	case SBX_PROTO_E_UNSUPPORTED:
		return -EINVAL;
	case SBX_PROTO_E_TOO_LARGE:
		return -E2BIG;
	case SBX_PROTO_E_TOO_MANY_STREAMS:
		return -EAGAIN;
	case SBX_PROTO_E_SHUTTING_DOWN:
		return -ECONNABORTED;
	case SBX_PROTO_E_CANCELLED:
		return -ECANCELED;
	case SBX_PROTO_E_TIMEOUT:
		return -ETIMEDOUT;
	case SBX_PROTO_E_BAD_OUTPUT:
		return -EBADMSG;
	case SBX_PROTO_E_CRASHED:
		return -EPIPE;
	default:
		return -EPROTO;
	}
}

/* ---- liveness ---- */

static void ping_answered(sup_agent *a)
{
	a->ping_id = 0;
	if (a->o.ping_after_ms && !a->held)
		timer_add_ms(a->live_timer, a->o.ping_after_ms);
}

static void on_live(evutil_socket_t fd, short what, void *ud)
{
	sup_agent *a = ud;
	(void)fd;
	(void)what;
	if (a->lost || a->freed || !a->conn || a->held)
		return; /* held: sup_agent_hold starts the watch again */
	dispatch_begin(a);
	uint64_t quiet = sbx_ms_since(&a->last_in);
	if (a->ping_id && quiet < sbx_ms_since(&a->ping_sent) && quiet < a->o.ping_timeout_ms) {
		/* Frames came since the ping: a busy agent works through the
		 * requests we queued before it. Alive; the answer may come. */
		timer_add_ms(a->live_timer, a->o.ping_timeout_ms - quiet);
	} else if (a->ping_id) {
		char why[128];
		snprintf(why, sizeof(why),
			 "the agent did not answer a ping: nothing came from it for %u ms",
			 a->o.ping_timeout_ms);
		agent_lost(a, -EPROTO, why);
	} else {
		uint64_t id = 0;
		sbx_err e;
		if (quiet < a->o.ping_after_ms) {
			timer_add_ms(a->live_timer, a->o.ping_after_ms - quiet);
		} else if (sbx_proto_conn_request(a->conn, SBX_OP_PING, NULL, 0, &id, &e) < 0) {
			/* every stream the agent allows is ours: their own deadlines
			 * watch it until one ends */
			sup_warn("agent %s: cannot ping: %s", a->name, e.msg);
			timer_add_ms(a->live_timer, a->o.ping_after_ms);
		} else {
			a->ping_id = id;
			now(&a->ping_sent);
			timer_add_ms(a->live_timer, a->o.ping_timeout_ms);
		}
	}
	dispatch_end(a);
}

void sup_agent_hold(sup_agent *a, bool held)
{
	if (a->held == held || a->lost || a->freed || !a->conn)
		return;
	a->held = held;
	if (held)
		now(&a->held_since);
	else
		a->frozen_ns += sbx_ns_since(&a->held_since);
	sbx_proto_conn_peer_held(a->conn, held);
	for (sup_agent_call *call = TAILQ_FIRST(&a->calls); call; call = TAILQ_NEXT(call, link))
		clock_update(call);
	if (held) {
		event_del(a->live_timer);
		return;
	}
	/* thawed: the quiet watch, or a ping sent before the freeze, starts
	 * its clock now (its answer may still come) */
	now(&a->last_in);
	if (a->ping_id) {
		now(&a->ping_sent);
		timer_add_ms(a->live_timer, a->o.ping_timeout_ms);
	} else if (a->o.ping_after_ms) {
		timer_add_ms(a->live_timer, a->o.ping_after_ms);
	}
}

static void on_blame(evutil_socket_t fd, short what, void *ud)
{
	(void)fd;
	(void)what;
	agent_lose(ud, -EPROTO, ((sup_agent *)ud)->blame);
}

void sup_agent_blame(sup_agent *a, const char *fmt, ...)
{
	if (!a || a->lost || a->freed || a->blame[0])
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(a->blame, sizeof(a->blame), fmt, ap);
	va_end(ap);
	if (!a->blame[0])
		snprintf(a->blame, sizeof(a->blame), "the agent broke the protocol");
	sup_warn("agent %s: %s; dropping the connection", a->name, a->blame);
	if (!a->blame_ev)
		a->blame_ev = evtimer_new(a->base, on_blame, a);
	if (a->blame_ev)
		timer_add_ms(a->blame_ev, 0);
	else
		agent_lost(a, -EPROTO, a->blame); /* out of memory: at once */
}

/* ---- frames from the agent ---- */

static void on_call_frame(sup_agent *a, sup_agent_call *call, const sbx_proto_frame *f)
{
	switch (f->kind) {
	case SBX_PROTO_DATA:
		clock_refill(call);
		if (!call->cbs || f->data_len == 0) {
			/* Cancelled, or a bare eof: nothing to pass on. */
			sbx_proto_conn_consumed(a->conn, f->id, f->body_len);
			return;
		}
		if (call_sends_late(call, f->body_len))
			return; /* cancelled: its credit is not given back */
		call->held += f->body_len;
		totals.bytes_from += f->data_len;
		clock_update(call);
		call->cbs->on_data(call, f->ch ? f->ch : "", f->ch ? f->ch_len : 0, f->data,
				   f->data_len, f->body_len, call->ud);
		return;
	case SBX_PROTO_EVENT:
		clock_refill(call);
		if (!call->cbs || !call->cbs->on_event) {
			sbx_proto_conn_consumed(a->conn, f->id, f->body_len);
			return;
		}
		if (call_sends_late(call, f->body_len))
			return;
		call->held += f->body_len;
		totals.bytes_from += f->data_len;
		clock_update(call);
		call->cbs->on_event(call, &f->args, f->body_len, call->ud);
		return;
	case SBX_PROTO_END:
		call_finish(call, 0, &f->args, NULL);
		return;
	case SBX_PROTO_ERR: {
		sbx_err e;
		int code = map_agent_code(f->code);
		int ml = f->msg_len > 300 ? 300 : (int)f->msg_len;
		int cl = f->code_name_len > 40 ? 40 : (int)f->code_name_len;
		sbx_err_set(&e, code, "agent: %.*s: %.*s", cl, f->code_name ? f->code_name : "",
			    ml, f->msg ? f->msg : "");
		call_finish(call, code, NULL, &e);
		return;
	}
	default:
		/* CTL/CANCEL on a stream we opened: the library refuses those. */
		return;
	}
}

static void on_stream_frame(sup_agent *a, const sbx_proto_frame *f)
{
	if (a->ping_id && f->id == a->ping_id) {
		if (f->kind == SBX_PROTO_END || f->kind == SBX_PROTO_ERR)
			ping_answered(a);
		else if (f->kind == SBX_PROTO_DATA || f->kind == SBX_PROTO_EVENT)
			sbx_proto_conn_consumed(a->conn, f->id, f->body_len);
		return;
	}
	sup_agent_call *call = sbx_proto_conn_stream_data(a->conn, f->id);
	if (!call) {
		/* A stream we did not open through sup_agent_call_start: the peer
		 * opened one (we serve nothing), or one we already let go of. */
		if (f->kind == SBX_PROTO_REQ)
			sbx_proto_conn_fail(a->conn, f->id, SBX_PROTO_E_UNKNOWN_OP,
					    "the supervisor serves no requests", NULL);
		else if (f->kind == SBX_PROTO_DATA || f->kind == SBX_PROTO_EVENT)
			sbx_proto_conn_consumed(a->conn, f->id, f->body_len);
		return;
	}
	on_call_frame(a, call, f);
}

/* "sandbox-agent/X.Y.Z" at least SUP_AGENT_MIN_VERSION: an image may bring
 * its own agent, and one older than the operations this supervisor sends
 * would be half served (unknown_op in the middle of a user's work). */
static bool agent_version_ok(const char *peer)
{
	static const char prefix[] = "sandbox-agent/";
	unsigned have[3], want[3];
	if (!peer || strncmp(peer, prefix, sizeof(prefix) - 1) != 0 ||
	    sscanf(peer + sizeof(prefix) - 1, "%u.%u.%u", &have[0], &have[1], &have[2]) != 3 ||
	    sscanf(SUP_AGENT_MIN_VERSION, "%u.%u.%u", &want[0], &want[1], &want[2]) != 3)
		return false;
	for (int i = 0; i < 3; i++)
		if (have[i] != want[i])
			return have[i] > want[i];
	return true;
}

static void conn_on_ready(sbx_proto_conn *c, void *ud)
{
	sup_agent *a = ud;
	(void)c;
	if (a->handshake_timer)
		event_del(a->handshake_timer);
	const char *peer = sbx_proto_conn_peer_agent(a->conn);
	if (!agent_version_ok(peer)) {
		char why[200];
		snprintf(why, sizeof(why),
			 "the sandbox's agent is '%.60s'; this supervisor needs sandbox-agent/%s or newer "
			 "(rebuild the image with a newer agent layer)",
			 peer ? peer : "(unnamed)", SUP_AGENT_MIN_VERSION);
		agent_lose(a, -EPROTO, why);
		return;
	}
	now(&a->last_in);
	if (a->o.ping_after_ms)
		timer_add_ms(a->live_timer, a->o.ping_after_ms);
	dispatch_begin(a);
	a->cbs->on_ready(a, a->ud);
	dispatch_end(a);
}

static void conn_on_frame(sbx_proto_conn *c, const sbx_proto_frame *f, void *ud)
{
	sup_agent *a = ud;
	(void)c;
	now(&a->last_in);
	dispatch_begin(a);
	on_stream_frame(a, f);
	dispatch_end(a);
}

static void call_writable(sup_agent_call *call)
{
	if (call->starved) {
		call->starved = false;
		clock_update(call);
	}
	if (call->cbs && call->cbs->on_writable)
		call->cbs->on_writable(call, call->ud);
}

static void conn_on_writable(sbx_proto_conn *c, uint64_t id, void *ud)
{
	sup_agent *a = ud;
	dispatch_begin(a);
	if (id) {
		/* Credit came, or the socket drained while the stream waited for
		 * room: either way the agent moved on this stream. */
		sup_agent_call *call = sbx_proto_conn_stream_data(c, id);
		if (call) {
			clock_refill(call);
			call_writable(call);
		}
	} else {
		sup_agent_call *call, *next;
		for (call = TAILQ_FIRST(&a->calls); call && !a->lost && !a->freed; call = next) {
			next = TAILQ_NEXT(call, link);
			call_writable(call);
		}
	}
	dispatch_end(a);
}

/* Whatever the guest did wrong reaches callers as an agent error (502),
 * never as one of the client's statuses: the library names a frame over
 * our limit -E2BIG and bad msgpack -EBADMSG, which would read as a
 * client's too-large or bad request one level up. */
static int guest_code(int code)
{
	switch (code) {
	case -ENOMEM:       /* ours */
	case -ECONNRESET:   /* the agent closed the connection */
	case -ECONNABORTED: /* ... with an err frame */
		return code;
	default:
		return -EPROTO;
	}
}

static void conn_on_close(sbx_proto_conn *c, const sbx_err *why, void *ud)
{
	sup_agent *a = ud;
	(void)c;
	int code = guest_code(why && why->code ? why->code : -ECONNRESET);
	char msg[SBX_ERR_MSG_MAX];
	if (!why || !why->msg[0])
		snprintf(msg, sizeof(msg), "the agent closed the connection");
	else if (code == -EPROTO)
		snprintf(msg, sizeof(msg), "the agent broke the protocol: %.400s", why->msg);
	else
		snprintf(msg, sizeof(msg), "agent connection: %.400s", why->msg);
	agent_lose(a, code, msg);
}

static void on_handshake_timeout(evutil_socket_t fd, short what, void *ud)
{
	sup_agent *a = ud;
	(void)fd;
	(void)what;
	if (!a->dial) {
		agent_lose(a, -ETIMEDOUT, "no hello from the agent in time");
		return;
	}
	char msg[SBX_ERR_MSG_MAX];
	snprintf(msg, sizeof(msg), "agent connection %s: not connected in time",
		 sup_agent_dial_name(a->dial));
	agent_lose(a, -ETIMEDOUT, msg);
}

static const sbx_proto_conn_cbs conn_cbs = {
	.on_ready = conn_on_ready,
	.on_frame = conn_on_frame,
	.on_writable = conn_on_writable,
	.on_close = conn_on_close,
};

/* The agent object, its timers and the handshake deadline (it covers the
 * dial too); no connection yet. */
static int agent_new(struct event_base *base, const char *name, unsigned handshake_timeout_ms,
		     const sup_agent_opts *opts, const sup_agent_cbs *cbs, void *ud,
		     sup_agent **out, sbx_err *err)
{
	sup_agent *a = calloc(1, sizeof(*a));
	if (!a)
		return sbx_err_set(err, -ENOMEM, "agent");
	TAILQ_INIT(&a->calls);
	a->base = base;
	a->o = *opts;
	snprintf(a->name, sizeof(a->name), "%s", name ? name : "?");
	a->cbs = cbs;
	a->ud = ud;
	a->handshake_timer = evtimer_new(base, on_handshake_timeout, a);
	a->live_timer = evtimer_new(base, on_live, a);
	if (!a->handshake_timer || !a->live_timer) {
		agent_release(a);
		return sbx_err_set(err, -ENOMEM, "agent timers");
	}
	timer_add_ms(a->handshake_timer, handshake_timeout_ms);
	*out = a;
	return 0;
}

/* The protocol over a connected socket (taken): whatever the transport
 * below, from here on the same. */
static int agent_attach(sup_agent *a, int fd, sbx_err *err)
{
	sbx_proto_conn_opts copts = {
		.is_client = true,
		.agent = SUP_AGENT_NAME,
		.frame_timeout_ms = a->o.frame_ms,
		.window = SUP_AGENT_RECV_WINDOW,
	};
	a->conn = sbx_proto_conn_new(a->base, fd, &copts, &conn_cbs, a, err);
	return a->conn ? 0 : err->code;
}

int sup_agent_open(struct event_base *base, int fd, const char *name,
		   unsigned handshake_timeout_ms, const sup_agent_opts *opts,
		   const sup_agent_cbs *cbs, void *ud, sup_agent **out, sbx_err *err)
{
	sup_agent *a = NULL;
	int rc = agent_new(base, name, handshake_timeout_ms, opts, cbs, ud, &a, err);
	if (rc < 0 || !a) {
		close(fd);
		return rc < 0 ? rc : -ENOMEM;
	}
	rc = agent_attach(a, fd, err);
	if (rc < 0) {
		agent_release(a);
		return rc;
	}
	*out = a;
	return 0;
}

/* A vsock or hybrid vsock dial came to its end (sup_agent_dial). */
static void on_dialled(int fd, const sbx_err *why, void *ud)
{
	sup_agent *a = ud;
	a->dial = NULL;
	/* Not the guest's fault (the VMM answers CONNECT): the agent is out of
	 * reach, as when its unix socket refuses. */
	if (fd < 0) {
		agent_lose(a, -ECONNRESET, why->msg);
		return;
	}
	sbx_err e;
	if (agent_attach(a, fd, &e) < 0)
		agent_lose(a, -ENOMEM, e.msg);
}

int sup_agent_connect(struct event_base *base, const char *address, const char *name,
		      unsigned handshake_timeout_ms, const sup_agent_opts *opts,
		      const sup_agent_cbs *cbs, void *ud, sup_agent **out, sbx_err *err)
{
	sup_agent_addr addr;
	int rc = sup_agent_addr_parse(address, &addr, err);
	if (rc < 0)
		return rc;
	sup_agent *a = NULL;
	rc = agent_new(base, name, handshake_timeout_ms, opts, cbs, ud, &a, err);
	if (rc < 0 || !a)
		return rc < 0 ? rc : -ENOMEM;
	int fd = -1;
	rc = sup_agent_dial_start(base, &addr, on_dialled, a, &fd, &a->dial, err);
	if (rc == 0)
		rc = agent_attach(a, fd, err);
	if (rc < 0) {
		agent_release(a);
		return sbx_err_wrap(err, "agent connection %s", address);
	}
	*out = a;
	return 0;
}

void sup_agent_free(sup_agent *a)
{
	if (!a)
		return;
	if (a->freed)
		return;
	sup_agent_dial_cancel(a->dial);
	a->dial = NULL;
	if (a->conn) {
		sbx_proto_conn_free(a->conn);
		a->conn = NULL;
	}
	a->lost = true; /* no on_lost after an explicit free */
	fail_all_calls(a, -ECONNABORTED, "agent connection: closed by the supervisor");
	a->freed = true;
	if (!a->dispatching)
		agent_release(a);
}

const char *sup_agent_peer(const sup_agent *a)
{
	if (!a->conn || !sbx_proto_conn_ready(a->conn))
		return "";
	const char *p = sbx_proto_conn_peer_agent(a->conn);
	return p ? p : "";
}

void sup_agent_stats_get(const sup_agent *a, sup_agent_stats *st)
{
	st->streams = a->ncalls;
	st->waiting = a->nwaiting;
	st->queued = a->conn ? sbx_proto_conn_pending_output(a->conn) : 0;
}

/* ---- calls ---- */

/* What the agent already holds of ours stops a new call (503, not a queue). */
static int check_limits(sup_agent *a, const char *op, size_t args_len, sbx_err *err)
{
	/* one stream stays free for the ping */
	uint32_t peer = sbx_proto_conn_peer_max_streams(a->conn);
	if (a->ncalls >= a->o.max_streams || a->ncalls + 1 >= peer)
		return sbx_err_set(err, -EAGAIN,
				   "%s: %u streams are open to the agent (at most %u); try again later",
				   op, a->ncalls, a->o.max_streams < peer - 1 ? a->o.max_streams : peer - 1);
	if (a->nwaiting >= a->o.max_waiting)
		return sbx_err_set(err, -EAGAIN,
				   "%s: %u requests wait on the agent (at most %u); try again later", op,
				   a->nwaiting, a->o.max_waiting);
	size_t queued = sbx_proto_conn_pending_output(a->conn);
	if (queued + args_len > a->o.max_queued)
		return sbx_err_set(err, -EAGAIN,
				   "%s: %zu bytes wait to be read by the agent (at most %zu); try again later",
				   op, queued, a->o.max_queued);
	return 0;
}

int sup_agent_call_start(sup_agent *a, const char *op, const void *args, size_t args_len,
			 sup_agent_wait wait, uint64_t timeout_ms, const sup_agent_call_cbs *cbs,
			 void *ud, sup_agent_call **out, sbx_err *err)
{
	if (!a->conn || a->lost || !sbx_proto_conn_ready(a->conn))
		return sbx_err_set(err, -ECONNRESET, "agent connection is not up");
	/* The request must fit in one frame the agent accepts. */
	if (args_len + SBX_PROTO_DATA_OVERHEAD > sbx_proto_conn_peer_max_frame(a->conn))
		return sbx_err_set(err, -E2BIG,
				   "%s request of %zu bytes is larger than the agent accepts (%u)", op,
				   args_len, sbx_proto_conn_peer_max_frame(a->conn));
	int rc = check_limits(a, op, args_len, err);
	if (rc < 0)
		return rc;
	sup_agent_call *call = calloc(1, sizeof(*call));
	if (!call)
		return sbx_err_set(err, -ENOMEM, "agent call");
	if (timeout_ms || wait != SUP_AGENT_WAIT_QUIET) {
		call->timer = evtimer_new(a->base, call_late, call);
		if (!call->timer) {
			free(call);
			return sbx_err_set(err, -ENOMEM, "agent call");
		}
	}
	rc = sbx_proto_conn_request(a->conn, op, args, args_len, &call->id, err);
	if (rc < 0) {
		if (call->timer)
			event_free(call->timer);
		free(call);
		if (rc == -EBUSY)
			return sbx_err_set(err, -EAGAIN, "too many requests in flight on this sandbox");
		return rc;
	}
	call->agent = a;
	call->cbs = cbs;
	call->ud = ud;
	snprintf(call->op, sizeof(call->op), "%s", op);
	call->wait = wait;
	call->timeout_ms = timeout_ms;
	call->budget_ns = (timeout_ms ? timeout_ms + a->o.grace_ms : a->o.idle_ms) * NS_PER_MS;
	now(&call->started);
	call->frozen0_ns = agent_frozen_ns(a);
	sbx_proto_conn_set_stream_data(a->conn, call->id, call);
	TAILQ_INSERT_TAIL(&a->calls, call, link);
	a->ncalls++;
	a->nwaiting++;
	clock_update(call);
	*out = call;
	return 0;
}

void sup_agent_call_consumed(sup_agent_call *call, size_t cost)
{
	sup_agent *a = call->agent;
	call->held = cost < call->held ? call->held - cost : 0;
	clock_update(call);
	if (a->conn && !a->lost)
		sbx_proto_conn_consumed(a->conn, call->id, cost);
}

int sup_agent_call_add_data(sup_agent_call *call, const uint8_t *p, size_t n,
			    struct evbuffer *dst)
{
	sup_agent *a = call->agent;
	if (a->conn)
		return sbx_proto_conn_add_data(a->conn, p, n, dst);
	return n == 0 || evbuffer_add(dst, p, n) == 0 ? 0 : -ENOMEM;
}

/* How many of n bytes fit in call's credit now, in *m; < 0 when the
 * connection is gone. */
static int call_fit(sup_agent_call *call, size_t n, size_t *m, sbx_err *err)
{
	sup_agent *a = call->agent;
	if (!a->conn || a->lost)
		return sbx_err_set(err, -ECONNRESET, "agent connection lost");
	size_t room = sbx_proto_conn_data_room(a->conn, call->id);
	*m = n < room ? n : room;
	return 0;
}

/* A send of m bytes (of n wanted) is over: rc as the caller sees it, and
 * the deadline told whether the call now waits for the agent's credit. */
static int call_sent(sup_agent_call *call, int rc, size_t m, size_t n)
{
	if (rc == -EAGAIN) {
		rc = 0;
		m = 0;
	}
	bool starved = rc >= 0 && m < n;
	if (rc >= 0)
		totals.bytes_to += m;
	if (starved != call->starved) {
		call->starved = starved;
		clock_update(call);
	}
	return rc < 0 ? rc : (int)m;
}

int sup_agent_call_send(sup_agent_call *call, const char *ch, const uint8_t *p, size_t n,
			bool eof, sbx_err *err)
{
	size_t m = 0;
	int rc = call_fit(call, n, &m, err);
	if (rc < 0)
		return rc;
	if (n && m == 0)
		return call_sent(call, 0, 0, n);
	rc = sbx_proto_conn_send_data(call->agent->conn, call->id, ch, p, m, eof && m == n, err);
	if (rc >= 0 && eof && m == n && !call->eof_sent) {
		call->eof_sent = true;
		clock_update(call);
	}
	return call_sent(call, rc, m, n);
}

int sup_agent_call_send_from(sup_agent_call *call, const char *ch, struct evbuffer *src, size_t n,
			     sbx_err *err)
{
	size_t m = 0;
	int rc = call_fit(call, n, &m, err);
	if (rc < 0)
		return rc;
	if (m == 0)
		return call_sent(call, 0, 0, n);
	rc = sbx_proto_conn_send_data_from(call->agent->conn, call->id, ch, src, m, err);
	return call_sent(call, rc, m, n);
}

void sup_agent_call_cancel(sup_agent_call *call)
{
	call_abandon(call);
}

sup_agent *sup_agent_call_agent(const sup_agent_call *call)
{
	return call->agent;
}
