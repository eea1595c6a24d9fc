/* E2B's EntryInfo from sbx's stat view (routes/e2b/sup_e2b_entry.h): the
 * type (a symlink's is its target's), Go's FileMode.String() for every
 * file type and mode bit, owners' names, protojson's Timestamp, and the
 * whole object as the E2B SDK reads it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sup_e2b_entry.h"

static sup_api_stat mk(const char *type, uint64_t mode)
{
	sup_api_stat st = { .type = type, .mode = mode, .size = 11, .uid = 1000, .gid = 1000,
			    .mtime_ns = 1796638220564000000ull, .nlink = 1, .ino = 7 };
	return st;
}

static void perms_are(const char *type, uint64_t mode, const char *want)
{
	sup_api_stat st = mk(type, mode);
	char buf[32];
	sup_e2b_entry_perms(&st, buf, sizeof(buf));
	assert_string_equal(buf, want);
}

/* Each as Go prints os.FileMode for the same st_mode. */
static void test_perms(void **unused)
{
	(void)unused;
	perms_are("file", 0644, "-rw-r--r--");
	perms_are("file", 0, "----------");
	perms_are("file", 0777, "-rwxrwxrwx");
	perms_are("dir", 0755, "drwxr-xr-x");
	perms_are("symlink", 0777, "Lrwxrwxrwx");
	perms_are("dir", 01777, "dtrwxrwxrwx");
	perms_are("file", 04755, "urwxr-xr-x");
	perms_are("file", 02755, "grwxr-xr-x");
	perms_are("file", 06755, "ugrwxr-xr-x");
	perms_are("char", 0666, "Dcrw-rw-rw-");
	perms_are("block", 0660, "Drw-rw----");
	perms_are("fifo", 0644, "prw-r--r--");
	perms_are("socket", 0755, "Srwxr-xr-x");
	perms_are("other", 0600, "?rw-------");
	perms_are("dir", 07000, "dugt---------");
}

static void test_type(void **unused)
{
	(void)unused;
	sup_api_stat f = mk("file", 0644), d = mk("dir", 0755), l = mk("symlink", 0777);
	sup_api_stat p = mk("fifo", 0644);
	assert_string_equal(sup_e2b_entry_type(&f, NULL), "FILE_TYPE_FILE");
	assert_string_equal(sup_e2b_entry_type(&d, NULL), "FILE_TYPE_DIRECTORY");
	assert_string_equal(sup_e2b_entry_type(&p, NULL), "FILE_TYPE_UNSPECIFIED");
	assert_string_equal(sup_e2b_entry_type(&l, &f), "FILE_TYPE_FILE");
	assert_string_equal(sup_e2b_entry_type(&l, &d), "FILE_TYPE_DIRECTORY");
	assert_string_equal(sup_e2b_entry_type(&l, NULL), "FILE_TYPE_UNSPECIFIED"); /* dangling */
	assert_string_equal(sup_e2b_entry_type(&l, &p), "FILE_TYPE_UNSPECIFIED");
	/* a target is only looked at for a symlink */
	assert_string_equal(sup_e2b_entry_type(&f, &d), "FILE_TYPE_FILE");
}

static void test_owner_time(void **unused)
{
	(void)unused;
	char b[48];
	assert_string_equal(sup_e2b_entry_owner(0, b, sizeof(b)), "root");
	assert_string_equal(sup_e2b_entry_owner(1000, b, sizeof(b)), "user");
	assert_string_equal(sup_e2b_entry_owner(65534, b, sizeof(b)), "65534");
	sup_e2b_entry_time(0, b, sizeof(b));
	assert_string_equal(b, "1970-01-01T00:00:00Z");
	sup_e2b_entry_time(1796638220000000000ull, b, sizeof(b));
	assert_string_equal(b, "2026-12-07T10:10:20Z");
	sup_e2b_entry_time(1796638220564000000ull, b, sizeof(b));
	assert_string_equal(b, "2026-12-07T10:10:20.564Z");
	sup_e2b_entry_time(1796638220564123000ull, b, sizeof(b));
	assert_string_equal(b, "2026-12-07T10:10:20.564123Z");
	sup_e2b_entry_time(1796638220000000001ull, b, sizeof(b));
	assert_string_equal(b, "2026-12-07T10:10:20.000000001Z");
}

static char *dump(json_t *o)
{
	assert_non_null(o);
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(o);
	return s;
}

static void test_json(void **unused)
{
	(void)unused;
	sbx_err e;
	sup_api_stat f = mk("file", 0644);
	char *s = dump(sup_e2b_entry_json("/tmp/x/a.txt", &f, NULL, &e));
	assert_string_equal(s, "{\"group\":\"user\",\"mode\":420,\"modifiedTime\":\"2026-12-07T10:10:20.564Z\","
			       "\"name\":\"a.txt\",\"owner\":\"user\",\"path\":\"/tmp/x/a.txt\","
			       "\"permissions\":\"-rw-r--r--\",\"size\":\"11\",\"type\":\"FILE_TYPE_FILE\"}");
	free(s);
	/* a folder of root's with the sticky bit: mode is the permission bits only */
	sup_api_stat d = mk("dir", 01777);
	d.uid = d.gid = 0;
	d.size = 4096;
	s = dump(sup_e2b_entry_json("/tmp", &d, NULL, &e));
	assert_string_equal(s, "{\"group\":\"root\",\"mode\":511,\"modifiedTime\":\"2026-12-07T10:10:20.564Z\","
			       "\"name\":\"tmp\",\"owner\":\"root\",\"path\":\"/tmp\","
			       "\"permissions\":\"dtrwxrwxrwx\",\"size\":\"4096\",\"type\":\"FILE_TYPE_DIRECTORY\"}");
	free(s);
	/* a symlink: its own lstat, its target's type, its target */
	sup_api_stat l = mk("symlink", 0777);
	l.target = "../etc";
	l.target_len = 6;
	l.size = 6;
	json_t *o = sup_e2b_entry_json("/home/user/link", &l, &d, &e);
	assert_string_equal(json_string_value(json_object_get(o, "type")), "FILE_TYPE_DIRECTORY");
	assert_string_equal(json_string_value(json_object_get(o, "permissions")), "Lrwxrwxrwx");
	assert_string_equal(json_string_value(json_object_get(o, "symlinkTarget")), "../etc");
	assert_string_equal(json_string_value(json_object_get(o, "size")), "6");
	json_decref(o);
	o = sup_e2b_entry_json("/home/user/link", &l, NULL, &e);
	assert_string_equal(json_string_value(json_object_get(o, "type")), "FILE_TYPE_UNSPECIFIED");
	json_decref(o);
	/* no symlinkTarget but on a symlink */
	f.target = "x";
	f.target_len = 1;
	o = sup_e2b_entry_json("/a", &f, NULL, &e);
	assert_null(json_object_get(o, "symlinkTarget"));
	json_decref(o);
	/* names: the root, a trailing slash, bytes that are not UTF-8, a big size */
	o = sup_e2b_entry_json("/", &d, NULL, &e);
	assert_string_equal(json_string_value(json_object_get(o, "name")), "/");
	json_decref(o);
	o = sup_e2b_entry_json("/home/user/", &d, NULL, &e);
	assert_string_equal(json_string_value(json_object_get(o, "name")), "user");
	json_decref(o);
	f.size = 1ull << 62;
	l.target = "\xff";
	l.target_len = 1;
	o = sup_e2b_entry_json("/tmp/\xfe\xff", &f, NULL, &e);
	assert_string_equal(json_string_value(json_object_get(o, "name")), "\xef\xbf\xbd\xef\xbf\xbd");
	assert_string_equal(json_string_value(json_object_get(o, "size")), "4611686018427387904");
	json_decref(o);
	o = sup_e2b_entry_json("/tmp/l", &l, NULL, &e);
	assert_string_equal(json_string_value(json_object_get(o, "symlinkTarget")), "\xef\xbf\xbd");
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_perms),
		cmocka_unit_test(test_type),
		cmocka_unit_test(test_owner_time),
		cmocka_unit_test(test_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
