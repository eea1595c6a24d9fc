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
#include "sup_http.h"

typedef struct sup_osbx_ctx {
	sup_core *core;
	sup_api_limits limits; /* as POST /v1/sandboxes takes them */
	/* What OpenSandbox keeps of a sandbox that sbx does not: id ->
	 * {"metadata", "entrypoint", "extensions"}, held while the sandbox is
	 * listed (dropped when a lookup finds it gone; not kept across a
	 * restart). Made on first use, freed by sup_osbx_ctx_release. */
	json_t *kept;
	/* Foreground commands streaming now, for an interrupt by their id
	 * ("fg-<seq>"); each leaves the list when its request ends. */
	struct sup_oq *fg;
	uint64_t fg_seq;
} sup_osbx_ctx;

void sup_osbx_ctx_release(sup_osbx_ctx *x);

extern const sup_http_family sup_osbx_family;

#endif
