#include "bench_stats.h"

#include <stdlib.h>
#include <time.h>

void bench_samples_add(bench_samples *s, double ms)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		double *p = realloc(s->ms, cap * sizeof(*p));
		if (!p)
			abort();
		s->ms = p;
		s->cap = cap;
	}
	s->ms[s->n++] = ms;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

double bench_samples_pct(bench_samples *s, double p)
{
	if (s->n == 0)
		return 0;
	qsort(s->ms, s->n, sizeof(double), cmp_double);
	size_t i = (size_t)((p / 100.0) * (double)(s->n - 1) + 0.5);
	return s->ms[i < s->n ? i : s->n - 1];
}

void bench_samples_free(bench_samples *s)
{
	free(s->ms);
	s->ms = NULL;
	s->n = s->cap = 0;
}

double bench_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
