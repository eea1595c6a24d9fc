/* GET .../output: proc.get first (the pid, and the offset against the end
 * of the output), then proc.output as an SSE (or NDJSON) stream. Each
 * event's cost goes back to the agent once the client has read it. */
#include "sup_procs_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_b64.h"
#include "sup_query.h"

static void out_end(sup_pq *q, const char *event, json_t *o)
{
	if (q->op) {
		sup_op_cancel(q->op);
		q->op = NULL;
	}
	sup_stream_json(q->s, event, o);
	sup_stream_end(q->s);
	q->s = NULL;
}

static void out_error(sup_pq *q, int code, const char *msg)
{
	const char *name;
	sup_http_status("processes", code, &name);
	out_end(q, "error", sup_http_error_json(name, msg[0] ? msg : name));
}

/* One event per data frame, named after its stream; the offset counts the
 * process's output as one sequence (both streams, in the order read). */
static void out_data(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_pq *q = ud;
	if (!ch) {
		sbx_err e;
		sbx_err_set(&e, -EPROTO, "agent: proc.output sent data on an unknown channel");
		sup_core_blame(q->p->core, q->id, &e);
		out_error(q, e.code, e.msg);
		return;
	}
	size_t bl;
	SBX_AUTO_FREE char *b = sup_base64_encode(p, n, &bl);
	json_t *o = b ? json_pack("{s:I,s:s%}", "offset", (json_int_t)q->off, "data", b, bl) : NULL;
	if (!o) {
		out_error(q, -ENOMEM, "out of memory");
		return;
	}
	q->off += n;
	sup_stream_json_cost(q->s, ch == SUP_CH_STDERR ? "stderr" : "stdout", o, cost);
}

static void out_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_pq *q = ud;
	sbx_err e;
	sbx_err_clear(&e);
	json_t *gap = sup_procs_gap_json(map, q, &e);
	if (e.code) {
		sup_core_blame(q->p->core, q->id, &e);
		out_error(q, e.code, e.msg);
	} else if (gap) {
		sup_stream_json_cost(q->s, "gap", gap, cost);
	} else {
		sup_op_consumed(q->op, cost);
	}
}

static void out_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	json_t *o = rc < 0 ? NULL : sup_api_proc_end_json(result, q->pid, q->off, &e);
	if (o) {
		out_end(q, "end", o);
		return;
	}
	sup_core_blame(q->p->core, q->id, &e);
	out_error(q, rc < 0 ? err->code : e.code, rc < 0 ? err->msg : e.msg);
}

static const sup_core_call_cbs out_cbs = {
	.on_output = out_data, .on_event = out_event, .on_done = out_done
};
/* With follow a quiet process means a quiet stream: no idle deadline. */
static const sup_core_call_cbs out_follow_cbs = {
	.on_output = out_data, .on_event = out_event, .on_done = out_done,
	.wait = SUP_AGENT_WAIT_QUIET
};

/* proc.get answered: the offset checked, the stream starts. */
static void out_checked(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	json_t *d = rc < 0 ? NULL : sup_api_proc_json(result, true, q->pid, &e);
	json_int_t end = d ? json_integer_value(json_object_get(json_object_get(d, "output"), "end")) : 0;
	json_decref(d);
	if (rc == 0 && d && q->off > (uint64_t)end)
		sbx_err_set(&e, -EINVAL, "offset %llu is beyond the end of the output (%lld)",
			    (unsigned long long)q->off, (long long)end);
	else if (rc == 0 && d && !(q->s = sup_stream_start(q->r, q->fmt, sup_pq_credit, q)))
		sbx_err_set(&e, -ENOMEM, "out of memory");
	if (rc < 0 || e.code) {
		sup_core_blame(q->p->core, q->id, &e);
		sup_http_fail(q->r, rc < 0 ? err : &e);
		return;
	}
	sbx_proto_args_destroy(&q->args);
	sbx_proto_args_uint(&q->args, "pid", (uint64_t)q->pid);
	sbx_proto_args_uint(&q->args, "offset", q->off);
	sbx_proto_args_bool(&q->args, "follow", q->follow);
	if (sup_core_call(q->p->core, q->id, SBX_OP_PROC_OUTPUT, &q->args,
			  q->follow ? &out_follow_cbs : &out_cbs, q, &q->op, &e) < 0)
		out_error(q, e.code, e.msg);
}

static const sup_core_call_cbs out_check_cbs = { .on_done = out_checked };

int sup_procs_parse_output(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "offset", "follow", NULL };
	sup_pq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	sup_stream_fmt fmt = sup_stream_wanted(sup_http_in_header(in, "Accept"));
	sup_pq_init(q, in, ctx, SBX_OP_PROC_GET, &out_check_cbs);
	q->fmt = fmt == SUP_STREAM_NONE ? SUP_STREAM_SSE : fmt;
	int rc = sup_pq_pid(q, in, err);
	if (rc == 0)
		rc = sup_query_parse(in->query, keys, &qs, err);
	if (rc == 0)
		rc = sup_query_uint(&qs, "offset", 0, UINT64_MAX / 2, 0, &q->off, err);
	int follow = rc < 0 ? rc : sup_query_flag(&qs, "follow", false, err);
	if (follow < 0)
		return follow;
	q->follow = follow;
	return 0;
}

int sup_procs_act_output(sup_http_req *r, void *state, sbx_err *err)
{
	sup_pq *q = state;
	q->r = r;
	sup_http_log_tag(r, " pid %ld", q->pid);
	return sup_core_call(q->p->core, q->id, q->aop, &q->args, q->cbs, q, &q->op, err);
}
