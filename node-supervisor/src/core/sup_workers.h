/* Worker threads for blocking work (the runtime binary: create, destroy).
 * A job's run() executes on a worker thread; its done() then runs on the
 * event-loop thread, woken through an eventfd. Jobs queued at the front
 * (a request is waiting) start before those at the back (pool refills).
 * run() must not touch libevent or any loop-owned state; done() may.
 * The module owns the threads and the two queues, never the jobs. */
#ifndef SUP_WORKERS_H
#define SUP_WORKERS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/queue.h>

#include "sbx/err.h"

struct event_base;
typedef struct sup_workers sup_workers;
typedef struct sup_job sup_job;

struct sup_job {
	void (*run)(sup_job *job);  /* worker thread */
	void (*done)(sup_job *job); /* loop thread; may free the job */
	TAILQ_ENTRY(sup_job) link;
};

sup_workers *sup_workers_new(struct event_base *base, unsigned nthreads, sbx_err *err);
/* Queue a job; front: ahead of everything not yet started. */
void sup_workers_submit(sup_workers *w, sup_job *job, bool front);
/* Jobs queued or running or finished but whose done() has not run yet. */
size_t sup_workers_busy(const sup_workers *w);
/* idle(ud) on the loop thread each time busy drops to 0 (the done() of the
 * last job has run, whoever submitted it): how one who waits for the
 * workers to be idle (the pools' stop; volumes and snapshots share the
 * threads) learns of it from jobs that know nothing of it. NULL: none;
 * one at a time. */
void sup_workers_on_idle(sup_workers *w, void (*idle)(void *ud), void *ud);
/* Join the threads. Every submitted job must have completed (busy == 0). */
void sup_workers_free(sup_workers *w);
/* Join the threads once they ran what is queued, then call done() of every
 * job that ran, on the caller's thread: for jobs whose done() is safe
 * after the loop ended (they only free what they own). Then free. */
void sup_workers_finish(sup_workers *w);

#endif
