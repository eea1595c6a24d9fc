/* The Kubernetes backend's pods (--backend kubernetes): a warm pool's
 * sandboxes as pods of a template (sup_kube_tmpl) bound to this node.
 *
 * make, unmake and check block on the API server and the host: a pool
 * worker's, never the loop's. make creates the pod (spec.nodeName, the
 * contract's labels), waits (bounded) for its agent's socket in the
 * agents' folder (sup_kube_agents: inotify), checks the pod against the
 * API server (that UID, this node, the namespace, our labels, not being
 * deleted), connects to the socket without following links, takes the
 * agent's pid from SO_PEERCRED and checks that the listener sees the
 * pod's folder as its agent-socket mount; on any doubt the pod is deleted.
 * unmake deletes it (the kubelet finishes it). check is the host's look
 * after the agent's reset (sup_runc_check_pod).
 *
 * mark only queues a merge patch of the pod's labels and annotations
 * (state, tenant, sandbox id, expiry) for a thread of its own, the newest
 * per pod replacing an older one not sent yet (sup_kube_queue), retried
 * with backoff while the server is away: the loop never waits on it.
 *
 * Events about its pods (core/v1, in their namespace: a pod that failed
 * to start, one whose identity was in doubt, one deleted after a failed
 * reset or check) go through the same queue and thread, coalesced per
 * reason and template (sup_kube_events), so neither the loop nor a make
 * waits on them.
 *
 * It knows no pools, no core, no HTTP; sup_cluster wires it into the
 * pools' backend seam (sup_pool.h). */
#ifndef SUP_KUBE_PODS_H
#define SUP_KUBE_PODS_H

#include <stddef.h>
#include <time.h>

#include "sbx/err.h"
#include "sup_cgroup.h"
#include "sup_kube_cfg.h"
#include "sup_kube_tmpl.h"
#include "sup_runc.h"

typedef struct sup_kube_pods sup_kube_pods;

typedef struct sup_kube_pods_opts {
	const sup_kube_cfg *cfg;
	const char *ns;              /* the sandbox pods' namespace */
	const char *node;            /* spec.nodeName and the sbx.dev/node label */
	const char *agent_dir;       /* this node's agents' folder */
	const sup_kube_tmpl *tmpls;  /* borrowed, for as long as the pods live */
	size_t ntmpls;
	unsigned ready_timeout_ms;   /* a pod created until its agent listens */
	unsigned timeout_ms;         /* one API request */
	const sup_cgroup_host *cgroup;
	size_t queue_max;            /* label patches held while the server is away */
} sup_kube_pods_opts;

/* Start the agents' watch and the patch thread. */
sup_kube_pods *sup_kube_pods_start(const sup_kube_pods_opts *o, sbx_err *err);
/* Stop both threads and free (patches not sent are logged). */
void sup_kube_pods_free(sup_kube_pods *p);

/* Delete every pod of this node an earlier run left (labelled ours and
 * this node's) but those named in keep: *n how many. Blocking (start). */
int sup_kube_pods_sweep(sup_kube_pods *p, const char *const *keep, size_t nkeep, unsigned *n,
			sbx_err *err);

/* A pod of template named id (the sandbox id), served: box (id,
 * container_id: the pod's name, dir: its folder in the agents' folder,
 * socket_path, init_pid: the agent's) and *fd, the agent's connected
 * socket (non-blocking, taken by the caller). -EINVAL an unknown
 * template; else what failed, the pod deleted. Blocking. */
int sup_kube_pods_make(sup_kube_pods *p, const char *id, const char *tmpl, sup_runc_box *box,
		       int *fd, sbx_err *err);
/* Take back pod name (sandbox id) an earlier run made: the pod as the API
 * server has it now is this node's, ours and of a template served, not
 * being deleted; its agent's socket is there and its listener the pod's
 * agent. box and *fd as make's. Nothing is deleted here (what is not taken
 * back is the sweep's). Blocking (start-up). */
int sup_kube_pods_adopt(sup_kube_pods *p, const char *id, const char *name, sup_runc_box *box, int *fd,
			sbx_err *err);
/* Makes still waiting for their agent end (-ECANCELED, their pods
 * deleted) within about a second; later makes fail at once. */
void sup_kube_pods_stop_makes(sup_kube_pods *p);
/* Delete its pod (a pod already gone is no error). Blocking. */
int sup_kube_pods_unmake(sup_kube_pods *p, const sup_runc_box *box, sbx_err *err);
/* A Warning Event (reason, why) about box's pod of template, which the
 * pools delete on doubt (a failed reset or check, its agent lost).
 * Never blocks. */
void sup_kube_pods_doubt(sup_kube_pods *p, const char *tmpl, const sup_runc_box *box, const char *reason,
			 const char *why);
/* The host's check after the agent's reset of a pod of template. Blocking. */
int sup_kube_pods_check(sup_kube_pods *p, const char *tmpl, const sup_runc_box *box, sbx_err *err);
/* The folders a reset empties in a pod of template (its emptyDirs). */
size_t sup_kube_pods_reset_paths(sup_kube_pods *p, const char *tmpl, const char *const **paths);

typedef struct sup_kube_mark {
	const char *state;     /* "ready", "leased", "resetting" */
	const char *tenant;    /* leased: its tenant; else NULL */
	const char *sandbox;   /* leased: the sandbox id; else NULL */
	time_t expires_at;     /* leased: when it expires; else 0 */
} sup_kube_mark;
/* Queue the labels and annotations of pod. Never blocks. */
void sup_kube_pods_mark(sup_kube_pods *p, const char *pod, const sup_kube_mark *m);

/* The merge patch of a mark (JSON text, malloc'd; exposed for tests). */
char *sup_kube_pods_mark_patch(const sup_kube_mark *m);

#endif
