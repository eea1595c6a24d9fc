/* What the core shows its own metrics rendering (sup_core_metrics.c): its
 * figures and its listed sandboxes, read in the same turn of the loop.
 * Nothing outside the core includes this. */
#ifndef SUP_CORE_INT_H
#define SUP_CORE_INT_H

#include "sup_core.h"
#include "sup_sandbox.h"

#define SUP_CORE_EXEC_RESULTS 4
extern const char *const sup_core_exec_results[SUP_CORE_EXEC_RESULTS];

typedef struct sup_core_figs {
	const sup_pools *pools;
	const sup_hist *exec_seconds;  /* execs with a result, as the supervisor timed them */
	const uint64_t *execs;         /* ended execs by sup_core_exec_results */
	uint64_t oom_killed;
	const sup_ctab *refusals;      /* quota refusals by tenant and figure */
	const sup_sandbox *first;      /* listed sandboxes, oldest first */
} sup_core_figs;

void sup_core_figures(const sup_core *c, sup_core_figs *out);
const sup_sandbox *sup_core_next(const sup_sandbox *sb);

/* For the snapshot operations (sup_snaps.c): a sandbox who sees (NULL,
 * err -ENOENT, otherwise), and the pools. */
const sup_sandbox *sup_core_find(sup_core *c, const sup_tenant *who, const char *id, sbx_err *err);
sup_pools *sup_core_pools(sup_core *c);
/* Sandbox id's fork slot is (being) filled with a fork's layer: a lower
 * layer that a reset cannot empty, so it is never reused after one. */
void sup_core_mark_forked(sup_core *c, const char *id);

#endif
