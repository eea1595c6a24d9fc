/* proc.start, proc.list, proc.get, proc.signal, proc.kill, proc.resize:
 * background processes (bg.h) seen from the protocol. All but start and
 * kill of a running process answer at once; those two wait for the process
 * to start / end, watching it, and give up the watch when the connection
 * goes (the process is not the connection's). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "agent.h"
#include "env.h"
#include "exec_spec.h"
#include "log.h"
#include "ops.h"
#include "op_proc.h"
#include "op_util.h"
#include "session.h"

/* ---- shared (op_proc.h) ---- */

void *agent_op_proc_new(agent_session *s, uint64_t id, size_t size, const agent_op_vtbl *vt, agent_bg *b,
			void (*changed)(void *ud), void (*gone)(void *ud))
{
	agent_proc_op *o = calloc(1, size);

	if (!o) {
		agent_op_proc_fail(s, id, SBX_PROTO_E_INTERNAL, "out of memory");
		return NULL;
	}
	o->op.vt = vt;
	o->op.id = id;
	o->b = b;
	o->w.changed = changed;
	o->w.gone = gone;
	o->w.ud = o;
	agent_bg_watch_add(b, &o->w);
	agent_session_attach(s, &o->op);
	return o;
}

void agent_op_proc_free(agent_proc_op *o, bool detach)
{
	if (o->b)
		agent_bg_watch_del(o->b, &o->w);
	if (detach)
		agent_session_detach(o->op.session, &o->op);
	free(o);
}

void agent_op_proc_no_writable(agent_op *op)
{
}

void agent_op_proc_fail(agent_session *s, uint64_t id, sbx_proto_code code, const char *msg)
{
	sbx_err err = { 0 };

	if (sbx_proto_conn_fail(agent_session_conn(s), id, code, msg, &err) < 0)
		agent_log_debug("answer stream %llu: %s", (unsigned long long)id, err.msg);
}

void agent_op_proc_fail_err(agent_session *s, uint64_t id, const sbx_err *e)
{
	sbx_proto_code code;

	switch (e->code) {
	case -ESRCH:
		code = SBX_PROTO_E_NOT_FOUND;
		break;
	case -EPIPE:
	case -ENOTTY:
	case -EINVAL:
		code = SBX_PROTO_E_BAD_REQUEST;
		break;
	case -EBUSY:
		code = SBX_PROTO_E_EXISTS;
		break;
	case -ENOBUFS:
		code = SBX_PROTO_E_FLOW_CONTROL;
		break;
	default:
		code = SBX_PROTO_E_INTERNAL;
		break;
	}
	agent_op_proc_fail(s, id, code, e->msg);
}

agent_bg *agent_op_proc_find(agent_session *s, uint64_t id, const char *op, const msgpack_object *args)
{
	const msgpack_object *pid = agent_op_arg(args, "pid");
	char msg[96];
	agent_bg *b;

	if (!pid || pid->type != MSGPACK_OBJECT_POSITIVE_INTEGER || pid->via.u64 < 1 || pid->via.u64 > INT32_MAX) {
		snprintf(msg, sizeof(msg), "%s: pid must be a positive integer", op);
		agent_op_proc_fail(s, id, SBX_PROTO_E_BAD_REQUEST, msg);
		return NULL;
	}
	b = agent_bg_find((pid_t)pid->via.u64);
	if (!b) {
		snprintf(msg, sizeof(msg), "%s: no background process %llu", op, (unsigned long long)pid->via.u64);
		agent_op_proc_fail(s, id, SBX_PROTO_E_NOT_FOUND, msg);
	}
	return b;
}

void agent_op_proc_pack(msgpack_packer *pk, const agent_bg *b, bool full, uint32_t extra)
{
	bool exited = agent_bg_get_state(b) == AGENT_BG_EXITED;
	const char *tag = agent_bg_tag(b);
	uint32_t n = 4 + (exited ? 1 + AGENT_OP_RESULT_PAIRS : 0) + (full ? 4 : 0) + extra;

	msgpack_pack_map(pk, n);
	sbx_proto_pack_str(pk, "pid");
	msgpack_pack_int64(pk, agent_bg_pid(b));
	sbx_proto_pack_str(pk, "tag");
	if (tag)
		sbx_proto_pack_str(pk, tag);
	else
		msgpack_pack_nil(pk);
	sbx_proto_pack_str(pk, "state");
	sbx_proto_pack_str(pk, agent_bg_state_name(agent_bg_get_state(b)));
	sbx_proto_pack_str(pk, "started_ms");
	msgpack_pack_uint64(pk, agent_bg_started_ms(b));
	if (exited) {
		sbx_proto_pack_str(pk, "ended_ms");
		msgpack_pack_uint64(pk, agent_bg_ended_ms(b));
		agent_op_pack_result_pairs(pk, agent_bg_result(b));
	}
	if (full) {
		char *const *argv = agent_bg_argv(b);
		const agent_ring *r = agent_bg_ring(b);
		size_t argc = 0;

		while (argv[argc])
			argc++;
		sbx_proto_pack_str(pk, "argv");
		msgpack_pack_array(pk, argc);
		for (size_t i = 0; i < argc; i++)
			sbx_proto_pack_str(pk, argv[i]);
		sbx_proto_pack_str(pk, "pty");
		if (agent_bg_has_pty(b))
			msgpack_pack_true(pk);
		else
			msgpack_pack_false(pk);
		sbx_proto_pack_str(pk, "stdin");
		if (agent_bg_has_stdin(b))
			msgpack_pack_true(pk);
		else
			msgpack_pack_false(pk);
		sbx_proto_pack_str(pk, "output");
		msgpack_pack_map(pk, 3);
		sbx_proto_pack_str(pk, "start");
		msgpack_pack_uint64(pk, agent_ring_start(r));
		sbx_proto_pack_str(pk, "end");
		msgpack_pack_uint64(pk, agent_ring_end(r));
		sbx_proto_pack_str(pk, "buffer");
		msgpack_pack_uint64(pk, agent_ring_cap(r));
	}
}

static void end_with(agent_session *s, uint64_t id, const msgpack_sbuffer *buf)
{
	sbx_err err = { 0 };

	if (sbx_proto_conn_end(agent_session_conn(s), id, buf->data, buf->size, &err) < 0) {
		agent_log_debug("answer stream %llu: %s", (unsigned long long)id, err.msg);
		if (err.code == -EMSGSIZE)
			agent_op_proc_fail(s, id, SBX_PROTO_E_TOO_LARGE, err.msg);
	}
}

void agent_op_proc_end(agent_session *s, uint64_t id, const agent_bg *b, int64_t next)
{
	msgpack_sbuffer buf;
	msgpack_packer pk;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	agent_op_proc_pack(&pk, b, false, next >= 0);
	if (next >= 0) {
		sbx_proto_pack_str(&pk, "next_offset");
		msgpack_pack_uint64(&pk, (uint64_t)next);
	}
	end_with(s, id, &buf);
	msgpack_sbuffer_destroy(&buf);
}

/* ---- waiting for a start or an end ---- */

typedef enum wait_kind { WAIT_START, WAIT_EXIT } wait_kind;

typedef struct wait_op {
	agent_proc_op p;
	wait_kind kind;
} wait_op;

static void wait_changed(void *ud)
{
	wait_op *o = ud;
	agent_session *s = o->p.op.session;
	agent_bg_state st = agent_bg_get_state(o->p.b);

	if (o->kind == WAIT_START && st == AGENT_BG_STARTING)
		return;
	if (o->kind == WAIT_EXIT && st != AGENT_BG_EXITED)
		return;
	agent_session_detach(s, &o->p.op);
	if (o->kind == WAIT_START && agent_bg_pid(o->p.b) == 0)
		agent_op_proc_fail(s, o->p.op.id, SBX_PROTO_E_EXEC_FAILED, "proc.start: the command could not be started");
	else
		agent_op_proc_end(s, o->p.op.id, o->p.b, -1);
	agent_op_proc_free(&o->p, false);
}

static void wait_gone(void *ud)
{
	wait_op *o = ud;

	o->p.b = NULL; /* already out of its watch list */
	agent_session_detach(o->p.op.session, &o->p.op);
	agent_op_proc_fail(o->p.op.session, o->p.op.id, SBX_PROTO_E_EXEC_FAILED,
			   "the background process could not be started");
	agent_op_proc_free(&o->p, false);
}

static void wait_frame(agent_op *op, const sbx_proto_frame *f)
{
	wait_op *o = (wait_op *)op;
	agent_session *s = op->session;
	sbx_err err = { 0 };

	if (f->kind == SBX_PROTO_DATA) {
		sbx_proto_conn_consumed(agent_session_conn(s), op->id, f->body_len);
		return;
	}
	if (f->kind != SBX_PROTO_CANCEL)
		return;
	/* The requester of a start gives up before it knows the pid: nobody
	 * could address the process, so it goes. A kill goes on anyway. */
	if (o->kind == WAIT_START && agent_bg_kill(o->p.b, &err) < 0)
		agent_log_warn("proc.start: %s", err.msg);
	agent_session_detach(s, op);
	agent_op_proc_fail(s, op->id, SBX_PROTO_E_CANCELLED, "cancelled");
	agent_op_proc_free(&o->p, false);
}

static void wait_abort(agent_op *op)
{
	agent_op_proc_free((agent_proc_op *)op, false);
}

static const agent_op_vtbl wait_vtbl = {
	.frame = wait_frame,
	.writable = agent_op_proc_no_writable,
	.abort = wait_abort,
};

static void wait_for(agent_session *s, uint64_t id, agent_bg *b, wait_kind kind)
{
	wait_op *o = agent_op_proc_new(s, id, sizeof(*o), &wait_vtbl, b, wait_changed, wait_gone);

	if (o)
		o->kind = kind;
}

/* ---- operations ---- */

void agent_op_proc_start(agent_session *s, uint64_t id, const msgpack_object *args)
{
	const msgpack_object *tag = agent_op_arg(args, "tag"), *buffer = agent_op_arg(args, "buffer");
	size_t ring_cap = AGENT_RING_DEFAULT;
	char *tag_str = NULL;
	agent_exec_spec spec;
	sbx_err err = { 0 };
	agent_bg *b;
	int ret;

	if (tag && (tag->type != MSGPACK_OBJECT_STR || tag->via.str.size > AGENT_BG_MAX_TAG ||
		    !(tag_str = sbx_proto_strdup(tag)))) {
		snprintf(err.msg, sizeof(err.msg), "proc.start: tag must be a string of at most %u bytes without NUL",
			 AGENT_BG_MAX_TAG);
		agent_op_proc_fail(s, id, SBX_PROTO_E_BAD_REQUEST, err.msg);
		return;
	}
	if (buffer) {
		if (buffer->type != MSGPACK_OBJECT_POSITIVE_INTEGER || buffer->via.u64 < AGENT_RING_MIN ||
		    buffer->via.u64 > AGENT_RING_MAX) {
			snprintf(err.msg, sizeof(err.msg), "proc.start: buffer must be %u..%u bytes", AGENT_RING_MIN,
				 AGENT_RING_MAX);
			agent_op_proc_fail(s, id, SBX_PROTO_E_BAD_REQUEST, err.msg);
			free(tag_str);
			return;
		}
		ring_cap = (size_t)buffer->via.u64;
	}
	ret = agent_exec_spec_parse(args, agent_env_base(), &spec, &err);
	if (ret < 0) {
		agent_op_proc_fail(s, id, ret == -EINVAL ? SBX_PROTO_E_BAD_REQUEST : SBX_PROTO_E_INTERNAL, err.msg);
		free(tag_str);
		return;
	}
	ret = agent_bg_start(agent_session_ctx(s)->base, &spec, tag_str, ring_cap, &b, &err);
	agent_exec_spec_free(&spec);
	free(tag_str);
	if (ret < 0) {
		agent_op_proc_fail(s, id,
				   ret == -EAGAIN ? SBX_PROTO_E_TOO_MANY_STREAMS
				   : ret == -ENOSPC ? SBX_PROTO_E_NO_SPACE
						    : agent_op_start_code(ret),
				   err.msg);
		return;
	}
	wait_for(s, id, b, WAIT_START);
}

void agent_op_proc_list(agent_session *s, uint64_t id, const msgpack_object *args)
{
	const msgpack_object *tag = agent_op_arg(args, "tag");
	msgpack_sbuffer buf;
	msgpack_packer pk;
	uint32_t n = 0;

	if (tag && tag->type != MSGPACK_OBJECT_STR) {
		agent_op_proc_fail(s, id, SBX_PROTO_E_BAD_REQUEST, "proc.list: tag must be a string");
		return;
	}
	for (agent_bg *b = agent_bg_first(); b; b = agent_bg_next(b)) {
		const char *t = agent_bg_tag(b);

		if (agent_bg_pid(b) > 0 &&
		    (!tag || (t && strlen(t) == tag->via.str.size && memcmp(t, tag->via.str.ptr, tag->via.str.size) == 0)))
			n++;
	}
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, "processes");
	msgpack_pack_array(&pk, n);
	for (agent_bg *b = agent_bg_first(); b; b = agent_bg_next(b)) {
		const char *t = agent_bg_tag(b);

		if (agent_bg_pid(b) > 0 &&
		    (!tag || (t && strlen(t) == tag->via.str.size && memcmp(t, tag->via.str.ptr, tag->via.str.size) == 0)))
			agent_op_proc_pack(&pk, b, false, 0);
	}
	end_with(s, id, &buf);
	msgpack_sbuffer_destroy(&buf);
}

void agent_op_proc_get(agent_session *s, uint64_t id, const msgpack_object *args)
{
	agent_bg *b = agent_op_proc_find(s, id, "proc.get", args);
	msgpack_sbuffer buf;
	msgpack_packer pk;

	if (!b)
		return;
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	agent_op_proc_pack(&pk, b, true, 0);
	end_with(s, id, &buf);
	msgpack_sbuffer_destroy(&buf);
}

static void end_empty(agent_session *s, uint64_t id)
{
	sbx_err err = { 0 };

	if (sbx_proto_conn_end(agent_session_conn(s), id, "\x80", 1, &err) < 0)
		agent_log_debug("answer stream %llu: %s", (unsigned long long)id, err.msg);
}

void agent_op_proc_signal(agent_session *s, uint64_t id, const msgpack_object *args)
{
	agent_bg *b = agent_op_proc_find(s, id, "proc.signal", args);
	sbx_err err = { 0 };
	int sig;

	if (!b)
		return;
	if (agent_op_signal_arg(agent_op_arg(args, "signal"), "proc.signal", &sig, &err) < 0 ||
	    agent_bg_signal(b, sig, &err) < 0) {
		agent_op_proc_fail_err(s, id, &err);
		return;
	}
	end_empty(s, id);
}

void agent_op_proc_kill(agent_session *s, uint64_t id, const msgpack_object *args)
{
	agent_bg *b = agent_op_proc_find(s, id, "proc.kill", args);
	sbx_err err = { 0 };

	if (!b)
		return;
	if (agent_bg_kill(b, &err) < 0) {
		agent_op_proc_fail_err(s, id, &err);
		return;
	}
	if (agent_bg_get_state(b) == AGENT_BG_EXITED)
		agent_op_proc_end(s, id, b, -1);
	else
		wait_for(s, id, b, WAIT_EXIT);
}

void agent_op_proc_resize(agent_session *s, uint64_t id, const msgpack_object *args)
{
	agent_bg *b = agent_op_proc_find(s, id, "proc.resize", args);
	uint16_t cols = 0, rows = 0;
	sbx_err err = { 0 };

	if (!b)
		return;
	if (!agent_op_arg(args, "cols") || !agent_op_arg(args, "rows")) {
		agent_op_proc_fail(s, id, SBX_PROTO_E_BAD_REQUEST, "proc.resize: cols and rows are required");
		return;
	}
	if (agent_exec_spec_parse_size(args, &cols, &rows, &err) < 0 || agent_bg_resize(b, cols, rows, &err) < 0) {
		agent_op_proc_fail_err(s, id, &err);
		return;
	}
	end_empty(s, id);
}
