/* The sandbox and process tools: each parses its arguments with the API's
 * own parser (sup_api.h) and calls the core as the operation's route does,
 * answering with the API's JSON (run_command and read_process_output also
 * with the output as text, cut at MT_SHOW_MAX with a note). */
#include "sup_mcp_tools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_agent.h"
#include "sup_text.h"

/* ---- sandboxes ---- */

static void sandbox_done(int rc, const sup_sandbox_view *v, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	c->op = NULL;
	if (rc < 0)
		sup_mcp_tool_fail(c, err);
	else
		sup_mcp_tool_json(c, sup_api_render_sandbox(v));
}

int sup_mcp_op_create(mt_call *c, sbx_err *err)
{
	SBX_AUTO_FREE char *body = json_dumps(c->body, JSON_COMPACT);
	if (!body)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int rc = sup_api_parse_create(body, strlen(body), &c->x->limits, &c->create, err);
	return rc < 0 ? rc : sup_core_create(c->x->core, c->who, &c->create, sandbox_done, c, &c->op, err);
}

static void add_view(const sup_sandbox_view *v, void *ud)
{
	json_array_append_new(ud, sup_api_render_sandbox(v));
}

int sup_mcp_op_list(mt_call *c, sbx_err *err)
{
	json_t *arr = json_array();
	if (!arr)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_core_list(c->x->core, c->who, add_view, arr);
	sup_mcp_tool_json(c, json_pack("{s:o}", "sandboxes", arr));
	return 0;
}

static void delete_done(int rc, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	c->op = NULL;
	if (rc < 0)
		sup_mcp_tool_fail(c, err);
	else
		sup_mcp_tool_json(c, json_pack("{s:s, s:b}", "id", c->id, "deleted", 1));
}

int sup_mcp_op_delete(mt_call *c, sbx_err *err)
{
	return sup_core_delete(c->x->core, c->who, c->id, delete_done, c, &c->op, err);
}

/* ---- run_command ---- */

/* "label:\n<text>" of one stream, cut at what was captured, with a note. */
static void show_stream(struct evbuffer *b, const char *label, const uint8_t *p, size_t n, bool cut)
{
	size_t tl;
	SBX_AUTO_FREE char *t = n ? sup_utf8_repair(p, n, &tl) : NULL;
	if (!n)
		return;
	evbuffer_add_printf(b, "--- %s ---\n", label);
	if (t)
		evbuffer_add(b, t, tl);
	if (n && p[n - 1] != '\n')
		evbuffer_add(b, "\n", 1);
	if (cut)
		evbuffer_add_printf(b, "[%s truncated: only its first %zu bytes are shown; write it to a file "
				       "and read that in parts, or narrow the command]\n", label, n);
}

static void run_done(int rc, const sup_exec_result *r, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	c->op = NULL;
	if (!r) {
		sup_mcp_tool_fail(c, err);
		return;
	}
	json_t *o = sup_api_render_exec(r);
	struct evbuffer *b = evbuffer_new();
	if (!o || !b) {
		json_decref(o);
		if (b)
			evbuffer_free(b);
		sbx_err e;
		sbx_err_set(&e, -ENOMEM, "out of memory rendering the result");
		sup_mcp_tool_fail(c, &e);
		return;
	}
	if (r->st.exited)
		evbuffer_add_printf(b, "exit code %d", r->st.exit_code);
	else
		evbuffer_add_printf(b, "killed by signal %d", r->st.signal);
	if (r->st.timed_out)
		evbuffer_add_printf(b, " (timed out)");
	if (r->st.oom_killed)
		evbuffer_add_printf(b, " (out of memory)");
	evbuffer_add_printf(b, "\n");
	show_stream(b, "stdout", r->out, r->out_len, r->out_truncated);
	show_stream(b, "stderr", r->err, r->err_len, r->err_truncated);
	/* The supervisor's own deadline passed: the API's error beside it. */
	if (rc < 0) {
		const char *code;
		sup_http_status(NULL, rc, &code);
		json_object_update_new(o, sup_http_error_json(code, err->msg));
		evbuffer_add_printf(b, "%s: %s\n", code, err->msg);
	}
	size_t n = evbuffer_get_length(b);
	const char *text = (const char *)evbuffer_pullup(b, -1);
	/* A result the supervisor made up when the agent let its deadline
	 * pass is an error beside what was captured (504 in the API). */
	sup_mcp_tool_result(c, text ? text : "", text ? n : 0, o, rc < 0);
	evbuffer_free(b);
}

int sup_mcp_op_run(mt_call *c, sbx_err *err)
{
	int rc = sup_api_parse_exec_obj(c->body, NULL, &c->spec, err);
	if (rc < 0)
		return rc;
	/* What is shown is captured; more than that costs memory for nothing. */
	if (!c->spec.max_output_set || c->spec.max_output > MT_SHOW_MAX) {
		c->spec.max_output = MT_SHOW_MAX;
		c->spec.max_output_set = true;
	}
	return sup_core_exec(c->x->core, c->id, &c->spec, run_done, c, &c->op, err);
}

/* ---- run_code: a cell in a context (sup_ctx.h) ---- */

/* Text of s, cut at room bytes (a note says so). */
static void show_text(struct evbuffer *b, const char *label, const char *s, size_t n, size_t *room)
{
	size_t take = n < *room ? n : *room;

	if (!n)
		return;
	evbuffer_add_printf(b, "--- %s ---\n", label);
	evbuffer_add(b, s, take);
	if (take && s[take - 1] != '\n')
		evbuffer_add(b, "\n", 1);
	if (take < n)
		evbuffer_add_printf(b, "[%s cut at %zu of %zu bytes: the whole is in the structured result]\n", label,
				    take, n);
	*room -= take;
}

static void code_done(int rc, json_t *answer, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	struct evbuffer *b;
	json_t *res, *v, *e;
	size_t i, room = MT_SHOW_MAX;

	c->crun = NULL;
	if (rc < 0) {
		sup_mcp_tool_fail(c, err);
		return;
	}
	b = evbuffer_new();
	if (!b) {
		sbx_err e2;
		sbx_err_set(&e2, -ENOMEM, "out of memory rendering the result");
		sup_mcp_tool_fail(c, &e2);
		return;
	}
	v = json_object_get(answer, "stdout");
	show_text(b, "stdout", json_string_value(v), json_string_length(v), &room);
	v = json_object_get(answer, "stderr");
	show_text(b, "stderr", json_string_value(v), json_string_length(v), &room);
	json_array_foreach (json_object_get(answer, "results"), i, res) {
		json_t *data = json_object_get(res, "data"), *plain = json_object_get(data, "text/plain");
		const char *k;
		json_object_foreach (data, k, v)
			if (strcmp(k, "text/plain") != 0)
				evbuffer_add_printf(b, "[%s %s: %zu bytes, in the structured result]\n",
						    json_is_true(json_object_get(res, "main")) ? "result" : "display", k,
						    json_string_length(v));
		show_text(b, json_is_true(json_object_get(res, "main")) ? "result" : "display",
			  json_string_value(plain), json_string_length(plain), &room);
	}
	e = json_object_get(answer, "error");
	if (json_is_object(e)) {
		json_t *tb = json_object_get(e, "traceback");
		evbuffer_add_printf(b, "--- error ---\n%s: %s\n", json_string_value(json_object_get(e, "name")),
				    json_string_value(json_object_get(e, "value")));
		json_array_foreach (tb, i, v)
			show_text(b, "traceback", json_string_value(v), json_string_length(v), &room);
	}
	if (evbuffer_get_length(b) == 0)
		evbuffer_add_printf(b, "(no output)\n");
	size_t n = evbuffer_get_length(b);
	const char *text = (const char *)evbuffer_pullup(b, -1);
	sup_mcp_tool_result(c, text ? text : "", text ? n : 0, json_incref(answer), false);
	evbuffer_free(b);
}

static const sup_ctx_run_cbs code_cbs = { .on_done = code_done };

int sup_mcp_op_code(mt_call *c, sbx_err *err)
{
	json_t *ctx = json_object_get(c->args, "ctx");

	if (!c->x->contexts)
		return sbx_err_set(err, -ENOSYS, "this supervisor has no code contexts");
	if (!json_is_string(ctx) || !sup_ctx_id_ok(json_string_value(ctx)))
		return sbx_err_set(err, -EINVAL, "argument \"ctx\": a context's id, or python, javascript or bash");
	int rc = sup_ctx_parse_cell_obj(c->body, NULL, &c->cell, err);
	return rc < 0 ? rc
		      : sup_ctx_run_start(c->x->contexts, c->id, json_string_value(ctx), &c->cell, &code_cbs, c,
					  &c->crun, err);
}

/* ---- start_process (and kill_process): the process's description ---- */

static void described(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	sbx_err e = { 0 };
	c->op = NULL;
	json_t *o = rc < 0 ? NULL : sup_api_proc_json(result, false, 0, &e);
	if (!o) {
		sup_core_blame(c->x->core, c->id, &e);
		sup_mcp_tool_fail(c, rc < 0 ? err : &e);
		return;
	}
	sup_mcp_tool_json(c, o);
}

static const sup_core_call_cbs desc_cbs = { .on_done = described };

int sup_mcp_op_start(mt_call *c, sbx_err *err)
{
	const sup_env *env = NULL;
	int rc = sup_api_parse_process_start(c->body, &c->spec, &c->pargs, err);
	if (rc == 0)
		rc = sup_core_command_prepare(c->x->core, c->id, &c->spec, &env, err);
	if (rc == 0)
		rc = sup_agent_encode_exec_args(&c->spec, env, &c->pargs, err);
	return rc < 0 ? rc : sup_core_call(c->x->core, c->id, SBX_OP_PROC_START, &c->pargs, &desc_cbs, c,
					   &c->op, err);
}

/* ---- read_process_output: proc.get, then proc.output up to MT_SHOW_MAX ---- */

static void output_answer(mt_call *c, json_t *desc)
{
	struct evbuffer *b = c->buf;
	json_t *st = json_object_get(desc, "state");
	json_t *code = json_object_get(desc, "exit_code");
	size_t n = evbuffer_get_length(b);
	size_t tl = 0;
	SBX_AUTO_FREE char *t = sup_utf8_repair(evbuffer_pullup(b, -1), n, &tl);
	json_object_set_new(desc, "offset", json_integer((json_int_t)(c->off - c->shown)));
	json_object_set_new(desc, "next_offset", json_integer((json_int_t)c->off));
	json_object_set_new(desc, "output", t ? json_stringn(t, tl) : json_string(""));
	json_object_set_new(desc, "truncated", json_boolean(c->cut));
	struct evbuffer *txt = evbuffer_new();
	if (!txt || !t) {
		sbx_err e;
		sbx_err_set(&e, -ENOMEM, "out of memory");
		json_decref(desc);
		if (txt)
			evbuffer_free(txt);
		sup_mcp_tool_fail(c, &e);
		return;
	}
	evbuffer_add(txt, t, tl);
	if (tl && t[tl - 1] != '\n')
		evbuffer_add(txt, "\n", 1);
	if (c->gap_note[0])
		evbuffer_add_printf(txt, "%s\n", c->gap_note);
	if (json_is_string(st) && strcmp(json_string_value(st), "running") == 0)
		evbuffer_add_printf(txt, "[process %ld is running;", c->pid);
	else if (json_is_integer(code))
		evbuffer_add_printf(txt, "[process %ld exited with code %lld;", c->pid,
				    (long long)json_integer_value(code));
	else
		evbuffer_add_printf(txt, "[process %ld was killed by %s;", c->pid,
				    json_string_value(json_object_get(desc, "signal")) ?: "a signal");
	evbuffer_add_printf(txt, " next_offset %llu%s]\n", (unsigned long long)c->off,
			    c->cut ? ": the output goes on, read again from there" : "");
	n = evbuffer_get_length(txt);
	const char *p = (const char *)evbuffer_pullup(txt, -1);
	sup_mcp_tool_ok(c, p ? p : "", p ? n : 0, desc);
	evbuffer_free(txt);
}

static void out_data(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud)
{
	mt_call *c = ud;
	size_t take = c->shown + n > MT_SHOW_MAX ? MT_SHOW_MAX - c->shown : n;
	evbuffer_add(c->buf, p, take);
	c->shown += take;
	c->off += take;
	sup_op_consumed(c->op, cost);
	if (take < n || c->shown == MT_SHOW_MAX) {
		/* Enough to show: the rest stays for the next read. */
		c->cut = true;
		sup_op_cancel(c->op);
		c->op = NULL;
		json_t *d = c->desc;
		c->desc = NULL;
		output_answer(c, d);
	}
}

static void out_event(const msgpack_object *map, size_t cost, void *ud)
{
	mt_call *c = ud;
	const msgpack_object *g = sbx_proto_map_get(map, "gap");
	uint64_t from = 0, to = 0;
	sup_op_consumed(c->op, cost);
	if (g && sup_api_mp_uint(g, "from", UINT64_MAX / 2, &from, NULL) == 0 &&
	    sup_api_mp_uint(g, "to", UINT64_MAX / 2, &to, NULL) == 0 && from == c->off && to > from) {
		snprintf(c->gap_note, sizeof(c->gap_note),
			 "[bytes %llu..%llu of the output were dropped: the process's buffer was full]",
			 (unsigned long long)from, (unsigned long long)to);
		c->off = to;
	}
}

static void out_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	sbx_err e = { 0 };
	c->op = NULL;
	json_t *o = rc < 0 ? NULL : sup_api_proc_end_json(result, c->pid, c->off, &e);
	if (!o) {
		sup_core_blame(c->x->core, c->id, &e);
		sup_mcp_tool_fail(c, rc < 0 ? err : &e);
		return;
	}
	json_object_del(o, "next_offset");
	output_answer(c, o);
}

static const sup_core_call_cbs out_cbs = { .on_output = out_data, .on_event = out_event, .on_done = out_done };

/* proc.get answered: the offset checked against the end, then the output. */
static void out_checked(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	sbx_err e = { 0 };
	c->op = NULL;
	json_t *d = rc < 0 ? NULL : sup_api_proc_json(result, true, c->pid, &e);
	json_int_t end = json_integer_value(json_object_get(json_object_get(d, "output"), "end"));
	if (d && c->off > (uint64_t)end)
		sbx_err_set(&e, -EINVAL, "offset %llu is beyond the end of the output (%lld)",
			    (unsigned long long)c->off, (long long)end);
	if (!d || e.code) {
		json_decref(d);
		if (!d)
			sup_core_blame(c->x->core, c->id, &e);
		sup_mcp_tool_fail(c, rc < 0 ? err : &e);
		return;
	}
	json_object_del(d, "output");
	c->desc = d;
	sbx_proto_args_destroy(&c->pargs);
	sbx_proto_args_uint(&c->pargs, "pid", (uint64_t)c->pid);
	sbx_proto_args_uint(&c->pargs, "offset", c->off);
	sbx_proto_args_bool(&c->pargs, "follow", false);
	if (sup_core_call(c->x->core, c->id, SBX_OP_PROC_OUTPUT, &c->pargs, &out_cbs, c, &c->op, &e) < 0)
		sup_mcp_tool_fail(c, &e);
}

static const sup_core_call_cbs check_cbs = { .on_done = out_checked };

/* The "pid" argument into c->pid and the agent's arguments. */
static int pid_arg(mt_call *c, sbx_err *err)
{
	json_t *pid = json_object_get(c->args, "pid");
	if (!json_is_integer(pid) || json_integer_value(pid) < 1 || json_integer_value(pid) > 2147483647)
		return sbx_err_set(err, -EINVAL, "argument \"pid\": want a positive integer (start_process answers it)");
	c->pid = (long)json_integer_value(pid);
	sbx_proto_args_uint(&c->pargs, "pid", (uint64_t)c->pid);
	return 0;
}

int sup_mcp_op_output(mt_call *c, sbx_err *err)
{
	json_t *off = json_object_get(c->args, "offset");
	if (pid_arg(c, err) < 0)
		return err->code;
	if (off && (!json_is_integer(off) || json_integer_value(off) < 0))
		return sbx_err_set(err, -EINVAL, "argument \"offset\": want an integer >= 0");
	c->off = off ? (uint64_t)json_integer_value(off) : 0;
	c->buf = evbuffer_new();
	if (!c->buf)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return sup_core_call(c->x->core, c->id, SBX_OP_PROC_GET, &c->pargs, &check_cbs, c, &c->op, err);
}

/* ---- kill_process: proc.kill, answered with the process as it ended ---- */

int sup_mcp_op_kill(mt_call *c, sbx_err *err)
{
	if (pid_arg(c, err) < 0)
		return err->code;
	return sup_core_call(c->x->core, c->id, SBX_OP_PROC_KILL, &c->pargs, &desc_cbs, c, &c->op, err);
}

/* ---- write_process_stdin: proc.stdin, the bytes within the agent's credit ---- */

static void stdin_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	sbx_err e = { 0 };
	uint64_t w = 0;
	c->op = NULL;
	if (rc == 0 && sup_api_mp_uint(result, "written", c->wlen, &w, &e) < 0) {
		sup_core_blame(c->x->core, c->id, &e);
		sup_mcp_tool_fail(c, &e);
	} else if (rc < 0) {
		sup_mcp_tool_fail(c, err);
	} else {
		sup_mcp_tool_json(c, json_pack("{s:I}", "written", (json_int_t)w));
	}
}

/* The process takes the bytes as it reads: one that reads none of them for
 * the agent's idle deadline ends the call (agent_timeout), as the route. */
static const sup_core_call_cbs stdin_cbs = {
	.on_done = stdin_done, .on_writable = sup_mcp_tool_pump, .wait = SUP_AGENT_WAIT_SENDS
};

int sup_mcp_op_stdin(mt_call *c, sbx_err *err)
{
	SUP_AUTO_QUERY sup_query qs = { 0 };
	int rc = pid_arg(c, err);
	if (rc == 0)
		rc = sup_mcp_tool_query(c, &qs, err);
	int eof = rc < 0 ? rc : sup_query_flag(&qs, "eof", false, err);
	if (eof < 0)
		return eof;
	if ((rc = sup_mcp_tool_content(c, false, err)) < 0)
		return rc;
	sbx_proto_args_bool(&c->pargs, "eof", eof);
	return sup_mcp_tool_send(c, SBX_OP_PROC_STDIN, SBX_CH_STDIN, &stdin_cbs, err);
}

/* ---- snapshot_sandbox ---- */

static void snap_done(int rc, const sup_snap_view *v, const sbx_err *err, void *ud)
{
	mt_call *c = ud;
	c->sop = NULL;
	if (rc < 0)
		sup_mcp_tool_fail(c, err);
	else
		sup_mcp_tool_json(c, sup_api_render_snapshot(v));
}

int sup_mcp_op_snapshot(mt_call *c, sbx_err *err)
{
	char name[SUP_SNAPS_NAME_MAX + 1];
	if (!c->x->snaps)
		return sbx_err_set(err, -ENOTSUP, "snapshots are not served here");
	int rc = sup_api_parse_snapshot_name(json_object_get(c->body, "name"), name, err);
	return rc < 0 ? rc : sup_snaps_take(c->x->snaps, c->who, c->id, name, false, snap_done, c, &c->sop, err);
}
