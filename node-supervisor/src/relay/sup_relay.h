/* The relay: every supervisor answers for every sandbox. A request whose
 * sandbox id names another node (sup_nodeid.h) is taken at the edge before
 * authentication and relayed to that node's supervisor, found through the
 * node directory (sup_directory.h): its head passed on over a TCP
 * connection of its own (hop-by-hop headers handled, the cluster key and a
 * hop count added), then bytes both ways with backpressure until the
 * owner's answer ends, so every route works relayed: JSON, streams,
 * uploads, WebSocket and tunnels. A create this node has no ready sandbox
 * for goes to the node the directory picks. The owner checks the tenant's
 * token as for any request; a relayed request it accepts only with the
 * cluster key, and never relays one again (a loop).
 * It must not parse or answer for the owner (the owner's bytes reach the
 * client as they are), nor touch sandboxes but through the core's pool
 * figures. Loop thread only. */
#ifndef SUP_RELAY_H
#define SUP_RELAY_H

#include <stdbool.h>

#include "sup_core.h"
#include "sup_directory.h"
#include "sup_http.h"
#include "sup_nodeid.h"

/* A connection to a peer not made within this is 502 node_unreachable. */
#define SUP_RELAY_CONNECT_MS 3000
/* Bytes held here each way before the other side is read no more. */
#define SUP_RELAY_WINDOW (256u * 1024)

typedef struct sup_relay {
	struct event_base *base;
	struct evdns_base *dns;      /* peers named by host name */
	sup_core *core;
	char node[SUP_NODE_NAME_MAX + 1];
	char *key;                   /* the cluster key; NULL: none (nothing relayed either way) */
	sup_directory dir;
	unsigned connect_ms;
} sup_relay;

/* The one route a relayed request runs (sup_http_cfg.relay_mount). */
extern const sup_http_family sup_relay_family;
/* GET /relay/v1/capacity: this node's pools, for peers holding the key. */
extern const sup_http_family sup_relay_door_family;

/* Fill x; key (sup_relay_key_load's, or NULL: none) is x's from here on,
 * also on failure. A directory without a key is -EINVAL. */
int sup_relay_init(sup_relay *x, struct event_base *base, sup_core *core, const char *node,
		   char *key, sup_directory dir, sbx_err *err);
void sup_relay_release(sup_relay *x);
/* Read a cluster key file as a Secret mounts it: 16..4096 visible ASCII
 * bytes, a trailing newline dropped. *out malloc'd. */
int sup_relay_key_load(const char *path, char **out, sbx_err *err);

/* sup_http_cfg.relay (ud x). */
int sup_relay_admit(void *ud, const sup_http_in *in, const char *id, sbx_err *err);

/* A create (its body buffered in r) this node has no ready sandbox of
 * image for, sent to the node the directory picks: 1 taken (the answer
 * will be that node's; *handle for sup_relay_handle_free when the request
 * ends), 0 served here (a relayed create, no pick, a snapshot or volumes:
 * this node's). */
int sup_relay_create_elsewhere(void *ud, sup_http_req *r, const sup_create_req *req,
			       void **handle, sbx_err *err);
void sup_relay_handle_free(void *handle);

#endif
