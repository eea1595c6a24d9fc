/* The pools stopping: a shutdown (every sandbox destroyed) or a handover
 * (every handed-out one left to the next start), waiters failed, and the
 * caller told once no sandbox (or, for a handover, no worker job) is left;
 * a stop that takes long says what it waits for. Loop thread only. */
#include <errno.h>
#include <event2/event.h>
#include <stdatomic.h>
#include <stdio.h>

#include "sup_agent_reset.h"
#include "sup_log.h"
#include "sup_pool_int.h"

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

void sup_pool_shutdown_check(evutil_socket_t fd, short what, void *ud)
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
void sup_pool_maybe_done(sup_pools *p)
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
	sup_pool_maybe_done(ud);
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
	sup_pool_seeded_fail(ss, -ESHUTDOWN, &stop);
	for (size_t i = 0; i < p->npools; i++) {
		sup_pool *pool = &p->pools[i];
		event_del(pool->backoff_timer);
		while (!TAILQ_EMPTY(&pool->waiters))
			/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the callee unlinks it first; the analyzer cannot follow sys/queue.h */
			sup_pool_waiter_fail(TAILQ_FIRST(&pool->waiters), -ESHUTDOWN,
				    "the supervisor is shutting down");
		sup_sandbox *sb;
		while (!handover && (sb = TAILQ_FIRST(&pool->ready)) != NULL) {
			TAILQ_REMOVE(&pool->ready, sb, ready_link);
			pool->nready--;
			sup_pool_start_destroy(p, sb, false, NULL, NULL);
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
			sup_pool_start_destroy(p, sb, false, NULL, NULL);
		} else if (sb->state == SUP_SB_RESETTING && sb->reset_call) {
			sup_agent_reset_cancel(sb->reset_call);
			sb->reset_call = NULL;
			sup_pool_reset_failed(sb, "the supervisor is shutting down");
		}
	}
	sup_pool_maybe_done(p);
}
