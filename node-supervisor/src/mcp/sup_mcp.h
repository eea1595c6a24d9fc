/* MCP over HTTP: /v1/sandboxes/{id}/mcp[/{name}]. The Streamable HTTP
 * transport (POST, GET, DELETE with Mcp-Session-Id) to the stdio MCP
 * servers the agent runs, one server process per session (the agent's
 * spare taken at initialize), and the servers' management (PUT, DELETE
 * without a session, GET of the list). The transport's rules are
 * mcp-host's (transport.h, session.h, replay.h); this family does their
 * I/O: requests and SSE streams on the HTTP edge, sessions on the agent
 * through the core (sup_core_mcp.h). It never forwards the client's
 * headers (its token) into the sandbox, trusts nothing the server writes,
 * and holds the server back (the agent's credit) while a client does not
 * read. Loop thread only. */
#ifndef SUP_MCP_H
#define SUP_MCP_H

#include <stdint.h>

#include "sup_core.h"
#include "sup_http.h"

struct sup_mcp_hosts;

typedef struct sup_mcp_ctx {
	sup_core *core;
	uint64_t idle_ms;           /* --mcp-idle-timeout: an unused session ends */
	const char *origins;        /* --mcp-allow-origin: comma-separated, NULL none */
	struct sup_mcp_hosts *hosts; /* the sessions, per sandbox (made at first use) */
} sup_mcp_ctx;

extern const sup_http_family sup_mcp_family;

/* End every session (their servers are killed) and free what ctx holds. */
void sup_mcp_ctx_release(sup_mcp_ctx *x);

#endif
