/* Volumes: the node's named, sized folders that outlive sandboxes.
 *
 * A volume belongs to a tenant (another tenant's is not found: -ENOENT, as
 * an unknown name), lives at <state>/volumes/<tenant>/<name>/ as an ext4
 * image on a loop device mounted at .../disk (sup_disk.h: the same file
 * system, and the same hold on its size, as a sandbox's writable layer),
 * and is recorded in the catalog (sup_catalog.h, step 2) from its create to
 * its delete. Sandboxes mount volumes as they are handed out: a bind of
 * .../disk at the requested path inside the container (sup_nsmount.h),
 * read-write by one sandbox at a time or read-only by any number, never
 * both at once (a reader/writer lock: -ETXTBSY, "volume_busy"). Which
 * sandbox mounts which is kept here and in the catalog, so a restarted
 * supervisor takes the same mounts back with its sandboxes.
 *
 * Owns the registry, the volumes' folders and host mounts, and the
 * mounts' bookkeeping. It must not know HTTP, JSON, pools or the sandbox
 * registry: the core calls it as sandboxes are handed out, re-adopted and
 * destroyed. Loop thread only; making and removing a volume's file system
 * runs on the workers. */
#ifndef SUP_VOLUMES_H
#define SUP_VOLUMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbx/err.h"
#include "sup_volspec.h"
#include "sup_workers.h"

struct sup_catalog;
typedef struct sup_volumes sup_volumes;

typedef struct sup_volume_view {
	const char *tenant;
	const char *name;
	uint64_t size;
	int64_t created_at;     /* seconds since the epoch */
	const char *state;      /* "creating", "ready", "deleting" */
	bool has_used;
	uint64_t used;          /* bytes the file system holds (its root folder included) */
	unsigned readers;       /* sandboxes mounting it read-only */
	const char *writer;     /* the sandbox mounting it read-write, or NULL */
} sup_volume_view;

/* Take every volume of the catalog back (each mounted again unless it
 * still is), and the mounts recorded for sandboxes still in the catalog
 * (pending until sup_volumes_restore names their sandbox). Blocking: at
 * start, before the loop runs. */
int sup_volumes_open(const char *state_dir, struct sup_catalog *cat, sup_workers *workers,
		     sup_volumes **out, sbx_err *err);
/* Unmount every volume no sandbox mounts (at a stop that destroyed the
 * sandboxes; a handover keeps the mounts its sandboxes hold), then free. */
void sup_volumes_free(sup_volumes *v);

typedef void (*sup_volumes_cb)(int rc, const sup_volume_view *view, const sbx_err *err, void *ud);

/* Make tenant's volume name of size bytes (validated by the caller:
 * sup_volspec). -EEXIST when the tenant has one of that name (also one
 * being made or deleted). The file system is made on a worker; cb runs
 * when the volume is ready (or failed: nothing of it is left). */
int sup_volumes_create(sup_volumes *v, const char *tenant, const char *name, uint64_t size,
		       sup_volumes_cb cb, void *ud, sbx_err *err);
/* What fills a new volume (sup_volumes_create_filled): run on the worker
 * once its file system is made and mounted at root, before its row is
 * recorded. A failure is the create's: nothing of the volume is left. */
typedef int (*sup_volumes_fill_fn)(const char *root, void *ud, sbx_err *err);
/* sup_volumes_create whose new volume is filled by fill(root, fill_ud)
 * first (a snapshot's or a fork's copy of another volume); fill_ud stays
 * the caller's and must live until cb. */
int sup_volumes_create_filled(sup_volumes *v, const char *tenant, const char *name,
			      uint64_t size, sup_volumes_fill_fn fill, void *fill_ud,
			      sup_volumes_cb cb, void *ud, sbx_err *err);
/* The host folder of tenant's volume name's files (its file system's
 * root: out, PATH_MAX) and its size; -ENOENT none, -ETXTBSY not ready.
 * A snapshot reads it while the sandbox mounting it is frozen. */
int sup_volumes_root(const sup_volumes *v, const char *tenant, const char *name, char *out,
		     uint64_t *size, sbx_err *err);
/* tenant's volume name (with its use, a statfs). */
int sup_volumes_get(sup_volumes *v, const char *tenant, const char *name, sup_volume_view *out,
		    sbx_err *err);
/* fn for every volume of tenant (NULL: every tenant's), oldest first. */
void sup_volumes_list(sup_volumes *v, const char *tenant,
		      void (*fn)(const sup_volume_view *view, void *ud), void *ud);
/* Remove tenant's volume name and its files: -ETXTBSY while a sandbox
 * mounts it. cb runs once its file system is gone (rc 0, view NULL). */
int sup_volumes_delete(sup_volumes *v, const char *tenant, const char *name, sup_volumes_cb cb,
		       void *ud, sbx_err *err);
/* The bytes tenant's volumes may hold together (a quota counts them as
 * disk the tenant holds). */
uint64_t sup_volumes_tenant_bytes(const sup_volumes *v, const char *tenant);

/* ---- mounts ---- */

/* Whether tenant could mount m now: each volume exists (-ENOENT naming
 * it), is ready, and is free for the mode asked (-ETXTBSY). */
int sup_volumes_check(const sup_volumes *v, const char *tenant, const sup_vol_mounts *m,
		      sbx_err *err);
/* Check as sup_volumes_check, then take m for sandbox id, record it in the
 * catalog (the sandbox's row must exist) and bind each volume into the
 * container of init pid (blocking: a clone per volume). On failure what
 * was taken stays taken until the caller's sup_volumes_release, once the
 * container (which the caller destroys) is gone: a bind already made
 * lives as long as it does. */
int sup_volumes_attach(sup_volumes *v, const char *tenant, const char *id, pid_t pid,
		       const sup_vol_mounts *m, sbx_err *err);
/* Sandbox id is gone (or will never get its volumes): what it took is
 * free again. */
void sup_volumes_release(sup_volumes *v, const char *id);
/* A sandbox of an earlier run taken back: the mounts the catalog holds
 * for it are taken again (handed_out: a handed-out one; a pooled one that
 * has mounts is refused with -EBUSY: it never should, so it is destroyed). */
int sup_volumes_restore(sup_volumes *v, const char *id, bool handed_out, sbx_err *err);
/* Every sandbox of the earlier run was taken back or not: mounts recorded
 * for those not taken back are forgotten (their rows went with them). */
void sup_volumes_restored(sup_volumes *v);
/* What sandbox id mounts: up to cap into out, returns how many it has. */
size_t sup_volumes_of(const sup_volumes *v, const char *id, sup_vol_mount *out, size_t cap);
/* The mount of sandbox id at or above the normalised path[0..len), or NULL
 * (the file routes let a sandbox's volumes through their policy). */
const sup_vol_mount *sup_volumes_mount_at(const sup_volumes *v, const char *id, const char *path,
					  size_t len);

#endif
