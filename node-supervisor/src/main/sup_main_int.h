/* What a run of the supervisor holds (sup_main.c's phases make it, its
 * drain frees it) and the phases that wire the route families and the HTTP
 * edge over it (sup_main_edge.c, which alone knows the families). Private
 * to main: no other part sees it. */
#ifndef SUP_MAIN_INT_H
#define SUP_MAIN_INT_H

#include <event2/event.h>
#include <limits.h>
#include <stdbool.h>

#include "sup_cgroup.h"
#include "sup_cluster.h"
#include "sup_config.h"
#include "sup_core.h"
#include "sup_http.h"
#include "sup_img_store.h"
#include "sup_metrics.h"
#include "sup_net.h"
#include "sup_policy.h"
#include "sup_pool.h"
#include "sup_relay.h"
#include "sup_restore.h"
#include "sup_runc.h"
#include "sup_secrets.h"
#include "sup_snap_store.h"
#include "sup_snaps.h"
#include "sup_tenants.h"
#include "sup_tls.h"
#include "sup_volumes.h"
#include "sup_workers.h"

/* The route families' contexts (sup_main_edge.c). */
struct sup_families;

/* Everything a run holds, made by the phases and freed by the drain. */
typedef struct sup_main {
	sup_config cfg;
	struct event_base *base;
	/* who may call */
	sup_policy *policy;
	char *token;
	char token_path[PATH_MAX];
	const char *tenants_file;
	sup_tenants_node node;     /* what tenants leave to the supervisor */
	sup_tenants *tenants;      /* the set in force; swapped on SIGHUP */
	sup_tls *tls;              /* --tls-cert: both listeners, the relay; reread on SIGHUP */
	char node_tag[SUP_NODEID_TAG_MAX + 1]; /* --node-name's, in this node's ids */
	char agent[PATH_MAX];
	/* the cluster (--kubeconfig, --kube-in-cluster) */
	sup_cluster *cluster;
	sup_kube *kube;            /* its connection, once started (GET /v1/nodes) */
	sup_pool_backend pods;     /* --backend kubernetes: the pools' seam */
	size_t npods;
	/* the runtimes */
	sup_cgroup_host cgroups;
	sup_net_cfg ncfg;
	char net_tag[9];
	sup_runc_cfg rcfg;
	char runsc_root[PATH_MAX];
	bool offered[SUP_ISO_N];
	sup_catalog *catalog;
	sup_restore *restore;
	/* the stores */
	char state_real[PATH_MAX];
	sup_img_store *store;
	sup_snap_store snapstore;
	/* the core */
	sup_net *net;
	sup_workers *workers;
	sup_workers *image_worker; /* imports, pulls, GC: never the runtime's threads */
	sup_volumes *volumes;
	sup_secrets *secrets;      /* --secrets-key: the tenants' secrets; NULL: none */
	sup_core *core;
	sup_pool_spec specs[SUP_MAX_POOLS];
	int nspecs;
	sup_pools *pools;
	sup_snaps *snaps;          /* its fork-layer sweeps stop with the HTTP edge */
	sup_relay relay;
	sup_dir_static *directory;
	struct sup_families *fam;
	/* the edge */
	sup_http *http;
	sup_http *metrics;         /* --metrics-listen: /metrics without a token */
	sup_ctab *requests;        /* answered requests by route and status */
	/* the signals and the stop */
	struct event *sig_term, *sig_int, *sig_usr2, *sig_hup, *grace;
	unsigned drain_s;
	bool stopping;
	bool handover;             /* leave the sandboxes to the next start */
	bool destroy_on_exit;      /* --destroy-on-exit: SIGTERM destroys too */
	bool drained;
} sup_main;

/* The route families' contexts, the relay's among them (its cluster key,
 * the static directory of --peer). */
int sup_main_families(sup_main *m, sbx_err *err);
/* What the families keep (MCP sessions, OpenSandbox's records), after the
 * edge is gone. */
void sup_main_families_free(sup_main *m);
/* The HTTP edge (and --metrics-listen's) over the families. */
int sup_main_edge(sup_main *m, sbx_err *err);

#endif
