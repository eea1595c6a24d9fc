/* E2B's code interpreter (their @e2b/code-interpreter SDK's port 49999:
 * /execute and /contexts) on sbx's code contexts (edge/api/sup_ctx.h): a
 * cell's events streamed as their NDJSON lines (stdout, stderr, result by
 * MIME type with the main one marked, error), then the execution count and
 * end_of_execution; their contexts as sbx's. */
#include "sup_e2b_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "sbx/cleanup.h"
#include "sup_text.h"

/* Their result keys for a MIME bundle's types; anything else goes under
 * "extra". */
static const struct {
	const char *mime, *key;
} mimes[] = {
	{ "text/plain", "text" },	   { "text/html", "html" },	       { "text/markdown", "markdown" },
	{ "image/svg+xml", "svg" },	   { "image/png", "png" },	       { "image/jpeg", "jpeg" },
	{ "application/pdf", "pdf" },	   { "text/latex", "latex" },	       { "application/json", "json" },
	{ "application/javascript", "javascript" },
};

void sup_e2b_code_release(sup_eq *q)
{
	if (q->run)
		sup_ctx_run_cancel(q->run);
	q->run = NULL;
	if (q->wait)
		sup_ctx_wait_cancel(q->wait);
	q->wait = NULL;
	sup_ctx_cell_free(&q->cell);
	if (q->has_spec)
		sup_ctx_spec_free(&q->spec_ctx);
	q->has_spec = false;
}

static json_t *stamped(const char *type)
{
	struct timeval tv;
	char ts[40];
	gettimeofday(&tv, NULL);
	sup_rfc3339(tv.tv_sec, ts, sizeof(ts));
	return json_pack("{s:s, s:s}", "type", type, "timestamp", ts);
}

/* sbx's result event {"main", "data": {mime: text}} as theirs. */
static json_t *result_line(json_t *ev)
{
	json_t *o = json_pack("{s:s, s:b}", "type", "result", "is_main_result",
			      json_is_true(json_object_get(ev, "main")));
	json_t *extra = json_object();
	const char *mime;
	json_t *v;
	if (!o || !extra) {
		json_decref(o);
		json_decref(extra);
		return NULL;
	}
	json_object_foreach(json_object_get(ev, "data"), mime, v) {
		const char *key = NULL;
		for (size_t i = 0; i < sizeof(mimes) / sizeof(mimes[0]) && !key; i++)
			if (strcmp(mimes[i].mime, mime) == 0)
				key = mimes[i].key;
		if (!key) {
			json_object_set(extra, mime, v);
		} else if (strcmp(key, "json") == 0 && json_is_string(v)) {
			json_t *j = json_loads(json_string_value(v), JSON_DECODE_ANY, NULL);
			json_object_set_new(o, key, j ? j : json_incref(v));
		} else {
			json_object_set(o, key, v);
		}
	}
	if (json_object_size(extra))
		json_object_set(o, "extra", extra);
	json_decref(extra);
	return o;
}

static void run_event(const char *event, json_t *obj, size_t cost, void *ud)
{
	sup_eq *q = ud;
	json_t *o = NULL;
	if (strcmp(event, "stdout") == 0 || strcmp(event, "stderr") == 0) {
		o = stamped(event);
		if (o)
			json_object_set(o, "text", json_object_get(obj, "text"));
	} else if (strcmp(event, "result") == 0) {
		o = result_line(obj);
	} else if (strcmp(event, "error") == 0) {
		json_t *tb = json_object_get(obj, "traceback");
		o = json_pack("{s:s, s:O, s:O}", "type", "error", "name", json_object_get(obj, "name"), "value",
			      json_object_get(obj, "value"));
		if (o && json_is_array(tb)) {
			/* theirs is one string, the lines joined */
			SBX_AUTO_FREE char *all = NULL;
			size_t n = 0;
			json_t *l;
			size_t i;
			json_array_foreach(tb, i, l) {
				size_t ll = json_string_length(l);
				char *m = realloc(all, n + ll + 2);
				if (!m)
					break;
				all = m;
				memcpy(all + n, json_string_value(l), ll);
				n += ll;
				all[n++] = '\n';
				all[n] = '\0';
			}
			json_object_set_new(o, "traceback", json_stringn(all ? all : "", n ? n - 1 : 0));
		} else if (o) {
			json_object_set_new(o, "traceback", json_string(""));
		}
	}
	json_decref(obj);
	if (!o) {
		sup_ctx_run_consumed(q->run, cost);
		return;
	}
	sup_stream_json_cost(q->s, "", o, cost);
}

static void run_done(int rc, json_t *answer, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	q->run = NULL;
	if (rc < 0) {
		/* the head went: their error line, then the end */
		json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "type", "error", "name",
				      rc == -EOWNERDEAD ? "ContextDied" : "ExecutionError", "value",
				      err->msg[0] ? err->msg : "the cell did not run", "traceback", "");
		sup_stream_json(q->s, "", o);
	} else {
		json_t *n = json_object_get(answer, "execution_count");
		sup_stream_json(q->s, "", json_pack("{s:s, s:O}", "type", "number_of_executions",
						    "execution_count", n ? n : json_integer(0)));
	}
	sup_stream_json(q->s, "", json_pack("{s:s}", "type", "end_of_execution"));
	sup_stream_end(q->s);
	q->s = NULL;
}

static const sup_ctx_run_cbs run_cbs = { .on_event = run_event, .on_done = run_done };

static void run_credit(size_t cost, void *ud)
{
	sup_eq *q = ud;
	if (q->run)
		sup_ctx_run_consumed(q->run, cost);
}

/* {"code", "context_id", "language", "env_vars"} (their Python SDK sends
 * nulls for what it does not give). */
int sup_e2b_parse_execute(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_eq *q = state;
	sup_e2b_q_init(q, in, ctx);
	json_error_t je;
	SBX_AUTO_JSON json_t *j = json_loadb(in->body, in->body_len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(j))
		return sbx_err_set(err, -EINVAL, "the body is not a JSON object: %s", je.text);
	json_t *code = json_object_get(j, "code"), *cid = sup_e2b_field(j, "context_id", NULL);
	json_t *lang = sup_e2b_field(j, "language", NULL), *env = sup_e2b_field(j, "env_vars", NULL);
	const char *k;
	json_t *v;
	static const char *const known[] = { "code", "context_id", "language", "env_vars", NULL };
	json_object_foreach(j, k, v) {
		size_t i = 0;
		while (known[i] && strcmp(known[i], k) != 0)
			i++;
		if (!known[i])
			return sbx_err_set(err, -EINVAL, "unknown field \"%.64s\"", k);
	}
	if (!json_is_string(code) || json_string_length(code) > SUP_CTX_CODE_MAX)
		return sbx_err_set(err, -EINVAL, "field \"code\": want the cell's code");
	if (cid && lang)
		return sbx_err_set(err, -EINVAL, "give context_id or language, not both");
	if ((cid && !json_is_string(cid)) || (lang && !json_is_string(lang)))
		return sbx_err_set(err, -EINVAL, "context_id and language: want strings");
	if (env && (!json_is_object(env) || json_object_size(env)))
		return sbx_err_set(err, -EINVAL, "field \"env_vars\" is not served per cell: give a "
						 "context's env at its creation");
	const char *c = cid ? json_string_value(cid) : lang ? json_string_value(lang) : "python";
	if (strcmp(c, "js") == 0 || strcmp(c, "typescript") == 0 || strcmp(c, "ts") == 0)
		c = "javascript"; /* their SDK's names for Node */
	if (!sup_ctx_id_ok(c) || strlen(c) >= sizeof(q->ctx_id))
		return cid ? sbx_err_set(err, -ENOENT, "no context %.40s", c)
			   : sbx_err_set(err, -EINVAL, "language %.40s: python, javascript or bash", c);
	snprintf(q->ctx_id, sizeof(q->ctx_id), "%s", c);
	if (!(q->cell.code = strdup(json_string_value(code))))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	q->cell.timeout_ms = SUP_CTX_DEFAULT_TIMEOUT_MS;
	return 0;
}

int sup_e2b_act_execute(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	q->r = r;
	int rc = sup_ctx_run_start(q->x->contexts, q->id, q->ctx_id, &q->cell, &run_cbs, q, &q->run, err);
	if (rc < 0)
		return rc;
	q->s = sup_stream_start(r, SUP_STREAM_LINES, run_credit, q);
	if (!q->s) {
		sup_ctx_run_cancel(q->run);
		q->run = NULL;
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	sup_stream_keepalive_text(q->s, "{\"type\":\"keepalive\"}");
	sup_stream_keepalive(q->s, 5);
	return 0;
}

/* ---- contexts ---- */

/* sbx's context as theirs: {"id", "language", "cwd"}. */
static json_t *context_json(json_t *c)
{
	json_t *cwd = json_object_get(c, "cwd");
	return json_pack("{s:O, s:O, s:O}", "id", json_object_get(c, "id"), "language",
			 json_object_get(c, "language"), "cwd", cwd ? cwd : json_string("/"));
}

int sup_e2b_parse_context(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_eq *q = state;
	sup_e2b_q_init(q, in, ctx);
	if (in->pid && (!sup_ctx_id_ok(in->pid) || strlen(in->pid) >= sizeof(q->ctx_id)))
		return sbx_err_set(err, -ENOENT, "no context %.40s", in->pid);
	if (in->pid)
		snprintf(q->ctx_id, sizeof(q->ctx_id), "%s", in->pid);
	if (strcmp(in->method, "POST") != 0 || in->pid)
		return 0;
	/* create: {"language", "cwd"} onto sbx's spec */
	json_error_t je;
	SBX_AUTO_JSON json_t *j = json_loadb(in->body, in->body_len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(j))
		return sbx_err_set(err, -EINVAL, "the body is not a JSON object: %s", je.text);
	json_t *lang = sup_e2b_field(j, "language", NULL), *cwd = sup_e2b_field(j, "cwd", NULL);
	const char *l = json_is_string(lang) ? json_string_value(lang) : "python";
	if (strcmp(l, "js") == 0 || strcmp(l, "typescript") == 0 || strcmp(l, "ts") == 0)
		l = "javascript";
	SBX_AUTO_JSON json_t *spec = json_pack("{s:s}", "language", l);
	if (spec && json_is_string(cwd))
		json_object_set(spec, "cwd", cwd);
	SBX_AUTO_FREE char *text = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
	if (!text)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	q->has_spec = true;
	return sup_ctx_parse_spec(text, strlen(text), &q->spec_ctx, err);
}

static void ready(int rc, json_t *c, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	q->wait = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	sup_http_json(q->r, 200, context_json(c));
}

int sup_e2b_act_context(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	const sup_http_in *in = sup_http_input(r);
	sup_ctx_engine *e = q->x->contexts;
	q->r = r;
	if (q->has_spec) {
		q->has_spec = false;
		return sup_ctx_create(e, q->id, &q->spec_ctx, ready, q, &q->wait, err);
	}
	if (strcmp(in->method, "GET") == 0) {
		SBX_AUTO_JSON json_t *all = sup_ctx_list(e, q->id);
		json_t *out = json_array(), *c;
		size_t i;
		if (!all || !out) {
			json_decref(out);
			return sbx_err_set(err, -ENOMEM, "out of memory");
		}
		json_array_foreach(json_object_get(all, "contexts"), i, c)
			json_array_append_new(out, context_json(c));
		sup_http_json(r, 200, out);
		return 0;
	}
	if (strcmp(in->method, "DELETE") == 0) {
		int rc = sup_ctx_delete(e, q->id, q->ctx_id, err);
		if (rc == 0)
			sup_http_json(r, 204, NULL);
		return rc;
	}
	return sup_ctx_restart(e, q->id, q->ctx_id, ready, q, &q->wait, err);
}
