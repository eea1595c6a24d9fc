/* The clocks: monotonic milliseconds, a duration from a reading, never
 * negative for a reading in the future, and the fractional form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <cmocka.h>

#include "sbx/clock.h"

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) != 0)
		;
}

static void now_ms_is_the_monotonic_clock(void **state)
{
	(void)state;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	uint64_t before = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
	uint64_t now = sbx_now_ms();
	assert_true(now >= before);
	sleep_ms(20);
	assert_true(sbx_now_ms() >= now + 20);
}

static void ms_since_counts_the_time_passed(void **state)
{
	(void)state;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sleep_ms(30);
	uint64_t ms = sbx_ms_since(&t0);
	double f = sbx_ms_since_f(&t0);
	assert_true(ms >= 30);
	assert_true(f >= 30.0);
	assert_true(f >= (double)ms); /* read later, with its fraction */
	uint64_t ns = sbx_ns_since(&t0);
	assert_true(ns >= 30ull * 1000000ull);
	assert_true(ns / 1000000ull >= ms); /* read later still */
}

static void ms_since_a_later_reading_is_zero(void **state)
{
	(void)state;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	t0.tv_sec += 60;
	assert_int_equal(sbx_ms_since(&t0), 0);
	assert_int_equal(sbx_ns_since(&t0), 0);
	assert_true(sbx_ms_since_f(&t0) < -59000.0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(now_ms_is_the_monotonic_clock),
		cmocka_unit_test(ms_since_counts_the_time_passed),
		cmocka_unit_test(ms_since_a_later_reading_is_zero),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
