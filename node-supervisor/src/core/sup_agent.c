#include "sup_agent.h"

#include <errno.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sbx/proto_conn.h"
#include "sup_log.h"

#define SUP_AGENT_NAME "sandbox-supervisor/0.1.0"

struct sup_agent_call {
	sup_agent *agent;
	uint64_t id;
	const sup_agent_call_cbs *cbs; /* NULL once cancelled */
	void *ud;
	TAILQ_ENTRY(sup_agent_call) link;
};

TAILQ_HEAD(sup_call_list, sup_agent_call);

/* Exec adapter: channel names to sup_chan, END map to sup_exec_status. */
struct sup_exec_call {
	sup_agent_call *call;
	const sup_exec_cbs *cbs;
	void *ud;
	uint8_t *in;      /* stdin still to send, then EOF */
	size_t in_len;
	size_t in_off;
	bool in_pending;  /* EOF not sent yet */
};

struct sup_agent {
	sbx_proto_conn *conn;
	struct event *handshake_timer;
	const sup_agent_cbs *cbs;
	void *ud;
	struct sup_call_list calls;
	unsigned dispatching; /* > 0 while inside a conn callback */
	bool freed;           /* sup_agent_free ran while dispatching */
	bool lost;            /* on_lost delivered */
};

static void agent_release(sup_agent *a)
{
	if (a->handshake_timer)
		event_free(a->handshake_timer);
	free(a);
}

static void call_finish(sup_agent_call *call, int rc, const msgpack_object *result,
			const sbx_err *err)
{
	sup_agent *a = call->agent;
	TAILQ_REMOVE(&a->calls, call, link);
	if (call->cbs)
		call->cbs->on_done(call, rc, result, err, call->ud);
	free(call);
}

static void fail_all_calls(sup_agent *a, int code, const char *why)
{
	sup_agent_call *call;
	while ((call = TAILQ_FIRST(&a->calls)) != NULL) {
		sbx_err e;
		sbx_err_set(&e, code, "agent connection: %s", why);
		/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the callee unlinks it first; the analyzer cannot follow sys/queue.h */
		call_finish(call, code, NULL, &e);
	}
}

/* The connection is over: fail the calls, tell the owner once. */
static void agent_lost(sup_agent *a, int code, const char *why)
{
	if (a->lost || a->freed)
		return;
	a->lost = true;
	if (a->conn) {
		sbx_proto_conn_free(a->conn);
		a->conn = NULL;
	}
	fail_all_calls(a, code, why);
	if (a->freed)
		return; /* a call's on_done freed us: the owner knows */
	sbx_err e;
	sbx_err_set(&e, code, "%s", why);
	a->cbs->on_lost(a, &e, a->ud);
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
	default:
		return -EPROTO;
	}
}

static bool obj_is_nil(const msgpack_object *o)
{
	return !o || o->type == MSGPACK_OBJECT_NIL;
}

static bool obj_int(const msgpack_object *o, int64_t *v)
{
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		if (o->via.u64 > INT64_MAX)
			return false;
		*v = (int64_t)o->via.u64;
		return true;
	}
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*v = o->via.i64;
		return true;
	}
	return false;
}

int sup_agent_parse_exec_result(const msgpack_object *r, sup_exec_status *st, sbx_err *err)
{
	memset(st, 0, sizeof(*st));
	if (!r || r->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EPROTO, "exec result is not a map");
	const msgpack_object *ec = sbx_proto_map_get(r, "exit_code");
	const msgpack_object *sg = sbx_proto_map_get(r, "signal");
	int64_t v;
	if (!obj_is_nil(ec) && obj_is_nil(sg)) {
		if (!obj_int(ec, &v) || v < 0 || v > 255)
			return sbx_err_set(err, -EPROTO, "exec result: exit_code not in 0..255");
		st->exited = true;
		st->exit_code = (int)v;
	} else if (obj_is_nil(ec) && !obj_is_nil(sg)) {
		if (!obj_int(sg, &v) || v < 1 || v > 64)
			return sbx_err_set(err, -EPROTO, "exec result: signal not in 1..64");
		st->signal = (int)v;
	} else {
		return sbx_err_set(err, -EPROTO, "exec result: want exactly one of exit_code and signal");
	}
	const msgpack_object *to = sbx_proto_map_get(r, "timed_out");
	if (!obj_is_nil(to)) {
		if (to->type != MSGPACK_OBJECT_BOOLEAN)
			return sbx_err_set(err, -EPROTO, "exec result: timed_out not a bool");
		st->timed_out = to->via.boolean;
	}
	const msgpack_object *du = sbx_proto_map_get(r, "duration_us");
	if (!obj_is_nil(du)) {
		if (du->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
			return sbx_err_set(err, -EPROTO, "exec result: duration_us not a uint");
		st->duration_us = du->via.u64;
	}
	const msgpack_object *ru = sbx_proto_map_get(r, "rusage");
	if (!obj_is_nil(ru)) {
		static const char *const keys[] = { "max_rss_kb", "user_ms", "sys_ms" };
		uint64_t *dst[] = { &st->max_rss_kb, &st->user_ms, &st->sys_ms };
		if (ru->type != MSGPACK_OBJECT_MAP)
			return sbx_err_set(err, -EPROTO, "exec result: rusage not a map");
		for (size_t i = 0; i < 3; i++) {
			const msgpack_object *x = sbx_proto_map_get(ru, keys[i]);
			if (!x || x->type != MSGPACK_OBJECT_POSITIVE_INTEGER || x->via.u64 > (1ull << 53))
				return sbx_err_set(err, -EPROTO, "exec result: rusage.%s not a uint", keys[i]);
			*dst[i] = x->via.u64;
		}
		st->has_rusage = true;
	}
	return 0;
}

static void on_stream_frame(sup_agent *a, const sbx_proto_frame *f)
{
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
	switch (f->kind) {
	case SBX_PROTO_DATA:
		if (!call->cbs || f->data_len == 0) {
			/* Cancelled, or a bare eof: nothing to pass on. */
			sbx_proto_conn_consumed(a->conn, f->id, f->body_len);
			return;
		}
		call->cbs->on_data(call, f->ch ? f->ch : "", f->ch ? f->ch_len : 0, f->data,
				   f->data_len, f->body_len, call->ud);
		return;
	case SBX_PROTO_EVENT:
		if (!call->cbs || !call->cbs->on_event) {
			sbx_proto_conn_consumed(a->conn, f->id, f->body_len);
			return;
		}
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
		/* CTL/CANCEL/REQ on a stream we opened make no sense from the
		 * responder; ignore rather than trust them. */
		return;
	}
}

/* Our callbacks may free the agent; release it only once we unwound. */
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

static void conn_on_ready(sbx_proto_conn *c, void *ud)
{
	sup_agent *a = ud;
	(void)c;
	if (a->handshake_timer)
		event_del(a->handshake_timer);
	dispatch_begin(a);
	a->cbs->on_ready(a, a->ud);
	dispatch_end(a);
}

static void conn_on_frame(sbx_proto_conn *c, const sbx_proto_frame *f, void *ud)
{
	sup_agent *a = ud;
	(void)c;
	dispatch_begin(a);
	on_stream_frame(a, f);
	dispatch_end(a);
}

static void call_writable(sup_agent_call *call)
{
	if (call->cbs && call->cbs->on_writable)
		call->cbs->on_writable(call, call->ud);
}

static void conn_on_writable(sbx_proto_conn *c, uint64_t id, void *ud)
{
	sup_agent *a = ud;
	dispatch_begin(a);
	if (id) {
		sup_agent_call *call = sbx_proto_conn_stream_data(c, id);
		if (call)
			call_writable(call);
	} else {
		sup_agent_call *call, *next;
		for (call = TAILQ_FIRST(&a->calls); call && !a->lost && !a->freed; call = next) {
			next = TAILQ_NEXT(call, link);
			call_writable(call);
		}
	}
	dispatch_end(a);
}

static void conn_on_close(sbx_proto_conn *c, const sbx_err *why, void *ud)
{
	sup_agent *a = ud;
	(void)c;
	dispatch_begin(a);
	agent_lost(a, why && why->code ? why->code : -ECONNRESET,
		   why && why->msg[0] ? why->msg : "closed by the agent");
	dispatch_end(a);
}

static void on_handshake_timeout(evutil_socket_t fd, short what, void *ud)
{
	sup_agent *a = ud;
	(void)fd;
	(void)what;
	dispatch_begin(a);
	agent_lost(a, -ETIMEDOUT, "no hello from the agent in time");
	dispatch_end(a);
}

static const sbx_proto_conn_cbs conn_cbs = {
	.on_ready = conn_on_ready,
	.on_frame = conn_on_frame,
	.on_writable = conn_on_writable,
	.on_close = conn_on_close,
};

int sup_agent_connect(struct event_base *base, const char *socket_path,
		      unsigned handshake_timeout_ms, const sup_agent_cbs *cbs, void *ud,
		      sup_agent **out, sbx_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(socket_path) >= sizeof(sa.sun_path))
		return sbx_err_set(err, -ENAMETOOLONG, "agent socket path %s", socket_path);
	strcpy(sa.sun_path, socket_path);
	SBX_AUTO_CLOSE int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "socket");
	/* A unix stream connect completes at once or fails (EAGAIN: backlog full). */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return sbx_err_sys(err, -errno, "connect %s", socket_path);

	sup_agent *a = calloc(1, sizeof(*a));
	if (!a)
		return sbx_err_set(err, -ENOMEM, "agent");
	TAILQ_INIT(&a->calls);
	a->cbs = cbs;
	a->ud = ud;
	a->handshake_timer = evtimer_new(base, on_handshake_timeout, a);
	if (!a->handshake_timer) {
		free(a);
		return sbx_err_set(err, -ENOMEM, "agent handshake timer");
	}
	struct timeval tv = { handshake_timeout_ms / 1000, (handshake_timeout_ms % 1000) * 1000 };
	evtimer_add(a->handshake_timer, &tv);
	sbx_proto_conn_opts opts = {
		.is_client = true,
		.agent = SUP_AGENT_NAME,
	};
	a->conn = sbx_proto_conn_new(base, sbx_steal_fd(&fd), &opts, &conn_cbs, a, err);
	if (!a->conn) {
		agent_release(a);
		return sbx_err_wrap(err, "agent connection %s", socket_path);
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
	if (a->conn) {
		sbx_proto_conn_free(a->conn);
		a->conn = NULL;
	}
	a->lost = true; /* no on_lost after an explicit free */
	fail_all_calls(a, -ECONNABORTED, "closed by the supervisor");
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

int sup_agent_encode_exec_args(const sup_exec_spec *spec, const sup_env *base_env,
			       sbx_proto_args *a, sbx_err *err)
{
	if (!spec->x.argv == !spec->x.cmd)
		return sbx_err_set(err, -EINVAL, "exec: exactly one of argv and cmd");
	sbx_proto_exec_encode(&spec->x, base_env, a);
	return 0;
}

int sup_agent_call_start(sup_agent *a, const char *op, const void *args, size_t args_len,
			 const sup_agent_call_cbs *cbs, void *ud, sup_agent_call **out,
			 sbx_err *err)
{
	if (!a->conn || a->lost || !sbx_proto_conn_ready(a->conn))
		return sbx_err_set(err, -ECONNRESET, "agent connection is not up");
	/* The request must fit in one frame the agent accepts. */
	if (args_len + SBX_PROTO_DATA_OVERHEAD > sbx_proto_conn_peer_max_frame(a->conn))
		return sbx_err_set(err, -E2BIG,
				   "%s request of %zu bytes is larger than the agent accepts (%u)", op,
				   args_len, sbx_proto_conn_peer_max_frame(a->conn));
	sup_agent_call *call = calloc(1, sizeof(*call));
	if (!call)
		return sbx_err_set(err, -ENOMEM, "agent call");
	int rc = sbx_proto_conn_request(a->conn, op, args, args_len, &call->id, err);
	if (rc < 0) {
		free(call);
		if (rc == -EBUSY)
			return sbx_err_set(err, -EAGAIN, "too many requests in flight on this sandbox");
		return rc;
	}
	call->agent = a;
	call->cbs = cbs;
	call->ud = ud;
	sbx_proto_conn_set_stream_data(a->conn, call->id, call);
	TAILQ_INSERT_TAIL(&a->calls, call, link);
	*out = call;
	return 0;
}

void sup_agent_call_consumed(sup_agent_call *call, size_t cost)
{
	sup_agent *a = call->agent;
	if (a->conn && !a->lost)
		sbx_proto_conn_consumed(a->conn, call->id, cost);
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

/* A send of m bytes that found no room after all sent none. */
static int call_sent(int rc, size_t m)
{
	if (rc == -EAGAIN)
		return 0;
	return rc < 0 ? rc : (int)m;
}

int sup_agent_call_send(sup_agent_call *call, const char *ch, const uint8_t *p, size_t n,
			bool eof, sbx_err *err)
{
	size_t m = 0;
	int rc = call_fit(call, n, &m, err);
	if (rc < 0 || (n && m == 0))
		return rc;
	rc = sbx_proto_conn_send_data(call->agent->conn, call->id, ch, p, m, eof && m == n, err);
	return call_sent(rc, m);
}

int sup_agent_call_send_from(sup_agent_call *call, const char *ch, struct evbuffer *src, size_t n,
			     sbx_err *err)
{
	size_t m = 0;
	int rc = call_fit(call, n, &m, err);
	if (rc < 0 || m == 0)
		return rc;
	rc = sbx_proto_conn_send_data_from(call->agent->conn, call->id, ch, src, m, err);
	return call_sent(rc, m);
}

void sup_agent_call_cancel(sup_agent_call *call)
{
	sup_agent *a = call->agent;
	call->cbs = NULL;
	call->ud = NULL;
	if (a->conn && !a->lost) {
		sbx_err e;
		/* The stream stays open until the agent's END/ERR; the call is
		 * freed then, silently. */
		if (sbx_proto_conn_cancel(a->conn, call->id, &e) == 0)
			return;
		sup_warn("cancel stream %llu: %s", (unsigned long long)call->id, e.msg);
		sbx_proto_conn_set_stream_data(a->conn, call->id, NULL);
	}
	TAILQ_REMOVE(&a->calls, call, link);
	free(call);
}

/* ---- exec adapter ---- */

sup_chan sup_agent_chan(const char *ch, size_t ch_len)
{
	if (ch_len == strlen(SBX_CH_STDOUT) && memcmp(ch, SBX_CH_STDOUT, ch_len) == 0)
		return SUP_CH_STDOUT;
	if (ch_len == strlen(SBX_CH_STDERR) && memcmp(ch, SBX_CH_STDERR, ch_len) == 0)
		return SUP_CH_STDERR;
	return 0;
}

static void exec_data(sup_agent_call *call, const char *ch, size_t ch_len, const uint8_t *p,
		      size_t n, size_t cost, void *ud)
{
	sup_exec_call *x = ud;
	sup_chan c = sup_agent_chan(ch, ch_len);
	if (!c) {
		/* A channel exec does not define: ignored, for forward compatibility. */
		sup_agent_call_consumed(call, cost);
		return;
	}
	x->cbs->on_data(x, c, p, n, cost, x->ud);
}

static void exec_done(sup_agent_call *call, int rc, const msgpack_object *result,
		      const sbx_err *err, void *ud)
{
	sup_exec_call *x = ud;
	sup_exec_status st;
	sbx_err e;
	(void)call;
	if (rc == -ENOENT || rc == -EACCES || rc == -EEXIST || rc == -ENOSPC) {
		/* For exec these are a command that could not start: 400 as before. */
		e = *err;
		e.code = -EINVAL;
		err = &e;
		rc = -EINVAL;
	}
	if (rc == 0) {
		sbx_err_clear(&e);
		rc = sup_agent_parse_exec_result(result, &st, &e);
		if (rc < 0) {
			sup_warn("agent %s: %s", sup_agent_peer(x->call->agent), e.msg);
			err = &e;
		}
	}
	x->cbs->on_done(x, rc, rc == 0 ? &st : NULL, rc == 0 ? NULL : err, x->ud);
	free(x->in);
	free(x);
}

/* Send what the credit allows of stdin, then EOF. */
static void exec_pump_stdin(sup_exec_call *x)
{
	if (!x->call)
		return;
	sup_agent *a = x->call->agent;
	sbx_err e;
	while (x->in_pending && a->conn && !a->lost) {
		size_t left = x->in_len - x->in_off;
		size_t room = sbx_proto_conn_data_room(a->conn, x->call->id);
		if (left && room == 0)
			return; /* on_writable brings us back */
		size_t n = left < room ? left : room;
		int rc = sbx_proto_conn_send_data(a->conn, x->call->id, SBX_CH_STDIN,
						  x->in + x->in_off, n, n == left, &e);
		if (rc == -EAGAIN)
			return;
		if (rc < 0) {
			/* The stream is gone (the agent refused or ended it): its
			 * END/ERR tells the caller. */
			x->in_pending = false;
			break;
		}
		x->in_off += n;
		if (n == left)
			x->in_pending = false;
	}
	free(x->in);
	x->in = NULL;
}

static void exec_writable(sup_agent_call *call, void *ud)
{
	(void)call;
	sup_exec_call *x = ud;
	if (x->in_pending)
		exec_pump_stdin(x);
}

static const sup_agent_call_cbs exec_call_cbs = {
	.on_data = exec_data,
	.on_writable = exec_writable,
	.on_done = exec_done,
};

int sup_agent_exec(sup_agent *a, const sup_exec_spec *spec, const sup_env *base_env,
		   const sup_exec_cbs *cbs, void *ud, sup_exec_call **out, sbx_err *err)
{
	sbx_proto_args args;
	sbx_proto_args_init(&args);
	int rc = sup_agent_encode_exec_args(spec, base_env, &args, err);
	sup_exec_call *x = NULL;
	size_t len = 0;
	const char *enc = rc < 0 ? NULL : sbx_proto_args_done(&args, &len);
	if (rc < 0)
		goto out;
	if (!enc) {
		rc = sbx_err_set(err, -ENOMEM, "exec args");
		goto out;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		rc = sbx_err_set(err, -ENOMEM, "exec call");
		goto out;
	}
	x->cbs = cbs;
	x->ud = ud;
	rc = sup_agent_call_start(a, SBX_OP_EXEC, enc, len, &exec_call_cbs, x, &x->call, err);
	if (rc < 0)
		goto out;
	if (spec->x.stdin_pipe) {
		x->in = spec->stdin_data;
		x->in_len = spec->stdin_len;
		x->in_pending = true;
		exec_pump_stdin(x);
	}
	*out = sbx_steal_ptr(&x);
out:
	free(x);
	sbx_proto_args_destroy(&args);
	return rc;
}

void sup_agent_exec_consumed(sup_exec_call *x, size_t cost)
{
	sup_agent_call_consumed(x->call, cost);
}

void sup_agent_exec_cancel(sup_exec_call *x)
{
	sup_agent_call_cancel(x->call);
	free(x->in);
	free(x);
}
