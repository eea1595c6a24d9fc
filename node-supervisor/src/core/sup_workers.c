#include "sup_workers.h"

#include <errno.h>
#include <event2/event.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

TAILQ_HEAD(sup_job_list, sup_job);

struct sup_workers {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct sup_job_list todo; /* guarded by mu */
	struct sup_job_list done; /* guarded by mu */
	bool stop;                /* guarded by mu */
	size_t busy;              /* loop thread only */
	void (*idle)(void *ud);   /* loop thread only */
	void *idle_ud;
	int efd;
	struct event *ev;
	pthread_t *threads;
	unsigned nthreads;
};

static void *worker_main(void *arg)
{
	sup_workers *w = arg;
	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->stop && TAILQ_EMPTY(&w->todo))
			pthread_cond_wait(&w->cv, &w->mu);
		if (TAILQ_EMPTY(&w->todo))
			break; /* stop, and nothing left */
		sup_job *job = TAILQ_FIRST(&w->todo);
		TAILQ_REMOVE(&w->todo, job, link);
		pthread_mutex_unlock(&w->mu);
		job->run(job);
		pthread_mutex_lock(&w->mu);
		TAILQ_INSERT_TAIL(&w->done, job, link);
		uint64_t one = 1;
		ssize_t n = write(w->efd, &one, sizeof(one));
		(void)n; /* eventfd only fails on counter overflow */
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
	sup_workers *w = arg;
	uint64_t v;
	ssize_t n = read(fd, &v, sizeof(v));
	(void)n;
	struct sup_job_list batch = TAILQ_HEAD_INITIALIZER(batch);
	pthread_mutex_lock(&w->mu);
	TAILQ_CONCAT(&batch, &w->done, link);
	pthread_mutex_unlock(&w->mu);
	sup_job *job;
	while ((job = TAILQ_FIRST(&batch)) != NULL) {
		TAILQ_REMOVE(&batch, job, link);
		w->busy--;
		job->done(job);
	}
	if (w->busy == 0 && w->idle)
		w->idle(w->idle_ud);
}

sup_workers *sup_workers_new(struct event_base *base, unsigned nthreads, sbx_err *err)
{
	sup_workers *w = calloc(1, sizeof(*w));
	if (!w) {
		sbx_err_set(err, -ENOMEM, "workers");
		return NULL;
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	TAILQ_INIT(&w->todo);
	TAILQ_INIT(&w->done);
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (w->efd < 0) {
		sbx_err_sys(err, -errno, "eventfd");
		goto fail;
	}
	w->ev = event_new(base, w->efd, EV_READ | EV_PERSIST, on_wake, w);
	if (!w->ev || event_add(w->ev, NULL) < 0) {
		sbx_err_set(err, -ENOMEM, "worker wake-up event");
		goto fail;
	}
	w->threads = calloc(nthreads, sizeof(pthread_t));
	if (!w->threads) {
		sbx_err_set(err, -ENOMEM, "workers");
		goto fail;
	}
	for (unsigned i = 0; i < nthreads; i++) {
		int rc = pthread_create(&w->threads[i], NULL, worker_main, w);
		if (rc) {
			sbx_err_sys(err, -rc, "start worker thread");
			goto fail;
		}
		w->nthreads++;
	}
	return w;
fail:
	sup_workers_free(w);
	return NULL;
}

void sup_workers_submit(sup_workers *w, sup_job *job, bool front)
{
	w->busy++;
	pthread_mutex_lock(&w->mu);
	if (front)
		TAILQ_INSERT_HEAD(&w->todo, job, link);
	else
		TAILQ_INSERT_TAIL(&w->todo, job, link);
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

size_t sup_workers_busy(const sup_workers *w)
{
	return w->busy;
}

void sup_workers_on_idle(sup_workers *w, void (*idle)(void *ud), void *ud)
{
	w->idle = idle;
	w->idle_ud = ud;
}

static void join_all(sup_workers *w)
{
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	for (unsigned i = 0; i < w->nthreads; i++)
		pthread_join(w->threads[i], NULL);
	w->nthreads = 0;
}

void sup_workers_finish(sup_workers *w)
{
	if (!w)
		return;
	join_all(w);
	on_wake(w->efd, EV_READ, w);
}

void sup_workers_free(sup_workers *w)
{
	if (!w)
		return;
	join_all(w);
	free(w->threads);
	if (w->ev)
		event_free(w->ev);
	if (w->efd >= 0)
		close(w->efd);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}
