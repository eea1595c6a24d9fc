/* The contexts routes' request state (sup_contexts.c), for the family's
 * parser test. Not for other modules. */
#ifndef SUP_CONTEXTS_INT_H
#define SUP_CONTEXTS_INT_H

#include "sup_contexts.h"
#include "sup_stream.h"

typedef struct cx_req {
	sup_http_req *r;
	sup_ctx_spec spec;
	sup_ctx_cell cell;
	char ctx[SUP_CTX_ID_MAX];
	sup_stream_fmt fmt;
	sup_ctx_wait *wait;
	sup_ctx_run *run;
	sup_stream *stream;
} cx_req;

#endif
