/* /v1/mcp: sbx's own operations as an MCP server (sup_mcp.h), on the
 * transport the hosted servers use (mcp-host: the JSON-RPC checks, the
 * Origin allowlist, Accept, MCP-Protocol-Version, what a POST asks, the
 * session table). A session belongs to the tenant that initialized it: a
 * request with another tenant's session id is answered as for an unknown
 * one (404). Each POSTed request is answered on its own: as JSON, or as an
 * SSE stream of one event (with keepalives while a tool runs) when the
 * client takes text/event-stream. The server sends nothing unasked, so
 * GET (a server-to-client stream) is 405 as the spec allows.
 * A tool's errors are its result (isError); JSON-RPC errors are for
 * messages that are not one, unknown methods and tools. */
#include "sbx/clock.h"
#include "sup_mcp_int.h"
#include "sup_mcp_tools.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sup_log.h"

/* Sessions open at once on the node, and of one tenant (so that one
 * tenant cannot fill the node's table and shut the others out); a body
 * (write_file's content). */
#define MA_MAX_SESSIONS 1024u
#define MA_TENANT_SESSIONS 64u
#define MA_MAX_BODY (16u << 20)
#define MA_TICK_MS 1000
#define MA_KEEPALIVE_S 15u

struct sup_mcp_own {
	mcp_session_table *t;
	struct event *tick;
};

typedef struct ma_req {
	sup_http_req *r;
	sup_mcp_ctx *x;
	const sup_tenant *who;
	const char *sid, *origin, *accept, *version;
	mcp_rpc_msg msg;
	bool msg_ok;
	int rpc_code;
	sbx_err rpc_err;
	mcp_tx_post kind;
	mcp_tx_reply reply;
	char key[MCP_SESSION_KEY_MAX];
	mcp_session *sess; /* the session named, held while the request runs
			    * (found again by sid at the end: it may be gone) */
	sup_stream *s;
	bool calling;
	mt_call call;
} ma_req;

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct sup_mcp_own *o = arg;
	(void)fd;
	(void)what;
	mcp_session_expire(o->t, sbx_now_ms(), NULL, NULL);
}

static struct sup_mcp_own *own(sup_mcp_ctx *x, struct event_base *base, sbx_err *err)
{
	mcp_session_opts so = { .max_sessions = MA_MAX_SESSIONS, .idle_ms = x->idle_ms,
				.replay_bytes = 1, .replay_events = 1 };
	struct timeval tv = { MA_TICK_MS / 1000, 0 };
	if (x->own)
		return x->own;
	struct sup_mcp_own *o = calloc(1, sizeof(*o));
	if (!o || mcp_session_table_new(&so, &o->t, err) < 0) {
		free(o);
		if (!err->code)
			sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	if (x->idle_ms && (!(o->tick = event_new(base, -1, EV_PERSIST, on_tick, o)) || event_add(o->tick, &tv) < 0)) {
		if (o->tick)
			event_free(o->tick);
		mcp_session_table_free(o->t, NULL, NULL);
		free(o);
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	x->own = o;
	return o;
}

void sup_mcp_own_free(sup_mcp_ctx *x)
{
	sup_mcp_tools_free();
	if (!x->own)
		return;
	if (x->own->tick)
		event_free(x->own->tick);
	mcp_session_table_free(x->own->t, NULL, NULL);
	free(x->own);
	x->own = NULL;
}

int sup_mcp_api_check(sbx_err *err)
{
	return sup_mcp_tools_list(err) ? 0 : err->code;
}

static void ma_release(void *state)
{
	ma_req *q = state;
	if (q->calling)
		sup_mcp_tool_cancel(&q->call);
	mcp_session *s = q->sess && q->x->own ? mcp_session_find(q->x->own->t, q->sid, strlen(q->sid)) : NULL;
	if (s)
		mcp_session_release(s, sbx_now_ms());
	sup_stream_free(q->s);
	if (q->msg_ok)
		mcp_rpc_msg_free(&q->msg);
}

/* ---- answers ---- */

/* A JSON-RPC error: the transport's (status >= 400) or the method's (200). */
static void rpc_fail(ma_req *q, int status, int code, const char *msg)
{
	sup_mcp_rpc_error(q->r, q->msg_ok ? q->msg.id : NULL, status, code, msg);
}

/* The answer to the request q carries: {"jsonrpc","id","result"} (result
 * reference taken). */
static void answer(ma_req *q, json_t *result)
{
	json_t *m = result ? json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", q->msg.id, "result", result) : NULL;
	char *body = m ? json_dumps(m, SUP_HTTP_JSON_DUMP) : NULL;
	json_decref(m);
	if (!body) {
		rpc_fail(q, 500, MCP_RPC_INTERNAL_ERROR, "out of memory for the answer");
		return;
	}
	if (q->s) {
		sup_stream *s = q->s;
		q->s = NULL;
		sup_stream_sse_raw(s, NULL, body, strlen(body), 0);
		sup_stream_end(s);
	} else {
		sup_mcp_reply_raw(q->r, 200, body, strlen(body));
	}
	free(body);
}

/* A method's error (an unknown tool): on the stream if one is open. */
static void method_fail(ma_req *q, int code, const char *msg)
{
	size_t len = 0;
	char *body;
	if (!q->s) {
		rpc_fail(q, 200, code, msg);
		return;
	}
	body = mcp_rpc_error_body(q->msg.id, code, msg, &len);
	sup_stream *s = q->s;
	q->s = NULL;
	if (body)
		sup_stream_sse_raw(s, NULL, body, len, 0);
	sup_stream_end(s);
	free(body);
}

/* ---- the methods ---- */

static void tool_done(mt_call *c, json_t *result)
{
	ma_req *q = (ma_req *)((char *)c - offsetof(ma_req, call));
	/* The error's message: a timed-out run_command's result carries it,
	 * any other error is its text. */
	const char *why = json_string_value(
		json_object_get(json_object_get(json_object_get(result, "structuredContent"), "error"), "message"));
	if (!why)
		why = json_string_value(json_object_get(json_array_get(json_object_get(result, "content"), 0), "text"));
	if (json_is_true(json_object_get(result, "isError")))
		sup_http_note(q->r, "%.200s", why ? why : "tool error");
	answer(q, result);
}

static void tools_call(ma_req *q)
{
	json_t *params = json_object_get(q->msg.root, "params");
	const char *name = json_string_value(json_object_get(params, "name"));
	json_t *args = json_object_get(params, "arguments");
	char why[160];
	if (!name || (args && !json_is_object(args) && !json_is_null(args))) {
		method_fail(q, MCP_RPC_INVALID_PARAMS, "tools/call: want params {\"name\", \"arguments\": {...}}");
		return;
	}
	sup_http_log_tag(q->r, " tool %.64s", name);
	/* Long calls: the stream's keepalives tell proxies it is alive. */
	if (q->reply == MCP_TX_SSE && !q->s) {
		q->s = sup_stream_start(q->r, SUP_STREAM_SSE, NULL, NULL);
		if (!q->s) {
			rpc_fail(q, 500, MCP_RPC_INTERNAL_ERROR, "out of memory");
			return;
		}
		(void)sup_stream_keepalive(q->s, MA_KEEPALIVE_S);
	}
	q->calling = true;
	int rc = sup_mcp_tool_call(&q->call, q->x, q->who, name, json_is_object(args) ? args : NULL, tool_done);
	if (rc == -ENOENT) {
		q->calling = false;
		snprintf(why, sizeof(why), "unknown tool \"%.64s\" (tools/list names them)", name);
		method_fail(q, MCP_RPC_INVALID_PARAMS, why);
	} else if (rc < 0) {
		q->calling = false;
		method_fail(q, MCP_RPC_INTERNAL_ERROR, "the tools could not be built from openapi.json");
	}
}

typedef struct tenant_count {
	const char *name;
	unsigned n;
} tenant_count;

static void count_tenant(const mcp_session *s, void *ud)
{
	tenant_count *c = ud;
	if (strcmp(mcp_session_server(s), c->name) == 0)
		c->n++;
}

static void initialize(ma_req *q, const char *asked)
{
	const char *v = asked && mcp_rpc_version_supported(asked) ? asked : MCP_RPC_VERSION_LATEST;
	sbx_err e = { 0 };
	struct sup_mcp_own *o = own(q->x, sup_http_base(q->r), &e);
	mcp_session *s = NULL;
	tenant_count held = { q->who ? q->who->name : "", 0 };
	if (o)
		mcp_session_each(o->t, count_tenant, &held);
	if (o && held.n >= MA_TENANT_SESSIONS) {
		sbx_err_set(&e, -EDQUOT,
			    "tenant %.64s holds %u MCP sessions on this node, its most: end one "
			    "(DELETE /v1/mcp) or let it idle out", held.name, held.n);
		sup_http_fail(q->r, &e);
		return;
	}
	if (!o || mcp_session_open(o->t, held.name, sbx_now_ms(), &s, &e) < 0) {
		if (e.code == -EBUSY)
			e.code = -EAGAIN;
		sup_http_fail(q->r, &e);
		return;
	}
	mcp_session_set_version(s, v);
	sup_http_header(q->r, "Mcp-Session-Id", mcp_session_id(s));
	answer(q, json_pack("{s:s, s:{s:{s:b}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", v, "capabilities",
			    "tools", "listChanged", 0, "serverInfo", "name", "sbx", "title", "sbx sandboxes",
			    "version", "1", "instructions",
			    "Sandboxes are isolated Linux containers for running untrusted code. Make one with "
			    "create_sandbox, run commands with run_command (or start_process for long ones), move "
			    "files with read_file / write_file, and delete_sandbox when done."));
}

static void dispatch(ma_req *q)
{
	const char *m = q->msg.method ? q->msg.method : "";
	sbx_err e = { 0 };
	const json_t *list;
	char why[160];
	if (strcmp(m, "ping") == 0) {
		answer(q, json_object());
	} else if (strcmp(m, "tools/list") == 0) {
		if ((list = sup_mcp_tools_list(&e)))
			answer(q, json_deep_copy(list));
		else
			method_fail(q, MCP_RPC_INTERNAL_ERROR, e.msg);
	} else if (strcmp(m, "tools/call") == 0) {
		tools_call(q);
	} else {
		snprintf(why, sizeof(why), "method \"%.64s\" is not served (this server has tools only)", m);
		method_fail(q, MCP_RPC_METHOD_NOT_FOUND, why);
	}
}

/* ---- the routes ---- */

static void parse_common(const sup_http_in *in, void *ctx, ma_req *q)
{
	q->x = ctx;
	q->who = in->who;
	q->sid = sup_http_in_header(in, "Mcp-Session-Id");
	q->origin = sup_http_in_header(in, "Origin");
	q->accept = sup_http_in_header(in, "Accept");
	q->version = sup_http_in_header(in, "MCP-Protocol-Version");
}

static int parse_post(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	ma_req *q = state;
	parse_common(in, ctx, q);
	q->msg_ok = mcp_rpc_parse(in->body, in->body_len, &q->msg, &q->rpc_code, &q->rpc_err) == 0;
	return 0;
}

static int parse_delete(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	parse_common(in, ctx, state);
	return 0;
}

/* Origin (a browser's request reaches no session), then the session named
 * (the caller's, else 404: start over), then the protocol version. */
static int tx_checks(ma_req *q)
{
	sbx_err e = { 0 };
	mcp_session *s = NULL;
	if (mcp_tx_origin(q->x->origins, q->origin, &e) < 0) {
		rpc_fail(q, 403, MCP_TX_ERROR, e.msg);
		return -1;
	}
	if (q->sid && q->x->own)
		s = mcp_session_find(q->x->own->t, q->sid, strlen(q->sid));
	if (q->sid && (!s || !q->who || strcmp(mcp_session_server(s), q->who->name) != 0)) {
		rpc_fail(q, 404, MCP_TX_ERROR, "no such MCP session (it ended): initialize again");
		return -1;
	}
	if (q->sid && mcp_tx_version(q->version, &e) < 0) {
		rpc_fail(q, 400, MCP_TX_ERROR, e.msg);
		return -1;
	}
	if (s) {
		q->sess = s;
		mcp_session_hold(s, sbx_now_ms());
	}
	return 0;
}

static int act_post(sup_http_req *r, void *state, sbx_err *err)
{
	ma_req *q = state;
	sbx_err e = { 0 };
	const char *asked = NULL;
	q->r = r;
	if (tx_checks(q) < 0)
		return 0;
	if (mcp_tx_post_accept(q->accept, &q->reply, &e) < 0) {
		rpc_fail(q, 406, MCP_TX_ERROR, e.msg);
		return 0;
	}
	if (!q->msg_ok) {
		rpc_fail(q, 400, q->rpc_code, q->rpc_err.msg);
		return 0;
	}
	if (mcp_tx_post_kind(&q->msg, q->sess != NULL, &q->kind, q->key, &e) < 0) {
		rpc_fail(q, 400, MCP_TX_ERROR, e.msg);
		return 0;
	}
	sup_http_log_tag(r, " mcp %s", q->msg.method ? q->msg.method : "answer");
	if (q->sess)
		mcp_session_count(q->sess, true, sup_http_input(r)->body_len, sbx_now_ms());
	if (q->kind == MCP_TX_PASS || q->kind == MCP_TX_CANCEL) {
		/* Nothing is asked of us (a cancelled call ends with its request). */
		sup_http_json(r, 202, NULL);
	} else if (q->kind == MCP_TX_INIT) {
		mcp_rpc_is_initialize(&q->msg, &asked);
		initialize(q, asked);
	} else {
		dispatch(q);
	}
	return 0;
}

static int act_delete(sup_http_req *r, void *state, sbx_err *err)
{
	ma_req *q = state;
	q->r = r;
	if (!q->sid) {
		rpc_fail(q, 400, MCP_TX_ERROR, "Mcp-Session-Id is required");
		return 0;
	}
	if (tx_checks(q) < 0)
		return 0;
	mcp_session_release(q->sess, sbx_now_ms());
	mcp_session_close(q->x->own->t, q->sess);
	q->sess = NULL;
	sup_http_log_tag(r, " mcp session ended");
	sup_http_json(r, 204, NULL);
	return 0;
}

static const sup_http_route routes[] = {
	{ "POST", "/v1/mcp", "POST v1 mcp", SUP_BODY_BUFFERED, MA_MAX_BODY, parse_post, act_post },
	{ "DELETE", "/v1/mcp", "DELETE v1 mcp", SUP_BODY_NONE, 0, parse_delete, act_delete },
};

const sup_http_family sup_mcp_api_family = {
	.name = "mcp",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(ma_req),
	.release = ma_release,
};
