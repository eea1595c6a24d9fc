/* Worker threads hand results back to the event loop (sup_workers): run()
 * on another thread, done() on the loop thread, front jobs first. */
#include <event2/event.h>
#include <pthread.h>
#include <stdatomic.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_workers.h"

typedef struct tjob {
	sup_job job;
	int n;
	pthread_t ran_on;
	pthread_t done_on;
	int *order;
	int *pos;
	pthread_mutex_t *mu;
	int *done_count;
	int want;
	struct event_base *base;
} tjob;

static atomic_int first_started;

static void run(sup_job *j)
{
	tjob *t = (tjob *)j;
	t->ran_on = pthread_self();
	if (t->n == 0)
		atomic_store(&first_started, 1);
	pthread_mutex_lock(t->mu);
	t->order[(*t->pos)++] = t->n;
	pthread_mutex_unlock(t->mu);
	usleep(1000);
}

static void done(sup_job *j)
{
	tjob *t = (tjob *)j;
	t->done_on = pthread_self();
	if (++*t->done_count == t->want)
		event_base_loopbreak(t->base);
}

static void test_runs_off_loop_and_returns(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	sbx_err e;
	sup_workers *w = sup_workers_new(base, 2, &e);
	assert_non_null(w);
	enum { N = 50 };
	tjob jobs[N] = { 0 };
	int order[N], pos = 0, done_count = 0;
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	for (int i = 0; i < N; i++) {
		jobs[i] = (tjob){ .job = { .run = run, .done = done }, .n = i, .order = order,
				  .pos = &pos, .mu = &mu, .done_count = &done_count, .want = N,
				  .base = base };
		sup_workers_submit(w, &jobs[i].job, false);
	}
	assert_int_equal(sup_workers_busy(w), N);
	event_base_dispatch(base);
	assert_int_equal(done_count, N);
	assert_int_equal(sup_workers_busy(w), 0);
	for (int i = 0; i < N; i++) {
		assert_false(pthread_equal(jobs[i].ran_on, pthread_self()));
		assert_true(pthread_equal(jobs[i].done_on, pthread_self()));
	}
	sup_workers_free(w);
	event_base_free(base);
}

static void test_front_first(void **state)
{
	(void)state;
	struct event_base *base = event_base_new();
	sbx_err e;
	/* One thread, so the queue order is the run order. */
	sup_workers *w = sup_workers_new(base, 1, &e);
	assert_non_null(w);
	enum { N = 6 };
	tjob jobs[N] = { 0 };
	int order[N], pos = 0, done_count = 0;
	pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
	/* Hold the only worker so the rest queue up behind it. */
	atomic_store(&first_started, 0);
	pthread_mutex_lock(&mu);
	for (int i = 0; i < N; i++) {
		jobs[i] = (tjob){ .job = { .run = run, .done = done }, .n = i, .order = order,
				  .pos = &pos, .mu = &mu, .done_count = &done_count, .want = N,
				  .base = base };
		sup_workers_submit(w, &jobs[i].job, i == N - 1);
		/* Job 0 must be running (and blocked on mu) before the rest queue. */
		while (i == 0 && !atomic_load(&first_started))
			usleep(100);
	}
	pthread_mutex_unlock(&mu);
	event_base_dispatch(base);
	assert_int_equal(order[0], 0);
	assert_int_equal(order[1], N - 1); /* the front job overtook 1..N-2 */
	assert_int_equal(order[2], 1);
	sup_workers_free(w);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_runs_off_loop_and_returns),
		cmocka_unit_test(test_front_first),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
