/* The pools' stop (sup_pools_shutdown) ends as soon as what it waits for is
 * over, also when the last busy job on the workers it shares is someone
 * else's (a snapshots' fork-layer sweep, a volume's job): such a job's
 * done() knows nothing of the pools, and the stop used to wait for its next
 * report 10 s later (before that report, for ever: the supervisor that did
 * not exit within 60 s of SIGINT). Real pools (no sandbox: size 0), real
 * worker threads, a real event loop. */
#include <event2/event.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_pool.h"
#include "sup_workers.h"

/* How long the foreign job runs once the stop waits for it. */
#define FOREIGN_JOB_MS 200
/* The stop must end well before the pools' own re-check (10 s). */
#define STOP_WITHIN_MS 3000
#define GIVE_UP_S 15

typedef struct stop_test {
	sup_job job;
	atomic_bool started;
	bool job_done;
	bool stopped;
	double stopped_at;
	struct event_base *base;
} stop_test;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void foreign_run(sup_job *j)
{
	stop_test *t = (stop_test *)j;
	atomic_store(&t->started, true);
	usleep(FOREIGN_JOB_MS * 1000);
}

static void foreign_done(sup_job *j)
{
	((stop_test *)j)->job_done = true;
}

static void on_stopped(void *ud)
{
	stop_test *t = ud;
	t->stopped = true;
	t->stopped_at = now_s();
	event_base_loopbreak(t->base);
}

static void on_give_up(evutil_socket_t fd, short what, void *ud)
{
	(void)fd;
	(void)what;
	event_base_loopbreak(ud);
}

static void test_stop_ends_when_a_foreign_job_ends(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	assert_non_null(base);
	sbx_err e;
	sup_workers *w = sup_workers_new(base, 2, &e);
	assert_non_null(w);
	sup_resources res = { 0 };
	sup_runc_cfg rcfg = { .res = &res };
	sup_pool_spec spec = { .image = "host", .isolation = SUP_ISO_RUNC, .size = 0 };
	sup_pools_cfg pcfg = { .runc = &rcfg, .specs = &spec, .nspecs = 1, .max_sandboxes = 4 };
	sup_pools *p = sup_pools_new(base, w, &pcfg, NULL, &e);
	assert_non_null(p);
	sup_pools_start(p);

	stop_test t = { .job = { .run = foreign_run, .done = foreign_done }, .base = base };
	atomic_init(&t.started, false);
	sup_workers_submit(w, &t.job, false);
	while (!atomic_load(&t.started))
		usleep(1000);
	double asked = now_s();
	sup_pools_shutdown(p, on_stopped, &t);
	struct event *give_up = evtimer_new(base, on_give_up, base);
	struct timeval tv = { GIVE_UP_S, 0 };
	assert_int_equal(evtimer_add(give_up, &tv), 0);
	event_base_dispatch(base);

	assert_true(t.job_done);
	assert_true(t.stopped);
	double took_ms = (t.stopped_at - asked) * 1000;
	print_message("the stop ended %.0f ms after it was asked (the job ran %d ms)\n", took_ms,
		      FOREIGN_JOB_MS);
	assert_true(took_ms < STOP_WITHIN_MS);
	event_free(give_up);
	sup_pools_free(p);
	sup_workers_free(w);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stop_ends_when_a_foreign_job_ends),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
