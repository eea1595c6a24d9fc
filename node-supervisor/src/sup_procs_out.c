#include "sup_procs_int.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_agent.h"
#include "sup_api.h"
#include "sup_log.h"
#include "sup_stream.h"
#include "sup_text.h"

/* ---- output: proc.get (pid and offset checked), then proc.output as SSE ---- */

static void out_finish(sup_pq *q)
{
	if (q->r.op) {
		sup_op_cancel(q->r.op);
		q->r.op = NULL;
	}
	sup_req_log(&q->r, 200, "");
	sup_stream_end(q->s);
	q->s = NULL;
	sup_req_free(&q->r);
}

static void out_error(sup_pq *q, const char *code, const char *msg)
{
	sup_stream_json(q->s, "error", sup_api_render_error(code, msg));
	out_finish(q);
}

/* Give the agent's credit back while the reader keeps up; else retry. */
static void out_settle(sup_pq *q)
{
	if (!q->owed || !q->r.op)
		return;
	if (sup_stream_backlog(q->s) < SUP_STREAM_HWM) {
		size_t c = q->owed;
		q->owed = 0;
		sup_op_consumed(q->r.op, c);
		return;
	}
	struct timeval tv = { 0, PQ_RETRY_MS * 1000 };
	evtimer_add(q->retry, &tv);
}

static void out_retry(evutil_socket_t fd, short what, void *ud)
{
	(void)fd;
	(void)what;
	out_settle(ud);
}

/* One event per data frame, named after its stream; the offset counts the
 * process's output as one sequence (both streams, in the order read). */
static void out_data(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_pq *q = ud;
	q->owed += cost;
	if (!ch) {
		sup_warn("sandbox %s: proc.output: data on a channel that is not stdout or stderr", q->r.id);
		sup_req_blame(&q->r, "agent: proc.output sent data on an unknown channel");
		out_error(q, "agent_error", "the agent sent output on an unknown channel");
		return;
	}
	if (n) {
		size_t bl;
		SBX_AUTO_FREE char *b = sup_base64_encode(p, n, &bl);
		json_t *o = b ? json_pack("{s:I,s:s%}", "offset", (json_int_t)q->off, "data", b, bl)
			      : NULL;
		if (!o) {
			out_error(q, "internal", "out of memory");
			return;
		}
		sup_stream_json(q->s, ch == SUP_CH_STDERR ? "stderr" : "stdout", o);
		q->off += n;
	}
	out_settle(q);
}

static void out_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_pq *q = ud;
	q->owed += cost;
	const msgpack_object *g = sbx_proto_map_get(map, "gap");
	if (g) {
		uint64_t from = 0, to = 0;
		sbx_err e;
		sbx_err_clear(&e);
		if (sup_procs_mp_uint(g, "from", UINT64_MAX / 2, &from, &e) < 0 ||
		    sup_procs_mp_uint(g, "to", UINT64_MAX / 2, &to, &e) < 0 || from != q->off || to <= from) {
			sup_warn("sandbox %s: proc.output: a gap that does not follow the data", q->r.id);
			sup_req_blame(&q->r, "agent: proc.output reported an inconsistent gap");
			out_error(q, "agent_error", "the agent reported an inconsistent gap");
			return;
		}
		sup_stream_json(q->s, "gap", json_pack("{s:I,s:I}", "from", (json_int_t)from, "to",
						       (json_int_t)to));
		q->off = to;
	}
	out_settle(q);
}

static void out_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	q->r.op = NULL;
	q->owed = 0;
	if (rc < 0) {
		const char *code;
		sup_req_status(&q->r, err->code, &code);
		out_error(q, code, err->msg[0] ? err->msg : code);
		return;
	}
	sbx_err e;
	sbx_err_clear(&e);
	uint64_t next = 0;
	json_t *o = NULL;
	if (sup_procs_mp_uint(result, "next_offset", UINT64_MAX / 2, &next, &e) == 0 && next != q->off)
		sbx_err_set(&e, -EPROTO, "proc.output: next_offset %llu but the data ended at %llu",
			    (unsigned long long)next, (unsigned long long)q->off);
	else if (e.code == 0)
		o = sup_procs_desc_json(result, false, q->pid, &e);
	if (!o) {
		sup_warn("sandbox %s: %s", q->r.id, e.msg);
		sup_req_blame(&q->r, e.msg);
		out_error(q, "agent_error", e.msg);
		return;
	}
	json_object_set_new(o, "next_offset", json_integer((json_int_t)next));
	sup_stream_json(q->s, "end", o);
	out_finish(q);
}

static const sup_core_call_cbs out_cbs = {
	.on_output = out_data, .on_event = out_event, .on_done = out_done
};
/* With follow a quiet process means a quiet stream: no idle deadline. */
static const sup_core_call_cbs out_follow_cbs = {
	.on_output = out_data, .on_event = out_event, .on_done = out_done,
	.wait = SUP_AGENT_WAIT_QUIET
};

static void out_gone(void *ud)
{
	sup_pq *q = ud;
	sup_info("http %s sandbox %s pid %ld: client went away at offset %llu", sup_procs_route_name(q->rt),
		 q->r.id, q->pid, (unsigned long long)q->off);
	out_finish(q);
}

static void out_credit(size_t cost, void *ud)
{
	(void)cost;
	(void)ud; /* only JSON events, which carry no cost of sup_stream's */
}

static const sup_stream_cbs out_stream_cbs = { .on_credit = out_credit, .on_gone = out_gone };

static void out_checked(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	if (!sup_req_settled(&q->r, rc, err, NULL))
		return;
	sbx_err e;
	sbx_err_clear(&e);
	json_t *d = sup_procs_desc_json(result, true, q->pid, &e);
	if (!d) {
		sup_req_broke(&q->r, &e, NULL);
		return;
	}
	json_int_t end = json_integer_value(json_object_get(json_object_get(d, "output"), "end"));
	json_decref(d);
	if (q->off > (uint64_t)end) {
		char msg[128];
		snprintf(msg, sizeof(msg), "offset %llu is beyond the end of the output (%lld)",
			 (unsigned long long)q->off, (long long)end);
		sup_req_error(&q->r, 400, "bad_request", msg);
		return;
	}
	sup_req_unwatch(&q->r);
	q->retry = evtimer_new(q->p->base, out_retry, q);
	const char *accept = evhttp_find_header(evhttp_request_get_input_headers(q->r.req), "Accept");
	sup_stream_fmt fmt = sup_stream_wanted(accept);
	if (!q->retry) {
		sup_req_error(&q->r, 500, "internal", "out of memory");
		return;
	}
	q->s = sup_stream_start(q->r.req, fmt == SUP_STREAM_NONE ? SUP_STREAM_SSE : fmt,
				SUP_STREAM_HWM, &out_stream_cbs, q);
	if (!q->s) {
		sup_req_error(&q->r, 500, "internal", "out of memory");
		return;
	}
	sup_req_args a;
	sup_req_args_begin(&a, 3);
	sup_req_args_uint(&a, "pid", (uint64_t)q->pid);
	sup_req_args_uint(&a, "offset", q->off);
	sup_req_args_bool(&a, "follow", q->follow);
	rc = sup_core_call(q->p->core, q->r.id, "proc.output", a.sb.data, a.sb.size,
			   q->follow ? &out_follow_cbs : &out_cbs, q, &q->r.op, &e);
	msgpack_sbuffer_destroy(&a.sb);
	if (rc < 0) {
		const char *code;
		sup_req_status(&q->r, e.code, &code);
		out_error(q, code, e.msg[0] ? e.msg : code);
	}
}

static const sup_core_call_cbs out_check_cbs = { .on_done = out_checked };

void sup_procs_output(sup_pq *q)
{
	static const char *const allowed[] = { "offset", "follow", NULL };
	struct evkeyvalq kv;
	if (sup_pq_query(q, &kv, allowed) < 0)
		return;
	const char *off = evhttp_find_header(&kv, "offset");
	const char *fol = evhttp_find_header(&kv, "follow");
	bool ok = true;
	if (off) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(off, &end, 10);
		ok = off[0] >= '0' && off[0] <= '9' && !*end && !errno && v <= UINT64_MAX / 2;
		q->off = v;
	}
	if (ok && fol) {
		if (strcmp(fol, "1") == 0 || strcmp(fol, "true") == 0)
			q->follow = true;
		else if (strcmp(fol, "0") == 0 || strcmp(fol, "false") == 0)
			q->follow = false;
		else
			ok = false;
	}
	evhttp_clear_headers(&kv);
	if (!ok) {
		sup_req_error(&q->r, 400, "bad_request",
			 "want offset=<bytes> (a non-negative integer) and follow=0|1");
		return;
	}
	sup_req_args a;
	sup_req_args_begin(&a, 1);
	sup_req_args_uint(&a, "pid", (uint64_t)q->pid);
	sup_req_call(&q->r, "proc.get", &a, &out_check_cbs, NULL);
}

