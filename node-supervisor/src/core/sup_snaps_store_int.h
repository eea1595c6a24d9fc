/* The snapshot operations that wait on an object store (--snapshot-store
 * s3://...): reading a snapshot's manifest, listing the store, removing a
 * snapshot's objects and downloading its archive for a restore. Each runs
 * as a worker job (the store's calls block on the network; the loop never
 * does), and its done() mirrors what it learnt into the catalog: rows of
 * snapshots other nodes put in the store are added, rows whose manifest
 * has gone are removed, so the catalog's rows of the store follow it.
 *
 * Downloaded archives are kept, one per snapshot and counted, while the
 * creates that fetched them run (_fetch / _fetched_drop), and handed to a
 * restore's seed through sup_snaps_store_archive_of.
 *
 * Owns its jobs, the downloaded files and the orphan sweep's figures (all
 * in sup_snaps_store); the rows are the catalog's, the objects the store's.
 * Talks only to its owner, sup_snaps.c, which holds it and calls it (the
 * public calls of sup_snaps.h go through the owner): it calls nothing of
 * the owner's but what it is handed. Loop thread only. */
#ifndef SUP_SNAPS_STORE_H
#define SUP_SNAPS_STORE_H

#include "sup_catalog.h"
#include "sup_snaps.h"

typedef struct sup_snaps_fetched sup_snaps_fetched;

/* The object store's orphan sweep (sup_snap_store_sweep) as a worker job:
 * at start and every cfg->orphan_every_s, one pass at a time; its figures
 * for /metrics. */
typedef struct sup_snaps_orphans {
	bool running;
	uint64_t passes, failed, removed;
	unsigned left; /* orphans the last pass saw and left (young, or past its bound) */
	uint64_t aborted;       /* unfinished multipart uploads aborted */
	unsigned uploads_left;  /* the last pass saw and left */
	bool unlisted_told;     /* the store lists no uploads: logged once */
} sup_snaps_orphans;

/* The store side's state, held by its owner: what it reads of the owner's
 * settings (sup_snaps_cfg's), the downloads and the sweep's figures. */
typedef struct sup_snaps_store {
	struct sup_catalog *catalog;
	const struct sup_snap_store *store;
	sup_workers *workers;
	unsigned orphan_age_s;
	sup_snaps_fetched *fetched; /* archives downloaded for restores */
	sup_snaps_orphans orphans;
} sup_snaps_store;

/* The calls of sup_snaps.h of the same name, on the owner's store side:
 * an object store configured; the catalog brought up to date; a removal
 * (1: a local snapshot, or no object store: the owner deletes it); a
 * restore's download and its drop; a job's cancel; the series. */
bool sup_snaps_store_remote(const sup_snaps_store *s);
int sup_snaps_store_refresh(sup_snaps_store *s, const char *snap_id, sup_snaps_done_cb cb,
			    void *ud, sup_snaps_job **job, sbx_err *err);
int sup_snaps_store_remove(sup_snaps_store *s, const sup_tenant *who, const char *snap_id,
			   sup_snaps_done_cb cb, void *ud, sup_snaps_job **job, sbx_err *err);
int sup_snaps_store_fetch(sup_snaps_store *s, const sup_tenant *who, const char *snap_id,
			  sup_snaps_done_cb cb, void *ud, sup_snaps_job **job, sbx_err *err);
void sup_snaps_store_fetched_drop(sup_snaps_store *s, const char *snap_id);
void sup_snaps_store_job_cancel(sup_snaps_job *job);
void sup_snaps_store_metrics(sup_snaps_store *s, struct sup_prom *w);

/* The local file holding the archive of snapshot id (its row's): the
 * local store's file, or the archive _fetch downloaded (-EAGAIN when there
 * is none). out: PATH_MAX. */
int sup_snaps_store_archive_of(sup_snaps_store *s, const char *id, char *out, sbx_err *err);

/* The same for the archive of the k-th volume the snapshot carries. */
int sup_snaps_store_vol_archive_of(sup_snaps_store *s, const char *id, unsigned k, char *out,
				   sbx_err *err);

/* The objects (or the local file) of a snapshot whose row could not be
 * recorded: removed, on a worker for an object store. */
void sup_snaps_store_unstore(sup_snaps_store *s, const sup_catalog_snap *row);

/* The ids of the snapshots the owner is writing now, each to fn. */
typedef void (*sup_snaps_each_id)(const void *owner, void (*fn)(const char *id, void *ud),
				  void *ud);
/* One pass of the object store's orphan sweep (none while one runs), the
 * snapshots being written (writing(owner, ...)) known as well as the rows. */
void sup_snaps_store_sweep(sup_snaps_store *s, sup_snaps_each_id writing, const void *owner);
/* The local store's sweep (sup_snap_store_sweep_local) with the ids of the
 * catalog's local rows: blocking, at start, before any snapshot is taken. */
void sup_snaps_store_sweep_local(sup_snaps_store *s);

/* Remove every downloaded archive. */
void sup_snaps_store_free(sup_snaps_store *s);

#endif
