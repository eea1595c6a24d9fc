/* One stdio MCP server process: newline-delimited JSON-RPC on its pipes.
 *
 * Started through proc.c (so through spawn.c: the exec jail, its tree, nice
 * and oom_score_adj, nothing of its own), with a stdin pipe. Its stdout is
 * cut into lines in one buffer bounded by the line limit: each whole line is
 * checked to be one JSON text (jansson) and then offered to the owner, who
 * sends it on and says how much went; until all of it went, stdout is not
 * read, so a server that writes faster than its reader blocks on write.
 * Blank lines are dropped. A line that is not JSON, or longer than the
 * limit, is reported once (bad_output) and nothing more is read; the owner
 * decides (it ends the session). stderr is always read, into a small ring
 * whose last lines explain a crash.
 *
 * The owner may change (a spare process is owned by its server until a
 * session takes it).
 *
 * Warm-up (agent_mcp_proc_warm): one JSON-RPC ping with an id of the
 * reserved form AGENT_MCP_WARM_ID_PREFIX<n> is written first; its one
 * answer (a result or an error with that id) is dropped here, whoever owns
 * the process by then, and its stdin bytes are no owner's credit. Every
 * other line passes as above. This module owns the process, its buffers and
 * its line checks; it must not know the protocol's streams or the servers. */
#ifndef AGENT_MCP_PROC_H
#define AGENT_MCP_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbx/err.h"
#include "sbx/proto.h"
#include "sbx/proto_mcp.h"
#include "exec_spec.h"
#include "proc.h"

struct event_base;
typedef struct agent_mcp_proc agent_mcp_proc;

/* Ids of this form are the agent's own (the warm-up ping); a client's
 * request must not use them: its one answer would be dropped. */
#define AGENT_MCP_WARM_ID_PREFIX SBX_MCP_WARM_ID_PREFIX

/* Bytes of stderr kept per process. */
#define AGENT_MCP_STDERR_RING (16u << 10)

typedef struct agent_mcp_proc_owner {
	/* The process runs as pid. */
	void (*started)(void *ud, pid_t pid);
	/* Whole, checked lines wait (agent_mcp_proc_pending). */
	void (*lines)(void *ud);
	/* n stdin bytes reached the process (or were dropped: it stopped
	 * reading); the owner may take more. */
	void (*stdin_done)(void *ud, size_t n);
	/* A line that is not JSON (code bad_output) or over the limit
	 * (too_large); msg says what. Nothing more is read. */
	void (*bad_output)(void *ud, sbx_proto_code code, const char *msg);
	/* The process ended and every checked line was taken; tail: its last
	 * stderr lines (agent_mcp_proc_stderr_tail). Last call; the object is
	 * already freed. */
	void (*finished)(void *ud, const agent_proc_result *r, const char *tail);
} agent_mcp_proc_owner;

/* spec must have stdin_pipe and no pty; it is not kept. */
int agent_mcp_proc_start(struct event_base *base, const agent_exec_spec *spec, size_t max_line,
			 const agent_mcp_proc_owner *owner, void *ud, agent_mcp_proc **out, sbx_err *err);
void agent_mcp_proc_set_owner(agent_mcp_proc *m, const agent_mcp_proc_owner *owner, void *ud);

/* 0 until started. */
pid_t agent_mcp_proc_pid(const agent_mcp_proc *m);
/* The process has ended (finished may still wait for lines to be taken). */
bool agent_mcp_proc_ended(const agent_mcp_proc *m);

/* The checked bytes not yet taken (whole lines, each ending in '\n'). */
size_t agent_mcp_proc_pending(const agent_mcp_proc *m, const uint8_t **p);
/* The owner took n of them. */
void agent_mcp_proc_taken(agent_mcp_proc *m, size_t n);

/* Stdin bytes, within AGENT_PROC_STDIN_MAX pending (-ENOBUFS beyond). */
int agent_mcp_proc_write(agent_mcp_proc *m, const void *p, size_t n, sbx_err *err);
void agent_mcp_proc_close_stdin(agent_mcp_proc *m);

/* Write the warm-up ping; it counts as warming for timeout_ms at most. */
int agent_mcp_proc_warm(agent_mcp_proc *m, unsigned timeout_ms, sbx_err *err);
/* The warm-up's answer is awaited and its time has not run out. */
bool agent_mcp_proc_warming(const agent_mcp_proc *m);

/* The last whole lines of stderr, at most cap - 1 bytes, NUL-terminated,
 * lines joined by '\n'; control bytes but tab, and every byte of what is
 * not UTF-8, shown as '?' (the tail goes into str fields and JSON). */
void agent_mcp_proc_stderr_tail(const agent_mcp_proc *m, char *buf, size_t cap);

/* The owner leaves: the whole tree is killed, no owner call after this, the
 * object frees itself; m must not be used again. */
void agent_mcp_proc_detach(agent_mcp_proc *m);

#endif
