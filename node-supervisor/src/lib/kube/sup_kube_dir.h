/* The node directory: every supervisor's Lease as this node last saw it
 * (its API URL, when it renewed, its ready sandboxes per image and how
 * many it has handed out), and the answers the relay asks of it: a node's
 * URL, and a node to send a create to. Also the Lease's annotations, so
 * that writer and reader agree on one format.
 *
 * Pure: no I/O, no clock, no locking (the caller passes now and locks).
 * Bounded: SUP_KUBE_DIR_MAX nodes, SUP_KUBE_CAP_IMAGES images per node. */
#ifndef SUP_KUBE_DIR_H
#define SUP_KUBE_DIR_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "sbx/err.h"
#include "sup_nodeid.h"

#define SUP_KUBE_NODE_MAX 254  /* a node name: a DNS subdomain (253) */
#define SUP_KUBE_URL_MAX 256
#define SUP_KUBE_IMAGE_MAX 256
#define SUP_KUBE_CAP_IMAGES 16
#define SUP_KUBE_DIR_MAX 4096

/* The Lease's annotations and label (sup_kube_node_lease writes them). */
#define SUP_KUBE_ANN_NODE "sbx.dev/node"
#define SUP_KUBE_ANN_URL "sbx.dev/url"
#define SUP_KUBE_ANN_CAPACITY "sbx.dev/capacity"
#define SUP_KUBE_LABEL "sbx.dev/role"
#define SUP_KUBE_LABEL_VALUE "node-lease"

typedef struct sup_kube_capacity {
	struct {
		char image[SUP_KUBE_IMAGE_MAX];
		unsigned ready;
	} images[SUP_KUBE_CAP_IMAGES];
	size_t nimages;
	unsigned leased; /* sandboxes handed out */
} sup_kube_capacity;

typedef struct sup_kube_node {
	char name[SUP_KUBE_NODE_MAX];
	char tag[SUP_NODEID_TAG_MAX + 1]; /* its name's (sup_nodeid_tag), as its ids carry */
	char url[SUP_KUBE_URL_MAX];
	time_t renewed;       /* the Lease's renewTime (wall clock, seconds) */
	unsigned duration_s;  /* its leaseDurationSeconds */
	sup_kube_capacity cap;
	bool live;            /* set by sup_kube_nodes_list only: sup_kube_dir_live then */
} sup_kube_node;

typedef struct sup_kube_dir {
	sup_kube_node *v;
	size_t n, cap;
	char self[SUP_KUBE_NODE_MAX]; /* pick never answers this one */
	/* When this node saw the API server again after losing it: a lease
	 * renewed before then counts as renewed then, so no node is held to
	 * account for the time nobody could renew or read (0: never lost) */
	time_t sight_back;
} sup_kube_dir;

bool sup_kube_capacity_equal(const sup_kube_capacity *a, const sup_kube_capacity *b);
/* The capacity annotation's JSON: {"ready":{"IMAGE":N,...},"leased":N}. */
json_t *sup_kube_capacity_json(const sup_kube_capacity *c);
/* Its inverse; images beyond SUP_KUBE_CAP_IMAGES are left out. */
int sup_kube_capacity_parse(const char *text, sup_kube_capacity *out, sbx_err *err);

/* "2026-12-02T01:48:50.123456Z" (a MicroTime) and back (seconds). */
void sup_kube_micro_time(const struct timespec *ts, char *buf, size_t cap);
int sup_kube_parse_time(const char *s, time_t *out);

/* A Lease object (as the server answers it) into a directory entry:
 * -EINVAL when it is not one of ours or misses its node, URL or times. */
int sup_kube_node_from_lease(json_t *lease, sup_kube_node *out, sbx_err *err);

void sup_kube_dir_init(sup_kube_dir *d, const char *self);
void sup_kube_dir_release(sup_kube_dir *d);
/* Add or replace the node's entry: -ENOSPC past SUP_KUBE_DIR_MAX, -ENOMEM. */
int sup_kube_dir_put(sup_kube_dir *d, const sup_kube_node *n);
void sup_kube_dir_remove(sup_kube_dir *d, const char *name);

/* Another entry of n's tag under another name (self counted, as an entry
 * named d->self), or NULL: two such nodes' ids cannot be told apart. */
const char *sup_kube_dir_clash(const sup_kube_dir *d, const sup_kube_node *n);

/* A lease is live until renewed + duration (wall clock: a node whose lease
 * ran out is taken for gone, as Kubernetes takes a node). The live node
 * of this tag: its name and URL; -ENOENT none, -ENOTUNIQ two live nodes
 * of the tag (refused: a request could reach the wrong one). */
/* Whether n's lease runs at now (with d's sight_back). */
bool sup_kube_dir_live(const sup_kube_dir *d, const sup_kube_node *n, time_t now);
int sup_kube_dir_find(const sup_kube_dir *d, const char *tag, time_t now, char *name,
		      size_t name_cap, char *url, size_t url_cap);
/* Each live node other than self, in turn: fn(fn_ud, name, url). */
void sup_kube_dir_each(const sup_kube_dir *d, time_t now,
		       void (*fn)(void *fn_ud, const char *name, const char *url), void *fn_ud);
/* The live node other than self with the most ready sandboxes of image;
 * its count is lowered by one here, so that creates sent before its next
 * renewal spread over the nodes. -ENOENT: none has one ready. */
int sup_kube_dir_pick(sup_kube_dir *d, const char *image, time_t now, char *node, size_t cap);

#endif
