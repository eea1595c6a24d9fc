/* The core's MCP operations on a sandbox (no HTTP): the servers a create
 * names are configured on the agent as the sandbox is handed out, and the
 * calls a route will make (configure, remove, list, open a session) find
 * the running sandbox by id and go through the agent client
 * (sup_agent_mcp.h), with its deadlines. A call in flight ends with the
 * agent error of a lost connection when the sandbox goes. Loop thread
 * only. */
#ifndef SUP_CORE_MCP_H
#define SUP_CORE_MCP_H

#include "sbx/err.h"
#include "sup_agent_mcp.h"
#include "sup_core.h"
#include "sup_types.h"

struct sup_sandbox;

/* At hand-out: mcp.configure each of servers on sb's agent (the agent
 * answers in order, so a session opened after the create's answer finds
 * them); a refusal is logged and shows in the list as a missing server. */
void sup_core_mcp_hand_out(struct sup_sandbox *sb, const sup_mcp_servers *servers);

int sup_core_mcp_configure(sup_core *c, const char *id, const sup_mcp_server *s, sup_agent_mcp_cb cb, void *ud,
			   sbx_err *err);
int sup_core_mcp_remove(sup_core *c, const char *id, const char *name, sup_agent_mcp_cb cb, void *ud,
			sbx_err *err);
int sup_core_mcp_list(sup_core *c, const char *id, sup_agent_mcp_cb cb, void *ud, sbx_err *err);
int sup_core_mcp_open(sup_core *c, const char *id, const char *name, uint64_t idle_ms,
		      const sup_mcp_session_cbs *cbs, void *ud, sup_mcp_session **out, sbx_err *err);

#endif
