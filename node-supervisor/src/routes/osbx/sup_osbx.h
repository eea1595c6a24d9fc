/* The OpenSandbox compatibility layer: OpenSandbox's lifecycle API under
 * /opensandbox/v1 (their SDKs append /v1 to the domain they are given) and
 * their execd API per sandbox under /opensandbox/execd/{id}, on the same
 * listener and the tenant's token (Bearer, or their OPEN-SANDBOX-API-KEY,
 * read by the edge). Their shapes, states and statuses, mapped onto sbx's
 * own operations: every call goes through the core as sbx's own routes do,
 * with sbx's rules (limits, non-root, the path policy) kept; what sbx does
 * not do yet is their documented error, never a wrong success.
 * It must not touch sandboxes or agents except through the core. Loop
 * thread only. */
#ifndef SUP_OSBX_H
#define SUP_OSBX_H

#include <jansson.h>

#include "sup_api.h"
#include "sup_core.h"
#include "sup_snaps.h"
#include "sup_http.h"
#include "sup_kept.h"

struct sup_catalog;
struct sup_urlsign;

typedef struct sup_osbx_ctx {
	sup_core *core;
	sup_snaps *snaps;             /* their snapshot calls: sbx's snapshots */
	struct sup_catalog *catalog;  /* where kept is written through (NULL: nowhere) */
	sup_api_limits limits; /* as POST /v1/sandboxes takes them */
	/* Signs their signed endpoints (?expires=): the supervisor's one
	 * signer, whose path form the port proxy honours (NULL: none made). */
	const struct sup_urlsign *sign;
	/* What OpenSandbox keeps of a sandbox that sbx does not: id ->
	 * {"tenant", "metadata", "entrypoint", "extensions"}, held while the
	 * sandbox is listed (dropped when a lookup finds it gone), kind
	 * "opensandbox" of the catalog's kept records, read back by
	 * sup_osbx_ctx_open. Freed by sup_osbx_ctx_release. */
	sup_kept kept;
	/* The metrics' last CPU sample per sandbox: id -> {"cpu_ns", "ms",
	 * "tenant"}, pruned as kept is. */
	json_t *cpu_last;
	/* Foreground commands streaming now, for an interrupt by their id
	 * ("fg-<seq>"); each leaves the list when its request ends. */
	struct sup_oq *fg;
	uint64_t fg_seq;
	/* Bash sessions (their createSession), every sandbox's: each a shell
	 * kept running as a background process of its sandbox, gone with it. */
	struct osbx_sess *sessions;
} sup_osbx_ctx;

/* After core, snaps and limits are set: what was kept before a restart,
 * read back from catalog (NULL: nothing is kept across restarts). */
int sup_osbx_ctx_open(sup_osbx_ctx *x, struct sup_catalog *catalog, sbx_err *err);
void sup_osbx_ctx_release(sup_osbx_ctx *x);

extern const sup_http_family sup_osbx_family;

#endif
