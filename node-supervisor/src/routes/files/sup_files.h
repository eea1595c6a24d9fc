/* The file API: GET/PUT/DELETE /files and /fs/{stat,list,mkdir,move,chmod,
 * search,watch} of a sandbox. Each request path is decoded once with its
 * length kept, checked against the tenant's policy (sup_policy, read or
 * write) by the route's parser, and only the matched root and the part
 * below it go to the agent, which confines them again with openat2. A
 * denial is a 403, logged. Downloads, uploads and watches stream with
 * backpressure both ways.
 * It must not touch sandboxes or agents except through the core
 * (sup_core_call), and trusts nothing the agent sends. Loop thread only. */
#ifndef SUP_FILES_H
#define SUP_FILES_H

#include <stdint.h>

#include "sup_core.h"
#include "sup_http.h"
#include "sup_policy.h"
#include "sup_tenants.h"

/* The policy a request's paths go through is its tenant's
 * (sup_tenant_policy: its own "paths", else the node's --policy). */
typedef struct sup_files_ctx {
	sup_core *core;
	uint64_t max_upload; /* bytes per PUT; 0: no limit */
} sup_files_ctx;

extern const sup_http_family sup_files_family;

#endif
