/* Internal to sup_files*.c: one request's state and the helpers the routes
 * share. Not for other modules. */
#ifndef SUP_FILES_INT_H
#define SUP_FILES_INT_H

#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "sbx/proto_args.h"
#include "sup_api.h"
#include "sup_files.h"
#include "sup_query.h"
#include "sup_stream.h"

/* Largest JSON body of a POST /fs/... request. */
#define SUP_FILES_MAX_BODY (64 * 1024)

typedef struct sup_fq sup_fq;

/* A call's END result as the answer; NULL with err when it breaks the
 * protocol (or, without err, no body). */
typedef json_t *(*sup_fq_render)(sup_fq *q, const msgpack_object *res, sbx_err *err);

struct sup_fq {
	sup_http_req *r;
	sup_files_ctx *f;
	const sup_tenant *who; /* the caller: its policy, its name in denials */
	const char *id;
	const char *opname;    /* the policy's name of the operation: "read", ... */
	char *raw;             /* the last path checked, as sent */
	size_t raw_len;
	const char *subj;      /* what an error is about: raw or m.path */
	size_t subj_len;
	sup_policy_match m;    /* the path (from, for a move) */
	sup_policy_match m2;   /* the target of a move */
	/* the agent call: op and arguments from the parser */
	const char *aop;
	sbx_proto_args args;
	sup_fq_render render;
	int status;            /* of a successful simple call */
	sup_op *op;
	/* download */
	uint64_t want_off;     /* Range start */
	uint64_t want_len;     /* Range length; UINT64_MAX: to the end */
	bool ranged, suffix, started;
	uint64_t length, sent;
	struct evbuffer *chunk;
	/* upload */
	uint64_t put_got;      /* body bytes the agent took */
	bool put_eof;          /* the last frame went */
	bool overwrite;
	/* watch */
	sup_stream_fmt fmt;
	sup_stream *stream;
};

/* Set up q for a request of ctx (every parser starts with it). */
void sup_fq_init(sup_fq *q, const sup_http_in *in, void *ctx, const char *opname,
		 const char *aop);
/* The policy on p[0..len) into *m: 0, or -EINVAL/-ENAMETOOLONG (bad path),
 * -EPERM (the policy refuses); q's subject is the path either way. */
int sup_fq_check(sup_fq *q, const char *p, size_t len, sup_policy_access need,
		 sup_policy_match *m, sbx_err *err);
/* The query (only keys) with its "path" checked for need into q->m, and
 * the agent arguments begun with root and path. */
int sup_fq_query(sup_fq *q, const sup_http_in *in, const char *const *keys,
		 sup_policy_access need, sup_query *qs, sbx_err *err);
/* Start q->aop with q->args, answered by cbs. */
int sup_fq_call(sup_fq *q, const sup_core_call_cbs *cbs, sbx_err *err);

/* The routes in their own files. */
int sup_files_parse_get(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_files_act_get(sup_http_req *r, void *state, sbx_err *err);
int sup_files_parse_put(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_files_act_put(sup_http_req *r, void *state, sbx_err *err);
int sup_files_parse_watch(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_files_act_watch(sup_http_req *r, void *state, sbx_err *err);

#endif
