/* Snapshots and forks of running sandboxes: the operations behind
 * /v1/sandboxes/{id}/snapshots, /v1/snapshots and /v1/sandboxes/{id}/fork,
 * and the restore a create with "snapshot" makes.
 *
 * A snapshot is the sandbox's writable layer as an archive
 * (sup_layer_tar.h), taken on a worker thread while the sandbox is frozen
 * (sup_runc_freeze) and thawed right after, kept by the snapshot store
 * (sup_snap_store.h) and recorded in the catalog (whose row is the
 * snapshot: id, name, tenant, source, image). It belongs to the tenant of
 * its sandbox: another tenant's is not found. A restore is a seeded create
 * (sup_pools_acquire_seeded) on the snapshot's image whose new upper folder
 * is unpacked from the archive before the container starts.
 *
 * With include_volumes, a snapshot also carries the volumes its sandbox
 * mounts: each volume's files as an archive of its own (the same format),
 * read while the sandbox is frozen, kept by the store beside the layer's
 * and named in the row (step 8). A restore, and a fork with
 * include_volumes, make a new volume of the tenant for each (the source's
 * name and a random suffix, its size), unpack the archive into it and
 * mount it at the source's path in the source's mode (req->vol_seeds:
 * sup_core_create does that part); the source's volumes are only read.
 *
 * A fork copies the frozen source's upper folder once (cp -a, on a worker)
 * into a read-only layer <state>/layers/<fk-id>, then takes count sandboxes
 * of the source's image as any create does (ready ones from the pool
 * first) and, before anyone learns their ids, fills each one's fork slot
 * (a lower layer under its upper, empty until then) with hard links to
 * the layer's files (sup_runc_fill, on a worker): their files start as
 * the source's, their writes are their own (copied up). A sandbox whose
 * mounted tree does not show the fill, and every gVisor fork, is made
 * instead by a seeded cold create stacking the layer itself over the
 * image. A layer goes once no overlay mount names it (a sweep after forks
 * and deletes, and at start); filled slots hold links of their own.
 *
 * Owns the snapshot operations in flight and the fork layers; the archive
 * format is sup_layer_tar's, the files the store's, the rows the
 * catalog's, the sandboxes the core's and pools'. Loop thread only. */
#ifndef SUP_SNAPS_H
#define SUP_SNAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_core.h"
#include "sup_workers.h"

struct event_base;
struct sup_catalog;
struct sup_snap_store;
typedef struct sup_snaps sup_snaps;
typedef struct sup_snaps_op sup_snaps_op;

#define SUP_SNAPS_FORK_MAX 32
#define SUP_SNAPS_NAME_MAX 127

typedef struct sup_snaps_cfg {
	sup_core *core;
	const sup_runc_cfg *runc;
	sup_workers *workers;         /* the archive work runs here */
	struct sup_catalog *catalog;  /* required: a snapshot is its row */
	const struct sup_snap_store *store;
	/* the object store's orphan sweep: archives without a manifest at
	 * least orphan_age_s old go, a pass at start and every
	 * orphan_every_s (0: at start only) */
	unsigned orphan_age_s, orphan_every_s;
} sup_snaps_cfg;

/* A volume a snapshot carries, as the API shows it. */
typedef struct sup_snap_view_vol {
	sup_vol_mount m;   /* the source's volume, where and how it was mounted */
	uint64_t vol_size; /* the volume's size (a restore's new one is as big) */
	uint64_t size;     /* bytes of its archive */
} sup_snap_view_vol;

/* A snapshot as the API shows it. */
typedef struct sup_snap_view {
	char id[48];
	char name[SUP_SNAPS_NAME_MAX + 1];
	char tenant[128];
	char source[48];
	char image[4096];
	char digest[80];
	sup_isolation isolation;
	uint64_t size;
	int64_t created_at;
	unsigned nvols;  /* the volumes it carries */
	sup_snap_view_vol vols[SUP_VOL_MAX_MOUNTS];
} sup_snap_view;

sup_snaps *sup_snaps_new(struct event_base *base, const sup_snaps_cfg *cfg, sbx_err *err);
/* No sweep is started from now on (the supervisor is stopping: the
 * workers must run dry). */
void sup_snaps_stop(sup_snaps *s);
/* Every operation must have ended (the workers are idle). */
void sup_snaps_free(sup_snaps *s);

typedef void (*sup_snaps_cb)(int rc, const sup_snap_view *snap, const sbx_err *err,
			     void *ud);
/* Snapshot sandbox id (who's, RUNNING) as name (include_volumes: with
 * the volumes it mounts): cb with its row once the archives are in the
 * store. */
int sup_snaps_take(sup_snaps *s, const sup_tenant *who, const char *id, const char *name,
		   bool include_volumes, sup_snaps_cb cb, void *ud, sup_snaps_op **op,
		   sbx_err *err);
int sup_snaps_get(sup_snaps *s, const sup_tenant *who, const char *snap_id,
		  sup_snap_view *out, sbx_err *err);
/* who's snapshots (the admin's: all), oldest first. */
int sup_snaps_list(sup_snaps *s, const sup_tenant *who,
		   void (*fn)(const sup_snap_view *snap, void *ud), void *ud, sbx_err *err);
/* The row goes, then the archive; a restore that opened it reads on. */
int sup_snaps_delete(sup_snaps *s, const sup_tenant *who, const char *snap_id, sbx_err *err);

/* ids: the new sandboxes (valid during the call). On any failure the ones
 * made are deleted and rc < 0. */
typedef void (*sup_snaps_fork_cb)(int rc, const char *const *ids, size_t n, const sbx_err *err,
				  void *ud);
/* count (1..SUP_SNAPS_FORK_MAX) new sandboxes of who like sandbox id
 * (its image, isolation, limits and env; its network policy and MCP
 * servers are not carried), their files a copy of its own now
 * (include_volumes: each with new volumes, copies of the ones it mounts). */
int sup_snaps_fork(sup_snaps *s, const sup_tenant *who, const char *id, unsigned count,
		   bool include_volumes, sup_snaps_fork_cb cb, void *ud, sup_snaps_op **op,
		   sbx_err *err);

/* The requester went away: its callback will not run (the work finishes
 * and is kept: a snapshot is stored, forks are deleted). */
void sup_snaps_op_cancel(sup_snaps_op *op);

/* For sup_core_create: req->snapshot (who's) becomes req's image, acquired
 * image, seed and vol_seeds (the volumes it carries). -ENOENT an unknown
 * snapshot, -EINVAL an "image" that is not the snapshot's; s NULL:
 * -EINVAL. */
int sup_snaps_seed(sup_snaps *s, const sup_tenant *who, sup_create_req *req, sbx_err *err);

/* c's creates with "snapshot" restore from s (c's restorer filled: see
 * sup_core_restorer); the wiring's one call between the two. */
void sup_core_set_snaps(sup_core *c, sup_snaps *s);

/* Remove the fork layers no mount names (a worker job). */
void sup_snaps_sweep(sup_snaps *s);

/* The snapshot store's series (the orphan sweep's passes and removals). */
struct sup_prom;
void sup_snaps_metrics(sup_snaps *s, struct sup_prom *w);

/* ---- an object store (sup_snaps_store.c) ----
 * With --snapshot-store s3://... every node reading the bucket and prefix
 * sees the same snapshots: before a snapshot is read, listed, deleted or
 * restored the store is asked (a worker job) and the catalog's rows of it
 * brought up to date. Store failures are -EHOSTUNREACH (unreachable, 503)
 * and -EBADE (refused or failed, 502), a corrupt download -EILSEQ. */

typedef struct sup_snaps_job sup_snaps_job;
typedef void (*sup_snaps_done_cb)(int rc, const sbx_err *err, void *ud);

/* An object store is configured (s may be NULL: no). */
bool sup_snaps_remote(const sup_snaps *s);

/* The catalog brought up to date with the store: snap_id's manifest, or
 * (snap_id NULL) every manifest; cb then. 1 (cb not called): nothing to
 * wait for (no object store). */
int sup_snaps_refresh(sup_snaps *s, const char *snap_id, sup_snaps_done_cb cb, void *ud,
		      sup_snaps_job **job, sbx_err *err);

/* Delete who's snapshot snap_id: in an object store its objects go (the
 * manifest first), then its row, and cb runs; a local one goes at once
 * (sup_snaps_delete) and 1 is returned, cb not called. The store failing
 * leaves the snapshot whole. */
int sup_snaps_remove(sup_snaps *s, const sup_tenant *who, const char *snap_id,
		     sup_snaps_done_cb cb, void *ud, sup_snaps_job **job, sbx_err *err);

/* For a create restoring snap_id (who's): its manifest read and its
 * archive downloaded and checked (size, sha256) on a worker; cb then, and
 * sup_snaps_seed finds the archive until sup_snaps_fetched_drop(snap_id),
 * which the create calls once it is over (after cb's rc 0, or a return
 * of 1). 1 (cb not called): ready now (a local snapshot, no object store,
 * or an archive another create downloaded). */
int sup_snaps_fetch(sup_snaps *s, const sup_tenant *who, const char *snap_id,
		    sup_snaps_done_cb cb, void *ud, sup_snaps_job **job, sbx_err *err);
void sup_snaps_fetched_drop(sup_snaps *s, const char *snap_id);

/* The requester went away: cb will not run (what the job learnt is still
 * mirrored into the catalog; a download is removed). */
void sup_snaps_job_cancel(sup_snaps_job *job);

#endif
