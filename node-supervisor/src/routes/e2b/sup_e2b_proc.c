/* envd's process.Process on sbx's background processes. Every E2B command
 * is one (proc.start): it outlives the client's connection, as theirs do,
 * and Connect finds it again by pid. Start and Connect stream its output
 * (proc.output with follow) as their ProcessEvent: start with the pid
 * first, data as base64, keepalives while quiet, end with the exit. A
 * lifetime asked in Connect-Timeout-Ms is the process's timeout. */
#include "sup_e2b_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_agent.h"
#include "sup_b64.h"
#include "sup_text.h"

#define KEEPALIVE "{\"event\":{\"keepalive\":{}}}"

void sup_e2b_proc_release(sup_eq *q)
{
	if (q->s)
		sup_stream_free(q->s);
	q->s = NULL;
	sbx_proto_args_destroy(&q->args);
	sup_exec_spec_free(&q->spec);
	json_decref(q->list);
	json_decref(q->pending);
	free(q->input);
	q->list = q->pending = NULL;
	q->input = NULL;
}

/* Go's name of a signal, as their envd's status says it ("signal: killed"). */
static const char *signal_words(int sig)
{
	switch (sig) {
	case SIGHUP: return "hangup";
	case SIGINT: return "interrupt";
	case SIGQUIT: return "quit";
	case SIGILL: return "illegal instruction";
	case SIGABRT: return "aborted";
	case SIGBUS: return "bus error";
	case SIGFPE: return "floating point exception";
	case SIGKILL: return "killed";
	case SIGUSR1: return "user defined signal 1";
	case SIGSEGV: return "segmentation fault";
	case SIGUSR2: return "user defined signal 2";
	case SIGPIPE: return "broken pipe";
	case SIGALRM: return "alarm clock";
	case SIGTERM: return "terminated";
	default: return NULL;
	}
}

/* Their EndEvent for an exited process. */
static json_t *end_event(const sup_api_proc *p)
{
	char status[64];
	json_t *end;
	if (p->has_code) {
		snprintf(status, sizeof(status), "exit status %d", p->code);
		end = p->code ? json_pack("{s:i, s:b, s:s, s:s}", "exitCode", p->code, "exited", 1, "status",
					  status, "error", status)
			      : json_pack("{s:b, s:s}", "exited", 1, "status", status);
	} else {
		const char *w = signal_words(p->signal);
		if (w)
			snprintf(status, sizeof(status), "signal: %s", w);
		else
			snprintf(status, sizeof(status), "signal: signal %d", p->signal);
		end = json_pack("{s:i, s:b, s:s, s:s}", "exitCode", -1, "exited", 0, "status", status,
				"error", status);
	}
	return end ? json_pack("{s:{s:o}}", "event", "end", end) : NULL;
}

/* ---- the output stream (Start and Connect) ---- */

static void out_output(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_eq *q = ud;
	size_t bl;
	SBX_AUTO_FREE char *b = sup_base64_encode(p, n, &bl);
	const char *key = q->pty ? "pty" : ch == SUP_CH_STDERR ? "stderr" : "stdout";
	json_t *o = b ? json_pack("{s:{s:{s:s%}}}", "event", "data", key, b, bl) : NULL;
	q->off += n;
	if (!o) {
		sbx_err e;
		sbx_err_set(&e, -ENOMEM, "out of memory");
		if (q->op)
			sup_op_cancel(q->op);
		q->op = NULL;
		sup_e2b_rpc_end(q, e.code, &e);
		return;
	}
	sup_stream_json_cost(q->s, "", o, cost);
}

/* A gap (the ring dropped bytes this reader had not got): their stream
 * has no word for it; the output goes on after it. */
static void out_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_eq *q = ud;
	uint64_t to = 0;
	sbx_err e;
	int g = sup_api_gap_read(map, q->off, &to, &e);
	if (g < 0) {
		sup_core_blame(q->x->core, q->id, &e);
		if (q->op)
			sup_op_cancel(q->op);
		q->op = NULL;
		sup_e2b_rpc_end(q, e.code, &e);
		return;
	}
	if (g > 0)
		q->off = to;
	sup_op_consumed(q->op, cost);
}

/* The agent's process description in result, checked (full: proc.get's);
 * when it breaks the protocol the sandbox is blamed and q's stream ends
 * with the error: false. */
static bool stream_desc(sup_eq *q, const msgpack_object *result, bool full, long pid, sup_api_proc *p)
{
	sbx_err e;
	sbx_err_clear(&e);
	if (sup_api_proc_read(result, full, pid, p, &e) == 0)
		return true;
	sup_core_blame(q->x->core, q->id, &e);
	sup_e2b_rpc_end(q, e.code, &e);
	return false;
}

static void out_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	sup_api_proc p;
	sbx_err e;
	q->op = NULL;
	if (rc < 0) {
		sup_e2b_rpc_end(q, rc, err);
		return;
	}
	if (!stream_desc(q, result, false, q->pid, &p))
		return;
	if (!p.exited) {
		sbx_err_set(&e, -EPROTO, "agent: proc.output ended before the process did");
		sup_core_blame(q->x->core, q->id, &e);
		sup_e2b_rpc_end(q, e.code, &e);
		return;
	}
	sup_stream_json(q->s, "", end_event(&p));
	sup_e2b_rpc_end(q, 0, NULL);
}

/* A followed output may rightly be quiet for long. */
static const sup_core_call_cbs out_cbs = {
	.on_output = out_output, .on_event = out_event, .on_done = out_done,
	.wait = SUP_AGENT_WAIT_QUIET
};

/* The stream starts: the start event, then the output from q->off on. */
static void follow(sup_eq *q)
{
	sbx_err e;
	if (!sup_e2b_rpc_stream(q, KEEPALIVE)) {
		sbx_err_set(&e, -ENOMEM, "out of memory");
		sup_http_fail(q->r, &e);
		return;
	}
	sup_stream_json(q->s, "", json_pack("{s:{s:{s:I}}}", "event", "start", "pid", (json_int_t)q->pid));
	sbx_proto_args_destroy(&q->args);
	sbx_proto_args_init(&q->args);
	sbx_proto_args_uint(&q->args, "pid", (uint64_t)q->pid);
	sbx_proto_args_uint(&q->args, "offset", q->off);
	sbx_proto_args_bool(&q->args, "follow", true);
	if (sup_core_call(q->x->core, q->id, SBX_OP_PROC_OUTPUT, &q->args, &out_cbs, q, &q->op, &e) < 0)
		sup_e2b_rpc_end(q, e.code, &e);
}

/* ---- Start ---- */

static void start_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	sup_api_proc p;
	q->op = NULL;
	if (rc < 0) {
		sup_e2b_rpc_end(q, rc, err);
		return;
	}
	if (!stream_desc(q, result, false, 0, &p))
		return;
	q->pid = (long)p.pid;
	q->off = 0;
	follow(q);
}

static const sup_core_call_cbs start_cbs = { .on_done = start_done };

/* Their StartRequest into sbx's process-start body. */
static int start_body(sup_eq *q, json_t **out, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(q->r);
	json_t *proc = sup_e2b_field(q->msg, "process", NULL);
	json_t *cmd = sup_e2b_field(proc, "cmd", NULL);
	json_t *args = sup_e2b_field(proc, "args", NULL);
	json_t *envs = sup_e2b_field(proc, "envs", NULL);
	json_t *cwd = sup_e2b_field(proc, "cwd", NULL);
	json_t *pty = sup_e2b_field(q->msg, "pty", NULL);
	json_t *tag = sup_e2b_field(q->msg, "tag", NULL);
	json_t *sin = sup_e2b_field(q->msg, "stdin", NULL);
	uint64_t ms;
	if (!json_is_string(cmd) || json_string_length(cmd) == 0)
		return sbx_err_set(err, -EINVAL, "field \"process.cmd\": want the program");
	if ((args && !json_is_array(args)) || (cwd && !json_is_string(cwd)) ||
	    (sin && !json_is_boolean(sin)) || (tag && !json_is_string(tag)))
		return sbx_err_set(err, -EINVAL, "process.args, process.cwd, stdin or tag of the wrong type");
	if (cwd && json_string_value(cwd)[0] != '/')
		return sbx_err_set(err, -EINVAL, "field \"process.cwd\": want an absolute path (sbx does not "
						 "expand ~ or a relative one)");
	if (sup_e2b_rpc_timeout(in, &ms, err) < 0)
		return err->code;
	json_t *argv = json_pack("[O]", cmd);
	json_t *b = argv ? json_pack("{s:o, s:b}", "argv", argv, "stdin", sin ? json_is_true(sin) : 1)
			 : NULL;
	if (!b)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	*out = b;
	if (args)
		json_array_extend(argv, args);
	if (envs)
		json_object_set(b, "env", envs);
	if (cwd)
		json_object_set(b, "cwd", cwd);
	if (tag)
		json_object_set(b, "tag", tag);
	if (q->user)
		json_object_set_new(b, "user", json_string(q->user));
	if (ms)
		json_object_set_new(b, "timeout", json_real((double)ms / 1000.0));
	json_t *size = sup_e2b_field(pty, "size", NULL);
	if (pty) {
		json_t *c = sup_e2b_field(size, "cols", NULL), *r = sup_e2b_field(size, "rows", NULL);
		json_object_set_new(b, "pty", json_pack("{s:O, s:O}", "cols", c ? c : json_integer(80),
							"rows", r ? r : json_integer(24)));
		q->pty = true;
	}
	return 0;
}

int sup_e2b_act_start(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	SBX_AUTO_JSON json_t *b = NULL;
	const sup_env *env = NULL;
	sbx_err e;
	q->r = r;
	(void)err;
	int rc = q->early ? (e = q->early_err, q->early) : start_body(q, &b, &e);
	if (rc == 0)
		rc = sup_api_parse_process_start(b, &q->spec, &q->args, &e);
	if (rc == 0)
		rc = sup_core_command_prepare(q->x->core, q->id, &q->spec, &env, &e);
	if (rc == 0)
		rc = sup_agent_encode_exec_args(&q->spec, env, &q->args, &e);
	if (rc == 0)
		rc = sup_core_call(q->x->core, q->id, SBX_OP_PROC_START, &q->args, &start_cbs, q, &q->op, &e);
	if (rc < 0)
		sup_e2b_rpc_end(q, rc, &e);
	return 0;
}

/* ---- Connect ---- */

static void connect_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	sup_api_proc p;
	q->op = NULL;
	if (rc < 0) {
		sup_e2b_rpc_end(q, rc, err);
		return;
	}
	if (!stream_desc(q, result, true, q->pid, &p))
		return;
	q->pty = p.pty;
	q->off = p.out_end; /* from now on, as theirs */
	follow(q);
}

static const sup_core_call_cbs connect_cbs = { .on_done = connect_done };

int sup_e2b_act_connect(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	sbx_err e;
	q->r = r;
	(void)err;
	int rc = q->early ? (e = q->early_err, q->early) : sup_e2b_rpc_pid(q->msg, &q->pid, &e);
	if (rc == 0) {
		sbx_proto_args_uint(&q->args, "pid", (uint64_t)q->pid);
		rc = sup_core_call(q->x->core, q->id, SBX_OP_PROC_GET, &q->args, &connect_cbs, q, &q->op, &e);
	}
	if (rc < 0)
		sup_e2b_rpc_end(q, rc, &e);
	return 0;
}

/* ---- List: proc.list, then proc.get of each running one (argv) ---- */

static void list_next(sup_eq *q);

static void list_get_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	sup_api_proc p;
	sbx_err e;
	q->op = NULL;
	if (rc == -ENOENT) { /* it ended and went meanwhile */
		list_next(q);
		return;
	}
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	if (sup_api_proc_read(result, true, q->pid, &p, &e) < 0) {
		sup_core_blame(q->x->core, q->id, &e);
		sup_http_fail(q->r, &e);
		return;
	}
	json_t *args = json_array();
	const char *cmd = "";
	size_t cl = 0;
	for (uint32_t i = 0; args && i < p.argv->via.array.size; i++) {
		const msgpack_object *a = &p.argv->via.array.ptr[i];
		if (i == 0) {
			cmd = a->via.str.ptr;
			cl = a->via.str.size;
		} else {
			size_t tl;
			SBX_AUTO_FREE char *t = sup_utf8_repair((const uint8_t *)a->via.str.ptr, a->via.str.size, &tl);
			json_array_append_new(args, t ? json_stringn(t, tl) : json_string(""));
		}
	}
	size_t tl;
	SBX_AUTO_FREE char *c = sup_utf8_repair((const uint8_t *)cmd, cl, &tl);
	json_t *o = args && c ? json_pack("{s:I, s:{s:s%, s:o, s:{}}}", "pid", (json_int_t)p.pid, "config",
					  "cmd", c, tl, "args", args, "envs")
			      : NULL;
	if (o && p.tag)
		json_object_set_new(o, "tag", json_stringn(p.tag, p.tag_len));
	if (!o || json_array_append_new(q->list, o) < 0) {
		sbx_err_set(&e, -ENOMEM, "out of memory");
		sup_http_fail(q->r, &e);
		return;
	}
	list_next(q);
}

static const sup_core_call_cbs list_get_cbs = { .on_done = list_get_done };

static void list_next(sup_eq *q)
{
	sbx_err e;
	if (json_array_size(q->pending) == 0) {
		sup_e2b_rpc_reply(q->r, json_pack("{s:O}", "processes", q->list));
		return;
	}
	q->pid = (long)json_integer_value(json_array_get(q->pending, 0));
	json_array_remove(q->pending, 0);
	sbx_proto_args_destroy(&q->args);
	sbx_proto_args_init(&q->args);
	sbx_proto_args_uint(&q->args, "pid", (uint64_t)q->pid);
	if (sup_core_call(q->x->core, q->id, SBX_OP_PROC_GET, &q->args, &list_get_cbs, q, &q->op, &e) < 0)
		sup_http_fail(q->r, &e);
}

static void list_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	sbx_err e;
	q->op = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	const msgpack_object *ps = sbx_proto_map_get(result, "processes");
	if (!ps || ps->type != MSGPACK_OBJECT_ARRAY) {
		sbx_err_set(&e, -EPROTO, "agent: proc.list without \"processes\"");
		sup_core_blame(q->x->core, q->id, &e);
		sup_http_fail(q->r, &e);
		return;
	}
	q->list = json_array();
	q->pending = json_array();
	for (uint32_t i = 0; q->pending && i < ps->via.array.size; i++) {
		sup_api_proc p;
		if (sup_api_proc_read(&ps->via.array.ptr[i], false, 0, &p, &e) < 0) {
			sup_core_blame(q->x->core, q->id, &e);
			sup_http_fail(q->r, &e);
			return;
		}
		if (!p.exited)
			json_array_append_new(q->pending, json_integer((json_int_t)p.pid));
	}
	if (!q->list || !q->pending) {
		sbx_err_set(&e, -ENOMEM, "out of memory");
		sup_http_fail(q->r, &e);
		return;
	}
	list_next(q);
}

static const sup_core_call_cbs list_cbs = { .on_done = list_done };

int sup_e2b_act_list(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	q->r = r;
	return sup_core_call(q->x->core, q->id, SBX_OP_PROC_LIST, &q->args, &list_cbs, q, &q->op, err);
}

/* ---- SendInput and CloseStdin: proc.stdin ---- */

static void in_pump(void *ud)
{
	sup_eq *q = ud;
	while (q->op && q->input_off <= q->input_len) {
		sbx_err e;
		size_t left = q->input_len - q->input_off;
		int n = sup_core_call_send(q->op, SBX_CH_STDIN, q->input + q->input_off, left, true, &e);
		if (n < 0 || (size_t)n == left) {
			q->input_off = q->input_len + 1; /* all went (or the END tells why not) */
			return;
		}
		if (n == 0)
			return; /* on_writable brings us back */
		q->input_off += (size_t)n;
	}
}

static void empty_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	(void)result;
	q->op = NULL;
	if (rc < 0)
		sup_http_fail(q->r, err);
	else
		sup_e2b_rpc_reply(q->r, NULL);
}

static const sup_core_call_cbs in_cbs = {
	.on_done = empty_done, .on_writable = in_pump, .wait = SUP_AGENT_WAIT_SENDS
};
static const sup_core_call_cbs empty_cbs = { .on_done = empty_done };

/* Their ProcessInput's bytes (stdin or pty, base64) into q->input. */
static int input_bytes(sup_eq *q, sbx_err *err)
{
	json_t *in = sup_e2b_field(q->msg, "input", NULL);
	json_t *b = sup_e2b_field(in, "stdin", NULL);
	if (!b)
		b = sup_e2b_field(in, "pty", NULL);
	if (!json_is_string(b))
		return sbx_err_set(err, -EINVAL, "field \"input\": want {\"stdin\": base64} or {\"pty\": base64}");
	size_t bad;
	q->input = sup_base64_decode(json_string_value(b), json_string_length(b), &q->input_len, &bad);
	if (!q->input)
		return bad == SIZE_MAX ? sbx_err_set(err, -ENOMEM, "out of memory")
				       : sbx_err_set(err, -EINVAL, "field \"input\": not base64");
	return 0;
}

int sup_e2b_act_input(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	bool close = strstr(sup_http_input(r)->path, "/CloseStdin") != NULL;
	q->r = r;
	int rc = sup_e2b_rpc_pid(q->msg, &q->pid, err);
	if (rc == 0 && !close)
		rc = input_bytes(q, err);
	if (rc < 0)
		return rc;
	sbx_proto_args_uint(&q->args, "pid", (uint64_t)q->pid);
	sbx_proto_args_bool(&q->args, "eof", close);
	rc = sup_core_call(q->x->core, q->id, SBX_OP_PROC_STDIN, &q->args, &in_cbs, q, &q->op, err);
	if (rc == 0)
		in_pump(q);
	return rc;
}

/* ---- SendSignal: SIGKILL ends the whole tree (proc.kill), SIGTERM is
 * sent; a process that has exited is not found, as theirs (their kill()
 * returns false), so proc.get asks first ---- */

static void signal_get_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	sup_api_proc p;
	sbx_err e;
	q->op = NULL;
	if (rc == 0 && sup_api_proc_read(result, false, q->pid, &p, &e) < 0) {
		sup_core_blame(q->x->core, q->id, &e);
		rc = e.code;
	} else if (rc == 0 && p.exited) {
		rc = sbx_err_set(&e, -ENOENT, "process %ld has exited", q->pid);
	} else if (rc < 0) {
		e = *err;
	}
	if (rc == 0) {
		sbx_proto_args_destroy(&q->args);
		sbx_proto_args_init(&q->args);
		sbx_proto_args_uint(&q->args, "pid", (uint64_t)q->pid);
		if (q->kind == SIGTERM)
			sbx_proto_args_uint(&q->args, "signal", SIGTERM);
		rc = sup_core_call(q->x->core, q->id, q->kind == SIGKILL ? SBX_OP_PROC_KILL : SBX_OP_PROC_SIGNAL,
				   &q->args, &empty_cbs, q, &q->op, &e);
	}
	if (rc < 0)
		sup_http_fail(q->r, &e);
}

static const sup_core_call_cbs signal_get_cbs = { .on_done = signal_get_done };

int sup_e2b_act_signal(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	q->r = r;
	int rc = sup_e2b_rpc_pid(q->msg, &q->pid, err);
	if (rc < 0)
		return rc;
	json_t *s = sup_e2b_field(q->msg, "signal", NULL);
	const char *name = json_string_value(s);
	json_int_t n = json_is_integer(s) ? json_integer_value(s)
		       : !name				   ? 0
		       : strcmp(name, "SIGNAL_SIGKILL") == 0 ? SIGKILL
		       : strcmp(name, "SIGNAL_SIGTERM") == 0 ? SIGTERM
							     : 0;
	if (n != SIGKILL && n != SIGTERM)
		return sbx_err_set(err, -EINVAL, "field \"signal\": want SIGNAL_SIGKILL or SIGNAL_SIGTERM");
	q->kind = (int)n;
	sbx_proto_args_uint(&q->args, "pid", (uint64_t)q->pid);
	return sup_core_call(q->x->core, q->id, SBX_OP_PROC_GET, &q->args, &signal_get_cbs, q, &q->op, err);
}

/* ---- Update: a terminal's new size ---- */

int sup_e2b_act_update(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	q->r = r;
	int rc = sup_e2b_rpc_pid(q->msg, &q->pid, err);
	if (rc < 0)
		return rc;
	json_t *size = sup_e2b_field(sup_e2b_field(q->msg, "pty", NULL), "size", NULL);
	if (!size) {
		sup_e2b_rpc_reply(r, NULL); /* nothing to change */
		return 0;
	}
	json_t *c = sup_e2b_field(size, "cols", NULL), *w = sup_e2b_field(size, "rows", NULL);
	if (!json_is_integer(c) || !json_is_integer(w) || json_integer_value(c) < 1 ||
	    json_integer_value(c) > 65535 || json_integer_value(w) < 1 || json_integer_value(w) > 65535)
		return sbx_err_set(err, -EINVAL, "field \"pty.size\": want cols and rows, 1..65535");
	sbx_proto_args_uint(&q->args, "pid", (uint64_t)q->pid);
	sbx_proto_args_uint(&q->args, "cols", (uint64_t)json_integer_value(c));
	sbx_proto_args_uint(&q->args, "rows", (uint64_t)json_integer_value(w));
	return sup_core_call(q->x->core, q->id, SBX_OP_PROC_RESIZE, &q->args, &empty_cbs, q, &q->op, err);
}
