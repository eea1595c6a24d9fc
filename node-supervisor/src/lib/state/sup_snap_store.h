/* Where snapshot archives live: the one seam between taking or restoring
 * a snapshot and its storage. Either a folder of the state folder,
 * <state>/snapshots/<id>.tar.zst, or (--snapshot-store s3://bucket/prefix)
 * an S3-compatible object store that every supervisor reading the same
 * bucket and prefix shares (sup_snap_store_s3.c):
 *   <prefix>archives/<id>.tar.zst   the archive
 *   <prefix>archives/<id>.v<k>.tar.zst  the archive of the k-th volume it
 *                                   carries (include_volumes), if any
 *   <prefix>manifests/<id>.json     its manifest: the snapshot's row (id,
 *                                   name, tenant, source, image, digest,
 *                                   isolation, size, sha256, created_at,
 *                                   and its volumes)
 * (locally <state>/snapshots/<id>.tar.zst and <id>.v<k>.tar.zst). A
 * snapshot is in an object store once its manifest is: the archives go
 * up first, the manifest last; a removal takes the manifest first.
 *
 * An archive is written whole into a staged file (stage), then made the
 * snapshot's (commit: synced and renamed in, or uploaded, so a crash
 * leaves either no snapshot or a whole one); a restore reads a local file
 * (fetch: an object store's is downloaded and its digest checked).
 *
 * Owns the folder, its files and the object store's keys; the manifest's
 * fields are the catalog's snapshot row (sup_catalog_snap), but it must not
 * touch the catalog, know archives' contents or sandboxes, and must not
 * log credentials. Blocking calls (worker threads); thread-safe: the
 * object store's connections are taken from a small pool. Store failures
 * come back as -EHOSTUNREACH (the store cannot be reached or timed out:
 * 503 store_unavailable) or -EBADE (it refused or failed: 502
 * store_error); a missing snapshot -ENOENT, an archive whose size or
 * digest is not the manifest's -EILSEQ. */
#ifndef SUP_SNAP_STORE_H
#define SUP_SNAP_STORE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_catalog.h"

typedef struct sup_snap_remote sup_snap_remote;

typedef struct sup_snap_store {
	char dir[PATH_MAX];   /* <state>/snapshots */
	char stage[PATH_MAX]; /* <state>/snapshots/tmp: staged and fetched archives */
	char layers[PATH_MAX]; /* <state>/layers: forks' read-only layers */
	/* "" the state folder, else "s3://bucket/prefix/": what commit writes
	 * into a row's location */
	char location[sizeof(((sup_catalog_snap *)0)->location)];
	sup_snap_remote *remote; /* the object store, NULL: none */
} sup_snap_store;

/* Make (or keep) the folders below state_dir, and remove staged files an
 * earlier run left. s3_url ("s3://bucket[/prefix]", NULL: none) makes the
 * object store the one new snapshots go to; s3_endpoint as sup_s3_opts'
 * endpoint. Makes no request. */
int sup_snap_store_open(const char *state_dir, const char *s3_url, const char *s3_endpoint,
			sup_snap_store *s, sbx_err *err);
void sup_snap_store_close(sup_snap_store *s);

/* An object store is configured. */
bool sup_snap_store_remote(const sup_snap_store *s);

/* name is dir followed by a name the store gives: an archive's
 * ("<id>.tar.zst", "<id>.v<k>.tar.zst") or (manifest) a manifest's
 * ("<id>.json"): its snapshot id into id. False: not one of ours. */
bool sup_snap_store_name_id(const char *name, const char *dir, bool manifest, char id[48]);

/* Local store only, at start before any snapshot is taken: every archive
 * file in the store's folder (<id>.tar.zst, <id>.v<k>.tar.zst) whose id
 * known (sorted, strcmp) does not name is removed: a commit whose row was
 * never recorded, a delete cut short, volumes' archives renamed in before
 * their layer's. Files of other names are left. *removed: how many. */
int sup_snap_store_sweep_local(const sup_snap_store *s, const char (*known)[48], size_t nknown,
			       unsigned *removed, sbx_err *err);

/* A snapshot id ("sn-" and 12 hex digits): 0, or -EINVAL. Ids are the
 * store's names: nothing else ever becomes a path or a key. */
int sup_snap_store_check_id(const char *id, sbx_err *err);

/* The path of a new staged archive for snapshot id (out: PATH_MAX). */
int sup_snap_store_stage(const sup_snap_store *s, const char *id, char *out, sbx_err *err);

/* The path of the archive of the k-th volume (k < SUP_VOL_MAX_MOUNTS) of
 * snapshot id beside its layer's: staged or kept (out: PATH_MAX). */
int sup_snap_store_vol_stage(const sup_snap_store *s, const char *id, unsigned k, char *out,
			     sbx_err *err);
int sup_snap_store_vol_path(const sup_snap_store *s, const char *id, unsigned k, char *out,
			    sbx_err *err);

/* Make the staged file the archive of row->id, and the staged archives of
 * its row->nvols volumes (sup_snap_store_vol_stage) theirs (local: synced,
 * renamed in; object store: uploaded, multipart past a part, then the
 * manifest), and fill row's and its volumes' size, sha256 (object store)
 * and location. The staged files are gone afterwards, whatever the
 * outcome; on failure nothing is stored. */
int sup_snap_store_commit(const sup_snap_store *s, sup_catalog_snap *row, const char *staged,
			  sbx_err *err);

/* A local file holding the archive of row (out: PATH_MAX), -ENOENT when
 * the store has none. *temp: the caller removes out after use (a download,
 * its size and digest checked against row's), and with it the archives of
 * row's volumes, downloaded beside it as out".v<k>" and checked the same
 * way; false for the local store (sup_snap_store_vol_path then). */
int sup_snap_store_fetch(const sup_snap_store *s, const sup_catalog_snap *row, char *out,
			 bool *temp, sbx_err *err);

/* Remove the archive of row and its volumes' (and its manifest first);
 * none is not an error. */
int sup_snap_store_remove(const sup_snap_store *s, const sup_catalog_snap *row, sbx_err *err);

/* The object store's manifest of id as a row (location set); -ENOENT none,
 * -EBADE one that is not a manifest of id. Object store only. */
int sup_snap_store_manifest(const sup_snap_store *s, const char *id, sup_catalog_snap *out,
			    sbx_err *err);

/* One pass of the object store's orphan sweep. Every key under the prefix
 * is listed (at most SUP_SNAP_SWEEP_LISTED_MAX, else -E2BIG and nothing
 * removed); an archive of a snapshot (archives/<id>.tar.zst or
 * .v<k>.tar.zst) that has no manifest and that no id of known names is an
 * orphan (an upload cut by a crash, a delete that stopped halfway); one
 * whose LastModified is at least min_age_s before now (so never an upload
 * whose manifest is still on its way, on any node) is removed, at most
 * max_remove per pass. Then the unfinished multipart uploads under
 * archives/ (ListMultipartUploads): one of an archive key whose id known
 * does not name, initiated at least min_age_s before now, is aborted (its
 * writer died before its own abort), at most max_remove per pass; a store
 * without the call (501) sets uploads_unlisted and is not a failure. Keys
 * of no snapshot are not ours: left. Object store only (0, nothing done,
 * without one). */
#define SUP_SNAP_SWEEP_LISTED_MAX 200000u
typedef struct sup_snap_sweep {
	int64_t now;              /* seconds since the epoch */
	unsigned min_age_s;
	unsigned max_remove;
	const char (*known)[48];  /* ids a row names or being written here, sorted (strcmp) */
	size_t nknown;
	unsigned removed, orphans; /* out: removed now; orphans seen (removed or not) */
	unsigned aborted, uploads; /* out: uploads aborted now; unfinished ones seen */
	bool uploads_unlisted;     /* out: the store does not list uploads */
} sup_snap_sweep;
int sup_snap_store_sweep(const sup_snap_store *s, sup_snap_sweep *sw, sbx_err *err);

/* Every snapshot id the object store has a manifest of, in key order. A
 * non-zero return of fn stops the listing and is returned. */
int sup_snap_store_ids(const sup_snap_store *s, int (*fn)(void *ud, const char *id), void *ud,
		       sbx_err *err);

#endif
