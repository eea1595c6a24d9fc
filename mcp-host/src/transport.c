/* Streamable HTTP's decisions (mcp_host/transport.h). */
#include "mcp_host/transport.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int mcp_tx_origin(const char *allow, const char *origin, sbx_err *err)
{
	size_t olen;

	if (!origin)
		return 0;
	olen = strlen(origin);
	for (const char *p = allow ? allow : ""; *p;) {
		size_t n = strcspn(p, ",");

		while (n && *p == ' ') {
			p++;
			n--;
		}
		if (n == olen && strncasecmp(p, origin, n) == 0)
			return 0;
		p += n;
		if (*p == ',')
			p++;
	}
	return sbx_err_set(err, -EPERM, "Origin %.128s is not allowed (--mcp-allow-origin)", origin);
}

static bool takes(const char *accept, const char *type)
{
	return accept && strcasestr(accept, type);
}

int mcp_tx_post_accept(const char *accept, mcp_tx_reply *out, sbx_err *err)
{
	if (takes(accept, "text/event-stream"))
		*out = MCP_TX_SSE;
	else if (!accept || takes(accept, "application/json") || takes(accept, "*/*"))
		*out = MCP_TX_JSON;
	else
		return sbx_err_set(err, -ENOTSUP, "Accept must take application/json or text/event-stream");
	return 0;
}

int mcp_tx_get_accept(const char *accept, sbx_err *err)
{
	if (!takes(accept, "text/event-stream"))
		return sbx_err_set(err, -ENOTSUP, "Accept must take text/event-stream");
	return 0;
}

int mcp_tx_version(const char *hdr, sbx_err *err)
{
	if (hdr && !mcp_rpc_version_supported(hdr))
		return sbx_err_set(err, -EINVAL, "unsupported MCP-Protocol-Version %.32s (served: 2025-06-18, %s)", hdr,
				   MCP_RPC_VERSION_LATEST);
	return 0;
}

static int key_of(const json_t *id, char *key, sbx_err *err)
{
	if (mcp_rpc_id_key(id, key, MCP_SESSION_KEY_MAX) < 0)
		return sbx_err_set(err, -EINVAL, "a request id of %u bytes or more", MCP_SESSION_KEY_MAX);
	return 0;
}

int mcp_tx_post_kind(const mcp_rpc_msg *m, bool in_session, mcp_tx_post *kind, char *key, sbx_err *err)
{
	const char *version;

	key[0] = '\0';
	if (mcp_rpc_is_initialize(m, &version)) {
		if (in_session)
			return sbx_err_set(err, -EINVAL, "initialize opens a session: send it without Mcp-Session-Id");
		*kind = MCP_TX_INIT;
		return key_of(m->id, key, err);
	}
	if (!in_session)
		return sbx_err_set(err, -EINVAL, "Mcp-Session-Id is required (initialize first)");
	if (m->kind == MCP_RPC_REQUEST) {
		*kind = MCP_TX_CALL;
		return key_of(m->id, key, err);
	}
	*kind = MCP_TX_PASS;
	if (m->kind == MCP_RPC_NOTIFICATION && strcmp(m->method, "notifications/cancelled") == 0) {
		json_t *rid = json_object_get(json_object_get(m->root, "params"), "requestId");

		*kind = MCP_TX_CANCEL;
		if (rid && mcp_rpc_id_key(rid, key, MCP_SESSION_KEY_MAX) < 0)
			key[0] = '\0';
	}
	return 0;
}

int mcp_tx_route_msg(mcp_session *s, const char *line, size_t len, mcp_tx_route *route, uint32_t *stream,
		     sbx_err *err)
{
	char key[MCP_SESSION_KEY_MAX];
	mcp_rpc_msg m;
	int code, rc;

	rc = mcp_rpc_parse(line, len, &m, &code, err);
	if (rc < 0)
		return rc;
	*stream = 0;
	if (m.kind == MCP_RPC_REQUEST || m.kind == MCP_RPC_NOTIFICATION) {
		*route = MCP_TX_LATEST;
	} else if (json_is_null(m.id) || mcp_rpc_id_key(m.id, key, sizeof(key)) < 0 ||
		   mcp_session_pending_take(s, key, stream) < 0) {
		*route = MCP_TX_DROP;
	} else {
		json_t *v = json_object_get(json_object_get(m.root, "result"), "protocolVersion");

		*route = MCP_TX_STREAM;
		/* The first answer is initialize's: the version agreed. */
		if (!mcp_session_version(s)[0] && json_is_string(v))
			(void)mcp_session_set_version(s, json_string_value(v));
	}
	mcp_rpc_msg_free(&m);
	return 0;
}

int mcp_tx_line(const mcp_rpc_msg *m, const char *body, size_t len, const char **out, size_t *out_len,
		char **owned, sbx_err *err)
{
	*owned = NULL;
	if (!memchr(body, '\n', len) && !memchr(body, '\r', len)) {
		*out = body;
		*out_len = len;
		return 0;
	}
	*owned = json_dumps(m->root, JSON_COMPACT);
	if (!*owned)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	*out = *owned;
	*out_len = strlen(*owned);
	return 0;
}
