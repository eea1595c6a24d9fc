/* Node-to-node authentication by TokenReview (DESIGN.md, "Relay"): in a
 * cluster a relaying supervisor sends its service-account token
 * (Sbx-Node-Token); the receiving one asks the API server who it is (a
 * TokenReview, through a reviewer it is given: the kube module's,
 * blocking, run here on a worker thread of its own) and accepts only the
 * supervisors' account (system:serviceaccount:<ns>:<sa>).
 *
 * Verdicts are cached by the token's SHA-256 (never the token) for a
 * bounded time, SUP_RELAY_AUTH_CACHE entries at most; requests with one
 * token under review wait on that one review. A request waits held at the
 * edge (sup_http_hold), at most SUP_RELAY_AUTH_WAITERS of them. An API
 * server that cannot answer is 503 for a token not in the cache: never
 * open. Loop thread only, but for the reviewer. It must not parse or
 * answer requests itself: the edge answers with its verdict. */
#ifndef SUP_RELAY_AUTH_H
#define SUP_RELAY_AUTH_H

#include <stddef.h>

#include "sbx/err.h"
#include "sup_http.h"

struct event_base;

#define SUP_RELAY_AUTH_CACHE 512
#define SUP_RELAY_AUTH_WAITERS 256
#define SUP_RELAY_AUTH_OK_MS 60000   /* an accepted token is asked again after this */
#define SUP_RELAY_AUTH_BAD_MS 10000  /* a refused one */
/* While the API server cannot be reached, a token it accepted within this
 * long still passes (the kubelet's webhook cache does the same): the
 * cluster keeps relaying through an outage of the control plane, and a
 * token never accepted is still 503. */
#define SUP_RELAY_AUTH_STALE_MS (10 * 60000)
#define SUP_RELAY_AUTH_USER_MAX 256

/* The blocking review, on the worker thread: 1 the token is authenticated
 * as user (copied, cap bytes), 0 it is not (err: the server's words), < 0
 * the server could not answer or refused to review (err says why). */
typedef int (*sup_relay_review_fn)(void *ud, const char *token, char *user, size_t cap,
				   sbx_err *err);

typedef struct sup_relay_auth sup_relay_auth;

/* review(ud, ...) on a worker thread; ud is the auth's from here on (also
 * on failure), freed by free_ud (may be NULL). account: the one user a
 * peer's token must review as. NULL with err. */
sup_relay_auth *sup_relay_auth_new(struct event_base *base, sup_relay_review_fn review, void *ud,
				   void (*free_ud)(void *ud), const char *account, sbx_err *err);
/* Waits for a review in flight (within the reviewer's deadline), then
 * frees the reviewer. No request may be held any more (the edge is gone). */
void sup_relay_auth_free(sup_relay_auth *a);

/* The verdict on token for r: 0 accepted (from the cache), < 0 refused
 * (-ENOKEY not authenticated: 401; -EACCES another account: 403; -EAGAIN
 * the API server cannot say now, or too many wait: 503), or 2: r is held
 * (sup_http_hold) and resumed with the verdict (sup_http_resume). */
int sup_relay_auth_check(sup_relay_auth *a, sup_http_req *r, const char *token, sbx_err *err);

#endif
