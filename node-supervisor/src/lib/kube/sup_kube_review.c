/* sup_kube_review: one TokenReview per call (sup_kube_review.h). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_kube_http.h"
#include "sup_kube_review.h"

#define REVIEWS_API "/apis/authentication.k8s.io/v1/tokenreviews"

struct sup_kube_review {
	sup_kube_http *h;
};

sup_kube_review *sup_kube_review_new(const sup_kube_cfg *cfg, unsigned timeout_ms, sbx_err *err)
{
	sup_kube_review *rv = calloc(1, sizeof(*rv));
	if (!rv) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	rv->h = sup_kube_http_new(cfg, NULL, timeout_ms, err);
	if (!rv->h) {
		free(rv);
		return NULL;
	}
	return rv;
}

void sup_kube_review_free(sup_kube_review *rv)
{
	if (!rv)
		return;
	sup_kube_http_free(rv->h);
	free(rv);
}

int sup_kube_review_token(void *ud, const char *token, char *user, size_t cap, sbx_err *err)
{
	sup_kube_review *rv = ud;
	user[0] = '\0';
	json_t *req = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "authentication.k8s.io/v1",
				"kind", "TokenReview", "spec", "token", token);
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (!body)
		return sbx_err_set(err, -ENOMEM, "token review: out of memory");
	sup_kube_resp r;
	int rc = sup_kube_http_do(rv->h, "POST", REVIEWS_API, body, &r, err);
	explicit_bzero(body, strlen(body));
	free(body);
	if (rc < 0)
		return sbx_err_wrap(err, "token review");
	json_t *st = json_object_get(r.body, "status");
	json_t *authn = json_object_get(st, "authenticated");
	const char *name = json_string_value(json_object_get(json_object_get(st, "user"), "username"));
	const char *why = json_string_value(json_object_get(st, "error"));
	long status = r.status;
	if (status != 200 && status != 201) {
		char w[400];
		sup_kube_resp_why(&r, w, sizeof(w));
		sup_kube_resp_release(&r);
		return sbx_err_set(err, -EPROTO, "token review: %s%s", w,
				   status == 401 || status == 403
					   ? " (this node's credentials may not create tokenreviews: "
					     "daemonset/rbac.yaml)"
					   : "");
	}
	if (json_is_true(authn) && name && strlen(name) < cap) {
		snprintf(user, cap, "%s", name);
		sup_kube_resp_release(&r);
		return 1;
	}
	if (json_is_true(authn)) {
		sup_kube_resp_release(&r);
		return sbx_err_set(err, -EPROTO, "token review: an authenticated token without a "
						 "user name we can hold");
	}
	sbx_err_set(err, -ENOKEY, "%.200s", why && why[0] ? why : "not authenticated");
	sup_kube_resp_release(&r);
	return 0;
}
