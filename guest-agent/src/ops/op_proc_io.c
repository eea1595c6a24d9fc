/* proc.output and proc.stdin: the streams of a background process.
 *
 * proc.output reads the process's ring from an offset: DATA frames within
 * the requester's credit, an EVENT {"gap": {"from", "to"}} for bytes the
 * ring dropped before this reader got them (never a silent jump), and with
 * follow, whatever comes next until the process has exited and everything
 * was sent. The process never waits for a reader: a slow one only falls
 * behind, and sees a gap when the ring overtakes it.
 *
 * proc.stdin passes the requester's DATA on to the process, returning credit
 * as the bytes reach it, and ends once the requester's eof arrived and every
 * byte went in (closing the process's stdin if asked). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "log.h"
#include "ops.h"
#include "op_proc.h"
#include "op_util.h"
#include "session.h"

#define OUTPUT_CHUNK (64u * 1024u)

static int bool_arg(const msgpack_object *args, const char *key, bool *out, sbx_err *err)
{
	const msgpack_object *o = agent_op_arg(args, key);

	*out = false;
	if (!o)
		return 0;
	if (o->type != MSGPACK_OBJECT_BOOLEAN)
		return sbx_err_set(err, -EINVAL, "%s must be a boolean", key);
	*out = o->via.boolean;
	return 0;
}

/* ---- proc.output ---- */

typedef struct output_op {
	agent_proc_op p;
	uint64_t off;
	agent_ring_cursor cur;
	bool follow;
	bool pumping; /* sends may call back into pump (writable) */
} output_op;

static uint8_t chunk[OUTPUT_CHUNK];

/* The gap event: {"gap": {"from": a, "to": b}}. */
static int send_gap(output_op *o, uint64_t from, uint64_t to, sbx_err *err)
{
	msgpack_sbuffer buf;
	msgpack_packer pk;
	int ret;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, "gap");
	msgpack_pack_map(&pk, 2);
	sbx_proto_pack_str(&pk, "from");
	msgpack_pack_uint64(&pk, from);
	sbx_proto_pack_str(&pk, "to");
	msgpack_pack_uint64(&pk, to);
	ret = sbx_proto_conn_send_event(agent_session_conn(o->p.op.session), o->p.op.id, buf.data, buf.size, err);
	msgpack_sbuffer_destroy(&buf);
	return ret;
}

/* Send what the requester's credit allows; END once caught up and either
 * not following or the process is over. Returns true when o was freed. */
static bool output_pump(output_op *o)
{
	agent_session *s = o->p.op.session;
	sbx_proto_conn *c = agent_session_conn(s);
	uint64_t id = o->p.op.id;
	sbx_err err = { 0 };

	if (o->pumping)
		return false;
	o->pumping = true;
	for (;;) {
		const agent_ring *r = agent_bg_ring(o->p.b);
		uint64_t start = agent_ring_start(r), end = agent_ring_end(r);

		if (o->off < start) {
			if (send_gap(o, o->off, start, &err) < 0)
				break; /* no credit: on_writable brings us back */
			o->off = start;
			continue;
		}
		if (o->off < end) {
			size_t room = sbx_proto_conn_data_room(c, id), n;
			int ch = 0;

			if (room == 0)
				break;
			n = agent_ring_read(r, &o->cur, o->off, &ch, chunk, room < sizeof(chunk) ? room : sizeof(chunk));
			if (sbx_proto_conn_send_data(c, id, ch ? SBX_CH_STDERR : SBX_CH_STDOUT, chunk, n, false, &err) < 0)
				break;
			o->off += n;
			continue;
		}
		if (o->follow && agent_bg_get_state(o->p.b) != AGENT_BG_EXITED)
			break;
		agent_session_detach(s, &o->p.op);
		agent_op_proc_end(s, id, o->p.b, (int64_t)o->off);
		agent_op_proc_free(&o->p, false);
		return true;
	}
	o->pumping = false;
	return false;
}

static void output_changed(void *ud)
{
	output_pump(ud);
}

static void output_gone(void *ud)
{
	output_op *o = ud;
	agent_session *s = o->p.op.session;
	char msg[128];

	snprintf(msg, sizeof(msg), "proc.output: background process %d was dropped (only the last %u exited are kept)",
		 (int)agent_bg_pid(o->p.b), AGENT_BG_KEEP_EXITED);
	o->p.b = NULL;
	agent_session_detach(s, &o->p.op);
	agent_op_proc_fail(s, o->p.op.id, SBX_PROTO_E_NOT_FOUND, msg);
	agent_op_proc_free(&o->p, false);
}

static void output_frame(agent_op *op, const sbx_proto_frame *f)
{
	agent_session *s = op->session;

	if (f->kind == SBX_PROTO_DATA) {
		sbx_proto_conn_consumed(agent_session_conn(s), op->id, f->body_len);
		return;
	}
	if (f->kind != SBX_PROTO_CANCEL)
		return;
	agent_session_detach(s, op);
	agent_op_proc_fail(s, op->id, SBX_PROTO_E_CANCELLED, "cancelled");
	agent_op_proc_free((agent_proc_op *)op, false);
}

static void output_writable(agent_op *op)
{
	output_pump((output_op *)op);
}

static void output_abort(agent_op *op)
{
	agent_op_proc_free((agent_proc_op *)op, false);
}

static const agent_op_vtbl output_vtbl = {
	.frame = output_frame,
	.writable = output_writable,
	.abort = output_abort,
};

void agent_op_proc_output(agent_session *s, uint64_t id, const msgpack_object *args)
{
	agent_bg *b = agent_op_proc_find(s, id, "proc.output", args);
	const msgpack_object *offset = agent_op_arg(args, "offset");
	sbx_err err = { 0 };
	uint64_t off = 0, end;
	output_op *o;
	bool follow;

	if (!b)
		return;
	if (bool_arg(args, "follow", &follow, &err) < 0) {
		agent_op_proc_fail(s, id, SBX_PROTO_E_BAD_REQUEST, err.msg);
		return;
	}
	end = agent_ring_end(agent_bg_ring(b));
	if (offset) {
		if (offset->type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
			agent_op_proc_fail(s, id, SBX_PROTO_E_BAD_REQUEST,
					   "proc.output: offset must be a non-negative integer");
			return;
		}
		off = offset->via.u64;
		if (off > end) {
			snprintf(err.msg, sizeof(err.msg), "proc.output: offset %llu is beyond the end of the output (%llu)",
				 (unsigned long long)off, (unsigned long long)end);
			agent_op_proc_fail(s, id, SBX_PROTO_E_BAD_REQUEST, err.msg);
			return;
		}
	}
	o = agent_op_proc_new(s, id, sizeof(*o), &output_vtbl, b, output_changed, output_gone);
	if (!o)
		return;
	o->off = off;
	o->follow = follow;
	output_pump(o);
}

/* ---- proc.stdin ---- */

typedef struct stdin_op {
	agent_proc_op p;
	bool close_after; /* "eof": close the process's stdin at the end */
	bool input_done;  /* the requester's data eof arrived */
	bool writing;     /* inside agent_bg_stdin_write */
	uint64_t accepted;
	size_t pending;   /* given to the process, not yet in its pipe */
} stdin_op;

static void stdin_free(stdin_op *o)
{
	if (o->p.b)
		agent_bg_stdin_release(o->p.b, o);
	agent_op_proc_free(&o->p, false);
}

static void stdin_end(stdin_op *o)
{
	agent_session *s = o->p.op.session;
	msgpack_sbuffer buf;
	msgpack_packer pk;
	sbx_err err = { 0 };

	if (o->close_after)
		agent_bg_stdin_close(o->p.b);
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, "written");
	msgpack_pack_uint64(&pk, o->accepted);
	agent_session_detach(s, &o->p.op);
	if (sbx_proto_conn_end(agent_session_conn(s), o->p.op.id, buf.data, buf.size, &err) < 0)
		agent_log_debug("proc.stdin: answer: %s", err.msg);
	msgpack_sbuffer_destroy(&buf);
	stdin_free(o);
}

static void stdin_fail(stdin_op *o, sbx_proto_code code, const char *msg)
{
	agent_session *s = o->p.op.session;

	agent_session_detach(s, &o->p.op);
	agent_op_proc_fail(s, o->p.op.id, code, msg);
	stdin_free(o);
}

static void stdin_done(void *ud, size_t n)
{
	stdin_op *o = ud;

	sbx_proto_conn_consumed(agent_session_conn(o->p.op.session), o->p.op.id, n);
	o->pending -= n < o->pending ? n : o->pending;
	/* From inside stdin_data's write, stdin_data checks itself after. */
	if (!o->writing && o->input_done && o->pending == 0)
		stdin_end(o);
}

static void stdin_changed(void *ud)
{
	stdin_op *o = ud;
	char msg[96];

	if (agent_bg_get_state(o->p.b) != AGENT_BG_EXITED)
		return;
	snprintf(msg, sizeof(msg), "proc.stdin: background process %d exited", (int)agent_bg_pid(o->p.b));
	stdin_fail(o, SBX_PROTO_E_NOT_FOUND, msg);
}

static void stdin_gone(void *ud)
{
	stdin_op *o = ud;

	o->p.b = NULL;
	stdin_fail(o, SBX_PROTO_E_NOT_FOUND, "proc.stdin: the background process was dropped");
}

static void stdin_data(stdin_op *o, const sbx_proto_frame *f)
{
	agent_session *s = o->p.op.session;
	sbx_proto_conn *c = agent_session_conn(s);
	sbx_err err = { 0 };
	int ret = 0;

	if (f->ch_len != strlen(SBX_CH_STDIN) || memcmp(f->ch, SBX_CH_STDIN, f->ch_len) != 0 || o->input_done) {
		stdin_fail(o, SBX_PROTO_E_BAD_REQUEST,
			   o->input_done ? "proc.stdin: data after eof" : "proc.stdin: data only on channel stdin");
		return;
	}
	/* The envelope at once, the bytes as they reach the process. */
	sbx_proto_conn_consumed(c, o->p.op.id, f->body_len - f->data_len);
	if (f->data_len) {
		o->pending += f->data_len;
		o->accepted += f->data_len;
		o->writing = true;
		ret = agent_bg_stdin_write(o->p.b, f->data, f->data_len, &err);
		o->writing = false;
	}
	if (ret < 0) {
		agent_session_detach(s, &o->p.op);
		agent_op_proc_fail_err(s, o->p.op.id, &err);
		stdin_free(o);
		return;
	}
	if (f->eof)
		o->input_done = true;
	if (o->input_done && o->pending == 0)
		stdin_end(o);
}

static void stdin_frame(agent_op *op, const sbx_proto_frame *f)
{
	stdin_op *o = (stdin_op *)op;

	if (f->kind == SBX_PROTO_DATA)
		stdin_data(o, f);
	else if (f->kind == SBX_PROTO_CANCEL)
		stdin_fail(o, SBX_PROTO_E_CANCELLED, "cancelled");
}

static void stdin_abort(agent_op *op)
{
	/* Bytes already given to the process still go in. */
	stdin_free((stdin_op *)op);
}

static const agent_op_vtbl stdin_vtbl = {
	.frame = stdin_frame,
	.writable = agent_op_proc_no_writable,
	.abort = stdin_abort,
};

void agent_op_proc_stdin(agent_session *s, uint64_t id, const msgpack_object *args)
{
	agent_bg *b = agent_op_proc_find(s, id, "proc.stdin", args);
	sbx_err err = { 0 };
	stdin_op *o;
	bool eof;

	if (!b)
		return;
	if (bool_arg(args, "eof", &eof, &err) < 0) {
		agent_op_proc_fail(s, id, SBX_PROTO_E_BAD_REQUEST, err.msg);
		return;
	}
	o = agent_op_proc_new(s, id, sizeof(*o), &stdin_vtbl, b, stdin_changed, stdin_gone);
	if (!o)
		return;
	if (agent_bg_stdin_claim(b, stdin_done, o, &err) < 0) {
		agent_op_proc_free(&o->p, true);
		agent_op_proc_fail_err(s, id, &err);
		return;
	}
	o->close_after = eof;
}
