/* One connection to the Kubernetes API server: JSON requests (GET, POST,
 * PUT, PATCH as merge-patch, DELETE) and watches read as they arrive.
 * Blocking (libcurl easy): it runs on the kube module's own threads, never
 * on the event loop. One sup_kube_http is used by one thread at a time; it
 * keeps its connection open between requests.
 *
 * Owns its curl handle and its copy of the bearer token (read again from
 * the token file after a 401, as the kubelet rotates it). Every answer is
 * bounded (SUP_KUBE_BODY_MAX, a watch's line SUP_KUBE_LINE_MAX); every
 * request has a deadline, and *stop (set by another thread) ends a
 * transfer within about a second. It must not log and knows no object
 * kinds: paths and JSON only. */
#ifndef SUP_KUBE_HTTP_H
#define SUP_KUBE_HTTP_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "sbx/err.h"
#include "sup_kube_cfg.h"

#define SUP_KUBE_BODY_MAX (8u << 20)
#define SUP_KUBE_LINE_MAX (2u << 20)

typedef struct sup_kube_http sup_kube_http;

/* cfg is read here (curl keeps copies of the credentials); stop may be NULL. */
sup_kube_http *sup_kube_http_new(const sup_kube_cfg *cfg, const atomic_bool *stop,
				 unsigned timeout_ms, sbx_err *err);
void sup_kube_http_free(sup_kube_http *h);

typedef struct sup_kube_resp {
	long status;     /* the HTTP status */
	json_t *body;    /* the answer's JSON; NULL when it was not JSON */
} sup_kube_resp;

void sup_kube_resp_release(sup_kube_resp *r);

/* method path (below the server: "/api/v1/..."), body (JSON text or NULL;
 * PATCH sends it as application/merge-patch+json). 0 with r filled when
 * the server answered, whatever the status; < 0 when it did not (refused,
 * timed out, TLS, cancelled by *stop: -ECANCELED), err saying why. */
int sup_kube_http_do(sup_kube_http *h, const char *method, const char *path, const char *body,
		     sup_kube_resp *r, sbx_err *err);

/* A failed answer's words: "HTTP 409 AlreadyExists: leases ... already
 * exists" from the Status object the server sends. */
void sup_kube_resp_why(const sup_kube_resp *r, char *buf, size_t cap);

/* Called per watch event: type ("ADDED", "MODIFIED", "DELETED",
 * "BOOKMARK", "ERROR") and its object (borrowed). Non-zero stops the
 * watch and is returned. */
typedef int (*sup_kube_watch_fn)(void *ud, const char *type, json_t *object);

/* GET path (a watch: ...?watch=1&resourceVersion=...&timeoutSeconds=N)
 * and hand each event to fn as its line arrives. The transfer's deadline
 * is timeout_s (the server's own timeoutSeconds should end it first).
 * 0: the server ended the stream; a status other than 200 is -EPROTO with
 * *status set (410: the resourceVersion is too old); < 0 as for
 * sup_kube_http_do. */
int sup_kube_http_watch(sup_kube_http *h, const char *path, unsigned timeout_s,
			sup_kube_watch_fn fn, void *ud, long *status, sbx_err *err);

#endif
