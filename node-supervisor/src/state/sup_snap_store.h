/* Where snapshot archives live: the one seam between taking or restoring
 * a snapshot and its storage. Today a folder of the state folder,
 * <state>/snapshots/<id>.tar.zst; an object store (--snapshot-store
 * s3://...) would upload in commit, download in fetch and delete in
 * remove behind the same four calls.
 *
 * An archive is written whole into a staged file (stage), then made the
 * snapshot's (commit: synced and renamed in, so a crash leaves either no
 * archive or a whole one); a restore reads a local file (fetch). Owns the
 * folder and its files; it must not know archives' contents, sandboxes or
 * the catalog. Blocking calls (worker threads); thread-safe, no state but
 * the folder's path. */
#ifndef SUP_SNAP_STORE_H
#define SUP_SNAP_STORE_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "sbx/err.h"

typedef struct sup_snap_store {
	char dir[PATH_MAX];   /* <state>/snapshots */
	char stage[PATH_MAX]; /* <state>/snapshots/tmp: staged archives */
	char layers[PATH_MAX]; /* <state>/layers: forks' read-only layers */
} sup_snap_store;

/* Make (or keep) the folders below state_dir, and remove staged files an
 * earlier run left. */
int sup_snap_store_open(const char *state_dir, sup_snap_store *s, sbx_err *err);

/* A snapshot id ("sn-" and 12 hex digits): 0, or -EINVAL. Ids are the
 * store's names: nothing else ever becomes a path. */
int sup_snap_store_check_id(const char *id, sbx_err *err);

/* The path of a new staged archive for snapshot id (out: PATH_MAX). */
int sup_snap_store_stage(const sup_snap_store *s, const char *id, char *out, sbx_err *err);

/* Make the staged file the archive of id (synced, renamed in); *size its
 * bytes. On failure the staged file is removed. */
int sup_snap_store_commit(const sup_snap_store *s, const char *id, const char *staged,
			  uint64_t *size, sbx_err *err);

/* A local file holding the archive of id (out: PATH_MAX), -ENOENT when
 * the store has none. *temp: the caller removes out after use (an object
 * store's download); false for the local store. */
int sup_snap_store_fetch(const sup_snap_store *s, const char *id, char *out, bool *temp,
			 sbx_err *err);

/* Remove the archive of id; none is not an error. */
int sup_snap_store_remove(const sup_snap_store *s, const char *id, sbx_err *err);

#endif
