/* Internal to sup_files*.c: one request in flight and the helpers the
 * routes share. Not for other modules. */
#ifndef SUP_FILES_INT_H
#define SUP_FILES_INT_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sup_files.h"
#include "sup_types.h"

struct evhttp_connection;
struct evbuffer;

struct sup_files {
	sup_core *core;
	const sup_policy *policy;
	uint64_t max_upload; /* bytes per upload; 0: no limit */
	size_t max_body;     /* an upload evhttp read whole */
};

/* The one tenant until tokens map to tenants. */
#define SUP_FILES_TENANT "default"
/* Largest JSON body of a POST /fs/... request. */
#define SUP_FILES_MAX_BODY (64 * 1024)

typedef struct sup_fq {
	sup_files *f;
	struct evhttp_request *req;
	sup_files_route rt;
	char id[SUP_ID_MAX + 16];
	const char *opname; /* for logs and denials: "read", "stat", ... */
	sup_op *op;
	struct timespec start;
	sup_policy_match m;  /* the path (from, for a move) */
	sup_policy_match m2; /* the target of a move */
	/* download */
	struct evhttp_connection *evcon;
	struct evbuffer *chunk;
	uint64_t want_off;   /* Range start */
	uint64_t want_len;   /* Range length; UINT64_MAX: to the end */
	bool ranged;
	bool started;        /* headers are out */
	uint64_t length;     /* bytes promised (Content-Length) */
	uint64_t sent;
	size_t owed;         /* credit held back until the connection drains */
	/* upload */
	struct sup_httpin *in; /* the body on the connection (stopped when q is freed); NULL: read whole */
	uint64_t put_got;    /* body bytes the agent took */
	bool put_parents;
	bool put_overwrite;
	bool put_eof;        /* the last frame went */
	struct sup_stream *stream; /* watch: the event stream once started */
} sup_fq;

/* Reply status with a JSON body (reference taken; NULL none) and free q. */
void sup_fq_reply(sup_fq *q, int status, json_t *body);
/* A JSON error {"error":{"code","message","path"}} and free q. path/len may
 * be NULL/0. */
void sup_fq_error(sup_fq *q, int status, const char *code, const char *msg, const char *path,
		  size_t len);
/* Map err (an agent or core error) to status + code and reply. */
void sup_fq_fail(sup_fq *q, const sbx_err *err, const char *path);
void sup_fq_free(sup_fq *q);
void sup_fq_log(const sup_fq *q, int status, const char *extra);

/* Status and code of a file operation's error. */
int sup_files_status(int neg_errno, const char **code);

/* The query value of key, decoded once (+ is a space) with its length;
 * *out is malloc'd. 0 found, -ENOENT absent, -EINVAL twice or bad. */
int sup_files_query(struct evhttp_request *req, const char *key, char **out, size_t *len);

/* Stat keys of an agent map -> JSON fields of o. -EPROTO when a key is
 * missing or of the wrong type. */
int sup_files_stat_json(const msgpack_object *map, json_t *o, sbx_err *err);
/* base (a normalised absolute path) joined with rel[0..rl) below it
 * (rl 0: base); malloc'd, NULL without memory. */
char *sup_files_join(const char *base, const char *rel, size_t rl);
/* name (raw bytes) as text, plus name_b64 when they are not UTF-8. */
int sup_files_set_bytes(json_t *o, const char *key, const char *p, size_t n);

/* Agent arguments: a map of root, path (the match) and n more pairs. */
typedef struct sup_fargs {
	msgpack_sbuffer sb;
	msgpack_packer pk;
} sup_fargs;
void sup_fargs_begin(sup_fargs *a, size_t n, const sup_policy_match *m);
void sup_fargs_uint(sup_fargs *a, const char *k, uint64_t v);
void sup_fargs_bool(sup_fargs *a, const char *k, bool v);
/* Start opname with a (destroyed here) on q's sandbox; q->op is the call.
 * An immediate failure is answered (q freed) and returned (< 0). */
int sup_fq_call(sup_fq *q, const char *opname, sup_fargs *a, const sup_core_call_cbs *cbs);

void sup_files_get(sup_fq *q);
void sup_files_put(sup_fq *q);
void sup_files_watch(sup_fq *q, bool recursive);

#endif
