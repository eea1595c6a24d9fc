/* MCP servers (mcp.*) against the real agent binary as PID 1 of new
 * namespaces, with a stdio server that misbehaves on request
 * (mcp_fake_server.py): a session on the spare and the jail it runs in, a
 * new spare at once, two sessions on two processes, a crash with its stderr
 * lines and the next session on a fresh process, garbage and a line over
 * the limit failing only their session, a flood held back by credit, the
 * idle timeout, removal, blank lines, the agent's end, bad input, and the
 * warm-up ping: warming until answered, its answer never in a session. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>

#include "sbx/proto_mcp.h"
#include "agent_fixture.h"
#include "test_util.h"

#define PY "/usr/bin/python3"

static tc_stream *wait_done(tc_client *c, tc_stream *s)
{
	if (!tc_wait(c, s, FX_WAIT_MS))
		fail_msg("stream %llu did not end", (unsigned long long)s->id);
	return s;
}

static void expect_err(const tc_stream *s, const char *code, const char *part)
{
	if (!s->failed || strcmp(s->code, code) != 0 || !strstr(s->msg, part))
		fail_msg("got %s %s \"%s\", want err %s \"...%s...\"", s->failed ? "err" : "end", s->code, s->msg, code,
			 part);
}

static tc_stream *request(tc_client *c, const char *op, const msgpack_sbuffer *buf)
{
	tc_stream *s = tc_request(c, op, buf->data, buf->size);

	assert_non_null(s);
	return s;
}

/* mcp.configure name to run the fake server in mode (and arg). */
static tc_stream *configure_raw(tc_client *c, const char *name, const char *mode, const char *arg, uint64_t max_line)
{
	const char *argv[] = { PY, MCP_FAKE_SERVER, mode, arg, NULL };
	const char *env[] = { "PYTHONUNBUFFERED=0", NULL };
	sbx_proto_mcp_config cfg = { .name = name, .argv = argv, .env = env, .cwd = "/", .max_line = max_line };
	sbx_err err = { 0 };
	msgpack_sbuffer buf;
	msgpack_packer pk;
	tc_stream *s;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	if (sbx_proto_mcp_pack_config(&pk, &cfg, &err) < 0)
		fail_msg("%s", err.msg);
	s = request(c, SBX_OP_MCP_CONFIGURE, &buf);
	msgpack_sbuffer_destroy(&buf);
	return wait_done(c, s);
}

static void configure(tc_client *c, const char *name, const char *mode, const char *arg, uint64_t max_line)
{
	tc_stream *s = configure_raw(c, name, mode, arg, max_line);

	if (s->failed)
		fail_msg("configure %s: %s %s", name, s->code, s->msg);
	tc_forget(c, s);
}

static tc_stream *open_session(tc_client *c, const char *name, uint64_t idle_ms);
static void status_ready(tc_client *c, const char *name, sbx_proto_mcp_status *out);
static void status_wait(tc_client *c, const char *name, sbx_proto_mcp_state state, sbx_proto_mcp_status *out);

/* Server name running the fake server in mode, its spare up (its status in
 * *st unless NULL), a session on it. The flood never reads its warm-up
 * ping: its spare stays warming (for AGENT_MCP_WARM_MS). */
static tc_stream *ready_session(tc_client *c, const char *name, const char *mode, const char *arg, uint64_t max_line,
				uint64_t idle_ms, sbx_proto_mcp_status *st)
{
	sbx_proto_mcp_status mine;

	configure(c, name, mode, arg, max_line);
	status_wait(c, name, strcmp(mode, "flood") == 0 ? SBX_MCP_WARMING : SBX_MCP_READY, st ? st : &mine);
	return open_session(c, name, idle_ms);
}

static tc_stream *open_session(tc_client *c, const char *name, uint64_t idle_ms)
{
	msgpack_sbuffer buf;
	msgpack_packer pk;
	tc_stream *s;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	sbx_proto_mcp_pack_open(&pk, name, idle_ms);
	s = request(c, SBX_OP_MCP_OPEN, &buf);
	msgpack_sbuffer_destroy(&buf);
	return s;
}

/* The session's first event: its process. */
static int64_t session_pid(tc_client *c, tc_stream *s, bool *spare)
{
	msgpack_unpacked u;
	sbx_err err = { 0 };
	uint64_t deadline = test_now_ms() + FX_WAIT_MS;
	int64_t pid = 0;

	while (s->nevents == 0) {
		if (s->done || test_now_ms() > deadline)
			fail_msg("no open event (%s %s)", s->code, s->msg);
		tc_run(c->base, 5);
	}
	assert_true(tc_event_unpack(s, 0, &u));
	if (sbx_proto_mcp_parse_opened(&u.data, &pid, spare, &err) < 0)
		fail_msg("%s", err.msg);
	msgpack_unpacked_destroy(&u);
	return pid;
}

static void send_line(tc_client *c, tc_stream *s, const char *line, bool eof)
{
	assert_int_equal(tc_send_stdin(c, s, line, strlen(line), eof, FX_WAIT_MS), 0);
}

static size_t list(tc_client *c, sbx_proto_mcp_status **sts)
{
	msgpack_sbuffer buf;
	msgpack_unpacked u;
	sbx_err err = { 0 };
	size_t n = 0;
	tc_stream *s;

	msgpack_sbuffer_init(&buf);
	msgpack_sbuffer_write(&buf, "\x80", 1);
	s = wait_done(c, request(c, SBX_OP_MCP_LIST, &buf));
	msgpack_sbuffer_destroy(&buf);
	if (s->failed)
		fail_msg("mcp.list: %s %s", s->code, s->msg);
	assert_true(tc_result_unpack(s, &u));
	if (sbx_proto_mcp_parse_list(&u.data, sts, &n, &err) < 0)
		fail_msg("%s", err.msg);
	msgpack_unpacked_destroy(&u);
	tc_forget(c, s);
	return n;
}

/* The status of server name once its spare is up (ready). */
static void status_ready(tc_client *c, const char *name, sbx_proto_mcp_status *out)
{
	status_wait(c, name, SBX_MCP_READY, out);
}

/* The status of server name once it is in state. */
static void status_wait(tc_client *c, const char *name, sbx_proto_mcp_state state, sbx_proto_mcp_status *out)
{
	uint64_t deadline = test_now_ms() + FX_WAIT_MS;

	for (;;) {
		sbx_proto_mcp_status *sts = NULL;
		size_t n = list(c, &sts);

		for (size_t i = 0; i < n; i++)
			if (strcmp(sts[i].name, name) == 0 && sts[i].state == state) {
				*out = sts[i];
				free(sts);
				return;
			}
		free(sts);
		if (test_now_ms() > deadline)
			fail_msg("server %s never %s", name, sbx_proto_mcp_state_name(state));
		tc_run(c->base, 20);
	}
}

static char cmdline[512];

static const char *fake_cmdline(const char *mode)
{
	snprintf(cmdline, sizeof(cmdline), "%s %s %s", PY, MCP_FAKE_SERVER, mode);
	return cmdline;
}

static const char *const ping = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";

/* ---- tests ---- */

static void session_on_the_spare_runs_jailed(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	sbx_proto_mcp_status st, st2;
	tc_stream *s;
	bool spare = false;
	int64_t pid;

	configure(c, "echo", "echo", NULL, 0);
	status_ready(c, "echo", &st);
	assert_int_equal(st.started, 1);
	assert_int_equal(st.max_line, SBX_MCP_DEFAULT_MAX_LINE);
	s = open_session(c, "echo", 0);
	pid = session_pid(c, s, &spare);
	assert_true(spare);
	assert_int_equal(pid, st.spare_pid);
	send_line(c, s, ping, false);
	fx_wait_output(c, s, "\"seccomp\"");
	/* The exec jail: the sandbox user, no_new_privs, seccomp filter, nice. */
	assert_non_null(strstr(s->out, "\"uid\": 1000"));
	assert_non_null(strstr(s->out, "\"nnp\": 1"));
	assert_non_null(strstr(s->out, "\"seccomp\": 2"));
	assert_non_null(strstr(s->out, "\"nice\": 10"));
	assert_non_null(strstr(s->out, "\"method\": \"ping\""));
	assert_int_equal(s->out[s->out_len - 1], '\n');
	/* A new spare at once. */
	status_ready(c, "echo", &st2);
	assert_true(st2.spare_pid != pid);
	assert_int_equal(st2.sessions, 1);
	assert_int_equal(st2.started, 2);
	/* stdin eof is the session's normal end. */
	send_line(c, s, "", true);
	wait_done(c, s);
	assert_false(s->failed);
	assert_true(s->exited);
	assert_int_equal(s->exit_code, 0);
	status_ready(c, "echo", &st2);
	assert_int_equal(st2.sessions, 0);
	assert_int_equal(st2.opened, 1);
	assert_int_equal(st2.msgs_in, 1);
	assert_int_equal(st2.msgs_out, 1);
	assert_int_equal(st2.crashes, 0);
}

static void two_sessions_two_processes(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_stream *a, *b;
	bool spare;
	int64_t pa, pb;

	a = ready_session(c, "echo", "echo", NULL, 0, 0, NULL);
	b = open_session(c, "echo", 0);
	pa = session_pid(c, a, &spare);
	pb = session_pid(c, b, &spare);
	assert_true(pa != pb);
	send_line(c, a, "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"x\"}\n", false);
	send_line(c, b, "{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"x\"}\n", false);
	fx_wait_output(c, a, "\"id\": \"a\"");
	fx_wait_output(c, b, "\"id\": \"b\"");
	assert_null(strstr(a->out, "\"id\": \"b\""));
	assert_null(strstr(b->out, "\"id\": \"a\""));
	/* One cancelled: its tree goes, the other goes on. */
	assert_int_equal(tc_cancel(c, a), 0);
	expect_err(wait_done(c, a), "cancelled", "");
	fx_wait_procs(fx, fake_cmdline("echo"), 2); /* b and the spare */
	send_line(c, b, "{\"jsonrpc\":\"2.0\",\"id\":\"b2\",\"method\":\"x\"}\n", false);
	fx_wait_output(c, b, "\"id\": \"b2\"");
}

static void crash_reports_stderr_and_next_session_is_fresh(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	sbx_proto_mcp_status st;
	tc_stream *s;
	bool spare;
	int64_t pid, pid2;

	s = ready_session(c, "crashy", "crash", NULL, 0, 0, &st);
	pid = session_pid(c, s, &spare);
	send_line(c, s, ping, false);
	expect_err(wait_done(c, s), "crashed", "exited with status 3");
	assert_non_null(strstr(s->msg, "fatal: cannot handle ping"));
	status_ready(c, "crashy", &st);
	assert_int_equal(st.crashes, 1);
	assert_true(st.has_exit);
	assert_int_equal(st.exit_code, 3);
	assert_non_null(strstr(st.stderr_tail, "fatal: cannot handle ping"));
	/* What is not UTF-8 or a control byte comes as '?'. */
	assert_non_null(strstr(st.stderr_tail, "not utf-8: ??, a control byte: ?\n"));
	assert_non_null(strstr(st.stderr_tail, "fake server crash starting"));
	/* The next session has a process of its own, which works. */
	s = open_session(c, "crashy", 0);
	pid2 = session_pid(c, s, &spare);
	assert_true(pid2 != pid);
	assert_true(spare);
}

static void garbage_and_long_lines_fail_only_their_session(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	sbx_proto_mcp_status st;
	tc_stream *s;

	s = ready_session(c, "garbage", "garbage", NULL, 0, 0, &st);
	send_line(c, s, ping, false);
	expect_err(wait_done(c, s), "bad_output", "not a JSON message");
	assert_non_null(strstr(s->msg, "Server ready on stdio! ?"));
	assert_int_equal(s->out_len, 0);
	fx_wait_procs(fx, fake_cmdline("garbage"), 1); /* the spare only */

	/* A line of 5000 bytes against a limit of 2048, and one under it. */
	configure(c, "long", "long", "5000", 2048);
	configure(c, "short", "long", "1000", 2048);
	status_ready(c, "long", &st);
	s = open_session(c, "long", 0);
	send_line(c, s, ping, false);
	expect_err(wait_done(c, s), "too_large", "2048");
	assert_int_equal(s->out_len, 0);
	status_ready(c, "long", &st);
	assert_int_equal(st.bad_output, 1);
	status_ready(c, "short", &st);
	s = open_session(c, "short", 0);
	send_line(c, s, ping, false);
	fx_wait_output(c, s, "aaaa\"}}\n");
	assert_int_equal(s->out_len, 1000 + strlen("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"pad\":\"\"}}\n"));
	/* The agent lives on. */
	fx_run_cmd(fx, "true");
}

static void flood_is_held_back_by_credit(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_stream *s;
	size_t held;
	long rss;

	s = ready_session(c, "flood", "flood", NULL, 0, 0, NULL);
	s->hold_credit = true;
	/* The window (the library's default: 256 KiB) fills, then nothing
	 * more comes: the server is blocked on write. */
	for (held = 0; s->held < SBX_PROTO_DEFAULT_WINDOW / 2 || s->held != held;) {
		held = s->held;
		tc_run(fx->base, 300);
		assert_false(s->done);
	}
	assert_true(held <= SBX_PROTO_DEFAULT_WINDOW);
	rss = agent_ns_rss_kb(&fx->ns);
	assert_true(rss > 0 && rss < 64 * 1024);
	/* Credit back: it goes on, each line whole. */
	tc_release(c, s);
	tc_run(fx->base, 200);
	assert_true(s->out_len > held);
	assert_int_equal(tc_cancel(c, s), 0);
	expect_err(wait_done(c, s), "cancelled", "");
	fx_wait_procs(fx, fake_cmdline("flood"), 1); /* the spare only */
}

static void idle_session_is_ended(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_stream *s;
	uint64_t t0;

	s = ready_session(c, "echo", "echo", NULL, 0, 1500, NULL);
	send_line(c, s, ping, false);
	fx_wait_output(c, s, "\"ping\"");
	t0 = test_now_ms();
	expect_err(wait_done(c, s), "timeout", "1500 ms");
	assert_true(test_now_ms() - t0 >= 1400);
	fx_wait_procs(fx, fake_cmdline("echo"), 1);
}

static void remove_ends_sessions(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	sbx_proto_mcp_status st, *sts = NULL;
	msgpack_sbuffer buf;
	msgpack_packer pk;
	tc_stream *s, *r;

	s = ready_session(c, "echo", "echo", NULL, 0, 0, &st);
	send_line(c, s, ping, false);
	fx_wait_output(c, s, "\"ping\"");
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	sbx_proto_mcp_pack_name(&pk, "echo");
	r = wait_done(c, request(c, SBX_OP_MCP_REMOVE, &buf));
	assert_false(r->failed);
	expect_err(wait_done(c, s), "not_found", "removed");
	r = wait_done(c, request(c, SBX_OP_MCP_REMOVE, &buf));
	expect_err(r, "not_found", "no MCP server echo");
	msgpack_sbuffer_destroy(&buf);
	assert_int_equal(list(c, &sts), 0);
	free(sts);
	fx_wait_procs(fx, fake_cmdline("echo"), 0);
	s = open_session(c, "echo", 0);
	expect_err(wait_done(c, s), "not_found", "no MCP server echo");
}

static void blank_lines_dropped_last_line_kept(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_stream *s;

	s = ready_session(c, "blank", "blank", NULL, 0, 0, NULL);
	send_line(c, s, ping, true);
	wait_done(c, s);
	assert_false(s->failed);
	assert_string_equal(s->out, "{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {}}\n");
}

static void agent_end_ends_every_server(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	sbx_proto_mcp_status st;
	tc_stream *s;
	int status;

	configure(c, "echo", "echo", NULL, 0);
	configure(c, "flood", "flood", NULL, 0);
	status_ready(c, "echo", &st);
	status_wait(c, "flood", SBX_MCP_WARMING, &st);
	s = open_session(c, "echo", 0);
	send_line(c, s, ping, false);
	fx_wait_output(c, s, "\"ping\"");
	assert_int_equal(kill(fx->ns.pid, SIGTERM), 0);
	wait_done(c, s);
	assert_true(s->failed);
	assert_int_equal(agent_ns_wait_exit(&fx->ns, 5000, &status), 0);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

/* The session's output holds exactly one line, the answer to id 1 (the
 * warm-up's answer never reaches it). */
static void only_the_sessions_answer(tc_stream *s)
{
	assert_false(s->failed);
	assert_non_null(strstr(s->out, "\"id\": 1,"));
	assert_null(strstr(s->out, "sbx-agent-warmup-"));
	assert_non_null(strchr(s->out, '\n'));
	assert_int_equal(strchr(s->out, '\n') - s->out + 1, s->out_len);
}

/* A session on name's spare in state (ready or warming): one ping, eof,
 * and only its answer comes out. */
static void one_ping_on_the_spare(tc_client *c, const char *name, sbx_proto_mcp_state state)
{
	sbx_proto_mcp_status st;
	tc_stream *s;
	bool spare;

	status_wait(c, name, state, &st);
	assert_true(st.spare_pid > 0);
	s = open_session(c, name, 0);
	assert_int_equal(session_pid(c, s, &spare), st.spare_pid);
	assert_true(spare);
	send_line(c, s, ping, true);
	wait_done(c, s);
	only_the_sessions_answer(s);
}

static void spare_is_warming_until_it_answers_the_ping(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	sbx_proto_mcp_status st;
	uint64_t t0;

	/* A server that loads for 1.5 s: running, but warming until then. */
	configure(c, "slow", "slow", "1.5", 0);
	t0 = test_now_ms();
	status_wait(c, "slow", SBX_MCP_WARMING, &st);
	assert_true(st.spare_pid > 0);
	status_ready(c, "slow", &st);
	assert_true(test_now_ms() - t0 >= 1000);
	one_ping_on_the_spare(c, "slow", SBX_MCP_READY);
	/* A session on the spare still warming: the answer that comes late is
	 * dropped there too. */
	one_ping_on_the_spare(c, "slow", SBX_MCP_WARMING);
	fx_wait_procs(fx, fake_cmdline("slow 1.5"), 1);
}

static void spare_that_never_answers_pings_is_served(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	sbx_proto_mcp_status st;

	configure(c, "noping", "noping", NULL, 0);
	one_ping_on_the_spare(c, "noping", SBX_MCP_WARMING);
	/* The next spare warms again (a cold one once AGENT_MCP_WARM_MS is
	 * over: still used, as above). */
	status_wait(c, "noping", SBX_MCP_WARMING, &st);
	assert_int_equal(st.opened, 1);
	fx_wait_procs(fx, fake_cmdline("noping"), 1);
}

/* op with {"name": name, "argv": ["cat"] (with argv), key: sval or ival}
 * is refused with bad_request saying part. */
static void refused(tc_client *c, const char *op, const char *name, bool argv, const char *key, int64_t ival,
		    const char *sval, const char *part)
{
	msgpack_sbuffer buf;
	msgpack_packer pk;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1 + argv + (key != NULL));
	sbx_proto_pack_str(&pk, "name");
	sbx_proto_pack_str(&pk, name);
	if (argv) {
		sbx_proto_pack_str(&pk, "argv");
		msgpack_pack_array(&pk, 1);
		sbx_proto_pack_str(&pk, "cat");
	}
	if (key) {
		sbx_proto_pack_str(&pk, key);
		if (sval)
			sbx_proto_pack_str(&pk, sval);
		else
			msgpack_pack_int64(&pk, ival);
	}
	expect_err(wait_done(c, request(c, op, &buf)), "bad_request", part);
	msgpack_sbuffer_destroy(&buf);
}

static void bad_input_gets_clear_errors(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_stream *s;

	/* exec's own keys that a server does not take, bad names and bounds. */
	refused(c, SBX_OP_MCP_CONFIGURE, "x", true, "user", 0, "root", "unknown argument user");
	refused(c, SBX_OP_MCP_CONFIGURE, "../x", true, NULL, 0, NULL, "name must be");
	refused(c, SBX_OP_MCP_CONFIGURE, "x", false, NULL, 0, NULL, "argv");
	refused(c, SBX_OP_MCP_CONFIGURE, "x", true, "max_line", 10, NULL, "max_line");
	refused(c, SBX_OP_MCP_OPEN, "x", false, "idle_ms", -1, NULL, "idle_ms");
	/* Data on another channel ends the session, not the agent. */
	configure(c, "echo", "echo", NULL, 0);
	s = open_session(c, "echo", 0);
	{
		sbx_err err = { 0 };
		assert_int_equal(sbx_proto_conn_send_data(c->conn, s->id, "stdout", "x", 1, false, &err), 0);
	}
	expect_err(wait_done(c, s), "bad_request", "channel stdin");
	fx_run_cmd(fx, "true");
}

/* ---- @modelcontextprotocol/server-everything (npm, tests/mcp-servers) ---- */

#define EVERYTHING MCP_NPM_DIR "/node_modules/@modelcontextprotocol/server-everything/dist/index.js"

static void configure_everything(tc_client *c, const char *name, const char *shell_prefix)
{
	char cmd[1024];
	const char *node_argv[] = { "/usr/bin/node", EVERYTHING, "stdio", NULL };
	const char *sh_argv[] = { "/bin/sh", "-c", cmd, NULL };
	sbx_proto_mcp_config cfg = { .name = name, .argv = shell_prefix ? sh_argv : node_argv, .cwd = "/" };
	sbx_err err = { 0 };
	msgpack_sbuffer buf;
	msgpack_packer pk;
	tc_stream *s;

	if (access(EVERYTHING, R_OK) != 0)
		fail_msg("%s is missing: run scripts/install-mcp-servers", EVERYTHING);
	snprintf(cmd, sizeof(cmd), "%s; exec /usr/bin/node %s stdio", shell_prefix ? shell_prefix : "", EVERYTHING);
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	if (sbx_proto_mcp_pack_config(&pk, &cfg, &err) < 0)
		fail_msg("%s", err.msg);
	s = wait_done(c, request(c, SBX_OP_MCP_CONFIGURE, &buf));
	msgpack_sbuffer_destroy(&buf);
	if (s->failed)
		fail_msg("configure %s: %s %s", name, s->code, s->msg);
	tc_forget(c, s);
}

static const char *const initialize =
	"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
	"\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"sbx-agent-test\",\"version\":\"0\"}}}\n";

static void everything_initialize_list_call_crash(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	sbx_proto_mcp_status st;
	tc_stream *s;
	bool spare;
	int64_t pid;
	uint64_t t0;
	char cmd[64];

	configure_everything(c, "everything", NULL);
	status_ready(c, "everything", &st);
	/* Let the spare finish its start-up (that is what it is for): node
	 * takes 0.3 s on an idle machine, seconds on a loaded one. The figure
	 * printed below is informative only. */
	tc_run(fx->base, 5000);
	s = open_session(c, "everything", 0);
	pid = session_pid(c, s, &spare);
	assert_true(spare);
	t0 = test_now_ms();
	send_line(c, s, initialize, false);
	fx_wait_output(c, s, "\"serverInfo\"");
	print_message("initialize on the spare: %llu ms\n", (unsigned long long)(test_now_ms() - t0));
	assert_non_null(strstr(s->out, "\"id\":1"));
	send_line(c, s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n", false);
	send_line(c, s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}\n", false);
	fx_wait_output(c, s, "\"id\":2");
	assert_non_null(strstr(s->out, "\"name\":\"echo\""));
	assert_non_null(strstr(s->out, "\"name\":\"get-sum\""));
	send_line(c, s,
		  "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
		  "\"arguments\":{\"message\":\"hello from sbx\"}}}\n",
		  false);
	fx_wait_output(c, s, "Echo: hello from sbx");
	/* Every line that came is whole. */
	assert_int_equal(s->out[s->out_len - 1], '\n');

	/* The server killed under its session: crashed; the next session
	 * (on the new spare) initializes. */
	snprintf(cmd, sizeof(cmd), "kill -9 %lld", (long long)pid);
	fx_run_cmd(fx, cmd);
	expect_err(wait_done(c, s), "crashed", "signal 9");
	s = open_session(c, "everything", 0);
	assert_true(session_pid(c, s, &spare) != pid);
	send_line(c, s, initialize, false);
	fx_wait_output(c, s, "\"serverInfo\"");
	send_line(c, s, "", true);
	wait_done(c, s);
	assert_false(s->failed);
}

/* A launcher that prints a banner on stdout before the server: refused as
 * not JSON, and the agent goes on. */
static void everything_behind_a_noisy_launcher(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_stream *s;

	configure_everything(c, "noisy", "echo 'Starting MCP server...'");
	s = open_session(c, "noisy", 0);
	send_line(c, s, initialize, false);
	expect_err(wait_done(c, s), "bad_output", "Starting MCP server...");
	fx_run_cmd(fx, "true");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(session_on_the_spare_runs_jailed, fx_setup_container_caps, fx_teardown),
		cmocka_unit_test_setup_teardown(two_sessions_two_processes, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(crash_reports_stderr_and_next_session_is_fresh, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(garbage_and_long_lines_fail_only_their_session, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(flood_is_held_back_by_credit, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(idle_session_is_ended, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(remove_ends_sessions, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(blank_lines_dropped_last_line_kept, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(agent_end_ends_every_server, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(bad_input_gets_clear_errors, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(spare_is_warming_until_it_answers_the_ping, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(spare_that_never_answers_pings_is_served, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(everything_initialize_list_call_crash, fx_setup_container_caps,
						fx_teardown),
		cmocka_unit_test_setup_teardown(everything_behind_a_noisy_launcher, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
