/* The supervisor in a Kubernetes cluster (--kubeconfig, --kube-in-cluster):
 * reads the settings, starts the kube module (sup_kube) once the API
 * listens, hands it this node's capacity (a timer on the loop, every
 * second: ready sandboxes per image, handed-out count) and the core's
 * sandbox lifecycle as Events (the core's on_life hook). Wiring only, for
 * main: the kube module knows no core, the core no Kubernetes. */
#ifndef SUP_CLUSTER_H
#define SUP_CLUSTER_H

#include <stdint.h>

#include "sbx/err.h"
#include "sup_cgroup.h"
#include "sup_config.h"
#include "sup_core.h"
#include "sup_kube.h"
#include "sup_pool.h"

struct event_base;
typedef struct sup_cluster sup_cluster;

/* Reads the kubeconfig or the service account (a bad one fails here);
 * *out NULL when no cluster flag was given. Nothing is sent yet. */
int sup_cluster_new(const sup_config *cfg, sup_cluster **out, sbx_err *err);
/* The core's on_life hook (ud: the sup_cluster, may be NULL). */
void sup_cluster_on_life(void *ud, sup_core_life what, const char *id, const char *image,
			 const char *tenant);
/* Start: the Lease, Events and the directory (sup_kube_start: refused
 * credentials fail it), and the capacity timer. port: the API's. */
int sup_cluster_start(sup_cluster *cl, struct event_base *base, sup_core *core, uint16_t port,
		      sbx_err *err);
/* --backend kubernetes, before the catalog is read: the --pod-template
 * files read (a bad one fails here), the pods module started
 * (sup_kube_pods: the agents' folder watched, the label writer), *be
 * filled for the pools' seam and the restore, and specs[] (*nspecs,
 * at most SUP_MAX_POOLS) a pool per template, sized by --pool-images
 * NAME=N, else --pool-size. */
int sup_cluster_pods_start(sup_cluster *cl, const sup_config *cfg, const sup_cgroup_host *cgroup,
			   sup_pool_backend *be, sup_pool_spec *specs, size_t *nspecs, sbx_err *err);
/* Delete this node's pods an earlier run left but those named in keep
 * (taken back from the catalog); a failure is only logged. */
void sup_cluster_pods_sweep(sup_cluster *cl, const char *const *keep, size_t nkeep);
/* NULL until started (and without a cluster). */
sup_kube *sup_cluster_kube(const sup_cluster *cl);
/* The credentials read, and the Leases' namespace (for the node auth). */
const sup_kube_cfg *sup_cluster_kube_cfg(const sup_cluster *cl);
const char *sup_cluster_namespace(const sup_cluster *cl);
void sup_cluster_free(sup_cluster *cl);

#endif
