/* Background processes over HTTP: /v1/sandboxes/{id}/processes[/{pid}[/...]].
 * Parses and checks each request (the exec body plus "tag" and "buffer";
 * pids, signals, sizes, offsets), runs the agent's proc.* operation through
 * the core (sup_core_call) and renders its answer after validating it.
 * Output is an SSE stream through sup_stream: every output event carries
 * its absolute byte offset, a gap is its own event, the agent's credit
 * comes back only as the HTTP connection drains.
 * Owns the requests it is handed (it answers and frees them). It must not
 * touch sandboxes or agents except through the core, and trusts nothing
 * the agent sends. Loop thread only. */
#ifndef SUP_PROCS_H
#define SUP_PROCS_H

#include "sup_core.h"

struct event_base;
struct evhttp_request;
typedef struct sup_procs sup_procs;

typedef enum sup_procs_route {
	SUP_PROCS_START = 1, /* POST /processes */
	SUP_PROCS_LIST,      /* GET /processes */
	SUP_PROCS_GET,       /* GET /processes/{pid} */
	SUP_PROCS_KILL,      /* DELETE /processes/{pid} */
	SUP_PROCS_OUTPUT,    /* GET /processes/{pid}/output */
	SUP_PROCS_SIGNAL,    /* POST /processes/{pid}/signal */
	SUP_PROCS_RESIZE,    /* POST /processes/{pid}/resize */
	SUP_PROCS_STDIN,     /* POST /processes/{pid}/stdin */
} sup_procs_route;

/* max_body: the largest stdin body taken (as --max-body for others). */
sup_procs *sup_procs_new(struct event_base *base, sup_core *core, size_t max_body);
void sup_procs_free(sup_procs *p);

/* Answer req (sandbox id) on route rt; req is ours from here. */
void sup_procs_handle(sup_procs *p, sup_procs_route rt, struct evhttp_request *req,
		      const char *id);

/* Signal by name ("TERM", "SIGTERM", "RTMIN+2", any case) or decimal
 * number (1..31, 34..64). Returns the number, or -EINVAL. */
int sup_procs_parse_signal(const char *s);

#endif
