/* The control plane of the E2B layer (/e2b/...: create, connect, get,
 * list, kill, timeout, pause, metrics) and the rows of both its
 * families. */
#include "sup_e2b.h"
#include "sup_e2b_fs_int.h"
#include "sup_e2b_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sbx/cleanup.h"
#include "sup_log.h"
#include "sup_text.h"

#define KEPT_KIND "e2b"

int sup_e2b_ctx_open(sup_e2b_ctx *x, struct sup_catalog *catalog, sbx_err *err)
{
	return sup_kept_open(&x->kept, KEPT_KIND, catalog, err);
}

void sup_e2b_ctx_release(sup_e2b_ctx *x)
{
	sup_kept_release(&x->kept);
}

static void eq_release(void *state)
{
	sup_eq *q = state;
	if (q->op)
		sup_op_cancel(q->op);
	q->op = NULL;
	sup_e2b_proc_release(q);
	sup_e2b_fs_release(q);
	sup_e2b_code_release(q);
	sup_create_req_free(&q->create);
	json_decref(q->kept);
	json_decref(q->msg);
}

static sup_e2b_ctx *ctx_of(sup_http_req *r)
{
	return sup_http_ctx(r);
}

/* Their Sandbox for v with its access token. */
static int answer_sandbox(sup_http_req *r, int status, const sup_sandbox_view *v, sbx_err *err)
{
	sup_e2b_ctx *x = ctx_of(r);
	char tok[SUP_E2B_TOKEN_MAX + 1];
	const char *tenant = sup_http_input(r)->who->name;
	if (sup_e2b_token(x, tenant, v->id, tok) < 0)
		return sbx_err_set(err, -EINVAL, "tenant %.64s: its name is too long for an access token", tenant);
	json_t *o = sup_e2b_sandbox_json(x, v, sup_kept_get(&x->kept, v->id), tok);
	if (!o)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_http_json(r, status, o);
	return 0;
}

/* ---- create ---- */

static int parse_create(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_eq *q = state;
	q->x = ctx;
	return sup_e2b_parse_create(in->body, in->body_len, q->x, &q->create, &q->kept, err);
}

static void create_done(int rc, const sup_sandbox_view *v, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	sbx_err e;
	q->op = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	/* the sandbox is made: a catalog that fails here costs only the
	 * metadata's surviving a restart */
	if (sup_kept_put(&q->x->kept, v->id, sup_http_input(q->r)->who->name, q->kept, &e) < 0)
		sup_warn("e2b: sandbox %s: %s", v->id, e.msg);
	if (answer_sandbox(q->r, 201, v, &e) < 0)
		sup_http_fail(q->r, &e);
}

static int act_create(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	const sup_tenant *who = sup_http_input(r)->who;
	q->r = r;
	sup_kept_prune(&q->x->kept, q->x->core, who);
	return sup_core_create(q->x->core, who, &q->create, create_done, q, &q->op, err);
}

/* ---- one sandbox ---- */

static int parse_id(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_eq *q = state;
	(void)err;
	q->x = ctx;
	q->id = in->id;
	return 0;
}

static int act_get(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	sup_sandbox_view v;
	int rc = sup_core_get(q->x->core, sup_http_input(r)->who, q->id, &v, err);
	if (rc < 0)
		return rc;
	json_t *o = sup_e2b_sandbox_json(q->x, &v, sup_kept_get(&q->x->kept, q->id), NULL);
	if (!o)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_http_json(r, 200, o);
	return 0;
}

static void kill_done(int rc, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	q->op = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	sup_kept_drop(&q->x->kept, q->id);
	sup_http_json(q->r, 204, NULL);
}

static int act_kill(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	q->r = r;
	return sup_core_delete(q->x->core, sup_http_input(r)->who, q->id, kill_done, q, &q->op, err);
}

static int parse_timeout(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_eq *q = state;
	parse_id(in, ctx, state, err);
	return sup_e2b_parse_timeout(in->body, in->body_len, false, &q->timeout_s, err);
}

static int act_timeout(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	sup_sandbox_view v;
	int rc = sup_core_set_timeout(q->x->core, sup_http_input(r)->who, q->id, q->timeout_s, &v, err);
	if (rc == 0)
		sup_http_json(r, 204, NULL);
	return rc;
}

static int parse_connect(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_eq *q = state;
	parse_id(in, ctx, state, err);
	return sup_e2b_parse_timeout(in->body, in->body_len, true, &q->timeout_s, err);
}

/* Connect: a paused sandbox is resumed (201), a running one found (200);
 * a timeout given only ever extends its life, as theirs. */
static int act_connect(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	const sup_tenant *who = sup_http_input(r)->who;
	sup_sandbox_view v;
	int status = 200;
	int rc = sup_core_get(q->x->core, who, q->id, &v, err);
	if (rc == 0 && strcmp(v.state, "paused") == 0) {
		status = 201;
		rc = sup_core_pause(q->x->core, q->id, false, &v, err);
	}
	if (rc == 0 && q->timeout_s && v.expires_at < time(NULL) + (time_t)q->timeout_s)
		rc = sup_core_set_timeout(q->x->core, who, q->id, q->timeout_s, &v, err);
	return rc < 0 ? rc : answer_sandbox(r, status, &v, err);
}

static int act_pause(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	sup_sandbox_view v;
	bool resume = strstr(sup_http_input(r)->path, "/resume") != NULL;
	int rc = sup_core_get(q->x->core, sup_http_input(r)->who, q->id, &v, err);
	if (rc < 0)
		return rc;
	if ((strcmp(v.state, "paused") == 0) != resume)
		return sbx_err_set(err, -EEXIST, "sandbox %s is %s already", q->id,
				   resume ? "running" : "paused");
	rc = sup_core_pause(q->x->core, q->id, !resume, &v, err);
	if (rc < 0)
		return rc;
	if (resume)
		return answer_sandbox(r, 201, &v, err);
	sup_http_json(r, 204, NULL);
	return 0;
}

/* Their SandboxMetric: one sample, now; the CPU figure is the average
 * since the sandbox was made (sbx keeps no series). */
static int act_metrics(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	sup_sandbox_view v;
	int rc = sup_core_get(q->x->core, sup_http_input(r)->who, q->id, &v, err);
	if (rc < 0)
		return rc;
	time_t now = time(NULL);
	char ts[32];
	sup_rfc3339(now, ts, sizeof(ts));
	double cpus = v.resources.cpu_milli / 1000.0;
	double life = (double)(now > v.created_at ? now - v.created_at : 1);
	double pct = v.has_usage && cpus > 0 ? (double)v.usage.cpu_ns / 1e9 / life / cpus * 100.0 : 0;
	json_t *m = json_pack("{s:s, s:I, s:i, s:f, s:I, s:I, s:I, s:I, s:I}", "timestamp", ts,
			      "timestampUnix", (json_int_t)now, "cpuCount",
			      (int)((v.resources.cpu_milli + 999) / 1000), "cpuUsedPct", pct > 100 ? 100 : pct,
			      "memUsed", (json_int_t)(v.has_usage ? v.usage.memory : 0), "memTotal",
			      (json_int_t)v.resources.memory, "memCache", (json_int_t)0, "diskUsed",
			      (json_int_t)(v.has_usage ? v.usage.disk : 0), "diskTotal",
			      (json_int_t)v.resources.disk);
	if (!m)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_http_json(r, 200, json_pack("[o]", m));
	return 0;
}

/* ---- list ---- */

typedef struct list_walk {
	sup_e2b_ctx *x;
	const sup_e2b_listq *lq;
	json_t *items;
	bool started;    /* past nextToken (or none given) */
	char last[SUP_ID_MAX];
	bool more;
} list_walk;

static void list_one(const sup_sandbox_view *v, void *ud)
{
	list_walk *w = ud;
	if (!w->started) {
		w->started = strcmp(v->id, w->lq->next) == 0;
		return;
	}
	const json_t *kept = sup_kept_get(&w->x->kept, v->id);
	if (!sup_e2b_listq_match(w->lq, v->state, kept))
		return;
	if (json_array_size(w->items) >= w->lq->limit) {
		w->more = true;
		return;
	}
	json_t *o = sup_e2b_sandbox_json(w->x, v, kept, NULL);
	if (o && json_array_append_new(w->items, o) == 0)
		snprintf(w->last, sizeof(w->last), "%s", v->id);
}

static int act_list(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	const sup_http_in *in = sup_http_input(r);
	sup_e2b_listq lq;
	int rc = sup_e2b_listq_parse(in->query, &lq, err);
	SBX_AUTO_JSON json_t *items = rc < 0 ? NULL : json_array();
	if (rc == 0 && !items)
		rc = sbx_err_set(err, -ENOMEM, "out of memory");
	if (rc < 0) {
		sup_e2b_listq_free(&lq);
		return rc;
	}
	list_walk w = { .x = q->x, .lq = &lq, .items = items, .started = !lq.next[0] };
	sup_kept_prune(&q->x->kept, q->x->core, in->who);
	sup_core_list(q->x->core, in->who, list_one, &w);
	bool lost = !w.started;
	sup_e2b_listq_free(&lq);
	if (lost)
		return sbx_err_set(err, -EINVAL, "nextToken names a sandbox no longer listed: list again");
	if (w.more)
		sup_http_header(r, "X-Next-Token", w.last);
	sup_http_json(r, 200, json_incref(items));
	return 0;
}

/* ---- envd ---- */

static int act_health(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	sup_sandbox_view v;
	int rc = sup_core_get(q->x->core, sup_http_input(r)->who, q->id, &v, err);
	if (rc < 0)
		return rc;
	/* their SDK reads 502 as "not running" */
	if (strcmp(v.state, "paused") == 0)
		return sbx_err_set(err, -EHOSTDOWN, "sandbox %s is paused", q->id);
	sup_http_json(r, 204, NULL);
	return 0;
}

#define SB "/e2b/sandboxes/{id}"
#define SB2 "/e2b/v2/sandboxes/{id}"
#define MB SUP_E2B_MAX_BODY

static const sup_http_route routes[] = {
	{ "POST", "/e2b/sandboxes", "e2b create", SUP_BODY_BUFFERED, MB, parse_create, act_create },
	{ "POST", "/e2b/v2/sandboxes", "e2b create", SUP_BODY_BUFFERED, MB, parse_create, act_create },
	{ "GET", "/e2b/v2/sandboxes", "e2b list", SUP_BODY_NONE, 0, parse_id, act_list },
	{ "GET", "/e2b/sandboxes", "e2b list", SUP_BODY_NONE, 0, parse_id, act_list },
	{ "GET", SB, "e2b get", SUP_BODY_NONE, 0, parse_id, act_get },
	{ "DELETE", SB, "e2b kill", SUP_BODY_NONE, 0, parse_id, act_kill },
	{ "POST", SB "/connect", "e2b connect", SUP_BODY_BUFFERED, MB, parse_connect, act_connect },
	{ "POST", SB2 "/connect", "e2b connect", SUP_BODY_BUFFERED, MB, parse_connect, act_connect },
	{ "POST", SB "/timeout", "e2b timeout", SUP_BODY_BUFFERED, MB, parse_timeout, act_timeout },
	{ "POST", SB "/pause", "e2b pause", SUP_BODY_NONE, 0, parse_id, act_pause },
	{ "POST", SB "/resume", "e2b resume", SUP_BODY_NONE, 0, parse_id, act_pause },
	{ "GET", SB "/metrics", "e2b metrics", SUP_BODY_NONE, 0, parse_id, act_metrics },
};

const sup_http_family sup_e2b_family = {
	.name = "e2b",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(sup_eq),
	.release = eq_release,
};

#define ENVD SB "/envd"
#define PROC ENVD "/process.Process/"
#define FS ENVD "/filesystem.Filesystem/"
#define MM SUP_E2B_MAX_MSG

#define CODE SB "/code"

static const sup_http_route envd_routes[] = {
	{ "POST", CODE "/execute", "e2b execute", SUP_BODY_BUFFERED, SUP_CTX_CODE_MAX + 65536, sup_e2b_parse_execute, sup_e2b_act_execute },
	{ "POST", CODE "/contexts", "e2b context create", SUP_BODY_BUFFERED, MB, sup_e2b_parse_context, sup_e2b_act_context },
	{ "GET", CODE "/contexts", "e2b contexts", SUP_BODY_NONE, 0, sup_e2b_parse_context, sup_e2b_act_context },
	{ "POST", CODE "/contexts/{pid}/restart", "e2b context restart", SUP_BODY_NONE, 0, sup_e2b_parse_context, sup_e2b_act_context },
	{ "DELETE", CODE "/contexts/{pid}", "e2b context delete", SUP_BODY_NONE, 0, sup_e2b_parse_context, sup_e2b_act_context },
	{ "GET", ENVD "/health", "envd health", SUP_BODY_NONE, 0, parse_id, act_health },
	{ "POST", PROC "Start", "envd Start", SUP_BODY_BUFFERED, MM, sup_e2b_parse_rpc_stream, sup_e2b_act_start },
	{ "POST", PROC "Connect", "envd Connect", SUP_BODY_BUFFERED, MM, sup_e2b_parse_rpc_stream, sup_e2b_act_connect },
	{ "POST", PROC "List", "envd List", SUP_BODY_BUFFERED, MM, sup_e2b_parse_rpc, sup_e2b_act_list },
	{ "POST", PROC "SendInput", "envd SendInput", SUP_BODY_BUFFERED, MM, sup_e2b_parse_rpc, sup_e2b_act_input },
	{ "POST", PROC "CloseStdin", "envd CloseStdin", SUP_BODY_BUFFERED, MM, sup_e2b_parse_rpc, sup_e2b_act_input },
	{ "POST", PROC "SendSignal", "envd SendSignal", SUP_BODY_BUFFERED, MM, sup_e2b_parse_rpc, sup_e2b_act_signal },
	{ "POST", PROC "Update", "envd Update", SUP_BODY_BUFFERED, MM, sup_e2b_parse_rpc, sup_e2b_act_update },
	{ "POST", FS "Stat", "envd Stat", SUP_BODY_BUFFERED, MM, sup_e2b_parse_stat, sup_e2b_act_fs },
	{ "POST", FS "ListDir", "envd ListDir", SUP_BODY_BUFFERED, MM, sup_e2b_parse_listdir, sup_e2b_act_fs },
	{ "POST", FS "MakeDir", "envd MakeDir", SUP_BODY_BUFFERED, MM, sup_e2b_parse_mkdir, sup_e2b_act_fs },
	{ "POST", FS "Move", "envd Move", SUP_BODY_BUFFERED, MM, sup_e2b_parse_move, sup_e2b_act_fs },
	{ "POST", FS "Remove", "envd Remove", SUP_BODY_BUFFERED, MM, sup_e2b_parse_remove, sup_e2b_act_fs },
	{ "POST", FS "WatchDir", "envd WatchDir", SUP_BODY_BUFFERED, MM, sup_e2b_parse_watch, sup_e2b_act_watch },
	{ "GET", ENVD "/files", "envd GET files", SUP_BODY_NONE, 0, sup_e2b_parse_files_get, sup_e2b_act_files_get },
	{ "POST", ENVD "/files", "envd POST files", SUP_BODY_STREAMED, 0, sup_e2b_parse_files_post,
	  sup_e2b_act_files_post },
};

const sup_http_family sup_e2b_envd_family = {
	.name = "e2b",
	.routes = envd_routes,
	.nroutes = sizeof(envd_routes) / sizeof(envd_routes[0]),
	.state_size = sizeof(sup_eq),
	.release = eq_release,
};
