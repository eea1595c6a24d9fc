/* Warm pools and the sandbox lifecycle engine.
 *
 * One pool per (image, isolation) pair, each keeping its own number of
 * ready sandboxes (agent connected, handshake done; 0: every create is
 * cold) and refilling in the background; makes and unmakes sandboxes by running
 * the runtime backend (sup_runc) on worker threads, never on the loop.
 * Acquire hands out a ready sandbox in O(1); with none ready it queues a
 * cold create at the front of the workers' queue and answers later.
 * Owns every sup_sandbox (allocation, lifecycle fields, freeing) and the
 * waiting acquires. With a network (sup_net), every runc sandbox is plumbed
 * while it is made (a slot taken when its create is queued, its links made
 * on the worker after the container, its firewall chain ready before it
 * joins the pool, rejecting everything until the core loads a policy) and
 * unplumbed with it. It must not know about HTTP or the user-facing
 * registry; it tells its owner about a handed-out sandbox whose agent went
 * away through hooks. Loop thread only. */
#ifndef SUP_POOL_H
#define SUP_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/err.h"
#include "sup_agent.h"
#include "sup_metrics.h"
#include "sup_runc.h"
#include "sup_sandbox.h"
#include "sup_workers.h"

struct event_base;
struct sup_net;
struct sup_catalog;
struct sup_catalog_rec;
typedef struct sup_pools sup_pools;
typedef struct sup_acquire sup_acquire;

/* A backend other than the local runtime (sup_runc) for every pool: the
 * Kubernetes backend's pods (sup_kube_pods, wired by sup_cluster). An
 * image is then a backend's template name; make, unmake and check run on
 * the workers (they block), mark on the loop (it must not). Reuse after
 * reset is the only release: the pools' cfg.reuse is set with it. */
typedef struct sup_pool_backend {
	/* A new sandbox id of image: box (socket_path, init_pid, container_id
	 * filled) and *fd, the agent's connected socket (taken). */
	int (*make)(void *ud, const char *id, const char *image, sup_runc_box *box, int *fd, sbx_err *err);
	int (*unmake)(void *ud, const sup_runc_box *box, sbx_err *err);
	/* Take back sandbox id, named name by the backend (the catalog's
	 * container_id), an earlier run made: box and *fd as make's. Start-up
	 * only (it blocks). */
	int (*adopt)(void *ud, const char *id, const char *name, sup_runc_box *box, int *fd, sbx_err *err);
	/* The host's check after the agent's reset (0: nothing of the last
	 * tenant is left). */
	int (*check)(void *ud, const char *image, const sup_runc_box *box, sbx_err *err);
	/* The folders the agent's reset empties in a sandbox of image. */
	size_t (*reset_paths)(void *ud, const char *image, const char *const **paths);
	/* Its state changed ("ready", "leased", "resetting"): sb's owner
	 * fields (tenant, expires_at) are set when leased. Never blocks. */
	void (*mark)(void *ud, const sup_sandbox *sb, const char *state);
	/* sb (of image) is destroyed on doubt: reason (CamelCase:
	 * "ResetFailed", "AgentLost") and why. Never blocks. NULL: none. */
	void (*doubt)(void *ud, const char *image, const sup_runc_box *box, const char *reason, const char *why);
	/* The pools stop: makes still waiting end (-ECANCELED) soon. */
	void (*stop)(void *ud);
	/* A name for messages ("kubernetes"). */
	const char *name;
	void *ud;
} sup_pool_backend;

typedef struct sup_pools_cfg {
	const sup_runc_cfg *runc;
	struct sup_img_store *store;   /* NULL: host and rootfs folders only */
	const sup_pool_spec *specs;    /* distinct (image, isolation) pairs: host, rootfs
					* folders, store names */
	size_t nspecs;
	unsigned max_sandboxes;        /* alive at once, all states */
	unsigned acquire_timeout_ms;
	unsigned handshake_timeout_ms; /* container up until the agent's hello */
	sup_agent_opts agent;          /* deadlines, ping and limits of every agent connection */
	struct sup_net *net;           /* egress plumbing for every sandbox; NULL: loopback only */
	struct sup_catalog *catalog;   /* what is made is recorded (sup_catalog.h); NULL: nothing */
	const char *node;              /* --node-name's tag: in every new sandbox id (sup_nodeid.h) */
	/* Reuse after reset (sup_pools_release): runc sandboxes a pool needs
	 * again are reset and checked instead of destroyed and made anew. */
	bool reuse;
	const char *const *reset_paths; /* the folders reset empties (absolute) */
	size_t nreset_paths;
	unsigned reset_timeout_ms;     /* the agent's kills; 0: the protocol's default */
	/* NULL: runc sandboxes (sup_runc). Else every pool's sandboxes are
	 * the backend's: no store, no network, no seeds, no freeze, no
	 * usage, no limits but the pools' own (-ENOSYS for each). */
	const sup_pool_backend *backend;
	/* Pools that size themselves (sup_pool_sizer.c): a pool of size > 0
	 * keeps as many ready as its demand asks (its largest burst of
	 * acquires in one second over the window, or its rate times a cold
	 * create's time), up to pool_max, within max_sandboxes and the
	 * node's memory, and back to its size once the window is quiet.
	 * pool_max 0 (or not above a pool's size): the pool keeps its size. */
	unsigned pool_max;
	unsigned pool_window_s;        /* > 0 with pool_max */
} sup_pools_cfg;

typedef struct sup_pools_hooks {
	/* A RUNNING sandbox's agent connection was lost; it is now FAILED
	 * (sb->reason says why). A pooled one is replaced instead. */
	void (*on_failed)(sup_sandbox *sb, const sbx_err *why, void *ud);
	/* A handed-out sandbox given to sup_pools_adopt answered (rc 0: now
	 * RUNNING) or not (rc < 0, why: it is being destroyed; the owner
	 * releases its fields now). */
	void (*on_adopted)(sup_sandbox *sb, int rc, const sbx_err *why, void *ud);
	void *ud;
} sup_pools_hooks;

/* -ENOENT (err names it) when a pooled store image is not in the store. */
sup_pools *sup_pools_new(struct event_base *base, sup_workers *workers, const sup_pools_cfg *cfg,
			 const sup_pools_hooks *hooks, sbx_err *err);
/* Start filling every pool. */
void sup_pools_start(sup_pools *p);

/* Called once with the sandbox (now RUNNING) or an error: -EAGAIN none
 * could be made in time / creation failed, -ESHUTDOWN. */
typedef void (*sup_acquire_cb)(sup_sandbox *sb, int rc, const sbx_err *err, void *ud);

/* With a backend, a create's limits are its template's: res (the request's,
 * its tenant's defaults where given lacks a SUP_RES_* bit) becomes the
 * pool's figures, and a figure named in given above the pool's is -EINVAL
 * (the message names it and the template's). Without one: 0, res as is. */
int sup_pools_fit(sup_pools *p, const char *image, sup_isolation isolation, unsigned given, sup_resources *res,
		  sbx_err *err);

/* Take a ready sandbox of image and isolation (image: host, a pooled
 * rootfs folder, or a ref or digest of the store: a store image without a
 * pool of that isolation gets one of size 0, whose every create is cold)
 * and give it the limits res (every sandbox is made with the pools'
 * defaults; the ones that differ are written into its cgroup and disk as it
 * is handed out: sup_runc_set_limits). Returns 0 with *now set (ready one,
 * no callback), or 0 with *wait set (cb runs later, cold create queued), or
 * a negative errno: -EINVAL no pool of that image and isolation (nor an
 * image of the store), -EAGAIN at max_sandboxes or when the limits could
 * not be applied (that sandbox is destroyed), -ESHUTDOWN. */
int sup_pools_acquire(sup_pools *p, const char *image, sup_isolation isolation,
		      const sup_resources *res, sup_acquire_cb cb, void *ud, sup_sandbox **now,
		      sup_acquire **wait, sbx_err *err);
/* A sandbox made for this request alone, its writable layer from seed
 * (copied; sup_runc.h): always a cold create, queued at the front, never
 * pooled nor given to another request (destroyed when the requester
 * withdrew). Its disk is made with res->disk (seed->disk is ignored: the
 * layer is unpacked against the figure asked for). cb runs once: with the
 * sandbox (RUNNING, limits res), or the create's own error (-EILSEQ a
 * refused archive, -ENOSPC over its disk,
 * -ESHUTDOWN). -EINVAL / -EAGAIN as sup_pools_acquire. */
int sup_pools_acquire_seeded(sup_pools *p, const char *image, sup_isolation isolation,
			     const sup_resources *res, const sup_runc_seed *seed, sup_acquire_cb cb,
			     void *ud, sup_acquire **wait, sbx_err *err);
/* Withdraw a waiting acquire (its requester went away); cb will not run. */
void sup_pools_acquire_cancel(sup_acquire *a);

typedef void (*sup_destroy_cb)(sup_sandbox *sb, int rc, const sbx_err *err, void *ud);
/* Close the agent connection and run the runtime destroy on a worker;
 * urgent: ahead of refills (someone waits). cb (optional) runs when it is
 * done, then the sandbox is freed. The caller must have released its own
 * fields of sb. The sandbox must be READY, RUNNING or FAILED. */
void sup_pools_destroy(sup_pools *p, sup_sandbox *sb, bool urgent, sup_destroy_cb cb, void *ud);

/* The owner is done with a handed-out sandbox (RUNNING or FAILED). With
 * cfg->reuse, a runc sandbox of a pool with fewer than twice its size
 * ready or coming (plus its waiters), made for no request alone, paused by nobody, without
 * egress plumbing or a root owner, and reusable_by_owner (the owner's own
 * reasons: volumes mounted into it) is reset instead of destroyed: cb
 * runs at once (rc 0: it is no longer the owner's; the caller must have
 * released its fields), then the agent's reset and the host's check
 * (sup_runc_clean.h) run, and the sandbox joins its pool's ready ones, or
 * on any doubt is destroyed and another made. Anything else goes to
 * sup_pools_destroy. */
void sup_pools_release(sup_pools *p, sup_sandbox *sb, bool reusable_by_owner, bool urgent, sup_destroy_cb cb,
		       void *ud);

/* The owner's fields of a handed-out sandbox changed (its tenant and
 * lifetime at create, a new timeout): told to the backend (mark
 * "leased"); nothing without one. */
void sup_pools_note(sup_pools *p, const sup_sandbox *sb);

/* Freeze (frozen: sb->paused) or thaw a RUNNING sandbox: its processes
 * (sup_runc_freeze) and its agent connection's clocks (sup_agent_hold)
 * together, so that a paused sandbox is not taken for dead. Idempotent.
 * -EBUSY when the freeze did not finish (it is undone). */
int sup_pools_freeze(sup_pools *p, sup_sandbox *sb, bool frozen, sbx_err *err);

/* Take back a sandbox an earlier run made (rec from the catalog, box from
 * sup_runc_adopt or the backend's adopt, with fd its agent's connected
 * socket, taken, or -1: dialled at box->socket_path), before
 * sup_pools_start: into the pool of its image and
 * isolation (a cold pool of its digest when none serves it now), its agent
 * connected again. A pooled one (MADE) joins the ready list once its agent
 * answers; a handed-out one (RUNNING) goes to the owner through on_adopted,
 * whose fields of sb (tenant, env, ...) the caller sets now. One with
 * egress plumbing gets its slot again, plumbed anew into its running
 * namespace (the router was made anew), rejecting everything until the
 * owner loads its policy (sup_net_apply). < 0 when it cannot be taken back
 * (an image no longer served, egress without a network now, plumbing that
 * failed): nothing is kept and the container is the sweep's. A paused
 * one (rec->paused) is thawed for its agent's handshake and frozen again
 * as it answers. */
int sup_pools_adopt(sup_pools *p, const struct sup_catalog_rec *rec, const sup_runc_box *box, int fd,
		    sup_sandbox **out, sbx_err *err);

/* Stop refilling, fail waiters with -ESHUTDOWN, destroy every sandbox the
 * pools hold (ready, connecting, and those still being created once their
 * create finishes). done runs when no sandbox is alive and no worker job is
 * left. Handed-out sandboxes must be destroyed by their owner. */
void sup_pools_shutdown(sup_pools *p, void (*done)(void *ud), void *ud);
/* Stop refilling and fail waiters as sup_pools_shutdown, but leave every
 * sandbox to the next start (its catalog rows stay): done runs when no
 * worker job is left (creates under way are finished and kept). */
void sup_pools_handover(sup_pools *p, void (*done)(void *ud), void *ud);
void sup_pools_free(sup_pools *p);

typedef struct sup_pool_stats {
	const char *image;
	sup_isolation isolation;
	unsigned size;     /* the operator's: the floor */
	unsigned target;   /* kept ready now: size, or what demand asks */
	unsigned max;      /* the most it may grow to (size: it does not) */
	unsigned peak;     /* the largest burst of acquires of one second in the window */
	const char *why;   /* what set target */
	unsigned ready;
	unsigned creating; /* creating or connecting */
	unsigned waiting;  /* acquires waiting */
	const sup_hist *acquire;     /* an acquire until its sandbox was handed out */
	const sup_hist *cold_create; /* a create queued until its agent was ready */
	const sup_hist *reset;       /* a release until the sandbox was ready again */
	unsigned long reused;        /* sandboxes handed out again after a reset */
	unsigned long reset_failed;  /* resets or checks that failed: destroyed instead */
} sup_pool_stats;

/* Keep size ready sandboxes of image and isolation from now on (a pool
 * is made for a store image that has none; host and rootfs folders need
 * theirs from the flags): ready ones beyond it are destroyed, creates in
 * flight beyond it too once ready, a larger size is filled in the
 * background. A store image's pool of size > 0 pins it. *out: the pool
 * now. -EINVAL an image or isolation not served, -ENOENT an image deleted
 * meanwhile, -ESHUTDOWN. */
int sup_pools_set_size(sup_pools *p, const char *image, sup_isolation isolation, unsigned size,
		       sup_pool_stats *out, sbx_err *err);

size_t sup_pools_count(const sup_pools *p);
void sup_pools_stats(const sup_pools *p, size_t i, sup_pool_stats *out);
unsigned sup_pools_alive(const sup_pools *p);
/* The image a sandbox was made from, and its isolation. */
const char *sup_pools_image_of(const sup_sandbox *sb);
sup_isolation sup_pools_isolation_of(const sup_sandbox *sb);
/* A store image's digest ("" for host and rootfs folders). */
const char *sup_pools_digest_of(const sup_sandbox *sb);
/* What its image's config gives every command: env under the sandbox's,
 * the default user (NULL: the sandbox user) and folder (NULL: the agent's). */
void sup_pools_image_config(const sup_sandbox *sb, const sup_env **env, const char **user,
			    const char **workdir);
/* What a made sandbox uses now (cgroup files and a statfs: no process). */
int sup_pools_usage(const sup_pools *p, const sup_sandbox *sb, sup_usage *u, sbx_err *err);

#endif
