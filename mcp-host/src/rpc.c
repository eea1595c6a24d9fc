/* JSON-RPC 2.0 messages and lines (mcp_host/rpc.h). */
#include "mcp_host/rpc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int invalid(int *rpc_code, int code, sbx_err *err, const char *msg)
{
	*rpc_code = code;
	return sbx_err_set(err, -EINVAL, "%s", msg);
}

static bool id_ok(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

static int classify(mcp_rpc_msg *m, int *rpc_code, sbx_err *err)
{
	json_t *root = m->root, *version = json_object_get(root, "jsonrpc");
	json_t *method = json_object_get(root, "method"), *id = json_object_get(root, "id");
	json_t *params = json_object_get(root, "params"), *result = json_object_get(root, "result");
	json_t *error = json_object_get(root, "error");

	if (json_is_array(root))
		return invalid(rpc_code, MCP_RPC_INVALID_REQUEST, err,
			       "JSON-RPC batches are not supported (MCP 2025-06-18 removed them)");
	if (!json_is_object(root))
		return invalid(rpc_code, MCP_RPC_INVALID_REQUEST, err, "a JSON-RPC message is an object");
	if (!json_is_string(version) || strcmp(json_string_value(version), "2.0") != 0)
		return invalid(rpc_code, MCP_RPC_INVALID_REQUEST, err, "\"jsonrpc\" must be \"2.0\"");
	if (method) {
		if (!json_is_string(method) || json_string_length(method) == 0)
			return invalid(rpc_code, MCP_RPC_INVALID_REQUEST, err, "\"method\" must be a non-empty string");
		if (result || error)
			return invalid(rpc_code, MCP_RPC_INVALID_REQUEST, err,
				       "a message has either \"method\" or \"result\"/\"error\"");
		if (params && !json_is_object(params) && !json_is_array(params))
			return invalid(rpc_code, MCP_RPC_INVALID_PARAMS, err, "\"params\" must be an object");
		if (id && !id_ok(id))
			return invalid(rpc_code, MCP_RPC_INVALID_REQUEST, err,
				       "a request's \"id\" must be a string or an integer");
		m->kind = id ? MCP_RPC_REQUEST : MCP_RPC_NOTIFICATION;
		m->method = json_string_value(method);
		m->id = id;
		return 0;
	}
	if (!id)
		return invalid(rpc_code, MCP_RPC_INVALID_REQUEST, err, "a message without \"method\" needs an \"id\"");
	if (!result == !error)
		return invalid(rpc_code, MCP_RPC_INVALID_REQUEST, err, "a response has exactly one of \"result\" and \"error\"");
	if (result) {
		if (!id_ok(id))
			return invalid(rpc_code, MCP_RPC_INVALID_REQUEST, err,
				       "a response's \"id\" must be a string or an integer");
		m->kind = MCP_RPC_RESPONSE;
	} else {
		json_t *code = json_object_get(error, "code"), *msg = json_object_get(error, "message");

		if (!id_ok(id) && !json_is_null(id))
			return invalid(rpc_code, MCP_RPC_INVALID_REQUEST, err,
				       "an error's \"id\" must be a string, an integer or null");
		if (!json_is_object(error) || !json_is_integer(code) || !json_is_string(msg))
			return invalid(rpc_code, MCP_RPC_INVALID_REQUEST, err,
				       "\"error\" must be an object with an integer \"code\" and a string \"message\"");
		m->kind = MCP_RPC_ERROR;
	}
	m->id = id;
	return 0;
}

int mcp_rpc_parse(const char *buf, size_t len, mcp_rpc_msg *out, int *rpc_code, sbx_err *err)
{
	json_error_t jerr;
	int ret;

	memset(out, 0, sizeof(*out));
	out->root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!out->root) {
		*rpc_code = MCP_RPC_PARSE_ERROR;
		return sbx_err_set(err, -EINVAL, "not JSON: %s (at byte %d)", jerr.text, jerr.position);
	}
	ret = classify(out, rpc_code, err);
	if (ret < 0)
		mcp_rpc_msg_free(out);
	return ret;
}

void mcp_rpc_msg_free(mcp_rpc_msg *m)
{
	json_decref(m->root);
	memset(m, 0, sizeof(*m));
}

bool mcp_rpc_version_supported(const char *v)
{
	static const char *const versions[] = { "2025-06-18", MCP_RPC_VERSION_LATEST };

	for (size_t i = 0; v && i < sizeof(versions) / sizeof(versions[0]); i++)
		if (strcmp(v, versions[i]) == 0)
			return true;
	return false;
}

bool mcp_rpc_is_initialize(const mcp_rpc_msg *m, const char **version)
{
	json_t *v;

	if (m->kind != MCP_RPC_REQUEST || strcmp(m->method, "initialize") != 0)
		return false;
	v = json_object_get(json_object_get(m->root, "params"), "protocolVersion");
	*version = json_is_string(v) ? json_string_value(v) : NULL;
	return true;
}

char *mcp_rpc_error_body(const json_t *id, int code, const char *msg, size_t *len)
{
	json_t *o = json_pack("{s:s, s:O?, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id, "error", "code", code,
			      "message", msg);
	char *body;

	if (!o)
		return NULL;
	/* json_pack's O? packs null for a NULL id. */
	body = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (body)
		*len = strlen(body);
	return body;
}

int mcp_rpc_id_key(const json_t *id, char *buf, size_t cap)
{
	int n;

	if (json_is_string(id))
		n = snprintf(buf, cap, "s:%s", json_string_value(id));
	else if (json_is_integer(id))
		n = snprintf(buf, cap, "n:%" JSON_INTEGER_FORMAT, json_integer_value(id));
	else
		return -EINVAL;
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* ---- lines ---- */

void mcp_rpc_lines_init(mcp_rpc_lines *l, size_t max_line)
{
	memset(l, 0, sizeof(*l));
	l->max_line = max_line;
}

void mcp_rpc_lines_free(mcp_rpc_lines *l)
{
	free(l->buf);
	memset(l, 0, sizeof(*l));
}

size_t mcp_rpc_lines_pending(const mcp_rpc_lines *l)
{
	return l->len;
}

static bool blank(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return false;
	return true;
}

static int append(mcp_rpc_lines *l, const char *p, size_t n, sbx_err *err)
{
	if (l->len + n > l->max_line)
		return sbx_err_set(err, -EMSGSIZE, "a message over %zu bytes", l->max_line);
	if (l->len + n > l->cap) {
		size_t cap = l->cap ? l->cap : 4096;
		char *nb;

		while (cap < l->len + n)
			cap *= 2;
		nb = realloc(l->buf, cap);
		if (!nb)
			return sbx_err_set(err, -ENOMEM, "out of memory for a message");
		l->buf = nb;
		l->cap = cap;
	}
	memcpy(l->buf + l->len, p, n);
	l->len += n;
	return 0;
}

int mcp_rpc_lines_feed(mcp_rpc_lines *l, const char *p, size_t n, mcp_rpc_line_cb cb, void *ud, sbx_err *err)
{
	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;
		const char *line = p;
		size_t len = take;
		int ret;

		/* A whole line in the input is passed on without a copy. */
		if (l->len > 0 || !nl) {
			ret = append(l, p, take, err);
			if (ret < 0)
				return ret;
			line = l->buf;
			len = l->len;
		} else if (take > l->max_line) {
			return sbx_err_set(err, -EMSGSIZE, "a message over %zu bytes", l->max_line);
		}
		if (!nl)
			return 0;
		p += take + 1;
		n -= take + 1;
		l->len = 0;
		if (len > 0 && !blank(line, len)) {
			ret = cb(line, len, ud);
			if (ret < 0)
				return ret;
		}
	}
	return 0;
}
