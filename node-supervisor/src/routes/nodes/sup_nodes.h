/* GET /v1/nodes: the node directory as this supervisor reads it from the
 * Leases (sup_kube), for the admin tenant: every node's URL, its Lease's
 * renewal and whether it is live, its capacity; and this node's link to the
 * API server (renewals, Events sent, queued and dropped, watch resumes).
 * Read only; it must not write to the API server or touch sandboxes. */
#ifndef SUP_NODES_H
#define SUP_NODES_H

#include "sup_http.h"
#include "sup_kube.h"

typedef struct sup_nodes_ctx {
	sup_kube *const *kube; /* NULL until started, and without a cluster: 404 */
} sup_nodes_ctx;

extern const sup_http_family sup_nodes_family;

#endif
