/* The harness's rows as machine-readable results: one JSON line per row,
 * appended to the file $SBX_BENCH_RESULTS names (bench/bench_run.py sets
 * it; bench/bench_report.py turns the lines into BENCHMARKS.md's table).
 * Nothing is written when it is unset. Owns no state; prints nothing. */
#ifndef BENCH_RESULTS_H
#define BENCH_RESULTS_H

#include <jansson.h>

/* One row: key (stable, what the report's table refers to), what (the
 * row's words), role ("sbx", "peer", "floor", ...) and figures (an object:
 * "n", "p50_ms", "mbps", ...; the reference is taken, also on error). */
void bench_result(const char *key, const char *what, const char *role, json_t *figures);

#endif
