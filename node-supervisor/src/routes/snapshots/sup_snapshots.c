/* sup_snapshots: see sup_snapshots.h. */
#include "sup_snapshots.h"

#include <errno.h>
#include <string.h>

#include "sup_api.h"

typedef struct snap_req snap_req;
struct snap_req {
	sup_http_req *r;
	sup_snapshots_ctx *x;
	char name[SUP_SNAPS_NAME_MAX + 1];
	unsigned count;
	bool include_volumes;
	sup_snaps_op *op;
	sup_snaps_job *job; /* the object store asked (sup_snaps_refresh, _remove) */
	int (*then)(sup_http_req *r, snap_req *q, sbx_err *err); /* after a refresh */
};

static void snap_release(void *state)
{
	snap_req *q = state;
	if (q->op)
		sup_snaps_op_cancel(q->op);
	if (q->job)
		sup_snaps_job_cancel(q->job);
}

/* ---- parse ---- */

/* The body's optional field key and "include_volumes" (NULL when absent
 * or no body); the latter into q. */
static int body_field(const sup_http_in *in, void *ctx, void *state, const char *key,
		      json_t **j, json_t **v, sbx_err *err)
{
	const char *const keys[] = { key, "include_volumes", NULL };
	snap_req *q = state;
	q->x = ctx;
	int r = in->body_len ? sup_http_in_json(in, keys, j, err) : 0;
	*v = r == 0 && *j ? json_object_get(*j, key) : NULL;
	r = r ?: sup_api_parse_include_volumes(*j ? json_object_get(*j, "include_volumes") : NULL,
					       &q->include_volumes, err);
	return r;
}

static int parse_take(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	snap_req *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	json_t *name;
	int r = body_field(in, ctx, state, "name", &j, &name, err);
	if (r < 0)
		return r;
	return sup_api_parse_snapshot_name(name, q->name, err);
}

static int parse_fork(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	snap_req *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	json_t *count;
	int r = body_field(in, ctx, state, "count", &j, &count, err);
	if (r < 0)
		return r;
	if (count && (!json_is_integer(count) || json_integer_value(count) < 1 ||
		      json_integer_value(count) > SUP_SNAPS_FORK_MAX))
		return sbx_err_set(err, -EINVAL, "field \"count\": want an integer 1..%d",
				   SUP_SNAPS_FORK_MAX);
	q->count = count ? (unsigned)json_integer_value(count) : 1;
	return 0;
}

static int parse_ctx(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	(void)in;
	(void)err;
	((snap_req *)state)->x = ctx;
	return 0;
}

/* ---- act ---- */

static void removed(int rc, const sbx_err *err, void *ud)
{
	snap_req *q = ud;
	q->job = NULL;
	if (rc < 0)
		sup_http_fail(q->r, err);
	else
		sup_http_json(q->r, 204, NULL);
}

static void take_done(int rc, const sup_snap_view *v, const sbx_err *err, void *ud)
{
	snap_req *q = ud;
	q->op = NULL;
	if (rc < 0)
		sup_http_fail(q->r, err);
	else
		sup_http_json(q->r, 201, sup_api_render_snapshot(v));
}

static int act_take(sup_http_req *r, void *state, sbx_err *err)
{
	snap_req *q = state;
	q->r = r;
	const sup_http_in *in = sup_http_input(r);
	return sup_snaps_take(q->x->snaps, in->who, in->id, q->name, q->include_volumes, take_done, q,
			      &q->op, err);
}

static void add_view(const sup_snap_view *v, void *ud)
{
	json_array_append_new(ud, sup_api_render_snapshot(v));
}

static int answer_list(sup_http_req *r, snap_req *q, sbx_err *err)
{
	json_t *arr = json_array();
	if (!arr)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int rc = sup_snaps_list(q->x->snaps, sup_http_input(r)->who, add_view, arr, err);
	if (rc < 0) {
		json_decref(arr);
		return rc;
	}
	sup_http_json(r, 200, json_pack("{s:o}", "snapshots", arr));
	return 0;
}

static int answer_get(sup_http_req *r, snap_req *q, sbx_err *err)
{
	sup_snap_view v;
	const sup_http_in *in = sup_http_input(r);
	int rc = sup_snaps_get(q->x->snaps, in->who, in->pid, &v, err);
	if (rc == 0)
		sup_http_json(r, 200, sup_api_render_snapshot(&v));
	return rc;
}

static int answer_delete(sup_http_req *r, snap_req *q, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(r);
	int rc = sup_snaps_remove(q->x->snaps, in->who, in->pid, removed, q, &q->job, err);
	if (rc == 1)
		sup_http_json(r, 204, NULL);
	return rc < 0 ? rc : 0;
}

/* The object store answered (or there is none): the answer from the
 * catalog, brought up to date. */
static void refreshed(int rc, const sbx_err *err, void *ud)
{
	snap_req *q = ud;
	q->job = NULL;
	sbx_err e;
	if (rc < 0)
		sup_http_fail(q->r, err);
	else if (q->then(q->r, q, &e) < 0)
		sup_http_fail(q->r, &e);
}

/* then() after the object store's manifests are read: of the path's
 * snapshot, or (GET /v1/snapshots) all. */
static int after_refresh(sup_http_req *r, snap_req *q, int (*then)(sup_http_req *, snap_req *, sbx_err *),
			 sbx_err *err)
{
	q->r = r;
	q->then = then;
	const sup_http_in *in = sup_http_input(r);
	int rc = sup_snaps_refresh(q->x->snaps, then == answer_list ? NULL : in->pid, refreshed, q,
				   &q->job, err);
	return rc == 1 ? then(r, q, err) : rc;
}

static int act_list(sup_http_req *r, void *state, sbx_err *err)
{
	return after_refresh(r, state, answer_list, err);
}

static int act_get(sup_http_req *r, void *state, sbx_err *err)
{
	return after_refresh(r, state, answer_get, err);
}

static int act_delete(sup_http_req *r, void *state, sbx_err *err)
{
	return after_refresh(r, state, answer_delete, err);
}

static void fork_done(int rc, const char *const *ids, size_t n, const sbx_err *err, void *ud)
{
	snap_req *q = ud;
	q->op = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	json_t *arr = json_array();
	const sup_http_in *in = sup_http_input(q->r);
	for (size_t i = 0; arr && i < n; i++) {
		sup_sandbox_view v;
		sbx_err e;
		if (sup_core_get(q->x->core, in->who, ids[i], &v, &e) == 0)
			json_array_append_new(arr, sup_api_render_sandbox(&v));
	}
	if (!arr) {
		sbx_err e;
		sbx_err_set(&e, -ENOMEM, "out of memory");
		sup_http_fail(q->r, &e);
		return;
	}
	sup_http_json(q->r, 201, json_pack("{s:o}", "sandboxes", arr));
}

static int act_fork(sup_http_req *r, void *state, sbx_err *err)
{
	snap_req *q = state;
	q->r = r;
	const sup_http_in *in = sup_http_input(r);
	return sup_snaps_fork(q->x->snaps, in->who, in->id, q->count, q->include_volumes, fork_done,
			      q, &q->op, err);
}

static const sup_http_route routes[] = {
	{ "POST", "/v1/sandboxes/{id}/snapshots", "POST snapshot", SUP_BODY_BUFFERED, 4096, parse_take,
	  act_take },
	{ "GET", "/v1/snapshots", "GET snapshots", SUP_BODY_NONE, 0, parse_ctx, act_list },
	{ "GET", "/v1/snapshots/{pid}", "GET snapshot", SUP_BODY_NONE, 0, parse_ctx, act_get },
	{ "DELETE", "/v1/snapshots/{pid}", "DELETE snapshot", SUP_BODY_NONE, 0, parse_ctx, act_delete },
	{ "POST", "/v1/sandboxes/{id}/fork", "POST fork", SUP_BODY_BUFFERED, 4096, parse_fork, act_fork },
};

const sup_http_family sup_snapshots_family = {
	.name = "snapshots",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(snap_req),
	.release = snap_release,
};
