/* What the pools' files share (sup_pool.c, sup_pool_make.c,
 * sup_pool_reuse.c, sup_pool_images.c, sup_pool_adopt.c, sup_pool_stop.c):
 * the pools' structs and the steps one file calls in another. Nothing
 * outside these files includes this; the pools' interface is sup_pool.h. */
#ifndef SUP_POOL_INT_H
#define SUP_POOL_INT_H

#include <event2/util.h>
#include <stdatomic.h>
#include <sys/queue.h>
#include <time.h>

#include "sup_img_store.h"
#include "sup_pool.h"

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
	unsigned size;       /* ready sandboxes to keep: the operator's, the floor */
	unsigned target;     /* ready sandboxes kept now: size, or more while
			      * demand asks (sup_pool_sizer.c) */
	/* demand (sup_pool_sizer.c): acquires per second over the window, a
	 * ring whose newest slot is second demand_at (monotonic); NULL: the
	 * pool keeps its size */
	uint16_t *demand;
	uint64_t demand_at;
	unsigned peak;       /* the most acquires of one second in the window */
	const char *why;     /* what set the target (a static string) */
	/* a store image: its digest (what creates name, what is pinned) and
	 * the config a command starts with */
	char digest[SUP_IMG_DIGEST_LEN + 1];
	sup_env env;
	char *user;          /* NULL: the sandbox user (the image's is root or none) */
	char *workdir;
	char *service;       /* the image's service (sup_pool_service.c), NULL: none */
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
	struct event *sizer;  /* the pools' sizes follow demand each second */
};

/* ---- sup_pool.c: a sandbox's memory, waiters, handing out ---- */

/* The catalog forgets a sandbox (a failure is logged). */
void sup_pool_forget(sup_pools *p, const char *id);
/* The backend hears of a sandbox's state, or why it goes on doubt. */
void sup_pool_mark(sup_pools *p, const sup_sandbox *sb, const char *state);
void sup_pool_doubt(sup_pools *p, const sup_sandbox *sb, const char *reason, const char *why);
/* Its image unpinned; with that, the end of its memory. */
void sup_pool_unpin(sup_sandbox *sb);
void sup_pool_sb_free(sup_sandbox *sb);
long sup_pool_us_between(const struct timespec *a, const struct timespec *b);
void sup_pool_observe_since(sup_hist *h, const struct timespec *t0);
void sup_pool_waiter_free(sup_acquire *a);
void sup_pool_waiter_remove(sup_acquire *a);
/* Removed, freed, then its requester answered with code and msg. */
void sup_pool_waiter_fail(sup_acquire *a, int code, const char *msg);
sup_sandbox *sup_pool_take_ready(sup_pool *pool);
/* A seeded sandbox's requester answered (once) with code and err. */
void sup_pool_seeded_fail(sup_sandbox *sb, int code, const sbx_err *err);
/* A ready sandbox (new, or reset): to the oldest waiter, or kept. */
void sup_pool_offer(sup_sandbox *sb);
/* A new sandbox's agent is connected: its requester's, or offered. */
void sup_pool_sandbox_ready(sup_sandbox *sb);

/* ---- sup_pool_make.c ---- */

/* Creates queued until the pool has its size and its waiters are served. */
void sup_pool_ensure_fill(sup_pool *pool);
/* Queue a create; with seed (taken over, freed here on failure) it is the
 * seeded sandbox of acquire a. */
int sup_pool_create_for(sup_pool *pool, bool front, sup_runc_seed *seed, sup_acquire *a);
/* The agent connection's callbacks of every sandbox the pools hold. */
extern const sup_agent_cbs sup_pool_agent_cbs;
/* A pool's backoff_timer. */
void sup_pool_on_backoff_end(evutil_socket_t fd, short what, void *ud);

/* ---- sup_pool_service.c ---- */

/* The tag of the image's service among the sandbox's processes. */
#define SUP_POOL_SERVICE_TAG "sbx-service"
/* What follows a service's start: lost, the agent went away meanwhile
 * (its on_lost follows for a new sandbox, not for one being reset). */
typedef void (*sup_pool_service_then)(sup_sandbox *sb, bool lost);
/* Start the pool image's service in sb (new or reset, its agent up): 1
 * when started, then(sb, lost) follows once the agent answered or was
 * lost (not when the supervisor freed the agent: the one that did handles
 * sb); 0 when there is none or it could not be asked for (logged): the
 * caller goes on itself. */
int sup_pool_service_start(sup_sandbox *sb, sup_pool_service_then then);

/* ---- sup_pool_reuse.c ---- */

/* Out of the catalog, its agent closed, destroyed on a worker; cb then. */
void sup_pool_start_destroy(sup_pools *p, sup_sandbox *sb, bool urgent, sup_destroy_cb cb,
			    void *ud);
/* A reset or its check failed (or the pools stop): destroyed, replaced. */
void sup_pool_reset_failed(sup_sandbox *sb, const char *why);

/* ---- sup_pool_images.c ---- */

/* A pool of image with size ready sandboxes (NULL: err). */
sup_pool *sup_pool_add(sup_pools *p, const char *image, sup_isolation isolation, unsigned size,
		       sbx_err *err);
/* The pool serving image (made for a store image on first use). */
sup_pool *sup_pool_for(sup_pools *p, const char *image, sup_isolation isolation, sbx_err *err);
/* What a pool holds, freed (the pool's slot stays). */
void sup_pool_clear(sup_pool *pool);

/* ---- sup_pool_sizer.c ---- */

/* Whether pools size themselves (cfg.pool_max above a pool's size). */
bool sup_pool_sized(const sup_pool *pool);
/* An acquire of pool, now: counted in its demand. */
void sup_pool_demand_note(sup_pool *pool);
/* Keep target ready from now on: more made in the background, ready ones
 * beyond it destroyed, creates in flight beyond it too once ready. */
void sup_pool_retarget(sup_pool *pool, unsigned target, const char *why);
/* The pools' sizer: every second, each pool's target from its demand. */
int sup_pools_sizer_start(sup_pools *p, sbx_err *err);
/* A pool's own part of the sizer, freed (sup_pool_clear). */
void sup_pool_sizer_clear(sup_pool *pool);

/* ---- sup_pool_stop.c ---- */

/* The stop's caller told on the next turn of the loop, when it is time. */
void sup_pool_maybe_done(sup_pools *p);
/* The pools' shutdown_check event. */
void sup_pool_shutdown_check(evutil_socket_t fd, short what, void *ud);

#endif
