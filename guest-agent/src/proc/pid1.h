/* The agent's duties as init: reaping, signals, subreaper, shutdown.
 *
 * Every child is reaped here (wait4(-1) on SIGCHLD) and handed to children.c,
 * so the exits of commands reach their owners and reparented orphans just
 * vanish. Not PID 1 (tests, a host run), the agent registers as child
 * subreaper so orphans of its commands still come back to it.
 *
 * SIGTERM/SIGINT start the shutdown: stop accepting, forward the signal to
 * running commands, wait for them for the grace period, then SIGKILL (as PID 1
 * everything in the namespace), then leave the loop; the agent exits 0. The
 * steps that touch other modules are hooks, so this module owns only the
 * sequence and the signals; it must not know about sessions or commands. */
#ifndef AGENT_PID1_H
#define AGENT_PID1_H

#include <signal.h>
#include <stdbool.h>

#include "sbx/err.h"

struct event_base;

/* Every signal whose disposition the agent changes; a spawned child resets
 * them to the default before exec (ignored ones would survive exec). */
#define AGENT_PID1_SIGNALS SIGCHLD, SIGTERM, SIGINT, SIGPIPE

#define AGENT_PID1_DEFAULT_GRACE_MS 5000u
/* After the final SIGKILL, how long to wait for the last answers to go out. */
#define AGENT_PID1_FINAL_MS 1000u

typedef struct agent_pid1_hooks {
	void (*stop_accepting)(void *ud); /* first SIGTERM/SIGINT: take no new work */
	void (*forward)(int sig, void *ud); /* pass a SIGTERM/SIGINT to what runs */
	void (*kill_all)(void *ud);       /* grace over: SIGKILL what runs */
	bool (*idle)(void *ud);           /* nothing runs and every answer went out */
	void (*done)(void *ud);           /* leave the event loop */
} agent_pid1_hooks;

typedef struct agent_pid1_opts {
	unsigned grace_ms; /* 0: AGENT_PID1_DEFAULT_GRACE_MS */
} agent_pid1_opts;

/* Install the signal events on base and register as subreaper unless PID 1. */
int agent_pid1_setup(struct event_base *base, const agent_pid1_opts *opts,
		     const agent_pid1_hooks *hooks, void *ud, sbx_err *err);
void agent_pid1_teardown(void);

bool agent_pid1_is_init(void);
bool agent_pid1_shutting_down(void);
/* Start the shutdown as a SIGTERM would (sig is forwarded; 0: none). */
void agent_pid1_shutdown(int sig);
/* Reap every exited child now (what SIGCHLD does). */
void agent_pid1_reap(void);

#endif
