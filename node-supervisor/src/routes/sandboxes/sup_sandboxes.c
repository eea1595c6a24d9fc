#include "sup_sandboxes.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sup_log.h"
#include "sup_netpol_json.h"
#include "sup_query.h"
#include "sup_stream.h"

typedef struct sb_req {
	sup_http_req *r;
	sup_sandboxes_ctx *x;
	sup_create_req create;
	sup_netpol network;   /* PATCH .../network: the new policy */
	unsigned timeout_s;   /* POST .../timeout */
	sup_exec_spec spec;
	sup_stream_fmt fmt;
	sup_op *op;
	sup_stream *stream;
	uint64_t streamed[2]; /* stdout, stderr bytes */
	void (*elsewhere_free)(void *handle);
	void *elsewhere;      /* a create sent to another node */
} sb_req;

static void sb_release(void *state)
{
	sb_req *q = state;
	if (q->op)
		sup_op_cancel(q->op);
	sup_stream_free(q->stream);
	sup_create_req_free(&q->create);
	sup_netpol_free(&q->network);
	sup_exec_spec_free(&q->spec);
	if (q->elsewhere)
		q->elsewhere_free(q->elsewhere);
}

/* ---- parse ---- */

static int parse_create(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sb_req *q = state;
	sup_sandboxes_ctx *x = ctx;
	return sup_api_parse_create(in->body, in->body_len, &x->limits, &q->create, err);
}

/* The whole body is the policy. */
static int parse_network(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sb_req *q = state;
	return sup_netpol_parse(in->body, in->body_len, &q->network, err);
}

static int parse_timeout(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sb_req *q = state;
	sup_sandboxes_ctx *x = ctx;
	return sup_api_parse_timeout(in->body, in->body_len, &x->limits, &q->timeout_s, err);
}

static int parse_exec(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sb_req *q = state;
	q->fmt = sup_stream_wanted(sup_http_in_header(in, "Accept"));
	return sup_api_parse_exec(in->body, in->body_len, &q->spec, err);
}

/* ---- act ---- */

static int act_healthz(sup_http_req *r, void *state, sbx_err *err)
{
	sup_http_json(r, 200, json_pack("{s:s}", "status", "ok"));
	return 0;
}

static void add_view(const sup_sandbox_view *v, void *ud)
{
	json_array_append_new(ud, sup_api_render_sandbox(v));
}

/* ?scope=node (the default) or cluster: every node's (the relay's). */
static int act_list(sup_http_req *r, void *state, sbx_err *err)
{
	static const char *const keys[] = { "scope", NULL };
	sb_req *q = state;
	sup_sandboxes_ctx *x = sup_http_ctx(r);
	SUP_AUTO_QUERY sup_query qs = { 0 };
	if (sup_query_parse(sup_http_input(r)->query, keys, &qs, err) < 0)
		return err->code;
	const char *scope = sup_query_get(&qs, "scope", NULL);
	bool cluster = scope && strcmp(scope, "cluster") == 0;
	if (scope && !cluster && strcmp(scope, "node") != 0)
		return sbx_err_set(err, -EINVAL, "scope: node or cluster");
	json_t *arr = json_array();
	if (!arr)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_core_list(x->core, sup_http_input(r)->who, add_view, arr);
	if (cluster && x->list_elsewhere) {
		q->elsewhere_free = x->list_free;
		int rc = x->list_elsewhere(x->elsewhere_ud, r, arr, &q->elsewhere, err);
		return rc < 0 ? rc : 0;
	}
	sup_http_json(r, 200, json_pack("{s:o}", "sandboxes", arr));
	return 0;
}

static int act_get(sup_http_req *r, void *state, sbx_err *err)
{
	sup_sandboxes_ctx *x = sup_http_ctx(r);
	sup_sandbox_view v;
	int rc = sup_core_get(x->core, sup_http_input(r)->who, sup_http_input(r)->id, &v, err);
	if (rc == 0)
		sup_http_json(r, 200, sup_api_render_sandbox(&v));
	return rc;
}

static int act_pools(sup_http_req *r, void *state, sbx_err *err)
{
	sup_core *core = ((sup_sandboxes_ctx *)sup_http_ctx(r))->core;
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < sup_core_pool_count(core); i++) {
		sup_pool_stats s;
		sup_core_pool_stats(core, i, &s);
		json_array_append_new(arr, sup_api_render_pool(&s));
	}
	if (!arr)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_http_json(r, 200, json_pack("{s:o}", "pools", arr));
	return 0;
}

static int act_network(sup_http_req *r, void *state, sbx_err *err)
{
	sb_req *q = state;
	sup_sandbox_view v;
	int rc = sup_core_set_network(((sup_sandboxes_ctx *)sup_http_ctx(r))->core,
				      sup_http_input(r)->id, &q->network, &v, err);
	if (rc == 0)
		sup_http_json(r, 200, sup_api_render_sandbox(&v));
	return rc;
}

static int act_timeout(sup_http_req *r, void *state, sbx_err *err)
{
	sb_req *q = state;
	const sup_http_in *in = sup_http_input(r);
	sup_sandbox_view v;
	int rc = sup_core_set_timeout(((sup_sandboxes_ctx *)sup_http_ctx(r))->core, in->who, in->id,
				      q->timeout_s, &v, err);
	if (rc == 0)
		sup_http_json(r, 200, sup_api_render_sandbox(&v));
	return rc;
}

static int pause_or_resume(sup_http_req *r, bool paused, sbx_err *err)
{
	sup_sandbox_view v;
	int rc = sup_core_pause(((sup_sandboxes_ctx *)sup_http_ctx(r))->core, sup_http_input(r)->id,
				paused, &v, err);
	if (rc == 0)
		sup_http_json(r, 200, sup_api_render_sandbox(&v));
	return rc;
}

static int act_pause(sup_http_req *r, void *state, sbx_err *err)
{
	return pause_or_resume(r, true, err);
}

static int act_resume(sup_http_req *r, void *state, sbx_err *err)
{
	return pause_or_resume(r, false, err);
}

static void create_done(int rc, const sup_sandbox_view *v, const sbx_err *err, void *ud)
{
	sb_req *q = ud;
	q->op = NULL;
	if (rc < 0)
		sup_http_fail(q->r, err);
	else
		sup_http_json(q->r, 201, sup_api_render_sandbox(v));
}

static int act_create(sup_http_req *r, void *state, sbx_err *err)
{
	sb_req *q = state;
	sup_sandboxes_ctx *x = sup_http_ctx(r);
	q->r = r;
	if (x->elsewhere) {
		int rc = x->elsewhere(x->elsewhere_ud, r, &q->create, &q->elsewhere, err);
		q->elsewhere_free = x->elsewhere_free;
		if (rc != 0)
			return rc < 0 ? rc : 0;
	}
	return sup_core_create(x->core, sup_http_input(r)->who, &q->create, create_done, q, &q->op,
			       err);
}

static void delete_done(int rc, const sbx_err *err, void *ud)
{
	sb_req *q = ud;
	q->op = NULL;
	if (rc < 0)
		sup_http_fail(q->r, err);
	else
		sup_http_json(q->r, 204, NULL);
}

static int act_delete(sup_http_req *r, void *state, sbx_err *err)
{
	sb_req *q = state;
	q->r = r;
	const sup_http_in *in = sup_http_input(r);
	return sup_core_delete(((sup_sandboxes_ctx *)sup_http_ctx(r))->core, in->who, in->id,
			       delete_done, q, &q->op, err);
}

/* The result, also of a command whose agent let the supervisor's deadline
 * pass (-ETIME with the timed-out result): then its status (504) and
 * "error" beside the result. */
static void exec_done(int rc, const sup_exec_result *res, const sbx_err *err, void *ud)
{
	sb_req *q = ud;
	q->op = NULL;
	json_t *body = res ? sup_api_render_exec(res) : NULL;
	const char *code;
	int status = rc < 0 ? sup_http_status(NULL, rc, &code) : 200;
	sbx_err oom;
	if (body && rc < 0 && json_object_update_new(body, sup_http_error_json(code, err->msg)) < 0) {
		json_decref(body);
		body = NULL;
	}
	if (res && !body)
		err = &oom, sbx_err_set(&oom, -ENOMEM, "out of memory rendering the result");
	if (!body)
		sup_http_fail(q->r, err);
	else
		sup_http_json(q->r, status, body);
}

/* ---- streamed exec (SSE / NDJSON) ---- */

static void xs_on_data(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sb_req *q = ud;
	q->streamed[ch == SUP_CH_STDOUT ? 0 : 1] += n;
	sup_stream_data(q->stream, ch == SUP_CH_STDOUT ? "stdout" : "stderr", p, n, cost);
}

static void xs_on_done(int rc, const sup_exec_status *st, const sbx_err *err, void *ud)
{
	sb_req *q = ud;
	q->op = NULL;
	json_t *o = rc < 0 ? NULL : sup_api_render_exit(st, q->streamed[0], q->streamed[1]);
	if (o) {
		sup_stream_json(q->stream, "exit", o);
	} else {
		const char *code;
		sup_http_status(NULL, rc < 0 ? err->code : -ENOMEM, &code);
		sup_stream_json(q->stream, "error",
				sup_http_error_json(code, rc < 0 && err->msg[0] ? err->msg : code));
	}
	sup_stream_end(q->stream);
	q->stream = NULL;
}

static void xs_on_credit(size_t cost, void *ud)
{
	sb_req *q = ud;
	if (q->op)
		sup_op_consumed(q->op, cost);
}

static const sup_core_stream_cbs xs_cbs = { .on_data = xs_on_data, .on_done = xs_on_done };

static int act_exec(sup_http_req *r, void *state, sbx_err *err)
{
	sb_req *q = state;
	sup_core *core = ((sup_sandboxes_ctx *)sup_http_ctx(r))->core;
	const char *id = sup_http_input(r)->id;
	q->r = r;
	if (q->fmt == SUP_STREAM_NONE)
		return sup_core_exec(core, id, &q->spec, exec_done, q, &q->op, err);
	int rc = sup_core_exec_stream(core, id, &q->spec, &xs_cbs, q, &q->op, err);
	if (rc < 0)
		return rc;
	q->stream = sup_stream_start(r, q->fmt, xs_on_credit, q);
	if (!q->stream)
		return sbx_err_set(err, -ENOMEM, "out of memory starting the stream");
	sup_stream_json(q->stream, "start", json_pack("{s:s}", "encoding", "base64"));
	return 0;
}

static const sup_http_route routes[] = {
	{ "GET", "/healthz", "GET healthz", SUP_BODY_NONE, 0, NULL, act_healthz },
	{ "GET", "/v1/sandboxes", "GET sandboxes", SUP_BODY_NONE, 0, NULL, act_list },
	{ "POST", "/v1/sandboxes", "POST sandboxes", SUP_BODY_BUFFERED, 0, parse_create, act_create },
	{ "GET", "/v1/sandboxes/{id}", "GET sandbox", SUP_BODY_NONE, 0, NULL, act_get },
	{ "DELETE", "/v1/sandboxes/{id}", "DELETE sandbox", SUP_BODY_NONE, 0, NULL, act_delete },
	{ "POST", "/v1/sandboxes/{id}/exec", "POST exec", SUP_BODY_BUFFERED, 0, parse_exec, act_exec },
	{ "PATCH", "/v1/sandboxes/{id}/network", "PATCH network", SUP_BODY_BUFFERED, 0, parse_network,
	  act_network },
	{ "POST", "/v1/sandboxes/{id}/timeout", "POST timeout", SUP_BODY_BUFFERED, 0, parse_timeout,
	  act_timeout },
	{ "POST", "/v1/sandboxes/{id}/pause", "POST pause", SUP_BODY_NONE, 0, NULL, act_pause },
	{ "POST", "/v1/sandboxes/{id}/resume", "POST resume", SUP_BODY_NONE, 0, NULL, act_resume },
	{ "GET", "/v1/pools", "GET pools", SUP_BODY_NONE, 0, NULL, act_pools },
};

const sup_http_family sup_sandboxes_family = {
	.name = "sandboxes",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(sb_req),
	.release = sb_release,
};
