/* State the whole agent shares: the loop, start time, whether it still takes
 * work. Owned by main.c; other modules read it through the session. */
#ifndef AGENT_AGENT_H
#define AGENT_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#ifndef AGENT_VERSION
#define AGENT_VERSION "0.1.0"
#endif
#define AGENT_NAME "sandbox-agent/" AGENT_VERSION

struct event_base;

typedef struct agent_ctx {
	struct event_base *base;
	uint64_t start_ns;  /* CLOCK_MONOTONIC at start, for uptime */
	bool shutting_down; /* new requests get shutting_down */
	bool resetting;     /* a reset runs: new requests are refused */
	unsigned watches;   /* fs.watch streams open (op_watch.c bounds them) */
} agent_ctx;

#endif
