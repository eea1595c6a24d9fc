/* Internal to sup_procs*.c: one request's state and the helpers the parts
 * share (requests and replies in sup_procs.c, the agent's process
 * descriptions checked in sup_procs_desc.c, the output stream in
 * sup_procs_out.c). Not for other modules. */
#ifndef SUP_PROCS_INT_H
#define SUP_PROCS_INT_H

#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sbx/proto_args.h"
#include "sup_api.h"
#include "sup_procs.h"
#include "sup_stream.h"

#define PQ_MAX_ARGV 4096

typedef struct sup_pq {
	sup_http_req *r;
	sup_procs_ctx *p;
	const char *id;
	long pid;
	/* the agent call: op, arguments and answer from the parser */
	const char *aop;
	sbx_proto_args args;
	const sup_core_call_cbs *cbs;
	sup_op *op;
	bool full;           /* proc.get: the full description */
	bool kill;           /* proc.kill: 204 once exited, else 202 */
	/* start */
	sup_exec_spec spec;
	/* output */
	sup_stream_fmt fmt;
	sup_stream *s;
	uint64_t off;        /* absolute offset of the next byte expected */
	bool follow;
	/* stdin: the request body, sent within the agent's credit */
	const uint8_t *in;
	size_t in_len, in_off;
	bool in_done;        /* all of it (and the final eof frame) went */
	/* a terminal over WebSocket: output on op, input and resizes beside it */
	struct sup_ws *ws;
	char accept[32];
	sup_op *in_op, *rs_op;
	struct evbuffer *typed; /* input not yet taken by the agent */
	uint16_t cols, rows;    /* a resize waiting for the one in flight */
} sup_pq;

/* Every parser starts with it: q for a request of ctx. */
void sup_pq_init(sup_pq *q, const sup_http_in *in, void *ctx, const char *aop,
		 const sup_core_call_cbs *cbs);
/* The {pid} segment into q->pid (and the arguments): 0, -EINVAL not a
 * number, -ENOENT out of range. */
int sup_pq_pid(sup_pq *q, const sup_http_in *in, sbx_err *err);

/* A proc.output event: {"from","to"} of a gap that follows q->off (which
 * moves to its end); NULL without a gap, or with err (-EPROTO) when it does
 * not follow. */
json_t *sup_procs_gap_json(const msgpack_object *event, sup_pq *q, sbx_err *err);
/* The agent's credit back for what a client has read (on_credit). */
void sup_pq_credit(size_t cost, void *ud);

/* GET .../ws (sup_procs_ws.c). */
int sup_procs_parse_ws(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_procs_act_ws(sup_http_req *r, void *state, sbx_err *err);
void sup_procs_ws_release(sup_pq *q);

/* GET .../output (sup_procs_out.c). */
int sup_procs_parse_output(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_procs_act_output(sup_http_req *r, void *state, sbx_err *err);

#endif
