/* Background processes (proc.*) against the real agent binary as PID 1 of
 * new namespaces: start/list/get, output resumed from an offset on another
 * connection after the first one went away, the gap after the ring
 * overflowed (also under a follower that does not read: the process is not
 * held up), stdin written in pieces, a trapped SIGINT, whole-tree kill,
 * terminals, the bound on kept exited processes, and bad input. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>

#include "agent_fixture.h"
#include "test_util.h"

/* {"pid": pid, k1: v1, k2: v2}: "follow" and "eof" are booleans, "tag" a
 * string (sv), the rest integers. NULL keys are left out. */
static tc_stream *preq(tc_client *c, const char *op, int64_t pid, const char *k1, int64_t v1, const char *k2,
		       int64_t v2)
{
	const char *keys[2] = { k1, k2 };
	int64_t vals[2] = { v1, v2 };
	msgpack_sbuffer buf;
	msgpack_packer pk;
	tc_stream *s;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1 + (k1 != NULL) + (k2 != NULL));
	msgpack_pack_str_with_body(&pk, "pid", 3);
	msgpack_pack_int64(&pk, pid);
	for (int i = 0; i < 2; i++) {
		if (!keys[i])
			continue;
		msgpack_pack_str_with_body(&pk, keys[i], strlen(keys[i]));
		if (strcmp(keys[i], "follow") == 0 || strcmp(keys[i], "eof") == 0) {
			if (vals[i])
				msgpack_pack_true(&pk);
			else
				msgpack_pack_false(&pk);
		} else {
			msgpack_pack_int64(&pk, vals[i]);
		}
	}
	s = tc_request(c, op, buf.data, buf.size);
	msgpack_sbuffer_destroy(&buf);
	assert_non_null(s);
	return s;
}

static tc_stream *wait_done(tc_client *c, tc_stream *s)
{
	if (!tc_wait(c, s, FX_WAIT_MS))
		fail_msg("stream %llu did not end", (unsigned long long)s->id);
	return s;
}

static void expect_ok(const tc_stream *s)
{
	if (s->failed)
		fail_msg("err %s: %s", s->code, s->msg);
}

static void expect_err(const tc_stream *s, const char *code, const char *part)
{
	if (!s->failed || strcmp(s->code, code) != 0 || !strstr(s->msg, part))
		fail_msg("got %s %s \"%s\", want err %s \"...%s...\"", s->failed ? "err" : "end", s->code, s->msg, code,
			 part);
}

static int64_t start_bg(fixture *fx, tc_client *c, const tc_exec_opts *o)
{
	tc_stream *s = wait_done(c, tc_proc_start(c, o));
	uint64_t pid = 0;
	char state[16] = "";

	expect_ok(s);
	assert_true(tc_result_uint(s, "pid", &pid));
	assert_true(pid > 1);
	assert_true(tc_result_str(s, "state", state, sizeof(state)));
	assert_true(strcmp(state, "running") == 0 || strcmp(state, "exited") == 0);
	return (int64_t)pid;
}

static void get_state(tc_client *c, int64_t pid, char *state, size_t len)
{
	tc_stream *s = wait_done(c, preq(c, "proc.get", pid, NULL, 0, NULL, 0));

	expect_ok(s);
	assert_true(tc_result_str(s, "state", state, len));
	tc_forget(c, s);
}

static void wait_exited(tc_client *c, int64_t pid)
{
	uint64_t deadline = test_now_ms() + FX_WAIT_MS;
	char state[16] = "";

	for (;;) {
		get_state(c, pid, state, sizeof(state));
		if (strcmp(state, "exited") == 0)
			return;
		if (test_now_ms() > deadline)
			fail_msg("process %lld is still %s", (long long)pid, state);
		tc_run(c->base, 20);
	}
}

/* ---- tests ---- */

static void start_list_get_and_exit(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	const char *argv[] = { "sh", "-c", "echo hi; echo err >&2; sleep 0.3; exit 3", NULL };
	tc_exec_opts o = { .argv = argv, .tag = "build" };
	int64_t pid = start_bg(fx, c, &o);
	msgpack_unpacked u;
	const msgpack_object *procs, *argv_o;
	uint64_t v = 0, started = 0, ended = 0;
	char str[32];
	tc_stream *s;
	bool found = false;

	/* Listed with its tag; a tag filter selects it. */
	s = wait_done(c, tc_request(c, "proc.list", NULL, 0));
	expect_ok(s);
	assert_true(tc_result_unpack(s, &u));
	procs = sbx_proto_map_get(&u.data, "processes");
	assert_non_null(procs);
	assert_int_equal(procs->type, MSGPACK_OBJECT_ARRAY);
	for (uint32_t i = 0; i < procs->via.array.size; i++) {
		const char *tag;
		size_t tl;

		if (sbx_proto_get_uint(&procs->via.array.ptr[i], "pid", &v) && (int64_t)v == pid) {
			found = true;
			assert_true(sbx_proto_get_str(&procs->via.array.ptr[i], "tag", &tag, &tl));
			assert_true(tl == 5 && memcmp(tag, "build", 5) == 0);
		}
	}
	msgpack_unpacked_destroy(&u);
	assert_true(found);

	/* get while running: argv, output counters. */
	s = wait_done(c, preq(c, "proc.get", pid, NULL, 0, NULL, 0));
	expect_ok(s);
	assert_true(tc_result_str(s, "state", str, sizeof(str)));
	assert_string_equal(str, "running");
	assert_true(tc_result_unpack(s, &u));
	argv_o = sbx_proto_map_get(&u.data, "argv");
	assert_non_null(argv_o);
	assert_int_equal(argv_o->via.array.size, 3);
	msgpack_unpacked_destroy(&u);
	assert_true(tc_result_uint(s, "started_ms", &started));
	assert_true(started > 1600000000000ull);

	/* The exit status after it ended. */
	wait_exited(c, pid);
	s = wait_done(c, preq(c, "proc.get", pid, NULL, 0, NULL, 0));
	assert_true(tc_result_uint(s, "exit_code", &v));
	assert_int_equal(v, 3);
	assert_true(tc_result_uint(s, "ended_ms", &ended));
	assert_true(ended >= started + 250);
	/* And its output, in order, with channels. */
	s = wait_done(c, preq(c, "proc.output", pid, NULL, 0, NULL, 0));
	expect_ok(s);
	assert_string_equal(fx_str(s->out), "hi\n");
	assert_string_equal(fx_str(s->err), "err\n");
	assert_string_equal(s->order, "oe");
	assert_true(tc_result_uint(s, "next_offset", &v));
	assert_int_equal(v, 7);
}

static void output_resumes_after_disconnect(void **state)
{
	fixture *fx = *state;
	tc_client *a = fx_client(fx, 1), *b;
	tc_exec_opts o = { .cmd = "for i in $(seq 1 60); do echo line $i; sleep 0.01; done" };
	int64_t pid = start_bg(fx, a, &o);
	char want[1024] = "";
	uint64_t next = 0;
	tc_stream *s;
	char *all;

	for (int i = 1; i <= 60; i++)
		snprintf(want + strlen(want), sizeof(want) - strlen(want), "line %d\n", i);
	/* Part of it on the first connection (what is there so far), which
	 * then goes away. */
	for (int tries = 0;; tries++) {
		s = wait_done(a, preq(a, "proc.output", pid, "offset", 0, NULL, 0));
		expect_ok(s);
		assert_true(tc_result_uint(s, "next_offset", &next));
		if (next > 0 || tries > 100)
			break;
		tc_forget(a, s);
		tc_run(a->base, 10);
	}
	assert_true(next > 0 && next < strlen(want));
	assert_int_equal(s->out_len, next);
	all = strdup(fx_str(s->out));
	assert_non_null(all);
	tc_close(a);
	/* The rest on another, following until the end. */
	b = fx_client(fx, 2);
	s = wait_done(b, preq(b, "proc.output", pid, "offset", (int64_t)next, "follow", 1));
	expect_ok(s);
	assert_int_equal(s->nevents, 0); /* no gap */
	{
		size_t la = strlen(all);
		char *joined = realloc(all, la + s->out_len + 1);

		assert_non_null(joined);
		memcpy(joined + la, fx_str(s->out), s->out_len + 1);
		all = joined;
	}
	if (strcmp(all, want) != 0) {
		free(all);
		fail_msg("resumed output differs");
	}
	free(all);
	assert_true(tc_result_uint(s, "next_offset", &next));
	assert_int_equal(next, strlen(want));
	{
		char st[16];
		assert_true(tc_result_str(s, "state", st, sizeof(st)));
		assert_string_equal(st, "exited");
	}
}

/* The gap event of s at index i: from, to. */
static void gap_of(const tc_stream *s, size_t i, uint64_t *from, uint64_t *to)
{
	msgpack_unpacked u;
	const msgpack_object *g;

	assert_true(tc_event_unpack(s, i, &u));
	g = sbx_proto_map_get(&u.data, "gap");
	assert_non_null(g);
	assert_true(sbx_proto_get_uint(g, "from", from));
	assert_true(sbx_proto_get_uint(g, "to", to));
	msgpack_unpacked_destroy(&u);
}

/* The output of `seq 1 n` (n <= 300000), in a static buffer. */
static const char *seq_text(int n, size_t *len)
{
	static char t[300000 * 8];
	size_t l = 0;

	for (int i = 1; i <= n; i++)
		l += (size_t)snprintf(t + l, sizeof(t) - l, "%d\n", i);
	*len = l;
	return t;
}

static void gap_reported_after_ring_overflow(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_exec_opts o = { .cmd = "seq 1 20000", .buffer = 4096 };
	int64_t pid = start_bg(fx, c, &o);
	uint64_t from, to, next;
	size_t len;
	const char *want = seq_text(20000, &len);
	tc_stream *s;

	wait_exited(c, pid);
	s = wait_done(c, preq(c, "proc.output", pid, "offset", 0, NULL, 0));
	expect_ok(s);
	/* First the gap, exactly what was lost; then the rest, exact. */
	assert_int_equal(s->nevents, 1);
	gap_of(s, 0, &from, &to);
	assert_int_equal(from, 0);
	assert_true(to > len - 4096 && to < len);
	assert_int_equal(s->out_len, len - to);
	assert_memory_equal(s->out, want + to, s->out_len);
	assert_true(tc_result_uint(s, "next_offset", &next));
	assert_int_equal(next, len);
}

static void slow_follower_does_not_hold_up_the_process(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_exec_opts o = { .cmd = "sleep 0.3; seq 1 300000", .buffer = 65536 };
	int64_t pid = start_bg(fx, c, &o);
	uint64_t from, to, next, prev_to = 0;
	size_t len, got = 0;
	const char *want = seq_text(300000, &len);
	tc_stream *s = preq(c, "proc.output", pid, "offset", 0, "follow", 1);

	/* The follower (there before the output starts) takes one window and
	 * then nothing: the process still runs to its end (about 2 MB through
	 * a 64 KiB ring). */
	s->hold_credit = true;
	wait_exited(c, pid);
	if (s->done)
		fail_msg("the follower ended (%s %s) after %zu bytes and %zu events, holding %zu", s->code, s->msg,
			 s->out_len, s->nevents, s->held);
	tc_release(c, s);
	wait_done(c, s);
	expect_ok(s);
	/* Everything it got is exact, and what it did not get is in gaps. */
	assert_true(s->nevents >= 1);
	for (size_t i = 0; i < s->nevents; i++) {
		gap_of(s, i, &from, &to);
		assert_true(from < to);
		assert_true(from >= prev_to);
		prev_to = to;
	}
	assert_true(tc_result_uint(s, "next_offset", &next));
	assert_int_equal(next, len);
	/* The bytes after the last gap are the tail of the output. */
	got = len - prev_to;
	assert_true(s->out_len >= got);
	assert_memory_equal(s->out + s->out_len - got, want + prev_to, got);
}

static void stdin_in_pieces_then_eof(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	const char *argv[] = { "cat", NULL };
	tc_exec_opts o = { .argv = argv, .stdin_pipe = true };
	int64_t pid = start_bg(fx, c, &o);
	const char *pieces[] = { "hel", "lo ", "world\n" };
	uint64_t written = 0, v;
	tc_stream *s;

	for (size_t i = 0; i < 3; i++) {
		s = preq(c, "proc.stdin", pid, NULL, 0, NULL, 0);
		assert_int_equal(tc_send_stdin(c, s, pieces[i], strlen(pieces[i]), true, FX_WAIT_MS), 0);
		wait_done(c, s);
		expect_ok(s);
		assert_true(tc_result_uint(s, "written", &written));
		assert_int_equal(written, strlen(pieces[i]));
	}
	/* Still running: stdin is open until asked otherwise. */
	{
		char st[16];
		get_state(c, pid, st, sizeof(st));
		assert_string_equal(st, "running");
	}
	s = preq(c, "proc.stdin", pid, "eof", 1, NULL, 0);
	assert_int_equal(tc_send_stdin(c, s, NULL, 0, true, FX_WAIT_MS), 0);
	expect_ok(wait_done(c, s));
	wait_exited(c, pid);
	s = wait_done(c, preq(c, "proc.output", pid, NULL, 0, NULL, 0));
	assert_string_equal(fx_str(s->out), "hello world\n");
	s = wait_done(c, preq(c, "proc.get", pid, NULL, 0, NULL, 0));
	assert_true(tc_result_uint(s, "exit_code", &v));
	assert_int_equal(v, 0);
	/* Closed: no more writes. */
	expect_err(wait_done(c, preq(c, "proc.stdin", pid, NULL, 0, NULL, 0)), "not_found", "has exited");
}

static void sigint_reaches_a_trap(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_exec_opts o = { .cmd = "trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.05; done" };
	int64_t pid = start_bg(fx, c, &o);
	tc_stream *f = preq(c, "proc.output", pid, "follow", 1, NULL, 0);
	uint64_t v;

	fx_wait_output(c, f, "ready\n");
	expect_ok(wait_done(c, preq(c, "proc.signal", pid, "signal", SIGINT, NULL, 0)));
	wait_done(c, f);
	expect_ok(f);
	assert_string_equal(fx_str(f->out), "ready\ngot-int\n");
	assert_true(tc_result_uint(f, "exit_code", &v));
	assert_int_equal(v, 5);
	/* A signal to an exited process is refused with the reason. */
	expect_err(wait_done(c, preq(c, "proc.signal", pid, "signal", SIGINT, NULL, 0)), "not_found", "has exited");
}

static void kill_ends_the_whole_tree(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_exec_opts o = { .cmd = "(setsid sleep 321 </dev/null >/dev/null 2>&1 &); "
				  "(setsid sh -c 'sleep 322; :' </dev/null >/dev/null 2>&1 &); exec sleep 323" };
	int64_t pid = start_bg(fx, c, &o);
	tc_stream *s;
	uint64_t sig = 0;

	fx_wait_procs(fx, "sleep 321", 1);
	fx_wait_procs(fx, "sleep 322", 1);
	fx_wait_procs(fx, "sleep 323", 1);
	s = wait_done(c, preq(c, "proc.kill", pid, NULL, 0, NULL, 0));
	expect_ok(s);
	assert_true(tc_result_uint(s, "signal", &sig));
	assert_int_equal(sig, SIGKILL);
	fx_wait_procs(fx, "sleep 321", 0);
	fx_wait_procs(fx, "sleep 322", 0);
	fx_wait_procs(fx, "sleep 323", 0);
	fx_wait_no_zombies(fx, 1);

	/* Leftovers of a process that already exited: kill still reaches them. */
	o.cmd = "(setsid sleep 324 </dev/null >/dev/null 2>&1 &); exit 0";
	pid = start_bg(fx, c, &o);
	wait_exited(c, pid);
	fx_wait_procs(fx, "sleep 324", 1);
	s = wait_done(c, preq(c, "proc.kill", pid, NULL, 0, NULL, 0));
	expect_ok(s);
	fx_wait_procs(fx, "sleep 324", 0);
	fx_wait_no_zombies(fx, 1);
}

static void terminal_and_resize(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_exec_opts o = { .cmd = "stty -echo; stty size; read x; stty size", .pty = true, .cols = 50, .rows = 10 };
	int64_t pid = start_bg(fx, c, &o);
	tc_stream *f = preq(c, "proc.output", pid, "follow", 1, NULL, 0), *s;

	fx_wait_output(c, f, "10 50\r\n");
	expect_ok(wait_done(c, preq(c, "proc.resize", pid, "cols", 70, "rows", 20)));
	s = preq(c, "proc.stdin", pid, NULL, 0, NULL, 0);
	assert_int_equal(tc_send_stdin(c, s, "\n", 1, true, FX_WAIT_MS), 0);
	expect_ok(wait_done(c, s));
	wait_done(c, f);
	assert_string_equal(fx_str(f->out), "10 50\r\n20 70\r\n");
}

static void exited_ones_are_kept_up_to_a_bound(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_exec_opts o = { .cmd = "exit 7", .tag = "many" };
	int64_t pids[70];
	tc_stream *s;
	msgpack_unpacked u;
	const msgpack_object *procs;
	int fds_before, fds_after = -1;

	/* A first one, so that lazily opened fds are there before counting. */
	wait_exited(c, start_bg(fx, c, &o));
	fds_before = agent_ns_fds(&fx->ns);
	for (int i = 0; i < 70; i++) {
		pids[i] = start_bg(fx, c, &o);
		wait_exited(c, pids[i]);
	}
	s = wait_done(c, tc_request(c, "proc.list", "\x81\xa3tag\xa4many", 10));
	expect_ok(s);
	assert_true(tc_result_unpack(s, &u));
	procs = sbx_proto_map_get(&u.data, "processes");
	assert_int_equal(procs->via.array.size, 64);
	msgpack_unpacked_destroy(&u);
	/* The oldest six are gone, the newest are there with their status. */
	for (int i = 0; i < 6; i++)
		expect_err(wait_done(c, preq(c, "proc.get", pids[i], NULL, 0, NULL, 0)), "not_found",
			   "no background process");
	{
		uint64_t v;
		s = wait_done(c, preq(c, "proc.get", pids[69], NULL, 0, NULL, 0));
		assert_true(tc_result_uint(s, "exit_code", &v));
		assert_int_equal(v, 7);
	}
	fx_wait_no_zombies(fx, 1);
	/* Exited ones keep their ring, not a pipe or a holder. */
	for (int i = 0; i < 100 && fds_after != fds_before; i++) {
		fds_after = agent_ns_fds(&fx->ns);
		tc_run(fx->base, 10);
	}
	assert_int_equal(fds_after, fds_before);
}

static void bad_input_gets_clear_errors(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_exec_opts o = { .cmd = "sleep 100" };
	int64_t pid = start_bg(fx, c, &o);
	tc_stream *s;

	expect_err(wait_done(c, preq(c, "proc.get", 999999, NULL, 0, NULL, 0)), "not_found",
		   "no background process 999999");
	expect_err(wait_done(c, preq(c, "proc.kill", -4, NULL, 0, NULL, 0)), "bad_request", "pid must be");
	expect_err(wait_done(c, tc_request(c, "proc.get", "\x80", 1)), "bad_request", "pid must be");
	expect_err(wait_done(c, preq(c, "proc.signal", pid, "signal", 0, NULL, 0)), "bad_request",
		   "signal must be a signal number");
	expect_err(wait_done(c, preq(c, "proc.signal", pid, "signal", 99, NULL, 0)), "bad_request",
		   "signal must be a signal number");
	expect_err(wait_done(c, preq(c, "proc.output", pid, "offset", 1000, NULL, 0)), "bad_request",
		   "beyond the end of the output");
	expect_err(wait_done(c, preq(c, "proc.stdin", pid, NULL, 0, NULL, 0)), "bad_request", "without stdin");
	expect_err(wait_done(c, preq(c, "proc.resize", pid, "cols", 80, "rows", 24)), "bad_request", "no terminal");
	expect_err(wait_done(c, preq(c, "proc.resize", pid, "cols", 80, NULL, 0)), "bad_request", "cols and rows");
	{
		tc_exec_opts b = { .cmd = "true", .buffer = 100 };
		expect_err(wait_done(c, tc_proc_start(c, &b)), "bad_request", "buffer must be");
	}
	{
		char tag[300];
		memset(tag, 't', sizeof(tag) - 1);
		tag[sizeof(tag) - 1] = '\0';
		tc_exec_opts b = { .cmd = "true", .tag = tag };
		expect_err(wait_done(c, tc_proc_start(c, &b)), "bad_request", "tag must be");
	}
	{
		tc_exec_opts b = { .cmd = "true", .timeout_ms = 0, .user = "" };
		expect_err(wait_done(c, tc_proc_start(c, &b)), "bad_request", "user must be");
	}
	/* One stdin writer at a time. */
	{
		tc_exec_opts in = { .cmd = "cat >/dev/null", .stdin_pipe = true };
		int64_t p2 = start_bg(fx, c, &in);
		tc_stream *w1 = preq(c, "proc.stdin", p2, NULL, 0, NULL, 0);

		tc_run(fx->base, 50);
		expect_err(wait_done(c, preq(c, "proc.stdin", p2, NULL, 0, NULL, 0)), "exists", "another proc.stdin");
		assert_int_equal(tc_send_stdin(c, w1, "x", 1, true, FX_WAIT_MS), 0);
		expect_ok(wait_done(c, w1));
		expect_ok(wait_done(c, preq(c, "proc.kill", p2, NULL, 0, NULL, 0)));
	}
	s = wait_done(c, preq(c, "proc.kill", pid, NULL, 0, NULL, 0));
	expect_ok(s);
	fx_wait_no_zombies(fx, 1);
}

static void processes_outlive_their_connection(void **state)
{
	fixture *fx = *state;
	tc_client *a = fx_client(fx, 1), *b;
	tc_exec_opts o = { .cmd = "sleep 0.5; echo late" };
	int64_t pid = start_bg(fx, a, &o);
	tc_stream *s;

	tc_close(a);
	fx_wait_procs(fx, "sleep 0.5", 1);
	b = fx_client(fx, 2);
	s = wait_done(b, preq(b, "proc.output", pid, "follow", 1, NULL, 0));
	expect_ok(s);
	assert_string_equal(fx_str(s->out), "late\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(start_list_get_and_exit, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(output_resumes_after_disconnect, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(processes_outlive_their_connection, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(gap_reported_after_ring_overflow, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(slow_follower_does_not_hold_up_the_process, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(stdin_in_pieces_then_eof, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(sigint_reaches_a_trap, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(kill_ends_the_whole_tree, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(terminal_and_resize, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(exited_ones_are_kept_up_to_a_bound, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(bad_input_gets_clear_errors, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
