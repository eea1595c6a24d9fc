/* Token file creation/loading and comparison (sup_token), on a real temp
 * folder. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_token.h"

static char dir[64];

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/sup-token-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	return system(cmd);
}

static void test_create_then_load(void **state)
{
	(void)state;
	char path[128];
	snprintf(path, sizeof(path), "%s/token", dir);
	char *t1 = NULL, *t2 = NULL;
	bool created;
	sbx_err e;
	assert_int_equal(sup_token_load_or_create(path, &t1, &created, &e), 0);
	assert_true(created);
	assert_int_equal(strlen(t1), SUP_TOKEN_HEX_LEN);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(sup_token_load_or_create(path, &t2, &created, &e), 0);
	assert_false(created);
	assert_string_equal(t1, t2);
	free(t1);
	free(t2);
	/* Nothing else left in the folder (no temporary files). */
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "test $(ls -A %s | wc -l) -eq 1", dir);
	assert_int_equal(system(cmd), 0);
	unlink(path);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	fchmod(fd, mode);
	close(fd);
}

static void test_rejects_bad_files(void **state)
{
	(void)state;
	char path[128];
	snprintf(path, sizeof(path), "%s/token", dir);
	char *t = NULL;
	bool created;
	sbx_err e;
	write_file(path, "not a token\n", 0600);
	assert_int_equal(sup_token_load_or_create(path, &t, &created, &e), -EINVAL);
	char good[SUP_TOKEN_HEX_LEN + 2];
	memset(good, 'a', SUP_TOKEN_HEX_LEN);
	good[SUP_TOKEN_HEX_LEN] = '\n';
	good[SUP_TOKEN_HEX_LEN + 1] = '\0';
	write_file(path, good, 0644);
	assert_int_equal(sup_token_load_or_create(path, &t, &created, &e), -EPERM);
	write_file(path, good, 0600);
	assert_int_equal(sup_token_load_or_create(path, &t, &created, &e), 0);
	assert_false(created);
	free(t);
	unlink(path);
}

static void test_compare(void **state)
{
	(void)state;
	const char *tok = "abcdef0123456789";
	assert_true(sup_token_equal(tok, tok, strlen(tok)));
	assert_false(sup_token_equal(tok, "abcdef012345678", 15));
	assert_false(sup_token_equal(tok, "abcdef0123456789x", 17));
	assert_false(sup_token_equal(tok, "bbcdef0123456789", 16));
	assert_false(sup_token_equal(tok, "", 0));
	assert_true(sup_token_check_bearer(tok, "Bearer abcdef0123456789"));
	assert_true(sup_token_check_bearer(tok, "bearer abcdef0123456789"));
	assert_false(sup_token_check_bearer(tok, NULL));
	assert_false(sup_token_check_bearer(tok, "abcdef0123456789"));
	assert_false(sup_token_check_bearer(tok, "Basic abcdef0123456789"));
	assert_false(sup_token_check_bearer(tok, "Bearer abcdef012345678"));
	assert_false(sup_token_check_bearer(tok, "Bearer "));
}

static void test_random_hex(void **state)
{
	(void)state;
	char a[25], b[25];
	sbx_err e;
	assert_int_equal(sup_random_hex(a, 12, &e), 0);
	assert_int_equal(sup_random_hex(b, 12, &e), 0);
	assert_int_equal(strlen(a), 24);
	assert_string_not_equal(a, b);
	assert_int_equal(strspn(a, "0123456789abcdef"), 24);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_then_load),
		cmocka_unit_test(test_rejects_bad_files),
		cmocka_unit_test(test_compare),
		cmocka_unit_test(test_random_hex),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
