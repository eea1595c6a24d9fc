#include "sup_procs.h"
#include "sup_procs_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sbx/proto.h"
#include "sup_agent.h"
#include "sup_api.h"
#include "sup_query.h"
#include "sup_text.h"

/* Largest JSON body of a request here but the start (whose exec body may be
 * as big as the HTTP layer allows). */
#define PQ_MAX_SMALL_BODY (4 * 1024)

static void pq_release(void *state)
{
	sup_pq *q = state;
	if (q->op)
		sup_op_cancel(q->op);
	sup_stream_free(q->s);
	sup_procs_ws_release(q);
	sbx_proto_args_destroy(&q->args);
	sup_exec_spec_free(&q->spec);
}

void sup_pq_credit(size_t cost, void *ud)
{
	sup_pq *q = ud;
	if (q->op)
		sup_op_consumed(q->op, cost);
}

/* ---- answers ---- */

/* start, get, kill: the answer is a description. */
static void desc_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	json_t *o = rc < 0 ? NULL : sup_api_proc_json(result, q->full, q->pid, &e);
	if (!o) {
		sup_core_blame(q->p->core, q->id, &e);
		sup_http_fail(q->r, rc < 0 ? err : &e);
		return;
	}
	if (q->kill) {
		json_t *st = json_object_get(o, "state");
		bool exited = st && strcmp(json_string_value(st), "exited") == 0;
		json_decref(o);
		sup_http_json(q->r, exited ? 204 : 202, NULL);
		return;
	}
	if (!q->pid)
		sup_http_log_tag(q->r, " pid %lld", (long long)json_integer_value(json_object_get(o, "pid")));
	sup_http_json(q->r, q->pid ? 200 : 201, o);
}

static const sup_core_call_cbs desc_cbs = { .on_done = desc_done };

static void list_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	const msgpack_object *arr = sbx_proto_map_get(result, "processes");
	json_t *a = json_array();
	json_t *body = a ? json_pack("{s:o}", "processes", a) : NULL;
	if (!arr || arr->type != MSGPACK_OBJECT_ARRAY || arr->via.array.size > 4096)
		sbx_err_set(&e, -EPROTO, "proc.list: \"processes\" missing or too long");
	else if (!body)
		sbx_err_set(&e, -ENOMEM, "out of memory");
	for (uint32_t i = 0; arr && !e.code && i < arr->via.array.size; i++) {
		json_t *o = sup_api_proc_json(&arr->via.array.ptr[i], false, 0, &e);
		if (o)
			json_array_append_new(a, o);
	}
	if (e.code) {
		json_decref(body);
		sup_core_blame(q->p->core, q->id, &e);
		sup_http_fail(q->r, &e);
		return;
	}
	sup_http_json(q->r, 200, body);
}

static const sup_core_call_cbs list_cbs = { .on_done = list_done };

/* signal, resize: {} on success. */
static void empty_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	q->op = NULL;
	if (rc < 0)
		sup_http_fail(q->r, err);
	else
		sup_http_json(q->r, 200, json_object());
}

static const sup_core_call_cbs empty_cbs = { .on_done = empty_done };

/* ---- parsers ---- */

int sup_procs_parse_signal(const char *s)
{
	if (!s || !*s)
		return -EINVAL;
	if (s[0] >= '0' && s[0] <= '9') {
		char *end;
		errno = 0;
		long v = strtol(s, &end, 10);
		if (errno || *end || v < 1 || v > 64 || (v > 31 && v < 34))
			return -EINVAL;
		return (int)v;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (int sig = 1; sig <= 64; sig++) {
		char name[32];
		if (sig > 31 && sig < 34)
			continue;
		if (sup_signal_name(sig, name, sizeof(name)) && strcasecmp(name, s) == 0)
			return sig;
	}
	return -EINVAL;
}

void sup_pq_init(sup_pq *q, const sup_http_in *in, void *ctx, const char *aop,
		 const sup_core_call_cbs *cbs)
{
	q->p = ctx;
	q->id = in->id;
	q->aop = aop;
	q->cbs = cbs;
	sbx_proto_args_init(&q->args);
}

int sup_pq_pid(sup_pq *q, const sup_http_in *in, sbx_err *err)
{
	const char *p = in->pid ? in->pid : "";
	size_t n = strlen(p);
	if (n == 0 || n > 10 || strspn(p, "0123456789") != n)
		return sbx_err_set(err, -EINVAL, "pid \"%.32s\": want a positive integer", p);
	long v = strtol(p, NULL, 10);
	if (v < 1 || v > INT_MAX)
		return sbx_err_set(err, -ENOENT, "no background process %s", p);
	q->pid = v;
	sbx_proto_args_uint(&q->args, "pid", (uint64_t)v);
	return 0;
}

static int parse_start(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_pq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	sup_pq_init(q, in, ctx, SBX_OP_PROC_START, &desc_cbs);
	if (sup_http_in_json(in, NULL, &j, err) < 0)
		return err->code;
	return sup_api_parse_process_start(j, &q->spec, &q->args, err);
}

static int parse_list(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "tag", NULL };
	sup_pq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	size_t len;
	sup_pq_init(q, in, ctx, SBX_OP_PROC_LIST, &list_cbs);
	int rc = sup_query_parse(in->query, keys, &qs, err);
	const char *tag = rc < 0 ? NULL : sup_query_get(&qs, "tag", &len);
	if (tag && len > SUP_API_MAX_TAG)
		return sbx_err_set(err, -EINVAL, "tag: at most 256 bytes");
	if (tag)
		sbx_proto_args_str(&q->args, "tag", tag, len);
	return rc;
}

static int parse_get(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_pq *q = state;
	sup_pq_init(q, in, ctx, SBX_OP_PROC_GET, &desc_cbs);
	q->full = true;
	return sup_pq_pid(q, in, err);
}

static int parse_kill(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_pq *q = state;
	sup_pq_init(q, in, ctx, SBX_OP_PROC_KILL, &desc_cbs);
	q->kill = true;
	return sup_pq_pid(q, in, err);
}

static int parse_signal(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "signal", NULL };
	sup_pq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	sup_pq_init(q, in, ctx, SBX_OP_PROC_SIGNAL, &empty_cbs);
	int rc = sup_pq_pid(q, in, err);
	if (rc == 0)
		rc = sup_http_in_json(in, keys, &j, err);
	if (rc < 0)
		return rc;
	json_t *v = json_object_get(j, "signal");
	int sig = -EINVAL;
	char num[24];
	if (json_is_string(v))
		sig = sup_procs_parse_signal(json_string_value(v));
	else if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) <= 64) {
		snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
		sig = sup_procs_parse_signal(num);
	}
	if (sig < 0)
		return sbx_err_set(err, -EINVAL,
				   "field \"signal\": want a signal name (\"TERM\", \"SIGINT\", \"RTMIN+1\") or number (1..31, 34..64)");
	sbx_proto_args_uint(&q->args, "signal", (uint64_t)sig);
	return 0;
}

static int parse_resize(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "cols", "rows", NULL };
	sup_pq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	sup_pq_init(q, in, ctx, SBX_OP_PROC_RESIZE, &empty_cbs);
	int rc = sup_pq_pid(q, in, err);
	if (rc == 0)
		rc = sup_http_in_json(in, keys, &j, err);
	if (rc < 0)
		return rc;
	json_t *c = json_object_get(j, "cols"), *r = json_object_get(j, "rows");
	if (!json_is_integer(c) || !json_is_integer(r) || json_integer_value(c) < 1 ||
	    json_integer_value(c) > 65535 || json_integer_value(r) < 1 ||
	    json_integer_value(r) > 65535)
		return sbx_err_set(err, -EINVAL, "want {\"cols\": 1..65535, \"rows\": 1..65535}");
	sbx_proto_args_uint(&q->args, "cols", (uint64_t)json_integer_value(c));
	sbx_proto_args_uint(&q->args, "rows", (uint64_t)json_integer_value(r));
	return 0;
}

/* ---- stdin: the body goes to the process within the agent's credit ---- */

static void in_pump(void *ud)
{
	sup_pq *q = ud;
	while (!q->in_done && q->op) {
		sbx_err e;
		sbx_err_clear(&e);
		size_t left = q->in_len - q->in_off;
		int n = sup_core_call_send(q->op, SBX_CH_STDIN, q->in + q->in_off, left, true, &e);
		if (n < 0 || (size_t)n == left) {
			/* Done, or the stream is gone: its END or ERR tells. */
			q->in_done = true;
			return;
		}
		if (n == 0)
			return; /* on_writable brings us back */
		q->in_off += (size_t)n;
	}
}

static void in_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	uint64_t w = 0;
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	if (rc == 0 && (rc = sup_api_mp_uint(result, "written", q->in_len, &w, &e)) < 0)
		sup_core_blame(q->p->core, q->id, &e);
	else if (rc < 0)
		e = *err;
	if (rc < 0)
		sup_http_fail(q->r, &e);
	else
		sup_http_json(q->r, 200, json_pack("{s:I}", "written", (json_int_t)w));
}

/* The agent gives credit back as the process reads: a process that reads
 * none of it for the idle deadline ends the request (504). */
static const sup_core_call_cbs in_cbs = {
	.on_done = in_done, .on_writable = in_pump, .wait = SUP_AGENT_WAIT_SENDS
};

static int parse_stdin(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "eof", NULL };
	sup_pq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	sup_pq_init(q, in, ctx, SBX_OP_PROC_STDIN, &in_cbs);
	int rc = sup_pq_pid(q, in, err);
	if (rc == 0)
		rc = sup_query_parse(in->query, keys, &qs, err);
	int eof = rc < 0 ? rc : sup_query_flag(&qs, "eof", false, err);
	if (eof < 0)
		return eof;
	sbx_proto_args_bool(&q->args, "eof", eof);
	/* The body stays with the request until the answer. */
	q->in = (const uint8_t *)in->body;
	q->in_len = in->body_len;
	return 0;
}

/* ---- acts ---- */

static int act_call(sup_http_req *r, void *state, sbx_err *err)
{
	sup_pq *q = state;
	q->r = r;
	if (q->pid)
		sup_http_log_tag(r, " pid %ld", q->pid);
	int rc = sup_core_call(q->p->core, q->id, q->aop, &q->args, q->cbs, q, &q->op, err);
	if (rc == 0 && q->cbs == &in_cbs)
		in_pump(q);
	return rc;
}

/* The command policy of exec (root only with --allow-root, the sandbox's
 * env under the request's), then proc.start. */
static int act_start(sup_http_req *r, void *state, sbx_err *err)
{
	sup_pq *q = state;
	const sup_env *env = NULL;
	int rc = sup_core_command_prepare(q->p->core, q->id, &q->spec, &env, err);
	if (rc == 0)
		rc = sup_agent_encode_exec_args(&q->spec, env, &q->args, err);
	return rc < 0 ? rc : act_call(r, state, err);
}

#define PROCS "/v1/sandboxes/{id}/processes"

static const sup_http_route routes[] = {
	{ "POST", PROCS, "POST processes", SUP_BODY_BUFFERED, 0, parse_start, act_start },
	{ "GET", PROCS, "GET processes", SUP_BODY_NONE, 0, parse_list, act_call },
	{ "GET", PROCS "/{pid}", "GET process", SUP_BODY_NONE, 0, parse_get, act_call },
	{ "DELETE", PROCS "/{pid}", "DELETE process", SUP_BODY_NONE, 0, parse_kill, act_call },
	{ "GET", PROCS "/{pid}/output", "GET process output", SUP_BODY_NONE, 0,
	  sup_procs_parse_output, sup_procs_act_output },
	{ "POST", PROCS "/{pid}/signal", "POST process signal", SUP_BODY_BUFFERED, PQ_MAX_SMALL_BODY,
	  parse_signal, act_call },
	{ "POST", PROCS "/{pid}/resize", "POST process resize", SUP_BODY_BUFFERED, PQ_MAX_SMALL_BODY,
	  parse_resize, act_call },
	{ "POST", PROCS "/{pid}/stdin", "POST process stdin", SUP_BODY_BUFFERED, 0, parse_stdin, act_call },
	{ "GET", PROCS "/{pid}/ws", "GET process ws", SUP_BODY_UPGRADE, 0, sup_procs_parse_ws,
	  sup_procs_act_ws },
};

const sup_http_family sup_procs_family = {
	.name = "processes",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(sup_pq),
	.release = pq_release,
};
