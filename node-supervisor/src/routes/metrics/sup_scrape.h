/* GET /metrics: the node's series in the Prometheus text format, for the
 * admin tenant on the API's listener, or for anyone on the node-local
 * --metrics-listen one (open). Renders what the core keeps
 * (sup_core_metrics), the edge's requests by route and status (a
 * counter table main keeps through the edge's on_answered hook) and the
 * image store's figures (what it keeps: images, layers, bytes, GC) and the
 * snapshot store's (sup_snaps_metrics: its orphan sweep). It must
 * not keep figures of its own or touch sandboxes except through the core. */
#ifndef SUP_SCRAPE_H
#define SUP_SCRAPE_H

#include <stdbool.h>

#include "sup_core.h"
#include "sup_http.h"
#include "sup_img_store.h"
#include "sup_metrics.h"
#include "sup_tenants.h"

typedef struct sup_scrape_ctx {
	sup_core *core;
	sup_tenants *const *tenants; /* the set in force (for quota series) */
	const sup_ctab *requests;    /* by route and status */
	sup_img_store *store;        /* NULL: no image series */
	struct sup_snaps *snaps;     /* NULL: no snapshot store series */
	bool open;                   /* no token asked (the node-local listener) */
} sup_scrape_ctx;

extern const sup_http_family sup_scrape_family;

/* The counter table the edge's on_answered hook feeds (ud: from
 * sup_scrape_requests_new), and how many series it keeps at most. */
#define SUP_SCRAPE_MAX_REQUEST_SERIES 1024
sup_ctab *sup_scrape_requests_new(void);
void sup_scrape_count(void *ud, const char *route, int status);

#endif
