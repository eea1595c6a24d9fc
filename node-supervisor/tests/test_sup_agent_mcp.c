/* The supervisor's agent client for MCP servers (sup_agent_mcp) against the
 * real agent binary as PID 1 of new namespaces (guest-agent/tests/agent_ns)
 * with the misbehaving test server (guest-agent/tests/mcp_fake_server.py):
 * configure and list with statuses checked, a session's messages both ways,
 * a paused reader holding the server back and resumed, a normal close, a
 * crash, garbage, a removed server, and the errors of each as the core
 * sees them. Needs root (namespaces). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "agent_ns.h"
#include "sup_agent.h"
#include "sup_agent_mcp.h"
#include "test_util.h"

#define WAIT_MS 10000

typedef struct fx {
	agent_ns ns;
	struct event_base *base;
	sup_agent *a;
	int ready, lost;
} fx;

static void a_ready(sup_agent *a, void *ud)
{
	((fx *)ud)->ready++;
}

static void a_lost(sup_agent *a, const sbx_err *why, void *ud)
{
	fx *f = ud;

	f->lost++;
	sup_agent_free(a);
	f->a = NULL;
}

static const sup_agent_cbs agent_cbs = { .on_ready = a_ready, .on_lost = a_lost };

static void run_until(fx *f, const int *flag, int want)
{
	uint64_t deadline = test_now_ms() + WAIT_MS;

	while (*flag < want) {
		if (test_now_ms() > deadline)
			fail_msg("timed out");
		event_base_loop(f->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		usleep(1000);
	}
}

static void run_ms(fx *f, unsigned ms)
{
	uint64_t end = test_now_ms() + ms;

	while (test_now_ms() < end) {
		event_base_loop(f->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		usleep(1000);
	}
}

static int setup(void **state)
{
	fx *f = calloc(1, sizeof(*f));
	sup_agent_opts o = {
		.grace_ms = 2000, .idle_ms = 5000, .ping_after_ms = 10000, .ping_timeout_ms = 5000,
		.frame_ms = 5000, .max_streams = 64, .max_waiting = 64, .max_queued = 8u << 20,
	};
	sbx_err err = { 0 };

	assert_non_null(f);
	assert_int_equal(agent_ns_start(&f->ns, 1000), 0);
	f->base = event_base_new();
	assert_int_equal(sup_agent_connect(f->base, f->ns.sock, "sb-mcp-test", 5000, &o, &agent_cbs, f, &f->a, &err),
			 0);
	run_until(f, &f->ready, 1);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;

	if (f->a)
		sup_agent_free(f->a);
	agent_ns_stop(&f->ns);
	event_base_free(f->base);
	free(f);
	return 0;
}

/* ---- configure / list / remove ---- */

typedef struct answer {
	int done, rc;
	sbx_proto_mcp_status st[4];
	size_t n;
	sbx_err err;
} answer;

static void on_answer(int rc, const sbx_proto_mcp_status *st, size_t n, const sbx_err *err, void *ud)
{
	answer *x = ud;

	x->done++;
	x->rc = rc;
	x->n = n < 4 ? n : 4;
	if (st)
		memcpy(x->st, st, x->n * sizeof(*st));
	if (err)
		x->err = *err;
}

static sup_mcp_server fake(const char *name, const char *mode)
{
	sup_mcp_server s = { 0 };

	s.name = strdup(name);
	s.argv = calloc(4, sizeof(char *));
	s.argv[0] = strdup("/usr/bin/python3");
	s.argv[1] = strdup(MCP_FAKE_SERVER);
	s.argv[2] = strdup(mode);
	s.argc = 3;
	s.env.v = calloc(1, sizeof(*s.env.v));
	s.env.v[0].key = strdup("LC_ALL");
	s.env.v[0].val = strdup("C.UTF-8");
	s.env.n = 1;
	return s;
}

static void configure(fx *f, const char *name, const char *mode)
{
	sup_mcp_server s = fake(name, mode);
	sup_agent_call *call;
	answer x = { 0 };
	sbx_err err = { 0 };

	assert_int_equal(sup_agent_mcp_configure(f->a, &s, on_answer, &x, &call, &err), 0);
	run_until(f, &x.done, 1);
	if (x.rc)
		fail_msg("configure: %s", x.err.msg);
	assert_int_equal(x.n, 1);
	assert_string_equal(x.st[0].name, name);
	sup_mcp_server_free(&s);
}

static answer list(fx *f)
{
	sup_agent_call *call;
	answer x = { 0 };
	sbx_err err = { 0 };

	assert_int_equal(sup_agent_mcp_list(f->a, on_answer, &x, &call, &err), 0);
	run_until(f, &x.done, 1);
	assert_int_equal(x.rc, 0);
	return x;
}

/* ---- sessions ---- */

typedef struct sess {
	sup_mcp_session *s;
	int opened, done, writable, rc;
	int64_t pid;
	bool spare;
	char msgs[1 << 16];
	size_t len;
	int nmsgs;
	sup_exec_status st;
	sbx_err err;
} sess;

static void s_opened(sup_mcp_session *s, int64_t pid, bool spare, void *ud)
{
	sess *x = ud;

	x->opened++;
	x->pid = pid;
	x->spare = spare;
}

static void s_message(sup_mcp_session *s, const char *msg, size_t len, void *ud)
{
	sess *x = ud;

	assert_null(memchr(msg, '\n', len));
	x->nmsgs++;
	if (x->len + len + 1 < sizeof(x->msgs)) {
		memcpy(x->msgs + x->len, msg, len);
		x->len += len;
		x->msgs[x->len++] = '|';
		x->msgs[x->len] = '\0';
	}
}

static void s_writable(sup_mcp_session *s, void *ud)
{
	((sess *)ud)->writable++;
}

static void s_done(sup_mcp_session *s, int rc, const sup_exec_status *st, const sbx_err *err, void *ud)
{
	sess *x = ud;

	x->done++;
	x->rc = rc;
	if (st)
		x->st = *st;
	if (err)
		x->err = *err;
	x->s = NULL;
}

static const sup_mcp_session_cbs sess_cbs = {
	.on_opened = s_opened, .on_message = s_message, .on_writable = s_writable, .on_done = s_done,
};

static void open_session(fx *f, const char *name, sess *x)
{
	sbx_err err = { 0 };

	memset(x, 0, sizeof(*x));
	assert_int_equal(sup_agent_mcp_open(f->a, name, 0, 0, &sess_cbs, x, &x->s, &err), 0);
}

/* Server name running the fake server in mode, and a session on it. */
static void session_on(fx *f, const char *name, const char *mode, sess *x)
{
	configure(f, name, mode);
	open_session(f, name, x);
	run_until(f, &x->opened, 1);
}

static void send_msg(fx *f, sess *x, const char *msg)
{
	sbx_err err = { 0 };
	int w = x->writable;

	assert_int_equal(sup_agent_mcp_send(x->s, msg, strlen(msg), &err), 0);
	run_until(f, &x->writable, w + 1);
}

static void wait_msgs(fx *f, sess *x, int n)
{
	run_until(f, &x->nmsgs, n);
}

static void session_both_ways_and_close(void **state)
{
	fx *f = *state;
	sess x;
	sbx_err err = { 0 };
	answer l;

	session_on(f, "echo", "echo", &x);
	assert_true(x.pid > 1);
	send_msg(f, &x, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
	wait_msgs(f, &x, 1);
	assert_non_null(strstr(x.msgs, "\"id\": 1"));
	assert_non_null(strstr(x.msgs, "\"uid\": 1000"));
	/* A newline inside a message is refused. */
	assert_int_equal(sup_agent_mcp_send(x.s, "{}\n{}", 5, &err), -EINVAL);
	l = list(f);
	assert_int_equal(l.n, 1);
	assert_int_equal(l.st[0].sessions, 1);
	sup_agent_mcp_close(x.s);
	run_until(f, &x.done, 1);
	assert_int_equal(x.rc, 0);
	assert_true(x.st.exited);
	assert_int_equal(x.st.exit_code, 0);
}

static void paused_reader_holds_the_server(void **state)
{
	fx *f = *state;
	sess x;
	int n;

	session_on(f, "flood", "flood", &x);
	run_until(f, &x.nmsgs, 1);
	sup_agent_mcp_pause(x.s);
	/* What was in flight arrives, then nothing more. */
	run_ms(f, 500);
	n = x.nmsgs;
	run_ms(f, 500);
	assert_int_equal(x.nmsgs, n);
	assert_true(n < 100000);
	sup_agent_mcp_resume(x.s);
	run_ms(f, 300);
	assert_true(x.nmsgs > n);
	sup_agent_mcp_cancel(x.s);
	run_ms(f, 100);
	assert_int_equal(x.done, 0); /* no callback after cancel */
	assert_int_equal(f->lost, 0);
}

static void crash_garbage_removed(void **state)
{
	fx *f = *state;
	sess x;
	sup_agent_call *call;
	answer r = { 0 };
	sbx_err err = { 0 };
	answer l;

	session_on(f, "crashy", "crash", &x);
	send_msg(f, &x, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
	run_until(f, &x.done, 1);
	assert_int_equal(x.rc, -EPIPE);
	assert_non_null(strstr(x.err.msg, "fatal: cannot handle tools/list"));
	l = list(f);
	assert_int_equal(l.st[0].crashes, 1);
	assert_true(l.st[0].has_exit);
	assert_int_equal(l.st[0].exit_code, 3);

	session_on(f, "garbage", "garbage", &x);
	send_msg(f, &x, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
	run_until(f, &x.done, 1);
	assert_int_equal(x.rc, -EBADMSG);
	assert_int_equal(x.nmsgs, 0);

	/* Removing a server ends its sessions; then it is unknown. */
	session_on(f, "echo", "echo", &x);
	assert_int_equal(sup_agent_mcp_remove(f->a, "echo", on_answer, &r, &call, &err), 0);
	run_until(f, &r.done, 1);
	assert_int_equal(r.rc, 0);
	run_until(f, &x.done, 1);
	assert_int_equal(x.rc, -ENOENT);
	open_session(f, "echo", &x);
	run_until(f, &x.done, 1);
	assert_int_equal(x.rc, -ENOENT);
	memset(&r, 0, sizeof(r));
	assert_int_equal(sup_agent_mcp_remove(f->a, "echo", on_answer, &r, &call, &err), 0);
	run_until(f, &r.done, 1);
	assert_int_equal(r.rc, -ENOENT);
	/* None of it was the agent breaking the protocol. */
	assert_int_equal(f->lost, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(session_both_ways_and_close, setup, teardown),
		cmocka_unit_test_setup_teardown(paused_reader_holds_the_server, setup, teardown),
		cmocka_unit_test_setup_teardown(crash_garbage_removed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
