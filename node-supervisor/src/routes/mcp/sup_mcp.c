/* MCP over HTTP: the routes (sup_mcp.h). The transport's requests are
 * checked here in the order the spec implies (Origin, Accept, the body, the
 * session, the version) and handed to the sessions' side (sup_mcp_sess.c);
 * its refusals are JSON-RPC error bodies, as MCP clients expect. The
 * servers' management answers with the API's JSON. */
#include "sup_mcp_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_api.h"

/* A JSON-RPC message in one POST, at most (a server's line bound). */
#define MQ_MAX_BODY SBX_MCP_DEFAULT_MAX_LINE
#define MQ_MAX_PUT (256u << 10)

/* The agent's answer may come after the client went: the request reaches
 * it through a ticket its release empties. */
typedef struct mq_ticket {
	mq *q;
} mq_ticket;

static void mq_release(void *state)
{
	mq *q = state;

	sup_mcp_sess_unlink(q);
	if (q->ticket)
		q->ticket->q = NULL;
	sup_stream_free(q->s);
	if (q->msg_ok)
		mcp_rpc_msg_free(&q->msg);
	sup_mcp_server_free(&q->server);
}

/* ---- parsers ---- */

static int parse_common(const sup_http_in *in, void *ctx, mq *q, mq_what what, sbx_err *err)
{
	q->x = ctx;
	q->what = what;
	snprintf(q->id, sizeof(q->id), "%s", in->id);
	if (in->pid) {
		if (!sbx_proto_mcp_name_ok(in->pid, strlen(in->pid)))
			return sbx_err_set(err, -EINVAL, "MCP server name \"%.64s\": 1..%u of A-Z a-z 0-9 . _ -",
					   in->pid, SBX_MCP_NAME_MAX);
		snprintf(q->name, sizeof(q->name), "%s", in->pid);
	}
	q->sid = sup_http_in_header(in, "Mcp-Session-Id");
	q->origin = sup_http_in_header(in, "Origin");
	q->accept = sup_http_in_header(in, "Accept");
	q->version = sup_http_in_header(in, "MCP-Protocol-Version");
	q->last_event = sup_http_in_header(in, "Last-Event-ID");
	return 0;
}

static int parse_post(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	mq *q = state;
	int rc = parse_common(in, ctx, q, MQ_POST, err);

	if (rc < 0)
		return rc;
	q->body = in->body;
	q->body_len = in->body_len;
	/* A body that is no message is answered by the act, as JSON-RPC. */
	q->msg_ok = mcp_rpc_parse(in->body, in->body_len, &q->msg, &q->rpc_code, &q->rpc_err) == 0;
	if (q->msg_ok && q->msg.kind == MCP_RPC_REQUEST && json_is_string(q->msg.id) &&
	    strncmp(json_string_value(q->msg.id), SBX_MCP_WARM_ID_PREFIX,
		    sizeof(SBX_MCP_WARM_ID_PREFIX) - 1) == 0) {
		mcp_rpc_msg_free(&q->msg);
		q->msg_ok = false;
		q->rpc_code = MCP_RPC_INVALID_REQUEST;
		sbx_err_set(&q->rpc_err, -EINVAL,
			    "request ids starting \"" SBX_MCP_WARM_ID_PREFIX "\" are the sandbox agent's");
	}
	return 0;
}

static int parse_get(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	return parse_common(in, ctx, state, MQ_GET, err);
}

static int parse_delete(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	return parse_common(in, ctx, state, MQ_DELETE, err);
}

static int parse_list(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	return parse_common(in, ctx, state, MQ_LIST, err);
}

static int parse_put(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	mq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	int rc = parse_common(in, ctx, q, MQ_PUT, err);

	if (rc == 0)
		rc = sup_http_in_json(in, NULL, &j, err);
	return rc < 0 ? rc : sup_api_parse_mcp_server(q->name, j, &q->server, err);
}

/* ---- the transport ---- */

/* Origin first (a browser's request never reaches a session), then the
 * session the request names (404 so the client starts over). */
static int tx_checks(mq *q, mx_sess **m)
{
	sbx_err e = { 0 };

	*m = NULL;
	if (mcp_tx_origin(q->x->origins, q->origin, &e) < 0) {
		sup_mcp_rpc_fail(q, 403, MCP_TX_ERROR, e.msg);
		return -1;
	}
	if (q->sid && !(*m = sup_mcp_sess_find(q))) {
		sup_mcp_rpc_fail(q, 404, MCP_TX_ERROR, "no such MCP session (it ended): initialize again");
		return -1;
	}
	if (q->sid && mcp_tx_version(q->version, &e) < 0) {
		sup_mcp_rpc_fail(q, 400, MCP_TX_ERROR, e.msg);
		return -1;
	}
	return 0;
}

static int act_post(sup_http_req *r, void *state, sbx_err *err)
{
	mq *q = state;
	sbx_err e = { 0 };
	mx_sess *m;
	int rc;

	q->r = r;
	if (tx_checks(q, &m) < 0)
		return 0;
	if (mcp_tx_post_accept(q->accept, &q->reply, &e) < 0) {
		sup_mcp_rpc_fail(q, 406, MCP_TX_ERROR, e.msg);
		return 0;
	}
	if (!q->msg_ok) {
		sup_mcp_rpc_fail(q, 400, q->rpc_code, q->rpc_err.msg);
		return 0;
	}
	if (mcp_tx_post_kind(&q->msg, m != NULL, &q->kind, q->key, &e) < 0) {
		sup_mcp_rpc_fail(q, 400, MCP_TX_ERROR, e.msg);
		return 0;
	}
	if (q->kind == MCP_TX_INIT) {
		rc = sup_mcp_sess_open(q, &m, err);
		if (rc < 0)
			return rc;
		sup_http_header(r, "Mcp-Session-Id", sup_mcp_sess_id(m));
	}
	sup_http_log_tag(r, " mcp %s %s", q->name, q->msg.method ? q->msg.method : "answer");
	rc = sup_mcp_sess_post(m, q, err);
	if (rc < 0 && q->kind == MCP_TX_INIT)
		sup_mcp_sess_end(m, err->msg);
	if (rc == -EINVAL) {
		sup_mcp_rpc_fail(q, 400, MCP_RPC_INVALID_REQUEST, err->msg);
		return 0;
	}
	return rc;
}

static int act_get(sup_http_req *r, void *state, sbx_err *err)
{
	mq *q = state;
	sbx_err e = { 0 };
	mx_sess *m;

	q->r = r;
	if (tx_checks(q, &m) < 0)
		return 0;
	if (mcp_tx_get_accept(q->accept, &e) < 0) {
		sup_mcp_rpc_fail(q, 406, MCP_TX_ERROR, e.msg);
	} else if (!m) {
		sup_mcp_rpc_fail(q, 400, MCP_TX_ERROR, "Mcp-Session-Id is required (initialize first)");
	} else {
		sup_http_log_tag(r, " mcp %s stream", q->name);
		sup_mcp_sess_get(m, q);
	}
	return 0;
}

/* ---- the servers ---- */

static json_t *status_json(const sbx_proto_mcp_status *st, unsigned http_sessions)
{
	json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "name", st->name,
			      "state", sbx_proto_mcp_state_name(st->state), "max_line", (json_int_t)st->max_line,
			      "spare_pid", (json_int_t)st->spare_pid, "sessions", (json_int_t)http_sessions,
			      "processes", (json_int_t)st->sessions, "sessions_opened", (json_int_t)st->opened,
			      "processes_started", (json_int_t)st->started, "restarts", (json_int_t)st->crashes,
			      "bad_output", (json_int_t)st->bad_output, "msgs_in", (json_int_t)st->msgs_in,
			      "msgs_out", (json_int_t)st->msgs_out);

	if (o && st->has_exit)
		json_object_set_new(o, "last_exit",
				    json_pack("{s:I, s:I}", "exit_code", (json_int_t)st->exit_code, "signal",
					      (json_int_t)st->exit_signal));
	/* The agent made it UTF-8; it quotes what the guest wrote. */
	if (o)
		json_object_set_new(o, "stderr_tail", json_string(st->stderr_tail));
	return o;
}

static void servers_done(int rc, const sbx_proto_mcp_status *st, size_t n, const sbx_err *err, void *ud)
{
	mq_ticket *t = ud;
	mq *q = t->q;
	json_t *a;

	free(t);
	if (!q)
		return;
	q->ticket = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	if (q->what == MQ_DELETE) {
		sup_http_json(q->r, 204, NULL);
		return;
	}
	if (q->what == MQ_PUT) {
		sup_http_json(q->r, 200, n ? status_json(&st[0], sup_mcp_sess_count(q->x, q->id, st[0].name)) : NULL);
		return;
	}
	a = json_array();
	for (size_t i = 0; a && i < n; i++)
		json_array_append_new(a, status_json(&st[i], sup_mcp_sess_count(q->x, q->id, st[i].name)));
	sup_http_json(q->r, 200, a ? json_pack("{s:o}", "servers", a) : NULL);
}

static mq_ticket *ticket(mq *q, sbx_err *err)
{
	q->ticket = calloc(1, sizeof(*q->ticket));
	if (!q->ticket)
		sbx_err_set(err, -ENOMEM, "out of memory");
	else
		q->ticket->q = q;
	return q->ticket;
}

static int ticket_failed(mq *q, int rc)
{
	if (rc < 0) {
		free(q->ticket);
		q->ticket = NULL;
	}
	return rc;
}

/* Add or replace: the sessions of a server replaced end with it. */
static int act_put(sup_http_req *r, void *state, sbx_err *err)
{
	mq *q = state;
	mq_ticket *t = ticket(q, err);

	q->r = r;
	sup_http_log_tag(r, " mcp %s", q->name);
	if (!t)
		return err->code;
	sup_mcp_sess_end_server(q->x, q->id, q->name);
	return ticket_failed(q, sup_core_mcp_configure(q->x->core, q->id, &q->server, servers_done, t, err));
}

static int act_list(sup_http_req *r, void *state, sbx_err *err)
{
	mq *q = state;
	mq_ticket *t = ticket(q, err);

	q->r = r;
	if (!t)
		return err->code;
	return ticket_failed(q, sup_core_mcp_list(q->x->core, q->id, servers_done, t, err));
}

/* With Mcp-Session-Id (what MCP clients send to end theirs): the session
 * ends and its server process is killed. Without: the server is removed. */
static int act_delete(sup_http_req *r, void *state, sbx_err *err)
{
	mq *q = state;
	mx_sess *m;

	q->r = r;
	sup_http_log_tag(r, " mcp %s%s", q->name, q->sid ? " session" : "");
	if (q->sid) {
		if (tx_checks(q, &m) == 0) {
			sup_mcp_sess_end(m, "the client ended the session");
			sup_http_json(r, 204, NULL);
		}
		return 0;
	}
	if (!ticket(q, err))
		return err->code;
	sup_mcp_sess_end_server(q->x, q->id, q->name);
	return ticket_failed(q, sup_core_mcp_remove(q->x->core, q->id, q->name, servers_done, q->ticket, err));
}

#define MCP "/v1/sandboxes/{id}/mcp"

static const sup_http_route routes[] = {
	{ "GET", MCP, "GET mcp", SUP_BODY_NONE, 0, parse_list, act_list },
	{ "POST", MCP "/{pid}", "POST mcp", SUP_BODY_BUFFERED, MQ_MAX_BODY, parse_post, act_post },
	{ "GET", MCP "/{pid}", "GET mcp stream", SUP_BODY_NONE, 0, parse_get, act_get },
	{ "DELETE", MCP "/{pid}", "DELETE mcp", SUP_BODY_NONE, 0, parse_delete, act_delete },
	{ "PUT", MCP "/{pid}", "PUT mcp", SUP_BODY_BUFFERED, MQ_MAX_PUT, parse_put, act_put },
};

const sup_http_family sup_mcp_family = {
	.name = "mcp",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(mq),
	.release = mq_release,
};
