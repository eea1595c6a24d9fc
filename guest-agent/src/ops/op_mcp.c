/* mcp.configure, mcp.remove, mcp.list (answered at once) and mcp.open: one
 * MCP session on a stream.
 *
 * The binding between a stream and a server process (mcp_proc.c), as exec's
 * between a stream and a command: the requester's stdin DATA goes to the
 * process with credit returned only as bytes reach the pipe; the process's
 * checked lines go out as stdout DATA within the requester's credit (none
 * left: the process is not read, it blocks). The first frame is an event
 * with the process's pid. The session ends with END (the requester sent
 * stdin eof and the process exited), or ERR: cancelled (the requester's
 * cancel), timeout (no message either way for idle_ms), bad_output /
 * too_large (a bad line), crashed (the process ended while the session was
 * open: its status and last stderr lines in the message), not_found (the
 * server was removed or replaced). Every end but END kills the tree. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <event2/event.h>

#include "sbx/proto_mcp.h"
#include "log.h"
#include "mcp_server.h"
#include "ops.h"
#include "op_util.h"
#include "session.h"

typedef struct mcp_op {
	agent_op op;
	agent_mcp_link link;
	agent_mcp_server *srv;
	agent_mcp_proc *mp;      /* NULL once it finished */
	struct event *idle_ev;
	uint64_t idle_ms;
	bool opened;             /* the pid event went out */
	bool spare;              /* the process was the server's spare */
	bool stdin_eof;          /* the requester ended the session's input */
} mcp_op;

static sbx_proto_conn *conn_of(mcp_op *m)
{
	return agent_session_conn(m->op.session);
}

static void touch(mcp_op *m)
{
	struct timeval tv = { (time_t)(m->idle_ms / 1000), (suseconds_t)(m->idle_ms % 1000) * 1000 };

	if (m->idle_ms)
		evtimer_add(m->idle_ev, &tv);
}

static void op_free(mcp_op *m)
{
	if (m->idle_ev)
		event_free(m->idle_ev);
	free(m);
}

/* End the stream with an error; the process's tree is killed. */
static void mcp_fail(mcp_op *m, sbx_proto_code code, const char *msg)
{
	agent_session *s = m->op.session;
	sbx_err err = { 0 };

	agent_session_detach(s, &m->op);
	if (m->mp)
		agent_mcp_proc_detach(m->mp);
	if (sbx_proto_conn_fail(agent_session_conn(s), m->op.id, code, msg, &err) < 0)
		agent_log_debug("mcp.open: answer: %s", err.msg);
	op_free(m);
}

/* ---- process -> stream ---- */

static void send_opened(mcp_op *m)
{
	sbx_err err = { 0 };
	msgpack_sbuffer buf;
	msgpack_packer pk;

	if (m->opened || !m->mp || agent_mcp_proc_pid(m->mp) == 0)
		return;
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	sbx_proto_mcp_pack_opened(&pk, agent_mcp_proc_pid(m->mp), m->spare);
	m->opened = sbx_proto_conn_send_event(conn_of(m), m->op.id, buf.data, buf.size, &err) == 0;
	if (!m->opened)
		agent_log_debug("mcp.open: event: %s", err.msg);
	msgpack_sbuffer_destroy(&buf);
}

static uint64_t count_lines(const uint8_t *p, size_t n)
{
	uint64_t k = 0;

	for (const uint8_t *end = p + n; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++)
		k++;
	return k;
}

/* Pass on the lines waiting, as far as credit goes. */
static void flush(mcp_op *m)
{
	sbx_proto_conn *c = conn_of(m);
	sbx_err err = { 0 };
	const uint8_t *p;
	size_t n, room;

	send_opened(m);
	if (!m->opened)
		return;
	while (m->mp && (n = agent_mcp_proc_pending(m->mp, &p)) > 0) {
		room = sbx_proto_conn_data_room(c, m->op.id);
		if (room == 0)
			return;
		if (n > room)
			n = room;
		if (sbx_proto_conn_send_data(c, m->op.id, SBX_CH_STDOUT, p, n, false, &err) < 0) {
			agent_log_warn("mcp.open: send: %s", err.msg);
			return;
		}
		touch(m);
		agent_mcp_count(m->srv, 0, count_lines(p, n));
		/* May end the process's part (finished comes from the loop). */
		agent_mcp_proc_taken(m->mp, n);
	}
}

static void own_started(void *ud, pid_t pid)
{
	flush(ud);
}

static void own_lines(void *ud)
{
	flush(ud);
}

static void own_stdin_done(void *ud, size_t n)
{
	mcp_op *m = ud;

	sbx_proto_conn_consumed(conn_of(m), m->op.id, n);
}

static void own_bad(void *ud, sbx_proto_code code, const char *msg)
{
	mcp_op *m = ud;

	agent_mcp_session_end(m->srv, &m->link, false, true, NULL, NULL);
	mcp_fail(m, code, msg);
}

static void own_finished(void *ud, const agent_proc_result *r, const char *tail)
{
	mcp_op *m = ud;
	agent_session *s = m->op.session;
	sbx_err err = { 0 };
	msgpack_sbuffer buf;
	msgpack_packer pk;
	char msg[SBX_MCP_STDERR_TAIL + 128];
	int len;

	m->mp = NULL;
	/* Asked to end (stdin eof) and then ended: the session's normal end. */
	if (m->stdin_eof) {
		agent_mcp_session_end(m->srv, &m->link, false, false, r, tail);
		msgpack_sbuffer_init(&buf);
		msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
		agent_op_pack_result(&pk, r, 0);
		agent_session_detach(s, &m->op);
		if (sbx_proto_conn_end(agent_session_conn(s), m->op.id, buf.data, buf.size, &err) < 0)
			agent_log_warn("mcp.open: send result: %s", err.msg);
		msgpack_sbuffer_destroy(&buf);
		op_free(m);
		return;
	}
	agent_mcp_session_end(m->srv, &m->link, true, false, r, tail);
	if (WIFEXITED(r->status))
		len = snprintf(msg, sizeof(msg), "the MCP server exited with status %d", WEXITSTATUS(r->status));
	else
		len = snprintf(msg, sizeof(msg), "the MCP server was killed by signal %d", WTERMSIG(r->status));
	if (*tail && len > 0 && (size_t)len < sizeof(msg))
		snprintf(msg + len, sizeof(msg) - (size_t)len, "; its last stderr lines:\n%s", tail);
	mcp_fail(m, SBX_PROTO_E_CRASHED, msg);
}

static const agent_mcp_proc_owner session_owner = {
	.started = own_started,
	.lines = own_lines,
	.stdin_done = own_stdin_done,
	.bad_output = own_bad,
	.finished = own_finished,
};

/* ---- stream -> process ---- */

static void mcp_data(mcp_op *m, const sbx_proto_frame *f)
{
	sbx_proto_conn *c = conn_of(m);
	sbx_err err = { 0 };
	int ret;

	if (f->ch_len != strlen(SBX_CH_STDIN) || memcmp(f->ch, SBX_CH_STDIN, f->ch_len) != 0 || m->stdin_eof) {
		agent_mcp_session_end(m->srv, &m->link, false, false, NULL, NULL);
		mcp_fail(m, SBX_PROTO_E_BAD_REQUEST,
			 m->stdin_eof ? "mcp.open: data after eof" : "mcp.open: data only on channel stdin");
		return;
	}
	sbx_proto_conn_consumed(c, m->op.id, f->body_len - f->data_len);
	agent_mcp_count(m->srv, count_lines(f->data, f->data_len), 0);
	touch(m);
	if (f->data_len && m->mp) {
		ret = agent_mcp_proc_write(m->mp, f->data, f->data_len, &err);
		if (ret < 0) {
			agent_mcp_session_end(m->srv, &m->link, false, false, NULL, NULL);
			mcp_fail(m, ret == -ENOBUFS ? SBX_PROTO_E_FLOW_CONTROL : SBX_PROTO_E_BAD_REQUEST, err.msg);
			return;
		}
	} else if (f->data_len) {
		sbx_proto_conn_consumed(c, m->op.id, f->data_len);
	}
	if (f->eof) {
		m->stdin_eof = true;
		if (m->mp)
			agent_mcp_proc_close_stdin(m->mp);
	}
}

static void mcp_frame(agent_op *op, const sbx_proto_frame *f)
{
	mcp_op *m = (mcp_op *)op;

	if (f->kind == SBX_PROTO_DATA) {
		mcp_data(m, f);
	} else if (f->kind == SBX_PROTO_CANCEL) {
		agent_mcp_session_end(m->srv, &m->link, false, false, NULL, NULL);
		mcp_fail(m, SBX_PROTO_E_CANCELLED, "cancelled");
	}
}

static void mcp_writable(agent_op *op)
{
	flush((mcp_op *)op);
}

static void mcp_abort(agent_op *op)
{
	mcp_op *m = (mcp_op *)op;

	agent_mcp_session_end(m->srv, &m->link, false, false, NULL, NULL);
	if (m->mp)
		agent_mcp_proc_detach(m->mp);
	op_free(m);
}

static const agent_op_vtbl mcp_vtbl = {
	.frame = mcp_frame,
	.writable = mcp_writable,
	.abort = mcp_abort,
};

static void idle_cb(evutil_socket_t fd, short what, void *ud)
{
	mcp_op *m = ud;
	char msg[96];

	snprintf(msg, sizeof(msg), "mcp.open: no message either way for %llu ms", (unsigned long long)m->idle_ms);
	agent_mcp_session_end(m->srv, &m->link, false, false, NULL, NULL);
	mcp_fail(m, SBX_PROTO_E_TIMEOUT, msg);
}

/* The server was removed or replaced under the session. */
static void link_end(agent_mcp_link *l, const char *why)
{
	mcp_op *m = (mcp_op *)((char *)l - offsetof(mcp_op, link));

	mcp_fail(m, SBX_PROTO_E_NOT_FOUND, why);
}

void agent_op_mcp_open(agent_session *s, uint64_t id, const msgpack_object *args)
{
	sbx_proto_conn *c = agent_session_conn(s);
	sbx_err err = { 0 };
	const char *name;
	size_t len;
	bool spare = false;
	mcp_op *m;
	int ret;

	m = calloc(1, sizeof(*m));
	if (!m) {
		sbx_proto_conn_fail(c, id, SBX_PROTO_E_INTERNAL, "mcp.open: out of memory", NULL);
		return;
	}
	ret = sbx_proto_mcp_parse_open(args, &name, &len, &m->idle_ms, &err);
	if (ret == 0) {
		m->idle_ev = evtimer_new(agent_session_ctx(s)->base, idle_cb, m);
		if (!m->idle_ev)
			ret = sbx_err_set(&err, -ENOMEM, "mcp.open: event");
	}
	if (ret == 0) {
		m->op.vt = &mcp_vtbl;
		m->op.id = id;
		m->op.session = s;
		m->link.end = link_end;
		ret = agent_mcp_take(name, len, &session_owner, m, &m->link, &m->srv, &m->mp, &spare, &err);
	}
	if (ret < 0) {
		sbx_proto_conn_fail(c, id,
				    ret == -EBUSY ? SBX_PROTO_E_TOO_MANY_STREAMS
				    : ret == -EINVAL || ret == -ENOENT || ret == -ENOMEM ? sbx_proto_code_from_errno(ret)
				    : agent_op_start_code(ret),
				    err.msg, NULL);
		op_free(m);
		return;
	}
	agent_session_attach(s, &m->op);
	touch(m);
	m->spare = spare;
	flush(m);
}

/* ---- the short ones ---- */

static void answer(agent_session *s, uint64_t id, const msgpack_sbuffer *buf)
{
	sbx_err err = { 0 };

	if (sbx_proto_conn_end(agent_session_conn(s), id, buf->data, buf->size, &err) < 0)
		agent_log_warn("mcp: answer: %s", err.msg);
}

static void refuse(agent_session *s, uint64_t id, int ret, const sbx_err *err)
{
	sbx_proto_code code = ret == -ENOSPC ? SBX_PROTO_E_NO_SPACE : sbx_proto_code_from_errno(ret);

	sbx_proto_conn_fail(agent_session_conn(s), id, code, err->msg, NULL);
}

void agent_op_mcp_configure(agent_session *s, uint64_t id, const msgpack_object *args)
{
	sbx_proto_mcp_status st;
	sbx_err err = { 0 };
	msgpack_sbuffer buf;
	msgpack_packer pk;
	int ret = agent_mcp_configure(agent_session_ctx(s), args, &st, &err);

	if (ret < 0) {
		refuse(s, id, ret, &err);
		return;
	}
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	sbx_proto_mcp_pack_status(&pk, &st);
	answer(s, id, &buf);
	msgpack_sbuffer_destroy(&buf);
}

void agent_op_mcp_remove(agent_session *s, uint64_t id, const msgpack_object *args)
{
	sbx_err err = { 0 };
	const char *name;
	size_t len;
	int ret = sbx_proto_mcp_parse_name(args, &name, &len, &err);

	if (ret == 0)
		ret = agent_mcp_remove(name, len, &err);
	if (ret < 0) {
		refuse(s, id, ret, &err);
		return;
	}
	sbx_proto_conn_end(agent_session_conn(s), id, NULL, 0, NULL);
}

void agent_op_mcp_list(agent_session *s, uint64_t id, const msgpack_object *args)
{
	sbx_proto_mcp_status *sts = calloc(SBX_MCP_MAX_SERVERS, sizeof(*sts));
	msgpack_sbuffer buf;
	msgpack_packer pk;
	size_t n;

	if (!sts) {
		sbx_proto_conn_fail(agent_session_conn(s), id, SBX_PROTO_E_INTERNAL, "mcp.list: out of memory", NULL);
		return;
	}
	n = agent_mcp_list(sts, SBX_MCP_MAX_SERVERS);
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	sbx_proto_mcp_pack_list(&pk, sts, n);
	answer(s, id, &buf);
	msgpack_sbuffer_destroy(&buf);
	free(sts);
}
