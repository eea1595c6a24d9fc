#include "bench_agent.h"

#include <stdio.h>

#include "sbx/proto_client.h"

int bench_agent_exec_true(const char *socket_path, int iterations, bench_samples *out)
{
	sbx_err err = {0};
	sbx_proto_client *c = NULL;
	if (sbx_proto_client_connect(socket_path, 10000, &c, &err) < 0) {
		fprintf(stderr, "agent %s: %s\n", socket_path, err.msg);
		return iterations;
	}
	static const char *const argv[] = {"true", NULL};
	int failed = 0;
	for (int i = 0; i < iterations; i++) {
		sbx_proto_exec_result res = {0};
		double t = bench_now_ms();
		int rc = sbx_proto_client_exec(c, argv, NULL, 0, 0, &res, &err);
		double dt = bench_now_ms() - t;
		if (rc == 0 && res.exited && res.exit_code == 0)
			bench_samples_add(out, dt);
		else
			failed++;
		sbx_proto_exec_result_free(&res);
	}
	sbx_proto_client_free(c);
	return failed;
}
