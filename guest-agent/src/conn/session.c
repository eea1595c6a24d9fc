#include "session.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"

struct agent_session {
	agent_session *prev, *next;
	agent_ctx *ctx;
	sbx_proto_conn *conn;
	struct event *close_ev; /* deferred teardown after on_close */
	agent_op *ops;
	bool closed;
};

static const char *const caps[] = {
	"exec", "exec.stdin", "exec.signal", "exec.pty", "exec.user", "exec.rlimits", "exec.rusage",
	"exec.tree_kill", "proc", "file", "fs", "fs.watch", "mcp", "port", "reset",
};

static agent_session *sessions;
static size_t nsessions;

const char *const *agent_session_caps(size_t *n)
{
	*n = sizeof(caps) / sizeof(caps[0]);
	return caps;
}

agent_ctx *agent_session_ctx(const agent_session *s)
{
	return s->ctx;
}

sbx_proto_conn *agent_session_conn(const agent_session *s)
{
	return s->conn;
}

void agent_session_attach(agent_session *s, agent_op *op)
{
	op->session = s;
	op->prev = NULL;
	op->next = s->ops;
	if (s->ops)
		s->ops->prev = op;
	s->ops = op;
	sbx_proto_conn_set_stream_data(s->conn, op->id, op);
}

void agent_session_detach(agent_session *s, agent_op *op)
{
	if (op->prev)
		op->prev->next = op->next;
	else
		s->ops = op->next;
	if (op->next)
		op->next->prev = op->prev;
	op->prev = op->next = NULL;
	sbx_proto_conn_set_stream_data(s->conn, op->id, NULL);
}

static void fail(agent_session *s, uint64_t id, sbx_proto_code code, const char *msg)
{
	sbx_err err = { 0 };

	if (sbx_proto_conn_fail(s->conn, id, code, msg, &err) < 0)
		agent_log_debug("answer stream %llu: %s", (unsigned long long)id, err.msg);
}

static void handle_req(agent_session *s, const sbx_proto_frame *f)
{
	char msg[160];

	if (s->ctx->shutting_down) {
		fail(s, f->id, SBX_PROTO_E_SHUTTING_DOWN, "the agent is shutting down");
		return;
	}
	if (s->ctx->resetting) {
		fail(s, f->id, SBX_PROTO_E_SHUTTING_DOWN, "the sandbox is being reset");
		return;
	}
	for (size_t i = 0; i < agent_op_count; i++) {
		const char *name = agent_op_table[i].name;
		if (strlen(name) == f->op_len && memcmp(name, f->op, f->op_len) == 0) {
			agent_op_table[i].start(s, f->id, &f->args);
			return;
		}
	}
	snprintf(msg, sizeof(msg), "unknown operation \"%.*s\"", (int)(f->op_len > 64 ? 64 : f->op_len), f->op);
	fail(s, f->id, SBX_PROTO_E_UNKNOWN_OP, msg);
}

static void on_frame(sbx_proto_conn *c, const sbx_proto_frame *f, void *ud)
{
	agent_session *s = ud;
	agent_op *op;

	if (s->closed)
		return;
	if (f->kind == SBX_PROTO_REQ) {
		handle_req(s, f);
		return;
	}
	op = sbx_proto_conn_stream_data(c, f->id);
	switch (f->kind) {
	case SBX_PROTO_DATA:
	case SBX_PROTO_CTL:
	case SBX_PROTO_CANCEL:
		if (op) {
			op->vt->frame(op, f);
		} else if (f->kind == SBX_PROTO_DATA) {
			/* A stream without a long-running op takes no data; still
			 * give the credit back so the peer is not stalled. */
			sbx_proto_conn_consumed(c, f->id, f->body_len);
		}
		break;
	default:
		/* The agent opens no streams, so END/ERR/EVENT cannot be for us. */
		agent_log_debug("ignoring %s frame on stream %llu", sbx_proto_kind_name(f->kind),
				(unsigned long long)f->id);
		break;
	}
}

static void on_writable(sbx_proto_conn *c, uint64_t id, void *ud)
{
	agent_session *s = ud;
	agent_op *op = id ? sbx_proto_conn_stream_data(c, id) : NULL;

	if (s->closed)
		return;
	if (op) {
		op->vt->writable(op);
		return;
	}
	/* The socket drained (or an id we do not track): everyone may go on.
	 * writable() may end an op, so take the next one first. */
	for (agent_op *o = s->ops, *next; o; o = next) {
		next = o->next;
		o->vt->writable(o);
	}
}

static void session_free(agent_session *s)
{
	while (s->ops) {
		agent_op *op = s->ops;
		agent_session_detach(s, op);
		op->vt->abort(op);
	}
	if (s->prev)
		s->prev->next = s->next;
	else
		sessions = s->next;
	if (s->next)
		s->next->prev = s->prev;
	nsessions--;
	sbx_proto_conn_free(s->conn);
	event_free(s->close_ev);
	free(s);
}

static void close_cb(evutil_socket_t fd, short what, void *ud)
{
	session_free(ud);
}

static void on_close(sbx_proto_conn *c, const sbx_err *why, void *ud)
{
	agent_session *s = ud;

	agent_log_debug("connection closed: %s", why && why->code ? why->msg : "peer closed");
	s->closed = true;
	event_active(s->close_ev, EV_TIMEOUT, 0);
}

/* Credit we grant per stream for what the supervisor sends (uploads,
 * stdin). file.write gives it back only once the bytes are written, so
 * with 256 KiB an upload had one frame in flight at a time and waited a
 * round trip per frame (about 800 MB/s); 1 MiB keeps several in flight
 * (about 1.1 GB/s). It bounds what a stdin stream may hold here (the
 * command not reading) at 1 MiB, below AGENT_PROC_STDIN_MAX. */
#define AGENT_RECV_WINDOW (1u << 20)

int agent_session_new(agent_ctx *ctx, int fd, sbx_err *err)
{
	static const sbx_proto_conn_cbs cbs = {
		.on_frame = on_frame,
		.on_writable = on_writable,
		.on_close = on_close,
	};
	sbx_proto_conn_opts opts = {
		.is_client = false,
		.caps = caps,
		.ncaps = sizeof(caps) / sizeof(caps[0]),
		.agent = AGENT_NAME,
		.window = AGENT_RECV_WINDOW,
	};
	agent_session *s = calloc(1, sizeof(*s));

	if (!s) {
		close(fd);
		return sbx_err_sys(err, -ENOMEM, "new connection");
	}
	s->ctx = ctx;
	s->close_ev = event_new(ctx->base, -1, 0, close_cb, s);
	if (!s->close_ev) {
		close(fd);
		free(s);
		return sbx_err_set(err, -ENOMEM, "new connection: event");
	}
	s->conn = sbx_proto_conn_new(ctx->base, fd, &opts, &cbs, s, err);
	if (!s->conn) {
		event_free(s->close_ev);
		free(s);
		return err->code ? err->code : -EIO;
	}
	s->next = sessions;
	if (sessions)
		sessions->prev = s;
	sessions = s;
	nsessions++;
	return 0;
}

size_t agent_session_count(void)
{
	return nsessions;
}

bool agent_session_all_flushed(void)
{
	for (agent_session *s = sessions; s; s = s->next)
		if (!s->closed && sbx_proto_conn_pending_output(s->conn) > 0)
			return false;
	return true;
}

void agent_session_end_ops(const agent_op *keep, sbx_proto_code code, const char *msg)
{
	for (agent_session *s = sessions; s; s = s->next) {
		if (s->closed)
			continue;
		/* abort() frees the op and may not touch the list: take the
		 * next one first, and skip the one to keep */
		for (agent_op *op = s->ops, *next; op; op = next) {
			next = op->next;
			if (op == keep)
				continue;
			uint64_t id = op->id;
			agent_session_detach(s, op);
			op->vt->abort(op);
			fail(s, id, code, msg);
		}
	}
}

void agent_session_close_all(void)
{
	while (sessions)
		session_free(sessions);
}
