/* A create with a step first, one op kind each and one scaffold: a
 * restore from an object store (its archive fetched off the loop, dropped
 * once the create is over) and a restore or fork with volumes (made first
 * by sup_volseed, mounted by the create with the request's own, deleted
 * again if it fails). The step done, the create proper is sup_core_create
 * with the request; the answer is its. Loop thread only. */
#include "sup_core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_core_op_int.h"
#include "sup_volseed.h"
#include "sup_volumes.h"

/* ---- a create with a step first: a restore from an object store (its
 * archive fetched off the loop by the restorer, dropped once the create
 * is over), a restore or fork with volumes (made first by sup_volseed,
 * mounted by the create with the request's own, deleted again if it
 * fails); one op kind each, one scaffold ---- */

static sup_op *pre_new(sup_core *c, sup_op_kind kind, const sup_tenant *who,
		       sup_core_sandbox_cb cb, void *ud, sbx_err *err)
{
	sup_op *op = calloc(1, sizeof(*op));
	if (!op) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	op->core = c;
	op->kind = kind;
	op->ud = ud;
	op->u.pre.cb = cb;
	op->u.pre.who = who;
	return op;
}

/* What the step holds goes (rc < 0) or is kept (rc 0), and op. */
void sup_core_prep_end(sup_op *op, int rc)
{
	if (op->u.pre.held)
		op->core->restorer->fetched_drop(op->core->snaps, op->u.pre.snap);
	if (op->u.pre.vs && rc == 0)
		sup_volseed_keep(op->u.pre.vs);
	else if (op->u.pre.vs)
		sup_volseed_undo(op->u.pre.vs);
	sup_create_req_free(&op->u.pre.req);
	free(op);
}

/* The answer: the create's, or the step's failure (v NULL). */
static void pre_answer(sup_op *op, int rc, const sup_sandbox_view *v, const sbx_err *err)
{
	sup_core_sandbox_cb cb = op->u.pre.cb;
	void *cud = op->ud;
	op->u.pre.create = NULL;
	sup_core_prep_end(op, rc);
	cb(rc, v, err, cud);
}

static void pre_created(int rc, const sup_sandbox_view *v, const sbx_err *err, void *ud)
{
	pre_answer(ud, rc, v, err);
}

/* The step is done: the create proper, with the request. */
static int pre_go(sup_op *op, sbx_err *err)
{
	return sup_core_create(op->core, op->u.pre.who, &op->u.pre.req, pre_created, op,
			       &op->u.pre.create, err);
}

/* The archive is here. */
static int fetch_go(sup_op *op, sbx_err *err)
{
	op->u.pre.held = true;
	op->u.pre.req.snapshot_fetched = true;
	return pre_go(op, err);
}

static void fetched(int rc, const sbx_err *err, void *ud)
{
	sup_op *op = ud;
	op->u.pre.job = NULL;
	sbx_err e = *err;
	if (rc == 0 && fetch_go(op, &e) == 0)
		return;
	pre_answer(op, e.code, NULL, &e);
}

int sup_core_create_from_store(sup_core *c, const sup_tenant *who, sup_create_req *req,
			     sup_core_sandbox_cb cb, void *ud, sup_op **opp, sbx_err *err)
{
	if (strlen(req->snapshot) >= SUP_ID_MAX)
		return sbx_err_set(err, -EINVAL, "field \"snapshot\": not a snapshot id");
	sup_op *op = pre_new(c, OP_FETCH, who, cb, ud, err);
	if (!op)
		return err->code;
	snprintf(op->u.pre.snap, sizeof(op->u.pre.snap), "%s", req->snapshot);
	op->u.pre.req = *req;
	int rc = c->restorer->fetch(c->snaps, who, op->u.pre.snap, fetched, op, &op->u.pre.job, err);
	if (rc == 1)
		rc = fetch_go(op, err);
	if (rc < 0) {
		*req = op->u.pre.req; /* the caller's again */
		memset(&op->u.pre.req, 0, sizeof(op->u.pre.req));
		sup_core_prep_end(op, rc);
		return rc;
	}
	memset(req, 0, sizeof(*req));
	*opp = op;
	return 0;
}

/* The volumes are made: the create mounts them with the request's own. */
static void vols_made(int rc, const sbx_err *err, void *ud)
{
	sup_op *op = ud;
	sbx_err e = rc < 0 ? *err : (sbx_err){0};
	if (rc < 0)
		op->u.pre.vs = NULL; /* it freed itself and its volumes */
	sup_create_req *req = &op->u.pre.req;
	size_t n = 0;
	const sup_vol_mount *m = rc == 0 ? sup_volseed_mounts(op->u.pre.vs, &n) : NULL;
	sup_vol_mount *all = NULL;
	if (m) {
		all = realloc(req->volumes.v, (req->volumes.n + n) * sizeof(*all));
		if (!all)
			rc = sbx_err_set(&e, -ENOMEM, "out of memory");
	} else if (rc == 0) {
		rc = sbx_err_set(&e, -ENOMEM, "no volumes made");
	}
	if (rc == 0 && all) {
		memcpy(all + req->volumes.n, m, n * sizeof(*all));
		req->volumes.v = all;
		req->volumes.n += n;
		req->vols_seeded = true;
		if (pre_go(op, &e) == 0)
			return;
	}
	pre_answer(op, e.code, NULL, &e);
}

int sup_core_create_with_volumes(sup_core *c, const sup_tenant *who, sup_create_req *req,
			       sup_core_sandbox_cb cb, void *ud, sup_op **opp, sbx_err *err)
{
	if (!c->cfg.volumes)
		return sbx_err_set(err, -EINVAL, "the snapshot carries volumes: this supervisor has none");
	if (req->isolation != SUP_ISO_RUNC)
		return sbx_err_set(err, -EINVAL, "the snapshot carries volumes: volumes are for runc "
				   "sandboxes, not %s", sup_isolation_names[req->isolation]);
	/* the request's own volumes and these, as one list (same paths in
	 * both, or one below another, are 400), and all of it within the
	 * tenant's disk beside the sandbox's */
	sup_vol_mount all[SUP_VOL_MAX_MOUNTS * 2];
	uint64_t bytes = req->resources.disk;
	size_t n = 0;
	for (size_t i = 0; i < req->volumes.n && n < SUP_VOL_MAX_MOUNTS * 2; i++)
		all[n++] = req->volumes.v[i];
	for (size_t i = 0; i < req->nvol_seeds && n < SUP_VOL_MAX_MOUNTS * 2; i++) {
		all[n] = req->vol_seeds[i].m;
		/* unique, and no volume's name (no '#' in those) */
		snprintf(all[n++].name, sizeof(all[0].name), "#%zu", i);
		bytes += req->vol_seeds[i].size;
	}
	sup_vol_mounts list = {.v = all, .n = n};
	int rc = sup_volspec_mounts_ok(&list, err);
	rc = rc ?: sup_core_disk_fits(c, who, bytes, err);
	if (rc < 0)
		return rc;
	sup_op *op = pre_new(c, OP_VOLS, who, cb, ud, err);
	if (!op)
		return err->code;
	rc = sup_volseed_start(c->cfg.volumes, who->name, req->vol_seeds, req->nvol_seeds, vols_made,
			       op, &op->u.pre.vs, err);
	if (rc < 0) {
		free(op);
		return rc;
	}
	op->u.pre.req = *req;
	memset(req, 0, sizeof(*req));
	*opp = op;
	return 0;
}
