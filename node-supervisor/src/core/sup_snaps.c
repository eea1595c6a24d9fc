/* sup_snaps: see sup_snaps.h. The snapshots' owner: its state, the
 * snapshots read, listed, deleted and seeded into a restore, the sweep of
 * fork layers and its life. Taking one (sup_snaps_take.c), forking
 * (sup_snaps_fork.c) and the object store's side (sup_snaps_store.c) are
 * beside it. */
#include "sup_snaps.h"

#include <event2/event.h>
#include <dirent.h>
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
#include "sbx/grow.h"
#include "sup_catalog.h"
#include "sup_core_int.h"
#include "sup_disk.h"
#include "sup_fsutil.h"
#include "sup_layer_tar.h"
#include "sup_log.h"
#include "sup_snap_store.h"
#include "sup_snaps_int.h"
#include "sup_snaps_store_int.h"
#include "sup_token.h"
#include "sup_volumes.h"

/* The snapshots this node is writing now (their archives are up before
 * their manifests): the store's orphan sweep leaves them. */
static void writing(const void *owner, void (*fn)(const char *id, void *ud), void *ud)
{
	const sup_snaps *s = owner;
	for (const sup_snaps_op *op = s->live; op; op = op->next_live)
		if (op->kind == KIND_TAKE)
			fn(op->id, ud);
}

/* ---- the object store's side: its calls, through the owner ---- */

bool sup_snaps_remote(const sup_snaps *s)
{
	return s && sup_snaps_store_remote(&s->st);
}

int sup_snaps_refresh(sup_snaps *s, const char *snap_id, sup_snaps_done_cb cb, void *ud,
		      sup_snaps_job **job, sbx_err *err)
{
	return sup_snaps_store_refresh(&s->st, snap_id, cb, ud, job, err);
}

int sup_snaps_remove(sup_snaps *s, const sup_tenant *who, const char *snap_id,
		     sup_snaps_done_cb cb, void *ud, sup_snaps_job **job, sbx_err *err)
{
	int r = sup_snaps_store_remove(&s->st, who, snap_id, cb, ud, job, err);
	if (r == 1)
		r = sup_snaps_delete(s, who, snap_id, err) ?: 1;
	return r;
}

int sup_snaps_fetch(sup_snaps *s, const sup_tenant *who, const char *snap_id,
		    sup_snaps_done_cb cb, void *ud, sup_snaps_job **job, sbx_err *err)
{
	return sup_snaps_store_fetch(&s->st, who, snap_id, cb, ud, job, err);
}

void sup_snaps_fetched_drop(sup_snaps *s, const char *snap_id)
{
	sup_snaps_store_fetched_drop(&s->st, snap_id);
}

void sup_snaps_job_cancel(sup_snaps_job *job)
{
	sup_snaps_store_job_cancel(job);
}

void sup_snaps_metrics(sup_snaps *s, struct sup_prom *w)
{
	sup_snaps_store_metrics(&s->st, w);
}

/* The core's creates restore through these (sup_core_restorer). */
static const sup_core_restorer restorer = {
	.remote = sup_snaps_remote,
	.fetch = sup_snaps_fetch,
	.fetched_drop = sup_snaps_fetched_drop,
	.job_cancel = sup_snaps_job_cancel,
	.seed = sup_snaps_seed,
};

void sup_core_set_snaps(sup_core *c, sup_snaps *s)
{
	sup_core_set_restorer(c, &restorer, s);
}

/* ---- helpers ---- */

static bool owns(const sup_tenant *who, const char *tenant)
{
	return who->admin || strcmp(who->name, tenant) == 0;
}

void sup_snaps_view_of(const sup_catalog_snap *r, sup_snap_view *v)
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
		sup_snaps_view_of(row, out);
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
	sup_snaps_view_of(row, l->v);
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
	r = sup_snaps_store_archive_of(&s->st, v->id, seed->archive, err);
	if (r < 0)
		return r;
	/* the volumes it carries: made by the create (sup_core_create) */
	SBX_AUTO_FREE sup_vol_seed *vs = v->nvols ? calloc(v->nvols, sizeof(*vs)) : NULL;
	if (v->nvols && !vs)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	for (unsigned k = 0; k < v->nvols; k++) {
		vs[k].m = v->vols[k].m;
		vs[k].size = v->vols[k].vol_size;
		r = sup_snaps_store_vol_archive_of(&s->st, v->id, k, vs[k].archive, err);
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

/* ---- sweep of fork layers ---- */


/* The sweep looks only at the layers there were, and no fork was making,
 * when it was queued (on the loop thread): a fork that starts while the
 * sweep runs makes its layer before any sandbox mounts it, and the fuzz of
 * it_openapi found such a layer removed under it (503). */
#define SWEEP_MAX_LAYERS 65536

typedef struct sweep_job {
	sup_job job;
	sup_snaps *s;
	char layers[PATH_MAX];
	size_t ncand;
	char (*cand)[48];
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
	for (size_t i = 0; i < sj->ncand; i++) {
		char path[PATH_MAX];
		if (snprintf(path, sizeof(path), "%s/%s", sj->layers, sj->cand[i]) >= (int)sizeof(path))
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
	free(sj->cand);
	free(sj);
}

/* Whether a fork in flight makes the layer called name. */
static bool layer_busy(const sup_snaps *s, const char *name)
{
	for (const sup_snaps_op *op = s->busy; op; op = op->next_busy)
		if (strcmp(op->id, name) == 0)
			return true;
	return false;
}

void sup_snaps_sweep(sup_snaps *s)
{
	if (s->sweeping || s->stopped)
		return;
	SBX_AUTO_CLOSEDIR DIR *d = opendir(s->cfg.store->layers);
	sweep_job *sj = d ? calloc(1, sizeof(*sj)) : NULL;
	if (!sj)
		return;
	struct dirent *de;
	size_t cap = 0;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, LAYER_PREFIX, strlen(LAYER_PREFIX)) != 0 ||
		    strlen(de->d_name) >= sizeof(sj->cand[0]) || layer_busy(s, de->d_name))
			continue;
		if (sbx_grow(&sj->cand, &cap, sj->ncand, sizeof(*sj->cand), 16, SWEEP_MAX_LAYERS) < 0)
			break; /* the rest wait for the next sweep */
		snprintf(sj->cand[sj->ncand++], sizeof(sj->cand[0]), "%s", de->d_name);
	}
	if (!sj->ncand) {
		free(sj->cand);
		free(sj);
		return;
	}
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
		sup_snaps_store_sweep(&s->st, writing, s);
}

sup_snaps *sup_snaps_new(struct event_base *base, const sup_snaps_cfg *cfg, sbx_err *err)
{
	sup_snaps *s = calloc(1, sizeof(*s));
	if (!s)
		return sbx_err_set(err, -ENOMEM, "snapshots"), NULL;
	s->base = base;
	s->cfg = *cfg;
	s->st.catalog = cfg->catalog;
	s->st.store = cfg->store;
	s->st.workers = cfg->workers;
	s->st.orphan_age_s = cfg->orphan_age_s;
	s->sweep_timer = event_new(base, -1, EV_PERSIST, on_sweep_timer, s);
	if (!s->sweep_timer) {
		free(s);
		sbx_err_set(err, -ENOMEM, "snapshots");
		return NULL;
	}
	struct timeval tv = {SWEEP_EVERY_S, 0};
	event_add(s->sweep_timer, &tv);
	sup_snaps_store_sweep_local(&s->st); /* before any snapshot is taken: nothing is on its way */
	if (sup_snaps_remote(s)) {
		s->orphan_timer = event_new(base, -1, EV_PERSIST, on_orphan_timer, s);
		struct timeval every = {cfg->orphan_every_s, 0};
		if (s->orphan_timer && cfg->orphan_every_s)
			event_add(s->orphan_timer, &every);
		sup_snaps_store_sweep(&s->st, writing, s); /* the pass at start */
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
	sup_snaps_store_free(&s->st);
	free(s);
}
