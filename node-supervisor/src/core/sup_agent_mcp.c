/* sup_agent_mcp: the mcp.* operations typed on top of agent calls (see
 * sup_agent_mcp.h). */
#include "sup_agent_mcp.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "mcp_host/rpc.h"

static void strv_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

int sup_agent_mcp_encode_config(const sup_mcp_server *s, msgpack_sbuffer *sb, sbx_err *err)
{
	sbx_proto_mcp_config c = {
		.name = s->name,
		.argv = (const char *const *)s->argv,
		.cwd = s->cwd,
		.max_line = s->max_line,
	};
	char **env = calloc(s->env.n + 1, sizeof(*env));
	msgpack_packer pk;
	int rc = 0;

	if (!env)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < s->env.n && rc == 0; i++)
		if (asprintf(&env[i], "%s=%s", s->env.v[i].key, s->env.v[i].val) < 0) {
			env[i] = NULL;
			rc = sbx_err_set(err, -ENOMEM, "out of memory");
		}
	if (rc == 0) {
		c.env = (const char *const *)env;
		msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
		rc = sbx_proto_mcp_pack_config(&pk, &c, err);
	}
	strv_free(env);
	return rc;
}

/* ---- configure, remove, list ---- */

typedef enum { ANSWER_STATUS, ANSWER_LIST, ANSWER_NONE } answer_kind;

typedef struct answer_call {
	answer_kind kind;
	sup_agent_mcp_cb cb;
	void *ud;
} answer_call;

static void answer_data(sup_agent_call *call, const char *ch, size_t ch_len, const uint8_t *p, size_t n,
			size_t cost, void *ud)
{
	sup_agent_call_consumed(call, cost);
	sup_agent_blame(sup_agent_call_agent(call), "the agent sent data on an mcp.* answer");
}

static void answer_done(sup_agent_call *call, int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	answer_call *x = ud;
	sbx_proto_mcp_status st, *list = NULL;
	size_t n = 0;
	sbx_err e;

	sbx_err_clear(&e);
	if (rc == 0 && x->kind == ANSWER_STATUS) {
		rc = sbx_proto_mcp_parse_status(result, &st, &e);
		n = 1;
		list = &st;
	} else if (rc == 0 && x->kind == ANSWER_LIST) {
		rc = sbx_proto_mcp_parse_list(result, &list, &n, &e);
	}
	if (rc == -EPROTO && e.code) {
		sbx_err_wrap(&e, "the agent broke the protocol");
		sup_agent_blame(sup_agent_call_agent(call), "%s", e.msg);
		err = &e;
	}
	x->cb(rc, rc == 0 ? list : NULL, rc == 0 ? n : 0, rc == 0 ? NULL : err, x->ud);
	if (x->kind == ANSWER_LIST)
		free(list);
	free(x);
}

static const sup_agent_call_cbs answer_cbs = {
	.on_data = answer_data,
	.on_done = answer_done,
};

static int answer_start(sup_agent *a, const char *op, const msgpack_sbuffer *sb, answer_kind kind,
			sup_agent_mcp_cb cb, void *ud, sup_agent_call **out, sbx_err *err)
{
	answer_call *x = calloc(1, sizeof(*x));
	int rc;

	if (!x)
		return sbx_err_set(err, -ENOMEM, "%s: out of memory", op);
	x->kind = kind;
	x->cb = cb;
	x->ud = ud;
	rc = sup_agent_call_start(a, op, sb ? sb->data : NULL, sb ? sb->size : 0, SUP_AGENT_WAIT_ANSWER, 0,
				  &answer_cbs, x, out, err);
	if (rc < 0)
		free(x);
	return rc;
}

int sup_agent_mcp_configure(sup_agent *a, const sup_mcp_server *s, sup_agent_mcp_cb cb, void *ud,
			    sup_agent_call **out, sbx_err *err)
{
	msgpack_sbuffer sb;
	int rc;

	msgpack_sbuffer_init(&sb);
	rc = sup_agent_mcp_encode_config(s, &sb, err);
	if (rc == 0)
		rc = answer_start(a, SBX_OP_MCP_CONFIGURE, &sb, ANSWER_STATUS, cb, ud, out, err);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

int sup_agent_mcp_remove(sup_agent *a, const char *name, sup_agent_mcp_cb cb, void *ud, sup_agent_call **out,
			 sbx_err *err)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rc;

	if (!sbx_proto_mcp_name_ok(name, strlen(name)))
		return sbx_err_set(err, -EINVAL, "bad MCP server name");
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	sbx_proto_mcp_pack_name(&pk, name);
	rc = answer_start(a, SBX_OP_MCP_REMOVE, &sb, ANSWER_NONE, cb, ud, out, err);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

int sup_agent_mcp_list(sup_agent *a, sup_agent_mcp_cb cb, void *ud, sup_agent_call **out, sbx_err *err)
{
	return answer_start(a, SBX_OP_MCP_LIST, NULL, ANSWER_LIST, cb, ud, out, err);
}

/* ---- sessions ---- */

struct sup_mcp_session {
	sup_agent_call *call;
	const sup_mcp_session_cbs *cbs;
	void *ud;
	bool opened;        /* the agent's first event came */
	bool paused;
	size_t held;        /* cost kept back while paused */
	mcp_rpc_lines lines;
	char *out;          /* the message (with its newline) going out */
	size_t out_len, out_off;
	bool closing;       /* eof once out went */
	bool eof_sent;
	/* The owner may cancel from inside its callbacks: the free waits
	 * until the callback returned. */
	unsigned depth;
	bool dead;
};

static void session_free(sup_mcp_session *s)
{
	mcp_rpc_lines_free(&s->lines);
	free(s->out);
	free(s);
}

static int on_line(const char *line, size_t len, void *ud)
{
	sup_mcp_session *s = ud;

	s->cbs->on_message(s, line, len, s->ud);
	return s->dead ? -ECANCELED : 0;
}

static void sess_data(sup_agent_call *call, const char *ch, size_t ch_len, const uint8_t *p, size_t n,
		      size_t cost, void *ud)
{
	sup_mcp_session *s = ud;
	sbx_err e = { 0 };
	int rc;

	if (!s->opened || ch_len != strlen(SBX_CH_STDOUT) || memcmp(ch, SBX_CH_STDOUT, ch_len) != 0) {
		sup_agent_call_consumed(call, cost);
		sup_agent_blame(sup_agent_call_agent(call), "mcp.open: %s",
				s->opened ? "data on a channel other than stdout" : "data before the open event");
		return;
	}
	s->depth++;
	rc = mcp_rpc_lines_feed(&s->lines, (const char *)p, n, on_line, s, &e);
	s->depth--;
	if (s->dead) {
		session_free(s);
		return;
	}
	if (rc < 0) {
		sup_agent_call_consumed(call, cost);
		sup_agent_blame(sup_agent_call_agent(call), "mcp.open: %s", e.msg);
		return;
	}
	if (s->paused)
		s->held += cost;
	else
		sup_agent_call_consumed(call, cost);
}

static void sess_event(sup_agent_call *call, const msgpack_object *map, size_t cost, void *ud)
{
	sup_mcp_session *s = ud;
	int64_t pid;
	bool spare;
	sbx_err e = { 0 };

	sup_agent_call_consumed(call, cost);
	if (s->opened || sbx_proto_mcp_parse_opened(map, &pid, &spare, &e) < 0) {
		sup_agent_blame(sup_agent_call_agent(call), "mcp.open: %s",
				s->opened ? "a second open event" : e.msg);
		return;
	}
	s->opened = true;
	if (!s->cbs->on_opened)
		return;
	s->depth++;
	s->cbs->on_opened(s, pid, spare, s->ud);
	if (--s->depth == 0 && s->dead)
		session_free(s);
}

/* Push the pending message (then eof) within the agent's credit. */
static void pump(sup_mcp_session *s)
{
	sbx_err e;
	int rc;

	while (s->out) {
		rc = sup_agent_call_send(s->call, SBX_CH_STDIN, (const uint8_t *)s->out + s->out_off,
					 s->out_len - s->out_off, false, &e);
		if (rc <= 0)
			return; /* gone (on_done tells) or no credit (on_writable) */
		s->out_off += (size_t)rc;
		if (s->out_off == s->out_len) {
			free(s->out);
			s->out = NULL;
			if (!s->closing && s->cbs->on_writable) {
				s->cbs->on_writable(s, s->ud);
				if (s->dead)
					return;
			}
		}
	}
	if (s->closing && !s->eof_sent && sup_agent_call_send(s->call, SBX_CH_STDIN, NULL, 0, true, &e) >= 0)
		s->eof_sent = true;
}

static void sess_writable(sup_agent_call *call, void *ud)
{
	sup_mcp_session *s = ud;

	s->depth++;
	pump(s);
	if (--s->depth == 0 && s->dead)
		session_free(s);
}

static void sess_done(sup_agent_call *call, int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_mcp_session *s = ud;
	sup_exec_status st;
	sbx_err e;

	sbx_err_clear(&e);
	if (rc == 0) {
		rc = sup_agent_parse_exec_result(result, &st, &e);
		if (rc < 0) {
			sbx_err_wrap(&e, "the agent broke the protocol");
			sup_agent_blame(sup_agent_call_agent(call), "%s", e.msg);
			err = &e;
		}
	}
	s->call = NULL;
	s->cbs->on_done(s, rc, rc == 0 ? &st : NULL, rc == 0 ? NULL : err, s->ud);
	session_free(s);
}

static const sup_agent_call_cbs session_cbs = {
	.on_data = sess_data,
	.on_event = sess_event,
	.on_writable = sess_writable,
	.on_done = sess_done,
};

int sup_agent_mcp_open(sup_agent *a, const char *name, uint64_t idle_ms, size_t max_line,
		       const sup_mcp_session_cbs *cbs, void *ud, sup_mcp_session **out, sbx_err *err)
{
	sup_mcp_session *s;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	int rc;

	if (!sbx_proto_mcp_name_ok(name, strlen(name)))
		return sbx_err_set(err, -EINVAL, "bad MCP server name");
	s = calloc(1, sizeof(*s));
	if (!s)
		return sbx_err_set(err, -ENOMEM, "mcp.open: out of memory");
	s->cbs = cbs;
	s->ud = ud;
	mcp_rpc_lines_init(&s->lines, max_line && max_line < SBX_MCP_MAX_MAX_LINE ? max_line : SBX_MCP_MAX_MAX_LINE);
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	sbx_proto_mcp_pack_open(&pk, name, idle_ms);
	/* A session may be quiet as long as its client likes; the agent's
	 * idle limit ends it, and the ping watches the agent meanwhile. */
	rc = sup_agent_call_start(a, SBX_OP_MCP_OPEN, sb.data, sb.size, SUP_AGENT_WAIT_QUIET, 0, &session_cbs, s,
				  &s->call, err);
	msgpack_sbuffer_destroy(&sb);
	if (rc < 0) {
		session_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

int sup_agent_mcp_send(sup_mcp_session *s, const char *msg, size_t len, sbx_err *err)
{
	if (!s->call)
		return sbx_err_set(err, -EPIPE, "the MCP session is over");
	if (s->closing || memchr(msg, '\n', len))
		return sbx_err_set(err, -EINVAL, s->closing ? "the MCP session is closing" : "a message holds a newline");
	if (s->out)
		return sbx_err_set(err, -EBUSY, "the last message has not gone yet");
	s->out = malloc(len + 1);
	if (!s->out)
		return sbx_err_set(err, -ENOMEM, "out of memory for a message");
	memcpy(s->out, msg, len);
	s->out[len] = '\n';
	s->out_len = len + 1;
	s->out_off = 0;
	s->depth++;
	pump(s);
	if (--s->depth == 0 && s->dead) {
		session_free(s);
		return sbx_err_set(err, -ECANCELED, "the MCP session was cancelled");
	}
	return 0;
}

void sup_agent_mcp_pause(sup_mcp_session *s)
{
	s->paused = true;
}

void sup_agent_mcp_resume(sup_mcp_session *s)
{
	s->paused = false;
	if (s->held && s->call)
		sup_agent_call_consumed(s->call, s->held);
	s->held = 0;
}

void sup_agent_mcp_close(sup_mcp_session *s)
{
	s->closing = true;
	if (s->call)
		pump(s);
}

void sup_agent_mcp_cancel(sup_mcp_session *s)
{
	if (s->call)
		sup_agent_call_cancel(s->call);
	s->call = NULL;
	if (s->depth) {
		s->dead = true;
		return;
	}
	session_free(s);
}
