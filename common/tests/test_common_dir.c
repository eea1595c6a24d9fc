/* sbx_dir_next on a real folder: every entry but "." and ".." once, folders
 * told from files, symlinks (to a folder too) and fifos, none followed. */
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

#include "sbx/dir.h"

static void classifies_every_entry_once(void **state)
{
	(void)state;
	char top[] = "/tmp/sbx_dir_XXXXXX";
	assert_non_null(mkdtemp(top));
	int fd = open(top, O_RDONLY | O_DIRECTORY);
	assert_true(fd >= 0);
	assert_int_equal(mkdirat(fd, "sub", 0700), 0);
	int f = openat(fd, "file", O_CREAT | O_WRONLY, 0600);
	assert_true(f >= 0);
	close(f);
	assert_int_equal(symlinkat("sub", fd, "link_to_sub"), 0);
	assert_int_equal(mkfifoat(fd, "fifo", 0600), 0);

	DIR *d = fdopendir(dup(fd));
	assert_non_null(d);
	struct dirent *de;
	bool is_dir;
	int r, seen = 0;
	while ((r = sbx_dir_next(d, &de, &is_dir)) > 0) {
		const char *n = de->d_name;
		assert_true(strcmp(n, ".") != 0 && strcmp(n, "..") != 0);
		if (strcmp(n, "sub") == 0) {
			assert_true(is_dir);
			seen |= 1;
		} else if (strcmp(n, "file") == 0) {
			assert_false(is_dir);
			seen |= 2;
		} else if (strcmp(n, "link_to_sub") == 0) {
			assert_false(is_dir); /* the link, not where it points */
			seen |= 4;
		} else if (strcmp(n, "fifo") == 0) {
			assert_false(is_dir);
			seen |= 8;
		} else {
			fail_msg("unexpected entry %s", n);
		}
	}
	assert_int_equal(r, 0);
	assert_null(de);
	assert_int_equal(seen, 15);
	closedir(d);

	unlinkat(fd, "fifo", 0);
	unlinkat(fd, "link_to_sub", 0);
	unlinkat(fd, "file", 0);
	unlinkat(fd, "sub", AT_REMOVEDIR);
	close(fd);
	assert_int_equal(rmdir(top), 0);
}

static void an_empty_folder_ends_at_once(void **state)
{
	(void)state;
	char top[] = "/tmp/sbx_dir_XXXXXX";
	assert_non_null(mkdtemp(top));
	DIR *d = opendir(top);
	assert_non_null(d);
	struct dirent *de;
	bool is_dir;
	assert_int_equal(sbx_dir_next(d, &de, &is_dir), 0);
	closedir(d);
	assert_int_equal(rmdir(top), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(classifies_every_entry_once),
		cmocka_unit_test(an_empty_folder_ends_at_once),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
