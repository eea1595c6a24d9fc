/* The tool table, the input schemas built from the OpenAPI document, and a
 * call's common path: arguments checked against the tool's properties, the
 * sandbox it names checked as the caller's (as the edge checks every {id}
 * route), the operation started, its answer made a CallToolResult. */
#include "sup_mcp_tools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_log.h"

/* What a model reads to pick a tool; the arguments are the document's. */
static const mt_tool tools[] = {
	{ "create_sandbox", "createSandbox", "sandboxes",
	  "Create a sandbox: an isolated Linux container to run code in. All arguments are optional: "
	  "image, resources (cpus, memory, pids, disk), network (egress policy; none: no network), "
	  "timeout (seconds it lives), env. Answers the sandbox; pass its id to the other tools.",
	  NULL, NULL, sup_mcp_op_create },
	{ "list_sandboxes", "listSandboxes", "sandboxes", "List your sandboxes, oldest first.", "scope", NULL,
	  sup_mcp_op_list },
	{ "delete_sandbox", "deleteSandbox", "sandboxes",
	  "Destroy a sandbox and everything in it (snapshots of it stay).", NULL, "McpDeleted", sup_mcp_op_delete },
	{ "run_command", "exec", "sandboxes",
	  "Run a command in a sandbox to its end: cmd (a shell line, sh -c) or argv. Answers the exit code, "
	  "stdout and stderr; each stream is shown up to 64 KiB (longer output is cut, with a note). "
	  "For long-running commands use start_process.",
	  NULL, NULL, sup_mcp_op_run },
	{ "start_process", "startProcess", "processes",
	  "Start a background process in a sandbox (a server, a long build): cmd or argv. Answers its pid; "
	  "read its output with read_process_output. With stdin true its stdin stays open for "
	  "write_process_stdin.",
	  NULL, NULL, sup_mcp_op_start },
	{ "read_process_output", "processOutput", "processes",
	  "Read a background process's output (stdout and stderr in the order written) from offset "
	  "(default 0), up to 64 KiB, and its state (running, or its exit code). Continue from the "
	  "next_offset it answers.",
	  "follow", "McpProcessRead", sup_mcp_op_output },
	{ "write_process_stdin", "processStdin", "processes",
	  "Write to the stdin of a background process started with stdin true: content (text) or content_b64 "
	  "(bytes); eof \"true\" closes its stdin afterwards (alone: only closes it). Answers once the process "
	  "took every byte: the count written.",
	  NULL, NULL, sup_mcp_op_stdin },
	{ "kill_process", "killProcess", "processes",
	  "Kill a background process and everything it started (SIGKILL to its whole tree). Answers the "
	  "process as it ended.",
	  NULL, "Process", sup_mcp_op_kill },
	{ "read_file", "readFile", "files",
	  "Read a file in a sandbox: its text (or base64 when it is not UTF-8), up to 64 KiB (longer is cut, "
	  "with a note).",
	  NULL, "McpFileRead", sup_mcp_op_read },
	{ "write_file", "writeFile", "files",
	  "Write a file in a sandbox: content (text) or content_b64 (bytes) becomes the file; parents "
	  "\"true\" makes missing folders, overwrite \"false\" refuses an existing file, mode as octal digits.",
	  NULL, NULL, sup_mcp_op_write },
	{ "list_files", "list", "files", "List a folder in a sandbox (depth: levels below it, default 1).", NULL,
	  NULL, sup_mcp_op_ls },
	{ "search_files", "search", "files",
	  "Find entries below a folder in a sandbox whose name matches a glob (fnmatch: *.py, test_*).", NULL,
	  NULL, sup_mcp_op_search },
	{ "run_code", "runCode", "contexts",
	  "Run a cell of code in a sandbox's live interpreter, whose variables stay for the next cell: ctx is "
	  "a context's id or a language (python, javascript, bash: its default context, made on first use; "
	  "python is an IPython kernel: pandas, numpy, matplotlib in sbx/code-interpreter). Answers stdout, "
	  "stderr, the results by MIME type (text/plain, text/html, image/png base64, ...; main: the cell's "
	  "value) and the error with its traceback; text shown up to 64 KiB.",
	  NULL, NULL, sup_mcp_op_code },
	{ "snapshot_sandbox", "snapshotSandbox", "snapshots",
	  "Snapshot a sandbox's files; create_sandbox with snapshot set to its id starts from them.", NULL, NULL,
	  sup_mcp_op_snapshot },
};
#define NTOOLS (sizeof(tools) / sizeof(tools[0]))

/* Built once: the list, and per tool its properties and the names that
 * are parameters (the rest is the request body). */
static struct {
	json_t *list;
	json_t *props[NTOOLS];
	json_t *params[NTOOLS];
	json_t *query[NTOOLS];
} built;

/* ---- the schemas, from the document ---- */

/* The value at a local JSON pointer ("#/components/schemas/X"). */
static const json_t *pointer(const json_t *doc, const char *ref)
{
	const json_t *v = doc;
	char tok[256];
	if (strncmp(ref, "#/", 2) != 0)
		return NULL;
	for (const char *p = ref + 2; v && *p;) {
		size_t n = strcspn(p, "/"), k = 0;
		for (size_t i = 0; i < n && k + 1 < sizeof(tok); i++) {
			if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
				tok[k++] = p[i + 1] == '0' ? '~' : '/';
				i++;
			} else {
				tok[k++] = p[i];
			}
		}
		tok[k] = '\0';
		v = json_is_array(v) ? json_array_get(v, strtoul(tok, NULL, 10)) : json_object_get(v, tok);
		p += n + (p[n] == '/');
	}
	return v;
}

/* A copy of v with every $ref replaced by what it names (its siblings
 * kept over it); depth bounds a cycle. */
static json_t *resolve(const json_t *doc, const json_t *v, int depth, sbx_err *err)
{
	if (depth > 32) {
		sbx_err_set(err, -ELOOP, "openapi.json: $refs nested too deep (a cycle?)");
		return NULL;
	}
	if (json_is_array(v)) {
		json_t *a = json_array();
		size_t i;
		const json_t *e;
		json_array_foreach(v, i, e) {
			json_t *r = a ? resolve(doc, e, depth, err) : NULL;
			if (!r || json_array_append_new(a, r) < 0) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	}
	if (!json_is_object(v))
		return json_deep_copy(v);
	const json_t *ref = json_object_get(v, "$ref");
	json_t *o = NULL;
	if (json_is_string(ref)) {
		const json_t *t = pointer(doc, json_string_value(ref));
		if (!t) {
			sbx_err_set(err, -ENOENT, "openapi.json: $ref %.200s names nothing",
				    json_string_value(ref));
			return NULL;
		}
		o = resolve(doc, t, depth + 1, err);
	} else {
		o = json_object();
	}
	const char *k;
	const json_t *e;
	json_object_foreach((json_t *)v, k, e) {
		if (!o || strcmp(k, "$ref") == 0)
			continue;
		json_t *r = resolve(doc, e, depth, err);
		if (!r || json_object_set_new(o, k, r) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* The operation named id, its path item's parameters and its method. */
static const json_t *find_op(const json_t *doc, const char *id, const json_t **path_params,
			     const char **method)
{
	const char *p, *m;
	const json_t *item, *op;
	json_object_foreach(json_object_get(doc, "paths"), p, item) {
		json_object_foreach((json_t *)item, m, op) {
			const json_t *oid = json_object_get(op, "operationId");
			if (json_is_string(oid) && strcmp(json_string_value(oid), id) == 0) {
				*path_params = json_object_get(item, "parameters");
				*method = m;
				return op;
			}
		}
	}
	return NULL;
}

/* One parameter (path or query) as a property; headers are not offered. */
static int add_param(const json_t *doc, const json_t *raw, const mt_tool *t, json_t *props,
		     json_t *req, json_t *names, json_t *query, sbx_err *err)
{
	json_t *p = resolve(doc, raw, 0, err);
	const char *in = json_string_value(json_object_get(p, "in"));
	const char *name = json_string_value(json_object_get(p, "name"));
	int rc = 0;
	if (!p || !in || !name || !json_is_object(json_object_get(p, "schema"))) {
		rc = err->code ? err->code : sbx_err_set(err, -EINVAL, "openapi.json: %s: a parameter without in, name or schema", t->op);
	} else if ((strcmp(in, "path") == 0 || strcmp(in, "query") == 0) &&
		   !(t->omit && strcmp(t->omit, name) == 0)) {
		json_t *s = json_incref(json_object_get(p, "schema"));
		const json_t *d = json_object_get(p, "description");
		if (d && !json_object_get(s, "description"))
			json_object_set(s, "description", (json_t *)d);
		json_object_set_new(props, name, s);
		json_array_append_new(names, json_string(name));
		if (strcmp(in, "query") == 0)
			json_array_append_new(query, json_string(name));
		if (json_is_true(json_object_get(p, "required")))
			json_array_append_new(req, json_string(name));
	}
	json_decref(p);
	return rc;
}

/* The request body: a JSON body's properties (its top-level oneOf/not
 * stay the API's to check: clients refuse combinators at the top of a
 * tool's schema), a binary one as content / content_b64. */
static int add_body(const json_t *doc, const json_t *op, const mt_tool *t, json_t *props, json_t *req,
		    sbx_err *err)
{
	const json_t *content = json_object_get(json_object_get(op, "requestBody"), "content");
	const json_t *js = json_object_get(json_object_get(content, "application/json"), "schema");
	if (json_object_get(content, "application/octet-stream")) {
		json_object_set_new(props, "content",
				    json_pack("{s:s, s:s}", "type", "string", "description",
					      "the request body (the file's bytes) as text"));
		json_object_set_new(props, "content_b64",
				    json_pack("{s:s, s:s, s:s}", "type", "string", "contentEncoding", "base64",
					      "description", "the request body as base64 (instead of content)"));
		return 0;
	}
	if (!js)
		return 0;
	json_t *s = resolve(doc, js, 0, err);
	const char *k;
	json_t *v;
	size_t i;
	if (!s)
		return err->code;
	json_object_foreach(json_object_get(s, "properties"), k, v) {
		if (json_object_get(props, k)) {
			json_decref(s);
			return sbx_err_set(err, -EEXIST, "openapi.json: %s: body field %s is also a parameter", t->op, k);
		}
		json_object_set(props, k, v);
	}
	json_array_foreach(json_object_get(s, "required"), i, v)
		json_array_append(req, v);
	json_decref(s);
	return 0;
}

/* The outputSchema: the schema of the operation's first 2xx JSON answer, or
 * t->out where the route answers no JSON (204, bytes, a stream), $refs
 * resolved; an object at its root, as MCP wants. */
static json_t *output_schema(const json_t *doc, const json_t *op, const mt_tool *t, sbx_err *err)
{
	const json_t *resps = json_object_get(op, "responses"), *s = NULL;
	json_t *ref = NULL, *o;
	char key[96];
	for (int st = 200; !t->out && !s && st < 300; st++) {
		snprintf(key, sizeof(key), "%d", st);
		const json_t *r = json_object_get(resps, key);
		const json_t *rr = json_object_get(r, "$ref");
		if (json_is_string(rr))
			r = pointer(doc, json_string_value(rr));
		s = json_object_get(json_object_get(json_object_get(r, "content"), "application/json"), "schema");
	}
	if (t->out) {
		snprintf(key, sizeof(key), "#/components/schemas/%s", t->out);
		s = ref = json_pack("{s:s}", "$ref", key);
	}
	if (!s) {
		sbx_err_set(err, -ENOENT, "openapi.json: %s answers no JSON: tool %s needs its result schema (out)",
			    t->op, t->name);
		return NULL;
	}
	o = resolve(doc, s, 0, err);
	json_decref(ref);
	const char *type = json_string_value(json_object_get(o, "type"));
	if (o && (!type || strcmp(type, "object") != 0)) {
		json_decref(o);
		sbx_err_set(err, -EINVAL, "openapi.json: tool %s: its result schema is not an object at its root",
			    t->name);
		return NULL;
	}
	return o;
}

static json_t *build_tool(const json_t *doc, size_t ti, sbx_err *err)
{
	const mt_tool *t = &tools[ti];
	const json_t *pp = NULL, *op;
	const char *method = "";
	size_t i;
	json_t *v;
	if (!(op = find_op(doc, t->op, &pp, &method))) {
		sbx_err_set(err, -ENOENT, "openapi.json has no operation %s (tool %s)", t->op, t->name);
		return NULL;
	}
	json_t *props = json_object(), *req = json_array(), *names = json_array(), *query = json_array();
	int rc = props && req && names && query ? 0 : sbx_err_set(err, -ENOMEM, "out of memory");
	json_array_foreach((json_t *)pp, i, v)
		if (rc == 0)
			rc = add_param(doc, v, t, props, req, names, query, err);
	json_array_foreach(json_object_get(op, "parameters"), i, v)
		if (rc == 0)
			rc = add_param(doc, v, t, props, req, names, query, err);
	if (rc == 0)
		rc = add_body(doc, op, t, props, req, err);
	json_t *schema = rc < 0 ? NULL
				: json_pack("{s:s, s:O, s:b}", "type", "object", "properties", props,
					    "additionalProperties", 0);
	if (schema && json_array_size(req))
		json_object_set(schema, "required", req);
	bool get = strcmp(method, "get") == 0, del = strcmp(method, "delete") == 0;
	json_t *out = schema ? output_schema(doc, op, t, err) : NULL;
	json_t *tool = out ? json_pack("{s:s, s:s, s:o, s:o, s:{s:b, s:b}}", "name", t->name, "description",
				       t->note, "inputSchema", schema, "outputSchema", out, "annotations",
				       "readOnlyHint", get, "destructiveHint", del)
			   : NULL;
	if (!out)
		json_decref(schema);
	if (tool) {
		built.props[ti] = json_incref(props);
		built.params[ti] = json_incref(names);
		built.query[ti] = json_incref(query);
	} else if (!err->code) {
		sbx_err_set(err, -ENOMEM, "out of memory");
	}
	json_decref(props);
	json_decref(req);
	json_decref(names);
	json_decref(query);
	return tool;
}

const json_t *sup_mcp_tools_list(sbx_err *err)
{
	if (built.list)
		return built.list;
	json_error_t je;
	json_t *doc = json_loadb(sup_openapi_json, sup_openapi_json_len, 0, &je);
	json_t *arr = json_array();
	if (!doc || !arr) {
		json_decref(doc);
		json_decref(arr);
		sbx_err_set(err, -EINVAL, "openapi.json: %s", doc ? "out of memory" : je.text);
		return NULL;
	}
	for (size_t i = 0; i < NTOOLS; i++) {
		json_t *t = build_tool(doc, i, err);
		if (!t || json_array_append_new(arr, t) < 0) {
			for (size_t k = 0; k <= i; k++) {
				json_decref(built.props[k]);
				json_decref(built.params[k]);
				json_decref(built.query[k]);
				built.props[k] = built.params[k] = built.query[k] = NULL;
			}
			json_decref(arr);
			json_decref(doc);
			if (!err->code)
				sbx_err_set(err, -ENOMEM, "out of memory");
			return NULL;
		}
	}
	json_decref(doc);
	built.list = json_pack("{s:o}", "tools", arr);
	if (!built.list)
		sbx_err_set(err, -ENOMEM, "out of memory");
	return built.list;
}

void sup_mcp_tools_free(void)
{
	for (size_t k = 0; k < NTOOLS; k++) {
		json_decref(built.props[k]);
		json_decref(built.params[k]);
		json_decref(built.query[k]);
		built.props[k] = built.params[k] = built.query[k] = NULL;
	}
	json_decref(built.list);
	built.list = NULL;
}

int sup_mcp_tool_query(mt_call *c, sup_query *qs, sbx_err *err)
{
	size_t i;
	json_t *n;
	json_array_foreach(built.query[c->tool - tools], i, n) {
		const char *k = json_string_value(n);
		json_t *v = json_object_get(c->args, k);
		char num[32];
		const char *s = num;
		size_t len;
		if (!v)
			continue;
		if (json_is_string(v))
			s = json_string_value(v), len = json_string_length(v);
		else if (json_is_integer(v))
			len = (size_t)snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
		else if (json_is_boolean(v))
			s = json_is_true(v) ? "true" : "false", len = strlen(s);
		else
			return sbx_err_set(err, -EINVAL, "argument \"%s\": want a string", k);
		if (qs->n == SUP_QUERY_MAX || !(qs->p[qs->n].val = malloc(len + 1)))
			return sbx_err_set(err, -ENOMEM, "out of memory");
		memcpy(qs->p[qs->n].val, s, len);
		qs->p[qs->n].val[len] = '\0';
		qs->p[qs->n].val_len = len;
		qs->p[qs->n].key = k;
		qs->p[qs->n].key_len = strlen(k);
		qs->n++;
	}
	return 0;
}

/* ---- results ---- */

static void finish(mt_call *c, json_t *result)
{
	if (c->finished) {
		json_decref(result);
		return;
	}
	c->finished = true;
	if (!result)
		result = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text",
				   "out of memory making the result", "isError", 1);
	c->done(c, result);
}

void sup_mcp_tool_ok(mt_call *c, const char *text, size_t len, json_t *structured)
{
	sup_mcp_tool_result(c, text, len, structured, false);
}

void sup_mcp_tool_result(mt_call *c, const char *text, size_t len, json_t *structured, bool is_error)
{
	json_t *r = json_pack("{s:[{s:s, s:s%}], s:b}", "content", "type", "text", "text", text, len,
			      "isError", is_error);
	if (r && structured)
		json_object_set(r, "structuredContent", structured);
	json_decref(structured);
	finish(c, r);
}

void sup_mcp_tool_json(mt_call *c, json_t *structured)
{
	char *text = structured ? json_dumps(structured, SUP_HTTP_JSON_DUMP) : NULL;
	if (!text) {
		json_decref(structured);
		finish(c, NULL);
		return;
	}
	sup_mcp_tool_ok(c, text, strlen(text), structured);
	free(text);
}

/* The code and message as text only: a client validates structuredContent
 * against the tool's outputSchema also when isError is set (the MCP SDK's
 * does), so an error object there would fail the call instead of showing
 * the error. */
void sup_mcp_tool_fail(mt_call *c, const sbx_err *err)
{
	const char *code;
	int status = sup_http_status(c->tool ? c->tool->family : NULL, err->code ? err->code : -EIO, &code);
	const char *msg = err->msg[0] ? err->msg : code;
	json_t *e = sup_http_error_json(code, msg);
	const char *m = json_string_value(json_object_get(json_object_get(e, "error"), "message"));
	char *text = NULL;
	if (e && asprintf(&text, "%s (%d): %s", code, status, m ? m : code) < 0)
		text = NULL;
	json_t *r = text ? json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", text, "isError", 1)
			 : NULL;
	free(text);
	json_decref(e);
	finish(c, r);
}

int sup_mcp_tool_content(mt_call *c, bool need, sbx_err *err)
{
	json_t *text = json_object_get(c->body, "content"), *b64 = json_object_get(c->body, "content_b64");
	if ((text && b64) || (need && !text && !b64))
		return sbx_err_set(err, -EINVAL, "give %s of \"content\" (text) and \"content_b64\"",
				   need ? "one" : "at most one");
	if (!text && !b64)
		return 0;
	return sup_api_parse_bytes(text ? text : b64, "content", !text, &c->wdata, &c->wlen, err);
}

int sup_mcp_tool_send(mt_call *c, const char *aop, const char *ch, const sup_core_call_cbs *cbs, sbx_err *err)
{
	c->wch = ch;
	int rc = sup_core_call(c->x->core, c->id, aop, &c->pargs, cbs, c, &c->op, err);
	if (rc == 0 && c->op)
		sup_mcp_tool_pump(c);
	return rc;
}

void sup_mcp_tool_pump(void *ud)
{
	mt_call *c = ud;
	while (!c->wdone && c->op) {
		sbx_err e = { 0 };
		size_t left = c->wlen - c->woff;
		int n = sup_core_call_send(c->op, c->wch, c->wdata + c->woff, left, true, &e);
		if (n < 0 || (size_t)n == left) {
			c->wdone = n >= 0; /* n < 0: the stream is gone, on_done says why */
			c->woff += n > 0 ? (size_t)n : 0;
			return;
		}
		if (n == 0)
			return;
		c->woff += (size_t)n;
	}
}

/* ---- a call ---- */

void sup_mcp_tool_cancel(mt_call *c)
{
	if (c->op)
		sup_op_cancel(c->op);
	if (c->sop)
		sup_snaps_op_cancel(c->sop);
	sup_ctx_run_cancel(c->crun);
	c->op = NULL;
	c->sop = NULL;
	c->crun = NULL;
	sup_ctx_cell_free(&c->cell);
	c->finished = true;
	json_decref(c->args);
	json_decref(c->body);
	json_decref(c->desc);
	c->args = c->body = c->desc = NULL;
	sup_create_req_free(&c->create);
	sup_exec_spec_free(&c->spec);
	sbx_proto_args_destroy(&c->pargs);
	if (c->buf)
		evbuffer_free(c->buf);
	c->buf = NULL;
	free(c->wdata);
	c->wdata = NULL;
}

/* Every argument a property of the tool; the sandbox named the caller's;
 * the body the arguments that are not parameters. */
static int check_args(mt_call *c, size_t ti, sbx_err *err)
{
	const char *k;
	json_t *v;
	if (!json_is_object(c->args))
		return sbx_err_set(err, -EINVAL, "arguments: want an object");
	c->body = json_object();
	if (!c->body)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	json_object_foreach(c->args, k, v) {
		bool param = false;
		size_t i;
		json_t *n;
		if (!json_object_get(built.props[ti], k))
			return sbx_err_set(err, -EINVAL, "unknown argument \"%.64s\" (see the tool's inputSchema)", k);
		json_array_foreach(built.params[ti], i, n)
			param = param || strcmp(json_string_value(n), k) == 0;
		if (!param && json_object_set(c->body, k, v) < 0)
			return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	if (!json_object_get(built.props[ti], "id"))
		return 0;
	json_t *id = json_object_get(c->args, "id");
	if (!json_is_string(id) || json_string_length(id) == 0 || json_string_length(id) >= SUP_ID_MAX)
		return sbx_err_set(err, -EINVAL, "argument \"id\": want a sandbox id (create_sandbox answers one)");
	snprintf(c->id, sizeof(c->id), "%s", json_string_value(id));
	return sup_core_check_owner(c->x->core, c->who, c->id, err);
}

int sup_mcp_tool_call(mt_call *c, sup_mcp_ctx *x, const sup_tenant *who, const char *name,
		      json_t *args, void (*done)(mt_call *c, json_t *result))
{
	sbx_err err = { 0 };
	size_t ti = NTOOLS;
	for (size_t i = 0; i < NTOOLS; i++)
		if (strcmp(tools[i].name, name) == 0)
			ti = i;
	if (ti == NTOOLS || !sup_mcp_tools_list(&err))
		return ti == NTOOLS ? -ENOENT : err.code;
	memset(c, 0, sizeof(*c));
	c->x = x;
	c->who = who;
	c->tool = &tools[ti];
	c->done = done;
	c->args = args ? json_incref(args) : json_object();
	sbx_proto_args_init(&c->pargs);
	if (check_args(c, ti, &err) < 0 || c->tool->start(c, &err) < 0)
		sup_mcp_tool_fail(c, &err);
	return 0;
}
