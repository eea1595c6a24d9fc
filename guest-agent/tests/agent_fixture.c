#include "agent_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <event2/event.h>

#include "test_util.h"

static int setup_flags(void **state, unsigned flags)
{
	fixture *fx = calloc(1, sizeof(*fx));
	int ret;

	if (!fx)
		return -1;
	*state = fx;
	ret = agent_ns_start_ex(&fx->ns, FX_GRACE_MS, flags);
	if (ret < 0) {
		fprintf(stderr, "start %s: %s\n", agent_ns_binary(), strerror(-ret));
		return -1;
	}
	fx->base = event_base_new();
	return fx->base ? 0 : -1;
}

int fx_setup(void **state)
{
	return setup_flags(state, 0);
}

int fx_setup_container_caps(void **state)
{
	return setup_flags(state, AGENT_NS_CONTAINER_CAPS);
}

int fx_teardown(void **state)
{
	fixture *fx = *state;

	if (!fx)
		return 0;
	for (size_t i = 0; i < 4; i++)
		tc_close(&fx->clients[i]);
	if (fx->blocking)
		sbx_proto_client_free(fx->blocking);
	agent_ns_stop(&fx->ns);
	if (fx->base)
		event_base_free(fx->base);
	free(fx);
	return 0;
}

tc_client *fx_client(fixture *fx, size_t i)
{
	tc_client *c = &fx->clients[i];

	if (!c->conn && tc_connect(c, fx->base, fx->ns.sock) < 0)
		fail_msg("connect to %s", fx->ns.sock);
	return c;
}

sbx_proto_client *fx_blocking(fixture *fx)
{
	sbx_err err = { 0 };

	if (!fx->blocking && sbx_proto_client_connect(fx->ns.sock, 10000, &fx->blocking, &err) < 0)
		fail_msg("blocking connect: %s", err.msg);
	return fx->blocking;
}

const char *fx_str(const char *s)
{
	return s ? s : "";
}

tc_stream *fx_run(fixture *fx, const tc_exec_opts *o)
{
	tc_client *c = fx_client(fx, 0);
	tc_stream *s = tc_exec(c, o);

	assert_non_null(s);
	if (!tc_wait(c, s, FX_WAIT_MS))
		fail_msg("exec did not end in %u ms", FX_WAIT_MS);
	if (s->failed)
		fail_msg("exec failed: %s: %s", s->code, s->msg);
	return s;
}

tc_stream *fx_run_cmd(fixture *fx, const char *cmd)
{
	tc_exec_opts o = { .cmd = cmd };

	return fx_run(fx, &o);
}

void fx_wait_output(tc_client *c, tc_stream *s, const char *needle)
{
	uint64_t deadline = test_now_ms() + FX_WAIT_MS;

	while (!strstr(fx_str(s->out), needle)) {
		if (s->done || c->closed || test_now_ms() > deadline)
			fail_msg("no \"%s\" in the output \"%s\" (%s %s)", needle, fx_str(s->out), s->code, s->msg);
		tc_run(c->base, 5);
	}
}

void fx_wait_no_zombies(fixture *fx, int want_total)
{
	int total = -1, zombies = -1;
	/* A deadline, not a count of rounds: on a loaded machine each scan of
	 * /proc and each loop turn take longer, and 300 rounds were not always
	 * the 3 s they are on an idle one. */
	uint64_t deadline = test_now_ms() + FX_WAIT_MS;

	while (test_now_ms() < deadline) {
		assert_int_equal(agent_ns_procs(&fx->ns, &total, &zombies), 0);
		if (zombies == 0 && total == want_total)
			return;
		tc_run(fx->base, 10);
	}
	fail_msg("namespace has %d processes, %d zombies; want %d, 0", total, zombies, want_total);
}

void fx_wait_procs(fixture *fx, const char *cmdline, int want)
{
	int n = -1;
	uint64_t deadline = test_now_ms() + FX_WAIT_MS;

	while (test_now_ms() < deadline) {
		assert_int_equal(agent_ns_scan(&fx->ns, cmdline, &n, NULL), 0);
		if (n == want)
			return;
		tc_run(fx->base, 10); /* requests go out from the loop */
	}
	fail_msg("%d processes \"%s\" in the agent's tree, want %d", n, cmdline, want);
}
