/* sup_pool: see sup_pool.h. The pools and what they hand out: the shared
 * helpers of a sandbox's memory, waiters, handing out (ready, seeded),
 * acquires, the backend's seam (usage, limits, freeze) and the figures.
 * Making (sup_pool_make.c), destroying and reusing (sup_pool_reuse.c),
 * the pools of store images (sup_pool_images.c), adopting at a start
 * (sup_pool_adopt.c) and stopping (sup_pool_stop.c) are beside it. */
#include "sup_pool.h"

#include <errno.h>
#include <event2/event.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sup_agent.h"
#include "sup_agent_reset.h"
#include "sup_catalog.h"
#include "sup_img_store.h"
#include "sup_log.h"
#include "sup_pool_int.h"
#include "sup_runc_clean.h"

/* The catalog forgets a sandbox. A failure leaves a row naming a sandbox
 * that will be gone: the next start finds it dead and sweeps it. */
void sup_pool_forget(sup_pools *p, const char *id)
{
	sbx_err e;
	if (p->cfg.catalog && sup_catalog_remove(p->cfg.catalog, id, &e) < 0)
		sup_warn("sandbox %s: %s", id, e.msg);
}

/* The backend hears of a sandbox's state (its pod's labels). */
void sup_pool_mark(sup_pools *p, const sup_sandbox *sb, const char *state)
{
	const sup_pool_backend *be = p->cfg.backend;
	if (be && be->mark)
		be->mark(be->ud, sb, state);
}

/* The backend hears why a sandbox of its goes on sup_pool_doubt (an Event). */
void sup_pool_doubt(sup_pools *p, const sup_sandbox *sb, const char *reason, const char *why)
{
	const sup_pool_backend *be = p->cfg.backend;
	if (be && be->doubt)
		be->doubt(be->ud, sb->pool->image, &sb->box, reason, why);
}

/* A sandbox of a store image pins it from its create to its destroy. */
void sup_pool_unpin(sup_sandbox *sb)
{
	if (sb->pool->digest[0])
		sup_img_store_pin(sb->pool->owner->cfg.store, sb->pool->digest, -1);
}

/* The end of a sandbox's memory (its image unpinned). */
void sup_pool_sb_free(sup_sandbox *sb)
{
	sup_pool_unpin(sb);
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

/* ---- waiters ---- */

void sup_pool_waiter_free(sup_acquire *a)
{
	if (a->timer)
		event_free(a->timer);
	free(a);
}

void sup_pool_waiter_remove(sup_acquire *a)
{
	TAILQ_REMOVE(&a->pool->waiters, a, link);
	a->pool->nwaiters--;
}

void sup_pool_waiter_fail(sup_acquire *a, int code, const char *msg)
{
	sbx_err e;
	sbx_err_set(&e, code, "%s", msg);
	sup_pool_waiter_remove(a);
	sup_acquire_cb cb = a->cb;
	void *ud = a->ud;
	sup_pool_waiter_free(a);
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
	sup_pool_waiter_fail(a, -EAGAIN, msg);
}

/* ---- handing out ---- */

long sup_pool_us_between(const struct timespec *a, const struct timespec *b)
{
	return (long)((b->tv_sec - a->tv_sec) * 1000000 + (b->tv_nsec - a->tv_nsec) / 1000);
}

void sup_pool_observe_since(sup_hist *h, const struct timespec *t0)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	sup_hist_observe(h, (double)sup_pool_us_between(t0, &now) / 1e6);
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
		sup_pool_start_destroy(p, sb, false, NULL, NULL);
		sbx_err why = *err; /* the message is formatted into err */
		return sbx_err_set(err, -EAGAIN, "could not apply the sandbox's limits: %.400s",
				   why.msg);
	}
	sup_debug("sandbox %s: limits set in %ld us", sb->id, sup_pool_us_between(&t0, &t1));
	sb->res = *res;
	sb->state = SUP_SB_RUNNING;
	return 0;
}

sup_sandbox *sup_pool_take_ready(sup_pool *pool)
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
void sup_pool_seeded_fail(sup_sandbox *sb, int code, const sbx_err *err)
{
	sup_acquire *a = sb->dedicated;
	if (!a)
		return;
	sb->dedicated = NULL;
	sup_acquire_cb cb = a->cb;
	void *ud = a->ud;
	sup_pool_waiter_free(a);
	cb(NULL, code, err, ud);
}

static void seeded_ready(sup_sandbox *sb)
{
	sup_acquire *a = sb->dedicated;
	if (!a) {
		sup_info("sandbox %s: seeded for a request that went away: destroyed", sb->id);
		sup_pool_start_destroy(sb->pool->owner, sb, false, NULL, NULL);
		return;
	}
	sb->dedicated = NULL;
	sup_acquire_cb cb = a->cb;
	void *ud = a->ud;
	sup_resources res = a->res;
	sup_pool_waiter_free(a);
	sbx_err e;
	if (hand_out(sb, &res, &e) < 0) {
		cb(NULL, e.code, &e, ud);
		return;
	}
	sup_debug("sandbox %s: seeded, handed out", sb->id);
	cb(sb, 0, NULL, ud);
}

/* A ready sandbox (new, or reset): to the oldest waiter, or kept. */
void sup_pool_offer(sup_sandbox *sb)
{
	sup_pool *pool = sb->pool;
	sb->state = SUP_SB_READY;
	sup_acquire *a = TAILQ_FIRST(&pool->waiters);
	if (a) {
		sup_pool_waiter_remove(a);
		sup_acquire_cb cb = a->cb;
		void *ud = a->ud;
		sup_resources res = a->res;
		struct timespec t0 = a->t0;
		sup_pool_waiter_free(a);
		sbx_err e;
		if (hand_out(sb, &res, &e) < 0) {
			cb(NULL, e.code, &e, ud);
			return;
		}
		sup_debug("sandbox %s: ready, handed to a waiting request", sb->id);
		sup_pool_observe_since(&pool->acquire, &t0);
		cb(sb, 0, NULL, ud);
	} else if (pool->shrunk && pool->nready >= pool->target) {
		sup_debug("sandbox %s: ready beyond the size of pool %s (%u): destroyed", sb->id,
			  pool->image, pool->target);
		sup_pool_start_destroy(pool->owner, sb, false, NULL, NULL);
	} else {
		TAILQ_INSERT_TAIL(&pool->ready, sb, ready_link);
		pool->nready++;
		sup_pool_mark(pool->owner, sb, "ready");
		sup_debug("sandbox %s: ready in pool %s (%u ready)", sb->id, pool->image, pool->nready);
	}
}

/* A sandbox's agent is connected: give it to the oldest waiter, or keep it. */
void sup_pool_sandbox_ready(sup_sandbox *sb)
{
	sup_pool *pool = sb->pool;
	sb->state = SUP_SB_READY;
	pool->creating--;
	sup_pool_observe_since(&pool->cold_create, &sb->queued_at);
	pool->fail_streak = 0;
	if (sb->seeded) {
		seeded_ready(sb);
		return;
	}
	sup_pool_offer(sb);
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
	p->shutdown_check = event_new(base, -1, 0, sup_pool_shutdown_check, p);
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
		sup_pool *pool = sup_pool_add(p, sp->image, sp->isolation, sp->size, err);
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
		sup_pool_ensure_fill(&p->pools[i]);
	sbx_err e;
	if (sup_pools_sizer_start(p, &e) < 0)
		sup_warn("pools: they keep their sizes: %s", e.msg);
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
		sup_pool_mark(p, sb, "leased");
}

int sup_pools_fit(sup_pools *p, const char *image, sup_isolation isolation, unsigned given, sup_resources *res,
		  sbx_err *err)
{
	if (!p->cfg.backend)
		return 0;
	sup_pool *pool = sup_pool_for(p, image, isolation, err);
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
	sup_pool *pool = sup_pool_for(p, image, isolation, err);
	if (!pool)
		return err->code;
	const sup_resources *d = &pool->res;
	if (p->cfg.backend && (res->cpu_milli != d->cpu_milli || res->memory != d->memory || res->pids != d->pids ||
			       res->disk != d->disk))
		return not_offered(p, "limits other than the template's", err);
	sup_pool_demand_note(pool);
	sup_sandbox *sb = sup_pool_take_ready(pool);
	if (sb) {
		int r = hand_out(sb, res, err);
		sup_pool_ensure_fill(pool);
		if (r < 0)
			return r;
		sup_pool_observe_since(&pool->acquire, &t0);
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
	sup_pool_ensure_fill(pool);
	*wait = a;
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
	sup_pool *pool = sup_pool_for(p, image, isolation, err);
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
	int r = sup_pool_create_for(pool, true, copy, a);
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
		sup_pool_waiter_free(a);
		return;
	}
	sup_pool_waiter_remove(a);
	sup_pool_waiter_free(a);
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
			sup_pool_waiter_remove(a);
			sup_pool_waiter_free(a);
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
		sup_pool_sb_free(sb);
	}
	for (size_t i = 0; p->pools && i < p->npools; i++)
		sup_pool_clear(&p->pools[i]);
	free(p->pools);
	if (p->shutdown_check)
		event_free(p->shutdown_check);
	if (p->sizer)
		event_free(p->sizer);
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
	out->target = pool->target;
	out->max = sup_pool_sized(pool) ? p->cfg.pool_max : pool->size;
	out->peak = pool->peak;
	out->why = pool->why;
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
