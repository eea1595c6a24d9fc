/* A start on a state folder an earlier supervisor used: what its catalog
 * holds and the runtime confirms live is taken back; the rest is swept.
 *
 * Two steps around the making of the pools and the core: prepare (the
 * catalog opened, the dead supervisor's runtime calls killed so that none
 * finishes behind the sweep, every row checked with the runtime, what is
 * not kept removed: containers, mounts, loop devices, folders, rows) and
 * adopt (the kept sandboxes handed to the core, which reconnects their
 * agents). Owns the list of kept sandboxes between the two; start-up only,
 * before the loop runs (its runtime calls block). */
#ifndef SUP_RESTORE_H
#define SUP_RESTORE_H

#include "sbx/err.h"
#include "sup_catalog.h"
#include "sup_core.h"
#include "sup_pool.h"
#include "sup_runc.h"

typedef struct sup_restore sup_restore;

/* Open the catalog (*cat, the caller's to close after the pools are freed)
 * and sweep what is not kept. be: the pools' backend (NULL: runc), whose
 * adopt takes back its sandboxes instead of runc's; what it does not keep
 * is its own sweep's (sup_restore_names). */
int sup_restore_prepare(const sup_runc_cfg *rcfg, const sup_pool_backend *be, sup_catalog **cat,
			sup_restore **out, sbx_err *err);
/* The backend's names (container_id) of the kept sandboxes: *out malloc'd,
 * pointing into r (valid until adopt or free). */
int sup_restore_names(const sup_restore *r, const char ***out, size_t *n);
/* Give the kept sandboxes to core (made with the pools, not started yet);
 * one the core refuses is destroyed. Then the pool sizes the catalog
 * keeps (set by PUT /v1/pools) are set again, over the flags'; one whose
 * image is gone is forgotten. Frees r. */
void sup_restore_adopt(sup_restore *r, const sup_runc_cfg *rcfg, sup_core *core);
/* Without adopt (a start that failed): the kept ones stay for the next. */
void sup_restore_free(sup_restore *r);

#endif
