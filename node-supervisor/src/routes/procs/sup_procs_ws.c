/* GET .../processes/{pid}/ws: an interactive terminal of a background
 * process started with a pty, over WebSocket. proc.get first (the pid, a
 * pty, the offset against the output's end: still plain HTTP errors), then
 * the upgrade and three agent streams: proc.output (follow) whose bytes go
 * out as binary messages, each costing the agent's credit until the client
 * has read it; proc.stdin, kept open, taking binary messages as typed input
 * within its credit (reading the client pauses while the agent is full);
 * proc.resize for a text message {"resize":{"cols":C,"rows":R}}, one at a
 * time, the latest size winning. A gap in the output is a text message
 * {"gap":{"from","to"}}; the end {"exit":<description>} and a close (1000);
 * a message we cannot take {"error":{...}}. The client closing ends the
 * streams; the process goes on. */
#include "sup_procs_int.h"

#include <errno.h>
#include <event2/buffer.h>
#include <string.h>

#include "sbx/proto.h"
#include "sup_query.h"
#include "sup_ws.h"

void sup_procs_ws_release(sup_pq *q)
{
	if (q->in_op)
		sup_op_cancel(q->in_op);
	if (q->rs_op)
		sup_op_cancel(q->rs_op);
	sup_ws_free(q->ws);
	if (q->typed)
		evbuffer_free(q->typed);
}

static void send_json(sup_pq *q, json_t *o)
{
	char *s = o ? json_dumps(o, SUP_HTTP_JSON_DUMP) : NULL;
	if (s)
		sup_ws_send(q->ws, false, s, strlen(s), 0);
	free(s);
	json_decref(o);
}

static void send_error(sup_pq *q, int code, const char *msg)
{
	const char *name;
	sup_http_status("processes", code, &name);
	send_json(q, sup_http_error_json(name, msg));
}

/* The output ended (or broke): the last word, then close. */
static void finish(sup_pq *q, json_t *last, uint16_t code)
{
	if (q->op) {
		sup_op_cancel(q->op);
		q->op = NULL;
	}
	send_json(q, last);
	sup_ws_close(q->ws, code, code == 1000 ? "the process exited" : "the stream broke");
}

/* ---- output ---- */

static void out_data(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_pq *q = ud;
	q->off += n;
	sup_ws_send(q->ws, true, p, n, cost);
}

static void out_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_pq *q = ud;
	sbx_err e;
	sbx_err_clear(&e);
	json_t *gap = sup_procs_gap_json(map, q, &e);
	if (e.code) {
		sup_core_blame(q->p->core, q->id, &e);
		finish(q, sup_http_error_json("agent_error", e.msg), 1011);
		return;
	}
	if (gap)
		send_json(q, json_pack("{s:o}", "gap", gap));
	sup_op_consumed(q->op, cost);
}

static void out_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	json_t *d = rc < 0 ? NULL : sup_api_proc_end_json(result, q->pid, q->off, &e);
	const char *name;
	if (d) {
		finish(q, json_pack("{s:o}", "exit", d), 1000);
		return;
	}
	sup_core_blame(q->p->core, q->id, &e);
	sup_http_status("processes", rc < 0 ? err->code : e.code, &name);
	finish(q, sup_http_error_json(name, rc < 0 ? err->msg : e.msg), 1011);
}

/* Output followed (a quiet terminal is a quiet stream) and input kept
 * open: neither has an idle deadline, but typed bytes that wait for the
 * agent's credit do (the ping watches the agent meanwhile). */
static const sup_core_call_cbs out_cbs = {
	.on_output = out_data, .on_event = out_event, .on_done = out_done,
	.wait = SUP_AGENT_WAIT_QUIET
};

/* ---- input and resizes ---- */

/* Typed bytes to the agent within its credit; the client waits meanwhile. */
static void type_pump(void *ud)
{
	sup_pq *q = ud;
	struct evbuffer *t = q->typed;
	while (q->in_op && evbuffer_get_length(t)) {
		sbx_err e;
		size_t n = evbuffer_get_length(t);
		int k = sup_core_call_send(q->in_op, SBX_CH_STDIN, evbuffer_pullup(t, -1), n, false, &e);
		if (k <= 0)
			break; /* 0: on_writable; < 0: in_done tells */
		evbuffer_drain(t, (size_t)k);
	}
	sup_ws_pause(q->ws, evbuffer_get_length(t) > 0);
}

static void in_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	q->in_op = NULL;
	/* The process exited (its output ends too) or input broke: say so once. */
	if (rc < 0 && err->code != -ENOENT)
		send_error(q, err->code, err->msg);
	evbuffer_drain(q->typed, evbuffer_get_length(q->typed));
	sup_ws_pause(q->ws, false);
}

static const sup_core_call_cbs in_cbs = {
	.on_done = in_done, .on_writable = type_pump, .wait = SUP_AGENT_WAIT_SENDS
};

static void resize_start(sup_pq *q);

static void rs_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	q->rs_op = NULL;
	if (rc < 0)
		send_error(q, err->code, err->msg);
	if (q->cols)
		resize_start(q);
}

static const sup_core_call_cbs rs_cbs = { .on_done = rs_done };

static void resize_start(sup_pq *q)
{
	sbx_proto_args a;
	sbx_err e;
	sbx_proto_args_init(&a);
	sbx_proto_args_uint(&a, "pid", (uint64_t)q->pid);
	sbx_proto_args_uint(&a, "cols", q->cols);
	sbx_proto_args_uint(&a, "rows", q->rows);
	q->cols = q->rows = 0;
	if (sup_core_call(q->p->core, q->id, SBX_OP_PROC_RESIZE, &a, &rs_cbs, q, &q->rs_op, &e) < 0)
		send_error(q, e.code, e.msg);
}

/* {"resize":{"cols":C,"rows":R}}: 0, or -EINVAL. */
static int parse_resize(const uint8_t *p, size_t n, uint16_t *cols, uint16_t *rows)
{
	json_t *j = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, NULL);
	json_t *r = json_object_get(j, "resize");
	json_t *c = json_object_get(r, "cols"), *w = json_object_get(r, "rows");
	bool ok = json_object_size(j) == 1 && json_object_size(r) == 2 && json_is_integer(c) &&
		  json_is_integer(w) && json_integer_value(c) >= 1 && json_integer_value(c) <= 65535 &&
		  json_integer_value(w) >= 1 && json_integer_value(w) <= 65535;
	if (ok) {
		*cols = (uint16_t)json_integer_value(c);
		*rows = (uint16_t)json_integer_value(w);
	}
	json_decref(j);
	return ok ? 0 : -EINVAL;
}

static void on_message(bool binary, const uint8_t *p, size_t n, void *ud)
{
	sup_pq *q = ud;
	uint16_t cols, rows;
	if (binary && q->in_op) {
		evbuffer_add(q->typed, p, n);
		type_pump(q);
	} else if (binary) {
		send_error(q, -ENOENT, "the process takes no more input");
	} else if (parse_resize(p, n, &cols, &rows) < 0) {
		send_error(q, -EINVAL, "text messages: {\"resize\":{\"cols\":1..65535,\"rows\":1..65535}}");
	} else {
		q->cols = cols;
		q->rows = rows;
		if (!q->rs_op)
			resize_start(q);
	}
}

/* ---- the start ---- */

/* proc.get answered: a terminal whose output has offset, then the upgrade
 * and the streams. */
static void ws_checked(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	json_t *d = rc < 0 ? NULL : sup_api_proc_json(result, true, q->pid, &e);
	json_int_t end = json_integer_value(json_object_get(json_object_get(d, "output"), "end"));
	bool pty = json_is_true(json_object_get(d, "pty"));
	bool running = d && strcmp(json_string_value(json_object_get(d, "state")), "running") == 0;
	json_decref(d);
	if (rc == 0 && d && (!pty || !running))
		sbx_err_set(&e, pty ? -ENOENT : -EINVAL, pty ? "background process %ld has exited"
						    : "background process %ld has no terminal (start it with \"pty\")",
			    q->pid);
	else if (rc == 0 && d && q->off > (uint64_t)end)
		sbx_err_set(&e, -EINVAL, "offset %llu is beyond the end of the output (%lld)",
			    (unsigned long long)q->off, (long long)end);
	else if (rc == 0 && d && (!(q->typed = evbuffer_new()) ||
				  !(q->ws = sup_ws_start(q->r, q->accept, on_message, q))))
		sbx_err_set(&e, -ENOMEM, "out of memory");
	if (rc < 0 || e.code) {
		sup_core_blame(q->p->core, q->id, &e);
		sup_http_fail(q->r, rc < 0 ? err : &e);
		return;
	}
	sup_http_on_credit(q->r, sup_pq_credit, q);
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_args_uint(&a, "pid", (uint64_t)q->pid);
	sbx_proto_args_bool(&a, "eof", false);
	if (sup_core_call(q->p->core, q->id, SBX_OP_PROC_STDIN, &a, &in_cbs, q, &q->in_op, &e) < 0) {
		finish(q, sup_http_error_json("internal", e.msg), 1011);
		return;
	}
	sbx_proto_args_destroy(&q->args);
	sbx_proto_args_uint(&q->args, "pid", (uint64_t)q->pid);
	sbx_proto_args_uint(&q->args, "offset", q->off);
	sbx_proto_args_bool(&q->args, "follow", true);
	if (sup_core_call(q->p->core, q->id, SBX_OP_PROC_OUTPUT, &q->args, &out_cbs, q, &q->op, &e) < 0)
		finish(q, sup_http_error_json("internal", e.msg), 1011);
}

static const sup_core_call_cbs ws_check_cbs = { .on_done = ws_checked };

int sup_procs_parse_ws(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "offset", NULL };
	sup_pq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	sup_pq_init(q, in, ctx, SBX_OP_PROC_GET, &ws_check_cbs);
	int rc = sup_pq_pid(q, in, err);
	if (rc == 0)
		rc = sup_query_parse(in->query, keys, &qs, err);
	if (rc == 0)
		rc = sup_query_uint(&qs, "offset", 0, UINT64_MAX / 2, 0, &q->off, err);
	return rc < 0 ? rc : sup_ws_check(in, q->accept, err);
}

int sup_procs_act_ws(sup_http_req *r, void *state, sbx_err *err)
{
	sup_pq *q = state;
	q->r = r;
	sup_http_log_tag(r, " pid %ld", q->pid);
	return sup_core_call(q->p->core, q->id, q->aop, &q->args, q->cbs, q, &q->op, err);
}
