/* sup_relay_auth: TokenReview verdicts on peers' node tokens, cached, with
 * the requests that wait on them (sup_relay_auth.h). */
#include "sup_relay_auth.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include "sbx/clock.h"
#include "sup_log.h"
#include "sup_token.h"
#include "sup_workers.h"

/* Distinct tokens under review at once; a request beyond is 503. */
#define REVIEWS_MAX 32

typedef struct verdict {
	uint8_t hash[SUP_TOKEN_HASH_LEN];
	uint64_t until_ms; /* 0: a free slot */
	uint64_t stale_ms; /* accepted: still passes until then while the server is away */
	int rc;            /* 0 accepted, -ENOKEY, -EACCES */
	char msg[160];     /* the refusal's words */
} verdict;

typedef struct review review;

typedef struct waiter {
	sup_http_req *r;
	review *rv;
	TAILQ_ENTRY(waiter) link;
} waiter;

struct review {
	sup_job job; /* first: the job is the review */
	sup_relay_auth *a;
	uint8_t hash[SUP_TOKEN_HASH_LEN];
	char *token; /* the worker's to send; wiped once sent */
	/* the worker's answer */
	int rc;
	char user[SUP_RELAY_AUTH_USER_MAX];
	sbx_err err;
	TAILQ_HEAD(, waiter) waiters;
	TAILQ_ENTRY(review) link;
};

struct sup_relay_auth {
	sup_workers *worker; /* one thread: the reviewer's connection is one */
	sup_relay_review_fn review;
	void *ud;
	void (*free_ud)(void *ud);
	char account[SUP_RELAY_AUTH_USER_MAX];
	verdict cache[SUP_RELAY_AUTH_CACHE];
	TAILQ_HEAD(, review) reviews;
	size_t nreviews, nwaiters;
};

static verdict *cached(sup_relay_auth *a, const uint8_t *hash, uint64_t now)
{
	for (size_t i = 0; i < SUP_RELAY_AUTH_CACHE; i++)
		if (a->cache[i].until_ms > now && sup_token_hash_equal(a->cache[i].hash, hash))
			return &a->cache[i];
	return NULL;
}

/* Whether the API server accepted this token within SUP_RELAY_AUTH_STALE_MS. */
static bool accepted_lately(const sup_relay_auth *a, const uint8_t *hash, uint64_t now)
{
	for (size_t i = 0; i < SUP_RELAY_AUTH_CACHE; i++)
		if (a->cache[i].rc == 0 && a->cache[i].stale_ms > now &&
		    sup_token_hash_equal(a->cache[i].hash, hash))
			return true;
	return false;
}

/* Into a free or expired slot, else over the one that expires first. */
static void remember(sup_relay_auth *a, const uint8_t *hash, int rc, const char *msg)
{
	uint64_t now = sbx_now_ms();
	verdict *slot = &a->cache[0];
	for (size_t i = 0; i < SUP_RELAY_AUTH_CACHE; i++) {
		verdict *v = &a->cache[i];
		if (v->until_ms <= now || sup_token_hash_equal(v->hash, hash)) {
			slot = v;
			break;
		}
		if (v->until_ms < slot->until_ms)
			slot = v;
	}
	memcpy(slot->hash, hash, SUP_TOKEN_HASH_LEN);
	slot->rc = rc;
	slot->until_ms = now + (rc == 0 ? SUP_RELAY_AUTH_OK_MS : SUP_RELAY_AUTH_BAD_MS);
	slot->stale_ms = rc == 0 ? now + SUP_RELAY_AUTH_STALE_MS : 0;
	snprintf(slot->msg, sizeof(slot->msg), "%.159s", msg);
}

/* ---- the worker thread ---- */

static void review_run(sup_job *job)
{
	review *rv = (review *)job;
	sbx_err_clear(&rv->err);
	rv->rc = rv->a->review(rv->a->ud, rv->token, rv->user, sizeof(rv->user), &rv->err);
	explicit_bzero(rv->token, strlen(rv->token));
}

/* ---- back on the loop ---- */

/* The review's answer as a verdict: 0, -ENOKEY, -EACCES or -EAGAIN. */
static int judge(const sup_relay_auth *a, const review *rv, sbx_err *err)
{
	if (rv->rc < 0)
		return sbx_err_set(err, -EAGAIN, "relayed request refused: the API server cannot "
						 "review the node token now (%s)", rv->err.msg);
	if (rv->rc == 0)
		return sbx_err_set(err, -ENOKEY, "relayed request refused: the API server does not "
						 "authenticate its node token (%s)", rv->err.msg);
	if (strcmp(rv->user, a->account) != 0)
		return sbx_err_set(err, -EACCES, "relayed request refused: its node token is %.100s's, "
						 "not the supervisors' (%.100s)", rv->user, a->account);
	return 0;
}

static void review_free(review *rv)
{
	free(rv->token);
	free(rv);
}

static void review_done(sup_job *job)
{
	review *rv = (review *)job;
	sup_relay_auth *a = rv->a;
	sbx_err err;
	sbx_err_clear(&err);
	int rc = judge(a, rv, &err);
	if (rc != -EAGAIN)
		remember(a, rv->hash, rc, err.msg);
	if (rc == -EAGAIN && accepted_lately(a, rv->hash, sbx_now_ms())) {
		sup_warn("relay: %s; accepted on its last review, within %d min: passes", err.msg,
			 SUP_RELAY_AUTH_STALE_MS / 60000);
		rc = 0;
		sbx_err_clear(&err);
	} else if (rc == -EAGAIN)
		sup_warn("relay: %s", err.msg);
	else if (rc < 0)
		sup_info("relay: %s", err.msg);
	TAILQ_REMOVE(&a->reviews, rv, link);
	a->nreviews--;
	waiter *w;
	while ((w = TAILQ_FIRST(&rv->waiters))) {
		TAILQ_REMOVE(&rv->waiters, w, link);
		a->nwaiters--;
		sup_http_req *r = w->r;
		free(w);
		sup_http_resume(r, rc, &err);
	}
	review_free(rv);
}

/* The request ended while it waited: forget it (its review goes on). */
static void waiter_cancel(void *ud)
{
	waiter *w = ud;
	TAILQ_REMOVE(&w->rv->waiters, w, link);
	w->rv->a->nwaiters--;
	free(w);
}

int sup_relay_auth_check(sup_relay_auth *a, sup_http_req *r, const char *token, sbx_err *err)
{
	uint8_t hash[SUP_TOKEN_HASH_LEN];
	size_t len = strlen(token);
	if (len == 0)
		return sbx_err_set(err, -ENOKEY, "relayed request refused: an empty node token");
	if (sup_token_hash(token, len, hash, err) < 0)
		return sbx_err_set(err, -EAGAIN, "relayed request: out of memory");
	const verdict *v = cached(a, hash, sbx_now_ms());
	if (v)
		return v->rc < 0 ? sbx_err_set(err, v->rc, "%s", v->msg) : 0;
	if (a->nwaiters >= SUP_RELAY_AUTH_WAITERS)
		return sbx_err_set(err, -EAGAIN, "relayed request refused: %d wait for their node "
						 "token's review already", SUP_RELAY_AUTH_WAITERS);
	review *rv;
	TAILQ_FOREACH(rv, &a->reviews, link)
	if (sup_token_hash_equal(rv->hash, hash))
		break;
	if (!rv) {
		if (a->nreviews >= REVIEWS_MAX)
			return sbx_err_set(err, -EAGAIN, "relayed request refused: %d node tokens are "
							 "under review already", REVIEWS_MAX);
		rv = calloc(1, sizeof(*rv));
		if (!rv || !(rv->token = strdup(token))) {
			if (rv)
				review_free(rv);
			return sbx_err_set(err, -EAGAIN, "relayed request: out of memory");
		}
		rv->a = a;
		memcpy(rv->hash, hash, sizeof(hash));
		rv->job.run = review_run;
		rv->job.done = review_done;
		TAILQ_INIT(&rv->waiters);
		TAILQ_INSERT_TAIL(&a->reviews, rv, link);
		a->nreviews++;
		sup_workers_submit(a->worker, &rv->job, false);
	}
	waiter *w = calloc(1, sizeof(*w));
	if (!w)
		return sbx_err_set(err, -EAGAIN, "relayed request: out of memory");
	w->r = r;
	w->rv = rv;
	TAILQ_INSERT_TAIL(&rv->waiters, w, link);
	a->nwaiters++;
	sup_http_hold(r, waiter_cancel, w);
	return 2;
}

sup_relay_auth *sup_relay_auth_new(struct event_base *base, sup_relay_review_fn fn, void *ud,
				   void (*free_ud)(void *ud), const char *account, sbx_err *err)
{
	sup_relay_auth *a = NULL;
	if (!account || !account[0] || strlen(account) >= SUP_RELAY_AUTH_USER_MAX) {
		sbx_err_set(err, -EINVAL, "node account: want system:serviceaccount:NS:NAME");
		goto fail;
	}
	a = calloc(1, sizeof(*a));
	if (!a) {
		sbx_err_set(err, -ENOMEM, "node auth: out of memory");
		goto fail;
	}
	a->review = fn;
	a->ud = ud;
	a->free_ud = free_ud;
	snprintf(a->account, sizeof(a->account), "%s", account);
	TAILQ_INIT(&a->reviews);
	a->worker = sup_workers_new(base, 1, err);
	if (!a->worker)
		goto fail;
	return a;
fail:
	free(a);
	if (free_ud)
		free_ud(ud);
	return NULL;
}

void sup_relay_auth_free(sup_relay_auth *a)
{
	if (!a)
		return;
	/* Reviews in flight end within the reviewer's deadline; their done()
	 * only caches and frees: nobody waits any more. */
	sup_workers_finish(a->worker);
	sup_workers_free(a->worker);
	if (a->free_ud)
		a->free_ud(a->ud);
	explicit_bzero(a->cache, sizeof(a->cache));
	free(a);
}
