/* The node directory: which node an id's tag names and where its
 * supervisor answers, and which node has ready sandboxes of an image. The
 * relay asks it through a struct of ops and its ud, chosen at start: a
 * static one from --peer NAME=URL (here, sup_dir_static), or one read back
 * from the cluster's Leases (the Kubernetes backend's sup_kube_nodes_find
 * / sup_kube_nodes_pick, same signatures). A node is found by the tag of
 * its name (sup_nodeid_tag), derived, never stored: two nodes of one tag
 * are refused (at start for --peer, on each lookup for the Leases). Ops
 * run on the loop thread and must not block: what they answer is what
 * they know now. */
#ifndef SUP_DIRECTORY_H
#define SUP_DIRECTORY_H

#include <stddef.h>

#include "sbx/err.h"

struct event_base;

typedef struct sup_directory_ops {
	/* The node whose tag is tag: its name and "http://host:port";
	 * -ENOENT none (or gone), -ENOTUNIQ more than one (names clash). */
	int (*find)(void *ud, const char *tag, char *name, size_t name_cap, char *url,
		    size_t url_cap);
	/* a node other than this one with ready capacity for IMAGE, -ENOENT none */
	int (*pick)(void *ud, const char *image, char *node, size_t cap);
	/* every node other than this one it holds live, in turn: fn(fn_ud,
	 * name, url) (fn must not call the directory) */
	void (*each)(void *ud, void (*fn)(void *fn_ud, const char *name, const char *url),
		     void *fn_ud);
} sup_directory_ops;

typedef struct sup_directory {
	const sup_directory_ops *ops; /* NULL: no directory (a node alone) */
	void *ud;
} sup_directory;

/* ---- the static directory: --peer NAME=URL ---- */

/* Each peer's capacity is asked every SUP_DIR_POLL_MS at its relay door
 * (GET /relay/v1/capacity with the cluster key); pick answers from the last
 * answers, the most ready first, and counts its picks against them until
 * the next. */
#define SUP_DIR_POLL_MS 1000

typedef struct sup_dir_static sup_dir_static;
extern const sup_directory_ops sup_dir_static_ops;

/* peers: "NAME=http://HOST:PORT" (HOST numeric or a name), none of them
 * self, no two of one tag (nor of self's); key: the cluster key the polls
 * carry. NULL with err. */
sup_dir_static *sup_dir_static_new(struct event_base *base, const char *self,
				   const char *const *peers, size_t npeers, const char *key,
				   sbx_err *err);
void sup_dir_static_free(sup_dir_static *d);

#endif
