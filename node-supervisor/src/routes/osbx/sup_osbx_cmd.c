/* OpenSandbox's execd commands on sbx's exec and background processes.
 * A foreground command is a streamed exec (output with backpressure; the
 * client hanging up kills it), told as their event stream: one bare JSON
 * object per event and a blank line, "init" with the command's id, one
 * "stdout"/"stderr" event per line, "execution_complete", a non-zero exit
 * as an "error" whose evalue is the exit code, "ping" while it is quiet. A
 * background command is a background process (proc.start): its id is its
 * pid, its status proc.get, its logs proc.output from a cursor (the output
 * offset), its interrupt proc.kill. */
#include "sup_osbx_int.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "sbx/proto.h"
#include "sup_agent.h"
#include "sup_query.h"

/* The most a logs answer holds (a ring is 1 MiB unless asked bigger). */
#define LOGS_MAX (64u << 20)

enum { K_START = 1, K_STATUS, K_LOGS, K_KILL };

uint64_t sup_osbx_now_ms(void)
{
	struct timeval tv;
	gettimeofday(&tv, NULL);
	return (uint64_t)tv.tv_sec * 1000 + (uint64_t)tv.tv_usec / 1000;
}

static void fg_unlink(sup_oq *q)
{
	if (!q->fg_prev)
		return;
	*q->fg_prev = q->fg_next;
	if (q->fg_next)
		q->fg_next->fg_prev = q->fg_prev;
	q->fg_prev = NULL;
	q->fg_next = NULL;
}

void sup_osbx_cmd_release(sup_oq *q)
{
	fg_unlink(q);
	sup_stream_free(q->s);
	q->s = NULL;
	for (int i = 0; i < 2; i++)
		if (q->line[i])
			evbuffer_free(q->line[i]);
	if (q->logs)
		evbuffer_free(q->logs);
	sbx_proto_args_destroy(&q->args);
	sup_exec_spec_free(&q->spec);
}

json_t *sup_osbx_event(const char *type)
{
	return json_pack("{s:s, s:I}", "type", type, "timestamp", (json_int_t)sup_osbx_now_ms());
}

/* ---- foreground ---- */

json_t *sup_osbx_text_event(int ch, const char *p, size_t n)
{
	json_t *o = sup_osbx_event(ch ? "stderr" : "stdout");
	if (o && sup_http_set_bytes(o, "text", p, n) < 0) {
		json_decref(o);
		o = NULL;
	}
	if (!o)
		o = json_pack("{s:s, s:{s:s, s:s}}", "type", "error", "error", "ename", "internal", "evalue",
			      "out of memory");
	return o;
}

static void put_line(sup_oq *q, int ch, const char *p, size_t n, size_t cost)
{
	sup_stream_json_cost(q->s, "", sup_osbx_text_event(ch, p, n), cost);
}

bool sup_osbx_lines(struct evbuffer *b, bool flush,
		    void (*fn)(void *ud, const char *p, size_t n, bool last), void *ud)
{
	char *prev = NULL;
	size_t prev_n = 0;
	for (;;) {
		size_t have = evbuffer_get_length(b), n, skip = 0;
		struct evbuffer_ptr nl = evbuffer_search(b, "\n", 1, NULL);
		if (nl.pos >= 0 && (size_t)nl.pos <= SUP_OSBX_LINE_MAX)
			n = (size_t)nl.pos, skip = 1;
		else if (have >= SUP_OSBX_LINE_MAX)
			n = SUP_OSBX_LINE_MAX;
		else if (flush && have)
			n = have;
		else
			break;
		char *line = malloc(n ? n : 1);
		if (!line)
			break;
		evbuffer_remove(b, line, n);
		evbuffer_drain(b, skip);
		if (prev)
			fn(ud, prev, prev_n, false);
		free(prev);
		prev = line;
		prev_n = n;
	}
	if (prev)
		fn(ud, prev, prev_n, true);
	free(prev);
	return prev != NULL;
}

typedef struct fg_lines {
	sup_oq *q;
	int ch;
	size_t cost;
} fg_lines;

static void fg_line(void *ud, const char *p, size_t n, bool last)
{
	fg_lines *l = ud;
	put_line(l->q, l->ch, p, n, last ? l->cost : 0);
}

/* Every whole line in the channel's buffer goes out (or a piece of
 * SUP_OSBX_LINE_MAX of a longer one); at the end (flush) the rest too. The
 * cost goes with the last event, or back at once when none went. */
static void drain_lines(sup_oq *q, int ch, size_t cost, bool flush)
{
	fg_lines l = { q, ch, cost };
	if (!sup_osbx_lines(q->line[ch], flush, fg_line, &l) && cost && q->op)
		sup_op_consumed(q->op, cost);
}

static void fg_data(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_oq *q = ud;
	int i = ch == SUP_CH_STDERR;
	if (!q->line[i] && !(q->line[i] = evbuffer_new())) {
		sup_op_consumed(q->op, cost);
		return;
	}
	evbuffer_add(q->line[i], p, n);
	drain_lines(q, i, cost, false);
}

static void fg_end(sup_oq *q, json_t *last)
{
	fg_unlink(q);
	sup_stream_json(q->s, "", last);
	sup_stream_end(q->s);
	q->s = NULL;
}

json_t *sup_osbx_error_event(const char *name, const char *value)
{
	json_t *o = sup_osbx_event("error");
	if (o)
		json_object_set_new(o, "error",
				    json_pack("{s:s, s:s, s:[]}", "ename", name, "evalue", value, "traceback"));
	return o;
}

static void fg_done(int rc, const sup_exec_status *st, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	q->op = NULL;
	for (int i = 0; i < 2; i++)
		if (q->line[i])
			drain_lines(q, i, 0, true);
	if (rc < 0) {
		const char *code;
		sup_http_status("opensandbox", err->code, &code);
		fg_end(q, sup_osbx_error_event(code, err->msg[0] ? err->msg : code));
		return;
	}
	char v[32];
	if (st->exited && st->exit_code == 0) {
		json_t *o = sup_osbx_event("execution_complete");
		if (o)
			json_object_set_new(o, "execution_time", json_integer((json_int_t)(sup_osbx_now_ms() - q->started_ms)));
		fg_end(q, o);
		return;
	}
	/* Killed by a signal: 128 + it, as a shell says. */
	snprintf(v, sizeof(v), "%d", st->exited ? st->exit_code : 128 + st->signal);
	fg_end(q, sup_osbx_error_event(st->timed_out ? "CommandTimeout" : "CommandExecError", v));
}

void sup_osbx_credit(size_t cost, void *ud)
{
	sup_oq *q = ud;
	if (q->op)
		sup_op_consumed(q->op, cost);
}

static const sup_core_stream_cbs fg_cbs = { .on_data = fg_data, .on_done = fg_done };

int sup_osbx_parse_cmd(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_oq *q = state;
	q->x = ctx;
	q->id = in->id;
	sbx_proto_args_init(&q->args);
	return sup_osbx_parse_command(in->body, in->body_len, &q->spec, &q->background, err);
}

static const sup_core_call_cbs call_cbs;

int sup_osbx_act_cmd(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	sup_osbx_ctx *x = q->x;
	q->r = r;
	q->started_ms = sup_osbx_now_ms();
	if (q->background) {
		const sup_env *env = NULL;
		q->kind = K_START;
		q->cbs = &call_cbs;
		int rc = sup_core_command_prepare(x->core, q->id, &q->spec, &env, err);
		if (rc == 0)
			rc = sup_agent_encode_exec_args(&q->spec, env, &q->args, err);
		return rc < 0 ? rc
			      : sup_core_call(x->core, q->id, SBX_OP_PROC_START, &q->args, q->cbs, q,
					      &q->op, err);
	}
	int rc = sup_core_exec_stream(x->core, q->id, &q->spec, &fg_cbs, q, &q->op, err);
	if (rc < 0)
		return rc;
	q->s = sup_stream_start(r, SUP_STREAM_BARE, sup_osbx_credit, q);
	if (!q->s)
		return sbx_err_set(err, -ENOMEM, "out of memory starting the stream");
	sup_stream_keepalive_text(q->s, SUP_OSBX_PING);
	sup_stream_keepalive(q->s, SUP_OSBX_PING_S);
	snprintf(q->cmd_id, sizeof(q->cmd_id), "fg-%llu", (unsigned long long)++x->fg_seq);
	q->fg_next = x->fg;
	if (x->fg)
		x->fg->fg_prev = &q->fg_next;
	x->fg = q;
	q->fg_prev = &x->fg;
	json_t *o = sup_osbx_event("init");
	if (o)
		json_object_set_new(o, "text", json_string(q->cmd_id));
	sup_stream_json(q->s, "", o);
	return 0;
}

/* ---- background: proc.* ---- */

/* A guest's pid as a command id, or -EINVAL. */
static int pid_of(const char *s, long *out)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > 10 || strspn(s, "0123456789") != n)
		return -EINVAL;
	long v = strtol(s, NULL, 10);
	if (v < 1 || v > INT_MAX)
		return -EINVAL;
	*out = v;
	return 0;
}

static int pid_arg(sup_oq *q, const char *s, sbx_err *err)
{
	if (pid_of(s, &q->pid) < 0)
		return sbx_err_set(err, -ENOENT, "no command %.40s", s ? s : "");
	sbx_proto_args_uint(&q->args, "pid", (uint64_t)q->pid);
	return 0;
}

int sup_osbx_parse_status(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_oq *q = state;
	q->x = ctx;
	q->id = in->id;
	q->kind = K_STATUS;
	q->cbs = &call_cbs;
	sbx_proto_args_init(&q->args);
	return pid_arg(q, in->pid, err);
}

int sup_osbx_parse_logs(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "cursor", NULL };
	sup_oq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	q->x = ctx;
	q->id = in->id;
	q->kind = K_LOGS;
	q->cbs = &call_cbs;
	sbx_proto_args_init(&q->args);
	int rc = pid_arg(q, in->pid, err);
	if (rc == 0)
		rc = sup_query_parse(in->query, keys, &qs, err);
	if (rc == 0)
		rc = sup_query_uint(&qs, "cursor", 0, UINT64_MAX / 2, 0, &q->cursor, err);
	if (rc < 0)
		return rc;
	sbx_proto_args_uint(&q->args, "offset", q->cursor);
	sbx_proto_args_bool(&q->args, "follow", false);
	if (!(q->logs = evbuffer_new()))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

int sup_osbx_parse_interrupt(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "id", NULL };
	sup_oq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	size_t n;
	q->x = ctx;
	q->id = in->id;
	q->kind = K_KILL;
	q->cbs = &call_cbs;
	sbx_proto_args_init(&q->args);
	int rc = sup_query_parse(in->query, keys, &qs, err);
	const char *id = rc < 0 ? NULL : sup_query_get(&qs, "id", &n);
	if (rc < 0)
		return rc;
	if (!id || n == 0 || n >= sizeof(q->target))
		return sbx_err_set(err, -EINVAL, "query parameter \"id\": the command's id");
	memcpy(q->target, id, n + 1);
	if (strncmp(q->target, "fg-", 3) == 0 || strncmp(q->target, "sess-", 5) == 0)
		return 0;
	return pid_arg(q, q->target, err);
}

static json_t *when(uint64_t ms)
{
	char b[40];
	if (ms > (uint64_t)INT64_MAX / 2)
		return json_null();
	sup_osbx_time_ms(ms, b, sizeof(b));
	return json_string(b);
}

/* proc.get's description (checked as every family's is) as their
 * CommandStatus. */
static json_t *status_json(sup_oq *q, const msgpack_object *res, sbx_err *err)
{
	sup_api_proc p;
	if (sup_api_proc_read(res, true, q->pid, &p, err) < 0)
		return NULL;
	bool running = !p.exited;
	char id[24];
	snprintf(id, sizeof(id), "%ld", q->pid);
	json_t *o = json_pack("{s:s, s:b, s:o, s:o}", "id", id, "running", running, "started_at",
			      when(p.started_ms), "finished_at", running ? json_null() : when(p.ended_ms));
	if (!o)
		return sbx_err_set(err, -ENOMEM, "out of memory"), NULL;
	/* the command as given: sh -c's script */
	if (p.argv->via.array.size == 3)
		sup_http_set_bytes(o, "content", p.argv->via.array.ptr[2].via.str.ptr,
				   p.argv->via.array.ptr[2].via.str.size);
	if (running) {
		json_object_set_new(o, "exit_code", json_null());
	} else if (p.has_code) {
		json_object_set_new(o, "exit_code", json_integer(p.code));
	} else {
		char m[40];
		snprintf(m, sizeof(m), "killed by signal %d", p.signal);
		json_object_set_new(o, "exit_code", json_integer(128 + p.signal));
		json_object_set_new(o, "error", json_string(m));
	}
	return o;
}

static void logs_data(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_oq *q = ud;
	if (evbuffer_get_length(q->logs) + n <= LOGS_MAX)
		evbuffer_add(q->logs, p, n);
	sup_op_consumed(q->op, cost);
}

/* A gap (output the ring dropped): the cursor moves past it. */
static void logs_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_oq *q = ud;
	sup_op_consumed(q->op, cost);
}

static void call_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	switch (q->kind) {
	case K_START: {
		uint64_t pid;
		char id[24];
		if (!sbx_proto_get_uint(res, "pid", &pid) || pid < 1 || pid > INT_MAX) {
			sbx_err_set(&e, -EPROTO, "agent: proc.start without a pid");
			break;
		}
		snprintf(id, sizeof(id), "%llu", (unsigned long long)pid);
		sup_http_log_tag(q->r, " pid %s", id);
		q->s = sup_stream_start(q->r, SUP_STREAM_BARE, NULL, NULL);
		if (!q->s) {
			sbx_err_set(&e, -ENOMEM, "out of memory");
			break;
		}
		json_t *o = sup_osbx_event("init");
		if (o)
			json_object_set_new(o, "text", json_string(id));
		sup_stream_json(q->s, "", o);
		sup_stream_end(q->s);
		q->s = NULL;
		return;
	}
	case K_STATUS: {
		json_t *o = status_json(q, res, &e);
		if (o) {
			sup_http_json(q->r, 200, o);
			return;
		}
		break;
	}
	case K_LOGS: {
		uint64_t next;
		char cur[24];
		if (!sbx_proto_get_uint(res, "next_offset", &next)) {
			sbx_err_set(&e, -EPROTO, "agent: proc.output without next_offset");
			break;
		}
		snprintf(cur, sizeof(cur), "%llu", (unsigned long long)next);
		sup_http_header(q->r, "EXECD-COMMANDS-TAIL-CURSOR", cur);
		sup_http_header(q->r, "Content-Type", "text/plain; charset=utf-8");
		sup_http_start(q->r, 200, evbuffer_get_length(q->logs));
		sup_http_write(q->r, q->logs);
		sup_http_end(q->r);
		return;
	}
	default:
		sup_http_json(q->r, 200, NULL);
		return;
	}
	sup_core_blame(q->x->core, q->id, &e);
	sup_http_fail(q->r, &e);
}

static const sup_core_call_cbs call_cbs = { .on_done = call_done };
static const sup_core_call_cbs logs_cbs = {
	.on_output = logs_data, .on_event = logs_event, .on_done = call_done
};

/* A foreground command is interrupted by cancelling its exec (the agent
 * kills its tree); its stream ends with an error event. */
static int interrupt_fg(sup_oq *q, sbx_err *err)
{
	for (sup_oq *f = q->x->fg; f; f = f->fg_next) {
		if (strcmp(f->cmd_id, q->target) != 0 || strcmp(f->id, q->id) != 0)
			continue;
		if (f->op)
			sup_op_cancel(f->op);
		f->op = NULL;
		for (int i = 0; i < 2; i++)
			if (f->line[i])
				drain_lines(f, i, 0, true);
		fg_end(f, sup_osbx_error_event("CommandInterrupted", "130"));
		sup_http_json(q->r, 200, NULL);
		return 0;
	}
	return sbx_err_set(err, -ENOENT, "no command %s running", q->target);
}

int sup_osbx_act_call(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	q->r = r;
	if (q->kind == K_KILL && strncmp(q->target, "fg-", 3) == 0)
		return interrupt_fg(q, err);
	if (q->kind == K_KILL && strncmp(q->target, "sess-", 5) == 0)
		return sup_osbx_sess_interrupt(q, err);
	if (q->pid)
		sup_http_log_tag(r, " pid %ld", q->pid);
	const char *op = q->kind == K_STATUS ? SBX_OP_PROC_GET
			 : q->kind == K_LOGS ? SBX_OP_PROC_OUTPUT
					     : SBX_OP_PROC_KILL;
	return sup_core_call(q->x->core, q->id, op, &q->args, q->kind == K_LOGS ? &logs_cbs : q->cbs,
			     q, &q->op, err);
}
