/* Background processes over HTTP: /v1/sandboxes/{id}/processes[/{pid}[/...]].
 * Parses each request (the exec body plus "tag", "buffer" and "stdin";
 * pids, signals, sizes, offsets), runs the agent's proc.* operation through
 * the core (sup_core_call) and renders its answer after validating it.
 * Output is an SSE stream whose every output event carries its absolute
 * byte offset, a gap being its own event; the agent's credit comes back
 * only as the client reads.
 * It must not touch sandboxes or agents except through the core, and
 * trusts nothing the agent sends. Loop thread only. */
#ifndef SUP_PROCS_H
#define SUP_PROCS_H

#include "sup_core.h"
#include "sup_http.h"

typedef struct sup_procs_ctx {
	sup_core *core;
} sup_procs_ctx;

extern const sup_http_family sup_procs_family;

/* Signal by name ("TERM", "SIGTERM", "RTMIN+2", any case) or decimal
 * number (1..31, 34..64). Returns the number, or -EINVAL. */
int sup_procs_parse_signal(const char *s);

#endif
