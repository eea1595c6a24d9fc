#include "sup_contexts_int.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sup_stream.h"


static void cx_release(void *state)
{
	cx_req *q = state;

	sup_ctx_wait_cancel(q->wait);
	sup_ctx_run_cancel(q->run);
	sup_stream_free(q->stream);
	sup_ctx_spec_free(&q->spec);
	sup_ctx_cell_free(&q->cell);
}

static sup_ctx_engine *engine(sup_http_req *r)
{
	return ((sup_contexts_ctx *)sup_http_ctx(r))->engine;
}

/* ---- parse ---- */

static int parse_create(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	cx_req *q = state;

	return sup_ctx_parse_spec(in->body, in->body_len, &q->spec, err);
}

static int parse_named(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	cx_req *q = state;

	if (!sup_ctx_id_ok(in->pid))
		return sbx_err_set(err, -ENOENT, "context %.64s: not found (not a context's id)", in->pid);
	snprintf(q->ctx, sizeof(q->ctx), "%s", in->pid);
	return 0;
}

static int parse_run(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	cx_req *q = state;
	int rc = parse_named(in, ctx, state, err);

	if (rc < 0)
		return rc;
	q->fmt = sup_stream_wanted(sup_http_in_header(in, "Accept"));
	return sup_ctx_parse_cell(in->body, in->body_len, &q->cell, err);
}

/* ---- act ---- */

static void ready(int rc, json_t *ctx, const sbx_err *err, void *ud)
{
	cx_req *q = ud;

	q->wait = NULL;
	if (rc < 0)
		sup_http_fail(q->r, err);
	else
		sup_http_json(q->r, 200, json_incref(ctx));
}

static int act_create(sup_http_req *r, void *state, sbx_err *err)
{
	cx_req *q = state;

	q->r = r;
	sup_http_log_tag(r, " %s", sup_ctx_lang_name(q->spec.lang));
	return sup_ctx_create(engine(r), sup_http_input(r)->id, &q->spec, ready, q, &q->wait, err);
}

static int act_restart(sup_http_req *r, void *state, sbx_err *err)
{
	cx_req *q = state;

	q->r = r;
	sup_http_log_tag(r, " %s", q->ctx);
	return sup_ctx_restart(engine(r), sup_http_input(r)->id, q->ctx, ready, q, &q->wait, err);
}

static int act_list(sup_http_req *r, void *state, sbx_err *err)
{
	sup_http_json(r, 200, sup_ctx_list(engine(r), sup_http_input(r)->id));
	return 0;
}

static int act_get(sup_http_req *r, void *state, sbx_err *err)
{
	cx_req *q = state;
	json_t *o = sup_ctx_get(engine(r), sup_http_input(r)->id, q->ctx, err);

	if (!o)
		return err->code;
	sup_http_json(r, 200, o);
	return 0;
}

static int act_delete(sup_http_req *r, void *state, sbx_err *err)
{
	cx_req *q = state;
	int rc = sup_ctx_delete(engine(r), sup_http_input(r)->id, q->ctx, err);

	if (rc == 0)
		sup_http_json(r, 204, NULL);
	return rc;
}

static int act_interrupt(sup_http_req *r, void *state, sbx_err *err)
{
	cx_req *q = state;
	bool running = false;
	int rc = sup_ctx_interrupt(engine(r), sup_http_input(r)->id, q->ctx, &running, err);

	if (rc == 0)
		sup_http_json(r, 200, json_pack("{s:b}", "interrupted", running));
	return rc;
}

/* ---- run: JSON, or events as they come ---- */

static void run_event(const char *event, json_t *obj, size_t cost, void *ud)
{
	cx_req *q = ud;

	sup_stream_json_cost(q->stream, event, obj, cost);
}

static void run_done(int rc, json_t *answer, const sbx_err *err, void *ud)
{
	cx_req *q = ud;

	q->run = NULL;
	if (!q->stream) {
		if (rc < 0)
			sup_http_fail(q->r, err);
		else
			sup_http_json(q->r, 200, json_incref(answer));
		return;
	}
	if (rc < 0) {
		const char *code;
		sup_http_status("contexts", err->code, &code);
		sup_stream_json(q->stream, "end", sup_http_error_json(code, err->msg));
	} else {
		sup_stream_json(q->stream, "end", json_incref(answer));
	}
	sup_stream_end(q->stream);
	q->stream = NULL;
}

static void run_credit(size_t cost, void *ud)
{
	cx_req *q = ud;

	if (q->run)
		sup_ctx_run_consumed(q->run, cost);
}

static const sup_ctx_run_cbs run_json = { .on_done = run_done };
static const sup_ctx_run_cbs run_streamed = { .on_event = run_event, .on_done = run_done };

static int act_run(sup_http_req *r, void *state, sbx_err *err)
{
	cx_req *q = state;
	const char *id = sup_http_input(r)->id;

	q->r = r;
	sup_http_log_tag(r, " %s", q->ctx);
	if (q->fmt == SUP_STREAM_NONE)
		return sup_ctx_run_start(engine(r), id, q->ctx, &q->cell, &run_json, q, &q->run, err);
	/* The head goes first: a run may end (and answer) at once. */
	q->stream = sup_stream_start(r, q->fmt, run_credit, q);
	if (!q->stream)
		return sbx_err_set(err, -ENOMEM, "out of memory starting the stream");
	sup_stream_json(q->stream, "start", json_pack("{s:s}", "context", q->ctx));
	int rc = sup_ctx_run_start(engine(r), id, q->ctx, &q->cell, &run_streamed, q, &q->run, err);
	if (rc < 0) {
		sbx_err e = *err;
		run_done(rc, NULL, &e, q);
	}
	return 0;
}

static const sup_http_route routes[] = {
	{ "POST", "/v1/sandboxes/{id}/contexts", "POST contexts", SUP_BODY_BUFFERED, 128u << 10, parse_create,
	  act_create },
	{ "GET", "/v1/sandboxes/{id}/contexts", "GET contexts", SUP_BODY_NONE, 0, NULL, act_list },
	{ "GET", "/v1/sandboxes/{id}/contexts/{ctx}", "GET context", SUP_BODY_NONE, 0, parse_named, act_get },
	{ "DELETE", "/v1/sandboxes/{id}/contexts/{ctx}", "DELETE context", SUP_BODY_NONE, 0, parse_named,
	  act_delete },
	{ "POST", "/v1/sandboxes/{id}/contexts/{ctx}/run", "POST context run", SUP_BODY_BUFFERED,
	  SUP_CTX_CODE_MAX * 2 + 4096, parse_run, act_run },
	{ "POST", "/v1/sandboxes/{id}/contexts/{ctx}/interrupt", "POST context interrupt", SUP_BODY_NONE, 0,
	  parse_named, act_interrupt },
	{ "POST", "/v1/sandboxes/{id}/contexts/{ctx}/restart", "POST context restart", SUP_BODY_NONE, 0,
	  parse_named, act_restart },
};

const sup_http_family sup_contexts_family = {
	.name = "contexts",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(cx_req),
	.release = cx_release,
};
