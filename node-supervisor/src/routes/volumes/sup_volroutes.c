#include "sup_volroutes.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_api.h"
#include "sup_query.h"

typedef struct vr_req vr_req;

/* Outlives the request when it goes away while its create or delete runs
 * on a worker: the callback then finds no request and frees it. */
typedef struct vr_waiter {
	vr_req *q;
} vr_waiter;

struct vr_req {
	sup_http_req *r;
	char tenant[SUP_TENANT_NAME_MAX + 1];
	char name[SUP_VOL_NAME_MAX + 1];
	uint64_t size;
	vr_waiter *w;
};

static void vr_release(void *state)
{
	vr_req *q = state;
	if (q->w)
		q->w->q = NULL;
}

/* Whose volume the request names: the caller's, or for the admin the
 * tenant of ?tenant=. */
static int tenant_of(const sup_http_in *in, vr_req *q, sbx_err *err)
{
	static const char *const keys[] = { "tenant", NULL };
	SUP_AUTO_QUERY sup_query qs = { 0 };
	int rc = sup_query_parse(in->query, keys, &qs, err);
	if (rc < 0)
		return rc;
	if (!in->who)
		return sbx_err_set(err, -EPERM, "no tenant");
	size_t len;
	const char *t = sup_query_get(&qs, "tenant", &len);
	if (t && !in->who->admin)
		return sbx_err_set(err, -EPERM, "only the admin names another tenant's volume");
	if (t && (len != strlen(t) || len >= sizeof(q->tenant) || !sup_policy_tenant_name_ok(t)))
		return sbx_err_set(err, -EINVAL, "parameter \"tenant\": not a tenant's name");
	snprintf(q->tenant, sizeof(q->tenant), "%s", t ? t : in->who->name);
	return 0;
}

static int parse_named(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	vr_req *q = state;
	if (!sup_core_volumes(((sup_volroutes_ctx *)ctx)->core))
		return sbx_err_set(err, -ENOSYS, "this supervisor has no volumes");
	if (!sup_volspec_name_ok(in->pid, strlen(in->pid)))
		return sbx_err_set(err, -ENOENT, "volume %.64s: not found (not a volume's name)", in->pid);
	snprintf(q->name, sizeof(q->name), "%s", in->pid);
	return tenant_of(in, q, err);
}

static int parse_create(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	vr_req *q = state;
	(void)ctx;
	if (!in->who)
		return sbx_err_set(err, -EPERM, "no tenant");
	snprintf(q->tenant, sizeof(q->tenant), "%s", in->who->name);
	return sup_api_parse_volume_create(in->body, in->body_len, q->name, sizeof(q->name), &q->size,
					   err);
}

static sup_volumes *vols(sup_http_req *r)
{
	return sup_core_volumes(((sup_volroutes_ctx *)sup_http_ctx(r))->core);
}

/* A create's or delete's end: the request's answer, if it is still there. */
static void on_done(int rc, const sup_volume_view *view, const sbx_err *err, void *ud)
{
	vr_waiter *w = ud;
	vr_req *q = w->q;
	free(w);
	if (!q)
		return;
	q->w = NULL;
	if (rc < 0)
		sup_http_fail(q->r, err);
	else if (view)
		sup_http_json(q->r, 201, sup_api_render_volume(view));
	else
		sup_http_json(q->r, 204, NULL);
}

static int start(sup_http_req *r, vr_req *q, bool create, sbx_err *err)
{
	q->r = r;
	q->w = calloc(1, sizeof(*q->w));
	if (!q->w)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	q->w->q = q;
	const sup_http_in *in = sup_http_input(r);
	sup_core *core = ((sup_volroutes_ctx *)sup_http_ctx(r))->core;
	int rc = create ? sup_core_volume_create(core, in->who, q->name, q->size, on_done, q->w, err)
			: sup_volumes_delete(vols(r), q->tenant, q->name, on_done, q->w, err);
	if (rc < 0) {
		free(q->w);
		q->w = NULL;
	}
	return rc;
}

static int act_create(sup_http_req *r, void *state, sbx_err *err)
{
	return start(r, state, true, err);
}

static int act_delete(sup_http_req *r, void *state, sbx_err *err)
{
	return start(r, state, false, err);
}

static int act_get(sup_http_req *r, void *state, sbx_err *err)
{
	vr_req *q = state;
	sup_volume_view v;
	int rc = sup_volumes_get(vols(r), q->tenant, q->name, &v, err);
	if (rc == 0)
		sup_http_json(r, 200, sup_api_render_volume(&v));
	return rc;
}

static void add_view(const sup_volume_view *v, void *ud)
{
	json_array_append_new(ud, sup_api_render_volume(v));
}

static int act_list(sup_http_req *r, void *state, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(r);
	(void)state;
	if (!in->who)
		return sbx_err_set(err, -EPERM, "no tenant");
	if (!vols(r))
		return sbx_err_set(err, -ENOSYS, "this supervisor has no volumes");
	json_t *arr = json_array();
	if (!arr)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_volumes_list(vols(r), in->who->admin ? NULL : in->who->name, add_view, arr);
	sup_http_json(r, 200, json_pack("{s:o}", "volumes", arr));
	return 0;
}

static const sup_http_route routes[] = {
	{ "POST", "/v1/volumes", "POST volumes", SUP_BODY_BUFFERED, 4096, parse_create, act_create },
	{ "GET", "/v1/volumes", "GET volumes", SUP_BODY_NONE, 0, NULL, act_list },
	{ "GET", "/v1/volumes/{name}", "GET volume", SUP_BODY_NONE, 0, parse_named, act_get },
	{ "DELETE", "/v1/volumes/{name}", "DELETE volume", SUP_BODY_NONE, 0, parse_named, act_delete },
};

const sup_http_family sup_volumes_family = {
	.name = "volumes",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(vr_req),
	.release = vr_release,
};
