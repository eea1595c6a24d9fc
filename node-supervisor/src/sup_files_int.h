/* Internal to sup_files*.c: one request in flight and the helpers the
 * routes share. Not for other modules. */
#ifndef SUP_FILES_INT_H
#define SUP_FILES_INT_H

#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sup_files.h"
#include "sup_req.h"
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
	sup_req r; /* the request, its agent call and reply; owner: this */
	sup_files *f;
	sup_files_route rt;
	const char *opname; /* for logs and denials: "read", "stat", ... */
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

/* The query value of key, decoded once (+ is a space) with its length;
 * *out is malloc'd. 0 found, -ENOENT absent, -EINVAL twice or bad. */
int sup_files_query(struct evhttp_request *req, const char *key, char **out, size_t *len);

/* Stat keys of an agent map -> JSON fields of o. -EPROTO when a key is
 * missing or of the wrong type. */
int sup_files_stat_json(const msgpack_object *map, json_t *o, sbx_err *err);
/* base (a normalised absolute path) joined with rel[0..rl) below it
 * (rl 0: base); malloc'd, NULL without memory. */
char *sup_files_join(const char *base, const char *rel, size_t rl);
/* Agent arguments: a map of root, path (the match) and n more pairs. */
void sup_fargs_begin(sup_req_args *a, size_t n, const sup_policy_match *m);

void sup_files_get(sup_fq *q);
void sup_files_put(sup_fq *q);
void sup_files_watch(sup_fq *q, bool recursive);

#endif
