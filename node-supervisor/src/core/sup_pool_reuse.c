/* The end of a handed-out sandbox: destroyed (a worker job: the runtime's
 * or the backend's unmake, the egress unplumbed), or, when the owner allows
 * and the pool wants it, reset by its agent, checked on a worker against
 * its baseline and offered again (sup_pool_offer). Must never offer a
 * sandbox whose check failed: it is destroyed and replaced. Loop thread,
 * but for the jobs' run. */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sup_agent.h"
#include "sup_agent_reset.h"
#include "sup_catalog.h"
#include "sup_log.h"
#include "sup_net.h"
#include "sup_pool_int.h"
#include "sup_rtnl.h"
#include "sup_runc_clean.h"

typedef struct destroy_job {
	sup_job job;
	sup_pools *pools;
	sup_sandbox *sb;
	struct timespec queued, started; /* for the log: waiting, then running */
	sup_runc_box box;
	unsigned slot;   /* network slot to unplumb, 0: none */
	sup_rtnl *nl;
	sup_destroy_cb cb;
	void *ud;
	int rc;
	sbx_err err;
} destroy_job;

/* ---- destroy ---- */

static void destroy_run(sup_job *job)
{
	destroy_job *dj = (destroy_job *)job;
	clock_gettime(CLOCK_MONOTONIC, &dj->started);
	sbx_err_clear(&dj->err);
	const sup_pool_backend *be = dj->pools->cfg.backend;
	dj->rc = be ? be->unmake(be->ud, &dj->box, &dj->err) : sup_runc_destroy(dj->pools->cfg.runc, &dj->box, &dj->err);
	sbx_err e;
	if (dj->slot && sup_net_unplumb(dj->pools->cfg.net, dj->slot, dj->nl, &e) < 0 && dj->rc == 0)
		dj->rc = sbx_err_set(&dj->err, e.code, "%s", e.msg);
}

static void destroy_done(sup_job *job)
{
	destroy_job *dj = (destroy_job *)job;
	sup_pools *p = dj->pools;
	sup_sandbox *sb = dj->sb;
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	if (dj->rc < 0)
		sup_error("sandbox %s: destroy failed: %s", sb->id, dj->err.msg);
	else
		sup_info("sandbox %s: destroyed in %ld ms (%ld ms waiting for a worker)", sb->id,
			 sup_pool_us_between(&dj->queued, &now) / 1000, sup_pool_us_between(&dj->queued, &dj->started) / 1000);
	TAILQ_REMOVE(&p->all, sb, all_link);
	p->nalive--;
	if (dj->slot)
		sup_net_slot_put(p->cfg.net, dj->slot);
	if (dj->cb)
		dj->cb(sb, dj->rc, dj->rc < 0 ? &dj->err : NULL, dj->ud);
	sup_pool *pool = sb->pool;
	sup_pool_sb_free(sb);
	free(dj);
	sup_pool_ensure_fill(pool); /* capacity came back */
	sup_pool_maybe_done(p);
}

void sup_pool_start_destroy(sup_pools *p, sup_sandbox *sb, bool urgent, sup_destroy_cb cb, void *ud)
{
	/* out of the catalog first: a crash from here on leaves it to the sweep */
	sup_pool_forget(p, sb->id);
	if (sb->agent) {
		sup_agent_free(sb->agent);
		sb->agent = NULL;
	}
	sb->state = SUP_SB_DESTROYING;
	/* its rules reject everything from now on */
	sup_rtnl *nl = sb->net_slot ? sup_net_slot_release(p->cfg.net, sb->net_slot) : NULL;
	destroy_job *dj = calloc(1, sizeof(*dj));
	if (!dj) {
		if (sb->net_slot) {
			/* its link goes with the sandbox's namespace, or with the
			 * next plumb of the slot */
			sup_net_slot_put(p->cfg.net, sb->net_slot);
			sup_rtnl_close(nl);
		}
		/* Cannot queue: leave it for the next start's leftover sweep. */
		sup_error("sandbox %s: out of memory, container left for the next start", sb->id);
		TAILQ_REMOVE(&p->all, sb, all_link);
		p->nalive--;
		sbx_err e;
		sbx_err_set(&e, -ENOMEM, "out of memory");
		if (cb)
			cb(sb, -ENOMEM, &e, ud);
		sup_pool_sb_free(sb);
		sup_pool_maybe_done(p);
		return;
	}
	dj->job.run = destroy_run;
	dj->job.done = destroy_done;
	dj->pools = p;
	dj->sb = sb;
	dj->box = sb->box;
	dj->slot = sb->net_slot;
	dj->nl = nl;
	dj->cb = cb;
	dj->ud = ud;
	clock_gettime(CLOCK_MONOTONIC, &dj->queued);
	sup_workers_submit(p->workers, &dj->job, urgent);
}

void sup_pools_destroy(sup_pools *p, sup_sandbox *sb, bool urgent, sup_destroy_cb cb, void *ud)
{
	if (sb->state == SUP_SB_READY) {
		TAILQ_REMOVE(&sb->pool->ready, sb, ready_link);
		sb->pool->nready--;
	}
	sup_pool_start_destroy(p, sb, urgent, cb, ud);
}

/* ---- reuse after reset ---- */

typedef struct check_job {
	sup_job job;
	sup_pools *pools;
	sup_sandbox *sb;
	const char *image;  /* its pool's (pools never move) */
	sup_runc_box box;
	sup_resources from; /* the last owner's limits, back to the pools' */
	int rc;
	sbx_err err;
} check_job;

/* A reset or its check failed (or the pools stop): destroyed, and the
 * pool makes another. */
void sup_pool_reset_failed(sup_sandbox *sb, const char *why)
{
	sup_pool *pool = sb->pool;
	sup_pools *p = pool->owner;
	pool->creating--;
	if (!p->shutting_down) {
		pool->reset_failed++;
		sup_warn("sandbox %s: not reused, destroyed and replaced: %s", sb->id, why);
		sup_pool_doubt(p, sb, "ResetFailed", why);
	}
	sup_pool_start_destroy(p, sb, false, NULL, NULL);
	sup_pool_ensure_fill(pool);
}

static void check_run(sup_job *job)
{
	check_job *cj = (check_job *)job;
	const sup_runc_cfg *runc = cj->pools->cfg.runc;
	const sup_pool_backend *be = cj->pools->cfg.backend;
	sbx_err_clear(&cj->err);
	if (be) {
		cj->rc = be->check(be->ud, cj->image, &cj->box, &cj->err);
		return;
	}
	cj->rc = sup_runc_check_clean(runc, &cj->box, cj->sb->baseline, &cj->err);
	if (cj->rc == 0 && (cj->rc = sup_runc_set_limits(runc, &cj->box, &cj->from, runc->res, &cj->err)) < 0)
		sbx_err_wrap(&cj->err, "limits back to the pools'");
}

static void reused(sup_sandbox *sb, bool lost);

static void check_done(sup_job *job)
{
	check_job *cj = (check_job *)job;
	sup_sandbox *sb = cj->sb;
	sup_pools *p = cj->pools;
	sup_pool *pool = sb->pool;
	int rc = cj->rc;
	sbx_err e = cj->err;
	free(cj);
	if (rc == 0 && !sb->agent)
		rc = sbx_err_set(&e, -ECONNRESET, "its agent went away during the check");
	if (rc == 0 && p->shutting_down)
		rc = sbx_err_set(&e, -ESHUTDOWN, "the supervisor is shutting down");
	if (rc == 0 && p->cfg.catalog &&
	    (sup_catalog_intent(p->cfg.catalog, sb->id, pool->image, pool->digest, pool->isolation, &e) < 0 ||
	     sup_catalog_made(p->cfg.catalog, sb->id, sb->box.container_id, sb->net_slot, &sb->res, &e) < 0))
		rc = e.code;
	if (rc < 0) {
		sup_pool_reset_failed(sb, e.msg);
		return;
	}
	/* the reset killed the image's service with the rest: again */
	if (sup_pool_service_start(sb, reused) == 0)
		reused(sb, false);
}

/* Reset, checked, its image's service started again: back in its pool. */
static void reused(sup_sandbox *sb, bool lost)
{
	sup_pool *pool = sb->pool;
	sup_pools *p = pool->owner;
	if (lost || p->shutting_down) {
		sup_pool_reset_failed(sb, lost ? "its agent went away as its service started"
					       : "the supervisor is shutting down");
		return;
	}
	pool->creating--;
	pool->reused++;
	sup_pool_observe_since(&pool->reset, &sb->reset_at);
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	sup_info("sandbox %s: reset and checked in %ld us, back in pool %s", sb->id, sup_pool_us_between(&sb->reset_at, &now),
		 pool->image);
	sup_pool_offer(sb);
	sup_pool_ensure_fill(pool);
	sup_pool_maybe_done(p);
}

static void on_reset(int rc, const sbx_proto_reset_result *r, const sbx_err *err, void *ud)
{
	sup_sandbox *sb = ud;
	sup_pools *p = sb->pool->owner;
	sb->reset_call = NULL;
	if (rc < 0) {
		sup_pool_reset_failed(sb, err ? err->msg : "the agent's reset failed");
		return;
	}
	sup_debug("sandbox %s: agent reset: %llu processes killed, %llu entries removed in %llu us", sb->id,
		  (unsigned long long)r->killed, (unsigned long long)r->removed,
		  (unsigned long long)r->duration_us);
	check_job *cj = calloc(1, sizeof(*cj));
	if (!cj) {
		sup_pool_reset_failed(sb, "out of memory");
		return;
	}
	cj->job.run = check_run;
	cj->job.done = check_done;
	cj->pools = p;
	cj->sb = sb;
	cj->image = sb->pool->image;
	cj->box = sb->box;
	cj->from = sb->res;
	sb->res = sb->pool->res;
	/* ahead of refills: a ready sandbox is what they would make */
	sup_workers_submit(p->workers, &cj->job, true);
}

/* The owner's fields, as a sandbox never handed out has them. */
static void clear_owner(sup_sandbox *sb)
{
	sb->core = NULL;
	memset(sb->tenant, 0, sizeof(sb->tenant));
	sb->allow_root = false;
	sb->created_at = sb->expires_at = 0;
	memset(&sb->env, 0, sizeof(sb->env));
	memset(&sb->secrets, 0, sizeof(sb->secrets));
	sb->expiry = NULL;
	sb->agent_timeouts = 0;
	sb->id_given_out = false;
	sb->listed = false;
	TAILQ_INIT(&sb->execs);
	TAILQ_INIT(&sb->delete_waiters);
}

/* The owner hears on the next turn of the loop, never inside its own
 * call (it may still be holding the request that released it). */
typedef struct release {
	sup_sandbox *sb;
	sup_destroy_cb cb;
	void *ud;
	struct event *ev;
} release;

static void release_cb(evutil_socket_t fd, short what, void *arg)
{
	release *r = arg;
	sup_sandbox *sb = r->sb;
	sup_pools *p = sb->pool->owner;
	(void)fd;
	(void)what;
	event_free(r->ev);
	if (r->cb)
		r->cb(sb, 0, NULL, r->ud);
	free(r);
	clear_owner(sb);
	sb->state = SUP_SB_RESETTING;
	const sup_pool_backend *be = p->cfg.backend;
	const char *const *paths = p->cfg.reset_paths;
	size_t npaths = be ? be->reset_paths(be->ud, sb->pool->image, &paths) : p->cfg.nreset_paths;
	sbx_err e;
	if (p->shutting_down) {
		sup_pool_reset_failed(sb, "the supervisor is shutting down");
		return;
	}
	sup_pool_mark(p, sb, "resetting");
	if (!sb->agent)
		sup_pool_reset_failed(sb, "its agent went away");
	else if (sup_agent_reset(sb->agent, paths, npaths, p->cfg.reset_timeout_ms, on_reset, sb, &sb->reset_call,
				 &e) < 0)
		sup_pool_reset_failed(sb, e.msg);
}

void sup_pools_release(sup_pools *p, sup_sandbox *sb, bool reusable_by_owner, bool urgent, sup_destroy_cb cb,
		       void *ud)
{
	sup_pool *pool = sb->pool;
	/* A pool refills as soon as one of its sandboxes is handed out, so
	 * when that one comes back it is one too many: up to twice its size
	 * is kept ready (plus its waiters), so that under churn the sandboxes
	 * go round (acquire, release, reset) and nothing is made or destroyed;
	 * a cold pool (size 0) reuses nothing. */
	bool wanted = pool->nready + pool->creating < 2 * pool->target + pool->nwaiters;
	release *r = NULL;
	/* a backend's sandbox has no baseline: its check needs none */
	bool checkable = p->cfg.backend || (sb->baseline && pool->isolation == SUP_ISO_RUNC);
	if (!p->cfg.reuse || !reusable_by_owner || !wanted || p->shutting_down || sb->state != SUP_SB_RUNNING ||
	    !sb->agent || !checkable || sb->seeded || sb->forked || sb->paused || sb->net_slot || sb->allow_root ||
	    !(r = calloc(1, sizeof(*r))) ||
	    !(r->ev = event_new(p->base, -1, 0, release_cb, r))) {
		free(r);
		sup_pools_destroy(p, sb, urgent, cb, ud);
		return;
	}
	/* out of the catalog: a crash from here on leaves it to the sweep */
	sup_pool_forget(p, sb->id);
	/* the owner's until cb: being destroyed, as far as it knows */
	sb->state = SUP_SB_DESTROYING;
	pool->creating++; /* it will be ready: refills count it */
	clock_gettime(CLOCK_MONOTONIC, &sb->reset_at);
	r->sb = sb;
	r->cb = cb;
	r->ud = ud;
	event_active(r->ev, EV_TIMEOUT, 0);
}
