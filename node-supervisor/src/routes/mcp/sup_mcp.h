/* MCP over HTTP, two families on one transport (mcp-host):
 *
 * sup_mcp_family, /v1/sandboxes/{id}/mcp[/{name}]: The Streamable HTTP
 * transport (POST, GET, DELETE with Mcp-Session-Id) to the stdio MCP
 * servers the agent runs, one server process per session (the agent's
 * spare taken at initialize), and the servers' management (PUT, DELETE
 * without a session, GET of the list). The transport's rules are
 * mcp-host's (transport.h, session.h, replay.h); this family does their
 * I/O: requests and SSE streams on the HTTP edge, sessions on the agent
 * through the core (sup_core_mcp.h). It never forwards the client's
 * headers (its token) into the sandbox, trusts nothing the server writes,
 * and holds the server back (the agent's credit) while a client does not
 * read.
 *
 * sup_mcp_api_family, /v1/mcp: sbx's own operations as an MCP server
 * (sup_mcp_api.c, its tools in sup_mcp_tools*.c): the tenant's token, its
 * sessions bound to that tenant, each tool's input schema taken from the
 * OpenAPI document's definitions, each call made on the core as the route
 * of its operation makes it (never over HTTP). Loop thread only. */
#ifndef SUP_MCP_H
#define SUP_MCP_H

#include <stdint.h>

#include "sup_api.h"
#include "sup_core.h"
#include "sup_ctx.h"
#include "sup_http.h"
#include "sup_snaps.h"

struct sup_mcp_hosts;
struct sup_mcp_own;

typedef struct sup_mcp_ctx {
	sup_core *core;
	uint64_t idle_ms;           /* --mcp-idle-timeout: an unused session ends */
	const char *origins;        /* --mcp-allow-origin: comma-separated, NULL none */
	struct sup_mcp_hosts *hosts; /* the sessions, per sandbox (made at first use) */
	/* /v1/mcp */
	sup_api_limits limits;      /* as POST /v1/sandboxes takes them */
	sup_snaps *snaps;           /* snapshot_sandbox; NULL: refused */
	uint64_t max_upload;        /* write_file's bytes, as PUT .../files (0: no limit) */
	sup_ctx_engine *contexts;   /* run_code's; NULL: refused */
	struct sup_mcp_own *own;    /* its sessions (made at first use) */
} sup_mcp_ctx;

extern const sup_http_family sup_mcp_family;
extern const sup_http_family sup_mcp_api_family;

/* Build /v1/mcp's tools from the OpenAPI document now (at start): an
 * operation it lacks or a $ref that names nothing fails the start instead
 * of every tools/list. */
int sup_mcp_api_check(sbx_err *err);

/* End every session (their servers are killed) and free what ctx holds. */
void sup_mcp_ctx_release(sup_mcp_ctx *x);

#endif
