/* sup_pool_sizer: pools that size themselves. Each pool of size > 0 counts
 * its acquires per second over a window (cfg.pool_window_s); once a
 * second its target becomes what that demand asks, between its size (the
 * operator's floor) and cfg.pool_max:
 * - its largest burst: the most acquires of one second in the window, so
 *   that a pattern of bursts finds them ready the next time;
 * - its rate: the acquires of the last minute a second, times a cold
 *   create's mean time, so that a steady stream never waits for one;
 * then bounded by the node: what max_sandboxes leaves beside the handed-out
 * sandboxes is shared so that every pool keeps at least its size and the
 * room above the sizes goes to the pools in proportion to what they ask
 * (no image's pool starves another's); and while the node's available
 * memory is under an eighth of its total, no pool grows. A quiet window
 * brings the target back to the size. The pool's view says the target and
 * why. Loop thread only; no blocking call (one small read of
 * /proc/meminfo a second). */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sup_log.h"
#include "sup_pool_int.h"

#define RATE_WINDOW_S 60u       /* the rate: acquires of the last minute */
#define COLD_CREATE_GUESS_S 0.1 /* a cold create's time before one is seen */
#define MEMORY_LOW_PART 8u      /* no growth under 1/8 of the memory available */

static uint64_t now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec;
}

bool sup_pool_sized(const sup_pool *pool)
{
	const sup_pools_cfg *c = &pool->owner->cfg;
	return pool->size > 0 && c->pool_max > pool->size && c->pool_window_s > 0;
}

/* The ring moved on to second now: the seconds skipped had no acquire. */
static void demand_advance(sup_pool *pool, uint64_t now)
{
	unsigned n = pool->owner->cfg.pool_window_s;
	if (now <= pool->demand_at)
		return;
	uint64_t gap = now - pool->demand_at;
	if (gap >= n) {
		memset(pool->demand, 0, n * sizeof(*pool->demand));
	} else {
		for (uint64_t s = pool->demand_at + 1; s <= now; s++)
			pool->demand[s % n] = 0;
	}
	pool->demand_at = now;
}

/* The ring, made on the pool's first acquire while it sizes itself. */
static bool demand_ready(sup_pool *pool)
{
	if (pool->demand)
		return true;
	if (!sup_pool_sized(pool))
		return false;
	pool->demand = calloc(pool->owner->cfg.pool_window_s, sizeof(*pool->demand));
	pool->demand_at = now_s();
	return pool->demand != NULL;
}

void sup_pool_demand_note(sup_pool *pool)
{
	if (!demand_ready(pool))
		return;
	uint64_t now = now_s();
	demand_advance(pool, now);
	uint16_t *slot = &pool->demand[now % pool->owner->cfg.pool_window_s];
	if (*slot < UINT16_MAX)
		(*slot)++;
}

void sup_pool_sizer_clear(sup_pool *pool)
{
	free(pool->demand);
	pool->demand = NULL;
}

void sup_pool_retarget(sup_pool *pool, unsigned target, const char *why)
{
	sup_pools *p = pool->owner;
	unsigned old = pool->target;
	pool->why = why;
	if (target == old) {
		sup_pool_ensure_fill(pool);
		return;
	}
	pool->target = target;
	pool->shrunk = target < old;
	sup_sandbox *sb;
	while (pool->nready > target && (sb = sup_pool_take_ready(pool)) != NULL)
		sup_pool_start_destroy(p, sb, false, NULL, NULL);
	sup_info("pool %s (%s): keeps %u ready (was %u): %s", pool->image,
		 sup_isolation_names[pool->isolation], target, old, why);
	sup_pool_ensure_fill(pool);
}

/* What pool's demand asks for alone (at least its size, at most
 * pool_max), and why. */
static unsigned demand_of(sup_pool *pool, uint64_t now, const char **why)
{
	const sup_pools_cfg *c = &pool->owner->cfg;
	unsigned n = c->pool_window_s;
	demand_advance(pool, now);
	unsigned peak = 0;
	uint64_t recent = 0;
	for (unsigned i = 0; i < n; i++) {
		unsigned v = pool->demand[i];
		peak = v > peak ? v : peak;
	}
	unsigned last = n < RATE_WINDOW_S ? n : RATE_WINDOW_S;
	for (unsigned k = 0; k < last; k++)
		recent += pool->demand[(now - k) % n];
	pool->peak = peak;
	double cold_s = pool->cold_create.count
				? pool->cold_create.sum / (double)pool->cold_create.count
				: COLD_CREATE_GUESS_S;
	double rate = (double)recent / last;
	unsigned steady = (unsigned)(rate * cold_s + 0.999);
	unsigned want = pool->size;
	*why = "size";
	if (peak > want) {
		want = peak;
		*why = "the largest burst in the window";
	}
	if (steady > want) {
		want = steady;
		*why = "the rate times a cold create's time";
	}
	if (want > c->pool_max) {
		want = c->pool_max;
		*why = "at --pool-max";
	}
	return want;
}

/* The node's available memory is low (under 1/MEMORY_LOW_PART of it). */
static bool memory_low(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	if (!f)
		return false;
	char line[128];
	unsigned long long total = 0, avail = 0, v;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "MemTotal: %llu kB", &v) == 1)
			total = v;
		else if (sscanf(line, "MemAvailable: %llu kB", &v) == 1)
			avail = v;
	}
	fclose(f);
	return total && avail < total / MEMORY_LOW_PART;
}

static void sizer_tick(evutil_socket_t fd, short what, void *ud)
{
	sup_pools *p = ud;
	(void)fd;
	(void)what;
	if (p->shutting_down) {
		event_del(p->sizer); /* the loop may end: nothing left to size */
		return;
	}
	uint64_t now = now_s();
	unsigned want[p->npools > 0 ? p->npools : 1];
	const char *why[p->npools > 0 ? p->npools : 1];
	/* the room the node has for ready sandboxes: what max_sandboxes
	 * leaves beside those the pools do not hold (handed out, resetting,
	 * being destroyed) */
	unsigned pooled = 0, floors = 0;
	unsigned long extra = 0;
	for (size_t i = 0; i < p->npools; i++) {
		sup_pool *pool = &p->pools[i];
		/* creates for waiting requests are theirs, not the pool's */
		pooled += pool->nready +
			  (pool->creating > pool->nwaiters ? pool->creating - pool->nwaiters : 0);
		want[i] = pool->target;
		why[i] = pool->why;
		if (!sup_pool_sized(pool) || !pool->demand) {
			if (pool->demand && !sup_pool_sized(pool))
				sup_pool_sizer_clear(pool); /* no longer sized (PUT 0) */
			continue;
		}
		want[i] = demand_of(pool, now, &why[i]);
		floors += pool->size;
		extra += want[i] - pool->size;
	}
	unsigned others = p->nalive > pooled ? p->nalive - pooled : 0;
	unsigned room = p->cfg.max_sandboxes > others ? p->cfg.max_sandboxes - others : 0;
	bool low = memory_low();
	for (size_t i = 0; i < p->npools; i++) {
		sup_pool *pool = &p->pools[i];
		if (!pool->demand)
			continue;
		unsigned w = want[i];
		if (extra && floors + extra > room) {
			/* the room above the floors, shared as they ask */
			unsigned above = room > floors ? room - floors : 0;
			w = pool->size + (unsigned)((unsigned long)(w - pool->size) * above / extra);
			why[i] = "its share of --max-sandboxes";
		}
		if (low && w > pool->target) {
			w = pool->target;
			why[i] = "the node's memory is low";
		}
		if (w != pool->target || why[i] != pool->why)
			sup_pool_retarget(pool, w, why[i]);
	}
}

int sup_pools_sizer_start(sup_pools *p, sbx_err *err)
{
	if (!p->cfg.pool_max || !p->cfg.pool_window_s)
		return 0;
	p->sizer = event_new(p->base, -1, EV_PERSIST, sizer_tick, p);
	if (!p->sizer)
		return sbx_err_set(err, -ENOMEM, "the pools' sizer");
	struct timeval tv = { 1, 0 };
	event_add(p->sizer, &tv);
	return 0;
}
