/* The snapshot routes: POST /v1/sandboxes/{id}/snapshots (take),
 * GET /v1/snapshots, GET and DELETE /v1/snapshots/{snapshot}, and
 * POST /v1/sandboxes/{id}/fork. Bodies are parsed and answers rendered
 * here; the work is sup_snaps's (core). It must not touch the store, the
 * catalog or the runtime but through it. */
#ifndef SUP_SNAPSHOTS_H
#define SUP_SNAPSHOTS_H

#include "sup_http.h"
#include "sup_snaps.h"

typedef struct sup_snapshots_ctx {
	sup_snaps *snaps;
	sup_core *core;
} sup_snapshots_ctx;

extern const sup_http_family sup_snapshots_family;

#endif
