/* sup_layer_tar and the snapshot rules of sup_img_layer: whiteout names,
 * member-name checks, and a layer packed and unpacked in folders of a
 * temporary directory (as root: overlay whiteouts are 0/0 character
 * devices, opaque folders carry trusted.overlay.opaque), with every file
 * kind checked on the way back; a guest's own .wh. file refuses a
 * snapshot; an archive with a device node is refused (-EILSEQ). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <cmocka.h>

#include "sup_fsutil.h"
#include "sup_img_layer.h"
#include "sup_layer_tar.h"

static void test_wh_names(void **state)
{
	(void)state;
	char out[NAME_MAX + 1];
	assert_int_equal(sup_layer_wh_name("motd", out, sizeof(out)), 0);
	assert_string_equal(out, ".wh.motd");
	assert_int_equal(sup_layer_wh_name("", out, sizeof(out)), -ENAMETOOLONG);
	char longname[NAME_MAX + 1];
	memset(longname, 'a', NAME_MAX - 4);
	longname[NAME_MAX - 4] = '\0';
	assert_int_equal(sup_layer_wh_name(longname, out, sizeof(out)), 0); /* exactly NAME_MAX */
	memset(longname, 'a', NAME_MAX - 3);
	longname[NAME_MAX - 3] = '\0';
	assert_int_equal(sup_layer_wh_name(longname, out, sizeof(out)), -ENAMETOOLONG);
	assert_int_equal(sup_layer_wh_name("motd", out, 8), -ENAMETOOLONG); /* no room for NUL */
	assert_true(sup_layer_wh_reserved(".wh.x"));
	assert_true(sup_layer_wh_reserved(SUP_LAYER_WH_OPAQUE));
	assert_false(sup_layer_wh_reserved(".w.h"));
	assert_false(sup_layer_wh_reserved("wh.x"));
}

static void test_name_checks(void **state)
{
	(void)state;
	sbx_err err;
	assert_int_equal(sup_img_layer_check_name("a/b/c", &err), 0);
	assert_int_equal(sup_img_layer_check_name("./a/./b", &err), 0);
	assert_int_equal(sup_img_layer_check_name(".", &err), 0);
	assert_int_equal(sup_img_layer_check_name("/etc/passwd", &err), -EPERM);
	assert_non_null(strstr(err.msg, "absolute"));
	assert_int_equal(sup_img_layer_check_name("../x", &err), -EPERM);
	assert_int_equal(sup_img_layer_check_name("a/../../x", &err), -EPERM);
	assert_int_equal(sup_img_layer_check_name("a/..", &err), -EPERM);
	assert_non_null(strstr(err.msg, "'..'"));
	char deep[129 * 2 + 1];
	for (int i = 0; i < 129; i++)
		memcpy(deep + 2 * i, "a/", 2);
	deep[129 * 2 - 1] = '\0';
	assert_int_equal(sup_img_layer_check_name(deep, &err), -ELOOP);
	char comp[NAME_MAX + 2];
	memset(comp, 'c', NAME_MAX + 1);
	comp[NAME_MAX + 1] = '\0';
	assert_int_equal(sup_img_layer_check_name(comp, &err), -ENAMETOOLONG);
}

typedef struct fx {
	char root[64];
	char upper[128];
	char dest[128];
	char archive[128];
} fx;

static int setup(void **state)
{
	fx *f = calloc(1, sizeof(*f));
	snprintf(f->root, sizeof(f->root), "/tmp/sbx-layer-tar-XXXXXX");
	if (!mkdtemp(f->root))
		return -1;
	snprintf(f->upper, sizeof(f->upper), "%s/upper", f->root);
	snprintf(f->dest, sizeof(f->dest), "%s/dest", f->root);
	snprintf(f->archive, sizeof(f->archive), "%s/layer.tar.zst", f->root);
	mkdir(f->upper, 0755);
	mkdir(f->dest, 0755);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fx *f = *state;
	sbx_err err;
	sup_fs_rm_tree(f->root, &err);
	free(f);
	return 0;
}

static void put(const char *dir, const char *name, const char *data, mode_t mode)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	fchmod(fd, mode);
	close(fd);
}

static int pack(fx *f, sup_layer_tar_info *info, sbx_err *err)
{
	int up = open(f->upper, O_RDONLY | O_DIRECTORY);
	int out = open(f->archive, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	int r = sup_layer_tar_pack(up, out, info, err);
	close(up);
	close(out);
	return r;
}

static int unpack(fx *f, sup_layer_tar_info *info, sbx_err *err)
{
	int in = open(f->archive, O_RDONLY);
	int dst = open(f->dest, O_RDONLY | O_DIRECTORY);
	int r = sup_layer_tar_unpack(in, dst, 1u << 30, 10000, info, err);
	close(in);
	close(dst);
	return r;
}

static void test_round_trip(void **state)
{
	fx *f = *state;
	char p[PATH_MAX];
	put(f->upper, "file", "hello\n", 0640);
	snprintf(p, sizeof(p), "%s/file", f->upper);
	assert_int_equal(setxattr(p, "user.x", "vx", 2, 0), 0);
	assert_int_equal(setxattr(p, "trusted.overlay.origin", "o", 1, 0), 0);
	char p2[PATH_MAX];
	snprintf(p2, sizeof(p2), "%s/hard", f->upper);
	assert_int_equal(link(p, p2), 0);
	snprintf(p, sizeof(p), "%s/link", f->upper);
	assert_int_equal(symlink("file", p), 0);
	snprintf(p, sizeof(p), "%s/gone", f->upper);
	assert_int_equal(mknod(p, S_IFCHR | 0, makedev(0, 0)), 0);
	snprintf(p, sizeof(p), "%s/opq", f->upper);
	assert_int_equal(mkdir(p, 0750), 0);
	assert_int_equal(setxattr(p, "trusted.overlay.opaque", "y", 1, 0), 0);
	put(p, "inside", "in\n", 0644);
	snprintf(p, sizeof(p), "%s/sparse", f->upper);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	assert_int_equal(ftruncate(fd, 16 << 20), 0);
	assert_int_equal(pwrite(fd, "x", 1, 8 << 20), 1);
	close(fd);
	put(f->upper, "suid", "s\n", 04755);
	snprintf(p, sizeof(p), "%s/fifo", f->upper);
	assert_int_equal(mkfifo(p, 0600), 0);

	sup_layer_tar_info info;
	sbx_err err;
	assert_int_equal(pack(f, &info, &err), 0);
	assert_true(info.entries >= 9);
	/* the archive names OCI whiteouts, never a device */
	struct archive *a = archive_read_new();
	archive_read_support_filter_zstd(a);
	archive_read_support_format_tar(a);
	assert_int_equal(archive_read_open_filename(a, f->archive, 65536), ARCHIVE_OK);
	struct archive_entry *e;
	int wh = 0, opq = 0;
	while (archive_read_next_header(a, &e) == ARCHIVE_OK) {
		const char *n = archive_entry_pathname(e);
		assert_true(archive_entry_filetype(e) != AE_IFCHR);
		wh += strcmp(n, ".wh.gone") == 0;
		opq += strcmp(n, "opq/.wh..wh..opq") == 0;
		const char *xn;
		const void *xv;
		size_t xs;
		archive_entry_xattr_reset(e);
		while (archive_entry_xattr_next(e, &xn, &xv, &xs) == ARCHIVE_OK)
			assert_int_equal(strncmp(xn, "user.", 5), 0);
	}
	archive_read_free(a);
	assert_int_equal(wh, 1);
	assert_int_equal(opq, 1);

	assert_int_equal(unpack(f, &info, &err), 0);
	assert_int_equal(info.setid_dropped, 1);
	struct stat st;
	snprintf(p, sizeof(p), "%s/gone", f->dest);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0));
	char v[8] = "";
	snprintf(p, sizeof(p), "%s/opq", f->dest);
	assert_int_equal(getxattr(p, "trusted.overlay.opaque", v, sizeof(v)), 1);
	assert_int_equal(v[0], 'y');
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0750);
	snprintf(p, sizeof(p), "%s/opq/.wh..wh..opq", f->dest);
	assert_int_equal(lstat(p, &st), -1);
	snprintf(p, sizeof(p), "%s/file", f->dest);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	assert_int_equal(st.st_nlink, 2);
	assert_int_equal(getxattr(p, "user.x", v, sizeof(v)), 2);
	assert_memory_equal(v, "vx", 2);
	assert_int_equal(getxattr(p, "trusted.overlay.origin", v, sizeof(v)), -1);
	snprintf(p, sizeof(p), "%s/link", f->dest);
	char t[16] = "";
	assert_int_equal(readlink(p, t, sizeof(t)), 4);
	snprintf(p, sizeof(p), "%s/sparse", f->dest);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_size, 16 << 20);
	assert_true(st.st_blocks * 512 < (1 << 20));
	snprintf(p, sizeof(p), "%s/suid", f->dest);
	assert_int_equal(lstat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0755);
	snprintf(p, sizeof(p), "%s/fifo", f->dest);
	assert_int_equal(lstat(p, &st), 0);
	assert_true(S_ISFIFO(st.st_mode));
}

static void test_guest_wh_file_refused(void **state)
{
	fx *f = *state;
	put(f->upper, ".wh.mine", "x", 0644);
	sup_layer_tar_info info;
	sbx_err err;
	assert_int_equal(pack(f, &info, &err), -EINVAL);
	assert_non_null(strstr(err.msg, ".wh."));
}

/* An archive written here with a device node: refused, not skipped. */
static void test_device_refused(void **state)
{
	fx *f = *state;
	struct archive *w = archive_write_new();
	archive_write_set_format_pax(w);
	archive_write_add_filter_zstd(w);
	assert_int_equal(archive_write_open_filename(w, f->archive), ARCHIVE_OK);
	struct archive_entry *e = archive_entry_new();
	archive_entry_set_pathname(e, "null");
	archive_entry_set_filetype(e, AE_IFCHR);
	archive_entry_set_rdev(e, makedev(1, 3));
	archive_entry_set_perm(e, 0666);
	assert_int_equal(archive_write_header(w, e), ARCHIVE_OK);
	archive_entry_free(e);
	archive_write_close(w);
	archive_write_free(w);
	sup_layer_tar_info info;
	sbx_err err;
	assert_int_equal(unpack(f, &info, &err), -EILSEQ);
	assert_non_null(strstr(err.msg, "device"));
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/null", f->dest);
	assert_int_equal(access(p, F_OK), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_wh_names),
		cmocka_unit_test(test_name_checks),
		cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(test_guest_wh_file_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_device_refused, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
