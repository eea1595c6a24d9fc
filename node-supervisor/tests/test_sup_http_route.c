/* The route table: paths, {id} capture, 404 vs 405 with Allow (sup_http). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sup_http.h"

static int route(const char *m, const char *p, char *id, char *allow)
{
	return sup_http_route(m, p, id, 64, allow, 64);
}

static void test_routes(void **state)
{
	(void)state;
	char id[64], allow[64];
	assert_true(route("GET", "/healthz", id, allow) >= 0);
	assert_true(route("GET", "/v1/sandboxes", id, allow) >= 0);
	assert_true(route("POST", "/v1/sandboxes", id, allow) >= 0);
	int g = route("GET", "/v1/sandboxes/sb-1", id, allow);
	assert_true(g >= 0);
	assert_string_equal(id, "sb-1");
	int d = route("DELETE", "/v1/sandboxes/sb-2", id, allow);
	assert_true(d >= 0 && d != g);
	assert_string_equal(id, "sb-2");
	int x = route("POST", "/v1/sandboxes/sb-3/exec", id, allow);
	assert_true(x >= 0 && x != g && x != d);
	assert_string_equal(id, "sb-3");
	assert_true(route("GET", "/v1/pools", id, allow) >= 0);
}

static void test_not_found(void **state)
{
	(void)state;
	char id[64], allow[64];
	assert_int_equal(route("GET", "/", id, allow), -ENOENT);
	assert_int_equal(route("GET", "/v1", id, allow), -ENOENT);
	assert_int_equal(route("GET", "/v1/sandboxes/", id, allow), -ENOENT);
	assert_int_equal(route("GET", "/v1/sandboxes/a/b", id, allow), -ENOENT);
	assert_int_equal(route("POST", "/v1/sandboxes/a/exec/", id, allow), -ENOENT);
	assert_int_equal(route("GET", "/healthz/x", id, allow), -ENOENT);
	assert_int_equal(route("GET", "/v1/sandboxesX", id, allow), -ENOENT);
}

static void test_method_not_allowed(void **state)
{
	(void)state;
	char id[64], allow[64];
	assert_int_equal(route("PUT", "/v1/sandboxes", id, allow), -EPERM);
	assert_string_equal(allow, "GET, POST");
	assert_int_equal(route("POST", "/v1/sandboxes/sb-1", id, allow), -EPERM);
	assert_string_equal(allow, "GET, DELETE");
	assert_int_equal(route("GET", "/v1/sandboxes/sb-1/exec", id, allow), -EPERM);
	assert_string_equal(allow, "POST");
	assert_int_equal(route("POST", "/healthz", id, allow), -EPERM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_routes),
		cmocka_unit_test(test_not_found),
		cmocka_unit_test(test_method_not_allowed),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
