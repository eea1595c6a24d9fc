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
	/* A create that may go to another node (the relay's, wired in main):
	 * 1 taken (it answers r; *handle freed by elsewhere_free when the
	 * request ends), 0 made here, < 0 an error. NULL: always here. */
	int (*elsewhere)(void *ud, sup_http_req *r, const sup_create_req *req, void **handle,
			 sbx_err *err);
	void (*elsewhere_free)(void *handle);
	void *elsewhere_ud;
	/* GET /v1/sandboxes?scope=cluster (the relay's, ud elsewhere_ud):
	 * mine (this node's list, the hook's from here on) with every other
	 * node's: 1 taken (it answers r; *handle freed by list_free when the
	 * request ends), < 0 an error. NULL: this node's list alone. */
	int (*list_elsewhere)(void *ud, sup_http_req *r, json_t *mine, void **handle,
			      sbx_err *err);
	void (*list_free)(void *handle);
} sup_sandboxes_ctx;

extern const sup_http_family sup_sandboxes_family;

#endif
