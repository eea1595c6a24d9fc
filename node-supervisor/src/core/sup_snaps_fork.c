/* A fork: the frozen source's upper folder copied once into a read-only
 * layer, count sandboxes of its image taken as any create (sup_core_create)
 * and each one's fork slot filled with links to the layer, or a seeded
 * cold create stacking the layer where a fill does not show; on any
 * failure the ones made are deleted. The layer's end is the sweep's
 * (sup_snaps.c). */
#include "sup_snaps.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/clock.h"
#include "sup_catalog.h"
#include "sup_core_int.h"
#include "sup_core_secrets.h"
#include "sup_disk.h"
#include "sup_fsutil.h"
#include "sup_layer_tar.h"
#include "sup_log.h"
#include "sup_snap_store.h"
#include "sup_snaps_int.h"
#include "sup_snaps_store_int.h"
#include "sup_token.h"
#include "sup_volumes.h"

/* ---- fork ---- */

static void busy_remove(sup_snaps *s, sup_snaps_op *op)
{
	for (sup_snaps_op **p = &s->busy; *p; p = &(*p)->next_busy)
		if (*p == op) {
			*p = op->next_busy;
			return;
		}
}

static void fork_free(sup_snaps_op *op)
{
	busy_remove(op->s, op);
	sup_snaps_unstage_vols(op);
	free(op->vols);
	sup_create_req_free(&op->tmpl);
	free(op->creates);
	free(op->ids);
	free(op);
}

/* A fork deleted after a failure, and the volumes made for it, which go
 * once its container is (they stay mounted until then). */
typedef struct fork_gone {
	sup_snaps *s;
	char tenant[SUP_TENANT_NAME_MAX + 1];
	size_t n;
	sup_vol_mount m[];
} fork_gone;

static void vol_deleted(int rc, const sup_volume_view *view, const sbx_err *err, void *ud)
{
	(void)view;
	(void)ud;
	if (rc < 0)
		sup_warn("fork: a volume made for a failed fork: %s", err->msg);
}

static void deleted(int rc, const sbx_err *err, void *ud)
{
	fork_gone *g = ud;
	if (rc < 0)
		sup_warn("fork: deleting a fork after a failure: %s", err->msg);
	sup_volumes *vs = g ? sup_core_volumes(g->s->cfg.core) : NULL;
	for (size_t i = 0; vs && i < g->n; i++) {
		sbx_err e;
		if (sup_volumes_delete(vs, g->tenant, g->m[i].name, vol_deleted, NULL, &e) < 0)
			sup_warn("fork: volume %s made for a failed fork: %s", g->m[i].name, e.msg);
	}
	free(g);
}

static void delete_made(sup_snaps_op *op);

/* Every create answered: the forks, or the first error (the made ones go). */
static void fork_finish(sup_snaps_op *op)
{
	sup_snaps *s = op->s;
	if (!op->cancelled && op->failed == 0) {
		const char *ids[SUP_SNAPS_FORK_MAX];
		for (unsigned i = 0; i < op->count; i++)
			ids[i] = op->ids[i];
		sup_info("fork of %s: %u sandbox(es), %u filled, source frozen %.1f ms (copy %.1f ms)",
			 op->box.id, op->count, op->filled, op->freeze_ms, op->copy_ms);
		op->fork_cb(0, ids, op->count, NULL, op->ud);
	} else {
		delete_made(op);
		if (!op->cancelled)
			op->fork_cb(op->first_err.code, NULL, 0, &op->first_err, op->ud);
	}
	fork_free(op);
	sup_snaps_sweep(s);
}

static void delete_one(sup_snaps_op *op, unsigned i)
{
	sup_op *d;
	sbx_err e;
	/* the volumes made for it go after it */
	sup_volumes *vs = sup_core_volumes(op->s->cfg.core);
	size_t n = vs && op->nvols ? sup_volumes_of(vs, op->ids[i], NULL, 0) : 0;
	fork_gone *g = n ? calloc(1, sizeof(*g) + n * sizeof(g->m[0])) : NULL;
	if (g) {
		g->s = op->s;
		snprintf(g->tenant, sizeof(g->tenant), "%s", op->owner.name);
		g->n = sup_volumes_of(vs, op->ids[i], g->m, n);
	}
	if (sup_core_delete(op->s->cfg.core, &op->owner, op->ids[i], deleted, g, &d, &e) < 0) {
		sup_warn("fork: %s", e.msg);
		free(g);
	}
	op->ids[i][0] = '\0';
}

/* The made forks go. */
static void delete_made(sup_snaps_op *op)
{
	for (unsigned i = 0; i < op->count; i++)
		if (op->ids[i][0])
			delete_one(op, i);
}

/* A cancelled fork with no job left: what it made goes, and it. */
static void fork_abandon(sup_snaps_op *op)
{
	delete_made(op);
	sup_snaps *s = op->s;
	fork_free(op);
	sup_snaps_sweep(s);
}

void sup_snaps_op_cancel(sup_snaps_op *op)
{
	op->cancelled = true;
	if (op->kind != KIND_FORK || op->copying)
		return; /* the job's done() frees it */
	for (unsigned i = 0; i < op->count; i++)
		if (op->creates[i]) {
			sup_op_cancel(op->creates[i]);
			op->creates[i] = NULL;
		}
	/* a sandbox being filled goes after its fill (the last one's done()) */
	if (op->filling == 0)
		fork_abandon(op);
}

/* One fork's create: into a made sandbox whose fork slot is then filled
 * (runc sandboxes: a pooled one when one is ready), or seeded with the
 * layer (a cold create that mounts it: gVisor's, and any whose fill
 * failed). */
typedef struct fork_slot {
	sup_job job;       /* the fill, on a worker */
	sup_snaps_op *op;
	unsigned i;
	bool seeded;
	sup_runc_box box;  /* what the fill reads */
	int rc;
	sbx_err err;
} fork_slot;

static void fork_start(sup_snaps_op *op, unsigned i, bool seeded);

/* Fork i is answered: made (ids[i]) or failed with err. */
static void fork_answered(sup_snaps_op *op, int rc, const sbx_err *err)
{
	op->answered++;
	if (rc < 0 && op->failed++ == 0)
		op->first_err = *err;
	if (op->answered == op->count && !op->starting)
		fork_finish(op);
}

/* Fork i's sandbox goes and a seeded create stands in for it. */
static void fork_fallback(sup_snaps_op *op, unsigned i, const sbx_err *why)
{
	sup_info("fork of %s: sandbox %s not filled, made cold instead: %s", op->box.id, op->ids[i],
		 why->msg);
	delete_one(op, i);
	fork_start(op, i, true);
}

static void fill_run(sup_job *job)
{
	fork_slot *slot = (fork_slot *)job;
	sbx_err_clear(&slot->err);
	slot->rc = sup_runc_fill(&slot->box, slot->op->layer, &slot->err);
}

static void fill_done(sup_job *job)
{
	fork_slot *slot = (fork_slot *)job;
	sup_snaps_op *op = slot->op;
	unsigned i = slot->i;
	int rc = slot->rc;
	sbx_err err = slot->err;
	free(slot);
	op->filling--;
	if (op->cancelled) {
		if (op->filling == 0)
			fork_abandon(op);
		return;
	}
	if (rc < 0) {
		fork_fallback(op, i, &err);
		return;
	}
	op->filled++;
	fork_answered(op, 0, NULL);
}

static void fork_created(int rc, const sup_sandbox_view *v, const sbx_err *err, void *ud)
{
	fork_slot *slot = ud;
	sup_snaps_op *op = slot->op;
	unsigned i = slot->i;
	op->creates[i] = NULL;
	if (rc == 0)
		snprintf(op->ids[i], sizeof(op->ids[i]), "%s", v->id);
	if (rc < 0 || slot->seeded) {
		free(slot);
		fork_answered(op, rc, err);
		return;
	}
	/* not handed to anyone yet: its files are put in place before the
	 * requester learns its id */
	sbx_err e;
	const sup_sandbox *sb = sup_core_find(op->s->cfg.core, op->who, v->id, &e);
	if (!sb) {
		free(slot);
		fork_fallback(op, i, &e);
		return;
	}
	slot->box = sb->box;
	sup_core_mark_forked(op->s->cfg.core, v->id);
	slot->job.run = fill_run;
	slot->job.done = fill_done;
	op->filling++;
	sup_workers_submit(op->s->cfg.workers, &slot->job, true);
}

/* What each fork's create asks: the template's fields. */
static int tmpl_copy(const sup_create_req *t, sup_create_req *req, sbx_err *err)
{
	req->image = strdup(t->image);
	req->acquire = t->acquire ? strdup(t->acquire) : NULL;
	req->isolation = t->isolation;
	req->resources = t->resources;
	req->given = t->given;
	req->timeout_s = t->timeout_s;
	req->vol_seeds = t->nvol_seeds ? calloc(t->nvol_seeds, sizeof(*req->vol_seeds)) : NULL;
	if (!req->image || (t->acquire && !req->acquire) || (t->nvol_seeds && !req->vol_seeds) ||
	    sup_env_copy(&t->env, &req->env) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	req->nvol_seeds = t->nvol_seeds;
	if (t->nvol_seeds)
		memcpy(req->vol_seeds, t->vol_seeds, t->nvol_seeds * sizeof(*req->vol_seeds));
	return 0;
}

/* Ask for fork i's sandbox; a create that cannot start answers it. */
static void fork_start(sup_snaps_op *op, unsigned i, bool seeded)
{
	sbx_err e;
	sup_create_req req = {0};
	fork_slot *slot = calloc(1, sizeof(*slot));
	int r = slot ? tmpl_copy(&op->tmpl, &req, &e) : sbx_err_set(&e, -ENOMEM, "out of memory");
	if (r == 0 && seeded) {
		req.seed = calloc(1, sizeof(*req.seed));
		if (req.seed)
			snprintf(req.seed->layer, sizeof(req.seed->layer), "%s", op->layer);
		else
			r = sbx_err_set(&e, -ENOMEM, "out of memory");
	}
	if (r == 0 && slot) {
		*slot = (fork_slot){.op = op, .i = i, .seeded = seeded};
		r = sup_core_create(op->s->cfg.core, op->who, &req, fork_created, slot, &op->creates[i], &e);
	}
	sup_create_req_free(&req);
	if (r < 0) {
		free(slot);
		fork_answered(op, r, &e);
	}
}

static int copy_upper(sup_snaps_op *op)
{
	char upper[PATH_MAX + 4];
	int r = sup_snaps_upper_of(&op->box, upper, &op->err);
	if (r < 0)
		return r;
	strcat(upper, "/.");
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* cp -a keeps what the overlay reads in a lower layer: whiteouts (0/0
	 * devices), the opaque xattrs, modes, owners, hard links, sparse files */
	const char *argv[] = {"cp", "-a", "--sparse=always", upper, op->layer, NULL};
	char errout[256] = "";
	sup_runc_cmd c = {.argv = argv, .stdout_fd = -1, .stderr_fd = -1, .errout = errout,
			  .errout_cap = sizeof(errout), .timeout_ms = COPY_TIMEOUT_MS};
	r = sup_runc_cmd_run(&c, &op->err);
	op->copy_ms = sbx_ms_since_f(&t0);
	if (r > 0)
		r = sbx_err_set(&op->err, -EIO, "copy the layer of %s: cp exit %d: %s", op->box.id, r,
				errout);
	return r;
}

/* The layer copied, the volumes packed (the forks' volumes are unpacked
 * from those archives after the thaw). */
static int copy_frozen(sup_snaps_op *op)
{
	return copy_upper(op) ?: sup_snaps_pack_vols(op);
}

static void fork_copy_run(sup_job *job)
{
	sup_snaps_op *op = (sup_snaps_op *)job;
	sbx_err_clear(&op->err);
	if (mkdir(op->layer, 0755) < 0) {
		op->rc = sbx_err_sys(&op->err, -errno, "fork layer %s", op->layer);
		return;
	}
	op->rc = sup_snaps_while_frozen(op, copy_frozen, &op->freeze_ms);
	/* read-only from now on: the forks' overlays only read it */
	if (op->rc == 0 && chmod(op->layer, 0555) < 0)
		op->rc = sbx_err_sys(&op->err, -errno, "fork layer %s", op->layer);
	if (op->rc < 0) {
		sbx_err ignored;
		sup_fs_rm_tree(op->layer, &ignored);
		sup_snaps_unstage_vols(op);
	}
}

static void fork_copy_done(sup_job *job)
{
	sup_snaps_op *op = (sup_snaps_op *)job;
	sup_snaps *s = op->s;
	op->copying = false;
	sup_snaps_live_remove(s, op);
	if (op->rc < 0 || op->cancelled) {
		if (!op->cancelled)
			op->fork_cb(op->rc, NULL, 0, &op->err, op->ud);
		fork_free(op);
		sup_snaps_sweep(s);
		return;
	}
	/* the creates of runc sandboxes take ready ones from the pool */
	bool seeded = op->tmpl.isolation != SUP_ISO_RUNC;
	op->starting = true;
	for (unsigned i = 0; i < op->count; i++)
		fork_start(op, i, seeded);
	op->starting = false;
	/* every create answered already (or none could start) */
	if (op->answered == op->count)
		fork_finish(op);
}

static int fork_stage(sup_snaps *s, sup_snaps_op *op, unsigned k, char *out, sbx_err *err)
{
	if (snprintf(out, PATH_MAX, "%s/%s.v%u.tar.zst", s->cfg.store->stage, op->id, k) >= PATH_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "fork %s: path too long", op->id);
	return 0;
}

/* Each fork's create makes its own copies of the source's volumes from
 * the archives the copy job packs (sup_core_create). */
static int fork_vol_seeds(sup_snaps *s, sup_snaps_op *op, const sup_sandbox *sb, sbx_err *err)
{
	SBX_AUTO_FREE sup_catalog_snap *row = calloc(1, sizeof(*row));
	if (!row)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int r = sup_snaps_carry_vols(s, op, sb, fork_stage, row, err);
	if (r < 0 || !op->nvols)
		return r;
	sup_create_req *t = &op->tmpl;
	t->vol_seeds = calloc(op->nvols, sizeof(*t->vol_seeds));
	if (!t->vol_seeds)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	t->nvol_seeds = op->nvols;
	for (unsigned k = 0; k < op->nvols; k++) {
		t->vol_seeds[k].m = row->vols[k].m;
		t->vol_seeds[k].size = row->vols[k].vol_size;
		snprintf(t->vol_seeds[k].archive, sizeof(t->vol_seeds[k].archive), "%s",
			 op->vols[k].staged);
	}
	return 0;
}

int sup_snaps_fork(sup_snaps *s, const sup_tenant *who, const char *id, unsigned count,
		   bool include_volumes, sup_snaps_fork_cb cb, void *ud, sup_snaps_op **opp,
		   sbx_err *err)
{
	*opp = NULL;
	if (count < 1 || count > SUP_SNAPS_FORK_MAX)
		return sbx_err_set(err, -EINVAL, "field \"count\": want 1 to %d", SUP_SNAPS_FORK_MAX);
	const sup_sandbox *sb;
	sup_snaps_op *op = sup_snaps_new_op(s, who, id, KIND_FORK, ud, &sb, err);
	if (!op)
		return err->code;
	op->fork_cb = cb;
	op->who = who;
	snprintf(op->owner.name, sizeof(op->owner.name), "%s", who->name);
	op->owner.admin = who->admin;
	op->count = count;
	op->creates = calloc(count, sizeof(sup_op *));
	op->ids = calloc(count, sizeof(*op->ids));
	int r = op->creates && op->ids ? 0 : sbx_err_set(err, -ENOMEM, "out of memory");
	r = r ?: sup_snaps_new_id(LAYER_PREFIX, op->id, sizeof(op->id), err);
	if (r == 0 && snprintf(op->layer, sizeof(op->layer), "%s/%s", s->cfg.store->layers, op->id) >=
			      (int)sizeof(op->layer))
		r = sbx_err_set(err, -ENAMETOOLONG, "fork layer path too long");
	/* like the source: its image (by the name its tenant may use, the
	 * digest acquired), isolation, limits and env (never its secrets') */
	sup_create_req *t = &op->tmpl;
	if (r == 0) {
		t->image = strdup(sup_pools_image_of(sb));
		t->acquire = sup_pools_digest_of(sb)[0] ? strdup(sup_pools_digest_of(sb)) : NULL;
		t->isolation = sup_pools_isolation_of(sb);
		t->resources = sb->res;
		/* what is left of the source's lifetime */
		time_t now = time(NULL);
		t->timeout_s = sb->expires_at > now ? (unsigned)(sb->expires_at - now) : 1;
		t->given = SUP_RES_CPUS | SUP_RES_MEMORY | SUP_RES_PIDS | SUP_RES_DISK |
			   SUP_CREATE_GIVEN_ISOLATION;
		if (!t->image || (sup_pools_digest_of(sb)[0] && !t->acquire) ||
		    sup_core_secrets_plain_env(sb, &t->env) < 0)
			r = sbx_err_set(err, -ENOMEM, "out of memory");
	}
	if (r == 0 && include_volumes)
		r = fork_vol_seeds(s, op, sb, err);
	if (r < 0) {
		op->s = s;
		fork_free(op);
		return r;
	}
	op->next_busy = s->busy;
	s->busy = op;
	op->job.run = fork_copy_run;
	op->job.done = fork_copy_done;
	op->copying = true;
	sup_snaps_submit(s, op);
	*opp = op;
	return 0;
}
