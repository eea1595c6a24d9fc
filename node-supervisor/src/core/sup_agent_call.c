/* sup_agent_call: a call on the agent's connection, from its start to its
 * end: the limits a new call meets, its deadline (a budget the clock
 * spends while the agent owes something, see sup_agent.h), the frames of
 * its stream, the caller's sends within the agent's credit, its cancel.
 * The connection itself is sup_agent.c's. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include "sbx/clock.h"
#include "sbx/proto.h"
#include "sbx/proto_conn.h"
#include "sup_agent.h"
#include "sup_agent_int.h"
#include "sup_log.h"

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
	sup_agent_now(&call->since);
	timer_add_ns(call->timer, call->budget_ns);
}

/* A frame of the call came: an idle budget starts again. */
static void clock_refill(sup_agent_call *call)
{
	if (!call->timer || call->timeout_ms)
		return;
	call->budget_ns = call->agent->o.idle_ms * SUP_AGENT_NS_PER_MS;
	if (call->running) {
		sup_agent_now(&call->since);
		timer_add_ns(call->timer, call->budget_ns);
	}
}

void sup_agent_call_refill(sup_agent_call *call)
{
	clock_refill(call);
}

void sup_agent_call_clock_update(sup_agent_call *call)
{
	clock_update(call);
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
	sup_agent_tally.timeouts++;
	sup_agent_dispatch_begin(a);
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
	sup_agent_dispatch_end(a);
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
	if ((ran > frozen ? ran - frozen : 0) <= (call->timeout_ms + a->o.grace_ms) * SUP_AGENT_NS_PER_MS)
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

void sup_agent_call_frame(sup_agent_call *call, const sbx_proto_frame *f)
{
	sup_agent *a = call->agent;
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
		sup_agent_tally.bytes_from += f->data_len;
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
		sup_agent_tally.bytes_from += f->data_len;
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

void sup_agent_call_writable(sup_agent_call *call)
{
	if (call->starved) {
		call->starved = false;
		clock_update(call);
	}
	if (call->cbs && call->cbs->on_writable)
		call->cbs->on_writable(call, call->ud);
}

void sup_agent_calls_fail(sup_agent *a, int code, const char *why)
{
	sup_agent_call *call;
	while ((call = TAILQ_FIRST(&a->calls)) != NULL) {
		sbx_err e;
		sbx_err_set(&e, code, "%s", why);
		/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the callee unlinks it first; the analyzer cannot follow sys/queue.h */
		call_finish(call, code, NULL, &e);
	}
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
	call->budget_ns = (timeout_ms ? timeout_ms + a->o.grace_ms : a->o.idle_ms) * SUP_AGENT_NS_PER_MS;
	sup_agent_now(&call->started);
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
		sup_agent_tally.bytes_to += m;
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
