#include "sup_core_mcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_log.h"
#include "sup_sandbox.h"

/* Whose configure answered, for the log. */
typedef struct hand_out_call {
	char id[SUP_ID_MAX];
	char name[SBX_MCP_NAME_MAX + 1];
} hand_out_call;

static void configured(int rc, const sbx_proto_mcp_status *st, size_t n, const sbx_err *err, void *ud)
{
	hand_out_call *h = ud;

	if (rc < 0)
		sup_warn("sandbox %s: MCP server %s not configured: %s", h->id, h->name, err ? err->msg : "");
	else
		sup_debug("sandbox %s: MCP server %s configured (%s)", h->id, h->name,
			  sbx_proto_mcp_state_name(st[0].state));
	free(h);
}

void sup_core_mcp_hand_out(struct sup_sandbox *sb, const sup_mcp_servers *servers)
{
	for (size_t i = 0; i < servers->n; i++) {
		hand_out_call *h = calloc(1, sizeof(*h));
		sup_agent_call *call;
		sbx_err err = { 0 };

		if (!h) {
			sup_warn("sandbox %s: MCP server %s not configured: out of memory", sb->id, servers->v[i].name);
			continue;
		}
		snprintf(h->id, sizeof(h->id), "%s", sb->id);
		snprintf(h->name, sizeof(h->name), "%s", servers->v[i].name);
		if (sup_agent_mcp_configure(sb->agent, &servers->v[i], configured, h, &call, &err) < 0) {
			sup_warn("sandbox %s: MCP server %s not configured: %s", sb->id, h->name, err.msg);
			free(h);
		}
	}
}

int sup_core_mcp_configure(sup_core *c, const char *id, const sup_mcp_server *s, sup_agent_mcp_cb cb, void *ud,
			   sbx_err *err)
{
	sup_agent *a = sup_core_agent(c, id, err);
	sup_agent_call *call;

	return a ? sup_agent_mcp_configure(a, s, cb, ud, &call, err) : err->code;
}

int sup_core_mcp_remove(sup_core *c, const char *id, const char *name, sup_agent_mcp_cb cb, void *ud,
			sbx_err *err)
{
	sup_agent *a = sup_core_agent(c, id, err);
	sup_agent_call *call;

	return a ? sup_agent_mcp_remove(a, name, cb, ud, &call, err) : err->code;
}

int sup_core_mcp_list(sup_core *c, const char *id, sup_agent_mcp_cb cb, void *ud, sbx_err *err)
{
	sup_agent *a = sup_core_agent(c, id, err);
	sup_agent_call *call;

	return a ? sup_agent_mcp_list(a, cb, ud, &call, err) : err->code;
}

int sup_core_mcp_open(sup_core *c, const char *id, const char *name, uint64_t idle_ms,
		      const sup_mcp_session_cbs *cbs, void *ud, sup_mcp_session **out, sbx_err *err)
{
	sup_agent *a = sup_core_agent(c, id, err);

	return a ? sup_agent_mcp_open(a, name, idle_ms, 0, cbs, ud, out, err) : err->code;
}
