/* One HTTP request answered through an agent call: the plumbing the
 * supervisor's route families (files, processes, ...) share.
 * Owns the lifetime of one evhttp request from its handler to its reply:
 * JSON replies and errors in the project's one error shape
 * {"error":{"code","message"[,"path"]}}, the errno -> HTTP status mapping
 * (a family may add its own entries in front), msgpack argument maps for
 * the agent, the sup_core_call start, noticing the client hanging up while
 * the agent works, a small JSON body with only known keys, and the one log
 * line per request.
 * It must not know files, processes or policies: a family embeds a
 * sup_req in its own request context (owner) and keeps its own fields,
 * routes and renderings. Loop thread only. */
#ifndef SUP_REQ_H
#define SUP_REQ_H

#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "sbx/err.h"
#include "sup_api.h"
#include "sup_core.h"

struct event;
struct event_base;
struct evhttp_request;
typedef struct sup_req sup_req;

/* One errno a family answers its own way; a table ends with neg_errno 0. */
typedef struct sup_req_errmap {
	int neg_errno;
	int status;
	const char *code;
} sup_req_errmap;

/* What differs between families; one static instance per family. */
typedef struct sup_req_kind {
	const sup_req_errmap *errmap; /* consulted before the shared table; NULL: none */
	bool reasons;                 /* our reason phrases, else evhttp's */
	/* The log line's words after the sandbox id (e.g. " pid 42"); NULL: none. */
	void (*log_tag)(const void *owner, char *buf, size_t size);
	/* Free the owner and its own fields (the sup_req's are gone by then). */
	void (*release)(void *owner);
} sup_req_kind;

struct sup_req {
	const sup_req_kind *kind;
	void *owner;             /* the family's context: the calls' ud */
	sup_core *core;
	struct event_base *base; /* watch the client while the agent works; NULL: do not */
	struct evhttp_request *req;
	const char *route;       /* for logs: "GET files", ... */
	char id[SUP_ID_MAX + 16];
	sup_op *op;              /* the agent call in flight */
	struct event *gone;      /* the client hanging up while we wait */
	struct timespec start;
};

void sup_req_init(sup_req *r, const sup_req_kind *kind, void *owner, sup_core *core,
		  struct event_base *base, struct evhttp_request *req, const char *route,
		  const char *id);
/* Free r's own parts, then its owner. */
void sup_req_free(sup_req *r);
/* "http <route> sandbox <id><tag> <status><extra> <ms>ms". */
void sup_req_log(const sup_req *r, int status, const char *extra);

/* Reply status with a JSON body (reference taken; NULL none) and free. */
void sup_req_reply(sup_req *r, int status, json_t *body);
/* The error {"error":{"code","message"}} and free. */
void sup_req_error(sup_req *r, int status, const char *code, const char *msg);
/* The same with "path" (path[0..len), raw bytes) when path is not NULL. */
void sup_req_error_at(sup_req *r, int status, const char *code, const char *msg,
		      const char *path, size_t len);
/* Status and code of an agent's or the core's error for r's family. */
int sup_req_status(const sup_req *r, int neg_errno, const char **code);
/* Map err to status + code and reply; path as in sup_req_error_at. */
void sup_req_fail(sup_req *r, const sbx_err *err, const char *path);
/* A guest answer that breaks the protocol: logged, the sandbox blamed (it
 * fails, sup_core_blame), 502. */
void sup_req_broke(sup_req *r, const sbx_err *e, const char *path);
/* The blame alone, for a reply already under way (a stream's error event). */
void sup_req_blame(const sup_req *r, const char *msg);
/* An agent call of r ended: forget it, and on failure answer with the
 * error. True when it succeeded and the caller renders the result. */
bool sup_req_settled(sup_req *r, int rc, const sbx_err *err, const char *path);

/* Stop watching for the client hanging up (a stream watches on its own). */
void sup_req_unwatch(sup_req *r);

/* Raw bytes p[0..n) at key as text, plus key_b64 when they are not UTF-8. */
int sup_req_set_bytes(json_t *o, const char *key, const char *p, size_t n);

/* Agent arguments: a msgpack map of pairs. */
typedef struct sup_req_args {
	msgpack_sbuffer sb;
	msgpack_packer pk;
} sup_req_args;
/* Begin a map of n pairs. */
void sup_req_args_begin(sup_req_args *a, size_t n);
void sup_req_args_uint(sup_req_args *a, const char *k, uint64_t v);
void sup_req_args_bool(sup_req_args *a, const char *k, bool v);
void sup_req_args_str(sup_req_args *a, const char *k, const char *v, size_t n);
/* Start opname with a (destroyed here) on r's sandbox, the owner as ud;
 * r->op is the call. An immediate failure is answered (r freed, path as
 * in sup_req_fail) and returned (< 0). */
int sup_req_call(sup_req *r, const char *opname, sup_req_args *a, const sup_core_call_cbs *cbs,
		 const char *path);

/* The body as a JSON object of at most max bytes with only the allowed
 * (NULL-terminated) keys; NULL with the reply sent. */
json_t *sup_req_body_obj(sup_req *r, size_t max, const char *const *allowed);

static inline void sup_req_json_decref_p(json_t **j)
{
	json_decref(*j);
}
#define SUP_REQ_AUTO_JSON __attribute__((cleanup(sup_req_json_decref_p)))

#endif
