/* The sandbox routes: GET /healthz, GET /v1/pools, /v1/sandboxes (create,
 * list), /v1/sandboxes/{id} (get, delete) and POST .../exec (captured, or
 * streamed as SSE/NDJSON). Bodies are parsed by sup_api; the work is the
 * core's. It must not touch pools or agents except through the core. */
#ifndef SUP_SANDBOXES_H
#define SUP_SANDBOXES_H

#include "sup_api.h"
#include "sup_core.h"
#include "sup_http.h"

typedef struct sup_sandboxes_ctx {
	sup_core *core;
	sup_api_limits limits;
} sup_sandboxes_ctx;

extern const sup_http_family sup_sandboxes_family;

#endif
