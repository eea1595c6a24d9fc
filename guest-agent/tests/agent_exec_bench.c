/* Exec round-trip latency of the real agent: `true` run N times over one
 * connection with the blocking client (protocol/include/sbx/proto_client.h),
 * the agent as PID 1 of new namespaces (agent_ns.h). Prints p10/p50/p90/p99.
 * A measuring tool, not a test: run it by hand (root) against the static
 * binary, e.g. AGENT_BINARY=build/guest-agent/sandbox-agent agent_exec_bench 2000 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sbx/proto_client.h"
#include "agent_ns.h"
#include "test_util.h"

int main(int argc, char **argv)
{
	static const char *const true_argv[] = { "true", NULL };
	int n = argc > 1 ? atoi(argv[1]) : 2000;
	sbx_proto_client *c = NULL;
	sbx_err err = { 0 };
	agent_ns ns;
	double *s;
	int ret, failed = 0;

	if (n < 10 || n > 1000000) {
		fprintf(stderr, "usage: agent_exec_bench [iterations, 10..1000000]\n");
		return 2;
	}
	s = calloc((size_t)n, sizeof(*s));
	if (!s)
		return 1;
	ret = agent_ns_start(&ns, 1000);
	if (ret < 0) {
		fprintf(stderr, "start %s: %s\n", agent_ns_binary(), strerror(-ret));
		free(s);
		return 1;
	}
	if (sbx_proto_client_connect(ns.sock, 10000, &c, &err) < 0) {
		fprintf(stderr, "connect: %s\n", err.msg);
		failed = n;
		goto out;
	}
	for (int i = 0; i < n + n / 10; i++) {
		sbx_proto_exec_result r = { 0 };
		double t = test_now_ms_f();

		ret = sbx_proto_client_exec(c, true_argv, NULL, 0, 0, &r, &err);
		t = test_now_ms_f() - t;
		if (ret < 0 || !r.exited || r.exit_code != 0)
			failed++;
		else if (i >= n / 10) /* the first tenth warms up */
			s[i - n / 10] = t;
		sbx_proto_exec_result_free(&r);
	}
	if (failed == 0) {
		test_sort_ms(s, (size_t)n);
		/* p10 too: on a shared machine it moves least with the load. */
		printf("exec `true` x%d via %s: p10 %.3f ms, p50 %.3f ms, p90 %.3f ms, p99 %.3f ms\n", n,
		       agent_ns_binary(), s[n / 10], s[n / 2], s[n * 9 / 10], s[n * 99 / 100]);
	}
out:
	if (c)
		sbx_proto_client_free(c);
	agent_ns_stop(&ns);
	free(s);
	if (failed)
		fprintf(stderr, "%d execs failed (%s)\n", failed, err.msg);
	return failed ? 1 : 0;
}
