/* The supervisor's connection to the Kubernetes control plane, off the
 * request path: this node's Lease renewed as a heartbeat (its API URL and
 * capacity in annotations), sandbox lifecycle Events, and the node
 * directory read back from every node's Lease by a watch.
 *
 * Two threads of its own, each with one blocking connection
 * (sup_kube_http): the writer (the Lease, then the queue of Events,
 * retried with backoff and jitter while the server is away; a full queue
 * drops its oldest, counted and logged) and the watcher (list, then watch
 * from the list's resourceVersion, resumed where it stopped, listed again
 * on 410 Gone). The loop thread only copies into them under a mutex:
 * sup_kube_set_capacity, sup_kube_event, sup_kube_nodes_* never wait on
 * the network.
 *
 * It knows neither the core nor HTTP routes: main hands it capacity and
 * events (sup_cluster.c); the relay asks it through sup_kube_nodes_*. */
#ifndef SUP_KUBE_H
#define SUP_KUBE_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_directory.h"
#include "sup_kube_cfg.h"
#include "sup_kube_dir.h"

typedef struct sup_kube sup_kube;

typedef struct sup_kube_opts {
	const sup_kube_cfg *cfg;  /* read at start */
	const char *ns;           /* the Leases' and Events' namespace */
	const char *node;         /* this node's name: Lease sbx-node-<node> (<tag> if too long) */
	const char *url;          /* this supervisor's API, for the other nodes */
	unsigned lease_s;         /* leaseDurationSeconds; renewed every quarter of it */
	size_t queue_max;         /* Events held while the server is away */
	unsigned timeout_ms;      /* one request's deadline (not a watch's) */
} sup_kube_opts;

/* Check the server answers and these credentials may read the Lease (a
 * 401 or 403 fails the start, naming what was refused; a server that does
 * not answer is only a warning: the threads retry), then start both
 * threads. */
sup_kube *sup_kube_start(const sup_kube_opts *o, sbx_err *err);
/* Stop both threads (each within about a second) and free. Events still
 * queued are counted in the log, not sent. */
void sup_kube_free(sup_kube *k);

/* This node's capacity for its Lease; a change is written within a second
 * (not waiting for the renewal). Copied. */
void sup_kube_set_capacity(sup_kube *k, const sup_kube_capacity *c);

typedef enum sup_kube_ev_type { SUP_KUBE_NORMAL, SUP_KUBE_WARNING } sup_kube_ev_type;
/* A core/v1 Event about this node's Lease: reason ("SandboxCreated"),
 * message. Queued; the time it happened is kept (firstTimestamp). */
void sup_kube_event(sup_kube *k, sup_kube_ev_type type, const char *reason, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* The node directory (sup_directory.h) read from the Leases: ud is the
 * sup_kube. sup_kube_directory_ops holds the three below. The name and "http://host:port" of the node whose tag
 * (sup_nodeid_tag) is tag; -ENOENT for none with a live Lease, -ENOTUNIQ
 * for two (their names clash: refused). */
int sup_kube_nodes_find(void *ud, const char *tag, char *name, size_t name_cap, char *url,
			size_t url_cap);
/* A node other than this one, its Lease live, with a ready sandbox of
 * image: -ENOENT none. */
int sup_kube_nodes_pick(void *ud, const char *image, char *node, size_t cap);

/* Each other node with a live Lease, in turn (under the directory's lock:
 * fn must not call back): fn(fn_ud, name, url). */
void sup_kube_nodes_each(void *ud, void (*fn)(void *fn_ud, const char *name, const char *url),
			 void *fn_ud);
extern const sup_directory_ops sup_kube_directory_ops;

/* A copy of the directory as it is (for GET /v1/nodes): *out malloc'd,
 * *n entries; self: this node's name. */
int sup_kube_nodes_list(sup_kube *k, sup_kube_node **out, size_t *n);
const char *sup_kube_self(const sup_kube *k);

typedef struct sup_kube_stats {
	uint64_t leases_renewed;   /* successful Lease writes */
	uint64_t events_sent;
	uint64_t events_dropped;   /* pushed out of a full queue, or refused by the server */
	size_t events_queued;
	uint64_t watch_resumes;    /* watches started again from a resourceVersion */
	uint64_t relists;          /* lists (the first, and after a 410 Gone) */
	bool connected;            /* the last request was answered */
} sup_kube_stats;
void sup_kube_get_stats(sup_kube *k, sup_kube_stats *out);

#endif
