/* sup_agent_int.h: what the agent client's two halves share, and only
 * they: the connection (sup_agent.c: handshake, liveness, blame, frames
 * in, the agent's life) and the calls (sup_agent_call.c: a call's life,
 * its deadline, its sends, the frames of its stream). Nothing outside
 * those two files may include it: the agent client's contract is
 * sup_agent.h. */
#ifndef SUP_AGENT_INT_H
#define SUP_AGENT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <time.h>

#include "sbx/proto.h"
#include "sbx/proto_conn.h"
#include "sup_agent.h"
#include "sup_agent_dial.h"

#define SUP_AGENT_NS_PER_MS 1000000ull

struct sup_agent_call {
	sup_agent *agent;
	uint64_t id;
	const sup_agent_call_cbs *cbs; /* NULL once cancelled or timed out */
	void *ud;
	TAILQ_ENTRY(sup_agent_call) link;
	char op[24];                   /* for messages */
	/* The deadline: a budget of time the clock may run (see sup_agent.h). */
	sup_agent_wait wait;
	uint64_t timeout_ms;           /* the op's own; non-zero: the budget is never refilled */
	struct event *timer;           /* NULL: no deadline */
	/* In ns: the clock stops and starts around every frame the caller
	 * takes and gives back at once, and a budget kept in whole ms lost
	 * the fraction each time, so a flood of frames never spent it. */
	uint64_t budget_ns;
	struct timespec since;         /* while running: when the clock started */
	bool running;
	/* timeout_ms: the agent's time since the start (its frozen time not
	 * counted) against timeout plus grace, and the bytes it sent past it */
	struct timespec started;
	uint64_t frozen0_ns;           /* the agent's frozen time at the start */
	uint64_t late_bytes;
	size_t held;                   /* cost handed to the caller, not given back yet */
	bool eof_sent;                 /* SENDS: the caller's input has ended */
	bool starved;                  /* SENDS: a send found no credit */
};

TAILQ_HEAD(sup_call_list, sup_agent_call);

struct sup_agent {
	sbx_proto_conn *conn;
	sup_agent_dial *dial;          /* vsock, hybrid vsock: the connect under way */
	struct event_base *base;
	sup_agent_opts o;
	char name[48];                 /* the sandbox's id, for logs */
	struct event *handshake_timer;
	struct event *live_timer;      /* quiet watch, then the ping's deadline */
	struct event *blame_ev;        /* sup_agent_blame: drop on the next turn */
	char blame[SBX_ERR_MSG_MAX];
	uint64_t ping_id;              /* 0: no ping outstanding */
	struct timespec ping_sent;
	struct timespec last_in;       /* the last frame from the agent */
	const sup_agent_cbs *cbs;
	void *ud;
	struct sup_call_list calls;
	unsigned ncalls, nwaiting;
	unsigned dispatching;          /* > 0 while inside a conn callback */
	bool freed;                    /* sup_agent_free ran while dispatching */
	bool lost;                     /* on_lost delivered */
	bool held;                     /* sup_agent_hold: frozen, no clock runs */
	uint64_t frozen_ns;            /* time held, the current hold excluded */
	struct timespec held_since;
};

/* Every connection's, since start: read by /metrics (loop thread only);
 * the calls count bytes and timeouts, the connection faults. */
extern sup_agent_totals sup_agent_tally;

static inline void sup_agent_now(struct timespec *t)
{
	clock_gettime(CLOCK_MONOTONIC, t);
}

/* sup_agent.c: around every callback of ours that may free the agent
 * (it is released only once the outermost one unwinds). */
void sup_agent_dispatch_begin(sup_agent *a);
void sup_agent_dispatch_end(sup_agent *a);

/* sup_agent_call.c: what the connection tells its calls. */
/* A frame of the call's stream came from the agent. */
void sup_agent_call_frame(sup_agent_call *call, const sbx_proto_frame *f);
/* The agent moved on the call's stream (credit came, or the socket drained
 * while it waited for room): an idle budget starts again. */
void sup_agent_call_refill(sup_agent_call *call);
/* The call may send again. */
void sup_agent_call_writable(sup_agent_call *call);
/* The agent was held or thawed: the call's clock stops or starts. */
void sup_agent_call_clock_update(sup_agent_call *call);
/* The connection is over: every call ends with code and why. */
void sup_agent_calls_fail(sup_agent *a, int code, const char *why);

#endif
