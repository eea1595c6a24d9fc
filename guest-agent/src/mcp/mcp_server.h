/* The configured MCP servers of this sandbox and their spare processes.
 *
 * A server is a name and what to run (exec's argv/env/cwd, parsed once by
 * exec's parser, run as the sandbox user on pipes) with its line limit. Each
 * keeps one spare process started ahead (agent_mcp_proc), so that a
 * session's initialize pays only the server's answer: a session takes the
 * spare and a new spare is started at once. A spare is warmed with one
 * ping (mcp_proc.h) and counts as ready once it answered, or once
 * AGENT_MCP_WARM_MS passed without an answer (a cold spare, still used). A spare that ends on its own
 * (or writes a bad line) is a crash: kept in the status with its last
 * stderr lines, and the spare is started again after a back-off (0.5 s,
 * doubling to 30 s, back to 0.5 s once a session took one). Servers outlive
 * connections; configuring a name again replaces the server, and removing
 * or replacing one ends its sessions. The agent's end ends everything (the
 * processes are ordinary commands: the shutdown kills their trees).
 *
 * This module owns servers, spares and their counters; sessions (the
 * streams) are op_mcp.c's, linked here only so that a removal can end them. */
#ifndef AGENT_MCP_SERVER_H
#define AGENT_MCP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#include "sbx/err.h"
#include "sbx/proto_mcp.h"
#include "agent.h"
#include "mcp_proc.h"

typedef struct agent_mcp_server agent_mcp_server;

/* Sessions open at once, over every server. */
#define AGENT_MCP_MAX_SESSIONS 128u
#define AGENT_MCP_BACKOFF_MIN_MS 500u
#define AGENT_MCP_BACKOFF_MAX_MS 30000u
/* Longest a spare counts as warming: npx fetching a package may be slow. */
#define AGENT_MCP_WARM_MS 20000u

/* A session as its server sees it (embedded in the session). */
typedef struct agent_mcp_link {
	struct agent_mcp_link *prev, *next;
	/* The server is removed or replaced: end the session now (detach its
	 * process, answer its stream); the link is already off the list. */
	void (*end)(struct agent_mcp_link *l, const char *why);
} agent_mcp_link;

/* mcp.configure: parse args (proto_mcp.h, then exec's parser), replace a
 * server of that name (its sessions ended), start the spare. -EINVAL bad
 * arguments, -ENOSPC SBX_MCP_MAX_SERVERS reached, -ESHUTDOWN. st: the new
 * server's status. */
int agent_mcp_configure(agent_ctx *ctx, const msgpack_object *args, sbx_proto_mcp_status *st, sbx_err *err);
/* mcp.remove: -ENOENT without it. */
int agent_mcp_remove(const char *name, size_t len, sbx_err *err);
/* Every server's status; returns the count (at most max). */
size_t agent_mcp_list(sbx_proto_mcp_status *sts, size_t max);

/* A session on server name: the spare if there is one (*spare true; a new
 * spare is started), else a new process. The process is owned by owner/ud
 * from now on, and the session is linked. -ENOENT no such server, -EBUSY
 * AGENT_MCP_MAX_SESSIONS, else the start's error. */
int agent_mcp_take(const char *name, size_t len, const agent_mcp_proc_owner *owner, void *ud,
		   agent_mcp_link *link, agent_mcp_server **srv, agent_mcp_proc **mp, bool *spare,
		   sbx_err *err);
/* The session ended: unlinked. crashed: its process ended on its own (r,
 * tail: its status and last stderr lines); bad: it wrote a bad line. */
void agent_mcp_session_end(agent_mcp_server *s, agent_mcp_link *link, bool crashed, bool bad,
			   const agent_proc_result *r, const char *tail);
/* Counting the session's messages. */
void agent_mcp_count(agent_mcp_server *s, uint64_t in, uint64_t out);
size_t agent_mcp_sessions(void);

/* At exit: forget every server and spare without waiting (their processes
 * are killed with every other command). */
void agent_mcp_discard_all(void);

#endif
