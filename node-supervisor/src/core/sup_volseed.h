/* The volumes a restore or a fork makes for its new sandbox (a create's
 * vol_seeds, sup_types.h): one new volume of the tenant per seed, named
 * after the source's volume with a random suffix, as big as it was, its
 * files unpacked from the seed's archive (hostile until proven otherwise:
 * sup_layer_tar_unpack, bounded by the volume's own size) on a worker
 * before the volume is recorded. The create then mounts them like the
 * volumes a request names.
 *
 * Owns the volumes it makes until the caller keeps them (sup_volseed_keep)
 * or they go (sup_volseed_undo, a failure, a cancel); it must not know
 * sandboxes, pools or HTTP: the core (sup_core.c) drives it. Loop thread
 * only. */
#ifndef SUP_VOLSEED_H
#define SUP_VOLSEED_H

#include <stddef.h>

#include "sbx/err.h"
#include "sup_types.h"
#include "sup_volumes.h"

typedef struct sup_volseed sup_volseed;
typedef void (*sup_volseed_cb)(int rc, const sbx_err *err, void *ud);

/* Make seeds[0..n) into new volumes of tenant, each filled from its
 * archive; cb once every one is made (rc 0) or one failed (the others
 * made are deleted: rc < 0, err says which and why: -ENOSPC an archive
 * larger than its volume, -EILSEQ one refused). *out until keep or undo. */
int sup_volseed_start(sup_volumes *v, const char *tenant, const sup_vol_seed *seeds, size_t n,
		      sup_volseed_cb cb, void *ud, sup_volseed **out, sbx_err *err);
/* The mounts of the volumes made (valid until keep or undo): n of them. */
const sup_vol_mount *sup_volseed_mounts(const sup_volseed *vs, size_t *n);
/* The sandbox holds them now: they are the tenant's, like any volume. */
void sup_volseed_keep(sup_volseed *vs);
/* The create failed or was withdrawn: the volumes made go (those still
 * being made go once made); cb does not run. */
void sup_volseed_undo(sup_volseed *vs);

#endif
