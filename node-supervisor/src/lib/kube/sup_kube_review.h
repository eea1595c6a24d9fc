/* TokenReview (authentication.k8s.io/v1): who the API server says a bearer
 * token is, for the relay's node-to-node check (sup_relay_auth.h). One
 * connection of its own (sup_kube_http), blocking: its caller runs it on a
 * worker thread, one call at a time. It must not cache (the relay does),
 * log, or keep a token past the call. */
#ifndef SUP_KUBE_REVIEW_H
#define SUP_KUBE_REVIEW_H

#include <stddef.h>

#include "sbx/err.h"
#include "sup_kube_cfg.h"

typedef struct sup_kube_review sup_kube_review;

/* cfg: the credentials the review is sent with (they need `create
 * tokenreviews`, daemonset/rbac.yaml); timeout_ms: one review's deadline. */
sup_kube_review *sup_kube_review_new(const sup_kube_cfg *cfg, unsigned timeout_ms, sbx_err *err);
void sup_kube_review_free(sup_kube_review *rv);

/* One review (ud: the sup_kube_review; the relay's review signature): 1
 * the token is authenticated, as user (copied, cap bytes); 0 it is not
 * (err: the server's status.error); < 0 no verdict: the server did not
 * answer, refused to review (401/403: these credentials or their RBAC),
 * or answered something else (err says which). */
int sup_kube_review_token(void *ud, const char *token, char *user, size_t cap, sbx_err *err);

#endif
