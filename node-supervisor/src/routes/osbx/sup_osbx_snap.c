/* Their snapshot calls (POST /sandboxes/{id}/snapshots, GET /snapshots,
 * GET and DELETE /snapshots/{id}) onto sbx's snapshots (sup_snaps): the
 * same archive, rows and tenant rules as /v1's. sbx answers a take once
 * the archive is stored, so theirs is answered Ready, never Creating. */
#include "sup_osbx_int.h"

#include <errno.h>
#include <string.h>

static sup_osbx_ctx *ctx_of(sup_http_req *r)
{
	return sup_http_ctx(r);
}

/* The take's optional body: {"name"}. */
int sup_osbx_parse_snap(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "name", NULL };
	sup_oq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	(void)ctx;
	if (in->body_len == 0)
		return 0;
	int rc = sup_http_in_json(in, keys, &j, err);
	if (rc < 0)
		return rc;
	json_t *name = json_object_get(j, "name");
	if (!name || json_is_null(name))
		return 0;
	if (!json_is_string(name) || json_string_length(name) > SUP_SNAPS_NAME_MAX ||
	    strlen(json_string_value(name)) != json_string_length(name))
		return sbx_err_set(err, -EINVAL, "field \"name\": want a string of at most %d bytes",
				   SUP_SNAPS_NAME_MAX);
	snprintf(q->snap_name, sizeof(q->snap_name), "%s", json_string_value(name));
	return 0;
}

static void taken(int rc, const sup_snap_view *v, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	q->snap_op = NULL;
	if (rc < 0)
		sup_http_fail(q->r, err);
	else
		sup_http_json(q->r, 202, sup_osbx_snapshot_json(v));
}

int sup_osbx_act_snap_take(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	const sup_http_in *in = sup_http_input(r);
	q->r = r;
	q->x = ctx_of(r);
	return sup_snaps_take(q->x->snaps, in->who, in->id, q->snap_name, false, taken, q, &q->snap_op, err);
}

typedef struct snap_walk {
	const sup_osbx_listq *lq;
	json_t *items;
} snap_walk;

static void snap_one(const sup_snap_view *v, void *ud)
{
	snap_walk *w = ud;
	if ((w->lq->sandbox && strcmp(w->lq->sandbox, v->source) != 0) ||
	    (w->lq->name && strcmp(w->lq->name, v->name) != 0) || !sup_osbx_listq_state(w->lq, "Ready"))
		return;
	json_array_append_new(w->items, sup_osbx_snapshot_json(v));
}

int sup_osbx_act_snap_list(sup_http_req *r, void *state, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(r);
	sup_osbx_listq lq;
	(void)state;
	int rc = sup_osbx_listq_parse(in->query, true, &lq, err);
	if (rc < 0)
		return rc;
	snap_walk w = { .lq = &lq, .items = json_array() };
	rc = w.items ? sup_snaps_list(ctx_of(r)->snaps, in->who, snap_one, &w, err)
		     : sbx_err_set(err, -ENOMEM, "out of memory");
	sup_osbx_listq_free(&lq);
	if (rc < 0) {
		json_decref(w.items);
		return rc;
	}
	return sup_osbx_page(r, w.items, &lq, err);
}

int sup_osbx_act_snap_get(sup_http_req *r, void *state, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(r);
	sup_snap_view v;
	(void)state;
	int rc = sup_snaps_get(ctx_of(r)->snaps, in->who, in->pid, &v, err);
	if (rc == 0)
		sup_http_json(r, 200, sup_osbx_snapshot_json(&v));
	return rc;
}

int sup_osbx_act_snap_delete(sup_http_req *r, void *state, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(r);
	(void)state;
	int rc = sup_snaps_delete(ctx_of(r)->snaps, in->who, in->pid, err);
	if (rc == 0)
		sup_http_json(r, 204, NULL);
	return rc;
}
