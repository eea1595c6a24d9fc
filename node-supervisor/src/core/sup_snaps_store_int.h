/* The snapshot operations that wait on an object store (--snapshot-store
 * s3://...): reading a snapshot's manifest, listing the store, removing a
 * snapshot's objects and downloading its archive for a restore. Each runs
 * as a worker job (the store's calls block on the network; the loop never
 * does), and its done() mirrors what it learnt into the catalog: rows of
 * snapshots other nodes put in the store are added, rows whose manifest
 * has gone are removed, so the catalog's rows of the store follow it.
 *
 * Downloaded archives are kept, one per snapshot and counted, while the
 * creates that fetched them run (sup_snaps_fetch / _fetched_drop), and
 * handed to sup_snaps_seed through sup_snaps_archive_of.
 *
 * Owns its jobs and the downloaded files; the rows are the catalog's, the
 * objects the store's. Core-internal: sup_snaps.c and sup_core.c use it;
 * the public calls are declared in sup_snaps.h. Loop thread only. */
#ifndef SUP_SNAPS_STORE_H
#define SUP_SNAPS_STORE_H

#include "sup_catalog.h"
#include "sup_snaps.h"

typedef struct sup_snaps_fetched sup_snaps_fetched;

/* sup_snaps' own, for this file's calls. */
const sup_snaps_cfg *sup_snaps_cfg_of(const sup_snaps *s);
sup_snaps_fetched **sup_snaps_fetched_of(sup_snaps *s);

/* The local file holding the archive of snapshot id (its row's): the
 * local store's file, or the archive sup_snaps_fetch downloaded (-EAGAIN
 * when there is none). out: PATH_MAX. */
int sup_snaps_archive_of(sup_snaps *s, const char *id, char *out, sbx_err *err);

/* The same for the archive of the k-th volume the snapshot carries. */
int sup_snaps_vol_archive_of(sup_snaps *s, const char *id, unsigned k, char *out, sbx_err *err);

/* The objects (or the local file) of a snapshot whose row could not be
 * recorded: removed, on a worker for an object store. */
void sup_snaps_unstore(sup_snaps *s, const sup_catalog_snap *row);

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
sup_snaps_orphans *sup_snaps_orphans_of(sup_snaps *s);
void sup_snaps_sweep_store(sup_snaps *s);
/* The local store's sweep (sup_snap_store_sweep_local) with the ids of the
 * catalog's local rows: blocking, at start, before any snapshot is taken. */
void sup_snaps_sweep_local(sup_snaps *s);
/* The ids of the snapshots this node is writing now. */
void sup_snaps_writing(const sup_snaps *s, void (*fn)(const char *id, void *ud), void *ud);

/* Remove every downloaded archive (sup_snaps_free). */
void sup_snaps_fetched_free(sup_snaps_fetched **list);

#endif
