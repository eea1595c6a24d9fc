/* The file tools: every path through the same check as the files routes
 * (sup_core_check_path: the sandbox's volumes, then the tenant's path
 * policy; a denial is logged as theirs are), the query parameters parsed
 * as the routes parse them (sup_query.h), then the agent's file and fs
 * operations through the core, their answers checked and rendered as the
 * API renders them (sup_api.h). read_file shows at most MT_SHOW_MAX bytes;
 * write_file's content is bounded by the request (the edge's max body)
 * and by --max-upload as PUT .../files is. */
#include "sup_mcp_tools.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_b64.h"
#include "sup_text.h"

/* The path p[0..len) for need into c->m (a denial logged, as the files
 * routes log theirs), and the agent's root and path arguments. */
static int check_path(mt_call *c, const char *opname, const char *p, size_t len, sup_policy_access need,
		      sbx_err *err)
{
	int rc = sup_core_check_path(c->x->core, c->who, c->id, p, len, need, &c->m, err);
	if (rc == -EPERM)
		sup_policy_log_denial(c->who ? c->who->name : "-", c->id, opname, p, len, err);
	if (rc < 0)
		return rc;
	sbx_proto_args_str(&c->pargs, "root", c->m.root, strlen(c->m.root));
	sbx_proto_args_str(&c->pargs, "path", c->m.rel, strlen(c->m.rel));
	return 0;
}

/* The query's "path" (required) checked. */
static int query_path(mt_call *c, const char *opname, sup_query *qs, sup_policy_access need, sbx_err *err)
{
	size_t len;
	int rc = sup_mcp_tool_query(c, qs, err);
	const char *p = rc < 0 ? NULL : sup_query_get(qs, "path", &len);
	if (rc < 0)
		return rc;
	if (!p)
		return sbx_err_set(err, -EINVAL, "argument \"path\" is required");
	return check_path(c, opname, p, len, need, err);
}

/* ---- read_file ---- */

static void read_event(const msgpack_object *map, size_t cost, void *ud)
{
	mt_call *c = ud;
	sbx_err e = { 0 };
	json_t *st = json_object();
	int rc = st ? sup_api_stat_json(map, st, &e) : sbx_err_set(&e, -ENOMEM, "out of memory");
	const char *type = json_string_value(json_object_get(st, "type"));
	if (rc == 0 && (c->started || !type || strcmp(type, "file") != 0))
		rc = sbx_err_set(&e, -EPROTO, "agent: file.read opened something not a file, or said so twice");
	c->size = (uint64_t)json_integer_value(json_object_get(st, "size"));
	json_decref(st);
	c->started = true;
	if (rc < 0) {
		sup_op_cancel(c->op);
		c->op = NULL;
		sup_core_blame(c->x->core, c->id, &e);
		sup_mcp_tool_fail(c, &e);
		return;
	}
	sup_op_consumed(c->op, cost);
}

static void read_data(const uint8_t *p, size_t n, size_t cost, void *ud)
{
	mt_call *c = ud;
	sbx_err e;
	if (!c->started || n > MT_SHOW_MAX - c->shown || evbuffer_add(c->buf, p, n) < 0) {
		sbx_err_set(&e, c->started && n <= MT_SHOW_MAX - c->shown ? -ENOMEM : -EPROTO,
			    "agent: file.read sent bytes beyond what it was asked for");
		sup_op_cancel(c->op);
		c->op = NULL;
		sup_core_blame(c->x->core, c->id, &e);
		sup_mcp_tool_fail(c, &e);
		return;
	}
	c->shown += n;
	sup_op_consumed(c->op, cost);
}

static void read_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	sbx_err e = { 0 };
	uint64_t bytes = 0;
	c->op = NULL;
	if (rc < 0) {
		sup_mcp_tool_fail(c, err);
		return;
	}
	if (!c->started || !sbx_proto_get_uint(result, "bytes", &bytes) || bytes != c->shown) {
		sbx_err_set(&e, -EPROTO, "agent: file.read ended short or its count is wrong");
		sup_core_blame(c->x->core, c->id, &e);
		sup_mcp_tool_fail(c, &e);
		return;
	}
	size_t n = evbuffer_get_length(c->buf);
	const uint8_t *p = evbuffer_pullup(c->buf, -1);
	bool text = sup_utf8_valid(p, n);
	bool cut = c->size > n;
	json_t *o = json_pack("{s:s, s:I, s:I, s:b}", "path", c->m.path, "size", (json_int_t)c->size, "length",
			      (json_int_t)n, "truncated", cut);
	size_t bl = 0;
	SBX_AUTO_FREE char *b64 = text ? NULL : sup_base64_encode(p, n, &bl);
	SBX_AUTO_FREE char *shown = NULL;
	int k = -1;
	if (o && (text || b64))
		json_object_set_new(o, text ? "content" : "content_b64",
				    text ? json_stringn((const char *)p, n) : json_stringn(b64, bl));
	if (o && text && cut)
		k = asprintf(&shown, "%.*s\n[truncated: the file has %" PRIu64 " bytes, the first %zu are shown; read "
				     "the rest with run_command (e.g. tail -c +%zu FILE | head -c 65536)]",
			     (int)n, (const char *)p, c->size, n, n + 1);
	else if (o && !text)
		k = asprintf(&shown, "[%s: %" PRIu64 " bytes, not UTF-8 text; %s%zu bytes as base64 in "
				     "structuredContent.content_b64]\n%s",
			     c->m.path, c->size, cut ? "the first " : "", n, b64 ? b64 : "");
	if (!o || (!text && !b64) || ((cut || !text) && k < 0)) {
		json_decref(o);
		sbx_err_set(&e, -ENOMEM, "out of memory");
		sup_mcp_tool_fail(c, &e);
		return;
	}
	if (shown)
		sup_mcp_tool_ok(c, shown, (size_t)k, o);
	else
		sup_mcp_tool_ok(c, (const char *)p, n, o);
}

static const sup_core_call_cbs read_cbs = { .on_data = read_data, .on_event = read_event, .on_done = read_done };

int sup_mcp_op_read(mt_call *c, sbx_err *err)
{
	SUP_AUTO_QUERY sup_query qs = { 0 };
	int rc = query_path(c, "read", &qs, SUP_POLICY_READ, err);
	if (rc < 0)
		return rc;
	if (c->m.dir)
		return sbx_err_set(err, -EINVAL, "the path names a folder (list it with list_files)");
	c->buf = evbuffer_new();
	if (!c->buf)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sbx_proto_args_uint(&c->pargs, "offset", 0);
	sbx_proto_args_uint(&c->pargs, "length", MT_SHOW_MAX);
	return sup_core_call(c->x->core, c->id, SBX_OP_FILE_READ, &c->pargs, &read_cbs, c, &c->op, err);
}

/* ---- write_file ---- */

static void write_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	sbx_err e = { 0 };
	uint64_t size = 0;
	c->op = NULL;
	if (rc < 0) {
		sup_mcp_tool_fail(c, err);
		return;
	}
	if (!c->wdone || !sbx_proto_get_uint(result, "size", &size) || size != c->wlen) {
		sbx_err_set(&e, -EPROTO, "agent: file.write ended early or miscounted");
		sup_core_blame(c->x->core, c->id, &e);
		sup_mcp_tool_fail(c, &e);
		return;
	}
	sup_mcp_tool_json(c, json_pack("{s:s, s:I}", "path", c->m.path, "size", (json_int_t)size));
}

static const sup_core_call_cbs write_cbs = {
	.on_done = write_done, .on_writable = sup_mcp_tool_pump, .wait = SUP_AGENT_WAIT_SENDS
};

int sup_mcp_op_write(mt_call *c, sbx_err *err)
{
	SUP_AUTO_QUERY sup_query qs = { 0 };
	uint64_t mode = 0644, max = c->x->max_upload;
	int rc = query_path(c, "write", &qs, SUP_POLICY_WRITE, err);
	int parents = rc < 0 ? rc : sup_query_flag(&qs, "parents", false, err);
	int ow = parents < 0 ? parents : sup_query_flag(&qs, "overwrite", true, err);
	const char *ms = sup_query_get(&qs, "mode", NULL);
	if (ow < 0)
		return ow;
	if (c->m.dir || c->m.is_root)
		return sbx_err_set(err, -EINVAL, "the path names a folder");
	if (ms && sup_api_parse_mode(ms, &mode) < 0)
		return sbx_err_set(err, -EINVAL, "argument \"mode\": want octal 0..0777 (e.g. 0644)");
	if ((rc = sup_mcp_tool_content(c, true, err)) < 0)
		return rc;
	if (max && c->wlen > max)
		return sbx_err_set(err, -E2BIG, "upload of %zu bytes over the limit of %" PRIu64 " bytes", c->wlen, max);
	sbx_proto_args_uint(&c->pargs, "mode", mode);
	sbx_proto_args_bool(&c->pargs, "parents", parents);
	sbx_proto_args_bool(&c->pargs, "overwrite", ow);
	if (max)
		sbx_proto_args_uint(&c->pargs, "max_bytes", max);
	return sup_mcp_tool_send(c, SBX_OP_FILE_WRITE, SBX_CH_FILE, &write_cbs, err);
}

/* ---- list_files, search_files ---- */

static void listing_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	sbx_err e = { 0 };
	c->op = NULL;
	json_t *o = rc < 0 ? NULL : sup_api_render_listing(c->m.path, result, &e);
	if (!o) {
		sup_core_blame(c->x->core, c->id, &e);
		sup_mcp_tool_fail(c, rc < 0 ? err : &e);
		return;
	}
	sup_mcp_tool_json(c, o);
}

static const sup_core_call_cbs listing_cbs = { .on_done = listing_done };

int sup_mcp_op_ls(mt_call *c, sbx_err *err)
{
	SUP_AUTO_QUERY sup_query qs = { 0 };
	uint64_t depth = 1;
	int rc = query_path(c, "list", &qs, SUP_POLICY_READ, err);
	if (rc == 0)
		rc = sup_query_uint(&qs, "depth", 1, 32, 1, &depth, err);
	if (rc < 0)
		return rc;
	sbx_proto_args_uint(&c->pargs, "depth", depth);
	return sup_core_call(c->x->core, c->id, SBX_OP_FS_LIST, &c->pargs, &listing_cbs, c, &c->op, err);
}

int sup_mcp_op_search(mt_call *c, sbx_err *err)
{
	json_t *p = json_object_get(c->body, "path"), *g = json_object_get(c->body, "glob");
	json_t *max = json_object_get(c->body, "max");
	if (!json_is_string(p))
		return sbx_err_set(err, -EINVAL, "field \"path\": want a string (an absolute path)");
	int rc = check_path(c, "search", json_string_value(p), json_string_length(p), SUP_POLICY_READ, err);
	if (rc < 0)
		return rc;
	if (!json_is_string(g) || json_string_length(g) == 0 || json_string_length(g) > 4095 ||
	    strlen(json_string_value(g)) != json_string_length(g))
		return sbx_err_set(err, -EINVAL, "field \"glob\": want a non-empty string without NUL (fnmatch pattern)");
	if (max && (!json_is_integer(max) || json_integer_value(max) < 1 || json_integer_value(max) > 100000))
		return sbx_err_set(err, -EINVAL, "field \"max\": want an integer 1..100000");
	sbx_proto_args_str(&c->pargs, "glob", json_string_value(g), json_string_length(g));
	sbx_proto_args_uint(&c->pargs, "max", max ? (uint64_t)json_integer_value(max) : 1000);
	return sup_core_call(c->x->core, c->id, SBX_OP_FS_SEARCH, &c->pargs, &listing_cbs, c, &c->op, err);
}
