/* The pools' making of sandboxes: create jobs on the workers (the
 * runtime's or the backend's make, the baseline for reuse, the egress
 * plumbing), their failures and the refills' backoff, and the agent's
 * connection of a new (or adopted) sandbox. Hands a sandbox that is up to
 * sup_pool.c (sup_pool_sandbox_ready); never answers a requester itself
 * but through it. Loop thread, but for create_run (a worker). */
#include <errno.h>
#include <event2/event.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sbx/cleanup.h"
#include "sup_agent.h"
#include "sup_catalog.h"
#include "sup_img_store.h"
#include "sup_log.h"
#include "sup_net.h"
#include "sup_nodeid.h"
#include "sup_pool_int.h"
#include "sup_rtnl.h"
#include "sup_runc_clean.h"

typedef struct create_job {
	sup_job job;
	sup_pools *pools;
	sup_sandbox *sb;
	char id[SUP_ID_MAX];
	char image[SUP_IMG_DIGEST_LEN + 1 > PATH_MAX ? SUP_IMG_DIGEST_LEN + 1 : PATH_MAX];
	sup_isolation isolation;
	sup_runc_seed *seed; /* NULL: an empty writable layer */
	sup_runc_box box;
	unsigned slot;   /* network slot to plumb, 0: none */
	sup_rtnl *nl;    /* plumbed: a socket in the sandbox's namespace */
	bool baseline;   /* take the baseline for reuse */
	sup_runc_baseline *base;
	int fd;          /* a backend's: the agent's connected socket, -1: none */
	int rc;
	sbx_err err;
} create_job;

/* ---- failures of creation ---- */

void sup_pool_on_backoff_end(evutil_socket_t fd, short what, void *ud)
{
	sup_pool *pool = ud;
	(void)fd;
	(void)what;
	pool->backoff = false;
	sup_pool_ensure_fill(pool);
}

static void create_failed(sup_pool *pool, const char *id, const sbx_err *err)
{
	sup_pools *p = pool->owner;
	pool->fail_streak++;
	sup_error("sandbox %s: create for image %s (%s) failed: %s", id, pool->image,
		  sup_isolation_names[pool->isolation], err->msg);
	/* A waiter that no other create in flight will serve gets the error. */
	if (pool->nwaiters > pool->creating) {
		char msg[SBX_ERR_MSG_MAX + 32];
		snprintf(msg, sizeof(msg), "could not create a sandbox: %s", err->msg);
		sup_pool_waiter_fail(TAILQ_FIRST(&pool->waiters), -EAGAIN, msg);
	}
	if (!p->shutting_down && !pool->backoff) {
		unsigned shift = pool->fail_streak > 6 ? 6 : pool->fail_streak - 1;
		unsigned ms = 500u << shift; /* 0.5 s .. 32 s */
		struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
		pool->backoff = true;
		evtimer_add(pool->backoff_timer, &tv);
		sup_warn("pool %s (%s): refills paused for %u ms after %u failure(s)", pool->image,
			 sup_isolation_names[pool->isolation], ms, pool->fail_streak);
	}
}

/* A create of sb failed: a seeded one's requester gets the error as it is
 * (a refused archive is no reason to pause the pool's refills), but a
 * runtime or an agent that did not start is "creation failed" as for any
 * other create (-EAGAIN: 503 unavailable, worth a retry), not an internal
 * error. */
static void create_failed_sb(sup_sandbox *sb, const sbx_err *err)
{
	if (!sb->seeded) {
		create_failed(sb->pool, sb->id, err);
		return;
	}
	sup_warn("sandbox %s: seeded create failed: %s", sb->id, err->msg);
	sbx_err e = *err;
	if (e.code == 0 || e.code == -EIO || e.code == -ECHILD || e.code == -ETIMEDOUT)
		e.code = -EAGAIN;
	sup_pool_seeded_fail(sb, e.code, &e);
}

/* ---- agent connection of a new or pooled sandbox ---- */

/* A new sandbox up, its image's service started: ready (or, when the
 * pools stop meanwhile, destroyed; lost: its agent's on_lost follows). */
static void sandbox_up(sup_sandbox *sb, bool lost)
{
	sup_pools *p = sb->pool->owner;
	if (lost)
		return;
	if (p->shutting_down && !p->handover) {
		sb->pool->creating--;
		sup_pool_start_destroy(p, sb, false, NULL, NULL);
		return;
	}
	sup_pool_sandbox_ready(sb);
	sup_pool_ensure_fill(sb->pool);
}

static void agent_on_ready(sup_agent *a, void *ud)
{
	sup_sandbox *sb = ud;
	(void)a;
	sup_pools *p = sb->pool->owner;
	if (p->shutting_down && !p->handover) {
		sb->pool->creating--;
		sup_pool_start_destroy(p, sb, false, NULL, NULL);
		return;
	}
	if (sb->adopting) {
		/* a handed-out sandbox of an earlier run: back to its owner */
		sb->adopting = false;
		sb->pool->creating--;
		sb->state = SUP_SB_RUNNING;
		sup_info("sandbox %s: re-adopted (agent %s)%s", sb->id, sup_agent_peer(a),
			 sb->paused ? ", paused" : "");
		sbx_err e;
		if (sb->paused && sup_pools_freeze(p, sb, true, &e) < 0) {
			sb->paused = false;
			sup_error("sandbox %s: not frozen again, it runs: %s", sb->id, e.msg);
		}
		sup_pool *pool = sb->pool;
		if (p->hooks.on_adopted)
			p->hooks.on_adopted(sb, 0, NULL, p->hooks.ud);
		sup_pool_ensure_fill(pool); /* it counted as one being made until now */
		return;
	}
	sup_info("sandbox %s: up (agent %s)", sb->id, sup_agent_peer(a));
	if (sup_pool_service_start(sb, sandbox_up) == 0)
		sandbox_up(sb, false);
}

static void agent_on_lost(sup_agent *a, const sbx_err *why, void *ud)
{
	sup_sandbox *sb = ud;
	sup_pool *pool = sb->pool;
	sup_pools *p = pool->owner;
	sup_agent_free(a);
	sb->agent = NULL;
	switch (sb->state) {
	case SUP_SB_CONNECTING:
		pool->creating--;
		if (sb->adopting) {
			sup_warn("sandbox %s: not re-adopted, its agent does not answer: %s", sb->id,
				 why->msg);
			if (p->hooks.on_adopted)
				p->hooks.on_adopted(sb, why->code ? why->code : -ECONNRESET, why, p->hooks.ud);
		} else {
			create_failed_sb(sb, why);
			sup_pool_doubt(p, sb, "FailedStart", why->msg);
		}
		sup_pool_start_destroy(p, sb, false, NULL, NULL);
		sup_pool_ensure_fill(pool);
		break;
	case SUP_SB_READY:
		sup_warn("sandbox %s: agent connection lost while pooled: %s", sb->id, why->msg);
		sup_pool_doubt(p, sb, "AgentLost", why->msg);
		TAILQ_REMOVE(&pool->ready, sb, ready_link);
		pool->nready--;
		sup_pool_start_destroy(p, sb, false, NULL, NULL);
		sup_pool_ensure_fill(pool);
		break;
	case SUP_SB_RUNNING:
		sup_warn("sandbox %s: failed: %s", sb->id, why->msg);
		sb->state = SUP_SB_FAILED;
		snprintf(sb->reason, sizeof(sb->reason), "%s", why->msg);
		if (p->hooks.on_failed)
			p->hooks.on_failed(sb, why, p->hooks.ud);
		break;
	default:
		break;
	}
}

const sup_agent_cbs sup_pool_agent_cbs = {
	.on_ready = agent_on_ready,
	.on_lost = agent_on_lost,
};

/* ---- create ---- */

static void create_run(sup_job *job)
{
	create_job *cj = (create_job *)job;
	sbx_err_clear(&cj->err);
	if (atomic_load(&cj->pools->stopping)) {
		cj->rc = sbx_err_set(&cj->err, -ECANCELED, "supervisor is shutting down");
		return;
	}
	const sup_pool_backend *be = cj->pools->cfg.backend;
	if (be) {
		cj->rc = be->make(be->ud, cj->id, cj->image, &cj->box, &cj->fd, &cj->err);
		return;
	}
	cj->rc = sup_runc_create_seeded(cj->pools->cfg.runc, cj->id, cj->image, cj->isolation,
					cj->seed, &cj->box, &cj->err);
	if (cj->rc == 0 && cj->baseline) {
		/* without one it is still served, only never reused */
		sbx_err e;
		if (sup_runc_baseline_take(cj->pools->cfg.runc, &cj->box, cj->pools->cfg.reset_paths,
					   cj->pools->cfg.nreset_paths, &cj->base, &e) < 0)
			sup_warn("sandbox %s: will not be reused: %s", cj->id, e.msg);
	}
	if (cj->rc < 0 || !cj->slot)
		return;
	cj->rc = sup_net_plumb(cj->pools->cfg.net, cj->slot, cj->box.init_pid, &cj->nl, &cj->err);
	if (cj->rc < 0) {
		sbx_err e;
		if (sup_runc_destroy(cj->pools->cfg.runc, &cj->box, &e) < 0)
			sbx_err_wrap(&cj->err, "(and the container stays: %s)", e.msg);
		sbx_err_wrap(&cj->err, "create sandbox %s", cj->id);
	}
}

static void create_done(sup_job *job)
{
	create_job *cj = (create_job *)job;
	sup_pools *p = cj->pools;
	sup_sandbox *sb = cj->sb;
	sup_pool *pool = sb->pool;
	if (cj->rc < 0) {
		pool->creating--;
		sup_pool_forget(p, sb->id);
		if (sb->net_slot)
			sup_net_slot_put(p->cfg.net, sb->net_slot);
		if (cj->rc != -ECANCELED || sb->seeded)
			create_failed_sb(sb, &cj->err);
		free(cj->seed);
		TAILQ_REMOVE(&p->all, sb, all_link);
		p->nalive--;
		sup_pool_sb_free(sb);
		sup_runc_baseline_free(cj->base);
		free(cj);
		sup_pool_ensure_fill(pool);
		sup_pool_maybe_done(p);
		return;
	}
	sb->box = cj->box;
	sb->baseline = cj->base;
	sb->res = pool->res;
	if (cj->seed && cj->seed->disk)
		sb->res.disk = cj->seed->disk; /* made with it already */
	sup_rtnl *nl = cj->nl;
	SBX_AUTO_CLOSE int fd = cj->fd;
	free(cj->seed);
	free(cj);
	sb->state = SUP_SB_CONNECTING;
	sbx_err e;
	sbx_err_clear(&e);
	if (p->cfg.catalog &&
	    sup_catalog_made(p->cfg.catalog, sb->id, sb->box.container_id, sb->net_slot, &sb->res,
			     &e) < 0) {
		sup_rtnl_close(nl);
		pool->creating--;
		create_failed_sb(sb, &e);
		sup_pool_start_destroy(p, sb, false, NULL, NULL);
		sup_pool_ensure_fill(pool);
		return;
	}
	if (sb->net_slot && sup_net_slot_ready(p->cfg.net, sb->net_slot, nl, &e) < 0) {
		pool->creating--;
		create_failed_sb(sb, &e);
		sup_pool_start_destroy(p, sb, false, NULL, NULL);
		sup_pool_ensure_fill(pool);
		return;
	}
	if (p->shutting_down && !p->handover) {
		pool->creating--;
		sup_pool_start_destroy(p, sb, false, NULL, NULL);
		return;
	}
	/* a backend dialled already (and checked who listens) */
	int rc = fd >= 0 ? sup_agent_open(p->base, sbx_steal_fd(&fd), sb->id, p->cfg.handshake_timeout_ms,
					  &p->cfg.agent, &sup_pool_agent_cbs, sb, &sb->agent, &e)
			 : sup_agent_connect(p->base, sb->box.socket_path, sb->id, p->cfg.handshake_timeout_ms,
					     &p->cfg.agent, &sup_pool_agent_cbs, sb, &sb->agent, &e);
	if (rc < 0) {
		pool->creating--;
		create_failed_sb(sb, &e);
		sup_pool_start_destroy(p, sb, false, NULL, NULL);
		sup_pool_ensure_fill(pool);
	}
	/* a handover waits for the workers alone: this was one */
	sup_pool_maybe_done(p);
}

static int new_id(sup_pools *p, char *id, size_t size)
{
	for (int tries = 0; tries < 8; tries++) {
		sbx_err e;
		/* The node's name in the id: any supervisor of the cluster
		 * knows from it where the sandbox is (sup_nodeid.h). */
		if (sup_nodeid_make(p->cfg.node, id, size, &e) < 0)
			return e.code == -ENAMETOOLONG ? -ENAMETOOLONG : -EIO;
		bool clash = false;
		sup_sandbox *sb;
		TAILQ_FOREACH(sb, &p->all, all_link)
		if (strcmp(sb->id, id) == 0) {
			clash = true;
			break;
		}
		if (!clash)
			return 0;
	}
	return -EEXIST;
}

/* Queue a create; with seed (taken over, freed here on failure) it is
 * the seeded sandbox of acquire a. */
int sup_pool_create_for(sup_pool *pool, bool front, sup_runc_seed *seed, sup_acquire *a)
{
	sup_pools *p = pool->owner;
	sup_sandbox *sb = calloc(1, sizeof(*sb));
	create_job *cj = calloc(1, sizeof(*cj));
	if (!sb || !cj || new_id(p, sb->id, sizeof(sb->id)) < 0) {
		free(seed);
		free(sb);
		free(cj);
		sup_error("pool %s: cannot start a create (out of memory or ids)", pool->image);
		return -ENOMEM;
	}
	if (pool->digest[0] && sup_img_store_pin(p->cfg.store, pool->digest, 1) < 0) {
		free(seed);
		free(sb);
		free(cj);
		sup_error("pool %s: its image was deleted", pool->image);
		return -ENOENT;
	}
	/* runc sandboxes only: gVisor's (runsc --network none) would never use
	 * the link */
	if (p->cfg.net && pool->isolation == SUP_ISO_RUNC) {
		sbx_err e;
		sb->net_slot = sup_net_slot_take(p->cfg.net, &e);
		if (!sb->net_slot) {
			sup_error("pool %s: cannot start a create: %s", pool->image, e.msg);
			if (pool->digest[0])
				sup_img_store_pin(p->cfg.store, pool->digest, -1);
			free(seed);
			free(sb);
			free(cj);
			return -EAGAIN;
		}
	}
	/* the intent is durable before the runtime may run: a start after a
	 * crash finds it and makes sure the create does not finish unseen */
	sbx_err ce;
	if (p->cfg.catalog && sup_catalog_intent(p->cfg.catalog, sb->id, pool->image, pool->digest,
						 pool->isolation, &ce) < 0) {
		sup_error("pool %s: cannot start a create: %s", pool->image, ce.msg);
		if (sb->net_slot)
			sup_net_slot_put(p->cfg.net, sb->net_slot);
		if (pool->digest[0])
			sup_img_store_pin(p->cfg.store, pool->digest, -1);
		free(seed);
		free(sb);
		free(cj);
		return -EIO;
	}
	sb->pool = pool;
	sb->state = SUP_SB_CREATING;
	if (seed) {
		sb->seeded = true;
		sb->dedicated = a;
		a->sb = sb;
	}
	clock_gettime(CLOCK_MONOTONIC, &sb->queued_at);
	TAILQ_INIT(&sb->delete_waiters);
	TAILQ_INIT(&sb->execs);
	TAILQ_INSERT_TAIL(&p->all, sb, all_link);
	p->nalive++;
	pool->creating++;
	cj->job.run = create_run;
	cj->job.done = create_done;
	cj->pools = p;
	cj->sb = sb;
	snprintf(cj->image, sizeof(cj->image), "%s", pool->digest[0] ? pool->digest : pool->image);
	cj->isolation = pool->isolation;
	cj->seed = seed;
	cj->slot = sb->net_slot;
	cj->baseline = p->cfg.reuse && !p->cfg.backend && pool->isolation == SUP_ISO_RUNC && !seed &&
		       !sb->net_slot;
	cj->fd = -1;
	memcpy(cj->id, sb->id, sizeof(cj->id));
	sup_debug("sandbox %s: create queued for image %s (%s)%s", sb->id, pool->image,
		  sup_isolation_names[pool->isolation], front ? " (a request waits)" : "");
	sup_workers_submit(p->workers, &cj->job, front);
	return 0;
}

static int start_create(sup_pool *pool, bool front)
{
	return sup_pool_create_for(pool, front, NULL, NULL);
}

void sup_pool_ensure_fill(sup_pool *pool)
{
	sup_pools *p = pool->owner;
	if (p->shutting_down)
		return;
	/* Creates for waiting requests first, at the front of the queue and
	 * even during a backoff: someone is waiting for the answer. */
	while (pool->nwaiters > pool->creating && p->nalive < p->cfg.max_sandboxes)
		if (start_create(pool, true) < 0)
			return;
	if (pool->backoff)
		return;
	while (pool->nready + pool->creating < pool->target + pool->nwaiters &&
	       p->nalive < p->cfg.max_sandboxes)
		if (start_create(pool, false) < 0)
			return;
}
