/* Exec of `true` straight through an agent socket (the blocking protocol
 * client), for the benchmark harness. */
#ifndef BENCH_AGENT_H
#define BENCH_AGENT_H

#include "bench_stats.h"

/* Adds one sample per successful exec; returns how many failed. */
int bench_agent_exec_true(const char *socket_path, int iterations, bench_samples *out);

#endif
