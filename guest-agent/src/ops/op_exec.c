/* exec: runs one command and streams it over its protocol stream.
 *
 * The binding between a stream and a proc (proc.c): output goes out as DATA
 * within the requester's credit (no credit: the proc stops reading, the
 * command blocks), stdin DATA goes in with credit returned only as bytes
 * reach the pipe (or terminal), ctl signals go to the process group, ctl
 * resize to the terminal, cancel and a lost connection kill the whole tree,
 * and END carries the exit status and rusage. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "sbx/proto.h"
#include "env.h"
#include "exec_spec.h"
#include "log.h"
#include "ops.h"
#include "op_util.h"
#include "proc.h"
#include "session.h"

typedef struct exec_op {
	agent_op op;
	agent_proc *proc;
	bool stdin_ok; /* "stdin": true, or a terminal */
	void *resv;    /* output reserved in the connection (sink_buffer) */
} exec_op;

/* A pipe a fast command fills while the requester is slow to give credit:
 * the next read then takes a whole window in one frame. */
#define EXEC_PIPE_SIZE (1u << 20)

static sbx_proto_conn *conn_of(exec_op *e)
{
	return agent_session_conn(e->op.session);
}

/* ---- proc -> stream ---- */

static size_t sink_room(void *ud, agent_proc_stream s)
{
	exec_op *e = ud;

	return sbx_proto_conn_data_room(conn_of(e), e->op.id);
}

static const char *ch_of(agent_proc_stream s)
{
	return s == AGENT_PROC_STDOUT ? SBX_CH_STDOUT : SBX_CH_STDERR;
}

/* The output is read straight into a DATA frame in the connection's output
 * buffer; if that cannot be reserved, proc reads into its own. */
static void *sink_buffer(void *ud, agent_proc_stream s, size_t len)
{
	exec_op *e = ud;
	void *buf = NULL;
	sbx_err err = { 0 };

	if (sbx_proto_conn_data_begin(conn_of(e), e->op.id, ch_of(s), len, &buf, &err) < 0) {
		agent_log_debug("exec %d: %s", (int)agent_proc_pid(e->proc), err.msg);
		buf = NULL;
	}
	e->resv = buf;
	return buf;
}

static void sink_output(void *ud, agent_proc_stream s, const void *data, size_t len)
{
	exec_op *e = ud;
	sbx_err err = { 0 };
	int ret;

	if (e->resv && data == e->resv)
		ret = sbx_proto_conn_data_commit(conn_of(e), len, &err);
	else
		ret = sbx_proto_conn_send_data(conn_of(e), e->op.id, ch_of(s), data, len, false, &err);
	e->resv = NULL;
	if (ret < 0)
		agent_log_warn("exec %d: send %s: %s", (int)agent_proc_pid(e->proc), ch_of(s), err.msg);
}

static void sink_stdin_done(void *ud, size_t n)
{
	exec_op *e = ud;

	sbx_proto_conn_consumed(conn_of(e), e->op.id, n);
}

static void sink_finished(void *ud, const agent_proc_result *r)
{
	exec_op *e = ud;
	agent_session *s = e->op.session;
	sbx_err err = { 0 };
	msgpack_sbuffer buf;
	msgpack_packer pk;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	agent_op_pack_result(&pk, r, 0);
	agent_session_detach(s, &e->op);
	if (sbx_proto_conn_end(agent_session_conn(s), e->op.id, buf.data, buf.size, &err) < 0)
		agent_log_warn("exec %d: send result: %s", (int)agent_proc_pid(e->proc), err.msg);
	msgpack_sbuffer_destroy(&buf);
	free(e);
}

static const agent_proc_sink exec_sink = {
	.room = sink_room,
	.buffer = sink_buffer,
	.output = sink_output,
	.stdin_done = sink_stdin_done,
	.finished = sink_finished,
	.pipe_size = EXEC_PIPE_SIZE,
};

/* ---- stream -> proc ---- */

/* End the stream with an error: the command is killed and forgotten. */
static void exec_fail(exec_op *e, sbx_proto_code code, const char *msg)
{
	agent_session *s = e->op.session;
	sbx_err err = { 0 };

	agent_session_detach(s, &e->op);
	agent_proc_detach(e->proc);
	if (sbx_proto_conn_fail(agent_session_conn(s), e->op.id, code, msg, &err) < 0)
		agent_log_debug("exec: answer: %s", err.msg);
	free(e);
}

static void exec_data(exec_op *e, const sbx_proto_frame *f)
{
	sbx_proto_conn *c = conn_of(e);
	sbx_err err = { 0 };
	int ret;

	if (!e->stdin_ok || f->ch_len != strlen(SBX_CH_STDIN) ||
	    memcmp(f->ch, SBX_CH_STDIN, f->ch_len) != 0) {
		exec_fail(e, SBX_PROTO_E_BAD_REQUEST,
			  e->stdin_ok ? "exec: data only on channel stdin"
					: "exec: stdin data without \"stdin\": true");
		return;
	}
	/* The frame's envelope is passed on at once; its payload only as it
	 * reaches the pipe (sink_stdin_done). */
	sbx_proto_conn_consumed(c, e->op.id, f->body_len - f->data_len);
	if (f->data_len) {
		ret = agent_proc_write_stdin(e->proc, f->data, f->data_len, &err);
		if (ret < 0) {
			exec_fail(e, ret == -ENOBUFS ? SBX_PROTO_E_FLOW_CONTROL : SBX_PROTO_E_BAD_REQUEST, err.msg);
			return;
		}
	}
	if (f->eof)
		agent_proc_close_stdin(e->proc);
}

static void exec_ctl(exec_op *e, const sbx_proto_frame *f)
{
	sbx_err err = { 0 };
	int ret = agent_op_ctl(e->proc, &f->args, &err);

	if (ret == -EINVAL)
		exec_fail(e, SBX_PROTO_E_BAD_REQUEST, err.msg);
	else if (ret < 0)
		agent_log_warn("exec: %s", err.msg);
}

static void exec_frame(agent_op *op, const sbx_proto_frame *f)
{
	exec_op *e = (exec_op *)op;

	switch (f->kind) {
	case SBX_PROTO_DATA:
		exec_data(e, f);
		break;
	case SBX_PROTO_CTL:
		exec_ctl(e, f);
		break;
	case SBX_PROTO_CANCEL:
		exec_fail(e, SBX_PROTO_E_CANCELLED, "cancelled");
		break;
	default:
		break;
	}
}

static void exec_writable(agent_op *op)
{
	exec_op *e = (exec_op *)op;

	agent_proc_resume(e->proc, AGENT_PROC_STDOUT);
	agent_proc_resume(e->proc, AGENT_PROC_STDERR);
}

static void exec_abort(agent_op *op)
{
	exec_op *e = (exec_op *)op;

	agent_proc_detach(e->proc);
	free(e);
}

static const agent_op_vtbl exec_vtbl = {
	.frame = exec_frame,
	.writable = exec_writable,
	.abort = exec_abort,
};

void agent_op_exec(agent_session *s, uint64_t id, const msgpack_object *args)
{
	sbx_proto_conn *c = agent_session_conn(s);
	agent_exec_spec spec;
	sbx_err err = { 0 };
	exec_op *e;
	int ret;

	ret = agent_exec_spec_parse(args, agent_env_base(), &spec, &err);
	if (ret < 0) {
		sbx_proto_conn_fail(c, id, ret == -EINVAL ? SBX_PROTO_E_BAD_REQUEST : SBX_PROTO_E_INTERNAL,
				    err.msg, NULL);
		return;
	}
	e = calloc(1, sizeof(*e));
	if (!e) {
		agent_exec_spec_free(&spec);
		sbx_proto_conn_fail(c, id, SBX_PROTO_E_INTERNAL, "exec: out of memory", NULL);
		return;
	}
	e->op.vt = &exec_vtbl;
	e->op.id = id;
	e->stdin_ok = spec.stdin_pipe || spec.pty;
	ret = agent_proc_start(agent_session_ctx(s)->base, &spec, &exec_sink, e, &e->proc, &err);
	agent_exec_spec_free(&spec);
	if (ret < 0) {
		free(e);
		sbx_proto_conn_fail(c, id, agent_op_start_code(ret), err.msg, NULL);
		return;
	}
	agent_session_attach(s, &e->op);
}
