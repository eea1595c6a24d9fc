/* Retries towards the API server: exponential backoff with jitter, and the
 * bounded queue of writes that waits while the server is away. Pure data
 * structures: no I/O, no locking, no clock (the caller passes randomness
 * and locks), so that their bounds are unit-tested. */
#ifndef SUP_KUBE_RETRY_H
#define SUP_KUBE_RETRY_H

#include <stddef.h>
#include <stdint.h>

typedef struct sup_kube_backoff {
	unsigned base_ms;  /* the first delay's ceiling */
	unsigned cap_ms;   /* no delay beyond this */
	unsigned attempt;  /* failures so far */
} sup_kube_backoff;

/* The delay before the next attempt: the ceiling min(cap, base * 2^attempt),
 * of which the upper half is random (rnd), so that nodes that lost the
 * server together do not come back in step; then attempt++. */
unsigned sup_kube_backoff_next(sup_kube_backoff *b, uint32_t rnd);
/* A success: the next failure starts from base again. */
void sup_kube_backoff_reset(sup_kube_backoff *b);

#define SUP_KUBE_KEY_MAX 320
#define SUP_KUBE_PATH_MAX 400

/* One write: method and path against the server, a JSON body. */
typedef struct sup_kube_write {
	char key[SUP_KUBE_KEY_MAX];  /* the object it writes: a newer write of it replaces it */
	char method[8];              /* "POST", "PATCH", ... */
	char path[SUP_KUBE_PATH_MAX];
	char *body;                  /* owned */
	uint64_t gen;                /* changes whenever the entry is replaced */
} sup_kube_write;

typedef struct sup_kube_queue {
	sup_kube_write **v;  /* oldest first */
	size_t n, cap;
	uint64_t next_gen;
	uint64_t dropped;    /* writes pushed out by a full queue, ever */
	uint64_t replaced;   /* writes superseded by a newer one of the same object */
} sup_kube_queue;

/* cap: writes held at most (>= 1). -ENOMEM. */
int sup_kube_queue_init(sup_kube_queue *q, size_t cap);
void sup_kube_queue_release(sup_kube_queue *q);

typedef enum sup_kube_push {
	SUP_KUBE_PUSH_ADDED,
	SUP_KUBE_PUSH_REPLACED, /* the object's waiting write now carries this body */
	SUP_KUBE_PUSH_DROPPED,  /* added; the oldest write was dropped (its key in dropped_key) */
	SUP_KUBE_PUSH_NOMEM,    /* nothing changed */
} sup_kube_push;

/* Queue a write of key (body is taken over, also on failure). A write of a
 * key already waiting replaces its method, path and body in its place;
 * otherwise it goes last, and when the queue is full the oldest goes
 * (counted, its key copied to dropped_key if not NULL: SUP_KUBE_KEY_MAX). */
sup_kube_push sup_kube_queue_push(sup_kube_queue *q, const char *key, const char *method,
				  const char *path, char *body, char *dropped_key);
/* The oldest write copied to *out (out->body malloc'd, the caller frees
 * it): 0, -ENOENT when empty, -ENOMEM. */
int sup_kube_queue_peek(const sup_kube_queue *q, sup_kube_write *out);
/* Remove the write of key if it is still generation gen (a newer write of
 * the same object, pushed while this one was in flight, stays). */
void sup_kube_queue_done(sup_kube_queue *q, const char *key, uint64_t gen);

#endif
