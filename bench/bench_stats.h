/* Latency samples and their percentiles, for the benchmark harness only. */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stddef.h>

typedef struct bench_samples {
	double *ms;
	size_t n, cap;
} bench_samples;

void bench_samples_add(bench_samples *s, double ms);
/* p in [0,100]; sorts in place. 0 when empty. */
double bench_samples_pct(bench_samples *s, double p);
void bench_samples_free(bench_samples *s);
double bench_now_ms(void);

#endif
