/* Internal to sup_procs*.c: one request in flight and the helpers the
 * parts share (requests and replies in sup_procs.c, the agent's process
 * descriptions checked in sup_procs_desc.c, the output stream in
 * sup_procs_out.c). Not for other modules. */
#ifndef SUP_PROCS_INT_H
#define SUP_PROCS_INT_H

#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sbx/err.h"
#include "sup_procs.h"
#include "sup_req.h"
#include "sup_stream.h"

struct evkeyvalq;

/* Largest JSON body of a request here but the start (whose exec body may be
 * as big as the HTTP layer allows). */
#define PQ_MAX_SMALL_BODY (4 * 1024)
#define PQ_MAX_TAG 256
#define PQ_MAX_ARGV 4096
/* A held-back credit is retried this often while the reader is behind. */
#define PQ_RETRY_MS 10

struct sup_procs {
	struct event_base *base;
	sup_core *core;
	size_t max_body; /* largest stdin body */
};

typedef struct sup_pq {
	sup_req r; /* the request, its agent call and reply; owner: this */
	sup_procs *p;
	sup_procs_route rt;
	long pid;
	/* output */
	sup_stream *s;
	struct event *retry; /* credit held back until the reader catches up */
	size_t owed;
	uint64_t off;        /* absolute offset of the next byte expected */
	bool follow;
	/* stdin: the request body, sent within the agent's credit */
	const uint8_t *in;
	size_t in_len, in_off;
	bool in_done;        /* all of it (and the final eof frame) went */
} sup_pq;

const char *sup_procs_route_name(sup_procs_route rt);
/* Query string: only the allowed keys, each at most once; on error the
 * reply is sent and -EINVAL returned. */
int sup_pq_query(sup_pq *q, struct evkeyvalq *kv, const char *const *allowed);

/* An unsigned integer at key (at most max): 0, or -EPROTO. */
int sup_procs_mp_uint(const msgpack_object *map, const char *key, uint64_t max, uint64_t *out,
		sbx_err *err);
/* A process description from the agent as JSON; full adds what proc.get
 * tells. NULL with err when it breaks the protocol. want_pid > 0: it must
 * be of that process. */
json_t *sup_procs_desc_json(const msgpack_object *m, bool full, long want_pid, sbx_err *err);

/* GET .../output (sup_procs_out.c). */
void sup_procs_output(sup_pq *q);

#endif
