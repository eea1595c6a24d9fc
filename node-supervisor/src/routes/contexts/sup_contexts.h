/* The code contexts' routes: POST and GET /v1/sandboxes/{id}/contexts, GET
 * and DELETE .../contexts/{ctx}, POST .../contexts/{ctx}/run (JSON, or
 * streamed as SSE or NDJSON per Accept), .../interrupt and .../restart.
 * Bodies are parsed by edge/api (sup_ctx.h), whose engine holds the
 * contexts; the edge has checked the caller may name the sandbox, and a
 * context is only ever found under its sandbox. It must not know the
 * agent or the driver's lines. */
#ifndef SUP_CONTEXTS_H
#define SUP_CONTEXTS_H

#include "sup_core.h"
#include "sup_ctx.h"
#include "sup_http.h"

typedef struct sup_contexts_ctx {
	sup_ctx_engine *engine;
} sup_contexts_ctx;

extern const sup_http_family sup_contexts_family;

#endif
