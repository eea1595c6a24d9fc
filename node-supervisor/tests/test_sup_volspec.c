/* The rules of volumes (sup_volspec): names that are safe folder names,
 * sizes within bounds, mount paths that are absolute, normalised and away
 * from the kernel's and the agent's folders, and a sandbox's list without
 * a volume or a path twice or one path below another. Pure. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "sup_volspec.h"

static void test_names(void **state)
{
	(void)state;
	static const char *const good[] = { "proj", "a", "0", "my-vol_1.2", "a.." };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_true(sup_volspec_name_ok(good[i], strlen(good[i])));
	static const char *const bad[] = { "", ".", "..", ".a", "-a", "_a", "A", "a/b", "a b", "é",
					   "a\\\\b", "../x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_false(sup_volspec_name_ok(bad[i], strlen(bad[i])));
	char long_name[SUP_VOL_NAME_MAX + 2];
	memset(long_name, 'a', sizeof(long_name));
	assert_true(sup_volspec_name_ok(long_name, SUP_VOL_NAME_MAX));
	assert_false(sup_volspec_name_ok(long_name, SUP_VOL_NAME_MAX + 1));
	/* a NUL inside is not the end of the name */
	assert_false(sup_volspec_name_ok("ab\0c", 4));
}

static void test_sizes(void **state)
{
	(void)state;
	sbx_err err;
	assert_int_equal(sup_volspec_size_ok(SUP_VOL_MIN_SIZE, &err), 0);
	assert_int_equal(sup_volspec_size_ok(SUP_VOL_MAX_SIZE, &err), 0);
	assert_int_equal(sup_volspec_size_ok(SUP_VOL_MIN_SIZE - 1, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "\"size\""));
	assert_int_equal(sup_volspec_size_ok(SUP_VOL_MAX_SIZE + 1, &err), -EINVAL);
	assert_int_equal(sup_volspec_size_ok(0, &err), -EINVAL);
}

static void test_mount_paths(void **state)
{
	(void)state;
	sbx_err err;
	static const char *const good[] = { "/workspace", "/workspace/proj", "/data", "/procx",
					    "/sysroot/a", "/devices", "/run", "/run/sandboxes", "/.sbxx" };
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(sup_volspec_mount_path_ok(good[i], strlen(good[i]), &err), 0);
	static const char *const bad[] = { "", "/", "rel", "./a", "/a/", "/a//b", "/a/./b", "/a/../b",
					   "/..", "/proc", "/proc/1", "/sys", "/sys/fs/cgroup", "/dev",
					   "/dev/shm", "/run/sandbox", "/run/sandbox/x", "/.sbx",
					   "/.sbx/sandbox-agent" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(sup_volspec_mount_path_ok(bad[i], strlen(bad[i]), &err), -EINVAL);
		assert_true(err.msg[0]);
	}
	assert_int_equal(sup_volspec_mount_path_ok("/a\0b", 4, &err), -EINVAL);
	char longp[SUP_VOL_MOUNT_MAX + 2];
	memset(longp, 'a', sizeof(longp));
	longp[0] = '/';
	for (size_t i = 200; i < sizeof(longp); i += 200)
		longp[i] = '/';
	assert_int_equal(sup_volspec_mount_path_ok(longp, SUP_VOL_MOUNT_MAX + 1, &err), -EINVAL);
	assert_int_equal(sup_volspec_mount_path_ok(longp, SUP_VOL_MOUNT_MAX, &err), 0);
}

static int check(const char *a, const char *pa, const char *b, const char *pb, sbx_err *err)
{
	sup_vol_mount v[2];
	memset(v, 0, sizeof(v));
	snprintf(v[0].name, sizeof(v[0].name), "%s", a);
	snprintf(v[0].path, sizeof(v[0].path), "%s", pa);
	snprintf(v[1].name, sizeof(v[1].name), "%s", b);
	snprintf(v[1].path, sizeof(v[1].path), "%s", pb);
	sup_vol_mounts m = { v, 2 };
	return sup_volspec_mounts_ok(&m, err);
}

static void test_lists(void **state)
{
	(void)state;
	sbx_err err;
	assert_int_equal(check("a", "/x", "b", "/y", &err), 0);
	assert_int_equal(check("a", "/x", "b", "/xy", &err), 0);
	assert_int_equal(check("a", "/x", "a", "/y", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "named twice"));
	assert_int_equal(check("a", "/x", "b", "/x", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "/x"));
	assert_int_equal(check("a", "/x", "b", "/x/y", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "below"));
	assert_int_equal(check("a", "/x/y", "b", "/x", &err), -EINVAL);
	sup_vol_mount many[SUP_VOL_MAX_MOUNTS + 1];
	memset(many, 0, sizeof(many));
	for (size_t i = 0; i < SUP_VOL_MAX_MOUNTS + 1; i++) {
		snprintf(many[i].name, sizeof(many[i].name), "v%zu", i);
		snprintf(many[i].path, sizeof(many[i].path), "/m%zu", i);
	}
	sup_vol_mounts m = { many, SUP_VOL_MAX_MOUNTS };
	assert_int_equal(sup_volspec_mounts_ok(&m, &err), 0);
	m.n++;
	assert_int_equal(sup_volspec_mounts_ok(&m, &err), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_mount_paths),
		cmocka_unit_test(test_lists),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
