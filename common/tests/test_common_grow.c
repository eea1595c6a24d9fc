/* sbx_grow: doubling from the first size, the bound, and an array left
 * as it was when growing fails. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "sbx/grow.h"

static void test_grows_by_doubling_to_the_bound(void **state)
{
	(void)state;
	int *v = NULL;
	size_t cap = 0, n = 0;
	for (; n < 40; n++) {
		assert_int_equal(sbx_grow(&v, &cap, n, sizeof(*v), 4, 40), 0);
		assert_true(cap > n && cap <= 40);
		v[n] = (int)n;
	}
	assert_int_equal(cap, 40); /* 4, 8, 16, 32, then the bound, not 64 */
	assert_int_equal(sbx_grow(&v, &cap, n, sizeof(*v), 4, 40), -ENOSPC);
	assert_int_equal(cap, 40);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(v[i], (int)i);
	free(v);
}

static void test_no_room_needed_changes_nothing(void **state)
{
	(void)state;
	char *v = NULL;
	size_t cap = 0;
	assert_int_equal(sbx_grow(&v, &cap, 0, 1, 8, 100), 0);
	char *before = v;
	assert_int_equal(sbx_grow(&v, &cap, 7, 1, 8, 100), 0);
	assert_ptr_equal(v, before);
	assert_int_equal(cap, 8);
	free(v);
}

static void test_overflow_is_enomem_and_keeps_the_array(void **state)
{
	(void)state;
	long *v = NULL;
	size_t cap = 0;
	assert_int_equal(sbx_grow(&v, &cap, 0, sizeof(*v), 2, SIZE_MAX), 0);
	long *kept = v;
	cap = SIZE_MAX / 2; /* the next doubling cannot be sized */
	assert_int_equal(sbx_grow(&v, &cap, SIZE_MAX / 2, sizeof(*v), 2, SIZE_MAX), -ENOMEM);
	assert_ptr_equal(v, kept);
	assert_int_equal(cap, SIZE_MAX / 2);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_grows_by_doubling_to_the_bound),
		cmocka_unit_test(test_no_room_needed_changes_nothing),
		cmocka_unit_test(test_overflow_is_enomem_and_keeps_the_array),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
