/* sup_snaps: see sup_snaps.h. */
#include "sup_snaps.h"

#include <errno.h>
#include <event2/event.h>
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
#include "sup_disk.h"
#include "sup_fsutil.h"
#include "sup_layer_tar.h"
#include "sup_log.h"
#include "sup_snap_store.h"
#include "sup_snaps_store_int.h"
#include "sup_token.h"
#include "sup_volumes.h"

#define COPY_TIMEOUT_MS 120000u
#define SWEEP_EVERY_S 30
#define LAYER_PREFIX "fk-"

typedef enum { KIND_TAKE = 1, KIND_FORK } op_kind;

/* A volume of the source carried by a snapshot or fork: its files' host
 * folder (read while the source is frozen) and the archive made of it. */
typedef struct op_vol {
	char root[PATH_MAX];
	char staged[PATH_MAX];
} op_vol;

struct sup_snaps_op {
	sup_job job;
	sup_snaps *s;
	op_kind kind;
	bool cancelled;
	bool copying;      /* a fork's copy job is queued or running */
	void *ud;
	/* what the worker reads */
	sup_runc_box box;
	bool was_paused;   /* paused by its owner: frozen it stays */
	char id[48];       /* the snapshot's, or the fork layer's */
	char staged[PATH_MAX];
	char layer[PATH_MAX];
	op_vol *vols;      /* include_volumes: nvols of them (else NULL) */
	unsigned nvols;
	int rc;
	sbx_err err;
	/* take */
	sup_snaps_cb cb;
	sup_catalog_snap row;
	/* fork */
	sup_snaps_fork_cb fork_cb;
	const sup_tenant *who;
	sup_create_req tmpl;
	sup_tenant owner;  /* who's name alone: its forks' deletes after the request ended */
	unsigned count, answered, failed;
	unsigned filling;  /* fill jobs queued or running: the op outlives a cancel */
	unsigned filled;   /* forks made in a made sandbox (the others: seeded) */
	bool starting;     /* the creates are being asked for: not finished meanwhile */
	sbx_err first_err;
	sup_op **creates;
	char (*ids)[SUP_ID_MAX];
	double freeze_ms, copy_ms;
	struct sup_snaps_op *next_busy; /* s->busy: layers forks are being made on */
	struct sup_snaps_op *next_live; /* s->live: its worker job not done yet */
};

struct sup_snaps {
	struct event_base *base;
	sup_snaps_cfg cfg;
	sup_snaps_op *busy;  /* forks in flight: their layers are not swept */
	sup_snaps_op *live;  /* jobs queued or running: one per sandbox at a time,
			      * or one's thaw would cut into the other's freeze */
	bool sweeping;
	bool stopped;        /* no sweep is started any more */
	struct event *sweep_timer;
	struct event *orphan_timer; /* the object store's orphan sweep */
	sup_snaps_orphans orphans;
	sup_snaps_fetched *fetched; /* archives downloaded for restores */
};

sup_snaps_orphans *sup_snaps_orphans_of(sup_snaps *s)
{
	return &s->orphans;
}

void sup_snaps_writing(const sup_snaps *s, void (*fn)(const char *id, void *ud), void *ud)
{
	for (const sup_snaps_op *op = s->live; op; op = op->next_live)
		if (op->kind == KIND_TAKE)
			fn(op->id, ud);
}

const sup_snaps_cfg *sup_snaps_cfg_of(const sup_snaps *s)
{
	return &s->cfg;
}

sup_snaps_fetched **sup_snaps_fetched_of(sup_snaps *s)
{
	return &s->fetched;
}

/* ---- helpers ---- */

static bool owns(const sup_tenant *who, const char *tenant)
{
	return who->admin || strcmp(who->name, tenant) == 0;
}

static void view_of(const sup_catalog_snap *r, sup_snap_view *v)
{
	memset(v, 0, sizeof(*v));
	snprintf(v->id, sizeof(v->id), "%s", r->id);
	snprintf(v->name, sizeof(v->name), "%s", r->name);
	snprintf(v->tenant, sizeof(v->tenant), "%s", r->tenant);
	snprintf(v->source, sizeof(v->source), "%s", r->source);
	snprintf(v->image, sizeof(v->image), "%s", r->image);
	snprintf(v->digest, sizeof(v->digest), "%s", r->digest);
	v->isolation = r->isolation;
	v->size = r->size;
	v->created_at = r->created_at;
	v->nvols = r->nvols < SUP_VOL_MAX_MOUNTS ? r->nvols : SUP_VOL_MAX_MOUNTS;
	for (unsigned i = 0; i < v->nvols; i++)
		v->vols[i] = (sup_snap_view_vol){.m = r->vols[i].m, .vol_size = r->vols[i].vol_size,
						 .size = r->vols[i].size};
}

/* Freeze box, run fn, thaw: the thaw runs whatever fn did. */
static int while_frozen(sup_snaps_op *op, int (*fn)(sup_snaps_op *op), double *frozen_ms)
{
	const sup_runc_cfg *rc = op->s->cfg.runc;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int r = sup_runc_freeze(rc, &op->box, true, &op->err);
	if (r < 0)
		return sbx_err_wrap(&op->err, "freeze sandbox %s", op->box.id);
	r = fn(op);
	sbx_err terr;
	/* a sandbox its owner paused is read as it is and left paused */
	int t = op->was_paused ? 0 : sup_runc_freeze(rc, &op->box, false, &terr);
	*frozen_ms = sbx_ms_since_f(&t0);
	if (t < 0) {
		sup_error("sandbox %s: thaw after a snapshot: %s", op->box.id, terr.msg);
		if (r == 0)
			r = sbx_err_set(&op->err, t, "%s", terr.msg);
	}
	return r;
}

static int upper_of(const sup_runc_box *box, char *out, sbx_err *err)
{
	if (snprintf(out, PATH_MAX, "%s/" SUP_DISK_UPPER, box->dir) >= PATH_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "sandbox %s: path too long", box->id);
	return 0;
}

/* ---- take ---- */

static void live_remove(sup_snaps *s, sup_snaps_op *op)
{
	for (sup_snaps_op **p = &s->live; *p; p = &(*p)->next_live)
		if (*p == op) {
			*p = op->next_live;
			return;
		}
}


/* The folder dir (the source's layer, or a volume's files) as the archive
 * staged (a new file). */
static int pack_dir(sup_snaps_op *op, const char *dir, const char *staged, const char *what)
{
	SBX_AUTO_CLOSE int up = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (up < 0)
		return sbx_err_sys(&op->err, -errno, "sandbox %s: %s", op->box.id, what);
	SBX_AUTO_CLOSE int out =
		open(staged, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return sbx_err_sys(&op->err, -errno, "%s %s: stage", op->kind == KIND_TAKE ? "snapshot" : "fork", op->id);
	sup_layer_tar_info info;
	int r = sup_layer_tar_pack(up, out, &info, &op->err);
	if (r < 0)
		return sbx_err_wrap(&op->err, "%s", what);
	if (info.skipped)
		sup_info("%s of %s: %llu socket(s) or device node(s) left out", op->id, what,
			 (unsigned long long)info.skipped);
	return 0;
}

/* The source's volumes, each as its archive (while it is frozen). */
static int pack_vols(sup_snaps_op *op)
{
	int r = 0;
	for (unsigned k = 0; r == 0 && k < op->nvols; k++)
		r = pack_dir(op, op->vols[k].root, op->vols[k].staged, "a volume");
	return r;
}

static void unstage_vols(sup_snaps_op *op)
{
	for (unsigned k = 0; k < op->nvols; k++)
		if (op->vols[k].staged[0])
			unlink(op->vols[k].staged);
}

static int pack_upper(sup_snaps_op *op)
{
	char upper[PATH_MAX];
	int r = upper_of(&op->box, upper, &op->err);
	r = r ?: pack_dir(op, upper, op->staged, "its layer");
	return r ?: pack_vols(op);
}

static void take_run(sup_job *job)
{
	sup_snaps_op *op = (sup_snaps_op *)job;
	sbx_err_clear(&op->err);
	double frozen = 0;
	op->rc = sup_snap_store_stage(op->s->cfg.store, op->id, op->staged, &op->err);
	if (op->rc == 0)
		op->rc = while_frozen(op, pack_upper, &frozen);
	if (op->rc < 0) {
		unlink(op->staged);
		unstage_vols(op);
		return;
	}
	sup_info("snapshot %s of %s: frozen %.1f ms (%u volume(s))", op->id, op->box.id, frozen,
		 op->nvols);
	op->rc = sup_snap_store_commit(op->s->cfg.store, &op->row, op->staged, &op->err);
}

static void take_done(sup_job *job)
{
	sup_snaps_op *op = (sup_snaps_op *)job;
	sup_snaps *s = op->s;
	live_remove(s, op);
	if (op->rc == 0 && sup_catalog_snap_put(s->cfg.catalog, &op->row, &op->err) < 0) {
		op->rc = op->err.code;
		sup_snaps_unstore(s, &op->row);
	}
	if (op->rc < 0)
		sup_warn("snapshot of %s: %s", op->box.id, op->err.msg);
	else
		sup_info("snapshot %s of %s: %llu bytes", op->id, op->box.id,
			 (unsigned long long)op->row.size);
	if (!op->cancelled) {
		sup_snap_view v;
		view_of(&op->row, &v);
		op->cb(op->rc, op->rc == 0 ? &v : NULL, &op->err, op->ud);
	}
	free(op->vols);
	free(op);
}

/* The sandbox who may snapshot or fork: RUNNING, and its box. */
static const sup_sandbox *running(sup_snaps *s, const sup_tenant *who, const char *id, sbx_err *err)
{
	const sup_sandbox *sb = sup_core_find(s->cfg.core, who, id, err);
	if (sb && sb->state != SUP_SB_RUNNING) {
		sbx_err_set(err, -EBUSY, "sandbox %s is %s", sb->id, sup_sb_state_name(sb->state));
		return NULL;
	}
	return sb;
}

/* Queue op's job; it is live (its sandbox taken) until its done(). */
static void submit(sup_snaps *s, sup_snaps_op *op)
{
	op->next_live = s->live;
	s->live = op;
	sup_workers_submit(s->cfg.workers, &op->job, true);
}

/* An operation on sandbox id (who's, RUNNING, no other snapshot or fork of
 * it under way: *sb), its box copied for the worker. NULL with err set. */
static sup_snaps_op *new_op(sup_snaps *s, const sup_tenant *who, const char *id, op_kind kind,
			    void *ud, const sup_sandbox **sb, sbx_err *err)
{
	*sb = running(s, who, id, err);
	if (!*sb)
		return NULL;
	for (sup_snaps_op *o = s->live; o; o = o->next_live)
		if (strcmp(o->box.id, (*sb)->id) == 0) {
			sbx_err_set(err, -EBUSY, "a snapshot or fork of sandbox %s is under way", (*sb)->id);
			return NULL;
		}
	sup_snaps_op *op = calloc(1, sizeof(*op));
	if (!op) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	op->s = s;
	op->kind = kind;
	op->ud = ud;
	op->box = (*sb)->box;
	op->was_paused = (*sb)->paused;
	return op;
}

static int new_id(const char *prefix, char *out, size_t cap, sbx_err *err)
{
	char hex[13];
	int r = sup_random_hex(hex, 6, err);
	if (r < 0)
		return r;
	snprintf(out, cap, "%s%s", prefix, hex);
	return 0;
}

/* include_volumes: what the source mounts, into op->vols (each with its
 * archive's staged path: stage(op, k, out)) and row's volumes (when row). */
static int carry_vols(sup_snaps *s, sup_snaps_op *op, const sup_sandbox *sb,
		      int (*stage)(sup_snaps *s, sup_snaps_op *op, unsigned k, char *out, sbx_err *err),
		      sup_catalog_snap *row, sbx_err *err)
{
	sup_volumes *vs = sup_core_volumes(s->cfg.core);
	sup_vol_mount m[SUP_VOL_MAX_MOUNTS];
	size_t n = vs ? sup_volumes_of(vs, sb->id, m, SUP_VOL_MAX_MOUNTS) : 0;
	if (n > SUP_VOL_MAX_MOUNTS)
		n = SUP_VOL_MAX_MOUNTS;
	if (n == 0)
		return 0;
	op->vols = calloc(n, sizeof(*op->vols));
	if (!op->vols)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	op->nvols = (unsigned)n;
	for (unsigned k = 0; k < n; k++) {
		uint64_t size = 0;
		int r = sup_volumes_root(vs, sb->tenant, m[k].name, op->vols[k].root, &size, err);
		r = r ?: stage(s, op, k, op->vols[k].staged, err);
		if (r < 0)
			return sbx_err_wrap(err, "volume %s", m[k].name);
		if (row) {
			row->vols[k].m = m[k];
			row->vols[k].vol_size = size;
		}
	}
	if (row)
		row->nvols = (unsigned)n;
	return 0;
}

static int take_stage(sup_snaps *s, sup_snaps_op *op, unsigned k, char *out, sbx_err *err)
{
	return sup_snap_store_vol_stage(s->cfg.store, op->id, k, out, err);
}

int sup_snaps_take(sup_snaps *s, const sup_tenant *who, const char *id, const char *name,
		   bool include_volumes, sup_snaps_cb cb, void *ud, sup_snaps_op **opp,
		   sbx_err *err)
{
	*opp = NULL;
	if (strlen(name) > SUP_SNAPS_NAME_MAX)
		return sbx_err_set(err, -EINVAL, "field \"name\": longer than %d bytes", SUP_SNAPS_NAME_MAX);
	const sup_sandbox *sb;
	sup_snaps_op *op = new_op(s, who, id, KIND_TAKE, ud, &sb, err);
	if (!op)
		return err->code;
	sup_catalog_snap *row = &op->row;
	int r = new_id("sn-", op->id, sizeof(op->id), err);
	snprintf(row->id, sizeof(row->id), "%s", op->id);
	if (r == 0 && include_volumes)
		r = carry_vols(s, op, sb, take_stage, row, err);
	if (r < 0) {
		free(op->vols);
		free(op);
		return r;
	}
	op->cb = cb;
	snprintf(row->id, sizeof(row->id), "%s", op->id);
	snprintf(row->name, sizeof(row->name), "%s", name);
	snprintf(row->tenant, sizeof(row->tenant), "%s", sb->tenant);
	snprintf(row->source, sizeof(row->source), "%s", sb->id);
	snprintf(row->image, sizeof(row->image), "%s", sup_pools_image_of(sb));
	snprintf(row->digest, sizeof(row->digest), "%s", sup_pools_digest_of(sb));
	row->isolation = sup_pools_isolation_of(sb);
	row->created_at = (int64_t)time(NULL);
	op->job.run = take_run;
	op->job.done = take_done;
	submit(s, op);
	*opp = op;
	return 0;
}


/* ---- read, list, delete ---- */

int sup_snaps_get(sup_snaps *s, const sup_tenant *who, const char *snap_id, sup_snap_view *out,
		  sbx_err *err)
{
	SBX_AUTO_FREE sup_catalog_snap *row = malloc(sizeof(*row));
	if (!row)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int r = sup_snap_store_check_id(snap_id, err);
	r = r ?: sup_catalog_snap_get(s->cfg.catalog, snap_id, row, err);
	if (r == 0 && !owns(who, row->tenant))
		r = sbx_err_set(err, -ENOENT, "no snapshot %.64s", snap_id);
	if (r == 0)
		view_of(row, out);
	return r;
}

typedef struct list_ctx {
	void (*fn)(const sup_snap_view *v, void *ud);
	void *ud;
	sup_snap_view *v;
} list_ctx;

static void list_one(const sup_catalog_snap *row, void *ud)
{
	list_ctx *l = ud;
	view_of(row, l->v);
	l->fn(l->v, l->ud);
}

int sup_snaps_list(sup_snaps *s, const sup_tenant *who,
		   void (*fn)(const sup_snap_view *snap, void *ud), void *ud, sbx_err *err)
{
	SBX_AUTO_FREE sup_snap_view *v = malloc(sizeof(*v));
	if (!v)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	list_ctx l = {.fn = fn, .ud = ud, .v = v};
	return sup_catalog_snap_each(s->cfg.catalog, who->admin ? NULL : who->name, list_one, &l, err);
}

int sup_snaps_delete(sup_snaps *s, const sup_tenant *who, const char *snap_id, sbx_err *err)
{
	SBX_AUTO_FREE sup_snap_view *v = malloc(sizeof(*v));
	SBX_AUTO_FREE sup_catalog_snap *row = malloc(sizeof(*row));
	if (!v || !row)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int r = sup_snaps_get(s, who, snap_id, v, err);
	r = r ?: sup_catalog_snap_get(s->cfg.catalog, snap_id, row, err);
	r = r ?: sup_catalog_snap_remove(s->cfg.catalog, snap_id, err);
	if (r < 0)
		return r;
	sbx_err e;
	if (sup_snap_store_remove(s->cfg.store, row, &e) < 0)
		sup_warn("snapshot %s: %s", snap_id, e.msg);
	return 0;
}

/* ---- restore ---- */

int sup_snaps_seed(sup_snaps *s, const sup_tenant *who, sup_create_req *req, sbx_err *err)
{
	if (!s)
		return sbx_err_set(err, -EINVAL, "field \"snapshot\": this supervisor keeps no snapshots");
	SBX_AUTO_FREE sup_snap_view *v = calloc(1, sizeof(*v));
	SBX_AUTO_FREE sup_runc_seed *seed = calloc(1, sizeof(*seed));
	if (!v || !seed)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int r = sup_snaps_get(s, who, req->snapshot, v, err);
	if (r < 0)
		return sbx_err_wrap(err, "field \"snapshot\"");
	if (req->image && strcmp(req->image, v->image) != 0 && strcmp(req->image, v->digest) != 0)
		return sbx_err_set(err, -EINVAL,
				   "field \"image\": snapshot %s is of image \"%.200s\", not \"%.200s\"",
				   v->id, v->image, req->image);
	r = sup_snaps_archive_of(s, v->id, seed->archive, err);
	if (r < 0)
		return r;
	/* the volumes it carries: made by the create (sup_core_create) */
	SBX_AUTO_FREE sup_vol_seed *vs = v->nvols ? calloc(v->nvols, sizeof(*vs)) : NULL;
	if (v->nvols && !vs)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	for (unsigned k = 0; k < v->nvols; k++) {
		vs[k].m = v->vols[k].m;
		vs[k].size = v->vols[k].vol_size;
		r = sup_snaps_vol_archive_of(s, v->id, k, vs[k].archive, err);
		if (r < 0)
			return r;
	}
	free(req->image);
	req->image = strdup(v->image);
	req->acquire = v->digest[0] ? strdup(v->digest) : NULL;
	if (!req->image || (v->digest[0] && !req->acquire))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	req->seed = sbx_steal_ptr(&seed);
	free(req->vol_seeds);
	req->nvol_seeds = v->nvols;
	req->vol_seeds = sbx_steal_ptr(&vs);
	return 0;
}

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
	unstage_vols(op);
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
	int r = upper_of(&op->box, upper, &op->err);
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
	return copy_upper(op) ?: pack_vols(op);
}

static void fork_copy_run(sup_job *job)
{
	sup_snaps_op *op = (sup_snaps_op *)job;
	sbx_err_clear(&op->err);
	if (mkdir(op->layer, 0755) < 0) {
		op->rc = sbx_err_sys(&op->err, -errno, "fork layer %s", op->layer);
		return;
	}
	op->rc = while_frozen(op, copy_frozen, &op->freeze_ms);
	/* read-only from now on: the forks' overlays only read it */
	if (op->rc == 0 && chmod(op->layer, 0555) < 0)
		op->rc = sbx_err_sys(&op->err, -errno, "fork layer %s", op->layer);
	if (op->rc < 0) {
		sbx_err ignored;
		sup_fs_rm_tree(op->layer, &ignored);
		unstage_vols(op);
	}
}

static void fork_copy_done(sup_job *job)
{
	sup_snaps_op *op = (sup_snaps_op *)job;
	sup_snaps *s = op->s;
	op->copying = false;
	live_remove(s, op);
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
	int r = carry_vols(s, op, sb, fork_stage, row, err);
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
	sup_snaps_op *op = new_op(s, who, id, KIND_FORK, ud, &sb, err);
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
	r = r ?: new_id(LAYER_PREFIX, op->id, sizeof(op->id), err);
	if (r == 0 && snprintf(op->layer, sizeof(op->layer), "%s/%s", s->cfg.store->layers, op->id) >=
			      (int)sizeof(op->layer))
		r = sbx_err_set(err, -ENAMETOOLONG, "fork layer path too long");
	/* like the source: its image (by the name its tenant may use, the
	 * digest acquired), isolation, limits and env */
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
		    sup_env_copy(&sb->env, &t->env) < 0)
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
	submit(s, op);
	*opp = op;
	return 0;
}

/* ---- sweep of fork layers ---- */

typedef struct sweep_job {
	sup_job job;
	sup_snaps *s;
	char layers[PATH_MAX];
	size_t nbusy;
	char (*busy)[48];
	unsigned removed;
} sweep_job;

static bool named_by_mounts(const char *path)
{
	SBX_AUTO_FCLOSE FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return true; /* unknown: keep it */
	SBX_AUTO_FREE char *line = NULL;
	size_t cap = 0;
	size_t n = strlen(path);
	while (getline(&line, &cap, f) > 0) {
		/* lowerdir=a:b:c among the super options, each ended by ':' ',' or
		 * the line's end */
		for (const char *p = strstr(line, path); p; p = strstr(p + 1, path))
			if (p[n] == ':' || p[n] == ',' || p[n] == '\n' || p[n] == '\0')
				return true;
	}
	return false;
}

static void sweep_run(sup_job *job)
{
	sweep_job *sj = (sweep_job *)job;
	SBX_AUTO_CLOSEDIR DIR *d = opendir(sj->layers);
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, LAYER_PREFIX, strlen(LAYER_PREFIX)) != 0)
			continue;
		bool busy = false;
		for (size_t i = 0; i < sj->nbusy && !busy; i++)
			busy = strcmp(sj->busy[i], de->d_name) == 0;
		char path[PATH_MAX];
		if (busy || snprintf(path, sizeof(path), "%s/%s", sj->layers, de->d_name) >= (int)sizeof(path))
			continue;
		if (named_by_mounts(path))
			continue;
		sbx_err e;
		chmod(path, 0755);
		if (sup_fs_rm_tree(path, &e) < 0)
			sup_warn("fork layer %s: %s", path, e.msg);
		else
			sj->removed++;
	}
}

static void sweep_done(sup_job *job)
{
	sweep_job *sj = (sweep_job *)job;
	sj->s->sweeping = false;
	if (sj->removed)
		sup_info("fork layers: %u no longer used, removed", sj->removed);
	free(sj->busy);
	free(sj);
}

void sup_snaps_sweep(sup_snaps *s)
{
	if (s->sweeping || s->stopped)
		return;
	sweep_job *sj = calloc(1, sizeof(*sj));
	size_t n = 0;
	for (sup_snaps_op *op = s->busy; op; op = op->next_busy)
		n++;
	if (sj)
		sj->busy = calloc(n ? n : 1, sizeof(*sj->busy));
	if (!sj || !sj->busy) {
		free(sj);
		return;
	}
	for (sup_snaps_op *op = s->busy; op; op = op->next_busy)
		snprintf(sj->busy[sj->nbusy++], sizeof(sj->busy[0]), "%s", op->id);
	sj->s = s;
	snprintf(sj->layers, sizeof(sj->layers), "%s", s->cfg.store->layers);
	sj->job.run = sweep_run;
	sj->job.done = sweep_done;
	s->sweeping = true;
	sup_workers_submit(s->cfg.workers, &sj->job, false);
}

static void on_sweep_timer(evutil_socket_t fd, short what, void *ud)
{
	(void)fd;
	(void)what;
	sup_snaps_sweep(ud);
}

static void on_orphan_timer(evutil_socket_t fd, short what, void *ud)
{
	(void)fd;
	(void)what;
	sup_snaps *s = ud;
	if (!s->stopped)
		sup_snaps_sweep_store(s);
}

sup_snaps *sup_snaps_new(struct event_base *base, const sup_snaps_cfg *cfg, sbx_err *err)
{
	sup_snaps *s = calloc(1, sizeof(*s));
	if (!s)
		return sbx_err_set(err, -ENOMEM, "snapshots"), NULL;
	s->base = base;
	s->cfg = *cfg;
	s->sweep_timer = event_new(base, -1, EV_PERSIST, on_sweep_timer, s);
	if (!s->sweep_timer) {
		free(s);
		sbx_err_set(err, -ENOMEM, "snapshots");
		return NULL;
	}
	struct timeval tv = {SWEEP_EVERY_S, 0};
	event_add(s->sweep_timer, &tv);
	sup_snaps_sweep_local(s); /* before any snapshot is taken: nothing is on its way */
	if (sup_snaps_remote(s)) {
		s->orphan_timer = event_new(base, -1, EV_PERSIST, on_orphan_timer, s);
		struct timeval every = {cfg->orphan_every_s, 0};
		if (s->orphan_timer && cfg->orphan_every_s)
			event_add(s->orphan_timer, &every);
		sup_snaps_sweep_store(s); /* the pass at start */
	}
	return s;
}

void sup_snaps_stop(sup_snaps *s)
{
	if (!s)
		return;
	s->stopped = true;
	event_del(s->sweep_timer);
	if (s->orphan_timer)
		event_del(s->orphan_timer);
}

void sup_snaps_free(sup_snaps *s)
{
	if (!s)
		return;
	event_free(s->sweep_timer);
	if (s->orphan_timer)
		event_free(s->orphan_timer);
	sup_snaps_fetched_free(&s->fetched);
	free(s);
}
