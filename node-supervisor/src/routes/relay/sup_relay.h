/* The relay: every supervisor answers for every sandbox. A request whose
 * sandbox id carries another node's tag (sup_nodeid.h) is taken at the edge before
 * authentication and relayed to that node's supervisor, found through the
 * node directory (sup_directory.h): its head passed on over a TCP
 * connection of its own (TLS with --tls-ca: each node verifies the other
 * against the cluster's CA), hop-by-hop headers handled, the cluster key
 * and a hop count added, then bytes both ways with backpressure until the
 * owner's answer ends, so every route works relayed: JSON, streams,
 * uploads, WebSocket and tunnels. A create this node has no ready sandbox
 * for goes to the node the directory picks. The owner checks the tenant's
 * token as for any request; a relayed request it accepts only with the
 * node credentials it is set up for (the cluster key; in a cluster the
 * relaying node's service-account token, reviewed: sup_relay_auth.h; with
 * --tls-ca a client certificate the CA signed), and never relays one
 * again (a loop).
 * It must not parse or answer for the owner (the owner's bytes reach the
 * client as they are), nor touch sandboxes but through the core's pool
 * figures. Loop thread only. */
#ifndef SUP_RELAY_H
#define SUP_RELAY_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>

#include "sup_core.h"
#include "sup_directory.h"
#include "sup_http.h"
#include "sup_nodeid.h"
#include "sup_relay_auth.h"

/* A connection to a peer not made within this is 502 node_unreachable. */
#define SUP_RELAY_CONNECT_MS 3000
/* Bytes held here each way before the other side is read no more. */
#define SUP_RELAY_WINDOW (256u * 1024)
/* GET /v1/sandboxes?scope=cluster: each other node's list is due within
 * this (connecting included). */
#define SUP_RELAY_LIST_MS 2000
/* This node's token file is read again this often (the kubelet rotates
 * it well before it expires). */
#define SUP_RELAY_TOKEN_RELOAD_MS 60000

struct sup_relay_kept;
struct sup_tls;

typedef struct sup_relay {
	struct event_base *base;
	struct evdns_base *dns;      /* peers named by host name */
	sup_core *core;
	char node[SUP_NODE_NAME_MAX + 1];
	char tag[SUP_NODEID_TAG_MAX + 1]; /* in this node's ids */
	char *key;                   /* the cluster key; NULL: none */
	sup_directory dir;
	unsigned connect_ms;
	/* The node's TLS (NULL: none). With a CA in it, peers are dialled
	 * over HTTPS and verified against it, and a relayed request is
	 * accepted only from a peer whose client certificate it signed. */
	struct sup_tls *tls;
	/* In a cluster (sup_relay_node_auth): peers' node tokens reviewed, and
	 * this node's own sent. Without a key or a token nothing is relayed. */
	sup_relay_auth *auth;        /* NULL: no review (the key alone) */
	char *node_token;            /* NULL: none sent */
	char *node_token_file;       /* read again every SUP_RELAY_TOKEN_RELOAD_MS; NULL: fixed */
	struct event *token_tick;
	/* connections to peers kept between requests (sup_relay_int.h) */
	TAILQ_HEAD(sup_relay_kept_list, sup_relay_kept) kept;
	size_t nkept;
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
/* Read a secret file as a Secret or a projected token mounts it (what:
 * the flag, for messages): 16..8192 visible ASCII bytes, a trailing
 * newline dropped. *out malloc'd. */
int sup_relay_secret_load(const char *what, const char *path, char **out, sbx_err *err);

/* In a cluster: auth (x's from here on, also on failure; NULL: none)
 * reviews the node token of every relayed request received, and this
 * node's own is sent with every request it relays: read from token_file
 * (and again every SUP_RELAY_TOKEN_RELOAD_MS), or else token as given
 * (a kubeconfig's inline one), or none (NULL, NULL). */
int sup_relay_node_auth(sup_relay *x, sup_relay_auth *auth, const char *token_file,
			const char *token, sbx_err *err);

/* sup_http_cfg.relay (ud x). */
int sup_relay_admit(void *ud, sup_http_req *r, const char *id, sbx_err *err);

/* A create (its body buffered in r) this node has no ready sandbox of
 * image for, sent to the node the directory picks: 1 taken (the answer
 * will be that node's; *handle for sup_relay_handle_free when the request
 * ends), 0 served here (a relayed create, no pick, a snapshot or volumes:
 * this node's). */
int sup_relay_create_elsewhere(void *ud, sup_http_req *r, const sup_create_req *req,
			       void **handle, sbx_err *err);
void sup_relay_handle_free(void *handle);

/* GET /v1/sandboxes?scope=cluster (sup_sandboxes_ctx.list_elsewhere):
 * mine (this node's list, ours from here on) completed with every other
 * live node's, asked with the caller's token: 1 taken (r answered when
 * all answered or SUP_RELAY_LIST_MS passed; *handle for
 * sup_relay_list_free when the request ends), < 0 an error. A peer's
 * request is this node's list alone. */
int sup_relay_list_elsewhere(void *ud, sup_http_req *r, json_t *mine, void **handle,
			     sbx_err *err);
void sup_relay_list_free(void *handle);

#endif
