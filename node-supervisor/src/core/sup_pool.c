#include "sup_pool.h"

#include <errno.h>
#include <event2/event.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sbx/cleanup.h"
#include "sup_agent.h"
#include "sup_agent_reset.h"
#include "sup_catalog.h"
#include "sup_img_store.h"
#include "sup_log.h"
#include "sup_net.h"
#include "sup_nodeid.h"
#include "sup_rtnl.h"
#include "sup_runc_clean.h"
#include "sup_token.h"

/* Pools made at run time, of size 0, for store images without one. */
#define COLD_POOLS_MAX 64
/* a stop still waiting after this long logs what it waits for, and again */
#define SHUTDOWN_REPORT_S 10

TAILQ_HEAD(sup_sb_list, sup_sandbox);
TAILQ_HEAD(sup_acq_list, sup_acquire);

typedef struct sup_pool {
	sup_pools *owner;
	const char *image;   /* the name it was made for */
	char *image_owned;   /* its copy of it */
	sup_isolation isolation;
	unsigned size;       /* ready sandboxes to keep */
	/* a store image: its digest (what creates name, what is pinned) and
	 * the config a command starts with */
	char digest[SUP_IMG_DIGEST_LEN + 1];
	sup_env env;
	char *user;          /* NULL: the sandbox user (the image's is root or none) */
	char *workdir;
	bool pinned;         /* the pool itself pins its image (size > 0) */
	bool shrunk;         /* made smaller at run time: creates in flight
			      * beyond the size are destroyed when ready */
	struct sup_sb_list ready;
	unsigned nready;
	unsigned creating;   /* CREATING + CONNECTING */
	struct sup_acq_list waiters;
	unsigned nwaiters;
	unsigned fail_streak;
	bool backoff;        /* refills paused after failures */
	struct event *backoff_timer;
	sup_hist acquire;    /* latencies, for /metrics */
	sup_hist cold_create;
	sup_hist reset;      /* a release until ready again */
	unsigned long reused, reset_failed;
	sup_resources res;   /* its sandboxes are made with these */
} sup_pool;

struct sup_acquire {
	sup_pool *pool;
	sup_resources res;  /* the limits the requester asked for */
	struct timespec t0; /* asked at */
	sup_acquire_cb cb;
	void *ud;
	struct event *timer;
	TAILQ_ENTRY(sup_acquire) link;
	sup_sandbox *sb;    /* a seeded acquire's own sandbox (not in waiters) */
	bool seeded;
};

struct sup_pools {
	struct event_base *base;
	sup_workers *workers;
	sup_pools_cfg cfg;
	sup_pools_hooks hooks;
	sup_pool *pools;
	size_t npools, cap;
	struct sup_sb_list all;
	unsigned nalive;
	atomic_bool stopping; /* read by worker threads */
	bool shutting_down;
	bool handover;        /* shutting down to leave every sandbox to the next start */
	void (*shutdown_done)(void *ud);
	void *shutdown_ud;
	struct event *shutdown_check;
};

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

static void ensure_fill(sup_pool *pool);
static void start_destroy(sup_pools *p, sup_sandbox *sb, bool urgent, sup_destroy_cb cb, void *ud);

/* The catalog forgets a sandbox. A failure leaves a row naming a sandbox
 * that will be gone: the next start finds it dead and sweeps it. */
static void catalog_remove(sup_pools *p, const char *id)
{
	sbx_err e;
	if (p->cfg.catalog && sup_catalog_remove(p->cfg.catalog, id, &e) < 0)
		sup_warn("sandbox %s: %s", id, e.msg);
}

/* The backend hears of a sandbox's state (its pod's labels). */
static void mark(sup_pools *p, const sup_sandbox *sb, const char *state)
{
	const sup_pool_backend *be = p->cfg.backend;
	if (be && be->mark)
		be->mark(be->ud, sb, state);
}

/* The backend hears why a sandbox of its goes on doubt (an Event). */
static void doubt(sup_pools *p, const sup_sandbox *sb, const char *reason, const char *why)
{
	const sup_pool_backend *be = p->cfg.backend;
	if (be && be->doubt)
		be->doubt(be->ud, sb->pool->image, &sb->box, reason, why);
}

/* A sandbox of a store image pins it from its create to its destroy. */
static void unpin(sup_sandbox *sb)
{
	if (sb->pool->digest[0])
		sup_img_store_pin(sb->pool->owner->cfg.store, sb->pool->digest, -1);
}

/* The end of a sandbox's memory (its image unpinned). */
static void sb_free(sup_sandbox *sb)
{
	unpin(sb);
	sup_runc_baseline_free(sb->baseline);
	free(sb);
}

const char *sup_sb_state_name(sup_sb_state s)
{
	switch (s) {
	case SUP_SB_CREATING:
		return "creating";
	case SUP_SB_CONNECTING:
		return "creating";
	case SUP_SB_READY:
		return "ready";
	case SUP_SB_RUNNING:
		return "running";
	case SUP_SB_FAILED:
		return "failed";
	case SUP_SB_DESTROYING:
		return "destroying";
	case SUP_SB_RESETTING:
		return "resetting";
	}
	return "unknown";
}

/* ---- shutdown progress ---- */

/* A stop that takes long says what it waits for: the sandboxes still
 * alive (first few, with their state) and the worker jobs still running. */
static void report_shutdown_wait(sup_pools *p)
{
	char which[512];
	size_t at = 0;
	unsigned shown = 0;
	which[0] = '\0';
	sup_sandbox *sb;
	TAILQ_FOREACH(sb, &p->all, all_link)
	{
		if (shown++ == 8 || at >= sizeof(which))
			break;
		int n = snprintf(which + at, sizeof(which) - at, "%s%s (%s)", at ? ", " : "", sb->id,
				 sup_sb_state_name(sb->state));
		if (n > 0)
			at += (size_t)n;
	}
	sup_warn("shutdown still waits for %u sandboxes%s%s and %zu worker jobs", p->nalive,
		 which[0] ? ": " : "", which, sup_workers_busy(p->workers));
}

static void shutdown_check_cb(evutil_socket_t fd, short what, void *ud)
{
	sup_pools *p = ud;
	(void)fd;
	if (!p->shutting_down || !p->shutdown_done)
		return;
	if ((p->nalive > 0 && !p->handover) || sup_workers_busy(p->workers) > 0) {
		if (what & EV_TIMEOUT)
			report_shutdown_wait(p);
		struct timeval tv = { SHUTDOWN_REPORT_S, 0 };
		evtimer_add(p->shutdown_check, &tv);
		return;
	}
	void (*done)(void *) = p->shutdown_done;
	p->shutdown_done = NULL;
	done(p->shutdown_ud);
}

/* Deferred so that `done` never runs inside a caller's stack frame. */
static void maybe_shutdown_done(sup_pools *p)
{
	if (p->shutting_down && p->shutdown_done)
		event_active(p->shutdown_check, 0, 0);
}

/* The workers are shared with volumes and snapshots: a job of theirs (a
 * fork-layer sweep) can be the last one the stop waits for, and its done()
 * knows nothing of the pools; without this the stop waited for the next
 * report (SHUTDOWN_REPORT_S), and before that report, for ever. */
static void workers_idle(void *ud)
{
	maybe_shutdown_done(ud);
}

/* ---- waiters ---- */

static void waiter_free(sup_acquire *a)
{
	if (a->timer)
		event_free(a->timer);
	free(a);
}

static void waiter_remove(sup_acquire *a)
{
	TAILQ_REMOVE(&a->pool->waiters, a, link);
	a->pool->nwaiters--;
}

static void waiter_fail(sup_acquire *a, int code, const char *msg)
{
	sbx_err e;
	sbx_err_set(&e, code, "%s", msg);
	waiter_remove(a);
	sup_acquire_cb cb = a->cb;
	void *ud = a->ud;
	waiter_free(a);
	cb(NULL, code, &e, ud);
}

static void on_waiter_timeout(evutil_socket_t fd, short what, void *ud)
{
	sup_acquire *a = ud;
	(void)fd;
	(void)what;
	char msg[128];
	snprintf(msg, sizeof(msg), "no sandbox of image %s (%s) could be had within %u ms",
		 a->pool->image, sup_isolation_names[a->pool->isolation],
		 a->pool->owner->cfg.acquire_timeout_ms);
	sup_warn("acquire: %s", msg);
	waiter_fail(a, -EAGAIN, msg);
}

/* ---- handing out ---- */

static long us_between(const struct timespec *a, const struct timespec *b)
{
	return (long)((b->tv_sec - a->tv_sec) * 1000000 + (b->tv_nsec - a->tv_nsec) / 1000);
}

static void observe_since(sup_hist *h, const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	sup_hist_observe(h, (double)us_between(t0, &now) / 1e6);
}

/* Give sb the requester's limits and hand it out; on failure it is
 * destroyed and err says why. */
static int hand_out(sup_sandbox *sb, const sup_resources *res, sbx_err *err)
{
	sup_pools *p = sb->pool->owner;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	/* a backend's sandboxes keep the limits they were made with (the
	 * acquire refused any other) */
	int r = p->cfg.backend ? 0 : sup_runc_set_limits(p->cfg.runc, &sb->box, &sb->res, res, err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (r < 0) {
		sup_error("%s", err->msg);
		start_destroy(p, sb, false, NULL, NULL);
		sbx_err why = *err; /* the message is formatted into err */
		return sbx_err_set(err, -EAGAIN, "could not apply the sandbox's limits: %.400s",
				   why.msg);
	}
	sup_debug("sandbox %s: limits set in %ld us", sb->id, us_between(&t0, &t1));
	sb->res = *res;
	sb->state = SUP_SB_RUNNING;
	return 0;
}

static sup_sandbox *take_ready(sup_pool *pool)
{
	sup_sandbox *sb = TAILQ_FIRST(&pool->ready);
	if (!sb)
		return NULL;
	TAILQ_REMOVE(&pool->ready, sb, ready_link);
	pool->nready--;
	return sb;
}

/* ---- seeded sandboxes: one request's own ---- */

/* Its requester is answered (once) with code and err; the sandbox, when it
 * comes up, is destroyed. */
static void seeded_fail(sup_sandbox *sb, int code, const sbx_err *err)
{
	sup_acquire *a = sb->dedicated;
	if (!a)
		return;
	sb->dedicated = NULL;
	sup_acquire_cb cb = a->cb;
	void *ud = a->ud;
	waiter_free(a);
	cb(NULL, code, err, ud);
}

static void seeded_ready(sup_sandbox *sb)
{
	sup_acquire *a = sb->dedicated;
	if (!a) {
		sup_info("sandbox %s: seeded for a request that went away: destroyed", sb->id);
		start_destroy(sb->pool->owner, sb, false, NULL, NULL);
		return;
	}
	sb->dedicated = NULL;
	sup_acquire_cb cb = a->cb;
	void *ud = a->ud;
	sup_resources res = a->res;
	waiter_free(a);
	sbx_err e;
	if (hand_out(sb, &res, &e) < 0) {
		cb(NULL, e.code, &e, ud);
		return;
	}
	sup_debug("sandbox %s: seeded, handed out", sb->id);
	cb(sb, 0, NULL, ud);
}

/* A ready sandbox (new, or reset): to the oldest waiter, or kept. */
static void offer(sup_sandbox *sb)
{
	sup_pool *pool = sb->pool;
	sb->state = SUP_SB_READY;
	sup_acquire *a = TAILQ_FIRST(&pool->waiters);
	if (a) {
		waiter_remove(a);
		sup_acquire_cb cb = a->cb;
		void *ud = a->ud;
		sup_resources res = a->res;
		struct timespec t0 = a->t0;
		waiter_free(a);
		sbx_err e;
		if (hand_out(sb, &res, &e) < 0) {
			cb(NULL, e.code, &e, ud);
			return;
		}
		sup_debug("sandbox %s: ready, handed to a waiting request", sb->id);
		observe_since(&pool->acquire, &t0);
		cb(sb, 0, NULL, ud);
	} else if (pool->shrunk && pool->nready >= pool->size) {
		sup_debug("sandbox %s: ready beyond the size of pool %s (%u): destroyed", sb->id,
			  pool->image, pool->size);
		start_destroy(pool->owner, sb, false, NULL, NULL);
	} else {
		TAILQ_INSERT_TAIL(&pool->ready, sb, ready_link);
		pool->nready++;
		mark(pool->owner, sb, "ready");
		sup_debug("sandbox %s: ready in pool %s (%u ready)", sb->id, pool->image, pool->nready);
	}
}

/* A sandbox's agent is connected: give it to the oldest waiter, or keep it. */
static void sandbox_ready(sup_sandbox *sb)
{
	sup_pool *pool = sb->pool;
	sb->state = SUP_SB_READY;
	pool->creating--;
	observe_since(&pool->cold_create, &sb->queued_at);
	pool->fail_streak = 0;
	if (sb->seeded) {
		seeded_ready(sb);
		return;
	}
	offer(sb);
}

/* ---- failures of creation ---- */

static void on_backoff_end(evutil_socket_t fd, short what, void *ud)
{
	sup_pool *pool = ud;
	(void)fd;
	(void)what;
	pool->backoff = false;
	ensure_fill(pool);
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
		waiter_fail(TAILQ_FIRST(&pool->waiters), -EAGAIN, msg);
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
 * (a refused archive is no reason to pause the pool's refills). */
static void create_failed_sb(sup_sandbox *sb, const sbx_err *err)
{
	if (!sb->seeded) {
		create_failed(sb->pool, sb->id, err);
		return;
	}
	sup_warn("sandbox %s: seeded create failed: %s", sb->id, err->msg);
	seeded_fail(sb, err->code ? err->code : -EIO, err);
}

/* ---- agent connection of a new or pooled sandbox ---- */

static void agent_on_ready(sup_agent *a, void *ud)
{
	sup_sandbox *sb = ud;
	(void)a;
	sup_pools *p = sb->pool->owner;
	if (p->shutting_down && !p->handover) {
		sb->pool->creating--;
		start_destroy(p, sb, false, NULL, NULL);
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
		ensure_fill(pool); /* it counted as one being made until now */
		return;
	}
	sup_info("sandbox %s: up (agent %s)", sb->id, sup_agent_peer(a));
	sandbox_ready(sb);
	ensure_fill(sb->pool);
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
			doubt(p, sb, "FailedStart", why->msg);
		}
		start_destroy(p, sb, false, NULL, NULL);
		ensure_fill(pool);
		break;
	case SUP_SB_READY:
		sup_warn("sandbox %s: agent connection lost while pooled: %s", sb->id, why->msg);
		doubt(p, sb, "AgentLost", why->msg);
		TAILQ_REMOVE(&pool->ready, sb, ready_link);
		pool->nready--;
		start_destroy(p, sb, false, NULL, NULL);
		ensure_fill(pool);
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

static const sup_agent_cbs agent_cbs = {
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
		catalog_remove(p, sb->id);
		if (sb->net_slot)
			sup_net_slot_put(p->cfg.net, sb->net_slot);
		if (cj->rc != -ECANCELED || sb->seeded)
			create_failed_sb(sb, &cj->err);
		free(cj->seed);
		TAILQ_REMOVE(&p->all, sb, all_link);
		p->nalive--;
		sb_free(sb);
		sup_runc_baseline_free(cj->base);
		free(cj);
		ensure_fill(pool);
		maybe_shutdown_done(p);
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
		start_destroy(p, sb, false, NULL, NULL);
		ensure_fill(pool);
		return;
	}
	if (sb->net_slot && sup_net_slot_ready(p->cfg.net, sb->net_slot, nl, &e) < 0) {
		pool->creating--;
		create_failed_sb(sb, &e);
		start_destroy(p, sb, false, NULL, NULL);
		ensure_fill(pool);
		return;
	}
	if (p->shutting_down && !p->handover) {
		pool->creating--;
		start_destroy(p, sb, false, NULL, NULL);
		return;
	}
	/* a backend dialled already (and checked who listens) */
	int rc = fd >= 0 ? sup_agent_open(p->base, sbx_steal_fd(&fd), sb->id, p->cfg.handshake_timeout_ms,
					  &p->cfg.agent, &agent_cbs, sb, &sb->agent, &e)
			 : sup_agent_connect(p->base, sb->box.socket_path, sb->id, p->cfg.handshake_timeout_ms,
					     &p->cfg.agent, &agent_cbs, sb, &sb->agent, &e);
	if (rc < 0) {
		pool->creating--;
		create_failed_sb(sb, &e);
		start_destroy(p, sb, false, NULL, NULL);
		ensure_fill(pool);
	}
	/* a handover waits for the workers alone: this was one */
	maybe_shutdown_done(p);
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
static int start_create_for(sup_pool *pool, bool front, sup_runc_seed *seed, sup_acquire *a)
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
	return start_create_for(pool, front, NULL, NULL);
}

static void ensure_fill(sup_pool *pool)
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
	while (pool->nready + pool->creating < pool->size + pool->nwaiters &&
	       p->nalive < p->cfg.max_sandboxes)
		if (start_create(pool, false) < 0)
			return;
}

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
			 us_between(&dj->queued, &now) / 1000, us_between(&dj->queued, &dj->started) / 1000);
	TAILQ_REMOVE(&p->all, sb, all_link);
	p->nalive--;
	if (dj->slot)
		sup_net_slot_put(p->cfg.net, dj->slot);
	if (dj->cb)
		dj->cb(sb, dj->rc, dj->rc < 0 ? &dj->err : NULL, dj->ud);
	sup_pool *pool = sb->pool;
	sb_free(sb);
	free(dj);
	ensure_fill(pool); /* capacity came back */
	maybe_shutdown_done(p);
}

static void start_destroy(sup_pools *p, sup_sandbox *sb, bool urgent, sup_destroy_cb cb, void *ud)
{
	/* out of the catalog first: a crash from here on leaves it to the sweep */
	catalog_remove(p, sb->id);
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
		sb_free(sb);
		maybe_shutdown_done(p);
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
	start_destroy(p, sb, urgent, cb, ud);
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
static void reset_failed(sup_sandbox *sb, const char *why)
{
	sup_pool *pool = sb->pool;
	sup_pools *p = pool->owner;
	pool->creating--;
	if (!p->shutting_down) {
		pool->reset_failed++;
		sup_warn("sandbox %s: not reused, destroyed and replaced: %s", sb->id, why);
		doubt(p, sb, "ResetFailed", why);
	}
	start_destroy(p, sb, false, NULL, NULL);
	ensure_fill(pool);
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
		reset_failed(sb, e.msg);
		return;
	}
	pool->creating--;
	pool->reused++;
	observe_since(&pool->reset, &sb->reset_at);
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	sup_info("sandbox %s: reset and checked in %ld us, back in pool %s", sb->id, us_between(&sb->reset_at, &now),
		 pool->image);
	offer(sb);
	ensure_fill(pool);
	maybe_shutdown_done(p);
}

static void on_reset(int rc, const sbx_proto_reset_result *r, const sbx_err *err, void *ud)
{
	sup_sandbox *sb = ud;
	sup_pools *p = sb->pool->owner;
	sb->reset_call = NULL;
	if (rc < 0) {
		reset_failed(sb, err ? err->msg : "the agent's reset failed");
		return;
	}
	sup_debug("sandbox %s: agent reset: %llu processes killed, %llu entries removed in %llu us", sb->id,
		  (unsigned long long)r->killed, (unsigned long long)r->removed,
		  (unsigned long long)r->duration_us);
	check_job *cj = calloc(1, sizeof(*cj));
	if (!cj) {
		reset_failed(sb, "out of memory");
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
		reset_failed(sb, "the supervisor is shutting down");
		return;
	}
	mark(p, sb, "resetting");
	if (!sb->agent)
		reset_failed(sb, "its agent went away");
	else if (sup_agent_reset(sb->agent, paths, npaths, p->cfg.reset_timeout_ms, on_reset, sb, &sb->reset_call,
				 &e) < 0)
		reset_failed(sb, e.msg);
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
	bool wanted = pool->nready + pool->creating < 2 * pool->size + pool->nwaiters;
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
	catalog_remove(p, sb->id);
	/* the owner's until cb: being destroyed, as far as it knows */
	sb->state = SUP_SB_DESTROYING;
	pool->creating++; /* it will be ready: refills count it */
	clock_gettime(CLOCK_MONOTONIC, &sb->reset_at);
	r->sb = sb;
	r->cb = cb;
	r->ud = ud;
	event_active(r->ev, EV_TIMEOUT, 0);
}

/* ---- pools of store images ---- */

static int image_config(sup_pool *pool, const sup_image *im, sbx_err *err)
{
	pool->env.v = calloc(im->nenv + 1, sizeof(*pool->env.v));
	if (!pool->env.v)
		return sbx_err_set(err, -ENOMEM, "pool %s", pool->image);
	for (size_t i = 0; i < im->nenv; i++) {
		const char *eq = strchr(im->env[i], '=');
		sup_kv *kv = &pool->env.v[pool->env.n];
		kv->key = strndup(im->env[i], (size_t)(eq - im->env[i]));
		kv->val = strdup(eq + 1);
		pool->env.n++;
		if (!kv->key || !kv->val)
			return sbx_err_set(err, -ENOMEM, "pool %s", pool->image);
	}
	/* "user[:group]": the agent takes a name or uid; root stays the
	 * sandbox user's default (root only with --allow-root) */
	if (im->user) {
		size_t n = strcspn(im->user, ":");
		if (!(n == 4 && strncmp(im->user, "root", 4) == 0) && !(n == 1 && im->user[0] == '0') && n > 0 &&
		    !(pool->user = strndup(im->user, n)))
			return sbx_err_set(err, -ENOMEM, "pool %s", pool->image);
	}
	if (im->workdir && !(pool->workdir = strdup(im->workdir)))
		return sbx_err_set(err, -ENOMEM, "pool %s", pool->image);
	snprintf(pool->digest, sizeof(pool->digest), "%s", im->digest);
	return 0;
}

static void pool_release(sup_pool *pool)
{
	sup_pools *p = pool->owner;
	if (pool->pinned)
		sup_img_store_pin(p->cfg.store, pool->digest, -1);
	sup_env_free(&pool->env);
	free(pool->user);
	free(pool->workdir);
	free(pool->image_owned);
	if (pool->backoff_timer)
		event_free(pool->backoff_timer);
}

/* A pool of image (host, a rootfs folder, or a name the store has) with
 * size ready sandboxes. */
static sup_pool *add_pool(sup_pools *p, const char *image, sup_isolation isolation, unsigned size,
			  sbx_err *err)
{
	if (p->npools == p->cap) {
		sbx_err_set(err, -ENOSPC, "image %.200s: no room for another pool (%zu)", image, p->cap);
		return NULL;
	}
	sup_pool *pool = &p->pools[p->npools];
	memset(pool, 0, sizeof(*pool));
	pool->owner = p;
	pool->isolation = isolation;
	pool->size = size;
	pool->res = *p->cfg.runc->res;
	TAILQ_INIT(&pool->ready);
	TAILQ_INIT(&pool->waiters);
	pool->image_owned = strdup(image);
	pool->image = pool->image_owned;
	pool->backoff_timer = evtimer_new(p->base, on_backoff_end, pool);
	int r = pool->image_owned && pool->backoff_timer ? 0 : sbx_err_set(err, -ENOMEM, "pools");
	if (r == 0 && p->cfg.store && strcmp(image, "host") != 0 && image[0] != '/') {
		sup_image im;
		r = sup_img_store_get(p->cfg.store, image, &im, err);
		if (r == 0) {
			r = image_config(pool, &im, err);
			sup_image_release(&im);
		}
		if (r == 0 && size > 0) {
			r = sup_img_store_pin(p->cfg.store, pool->digest, 1);
			pool->pinned = r == 0;
		}
	}
	if (r < 0) {
		pool_release(pool);
		return NULL;
	}
	p->npools++;
	return pool;
}

/* ---- public ---- */

sup_pools *sup_pools_new(struct event_base *base, sup_workers *workers, const sup_pools_cfg *cfg,
			 const sup_pools_hooks *hooks, sbx_err *err)
{
	sup_pools *p = calloc(1, sizeof(*p));
	if (!p) {
		sbx_err_set(err, -ENOMEM, "pools");
		return NULL;
	}
	p->base = base;
	p->workers = workers;
	p->cfg = *cfg;
	if (hooks)
		p->hooks = *hooks;
	TAILQ_INIT(&p->all);
	atomic_init(&p->stopping, false);
	p->shutdown_check = event_new(base, -1, 0, shutdown_check_cb, p);
	/* room for the cold pools made later: a pool never moves, sandboxes
	 * and waiters point at it */
	p->cap = cfg->nspecs + (cfg->store ? COLD_POOLS_MAX : 0);
	p->pools = calloc(p->cap, sizeof(*p->pools));
	if (!p->shutdown_check || !p->pools) {
		sbx_err_set(err, -ENOMEM, "pools");
		sup_pools_free(p);
		return NULL;
	}
	for (size_t i = 0; i < cfg->nspecs; i++) {
		const sup_pool_spec *sp = &cfg->specs[i];
		sup_pool *pool = add_pool(p, sp->image, sp->isolation, sp->size, err);
		if (!pool) {
			sup_pools_free(p);
			return NULL;
		}
		if (sp->res)
			pool->res = *sp->res;
	}
	return p;
}

void sup_pools_start(sup_pools *p)
{
	for (size_t i = 0; i < p->npools; i++)
		ensure_fill(&p->pools[i]);
}

/* The pool of (image, isolation); with NULL, *image_known says whether
 * another isolation serves image. */
static sup_pool *find_pool(const sup_pools *p, const char *image, sup_isolation isolation,
			   bool *image_known)
{
	*image_known = false;
	for (size_t i = 0; i < p->npools; i++) {
		if (strcmp(p->pools[i].image, image) != 0)
			continue;
		*image_known = true;
		if (p->pools[i].isolation == isolation)
			return &p->pools[i];
	}
	return NULL;
}

/* The pool serving image: host and rootfs folders by name (pooled by the
 * operator only); a store image by its digest as the store resolves the
 * name now (a ref moved by an import names the new image), with a pool of
 * size 0 (cold creates) made for it on first use. */
static sup_pool *pool_for(sup_pools *p, const char *image, sup_isolation isolation, sbx_err *err)
{
	bool image_known;
	if (!p->cfg.store || strcmp(image, "host") == 0 || image[0] == '/' ||
	    !sup_img_store_is_name(image)) {
		sup_pool *pool = find_pool(p, image, isolation, &image_known);
		if (!pool && image_known)
			sbx_err_set(err, -EINVAL, "isolation \"%s\" is not offered for image \"%.200s\" "
				    "on this node", sup_isolation_names[isolation], image);
		else if (!pool)
			sbx_err_set(err, -EINVAL, "unknown image \"%.200s\" (this supervisor serves %s%s)",
				    image, p->pools[0].image, p->npools > 1 ? " and others" : "");
		return pool;
	}
	sup_image im;
	if (sup_img_store_get(p->cfg.store, image, &im, err) < 0) {
		sbx_err_set(err, -EINVAL, "unknown image \"%.200s\": neither host nor an image of the store",
			    image);
		return NULL;
	}
	sup_pool *pool = NULL;
	for (size_t i = 0; !pool && i < p->npools; i++)
		if (strcmp(p->pools[i].digest, im.digest) == 0 && p->pools[i].isolation == isolation)
			pool = &p->pools[i];
	sup_image_release(&im);
	if (!pool && !p->cfg.runc->runtimes[isolation].binary) {
		sbx_err_set(err, -EINVAL, "isolation \"%s\" is not offered on this node",
			    sup_isolation_names[isolation]);
		return NULL;
	}
	if (!pool) {
		pool = add_pool(p, image, isolation, 0, err);
		if (pool)
			sup_info("pool %s: made for cold creates (%s)", pool->image, pool->digest);
	}
	return pool;
}

int sup_pools_set_size(sup_pools *p, const char *image, sup_isolation isolation, unsigned size,
		       sup_pool_stats *out, sbx_err *err)
{
	if (p->shutting_down)
		return sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down");
	sup_pool *pool = pool_for(p, image, isolation, err);
	if (!pool)
		return err->code;
	/* a pool of size > 0 pins its image, so it cannot be deleted under it */
	if (pool->digest[0] && size > 0 && !pool->pinned) {
		if (sup_img_store_pin(p->cfg.store, pool->digest, 1) < 0)
			return sbx_err_set(err, -ENOENT, "no image %.200s", image);
		pool->pinned = true;
	} else if (pool->digest[0] && size == 0 && pool->pinned) {
		sup_img_store_pin(p->cfg.store, pool->digest, -1);
		pool->pinned = false;
	}
	unsigned old = pool->size;
	pool->size = size;
	pool->shrunk = size < old;
	sup_sandbox *sb;
	while (pool->nready > size && (sb = take_ready(pool)) != NULL)
		start_destroy(p, sb, false, NULL, NULL);
	sup_info("pool %s (%s): size %u (was %u)", pool->image, sup_isolation_names[isolation], size,
		 old);
	ensure_fill(pool);
	sup_pools_stats(p, (size_t)(pool - p->pools), out);
	return 0;
}

void sup_pools_image_config(const sup_sandbox *sb, const sup_env **env, const char **user,
			    const char **workdir)
{
	*env = &sb->pool->env;
	*user = sb->pool->user;
	*workdir = sb->pool->workdir;
}

const char *sup_pools_image_of(const sup_sandbox *sb)
{
	return sb->pool->image;
}

const char *sup_pools_digest_of(const sup_sandbox *sb)
{
	return sb->pool->digest;
}

sup_isolation sup_pools_isolation_of(const sup_sandbox *sb)
{
	return sb->pool->isolation;
}

/* What a backend does not offer: -ENOSYS, said the same way everywhere. */
static int not_offered(const sup_pools *p, const char *what, sbx_err *err)
{
	return sbx_err_set(err, -ENOSYS, "%s is not offered with the %s backend", what, p->cfg.backend->name);
}

int sup_pools_usage(const sup_pools *p, const sup_sandbox *sb, sup_usage *u, sbx_err *err)
{
	if (p->cfg.backend)
		return not_offered(p, "a sandbox's usage", err);
	return sup_runc_usage(p->cfg.runc, &sb->box, u, err);
}

void sup_pools_note(sup_pools *p, const sup_sandbox *sb)
{
	if (sb->state == SUP_SB_RUNNING)
		mark(p, sb, "leased");
}

int sup_pools_fit(sup_pools *p, const char *image, sup_isolation isolation, unsigned given, sup_resources *res,
		  sbx_err *err)
{
	if (!p->cfg.backend)
		return 0;
	sup_pool *pool = pool_for(p, image, isolation, err);
	if (!pool)
		return err->code;
	const sup_resources *t = &pool->res;
	char a[32], b[32];
	const char *what = NULL;
	if ((given & SUP_RES_CPUS) && res->cpu_milli > t->cpu_milli) {
		what = "cpus";
		sup_resources_format_cpus(res->cpu_milli, a, sizeof(a));
		sup_resources_format_cpus(t->cpu_milli, b, sizeof(b));
	} else if ((given & SUP_RES_MEMORY) && res->memory > t->memory) {
		what = "memory";
		sup_resources_format_size(res->memory, a, sizeof(a));
		sup_resources_format_size(t->memory, b, sizeof(b));
	} else if ((given & SUP_RES_DISK) && res->disk > t->disk) {
		what = "disk";
		sup_resources_format_size(res->disk, a, sizeof(a));
		sup_resources_format_size(t->disk, b, sizeof(b));
	} else if ((given & SUP_RES_PIDS) && res->pids > t->pids) {
		what = "pids";
		snprintf(a, sizeof(a), "%u", res->pids);
		snprintf(b, sizeof(b), "%u", t->pids);
	}
	if (what)
		return sbx_err_set(err, -EINVAL, "resources.%s: %s is above %s, the limit of template %.100s's pods "
				   "(a pod's limits are its template's)", what, a, b, pool->image);
	*res = *t;
	return 0;
}

int sup_pools_acquire(sup_pools *p, const char *image, sup_isolation isolation,
		      const sup_resources *res, sup_acquire_cb cb, void *ud, sup_sandbox **now,
		      sup_acquire **wait, sbx_err *err)
{
	*now = NULL;
	*wait = NULL;
	if (p->shutting_down)
		return sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down");
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sup_pool *pool = pool_for(p, image, isolation, err);
	if (!pool)
		return err->code;
	const sup_resources *d = &pool->res;
	if (p->cfg.backend && (res->cpu_milli != d->cpu_milli || res->memory != d->memory || res->pids != d->pids ||
			       res->disk != d->disk))
		return not_offered(p, "limits other than the template's", err);
	sup_sandbox *sb = take_ready(pool);
	if (sb) {
		int r = hand_out(sb, res, err);
		ensure_fill(pool);
		if (r < 0)
			return r;
		observe_since(&pool->acquire, &t0);
		*now = sb;
		return 0;
	}
	if (p->nalive >= p->cfg.max_sandboxes && pool->creating <= pool->nwaiters)
		return sbx_err_set(err, -EAGAIN, "at the limit of %u sandboxes", p->cfg.max_sandboxes);
	sup_acquire *a = calloc(1, sizeof(*a));
	if (!a)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	a->pool = pool;
	a->res = *res;
	a->t0 = t0;
	a->cb = cb;
	a->ud = ud;
	a->timer = evtimer_new(p->base, on_waiter_timeout, a);
	if (!a->timer) {
		free(a);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	unsigned ms = p->cfg.acquire_timeout_ms;
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };
	evtimer_add(a->timer, &tv);
	TAILQ_INSERT_TAIL(&pool->waiters, a, link);
	pool->nwaiters++;
	sup_info("pool %s (%s): empty, a request waits for a cold create", pool->image,
		 sup_isolation_names[pool->isolation]);
	ensure_fill(pool);
	*wait = a;
	return 0;
}

/* An adopted sandbox's egress: its slot (so its addresses) again, its link
 * from the new router made as for a new one, rejecting everything until the
 * core loads its policy again. Start-up only: the plumbing blocks. */
static int replumb(sup_pools *p, sup_sandbox *sb, unsigned slot, sbx_err *err)
{
	int rc = sup_net_slot_claim(p->cfg.net, slot, err);
	if (rc < 0)
		return rc;
	sup_rtnl *nl = NULL;
	rc = sup_net_plumb(p->cfg.net, slot, sb->box.init_pid, &nl, err);
	if (rc == 0 && (rc = sup_net_slot_ready(p->cfg.net, slot, nl, err)) < 0) {
		sbx_err e;
		nl = sup_net_slot_release(p->cfg.net, slot);
		if (sup_net_unplumb(p->cfg.net, slot, nl, &e) < 0)
			sup_warn("sandbox %s: %s", sb->id, e.msg);
	}
	if (rc < 0) {
		sup_net_slot_put(p->cfg.net, slot);
		return sbx_err_wrap(err, "its egress plumbing");
	}
	sb->net_slot = slot;
	return 0;
}

int sup_pools_adopt(sup_pools *p, const sup_catalog_rec *rec, const sup_runc_box *box, int agent_fd,
		    sup_sandbox **out, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = agent_fd;
	*out = NULL;
	if (rec->net_slot && !p->cfg.net)
		return sbx_err_set(err, -EOPNOTSUPP,
				   "it has egress plumbing (slot %u) and this start has no --uplink",
				   rec->net_slot);
	sup_pool *pool = NULL;
	for (size_t i = 0; !pool && i < p->npools; i++)
		if (strcmp(p->pools[i].image, rec->image) == 0 &&
		    strcmp(p->pools[i].digest, rec->digest) == 0 && p->pools[i].isolation == rec->isolation)
			pool = &p->pools[i];
	/* a store image without a pool now: a cold pool of its digest (a ref
	 * may name another image by now) */
	if (!pool && rec->digest[0] && p->cfg.store)
		pool = add_pool(p, rec->digest, rec->isolation, 0, err);
	else if (!pool)
		sbx_err_set(err, -ENOENT, "image %.200s (%s) is not served any more", rec->image,
			    sup_isolation_names[rec->isolation]);
	if (!pool)
		return err->code;
	if (pool->digest[0] && sup_img_store_pin(p->cfg.store, pool->digest, 1) < 0)
		return sbx_err_set(err, -ENOENT, "its image %s was deleted", pool->digest);
	sup_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb) {
		if (pool->digest[0])
			sup_img_store_pin(p->cfg.store, pool->digest, -1);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	snprintf(sb->id, sizeof(sb->id), "%s", rec->id);
	sb->pool = pool;
	sb->box = *box;
	sb->res = rec->res;
	sb->state = SUP_SB_CONNECTING;
	sb->adopting = rec->phase == SUP_CAT_RUNNING;
	/* a paused one's agent cannot answer the handshake frozen: thawed
	 * until it has (agent_on_ready freezes it again) */
	sb->paused = sb->adopting && rec->paused;
	if ((sb->paused && sup_runc_freeze(p->cfg.runc, &sb->box, false, err) < 0) ||
	    (rec->net_slot && replumb(p, sb, rec->net_slot, err) < 0)) {
		unpin(sb);
		free(sb);
		return err->code;
	}
	clock_gettime(CLOCK_MONOTONIC, &sb->queued_at);
	TAILQ_INIT(&sb->delete_waiters);
	TAILQ_INIT(&sb->execs);
	int rc = fd >= 0 ? sup_agent_open(p->base, sbx_steal_fd(&fd), sb->id, p->cfg.handshake_timeout_ms,
					  &p->cfg.agent, &agent_cbs, sb, &sb->agent, err)
			 : sup_agent_connect(p->base, sb->box.socket_path, sb->id, p->cfg.handshake_timeout_ms,
					     &p->cfg.agent, &agent_cbs, sb, &sb->agent, err);
	if (rc < 0) {
		if (sb->net_slot) {
			sbx_err e;
			if (sup_net_unplumb(p->cfg.net, sb->net_slot,
					    sup_net_slot_release(p->cfg.net, sb->net_slot), &e) < 0)
				sup_warn("sandbox %s: %s", sb->id, e.msg);
			sup_net_slot_put(p->cfg.net, sb->net_slot);
		}
		unpin(sb);
		free(sb);
		return err->code;
	}
	TAILQ_INSERT_TAIL(&p->all, sb, all_link);
	p->nalive++;
	pool->creating++;
	*out = sb;
	return 0;
}

int sup_pools_acquire_seeded(sup_pools *p, const char *image, sup_isolation isolation,
			     const sup_resources *res, const sup_runc_seed *seed, sup_acquire_cb cb,
			     void *ud, sup_acquire **wait, sbx_err *err)
{
	*wait = NULL;
	if (p->shutting_down)
		return sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down");
	if (p->cfg.backend)
		return not_offered(p, "a sandbox made from a snapshot or fork", err);
	sup_pool *pool = pool_for(p, image, isolation, err);
	if (!pool)
		return err->code;
	if (p->nalive >= p->cfg.max_sandboxes)
		return sbx_err_set(err, -EAGAIN, "at the limit of %u sandboxes", p->cfg.max_sandboxes);
	sup_acquire *a = calloc(1, sizeof(*a));
	sup_runc_seed *copy = malloc(sizeof(*copy));
	if (!a || !copy) {
		free(a);
		free(copy);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	*copy = *seed;
	/* the layer is unpacked against the disk asked for, not the pool's */
	copy->disk = res->disk;
	a->pool = pool;
	a->res = *res;
	clock_gettime(CLOCK_MONOTONIC, &a->t0);
	a->cb = cb;
	a->ud = ud;
	a->seeded = true;
	int r = start_create_for(pool, true, copy, a);
	if (r < 0) {
		free(a);
		return sbx_err_set(err, r == -ENOMEM ? -ENOMEM : -EAGAIN,
				   "could not start a create for image %.200s", pool->image);
	}
	*wait = a;
	return 0;
}

int sup_pools_freeze(sup_pools *p, sup_sandbox *sb, bool frozen, sbx_err *err)
{
	if (p->cfg.backend)
		return not_offered(p, "pause and resume", err);
	if (sb->state != SUP_SB_RUNNING || !sb->agent)
		return sbx_err_set(err, -EBUSY, "sandbox %s is %s", sb->id, sup_sb_state_name(sb->state));
	int r = sup_runc_freeze(p->cfg.runc, &sb->box, frozen, err);
	if (r < 0)
		return r;
	/* thawed before the clocks run again, frozen before they stop: no
	 * deadline counts a time the agent could not answer */
	sup_agent_hold(sb->agent, frozen);
	sb->paused = frozen;
	return 0;
}

void sup_pools_acquire_cancel(sup_acquire *a)
{
	if (a->seeded) {
		if (a->sb)
			a->sb->dedicated = NULL;
		waiter_free(a);
		return;
	}
	waiter_remove(a);
	waiter_free(a);
}

static void shutdown_pools(sup_pools *p, bool handover, void (*done)(void *ud), void *ud);

void sup_pools_shutdown(sup_pools *p, void (*done)(void *ud), void *ud)
{
	shutdown_pools(p, false, done, ud);
}

void sup_pools_handover(sup_pools *p, void (*done)(void *ud), void *ud)
{
	shutdown_pools(p, true, done, ud);
}

static void shutdown_pools(sup_pools *p, bool handover, void (*done)(void *ud), void *ud)
{
	p->shutting_down = true;
	p->handover = handover;
	atomic_store(&p->stopping, true);
	if (p->cfg.backend && p->cfg.backend->stop)
		p->cfg.backend->stop(p->cfg.backend->ud);
	p->shutdown_done = done;
	p->shutdown_ud = ud;
	sup_workers_on_idle(p->workers, workers_idle, p);
	sbx_err stop;
	sbx_err_set(&stop, -ESHUTDOWN, "the supervisor is shutting down");
	sup_sandbox *ss;
	TAILQ_FOREACH(ss, &p->all, all_link)
	seeded_fail(ss, -ESHUTDOWN, &stop);
	for (size_t i = 0; i < p->npools; i++) {
		sup_pool *pool = &p->pools[i];
		event_del(pool->backoff_timer);
		while (!TAILQ_EMPTY(&pool->waiters))
			/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the callee unlinks it first; the analyzer cannot follow sys/queue.h */
			waiter_fail(TAILQ_FIRST(&pool->waiters), -ESHUTDOWN,
				    "the supervisor is shutting down");
		sup_sandbox *sb;
		while (!handover && (sb = TAILQ_FIRST(&pool->ready)) != NULL) {
			TAILQ_REMOVE(&pool->ready, sb, ready_link);
			pool->nready--;
			start_destroy(p, sb, false, NULL, NULL);
		}
	}
	/* Connecting ones: their create is done, only the handshake is left.
	 * Resetting ones whose agent still resets (no longer in the catalog:
	 * none is handed over); those being checked go when the check ends. */
	sup_sandbox *sb, *next;
	for (sb = TAILQ_FIRST(&p->all); sb; sb = next) {
		next = TAILQ_NEXT(sb, all_link);
		if (sb->state == SUP_SB_CONNECTING && !handover) {
			sb->pool->creating--;
			start_destroy(p, sb, false, NULL, NULL);
		} else if (sb->state == SUP_SB_RESETTING && sb->reset_call) {
			sup_agent_reset_cancel(sb->reset_call);
			sb->reset_call = NULL;
			reset_failed(sb, "the supervisor is shutting down");
		}
	}
	maybe_shutdown_done(p);
}

void sup_pools_free(sup_pools *p)
{
	if (!p)
		return;
	for (size_t i = 0; p->pools && i < p->npools; i++) {
		sup_pool *pool = &p->pools[i];
		while (!TAILQ_EMPTY(&pool->waiters)) {
			sup_acquire *a = TAILQ_FIRST(&pool->waiters);
			/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the callee unlinks it first; the analyzer cannot follow sys/queue.h */
			waiter_remove(a);
			waiter_free(a);
		}
	}
	/* Whatever is still listed (only on an aborted start) is dropped; its
	 * containers are swept as leftovers by the next start. */
	sup_sandbox *sb;
	while ((sb = TAILQ_FIRST(&p->all)) != NULL) {
		TAILQ_REMOVE(&p->all, sb, all_link);
		if (sb->reset_call)
			sup_agent_reset_cancel(sb->reset_call);
		if (sb->agent)
			sup_agent_free(sb->agent);
		sb_free(sb);
	}
	for (size_t i = 0; p->pools && i < p->npools; i++)
		pool_release(&p->pools[i]);
	free(p->pools);
	if (p->shutdown_check)
		event_free(p->shutdown_check);
	free(p);
}

size_t sup_pools_count(const sup_pools *p)
{
	return p->npools;
}

void sup_pools_stats(const sup_pools *p, size_t i, sup_pool_stats *out)
{
	const sup_pool *pool = &p->pools[i];
	out->image = pool->image;
	out->isolation = pool->isolation;
	out->size = pool->size;
	out->ready = pool->nready;
	out->acquire = &pool->acquire;
	out->cold_create = &pool->cold_create;
	out->creating = pool->creating;
	out->waiting = pool->nwaiters;
	out->reset = &pool->reset;
	out->reused = pool->reused;
	out->reset_failed = pool->reset_failed;
}

unsigned sup_pools_alive(const sup_pools *p)
{
	return p->nalive;
}
