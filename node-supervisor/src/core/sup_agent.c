/* sup_agent: the connection, its handshake, the liveness ping and the
 * blame of a guest that broke the protocol (see sup_agent.h). A call's
 * life and deadline are in sup_agent_call.c, the exec adapter in
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
#include "sup_agent_int.h"
#include "sup_log.h"

#define SUP_AGENT_NAME "sandbox-supervisor/0.1.0"
/* The oldest agent served: the operations this supervisor sends */
#define SUP_AGENT_MIN_VERSION "0.1.0"

sup_agent_totals sup_agent_tally;

void sup_agent_totals_get(sup_agent_totals *t)
{
	*t = sup_agent_tally;
}

static void timer_add_ms(struct event *ev, uint64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	evtimer_add(ev, &tv);
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

void sup_agent_dispatch_begin(sup_agent *a)
{
	a->dispatching++;
}

void sup_agent_dispatch_end(sup_agent *a)
{
	a->dispatching--;
	if (a->freed && !a->dispatching)
		agent_release(a);
}


/* ---- the connection ---- */


/* The connection is over: fail the calls, tell the owner once. */
static void agent_lost(sup_agent *a, int code, const char *why)
{
	if (a->lost || a->freed)
		return;
	if (code == -EPROTO)
		sup_agent_tally.faults++;
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
	sup_agent_calls_fail(a, code, why);
	if (a->freed)
		return; /* a call's on_done freed us: the owner knows */
	sbx_err e;
	sbx_err_set(&e, code, "%s", why);
	a->cbs->on_lost(a, &e, a->ud);
}

/* The same from one of our own callbacks (a timer, the library's). */
static void agent_lose(sup_agent *a, int code, const char *why)
{
	sup_agent_dispatch_begin(a);
	agent_lost(a, code, why);
	sup_agent_dispatch_end(a);
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
	sup_agent_dispatch_begin(a);
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
			sup_agent_now(&a->ping_sent);
			timer_add_ms(a->live_timer, a->o.ping_timeout_ms);
		}
	}
	sup_agent_dispatch_end(a);
}

void sup_agent_hold(sup_agent *a, bool held)
{
	if (a->held == held || a->lost || a->freed || !a->conn)
		return;
	a->held = held;
	if (held)
		sup_agent_now(&a->held_since);
	else
		a->frozen_ns += sbx_ns_since(&a->held_since);
	sbx_proto_conn_peer_held(a->conn, held);
	for (sup_agent_call *call = TAILQ_FIRST(&a->calls); call; call = TAILQ_NEXT(call, link))
		sup_agent_call_clock_update(call);
	if (held) {
		event_del(a->live_timer);
		return;
	}
	/* thawed: the quiet watch, or a ping sent before the freeze, starts
	 * its clock now (its answer may still come) */
	sup_agent_now(&a->last_in);
	if (a->ping_id) {
		sup_agent_now(&a->ping_sent);
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
	sup_agent_call_frame(call, f);
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
	sup_agent_now(&a->last_in);
	if (a->o.ping_after_ms)
		timer_add_ms(a->live_timer, a->o.ping_after_ms);
	sup_agent_dispatch_begin(a);
	a->cbs->on_ready(a, a->ud);
	sup_agent_dispatch_end(a);
}

static void conn_on_frame(sbx_proto_conn *c, const sbx_proto_frame *f, void *ud)
{
	sup_agent *a = ud;
	(void)c;
	sup_agent_now(&a->last_in);
	sup_agent_dispatch_begin(a);
	on_stream_frame(a, f);
	sup_agent_dispatch_end(a);
}


static void conn_on_writable(sbx_proto_conn *c, uint64_t id, void *ud)
{
	sup_agent *a = ud;
	sup_agent_dispatch_begin(a);
	if (id) {
		/* Credit came, or the socket drained while the stream waited for
		 * room: either way the agent moved on this stream. */
		sup_agent_call *call = sbx_proto_conn_stream_data(c, id);
		if (call) {
			sup_agent_call_refill(call);
			sup_agent_call_writable(call);
		}
	} else {
		sup_agent_call *call, *next;
		for (call = TAILQ_FIRST(&a->calls); call && !a->lost && !a->freed; call = next) {
			next = TAILQ_NEXT(call, link);
			sup_agent_call_writable(call);
		}
	}
	sup_agent_dispatch_end(a);
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
	sup_agent_calls_fail(a, -ECONNABORTED, "agent connection: closed by the supervisor");
	a->freed = true;
	if (!a->dispatching)
		agent_release(a);
}

bool sup_agent_gone(const sup_agent *a)
{
	return a->lost;
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

