/* Sandbox limits: the flags' syntax, a create request's "resources", the
 * floor and the ceiling, rendering (sup_resources). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <jansson.h>

#include "sup_resources.h"

#define G (1ull << 30)
#define M (1ull << 20)

static sup_resources max_res(void)
{
	sup_resources m = { .cpu_milli = 2000, .memory = 4 * G, .pids = 4096, .disk = 20 * G };
	return m;
}

static void test_default(void **state)
{
	(void)state;
	sup_resources r;
	sup_resources_default(&r);
	assert_int_equal(r.cpu_milli, 1000);
	assert_int_equal(r.memory, G);
	assert_int_equal(r.pids, 1024);
	assert_int_equal(r.disk, 10 * G);
}

static void test_spec(void **state)
{
	(void)state;
	sup_resources r;
	sbx_err e;
	sup_resources_default(&r);
	assert_int_equal(sup_resources_parse_spec("--x", "cpus=0.5,memory=256M,pids=256,disk=512M", &r, &e), 0);
	assert_int_equal(r.cpu_milli, 500);
	assert_int_equal(r.memory, 256 * M);
	assert_int_equal(r.pids, 256);
	assert_int_equal(r.disk, 512 * M);
	/* keys left out keep theirs */
	assert_int_equal(sup_resources_parse_spec("--x", "cpus=2.125", &r, &e), 0);
	assert_int_equal(r.cpu_milli, 2125);
	assert_int_equal(r.memory, 256 * M);
	assert_int_equal(sup_resources_parse_spec("--x", "disk=1073741824,cpus=3", &r, &e), 0);
	assert_int_equal(r.disk, G);
	assert_int_equal(r.cpu_milli, 3000);
}

static void spec_fails(const char *spec, const char *needle)
{
	sup_resources r, before;
	sbx_err e;
	sup_resources_default(&r);
	before = r;
	sbx_err_clear(&e);
	assert_int_equal(sup_resources_parse_spec("--max-resources", spec, &r, &e), -EINVAL);
	if (!strstr(e.msg, needle))
		fail_msg("spec '%s': message '%s' lacks '%s'", spec, e.msg, needle);
	assert_memory_equal(&r, &before, sizeof(r)); /* untouched on failure */
}

static void test_spec_errors(void **state)
{
	(void)state;
	spec_fails("", "empty");
	spec_fails(",", "empty");
	spec_fails("cpus", "key=value");
	spec_fails("gpus=1", "key=value");
	spec_fails("cpus=1,cpus=2", "cpus given twice");
	spec_fails("cpus=0.0001", "cpus");
	spec_fails("cpus=.5", "cpus");
	spec_fails("cpus=1.", "cpus");
	spec_fails("cpus=-1", "cpus");
	spec_fails("cpus=0", "cpus: 0 is under the floor of 0.01");
	spec_fails("cpus=5000", "cpus: 5000 is over the most of 4096");
	spec_fails("memory=1M", "memory: 1M is under the floor of 32M");
	spec_fails("memory=12X", "memory");
	spec_fails("memory=", "memory");
	spec_fails("pids=8", "pids: 8 is under the floor of 16");
	spec_fails("pids=1e3", "pids");
	spec_fails("pids=99999999999", "pids");
	spec_fails("pids=9999999", "pids: 9999999 is over the most of");
	spec_fails("disk=1K", "disk: 1K is under the floor of 32M");
	spec_fails("memory=256M,disk=0", "disk");
	char longspec[400];
	memset(longspec, 'x', sizeof(longspec) - 1);
	longspec[sizeof(longspec) - 1] = '\0';
	spec_fails(longspec, "longer than");
}

static void test_check_max(void **state)
{
	(void)state;
	sup_resources m = max_res(), r = m;
	sbx_err e;
	assert_int_equal(sup_resources_check_max("--default-resources ", &r, &m, &e), 0);
	r.memory = 8 * G;
	assert_int_equal(sup_resources_check_max("--default-resources ", &r, &m, &e), -EINVAL);
	assert_string_equal(e.msg, "--default-resources memory: 8G is over this supervisor's ceiling of 4G");
	r = m;
	r.cpu_milli = 2500;
	assert_int_equal(sup_resources_check_max("x ", &r, &m, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "cpus: 2.5 is over"));
}

static int from_json(const char *text, sup_resources *out, sbx_err *e)
{
	sup_resources def, m = max_res();
	sup_resources_default(&def);
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	assert_non_null(j);
	sbx_err_clear(e);
	int rc = sup_resources_from_json(j, &def, &m, out, NULL, e);
	json_decref(j);
	return rc;
}

static void test_json(void **state)
{
	(void)state;
	sup_resources r;
	sbx_err e;
	assert_int_equal(from_json("{\"cpus\":0.5,\"memory\":\"256M\",\"pids\":256,\"disk\":\"512M\"}", &r, &e), 0);
	assert_int_equal(r.cpu_milli, 500);
	assert_int_equal(r.memory, 256 * M);
	assert_int_equal(r.pids, 256);
	assert_int_equal(r.disk, 512 * M);
	/* each optional: the rest are the defaults */
	assert_int_equal(from_json("{\"memory\":268435456}", &r, &e), 0);
	assert_int_equal(r.memory, 256 * M);
	assert_int_equal(r.cpu_milli, 1000);
	assert_int_equal(r.pids, 1024);
	assert_int_equal(r.disk, 10 * G);
	assert_int_equal(from_json("{}", &r, &e), 0);
	assert_int_equal(r.cpu_milli, 1000);
	/* cpus: integer or fraction, to the thousandth */
	assert_int_equal(from_json("{\"cpus\":2}", &r, &e), 0);
	assert_int_equal(r.cpu_milli, 2000);
	assert_int_equal(from_json("{\"cpus\":0.3333}", &r, &e), 0);
	assert_int_equal(r.cpu_milli, 333);
	assert_int_equal(from_json("{\"disk\":\"2G\"}", &r, &e), 0);
	assert_int_equal(r.disk, 2 * G);
}

static void json_fails(const char *text, const char *needle)
{
	sup_resources r;
	sbx_err e;
	assert_int_equal(from_json(text, &r, &e), -EINVAL);
	if (!strstr(e.msg, needle))
		fail_msg("'%s': message '%s' lacks '%s'", text, e.msg, needle);
}

static void test_json_errors(void **state)
{
	(void)state;
	sup_resources def, m = max_res(), r;
	sbx_err e;
	sup_resources_default(&def);
	json_t *arr = json_array();
	assert_int_equal(sup_resources_from_json(arr, &def, &m, &r, NULL, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "field \"resources\": want an object"));
	json_decref(arr);

	/* over the ceiling: 400 naming the field */
	json_fails("{\"memory\":\"8G\"}", "field \"resources.memory\": 8G is over this supervisor's ceiling of 4G");
	json_fails("{\"cpus\":3}", "field \"resources.cpus\": 3 is over this supervisor's ceiling of 2");
	json_fails("{\"pids\":5000}", "field \"resources.pids\": 5000 is over");
	json_fails("{\"disk\":\"21G\"}", "field \"resources.disk\": 21G is over");
	json_fails("{\"cpus\":1e300}", "field \"resources.cpus\"");
	/* under the floor */
	json_fails("{\"cpus\":0}", "field \"resources.cpus\": 0 is under the floor of 0.01");
	json_fails("{\"cpus\":-1}", "under the floor");
	json_fails("{\"cpus\":0.004}", "under the floor");
	json_fails("{\"memory\":\"1M\"}", "field \"resources.memory\": 1M is under the floor of 32M");
	json_fails("{\"memory\":-5}", "field \"resources.memory\"");
	json_fails("{\"pids\":1}", "field \"resources.pids\": 1 is under the floor of 16");
	json_fails("{\"pids\":-1}", "field \"resources.pids\"");
	/* wrong types and keys */
	json_fails("{\"cpus\":\"1\"}", "field \"resources.cpus\": want a number");
	json_fails("{\"pids\":2.5}", "field \"resources.pids\": want a whole number");
	json_fails("{\"memory\":true}", "field \"resources.memory\": want a size");
	json_fails("{\"memory\":\"lots\"}", "'lots' is not a size");
	json_fails("{\"disk\":\"1T\"}", "is not a size");
	json_fails("{\"gpu\":1}", "unknown key \"gpu\"");
	json_fails("{\"memory\":\"256M\",\"swap\":0}", "unknown key \"swap\"");
}

static void test_render(void **state)
{
	(void)state;
	sup_resources r = { .cpu_milli = 500, .memory = 256 * M, .pids = 256, .disk = 512 * M };
	json_t *j = sup_resources_to_json(&r);
	assert_non_null(j);
	char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(s, "{\"cpus\":0.5,\"disk\":536870912,\"memory\":268435456,\"pids\":256}");
	free(s);
	json_decref(j);

	sup_usage u = { .memory = 5000, .cpu_ns = 1500000000, .oom_kills = 2,
			.known = SUP_USAGE_MEMORY | SUP_USAGE_CPU | SUP_USAGE_OOM_KILLS };
	j = sup_usage_to_json(&u);
	assert_non_null(j);
	s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	assert_string_equal(s, "{\"cpu_seconds\":1.5,\"disk_bytes\":null,\"memory_bytes\":5000,"
			       "\"memory_peak_bytes\":null,\"oom_kills\":2,\"pids\":null}");
	free(s);
	json_decref(j);

	char buf[32];
	sup_resources_format_cpus(1000, buf, sizeof(buf));
	assert_string_equal(buf, "1");
	sup_resources_format_cpus(1500, buf, sizeof(buf));
	assert_string_equal(buf, "1.5");
	sup_resources_format_cpus(10, buf, sizeof(buf));
	assert_string_equal(buf, "0.01");
	sup_resources_format_cpus(2125, buf, sizeof(buf));
	assert_string_equal(buf, "2.125");
	sup_resources_format_size(10 * G, buf, sizeof(buf));
	assert_string_equal(buf, "10G");
	sup_resources_format_size(1536 * 1024, buf, sizeof(buf));
	assert_string_equal(buf, "1536K");
	sup_resources_format_size(1000, buf, sizeof(buf));
	assert_string_equal(buf, "1000");
	sup_resources_format_size(0, buf, sizeof(buf));
	assert_string_equal(buf, "0");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default),	   cmocka_unit_test(test_spec),
		cmocka_unit_test(test_spec_errors), cmocka_unit_test(test_check_max),
		cmocka_unit_test(test_json),	   cmocka_unit_test(test_json_errors),
		cmocka_unit_test(test_render),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
