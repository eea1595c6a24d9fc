/* Small helpers shared by the agent's tests: temporary folders, sockets,
 * msgpack values. Test code only. */
#ifndef AGENT_TEST_UTIL_H
#define AGENT_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

/* rm -rf path (no symlinks followed). */
void test_rm_rf(const char *path);
/* Connected, blocking unix stream socket, or -1. */
int test_unix_connect(const char *path);
/* Monotonic milliseconds. */
uint64_t test_now_ms(void);
/* The same with fractions, for latencies. */
double test_now_ms_f(void);
/* Sort n latencies (ascending), for reading percentiles off them. */
void test_sort_ms(double *s, size_t n);

#endif
