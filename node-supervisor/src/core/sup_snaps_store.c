/* sup_snaps_store: see sup_snaps_store_int.h. */
#include "sup_snaps_store_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/grow.h"
#include "sup_catalog.h"
#include "sup_log.h"
#include "sup_metrics.h"
#include "sup_snap_store.h"

#define LISTED_MAX 100000u /* snapshots one listing of the store reads */
#define FRESH_MAX 1000u    /* new manifests read per listing; the rest next time */

typedef enum { JOB_ONE = 1, JOB_ALL, JOB_REMOVE, JOB_FETCH, JOB_SWEEP } job_kind;

#define SWEEP_REMOVE_MAX 256u /* orphans one pass removes; the rest next time */

typedef char id_buf[48];

struct sup_snaps_job {
	sup_job job;
	sup_snaps_store *s;
	job_kind kind;
	bool cancelled;
	sup_snaps_done_cb cb;
	void *ud;
	id_buf id;
	/* who asks (remove, fetch): another tenant's snapshot is not found */
	char tenant[SUP_TENANT_NAME_MAX + 1];
	bool admin;
	/* the snapshot's row: the catalog's (have_row) or its manifest's */
	bool have_row, found;
	sup_catalog_snap row;
	/* JOB_ALL: the catalog's rows of the store before, what the store lists,
	 * and the manifests of those the catalog lacked */
	id_buf *known, *listed;
	size_t nknown, nlisted, caplisted;
	sup_catalog_snap *fresh;
	size_t nfresh, capfresh;
	char path[PATH_MAX]; /* JOB_FETCH: the download */
	sup_snap_sweep sweep; /* JOB_SWEEP: known (j->known, sorted) and what it did */
	int rc;
	sbx_err err;
};

struct sup_snaps_fetched {
	id_buf id;
	char path[PATH_MAX]; /* and its volumes' beside it: path".v<k>" */
	unsigned nvols;
	unsigned refs;
	struct sup_snaps_fetched *next;
};

static const sup_snap_store *store_of(sup_snaps_store *s)
{
	return s->store;
}

static bool sees(const sup_snaps_job *j, const char *tenant)
{
	return j->admin || strcmp(j->tenant, tenant) == 0;
}

bool sup_snaps_store_remote(const sup_snaps_store *s)
{
	return s && sup_snap_store_remote(s->store);
}

/* ---- the catalog's side (loop) ---- */

/* A row of the store the catalog lacks is added; an id the store no
 * longer has loses its row of the store (a local row stays). */
static void mirror_one(sup_snaps_store *s, const char *id, const sup_catalog_snap *row)
{
	const sup_snaps_store *cfg = s;
	SBX_AUTO_FREE sup_catalog_snap *have = malloc(sizeof(*have));
	sbx_err e;
	if (!have)
		return;
	int r = sup_catalog_snap_get(cfg->catalog, id, have, &e);
	if (row && r == -ENOENT && sup_catalog_snap_put(cfg->catalog, row, &e) < 0)
		sup_warn("snapshot %s: recording it from the store: %s", id, e.msg);
	if (!row && r == 0 && strcmp(have->location, cfg->store->location) == 0 &&
	    sup_catalog_snap_remove(cfg->catalog, id, &e) < 0)
		sup_warn("snapshot %s: %s", id, e.msg);
}

typedef struct known_ctx {
	const char *location;
	id_buf *v;
	size_t n, cap;
	int rc;
} known_ctx;

static void add_known(const sup_catalog_snap *row, void *ud)
{
	known_ctx *k = ud;
	if (k->rc < 0 || strcmp(row->location, k->location) != 0)
		return;
	k->rc = sbx_grow(&k->v, &k->cap, k->n, sizeof(*k->v), 64, LISTED_MAX);
	if (k->rc == 0)
		snprintf(k->v[k->n++], sizeof(id_buf), "%s", row->id);
}

static int id_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static bool has_id(const id_buf *v, size_t n, const char *id)
{
	return n && bsearch(id, v, n, sizeof(*v), id_cmp) != NULL;
}

/* ---- the store's side (worker) ---- */

static int collect_id(void *ud, const char *id)
{
	sup_snaps_job *j = ud;
	int r = sbx_grow(&j->listed, &j->caplisted, j->nlisted, sizeof(*j->listed), 64, LISTED_MAX);
	if (r < 0)
		return r;
	snprintf(j->listed[j->nlisted++], sizeof(id_buf), "%s", id);
	return 0;
}

static void all_run(sup_snaps_job *j, const sup_snap_store *st)
{
	j->rc = sup_snap_store_ids(st, collect_id, j, &j->err);
	if (j->rc < 0)
		return;
	if (j->rc > 0) /* collect_id's own failure: memory, or past the bound */
		j->rc = sbx_err_set(&j->err, j->rc == -ENOSPC ? -E2BIG : -j->rc,
				    "over %u snapshots in the store", LISTED_MAX);
	for (size_t i = 0; j->rc == 0 && i < j->nlisted && j->nfresh < FRESH_MAX; i++) {
		if (has_id(j->known, j->nknown, j->listed[i]))
			continue;
		j->rc = sbx_grow(&j->fresh, &j->capfresh, j->nfresh, sizeof(*j->fresh), 8, FRESH_MAX);
		if (j->rc < 0) {
			sbx_err_set(&j->err, j->rc, "out of memory");
			return;
		}
		sbx_err e;
		int r = sup_snap_store_manifest(st, j->listed[i], &j->fresh[j->nfresh], &e);
		if (r == 0)
			j->nfresh++;
		else if (r == -EBADE || r == -ENOENT) /* not a manifest, or gone since: skipped */
			continue;
		else
			j->rc = sbx_err_set(&j->err, r, "%s", e.msg);
	}
	if (j->nlisted)
		qsort(j->listed, j->nlisted, sizeof(*j->listed), id_cmp);
}

/* The snapshot's row: the catalog's, or its manifest's; who's. */
static int resolve(sup_snaps_job *j, const sup_snap_store *st)
{
	if (!j->have_row) {
		int r = sup_snap_store_manifest(st, j->id, &j->row, &j->err);
		if (r < 0)
			return r;
		j->found = true;
	}
	if (!sees(j, j->row.tenant))
		return sbx_err_set(&j->err, -ENOENT, "no snapshot %s", j->id);
	return 0;
}

static void job_run(sup_job *job)
{
	sup_snaps_job *j = (sup_snaps_job *)job;
	const sup_snap_store *st = store_of(j->s);
	sbx_err_clear(&j->err);
	bool temp = false;
	switch (j->kind) {
	case JOB_ALL:
		all_run(j, st);
		break;
	case JOB_ONE:
		j->rc = sup_snap_store_manifest(st, j->id, &j->row, &j->err);
		j->found = j->rc == 0;
		if (j->rc == -ENOENT)
			j->rc = 0;
		break;
	case JOB_REMOVE:
		j->rc = resolve(j, st);
		j->rc = j->rc ?: sup_snap_store_remove(st, &j->row, &j->err);
		break;
	case JOB_FETCH:
		j->rc = resolve(j, st);
		j->rc = j->rc ?: sup_snap_store_fetch(st, &j->row, j->path, &temp, &j->err);
		break;
	case JOB_SWEEP:
		j->sweep.known = (const char (*)[48])j->known;
		j->sweep.nknown = j->nknown;
		j->rc = sup_snap_store_sweep(st, &j->sweep, &j->err);
		break;
	}
}

/* ---- done (loop) ---- */

/* A download and its volumes' go. */
static void unlink_fetched(const char *path, unsigned nvols)
{
	unlink(path);
	for (unsigned k = 0; k < nvols; k++) {
		char p[PATH_MAX + 16];
		snprintf(p, sizeof(p), "%s.v%u", path, k);
		unlink(p);
	}
}

static void keep_fetched(sup_snaps_store *s, sup_snaps_job *j)
{
	sup_snaps_fetched **list = &s->fetched;
	for (sup_snaps_fetched *f = *list; f; f = f->next)
		if (strcmp(f->id, j->id) == 0) {
			/* another create fetched it meanwhile: share that one */
			unlink_fetched(j->path, j->row.nvols);
			f->refs++;
			return;
		}
	sup_snaps_fetched *f = calloc(1, sizeof(*f));
	if (!f) {
		unlink_fetched(j->path, j->row.nvols);
		j->rc = sbx_err_set(&j->err, -ENOMEM, "out of memory");
		return;
	}
	snprintf(f->id, sizeof(f->id), "%s", j->id);
	snprintf(f->path, sizeof(f->path), "%s", j->path);
	f->nvols = j->row.nvols;
	f->refs = 1;
	f->next = *list;
	*list = f;
}

static void job_done(sup_job *job)
{
	sup_snaps_job *j = (sup_snaps_job *)job;
	sup_snaps_store *s = j->s;
	const sup_snaps_store *cfg = s;
	sbx_err e;
	switch (j->kind) {
	case JOB_ALL:
		if (j->rc < 0)
			break;
		for (size_t i = 0; i < j->nfresh; i++)
			mirror_one(s, j->fresh[i].id, &j->fresh[i]);
		for (size_t i = 0; i < j->nknown; i++)
			if (!has_id(j->listed, j->nlisted, j->known[i]))
				mirror_one(s, j->known[i], NULL);
		break;
	case JOB_ONE:
		if (j->rc == 0)
			mirror_one(s, j->id, j->found ? &j->row : NULL);
		break;
	case JOB_REMOVE:
		if (j->rc == 0 && j->have_row && sup_catalog_snap_remove(cfg->catalog, j->id, &e) < 0)
			sup_warn("snapshot %s: %s", j->id, e.msg);
		if (j->rc == 0)
			sup_info("snapshot %s: removed from %s", j->id, cfg->store->location);
		break;
	case JOB_FETCH:
		if (j->found) /* a manifest read: its row is this node's now too */
			mirror_one(s, j->id, &j->row);
		if (j->rc == -ENOENT && j->have_row) /* gone from the store meanwhile */
			mirror_one(s, j->id, NULL);
		if (j->rc == 0 && j->cancelled)
			unlink_fetched(j->path, j->row.nvols);
		else if (j->rc == 0)
			keep_fetched(s, j);
		break;
	case JOB_SWEEP: {
		sup_snaps_orphans *o = &s->orphans;
		o->running = false;
		o->passes++;
		if (j->rc < 0) {
			o->failed++;
			break;
		}
		o->removed += j->sweep.removed;
		o->left = j->sweep.orphans - j->sweep.removed;
		o->aborted += j->sweep.aborted;
		o->uploads_left = j->sweep.uploads - j->sweep.aborted;
		if (j->sweep.orphans)
			sup_info("snapshot store %s: %u orphaned archive(s) removed, %u left (younger "
				 "than %u s, or past a pass's %u)",
				 cfg->store->location, j->sweep.removed, o->left, j->sweep.min_age_s,
				 SWEEP_REMOVE_MAX);
		if (j->sweep.uploads)
			sup_info("snapshot store %s: %u unfinished upload(s) aborted, %u left (younger "
				 "than %u s, or past a pass's %u)",
				 cfg->store->location, j->sweep.aborted, o->uploads_left,
				 j->sweep.min_age_s, SWEEP_REMOVE_MAX);
		if (j->sweep.uploads_unlisted && !o->unlisted_told)
			sup_warn("snapshot store %s: the store does not list multipart uploads (501 "
				 "NotImplemented): unfinished uploads are not swept here (a lifecycle "
				 "rule AbortIncompleteMultipartUpload on the bucket does it)",
				 cfg->store->location);
		o->unlisted_told = o->unlisted_told || j->sweep.uploads_unlisted;
		break;
	}
	}
	if (j->rc < 0 && j->rc != -ENOENT)
		sup_warn("snapshot store: %s", j->err.msg);
	if (!j->cancelled)
		j->cb(j->rc, &j->err, j->ud);
	free(j->known);
	free(j->listed);
	free(j->fresh);
	free(j);
}

/* ---- the calls ---- */

static sup_snaps_job *job_new(sup_snaps_store *s, job_kind kind, const sup_tenant *who,
			      const char *snap_id, sup_snaps_done_cb cb, void *ud, sbx_err *err)
{
	sup_snaps_job *j = calloc(1, sizeof(*j));
	if (!j) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	j->s = s;
	j->kind = kind;
	j->cb = cb;
	j->ud = ud;
	if (snap_id)
		snprintf(j->id, sizeof(j->id), "%s", snap_id);
	if (who) {
		snprintf(j->tenant, sizeof(j->tenant), "%s", who->name);
		j->admin = who->admin;
	}
	j->job.run = job_run;
	j->job.done = job_done;
	return j;
}

static int submit(sup_snaps_store *s, sup_snaps_job *j, sup_snaps_job **job)
{
	sup_workers_submit(s->workers, &j->job, true);
	*job = j;
	return 0;
}

int sup_snaps_store_refresh(sup_snaps_store *s, const char *snap_id, sup_snaps_done_cb cb, void *ud,
		      sup_snaps_job **job, sbx_err *err)
{
	*job = NULL;
	if (!sup_snaps_store_remote(s))
		return 1;
	int r = snap_id ? sup_snap_store_check_id(snap_id, err) : 0;
	if (r < 0)
		return r;
	sup_snaps_job *j = job_new(s, snap_id ? JOB_ONE : JOB_ALL, NULL, snap_id, cb, ud, err);
	if (!j)
		return err->code;
	if (!snap_id) {
		const sup_snaps_store *cfg = s;
		known_ctx k = {.location = cfg->store->location};
		r = sup_catalog_snap_each(cfg->catalog, NULL, add_known, &k, err);
		if (r == 0 && k.rc < 0)
			r = sbx_err_set(err, k.rc, "over %u snapshots in the catalog", LISTED_MAX);
		if (r < 0) {
			free(k.v);
			free(j);
			return r;
		}
		if (k.n)
			qsort(k.v, k.n, sizeof(*k.v), id_cmp);
		j->known = k.v;
		j->nknown = k.n;
	}
	return submit(s, j, job);
}

/* The catalog's row of snap_id if it has one (*have), who's; -ENOENT
 * another tenant's. */
static int row_of(sup_snaps_store *s, const sup_tenant *who, const char *snap_id, sup_catalog_snap *row,
		  bool *have, sbx_err *err)
{
	int r = sup_snap_store_check_id(snap_id, err);
	r = r ?: sup_catalog_snap_get(s->catalog, snap_id, row, err);
	*have = r == 0;
	if (r == 0 && !who->admin && strcmp(who->name, row->tenant) != 0)
		return sbx_err_set(err, -ENOENT, "no snapshot %.64s", snap_id);
	return r == -ENOENT ? 0 : r;
}

/* A job on snap_id's row (the catalog's if it has one), or 1: a local
 * snapshot, or no object store. */
static int row_job(sup_snaps_store *s, job_kind kind, const sup_tenant *who, const char *snap_id,
		   sup_snaps_done_cb cb, void *ud, sup_snaps_job **job, sbx_err *err)
{
	*job = NULL;
	SBX_AUTO_FREE sup_catalog_snap *row = malloc(sizeof(*row));
	if (!row)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	bool have = false;
	int r = row_of(s, who, snap_id, row, &have, err);
	if (r < 0)
		return r;
	if (!sup_snaps_store_remote(s) || (have && !row->location[0]))
		return 1;
	sup_snaps_job *j = job_new(s, kind, who, snap_id, cb, ud, err);
	if (!j)
		return err->code;
	j->have_row = have;
	if (have)
		j->row = *row;
	return submit(s, j, job);
}

int sup_snaps_store_remove(sup_snaps_store *s, const sup_tenant *who, const char *snap_id,
		     sup_snaps_done_cb cb, void *ud, sup_snaps_job **job, sbx_err *err)
{
	return row_job(s, JOB_REMOVE, who, snap_id, cb, ud, job, err);
}

int sup_snaps_store_fetch(sup_snaps_store *s, const sup_tenant *who, const char *snap_id,
		    sup_snaps_done_cb cb, void *ud, sup_snaps_job **job, sbx_err *err)
{
	*job = NULL;
	if (!sup_snaps_store_remote(s))
		return 1;
	/* downloaded for another create already: shared */
	for (sup_snaps_fetched *f = s->fetched; f; f = f->next)
		if (strcmp(f->id, snap_id) == 0) {
			SBX_AUTO_FREE sup_catalog_snap *row = malloc(sizeof(*row));
			bool have = false;
			int r = row ? row_of(s, who, snap_id, row, &have, err)
				    : sbx_err_set(err, -ENOMEM, "out of memory");
			if (r == 0 && !have)
				r = sbx_err_set(err, -ENOENT, "no snapshot %.64s", snap_id);
			if (r < 0)
				return r;
			f->refs++; /* the caller drops it as after a download */
			return 1;
		}
	return row_job(s, JOB_FETCH, who, snap_id, cb, ud, job, err);
}

static void unstored(int rc, const sbx_err *err, void *ud)
{
	(void)ud;
	if (rc < 0)
		sup_warn("snapshot store: an unrecorded snapshot stays: %s", err->msg);
}

void sup_snaps_store_unstore(sup_snaps_store *s, const sup_catalog_snap *row)
{
	sbx_err e;
	if (!row->location[0]) {
		if (sup_snap_store_remove(store_of(s), row, &e) < 0)
			sup_warn("snapshot %s: %s", row->id, e.msg);
		return;
	}
	sup_tenant admin = {.admin = true};
	sup_snaps_job *j = job_new(s, JOB_REMOVE, &admin, row->id, unstored, NULL, &e);
	if (!j) {
		sup_warn("snapshot %s: %s", row->id, e.msg);
		return;
	}
	j->have_row = true;
	j->row = *row;
	sup_snaps_job *ignored;
	submit(s, j, &ignored);
}

static void swept(int rc, const sbx_err *err, void *ud)
{
	(void)rc;
	(void)err;
	(void)ud; /* counted and logged by job_done */
}

static void add_writing(const char *id, void *ud)
{
	known_ctx *k = ud;
	if (k->rc == 0)
		k->rc = sbx_grow(&k->v, &k->cap, k->n, sizeof(*k->v), 64, LISTED_MAX);
	if (k->rc == 0)
		snprintf(k->v[k->n++], sizeof(id_buf), "%s", id);
}

void sup_snaps_store_sweep(sup_snaps_store *s, sup_snaps_each_id writing, const void *owner)
{
	sup_snaps_orphans *o = &s->orphans;
	if (!sup_snaps_store_remote(s) || o->running)
		return;
	const sup_snaps_store *cfg = s;
	sbx_err e;
	sup_snaps_job *j = job_new(s, JOB_SWEEP, NULL, NULL, swept, NULL, &e);
	/* what this node knows of: its rows of the store, and the snapshots
	 * it is writing (their archives are up before their manifests) */
	known_ctx k = {.location = cfg->store->location};
	int r = j ? sup_catalog_snap_each(cfg->catalog, NULL, add_known, &k, &e) : -ENOMEM;
	if (r == 0)
		writing(owner, add_writing, &k);
	if (r < 0 || k.rc < 0 || !j) {
		sup_warn("snapshot store: no orphan sweep: %s", r < 0 ? e.msg : "out of memory");
		free(k.v);
		free(j);
		return;
	}
	if (k.n)
		qsort(k.v, k.n, sizeof(*k.v), id_cmp);
	j->known = k.v;
	j->nknown = k.n;
	j->sweep.now = (int64_t)time(NULL);
	j->sweep.min_age_s = cfg->orphan_age_s;
	j->sweep.max_remove = SWEEP_REMOVE_MAX;
	o->running = true;
	sup_workers_submit(cfg->workers, &j->job, false);
}

void sup_snaps_store_sweep_local(sup_snaps_store *s)
{
	const sup_snaps_store *cfg = s;
	known_ctx k = {.location = ""};
	sbx_err e;
	unsigned removed = 0;
	int r = sup_catalog_snap_each(cfg->catalog, NULL, add_known, &k, &e);
	if (r == 0 && k.rc < 0)
		r = sbx_err_set(&e, k.rc, "over %u snapshots in the catalog", LISTED_MAX);
	if (r == 0 && k.n)
		qsort(k.v, k.n, sizeof(*k.v), id_cmp);
	if (r == 0)
		r = sup_snap_store_sweep_local(cfg->store, (const char (*)[48])k.v, k.n, &removed, &e);
	free(k.v);
	if (r < 0)
		sup_warn("snapshot store: no sweep of its folder: %s", e.msg);
	else if (removed)
		sup_info("snapshot store %s: %u archive(s) no snapshot names removed", cfg->store->dir,
			 removed);
}

void sup_snaps_store_metrics(sup_snaps_store *s, sup_prom *w)
{
	if (!sup_snaps_store_remote(s))
		return;
	const sup_snaps_orphans *o = &s->orphans;
	sup_prom_family(w, "sbx_snapshot_store_sweeps_total", "counter",
			"Passes of the snapshot store's orphan sweep, by result.");
	const char *ok[] = {"result", "ok", NULL}, *failed[] = {"result", "failed", NULL};
	sup_prom_sample(w, "sbx_snapshot_store_sweeps_total", ok, (double)(o->passes - o->failed));
	sup_prom_sample(w, "sbx_snapshot_store_sweeps_total", failed, (double)o->failed);
	sup_prom_family(w, "sbx_snapshot_store_orphans_removed_total", "counter",
			"Archives in the snapshot store that no snapshot named, removed by the sweep.");
	sup_prom_sample(w, "sbx_snapshot_store_orphans_removed_total", NULL, (double)o->removed);
	sup_prom_family(w, "sbx_snapshot_store_orphans", "gauge",
			"Orphaned archives the last pass saw and left (too young to judge).");
	sup_prom_sample(w, "sbx_snapshot_store_orphans", NULL, (double)o->left);
	sup_prom_family(w, "sbx_snapshot_store_uploads_aborted_total", "counter",
			"Unfinished multipart uploads of archives no snapshot named, aborted by the sweep.");
	sup_prom_sample(w, "sbx_snapshot_store_uploads_aborted_total", NULL, (double)o->aborted);
	sup_prom_family(w, "sbx_snapshot_store_uploads", "gauge",
			"Unfinished multipart uploads the last pass saw and left (too young to judge).");
	sup_prom_sample(w, "sbx_snapshot_store_uploads", NULL, (double)o->uploads_left);
}

void sup_snaps_store_fetched_drop(sup_snaps_store *s, const char *snap_id)
{
	for (sup_snaps_fetched **p = &s->fetched; *p; p = &(*p)->next) {
		sup_snaps_fetched *f = *p;
		if (strcmp(f->id, snap_id) != 0)
			continue;
		if (--f->refs == 0) {
			unlink_fetched(f->path, f->nvols);
			*p = f->next;
			free(f);
		}
		return;
	}
}

void sup_snaps_store_free(sup_snaps_store *s)
{
	sup_snaps_fetched **list = &s->fetched;
	while (*list) {
		sup_snaps_fetched *f = *list;
		*list = f->next;
		unlink_fetched(f->path, f->nvols);
		free(f);
	}
}

int sup_snaps_store_archive_of(sup_snaps_store *s, const char *id, char *out, sbx_err *err)
{
	const sup_snaps_store *cfg = s;
	SBX_AUTO_FREE sup_catalog_snap *row = malloc(sizeof(*row));
	if (!row)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int r = sup_catalog_snap_get(cfg->catalog, id, row, err);
	if (r < 0)
		return r;
	if (!row->location[0]) {
		bool temp;
		return sup_snap_store_fetch(cfg->store, row, out, &temp, err);
	}
	for (sup_snaps_fetched *f = s->fetched; f; f = f->next)
		if (strcmp(f->id, id) == 0) {
			snprintf(out, PATH_MAX, "%s", f->path);
			return 0;
		}
	if (strcmp(row->location, cfg->store->location) != 0)
		return sbx_err_set(err, -ENOENT,
				   "snapshot %s is kept in %s, which this supervisor does not read", id,
				   row->location);
	return sbx_err_set(err, -EAGAIN, "snapshot %s: its archive in %s is not fetched", id,
			   row->location);
}

int sup_snaps_store_vol_archive_of(sup_snaps_store *s, const char *id, unsigned k, char *out, sbx_err *err)
{
	char layer[PATH_MAX];
	int r = sup_snaps_store_archive_of(s, id, layer, err);
	if (r < 0)
		return r;
	for (sup_snaps_fetched *f = s->fetched; f; f = f->next)
		if (strcmp(f->id, id) == 0 && strcmp(f->path, layer) == 0) {
			if (k >= f->nvols)
				return sbx_err_set(err, -ENOENT, "snapshot %s: no volume %u", id, k);
			if (snprintf(out, PATH_MAX, "%s.v%u", f->path, k) >= PATH_MAX)
				return sbx_err_set(err, -ENAMETOOLONG, "snapshot store: path too long");
			return 0;
		}
	r = sup_snap_store_vol_path(store_of(s), id, k, out, err);
	if (r == 0 && access(out, R_OK) < 0)
		r = sbx_err_sys(err, -errno, "snapshot %s: its volume's archive", id);
	return r;
}

void sup_snaps_store_job_cancel(sup_snaps_job *job)
{
	job->cancelled = true;
}
