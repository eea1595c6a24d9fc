/* Path confinement in the agent (agent_fsconf, agent_fsconf_ops) against a real file
 * system: a temporary folder plays the sandbox root, a folder beside it
 * ("outside") holds a secret, and every test asserts that no operation
 * returns or changes anything outside the root.
 *
 * The hostile corpus (tests/corpus/hostile_paths.txt, shared with the
 * supervisor's test) and the race test run as PID 1 of fresh PID and mount
 * namespaces with a tmpfs over /etc holding decoys: an escape that the test
 * exists to catch then lands in the decoys, not in the host's /etc, and
 * /proc/1 is the test itself, not the host's init. Those parts need root;
 * without it they are skipped with a message, the rest runs anyway. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "corpus.h"
#include "agent_fsconf.h"
#include "agent_fsconf_ops.h"
#include "agent_fsconf_walk.h"
#include "fsconf_combos.h"
#include "sbx/cleanup.h"

#define SECRET "SBX-OUTSIDE-SECRET-7f3a"
#define READ_MAX (1 << 20)

typedef struct env {
	char top[PATH_MAX];  /* the temporary folder */
	char root[PATH_MAX]; /* top/root: the sandbox root */
	char out[PATH_MAX];  /* top/outside: must never be read or changed */
	agent_fsconf_root r; /* root, opened by the setup */
} env;

/* ---- host-side helpers (plain paths: the test's own view) ---- */

static int put_file(const char *path, const char *data)
{
	SBX_AUTO_CLOSE int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	size_t n = strlen(data);
	return write(fd, data, n) == (ssize_t)n ? 0 : -EIO;
}

static char *get_file(const char *path)
{
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	char *buf = calloc(1, 4096);
	if (buf && read(fd, buf, 4095) < 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void pathf(char *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void pathf(char *out, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(out, PATH_MAX, fmt, ap);
	va_end(ap);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)f;
	if (flag == FTW_DP)
		rmdir(p);
	else
		unlink(p);
	return 0;
}

/* Empty a small tree, never leaving its file system. */
static void clear_dir(const char *path)
{
	nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

static void make_outside(env *e)
{
	char p[PATH_MAX];
	mkdir(e->out, 0755);
	pathf(p, "%s/secret", e->out);
	put_file(p, SECRET);
	pathf(p, "%s/passwd", e->out);
	put_file(p, SECRET "-passwd");
	pathf(p, "%s/shared", e->out);
	put_file(p, "outside-shared");
	pathf(p, "%s/sub", e->out);
	mkdir(p, 0755);
	pathf(p, "%s/sub/deeper", e->out);
	put_file(p, SECRET "-deeper");
}

static int env_setup(void **state)
{
	env *e = calloc(1, sizeof(*e));
	if (!e)
		return -1;
	snprintf(e->top, sizeof(e->top), "/tmp/sbx-fsconf-XXXXXX");
	if (!mkdtemp(e->top)) {
		free(e);
		return -1;
	}
	/* The top folder and the root are private to the test. */
	chmod(e->top, 0755);
	pathf(e->root, "%s/root", e->top);
	pathf(e->out, "%s/outside", e->top);
	mkdir(e->root, 0755);
	make_outside(e);
	sbx_err err;
	if (agent_fsconf_root_open(&e->r, e->root, &err) < 0) {
		fprintf(stderr, "%s\n", err.msg);
		return -1;
	}
	*state = e;
	return 0;
}

/* Also after a failed test: whatever was made, at any depth. */
static int env_teardown(void **state)
{
	env *e = *state;
	agent_fsconf_root_close(&e->r);
	char cmd[PATH_MAX + 64];
	snprintf(cmd, sizeof(cmd), "rm -rf --one-file-system -- '%s'", e->top);
	int r = system(cmd);
	free(e);
	return r == 0 ? 0 : -1;
}

/* Everything below path (types, modes, owners, sizes, contents, symlink
 * targets; not times or link counts) as one string, to compare. */
static void snap_walk(FILE *out, int dfd, const char *prefix, int depth, bool names_only)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return;
	}
	char *names[256];
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) && n < 256)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			names[n++] = strdup(de->d_name);
	for (size_t i = 0; i < n; i++)
		for (size_t k = i + 1; k < n; k++)
			if (strcmp(names[k], names[i]) < 0) {
				char *t = names[i];
				names[i] = names[k];
				names[k] = t;
			}
	for (size_t i = 0; i < n; i++) {
		struct stat st;
		if (!names[i] || fstatat(dirfd(d), names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (names_only) {
			fprintf(out, "%s/%s %o\n", prefix, names[i], st.st_mode & S_IFMT);
			continue;
		}
		fprintf(out, "%s/%s %o %u:%u %lld", prefix, names[i], st.st_mode, st.st_uid,
			st.st_gid, (long long)st.st_size);
		char buf[4096];
		if (S_ISREG(st.st_mode)) {
			int fd = openat(dirfd(d), names[i], O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			ssize_t r = fd < 0 ? -1 : read(fd, buf, sizeof(buf));
			if (fd >= 0)
				close(fd);
			fprintf(out, " [%.*s]", (int)(r < 0 ? 0 : r), buf);
		} else if (S_ISLNK(st.st_mode)) {
			ssize_t r = readlinkat(dirfd(d), names[i], buf, sizeof(buf));
			fprintf(out, " -> %.*s", (int)(r < 0 ? 0 : r), buf);
		}
		fputc('\n', out);
		if (S_ISDIR(st.st_mode) && depth > 0) {
			int sub = openat(dirfd(d), names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
					 O_CLOEXEC);
			if (sub >= 0) {
				char p[PATH_MAX];
				pathf(p, "%s/%s", prefix, names[i]);
				snap_walk(out, sub, p, depth - 1, false);
			}
		}
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	closedir(d);
}

/* depth < 0: the names and types in path only (for "/", where sizes and
 * modes may change under other programs). */
static char *snapshot(const char *path, int depth)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	if (!out)
		return NULL;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		snap_walk(out, fd, path, depth < 0 ? 0 : depth, depth < 0);
	fclose(out);
	return buf;
}

/* ---- agent-side helpers ---- */

static int open_root(agent_fsconf_root *r, const env *e)
{
	sbx_err err;
	int rc = agent_fsconf_root_open(r, e->root, &err);
	if (rc < 0)
		print_error("root %s: %s\n", e->root, err.msg);
	return rc;
}

/* Read all of rel through the agent (at most READ_MAX bytes). */
static int agent_read(const agent_fsconf_root *r, const char *rel, char **data, size_t *len,
		      sbx_err *err)
{
	struct stat st;
	*data = NULL;
	*len = 0;
	SBX_AUTO_CLOSE int fd = agent_fsconf_open_read(r, rel, &st, err);
	if (fd < 0)
		return fd;
	char *buf = malloc(READ_MAX + 1);
	if (!buf)
		return -ENOMEM;
	size_t n = 0;
	ssize_t k;
	while (n < READ_MAX && (k = read(fd, buf + n, READ_MAX - n)) > 0)
		n += (size_t)k;
	buf[n] = '\0';
	*data = buf;
	*len = n;
	return 0;
}

/* Write data to rel through the agent, in two pieces with a pause between
 * (an upload in flight). */
static int agent_write(const agent_fsconf_root *r, const char *rel, const char *data,
		       bool overwrite, sbx_err *err)
{
	agent_fsconf_create opt = { .mode = 0644, .uid = (uid_t)-1, .gid = (gid_t)-1,
				    .overwrite = overwrite };
	AGENT_FSCONF_AUTO_TMP agent_fsconf_tmp tmp = { .fd = -1, .dirfd = -1 };
	int rc = agent_fsconf_tmp_open(r, rel, &opt, &tmp, err);
	if (rc < 0)
		return rc;
	size_t n = strlen(data), half = n / 2;
	if (write(tmp.fd, data, half) != (ssize_t)half)
		return -EIO;
	sched_yield();
	if (write(tmp.fd, data + half, n - half) != (ssize_t)(n - half))
		return -EIO;
	return agent_fsconf_tmp_commit(r, &tmp, err);
}

static bool contains_secret(const char *data, size_t len)
{
	return data && memmem(data, len, SECRET, sizeof(SECRET) - 1) != NULL;
}

/* ---- unit tests (no privileges needed) ---- */

/* The probe picks a resolver (SBX_FSCONF_PROBE_WANT: which one it must
 * pick here, "openat2" on Linux 5.6+, "walk" under gVisor); the resolver the
 * tests run with (SBX_FSCONF_RESOLVER) is put back after it. */
static void test_probe(void **state)
{
	(void)state;
	sbx_err err;
	sbx_err_clear(&err);
	agent_fsconf_resolver was = agent_fsconf_resolver_in_use();
	char note[256] = "";
	int r = agent_fsconf_probe(note, sizeof(note), &err);
	agent_fsconf_use(was);
	assert_true(r >= 0);
	assert_true(note[0] != '\0');
	print_message("probe: %s\n", note);
	const char *want = getenv("SBX_FSCONF_PROBE_WANT");
	if (want)
		assert_string_equal(agent_fsconf_resolver_name((agent_fsconf_resolver)r), want);
}

static void test_check_rel(void **state)
{
	(void)state;
	sbx_err err;
	assert_int_equal(agent_fsconf_check_rel("a/b", 3, &err), 0);
	assert_int_equal(agent_fsconf_check_rel("", 0, &err), 0);
	assert_int_equal(agent_fsconf_check_rel("a\0b", 3, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "NUL"));
	assert_int_equal(agent_fsconf_check_rel("/etc", 4, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "absolute"));
	static char big[PATH_MAX + 1];
	memset(big, 'a', PATH_MAX);
	assert_int_equal(agent_fsconf_check_rel(big, PATH_MAX, &err), -ENAMETOOLONG);
	assert_int_equal(agent_fsconf_check_rel(big, PATH_MAX - 1, &err), 0);
}

static void test_root_open(void **state)
{
	env *e = *state;
	agent_fsconf_root r;
	sbx_err err;
	char p[PATH_MAX];
	assert_int_equal(agent_fsconf_root_open(&r, e->root, &err), 0);
	assert_true(r.fd >= 0);
	agent_fsconf_root_close(&r);
	assert_int_equal(r.fd, -1);

	static const char *const bad[] = { "", "relative", "/a/", "/a//b", "/a/./b", "/a/../b",
					   "/a/.", "/a/.." };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(agent_fsconf_root_open(&r, bad[i], &err), -EINVAL);
		assert_int_equal(r.fd, -1);
	}
	pathf(p, "%s/missing", e->top);
	assert_int_equal(agent_fsconf_root_open(&r, p, &err), -ENOENT);
	pathf(p, "%s/secret", e->out);
	assert_int_equal(agent_fsconf_root_open(&r, p, &err), -ENOTDIR);

	/* A root that is a symlink, or below one, is refused. */
	pathf(p, "%s/link", e->top);
	assert_int_equal(symlink(e->root, p), 0);
	assert_int_equal(agent_fsconf_root_open(&r, p, &err), -ELOOP);
	assert_non_null(strstr(err.msg, "a symlink on its path"));
	pathf(p, "%s/linkdir", e->top);
	assert_int_equal(symlink(e->top, p), 0);
	pathf(p, "%s/linkdir/root", e->top);
	assert_int_equal(agent_fsconf_root_open(&r, p, &err), -ELOOP);
}

/* Why roots are reopened for every request: replaced by a symlink, the root
 * is refused; an fd kept from before would still write into the old folder,
 * which is no longer at the root's path. */
static void test_root_replaced(void **state)
{
	env *e = *state;
	char aside[PATH_MAX];
	pathf(aside, "%s/root-aside", e->top);
	AGENT_FSCONF_AUTO_ROOT agent_fsconf_root old = { .fd = -1 };
	assert_int_equal(open_root(&old, e), 0);
	assert_int_equal(rename(e->root, aside), 0);
	assert_int_equal(symlink(e->out, e->root), 0);

	agent_fsconf_root now;
	sbx_err err;
	assert_int_equal(agent_fsconf_root_open(&now, e->root, &err), -ELOOP);
	/* The old fd is the moved folder, never the symlink's target. */
	assert_int_equal(agent_write(&old, "x", "stale", true, &err), 0);
	char p[PATH_MAX];
	pathf(p, "%s/x", aside);
	SBX_AUTO_FREE char *got = get_file(p);
	assert_string_equal(got, "stale");
	pathf(p, "%s/x", e->out);
	assert_int_equal(access(p, F_OK), -1);
	unlink(e->root);
	rename(aside, e->root);
}

/* Magic links, with /proc itself as the root: nothing that /proc links to
 * by magic (roots, cwds, fds, the binary) is reached. */
static void test_proc_magic_links(void **state)
{
	(void)state;
	AGENT_FSCONF_AUTO_ROOT agent_fsconf_root r = { .fd = -1 };
	sbx_err err;
	assert_int_equal(agent_fsconf_root_open(&r, "/proc", &err), 0);
	static const char *const magic[] = { "self/root", "self/root/etc/passwd", "self/cwd",
					     "self/exe", "self/fd/0", "thread-self/root/etc",
					     "1/root/etc/passwd", "1/cwd", "self/ns/mnt" };
	for (size_t i = 0; i < sizeof(magic) / sizeof(magic[0]); i++) {
		struct stat st;
		char full[64];
		/* gVisor has no ns/mnt: nothing there to test. */
		snprintf(full, sizeof(full), "/proc/%s", magic[i]);
		if (faccessat(AT_FDCWD, full, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
			print_message("%s does not exist here: skipped\n", full);
			continue;
		}
		/* Another process's links may be refused by ptrace rules first. */
		int other = magic[i][0] == '1' ? -EACCES : -ELOOP;
		int rc[3];
		rc[0] = agent_fsconf_open_read(&r, magic[i], &st, &err);
		rc[1] = agent_fsconf_stat(&r, magic[i], true, &st, &err);
		rc[2] = agent_fsconf_open_dir(&r, magic[i], "list", &err);
		for (int k = 0; k < 3; k++)
			if (rc[k] != -ELOOP && rc[k] != other)
				fail_msg("/proc/%s (%d): %d %s", magic[i], k, rc[k], err.msg);
	}
	/* The links themselves may be looked at, not through. */
	struct stat st;
	assert_int_equal(agent_fsconf_stat(&r, "self/root", false, &st, &err), 0);
	assert_true(S_ISLNK(st.st_mode));
	/* Plain files of /proc are fine: it is the root here. */
	char *data;
	size_t len;
	assert_int_equal(agent_read(&r, "self/status", &data, &len, &err), 0);
	free(data);
}

static void test_read(void **state)
{
	env *e = *state;
	char p[PATH_MAX];
	pathf(p, "%s/f", e->root);
	put_file(p, "hello");
	pathf(p, "%s/d", e->root);
	mkdir(p, 0755);
	pathf(p, "%s/fifo", e->root);
	assert_int_equal(mkfifo(p, 0644), 0);
	pathf(p, "%s/d/to_f", e->root);
	assert_int_equal(symlink("../f", p), 0);

	const agent_fsconf_root *r = &e->r;
	sbx_err err;
	char *data;
	size_t len;
	assert_int_equal(agent_read(r, "f", &data, &len, &err), 0);
	assert_string_equal(data, "hello");
	free(data);
	assert_int_equal(agent_read(r, "d/to_f", &data, &len, &err), 0);
	assert_string_equal(data, "hello");
	free(data);
	assert_int_equal(agent_read(r, "d", &data, &len, &err), -EISDIR);
	assert_int_equal(agent_read(r, "", &data, &len, &err), -EISDIR);
	/* A FIFO is refused at once, not opened (which would wait for a writer). */
	assert_int_equal(agent_read(r, "fifo", &data, &len, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "fifo: not a regular file"));
	assert_int_equal(agent_read(r, "nope", &data, &len, &err), -ENOENT);
	assert_non_null(strstr(err.msg, "read "));
	assert_non_null(strstr(err.msg, "/root/nope: No such file or directory"));

	int dfd = agent_fsconf_open_dir(r, "d", "list", &err);
	assert_true(dfd >= 0);
	close(dfd);
	/* a file is a bad request, a file on the way a missing folder */
	assert_int_equal(agent_fsconf_open_dir(r, "f", "list", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not a folder"));
	assert_int_equal(agent_fsconf_open_dir(r, "f/x", "list", &err), -ENOTDIR);
}

static void test_write_replace(void **state)
{
	env *e = *state;
	const agent_fsconf_root *r = &e->r;
	sbx_err err;
	char p[PATH_MAX];
	char *data;
	size_t len;

	assert_int_equal(agent_write(r, "f", "one", false, &err), 0);
	assert_int_equal(agent_write(r, "f", "two", false, &err), -EEXIST);
	assert_int_equal(agent_write(r, "f", "two", true, &err), 0);
	assert_int_equal(agent_read(r, "f", &data, &len, &err), 0);
	assert_string_equal(data, "two");
	free(data);

	/* A cut upload leaves the old file and no temporary file. */
	agent_fsconf_create opt = { .mode = 0640, .uid = (uid_t)-1, .gid = (gid_t)-1,
				    .overwrite = true };
	agent_fsconf_tmp tmp;
	assert_int_equal(agent_fsconf_tmp_open(r, "f", &opt, &tmp, &err), 0);
	assert_int_equal(write(tmp.fd, "partial", 7), 7);
	agent_fsconf_tmp_abort(&tmp);
	agent_fsconf_tmp_abort(&tmp); /* twice is harmless */
	assert_int_equal(agent_read(r, "f", &data, &len, &err), 0);
	assert_string_equal(data, "two");
	free(data);
	SBX_AUTO_FREE char *listing = snapshot(e->root, 2);
	assert_null(strstr(listing, ".sbx-tmp-"));

	/* Exact mode whatever the umask; owner set. */
	mode_t old = umask(077);
	opt.mode = 0754;
	opt.uid = 1234;
	opt.gid = 2345;
	assert_int_equal(agent_fsconf_tmp_open(r, "owned", &opt, &tmp, &err), 0);
	assert_int_equal(agent_fsconf_tmp_commit(r, &tmp, &err), 0);
	umask(old);
	struct stat st;
	pathf(p, "%s/owned", e->root);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0754);
	if (geteuid() == 0) {
		assert_int_equal(st.st_uid, 1234);
		assert_int_equal(st.st_gid, 2345);
	}
	/* Commit on a released tmp. */
	assert_int_equal(agent_fsconf_tmp_commit(r, &tmp, &err), -EBADF);

	/* Refusals before any byte is sent. */
	opt = (agent_fsconf_create){ .mode = 04755, .uid = (uid_t)-1, .gid = (gid_t)-1 };
	assert_int_equal(agent_fsconf_tmp_open(r, "suid", &opt, &tmp, &err), -EPERM);
	opt.mode = 010644;
	assert_int_equal(agent_fsconf_tmp_open(r, "big", &opt, &tmp, &err), -EINVAL);
	opt.mode = 0644;
	pathf(p, "%s/dir", e->root);
	mkdir(p, 0755);
	assert_int_equal(agent_fsconf_tmp_open(r, "dir", &opt, &tmp, &err), -EISDIR);
	assert_int_equal(agent_fsconf_tmp_open(r, "new/", &opt, &tmp, &err), -EISDIR);
	assert_int_equal(agent_fsconf_tmp_open(r, "", &opt, &tmp, &err), -EBUSY);
	assert_int_equal(agent_fsconf_tmp_open(r, "dir/..", &opt, &tmp, &err), -EINVAL);
	assert_int_equal(agent_fsconf_tmp_open(r, "missing/f", &opt, &tmp, &err), -ENOENT);
	assert_int_equal(tmp.fd, -1);
}

/* The folder of an upload moved, or swapped for a symlink, while the upload
 * runs: the file lands nowhere. */
static void test_write_folder_swapped(void **state)
{
	env *e = *state;
	const agent_fsconf_root *r = &e->r;
	sbx_err err;
	char d[PATH_MAX], aside[PATH_MAX], p[PATH_MAX];
	pathf(d, "%s/d", e->root);
	pathf(aside, "%s/d-aside", e->root);
	agent_fsconf_create opt = { .mode = 0644, .uid = (uid_t)-1, .gid = (gid_t)-1,
				    .overwrite = true };
	for (int variant = 0; variant < 2; variant++) {
		assert_int_equal(mkdir(d, 0755), 0);
		agent_fsconf_tmp tmp;
		assert_int_equal(agent_fsconf_tmp_open(r, "d/f", &opt, &tmp, &err), 0);
		assert_int_equal(write(tmp.fd, "data", 4), 4);
		assert_int_equal(rename(d, aside), 0);
		if (variant == 1)
			assert_int_equal(symlink(e->out, d), 0);
		assert_int_equal(agent_fsconf_tmp_commit(r, &tmp, &err), variant ? -EACCES : -ENOENT);
		assert_int_equal(tmp.fd, -1);
		/* In the moved folder no file and no temporary remain; outside neither. */
		SBX_AUTO_FREE char *left = snapshot(aside, 1);
		assert_string_equal(left, "");
		pathf(p, "%s/f", e->out);
		assert_int_equal(access(p, F_OK), -1);
		unlink(d);
		assert_int_equal(rmdir(aside), 0);
	}
	/* Moved and another folder put in its place: -ESTALE. */
	assert_int_equal(mkdir(d, 0755), 0);
	agent_fsconf_tmp tmp;
	assert_int_equal(agent_fsconf_tmp_open(r, "d/f", &opt, &tmp, &err), 0);
	assert_int_equal(rename(d, aside), 0);
	assert_int_equal(mkdir(d, 0755), 0);
	assert_int_equal(agent_fsconf_tmp_commit(r, &tmp, &err), -ESTALE);
	assert_non_null(strstr(err.msg, "moved or replaced during the write"));
	pathf(p, "%s/f", d);
	assert_int_equal(access(p, F_OK), -1);
	SBX_AUTO_FREE char *left = snapshot(aside, 1);
	assert_string_equal(left, "");
}

static void test_mkdir(void **state)
{
	env *e = *state;
	const agent_fsconf_root *r = &e->r;
	sbx_err err;
	char p[PATH_MAX];
	struct stat st;
	mode_t old = umask(077);
	assert_int_equal(agent_fsconf_mkdir(r, "a", 0751, false, &err), 0);
	assert_int_equal(agent_fsconf_mkdir(r, "a", 0751, false, &err), -EEXIST);
	assert_int_equal(agent_fsconf_mkdir(r, "a", 0751, true, &err), 0);
	assert_int_equal(agent_fsconf_mkdir(r, "a/b/c//d/", 0705, true, &err), 0);
	umask(old);
	pathf(p, "%s/a", e->root);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0751);
	pathf(p, "%s/a/b/c/d", e->root);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0705);
	assert_int_equal(agent_fsconf_mkdir(r, "", 0755, false, &err), -EEXIST);
	assert_int_equal(agent_fsconf_mkdir(r, "", 0755, true, &err), 0);
	assert_int_equal(agent_fsconf_mkdir(r, "x", 02755, true, &err), -EPERM);

	/* In-root symlinks are followed, others refused. */
	pathf(p, "%s/alink", e->root);
	assert_int_equal(symlink("a", p), 0);
	assert_int_equal(agent_fsconf_mkdir(r, "alink/via", 0755, true, &err), 0);
	pathf(p, "%s/a/via", e->root);
	assert_int_equal(stat(p, &st), 0);
	pathf(p, "%s/out", e->root);
	assert_int_equal(symlink(e->out, p), 0);
	assert_int_equal(agent_fsconf_mkdir(r, "out/x/y", 0755, true, &err), -EACCES);
	assert_int_equal(agent_fsconf_mkdir(r, "out/x", 0755, false, &err), -EACCES);
	assert_int_equal(agent_fsconf_mkdir(r, "../outside/x", 0755, true, &err), -EACCES);
	pathf(p, "%s/x", e->out);
	assert_int_equal(access(p, F_OK), -1);

	/* A file in the way. */
	pathf(p, "%s/file", e->root);
	put_file(p, "f");
	assert_int_equal(agent_fsconf_mkdir(r, "file", 0755, true, &err), -EEXIST);
	assert_int_equal(agent_fsconf_mkdir(r, "file/sub", 0755, true, &err), -ENOTDIR);
}

static void test_remove(void **state)
{
	env *e = *state;
	const agent_fsconf_root *r = &e->r;
	sbx_err err;
	char p[PATH_MAX];
	pathf(p, "%s/f", e->root);
	put_file(p, "f");
	assert_int_equal(agent_fsconf_remove(r, "f", false, &err), 0);
	assert_int_equal(access(p, F_OK), -1);
	assert_int_equal(agent_fsconf_remove(r, "f", false, &err), -ENOENT);

	/* A symlink to a folder outside: the link goes, the folder stays. */
	pathf(p, "%s/out", e->root);
	assert_int_equal(symlink(e->out, p), 0);
	SBX_AUTO_FREE char *before = snapshot(e->out, 3);
	assert_int_equal(agent_fsconf_remove(r, "out", true, &err), 0);
	assert_int_equal(agent_fsconf_remove(r, "out/secret", true, &err), -ENOENT);
	pathf(p, "%s/out", e->root);
	assert_int_equal(symlink(e->out, p), 0);
	assert_int_equal(agent_fsconf_remove(r, "out/secret", true, &err), -EACCES);
	assert_int_equal(agent_fsconf_remove(r, "out/", true, &err), 0);
	SBX_AUTO_FREE char *after = snapshot(e->out, 3);
	assert_string_equal(before, after);

	/* Folders: empty, full, the root, dot names. */
	pathf(p, "%s/d", e->root);
	mkdir(p, 0755);
	assert_int_equal(agent_fsconf_remove(r, "d", false, &err), 0);
	mkdir(p, 0755);
	pathf(p, "%s/d/f", e->root);
	put_file(p, "f");
	assert_int_equal(agent_fsconf_remove(r, "d", false, &err), -ENOTEMPTY);
	assert_int_equal(agent_fsconf_remove(r, "d", true, &err), 0);
	assert_int_equal(agent_fsconf_remove(r, "", true, &err), -EBUSY);
	assert_int_equal(agent_fsconf_remove(r, ".", true, &err), -EINVAL);
	assert_int_equal(agent_fsconf_remove(r, "x/..", true, &err), -EINVAL);
	assert_int_equal(agent_fsconf_remove(r, "..", true, &err), -EINVAL);

	/* Deep: far beyond PATH_MAX in total, with symlinks to outside at every
	 * level (removed, never followed). */
	SBX_AUTO_CLOSE int cur = open(e->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	assert_true(cur >= 0);
	char name[201];
	memset(name, 'n', 200);
	name[200] = '\0';
	assert_int_equal(mkdirat(cur, "deep", 0755), 0);
	int fd = openat(cur, "deep", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	for (int i = 0; i < 100 && fd >= 0; i++) {
		assert_int_equal(symlinkat(e->out, fd, "to_out"), 0);
		assert_int_equal(mkdirat(fd, name, 0755), 0);
		int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		close(fd);
		fd = next;
	}
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(agent_fsconf_remove(r, "deep", true, &err), 0);
	assert_int_equal(faccessat(cur, "deep", F_OK, AT_SYMLINK_NOFOLLOW), -1);
	SBX_AUTO_FREE char *after2 = snapshot(e->out, 3);
	assert_string_equal(before, after2);
}

static void test_rename(void **state)
{
	env *e = *state;
	const agent_fsconf_root *r = &e->r;
	sbx_err err;
	char p[PATH_MAX];
	char *data;
	size_t len;
	pathf(p, "%s/a", e->root);
	put_file(p, "A");
	pathf(p, "%s/b", e->root);
	put_file(p, "B");
	assert_int_equal(agent_fsconf_rename(r, "a", r, "b", false, &err), -EEXIST);
	assert_non_null(strstr(err.msg, "the target exists"));
	assert_int_equal(agent_fsconf_rename(r, "a", r, "b", true, &err), 0);
	assert_int_equal(agent_read(r, "b", &data, &len, &err), 0);
	assert_string_equal(data, "A");
	free(data);
	assert_int_equal(agent_fsconf_rename(r, "a", r, "c", true, &err), -ENOENT);

	/* A symlink moves as itself. */
	pathf(p, "%s/ln", e->root);
	assert_int_equal(symlink(e->out, p), 0);
	assert_int_equal(agent_fsconf_rename(r, "ln", r, "ln2", false, &err), 0);
	struct stat st;
	assert_int_equal(agent_fsconf_stat(r, "ln2", false, &st, &err), 0);
	assert_true(S_ISLNK(st.st_mode));
	/* Not through it, in either direction. */
	assert_int_equal(agent_fsconf_rename(r, "b", r, "ln2/stolen", false, &err), -EACCES);
	assert_int_equal(agent_fsconf_rename(r, "ln2/secret", r, "got", false, &err), -EACCES);
	assert_int_equal(agent_fsconf_rename(r, "b", r, "../outside/x", false, &err), -EACCES);
	/* Not the root, not dot names. */
	assert_int_equal(agent_fsconf_rename(r, "", r, "x", false, &err), -EBUSY);
	assert_int_equal(agent_fsconf_rename(r, "b", r, "", true, &err), -EBUSY);
	assert_int_equal(agent_fsconf_rename(r, "b", r, "..", true, &err), -EINVAL);

	/* Between two roots. */
	char other[PATH_MAX];
	pathf(other, "%s/other", e->top);
	assert_int_equal(mkdir(other, 0755), 0);
	AGENT_FSCONF_AUTO_ROOT agent_fsconf_root r2 = { .fd = -1 };
	assert_int_equal(agent_fsconf_root_open(&r2, other, &err), 0);
	assert_int_equal(agent_fsconf_rename(r, "b", &r2, "moved", false, &err), 0);
	pathf(p, "%s/moved", other);
	SBX_AUTO_FREE char *got = get_file(p);
	assert_string_equal(got, "A");
}

static void test_chmod(void **state)
{
	env *e = *state;
	const agent_fsconf_root *r = &e->r;
	sbx_err err;
	char p[PATH_MAX];
	struct stat st;
	pathf(p, "%s/f", e->root);
	put_file(p, "f");
	assert_int_equal(agent_fsconf_chmod(r, "f", 0600, &err), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	pathf(p, "%s/d", e->root);
	mkdir(p, 0755);
	assert_int_equal(agent_fsconf_chmod(r, "d", 01777, &err), 0);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 01777);
	assert_int_equal(agent_fsconf_chmod(r, "f", 04755, &err), -EPERM);
	assert_int_equal(agent_fsconf_chmod(r, "d", 02755, &err), -EPERM);

	/* A symlink inside is followed; to outside refused. */
	pathf(p, "%s/lf", e->root);
	assert_int_equal(symlink("f", p), 0);
	assert_int_equal(agent_fsconf_chmod(r, "lf", 0640, &err), 0);
	pathf(p, "%s/f", e->root);
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0640);
	pathf(p, "%s/ls", e->root);
	assert_int_equal(symlink("../outside/secret", p), 0);
	assert_int_equal(agent_fsconf_chmod(r, "ls", 0777, &err), -EACCES);

	/* A hard link to a file outside: the shared inode is not changed. */
	char shared[PATH_MAX];
	pathf(shared, "%s/shared", e->out);
	pathf(p, "%s/hl", e->root);
	assert_int_equal(link(shared, p), 0);
	assert_int_equal(agent_fsconf_chmod(r, "hl", 0777, &err), -EMLINK);
	assert_non_null(strstr(err.msg, "2 hard links"));
	assert_int_equal(stat(shared, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);

	/* Not a file or folder: nothing is opened. */
	pathf(p, "%s/fifo", e->root);
	assert_int_equal(mkfifo(p, 0644), 0);
	assert_int_equal(agent_fsconf_chmod(r, "fifo", 0600, &err), -EPERM);
	assert_int_equal(agent_fsconf_chmod(r, "", 0755, &err), 0);
}

static void test_stat_readlink(void **state)
{
	env *e = *state;
	const agent_fsconf_root *r = &e->r;
	sbx_err err;
	char p[PATH_MAX];
	struct stat st;
	pathf(p, "%s/etc", e->root);
	assert_int_equal(symlink("/etc", p), 0);
	pathf(p, "%s/f", e->root);
	put_file(p, "12345");
	assert_int_equal(agent_fsconf_stat(r, "etc", false, &st, &err), 0);
	assert_true(S_ISLNK(st.st_mode));
	assert_int_equal(agent_fsconf_stat(r, "etc", true, &st, &err), -EACCES);
	assert_non_null(strstr(err.msg, "leads outside its root"));
	assert_int_equal(agent_fsconf_stat(r, "f", true, &st, &err), 0);
	assert_int_equal(st.st_size, 5);
	assert_int_equal(agent_fsconf_stat(r, "", true, &st, &err), 0);
	assert_true(S_ISDIR(st.st_mode));

	char buf[64];
	assert_int_equal(agent_fsconf_readlink(r, "etc", buf, sizeof(buf), &err), 4);
	assert_string_equal(buf, "/etc");
	assert_int_equal(agent_fsconf_readlink(r, "etc", buf, 4, &err), -ENAMETOOLONG);
	assert_int_equal(agent_fsconf_readlink(r, "f", buf, sizeof(buf), &err), -EINVAL);
	assert_non_null(strstr(err.msg, "not a symlink"));
	assert_int_equal(agent_fsconf_readlink(r, "etc/passwd", buf, sizeof(buf), &err), -EACCES);
}

/* Names with every byte but NUL and '/': created, listed, read back and
 * moved under exactly the bytes asked for. */
static void test_names_round_trip(void **state)
{
	env *e = *state;
	corpus c;
	char msg[256];
	if (corpus_load(SBX_CORPUS_FILE, &c, msg, sizeof(msg)) < 0) {
		corpus_free(&c);
		fail_msg("%s", msg);
	}
	const agent_fsconf_root *r = &e->r;
	sbx_err err;
	int failures = 0;
	for (size_t i = 0; i < c.nnames; i++) {
		const char *name = c.names[i].p;
		char content[64], moved[PATH_MAX], sub[PATH_MAX];
		snprintf(content, sizeof(content), "round trip %zu", i);
		/* A name of 254 bytes has no room for a suffix: shorten the copy. */
		snprintf(moved, sizeof(moved), "%.200s~", name);
		snprintf(sub, sizeof(sub), "%.200s.d/%s", name, name);
		char *data = NULL;
		size_t len;
		bool ok = agent_write(r, name, content, false, &err) == 0 &&
			  agent_read(r, name, &data, &len, &err) == 0 &&
			  strcmp(data, content) == 0;
		free(data);
		data = NULL;
		/* Listed with exactly these bytes. */
		bool listed = false;
		int dfd = ok ? agent_fsconf_open_dir(r, "", "list", &err) : -1;
		DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
		for (struct dirent *de; d && (de = readdir(d));)
			listed |= strcmp(de->d_name, name) == 0;
		if (d)
			closedir(d);
		char dir[PATH_MAX];
		snprintf(dir, sizeof(dir), "%.200s.d", name);
		ok = ok && listed && agent_fsconf_rename(r, name, r, moved, false, &err) == 0 &&
		     agent_fsconf_mkdir(r, dir, 0755, false, &err) == 0 &&
		     agent_fsconf_rename(r, moved, r, sub, false, &err) == 0 &&
		     agent_read(r, sub, &data, &len, &err) == 0 && strcmp(data, content) == 0;
		free(data);
		struct stat st;
		ok = ok && agent_fsconf_stat(r, sub, false, &st, &err) == 0 && S_ISREG(st.st_mode) &&
		     agent_fsconf_remove(r, dir, true, &err) == 0;
		if (!ok) {
			print_error("name %zu (%zu bytes): %s\n", i, c.names[i].len, err.msg);
			failures++;
		}
	}
	corpus_free(&c);
	SBX_AUTO_FREE char *left = snapshot(e->root, 1);
	assert_string_equal(left, "");
	assert_int_equal(failures, 0);
}

/* Every operation refuses with -ENOSYS (counts the ones that did not). */
static int all_refused(const agent_fsconf_root *r)
{
	int bad = 0;
	sbx_err err;
	struct stat st;
	char buf[16];
	agent_fsconf_create opt = { .mode = 0644, .uid = (uid_t)-1, .gid = (gid_t)-1 };
	agent_fsconf_tmp tmp;
	bad += agent_fsconf_open_read(r, "f", &st, &err) != -ENOSYS;
	bad += !strstr(err.msg, "openat2 is not available");
	bad += agent_fsconf_open_dir(r, "", "list", &err) != -ENOSYS;
	bad += agent_fsconf_stat(r, "f", false, &st, &err) != -ENOSYS;
	bad += agent_fsconf_readlink(r, "f", buf, sizeof(buf), &err) != -ENOSYS;
	bad += agent_fsconf_tmp_open(r, "g", &opt, &tmp, &err) != -ENOSYS;
	bad += agent_fsconf_mkdir(r, "d", 0755, true, &err) != -ENOSYS;
	bad += agent_fsconf_mkdir(r, "d", 0755, false, &err) != -ENOSYS;
	bad += agent_fsconf_chmod(r, "f", 0600, &err) != -ENOSYS;
	bad += agent_fsconf_rename(r, "f", r, "g", false, &err) != -ENOSYS;
	bad += agent_fsconf_remove(r, "f", false, &err) != -ENOSYS;
	return bad;
}

/* Without openat2 (a seccomp filter answers ENOSYS for it, as gVisor or an
 * old kernel would): with openat2 chosen, or no resolver, nothing is served
 * and nothing falls back; the probe picks the walk, which serves. */
static void test_no_openat2(void **state)
{
	env *e = *state;
	char p[PATH_MAX];
	pathf(p, "%s/f", e->root);
	put_file(p, "kept");
	SBX_AUTO_FREE char *before = snapshot(e->root, 1);
	fflush(NULL);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
		if (!ctx || seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0) < 0 ||
		    seccomp_load(ctx) < 0)
			_exit(99);
		seccomp_release(ctx);
		int bad = 0;
		sbx_err err;
		agent_fsconf_use(AGENT_FSCONF_OPENAT2);
		agent_fsconf_root r;
		bad += agent_fsconf_root_open(&r, e->root, &err) != -ENOSYS;
		/* Even with a root fd from elsewhere, every operation refuses. */
		r.fd = open(e->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
		snprintf(r.path, sizeof(r.path), "%s", e->root);
		bad += all_refused(&r);
		agent_fsconf_use(AGENT_FSCONF_NONE);
		bad += all_refused(&r);
		close(r.fd);
		/* The probe sees openat2 missing and picks the walk. */
		char note[256] = "";
		bad += agent_fsconf_probe(note, sizeof(note), &err) != AGENT_FSCONF_WALK;
		bad += !strstr(note, "component walk");
		bad += agent_fsconf_resolver_in_use() != AGENT_FSCONF_WALK;
		char *data = NULL;
		size_t len;
		bad += agent_fsconf_root_open(&r, e->root, &err) != 0;
		bad += agent_read(&r, "f", &data, &len, &err) != 0 || !data || strcmp(data, "kept");
		free(data);
		agent_fsconf_root_close(&r);
		_exit(bad);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* Nothing fell back to a plain open: no file made, moved or changed. */
	SBX_AUTO_FREE char *after = snapshot(e->root, 1);
	assert_string_equal(after, before);
	struct stat st;
	assert_int_equal(stat(p, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
}

/* The walk gives what openat2 gives, compared call by call on a tree of
 * symlinks, dots and files (skipped where openat2 is missing: under gVisor
 * the corpus holds the walk to the same expectations), and refuses what it
 * cannot give. */
static void test_walk_matches_openat2(void **state)
{
	env *e = *state;
	char p[PATH_MAX];
	static const char *const dirs[] = { "d", "d/s", "d/s/t" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		pathf(p, "%s/%s", e->root, dirs[i]);
		assert_int_equal(mkdir(p, 0755), 0);
	}
	static const char *const links[][2] = {
		{ "up", ".." },	       { "d/s/up2", "../.." }, { "d/s/out", "../../.." },
		{ "abs", "/etc" },     { "d/self", "self" },   { "to_d", "d" },
		{ "to_f", "d/f" },     { "dangling", "nope" }, { "d/s/t/dots", "./../../s/./t" },
		{ "slash", "d/" },     { "empty_dir", "d/s/t/" },
	};
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		pathf(p, "%s/%s", e->root, links[i][0]);
		assert_int_equal(symlink(links[i][1], p), 0);
	}
	pathf(p, "%s/d/f", e->root);
	put_file(p, "f");
	/* A chain of 40 links resolves, 41 do not (the kernel's MAXSYMLINKS). */
	for (int i = 0; i < 41; i++) {
		char name[16], target[16];
		snprintf(name, sizeof(name), "c%d", i);
		snprintf(target, sizeof(target), i ? "c%d" : "d/f", i - 1);
		pathf(p, "%s/%s", e->root, name);
		assert_int_equal(symlink(target, p), 0);
	}
	static const char *const paths[] = {
		".", "d", "d/", "d/.", "d/..", "..", "d/../..", "up", "up/d", "d/s/up2/d/f",
		"d/s/out", "d/s/out/x", "abs", "abs/passwd", "d/self", "to_d/s/..", "to_f",
		"to_f/", "to_f/x", "dangling", "d/f/", "d/s/t/dots/up2", "slash/f", "slash/..",
		"empty_dir/", "d//s///t", "c39", "c40", "c40/x", "missing", "d/missing/x",
	};
	struct stat st;
	SBX_AUTO_CLOSE int root = open(e->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	assert_true(root >= 0);
	bool have_openat2 = true;
	int compared = 0;
	for (size_t c = 0; c < sizeof(fsconf_combos) / sizeof(fsconf_combos[0]); c++) {
		for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
			struct open_how how = { .flags = fsconf_combos[c].flags | O_CLOEXEC,
						.resolve = fsconf_combos[c].resolve };
			/* -EAGAIN: a rename or mount anywhere on the machine raced a
			 * ".." (the kernel asks for a retry, as agent_fsconf does);
			 * a busy machine gave it once in a CI run */
			long k;
			int tries = 0;
			do
				k = syscall(SYS_openat2, root, paths[i], &how, sizeof(how));
			while (k < 0 && (errno == EAGAIN || errno == EINTR) && ++tries < 32);
			int kr = k >= 0 ? (int)k : -errno;
			if (kr == -ENOSYS) {
				have_openat2 = false;
				break;
			}
			int wr = agent_fsconf_walk(root, paths[i], fsconf_combos[c].flags, 0,
						   fsconf_combos[c].resolve);
			struct stat ks, ws;
			bool same = (kr >= 0) == (wr >= 0) && (kr >= 0 || kr == wr);
			if (same && kr >= 0)
				same = fstat(kr, &ks) == 0 && fstat(wr, &ws) == 0 &&
				       ks.st_dev == ws.st_dev && ks.st_ino == ws.st_ino;
			if (!same)
				print_error("%s flags %#llx resolve %#llx: openat2 %d, walk %d\n",
					    paths[i], (unsigned long long)fsconf_combos[c].flags,
					    (unsigned long long)fsconf_combos[c].resolve, kr, wr);
			compared += same;
			if (kr >= 0)
				close(kr);
			if (wr >= 0)
				close(wr);
		}
	}
	if (have_openat2)
		assert_int_equal(compared, (int)(sizeof(paths) / sizeof(paths[0]) *
						 sizeof(fsconf_combos) / sizeof(fsconf_combos[0])));
	else
		print_message("no openat2 here: the comparison is skipped\n");

	/* What the walk refuses rather than do less safely. */
	int r = agent_fsconf_walk(root, "new", O_WRONLY | O_CREAT, 0600, RESOLVE_BENEATH);
	assert_int_equal(r, -EINVAL);
	r = agent_fsconf_walk(root, "d/f", O_WRONLY | O_TRUNC, 0, RESOLVE_BENEATH);
	assert_int_equal(r, -EINVAL);
	r = agent_fsconf_walk(root, "d", O_PATH, 0, RESOLVE_BENEATH | RESOLVE_IN_ROOT);
	assert_int_equal(r, -EINVAL);
	r = agent_fsconf_walk(root, "d", O_PATH, 0, RESOLVE_NO_MAGICLINKS);
	assert_int_equal(r, -EINVAL);
	/* O_CREAT | O_EXCL makes the file with the mode asked for, less the
	 * umask, and never through a symlink. */
	mode_t old = umask(022);
	r = agent_fsconf_walk(root, "d/new", O_WRONLY | O_CREAT | O_EXCL, 0666, RESOLVE_BENEATH);
	umask(old);
	assert_true(r >= 0);
	assert_int_equal(fstat(r, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	close(r);
	r = agent_fsconf_walk(root, "dangling", O_WRONLY | O_CREAT | O_EXCL, 0600,
			      RESOLVE_BENEATH);
	assert_int_equal(r, -EEXIST);
	pathf(p, "%s/nope", e->root);
	assert_int_equal(access(p, F_OK), -1);
	/* Symlinks nested in symlinks' targets, each target 4 KiB: more than
	 * the walk holds at once (the kernel would resolve it). */
	for (int i = 1; i <= 7; i++) {
		static char target[PATH_MAX];
		size_t n = (size_t)snprintf(target, sizeof(target), i < 7 ? "n%d/" : "d", i + 1);
		while (i < 7 && n + 2 < PATH_MAX - 1) {
			memcpy(target + n, "./", 2);
			n += 2;
		}
		target[n] = '\0';
		char name[8];
		snprintf(name, sizeof(name), "n%d", i);
		assert_int_equal(symlinkat(target, root, name), 0);
	}
	r = agent_fsconf_walk(root, "n7", O_PATH, 0, RESOLVE_BENEATH);
	assert_true(r >= 0);
	close(r);
	r = agent_fsconf_walk(root, "n1", O_PATH, 0, RESOLVE_BENEATH);
	assert_int_equal(r, -ENAMETOOLONG);
}

/* ---- sandboxed: PID 1 of new PID and mount namespaces ---- */

static int g_failures;

#define CHECK(cond, ...)                                         \
	do {                                                     \
		if (!(cond)) {                                   \
			fprintf(stderr, "  FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);            \
			fputc('\n', stderr);                     \
			g_failures++;                            \
		}                                                \
	} while (0)

/* What must never change or be reached: the outside folder, the decoy /etc,
 * and the names in "/". */
typedef struct guard {
	char *out, *etc, *slash;
	struct {
		dev_t dev;
		ino_t ino;
	} inodes[64];
	size_t ninodes;
} guard;

static void guard_add(guard *g, const char *path)
{
	struct stat st;
	if (g->ninodes < 64 && lstat(path, &st) == 0) {
		g->inodes[g->ninodes].dev = st.st_dev;
		g->inodes[g->ninodes++].ino = st.st_ino;
	}
}

static void guard_init(guard *g, const env *e)
{
	memset(g, 0, sizeof(*g));
	g->out = snapshot(e->out, 3);
	g->etc = snapshot("/etc", 1);
	g->slash = snapshot("/", -1);
	static const char *const etc[] = { "/", "/etc", "/etc/passwd", "/etc/shadow",
					   "/etc/hostname" };
	for (size_t i = 0; i < sizeof(etc) / sizeof(etc[0]); i++)
		guard_add(g, etc[i]);
	char p[PATH_MAX];
	guard_add(g, e->top);
	guard_add(g, e->out);
	static const char *const out[] = { "secret", "passwd", "sub", "sub/deeper" };
	for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++) {
		pathf(p, "%s/%s", e->out, out[i]);
		guard_add(g, p);
	}
}

static void guard_free(guard *g)
{
	free(g->out);
	free(g->etc);
	free(g->slash);
}

static bool guarded_inode(const guard *g, const struct stat *st)
{
	for (size_t i = 0; i < g->ninodes; i++)
		if (g->inodes[i].dev == st->st_dev && g->inodes[i].ino == st->st_ino)
			return true;
	return false;
}

/* Outside unchanged; if not, say so and put it back for the next case. */
static bool guard_check(const guard *g, env *e, const char *what)
{
	SBX_AUTO_FREE char *out = snapshot(e->out, 3);
	SBX_AUTO_FREE char *etc = snapshot("/etc", 1);
	SBX_AUTO_FREE char *slash = snapshot("/", -1);
	bool ok = out && etc && slash && strcmp(out, g->out) == 0 && strcmp(etc, g->etc) == 0 &&
		  strcmp(slash, g->slash) == 0;
	CHECK(ok, "%s: something outside the root changed:\n--- outside was\n%s--- is\n%s"
		  "--- /etc was\n%s--- is\n%s",
	      what, g->out, out ? out : "", g->etc, etc ? etc : "");
	if (!ok) {
		clear_dir(e->out);
		make_outside(e);
	}
	return ok;
}

static char *subst(const char *arg, const env *e)
{
	char buf[PATH_MAX];
	if (strncmp(arg, "@ROOT@", 6) == 0)
		snprintf(buf, sizeof(buf), "%s%s", e->root, arg + 6);
	else if (strncmp(arg, "@OUT@", 5) == 0)
		snprintf(buf, sizeof(buf), "%s%s", e->out, arg + 5);
	else
		snprintf(buf, sizeof(buf), "%s", arg);
	return strdup(buf);
}

static void build_tree(env *e, const corpus *c)
{
	char p[PATH_MAX];
	for (size_t i = 0; i < c->ntree; i++)
		if (c->tree[i].type == CORPUS_PROCFS) {
			pathf(p, "%s/%s", e->root, c->tree[i].path);
			umount2(p, MNT_DETACH);
		}
	clear_dir(e->root);
	mkdir(e->root, 0755);
	chmod(e->root, 0755); /* a case may have chmod-ed the root itself */
	for (size_t i = 0; i < c->ntree; i++) {
		const corpus_tree *t = &c->tree[i];
		pathf(p, "%s/%s", e->root, t->path);
		char *arg = subst(t->arg, e);
		int r;
		switch (t->type) {
		case CORPUS_DIR: r = mkdir(p, 0755); break;
		case CORPUS_FILE: r = arg ? put_file(p, arg) : -1; break;
		case CORPUS_SYMLINK: r = arg ? symlink(arg, p) : -1; break;
		case CORPUS_HARDLINK: r = arg ? link(arg, p) : -1; break;
		case CORPUS_FIFO: r = mkfifo(p, 0644); break;
		case CORPUS_PROCFS:
			r = mkdir(p, 0555);
			if (r == 0)
				r = mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
			break;
		default:
			r = -1;
		}
		CHECK(r == 0, "tree %s: %s", t->path, strerror(errno));
		free(arg);
	}
}

enum { OP_READ, OP_WRITE, OP_STAT, OP_LSTAT, OP_READLINK, OP_LIST, OP_MKDIR, OP_MKDIR_UNDER,
       OP_CHMOD, OP_MOVE_FROM, OP_MOVE_TO, OP_REMOVE, OP_COUNT };
static const char *const op_names[] = { "read", "write", "stat", "lstat", "readlink", "list",
					"mkdir -p", "mkdir -p under", "chmod", "move from",
					"move to", "remove -r" };

/* Names that exist only outside the root: a listing must never show them. */
static bool outside_name(const char *n)
{
	static const char *const names[] = { "secret", "shadow", "hostname", "shared", "usr",
					     "deeper" };
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(n, names[i]) == 0)
			return true;
	return false;
}

/* One operation on rel; returns its result, checking that whatever it
 * returned holds nothing from outside. */
static int run_op(int op, const agent_fsconf_root *r, const char *rel, const char *tag,
		  const guard *g, const char *what)
{
	sbx_err err;
	sbx_err_clear(&err);
	int rc = -1;
	char buf[PATH_MAX], other[PATH_MAX + 8];
	struct stat st;
	switch (op) {
	case OP_READ: {
		char *data;
		size_t len;
		rc = agent_read(r, rel, &data, &len, &err);
		CHECK(!contains_secret(data, len), "%s: read returned outside bytes", what);
		free(data);
		break;
	}
	case OP_WRITE:
		rc = agent_write(r, rel, tag, true, &err);
		if (rc == 0) {
			char *data;
			size_t len;
			int back = agent_read(r, rel, &data, &len, &err);
			CHECK(back == 0 && strcmp(data, tag) == 0, "%s: written, not read back: %s",
			      what, err.msg);
			free(data);
		}
		break;
	case OP_STAT:
	case OP_LSTAT:
		rc = agent_fsconf_stat(r, rel, op == OP_STAT, &st, &err);
		CHECK(rc < 0 || !guarded_inode(g, &st), "%s: stat reached an outside inode", what);
		break;
	case OP_READLINK:
		rc = (int)agent_fsconf_readlink(r, rel, buf, sizeof(buf), &err);
		CHECK(rc < 0 || !contains_secret(buf, (size_t)rc), "%s: readlink", what);
		break;
	case OP_LIST: {
		rc = agent_fsconf_open_dir(r, rel, "list", &err);
		DIR *d = rc >= 0 ? fdopendir(rc) : NULL;
		for (struct dirent *de; d && (de = readdir(d));)
			CHECK(!outside_name(de->d_name), "%s: listed %s", what, de->d_name);
		if (d)
			closedir(d);
		break;
	}
	case OP_MKDIR:
		rc = agent_fsconf_mkdir(r, rel, 0755, true, &err);
		break;
	case OP_MKDIR_UNDER:
		snprintf(other, sizeof(other), "%s%smk", rel, rel[0] ? "/" : "");
		rc = agent_fsconf_mkdir(r, other, 0755, true, &err);
		break;
	case OP_CHMOD:
		rc = agent_fsconf_chmod(r, rel, 0600, &err);
		break;
	case OP_MOVE_FROM:
		rc = agent_fsconf_rename(r, rel, r, "moved_here", true, &err);
		break;
	case OP_MOVE_TO:
		rc = agent_fsconf_rename(r, "top", r, rel, true, &err);
		break;
	case OP_REMOVE:
		rc = agent_fsconf_remove(r, rel, true, &err);
		break;
	}
	CHECK(rc >= 0 || (err.msg[0] && !contains_secret(err.msg, strlen(err.msg))),
	      "%s: error without message", what);
	return rc;
}

static void run_case(env *e, const corpus *c, const corpus_case *k, const guard *g)
{
	corpus_bytes rel = corpus_agent_rel(k);
	sbx_err err;
	bool wire_ok = agent_fsconf_check_rel(rel.p, rel.len, &err) == 0;
	if (memchr(rel.p, '\0', rel.len)) {
		/* The protocol layer refuses it before it is a C string. */
		CHECK(!wire_ok, "case %s: NUL accepted", k->name);
		CHECK(!k->read.ok && !k->write.ok, "case %s: corpus expects success with NUL",
		      k->name);
		return;
	}
	for (int op = 0; op < OP_COUNT; op++) {
		char what[256], tag[128];
		snprintf(what, sizeof(what), "case %s (line %d) %s", k->name, k->line, op_names[op]);
		snprintf(tag, sizeof(tag), "written by %s", k->name);
		build_tree(e, c);
		AGENT_FSCONF_AUTO_ROOT agent_fsconf_root r = { .fd = -1 };
		CHECK(open_root(&r, e) == 0, "%s: root", what);
		int rc = run_op(op, &r, rel.p, tag, g, what);
		if (op == OP_READ) {
			CHECK((rc >= 0) == k->read.ok, "%s: got %d, want %s", what, rc,
			      k->read.ok ? "ok" : "fail");
			if (rc >= 0 && k->read.content) {
				char *data;
				size_t len;
				sbx_err e2;
				agent_read(&r, rel.p, &data, &len, &e2);
				CHECK(data && strcmp(data, k->read.content) == 0, "%s: read %s", what,
				      data ? data : "(null)");
				free(data);
			}
		} else if (op == OP_WRITE) {
			CHECK((rc >= 0) == k->write.ok, "%s: got %d, want %s", what, rc,
			      k->write.ok ? "ok" : "fail");
		}
		guard_check(g, e, what);
	}
	/* What the supervisor would send for an allowed /workspace request: the
	 * same guarantees. */
	static const char ws[] = "/workspace";
	if (k->policy == CORPUS_ALLOW && strncmp(k->normalised.p, ws, sizeof(ws) - 1) == 0 &&
	    (k->normalised.p[sizeof(ws) - 1] == '/' || k->normalised.p[sizeof(ws) - 1] == '\0')) {
		const char *nrel = k->normalised.p + sizeof(ws) - 1;
		nrel += *nrel == '/';
		if (strcmp(nrel, rel.p) == 0)
			return; /* the same request: done above */
		for (int op = 0; op < OP_COUNT; op++) {
			char what[256];
			snprintf(what, sizeof(what), "case %s normalised %s", k->name, op_names[op]);
			build_tree(e, c);
			AGENT_FSCONF_AUTO_ROOT agent_fsconf_root r = { .fd = -1 };
			CHECK(open_root(&r, e) == 0, "%s: root", what);
			run_op(op, &r, nrel, "normalised", g, what);
			guard_check(g, e, what);
		}
	}
}

typedef int (*sandboxed_fn)(env *e, void *arg);

/* Decoys in a tmpfs over /etc, so an escape to /etc is seen (and harmless). */
static int decoy_etc(void)
{
	if (mount("tmpfs", "/etc", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1m") < 0)
		return -errno;
	int r = put_file("/etc/passwd", SECRET "-etc-passwd");
	if (r == 0)
		r = put_file("/etc/shadow", SECRET "-etc-shadow");
	if (r == 0)
		r = put_file("/etc/hostname", SECRET "-etc-hostname");
	return r;
}

/* Run fn as PID 1 of new PID and mount namespaces; its failures count. */
static int run_sandboxed(env *e, sandboxed_fn fn, void *arg)
{
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (unshare(CLONE_NEWNS | CLONE_NEWPID) < 0)
			_exit(90);
		pid_t inner = fork();
		if (inner < 0)
			_exit(91);
		if (inner == 0) {
			/* Private, so nothing mounted here reaches the host's
			 * namespace; gVisor has no mount propagation and refuses
			 * the call (EINVAL), which is fine there. */
			if ((mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 && errno != EINVAL) ||
			    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 ||
			    decoy_etc() < 0)
				_exit(92);
			int failures = fn(e, arg);
			fflush(NULL);
			exit(failures ? 1 : 0);
		}
		int st;
		if (waitpid(inner, &st, 0) != inner)
			_exit(93);
		_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st));
	}
	int st;
	if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static bool can_sandbox(void)
{
	if (geteuid() != 0) {
		print_message("needs root (mount and PID namespaces): skipped\n");
		return false;
	}
	return true;
}

static int corpus_sandboxed(env *e, void *arg)
{
	const corpus *c = arg;
	g_failures = 0;
	build_tree(e, c);
	guard g;
	guard_init(&g, e);
	for (size_t i = 0; i < c->ncases; i++)
		run_case(e, c, &c->cases[i], &g);
	guard_free(&g);
	/* Left mounted, the tree's proc would outlive the namespace where
	 * mounts are shared with the test's own (gVisor's unshare). */
	char p[PATH_MAX];
	for (size_t i = 0; i < c->ntree; i++)
		if (c->tree[i].type == CORPUS_PROCFS) {
			pathf(p, "%s/%s", e->root, c->tree[i].path);
			umount2(p, MNT_DETACH);
		}
	fprintf(stderr, "  corpus: %zu cases x %d operations, %d failures\n", c->ncases, OP_COUNT,
		g_failures);
	return g_failures;
}

static void test_corpus(void **state)
{
	env *e = *state;
	if (!can_sandbox())
		skip();
	corpus c;
	char msg[256];
	if (corpus_load(SBX_CORPUS_FILE, &c, msg, sizeof(msg)) < 0) {
		corpus_free(&c);
		fail_msg("%s", msg);
	}
	assert_true(c.ncases >= 40);
	int r = run_sandboxed(e, corpus_sandboxed, &c);
	corpus_free(&c);
	assert_int_equal(r, 0);
}

/* A folder flipped between itself and symlinks out (to /etc, to the outside
 * folder, relative up and out) while files are written, read, made and
 * removed beneath it. */
typedef struct race {
	env *e;
	atomic_bool stop;
	atomic_uint flips;
} race;

static void *flipper(void *arg)
{
	race *rc = arg;
	char dir[PATH_MAX], aside[PATH_MAX], gone[PATH_MAX];
	pathf(dir, "%s/race", rc->e->root);
	pathf(aside, "%s/race_aside", rc->e->root);
	const char *targets[] = { "/etc", rc->e->out, "../outside" };
	for (unsigned i = 0; !atomic_load(&rc->stop); i++) {
		if (rename(dir, aside) < 0) {
			sched_yield();
			continue;
		}
		if (symlink(targets[i % 3], dir) == 0) {
			sched_yield();
			unlink(dir);
		}
		/* A mkdir -p of the worker may have made a new "race" meanwhile. */
		if (rename(aside, dir) < 0) {
			pathf(gone, "%s/race_made_%u", rc->e->root, i);
			rename(dir, gone);
			rename(aside, dir);
		}
		atomic_fetch_add(&rc->flips, 1);
		sched_yield(); /* leave the writer a window with the real folder */
	}
	return NULL;
}

static unsigned g_found, g_tmp_left;
static int count_entry(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	g_found += strncmp(p + f->base, "f-", 2) == 0;
	g_tmp_left += strncmp(p + f->base, ".sbx-tmp-", 9) == 0;
	return 0;
}

static int race_sandboxed(env *e, void *arg)
{
	(void)arg;
	g_failures = 0;
	char p[PATH_MAX];
	pathf(p, "%s/race", e->root);
	mkdir(p, 0755);
	pathf(p, "%s/race/sub", e->root);
	mkdir(p, 0755);
	pathf(p, "%s/race/passwd", e->root);
	put_file(p, "inside-race");
	guard g;
	guard_init(&g, e);

	race rc = { .e = e };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, flipper, &rc) == 0, "pthread_create");
	unsigned wrote = 0, refused = 0, reads = 0;
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0;; i++) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		/* Run at least 1.5 s, and on a loaded machine on until both
		 * outcomes were seen (up to 20 s): the test is about the race. */
		long ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if ((ms > 1500 && i > 200 && wrote > 0 && refused > 0) || ms > 20000)
			break;
		AGENT_FSCONF_AUTO_ROOT agent_fsconf_root r = { .fd = -1 };
		if (open_root(&r, e) < 0) {
			g_failures++;
			break;
		}
		sbx_err err;
		char rel[64], content[64];
		snprintf(rel, sizeof(rel), i % 2 ? "race/f-%u" : "race/sub/f-%u", i);
		snprintf(content, sizeof(content), "inside-%u", i);
		if (agent_write(&r, rel, content, false, &err) == 0)
			wrote++;
		else
			refused++;
		char *data;
		size_t len;
		if (agent_read(&r, "race/passwd", &data, &len, &err) == 0) {
			reads++;
			CHECK(strcmp(data, "inside-race") == 0, "race read got %s", data);
		}
		free(data);
		struct stat st;
		if (agent_fsconf_stat(&r, "race/passwd", true, &st, &err) == 0)
			CHECK(!guarded_inode(&g, &st), "race stat reached outside");
		snprintf(rel, sizeof(rel), "race/d-%u/x/y", i);
		agent_fsconf_mkdir(&r, rel, 0755, true, &err);
		snprintf(rel, sizeof(rel), "race/d-%u", i);
		agent_fsconf_remove(&r, rel, true, &err);
		agent_fsconf_chmod(&r, "race/passwd", i % 2 ? 0600 : 0644, &err);
	}
	atomic_store(&rc.stop, true);
	pthread_join(t, NULL);
	guard_check(&g, e, "race");
	guard_free(&g);

	/* Every write that succeeded is inside, and only those. */
	g_found = g_tmp_left = 0;
	nftw(e->root, count_entry, 16, FTW_PHYS | FTW_MOUNT);
	unsigned found = g_found;
	bool tmp_left = g_tmp_left > 0;
	fprintf(stderr, "  race: %u flips, %u writes inside, %u refused, %u reads\n",
		atomic_load(&rc.flips), wrote, refused, reads);
	CHECK(found == wrote, "race: %u files inside for %u writes", found, wrote);
	CHECK(!tmp_left, "race: a temporary file was left");
	CHECK(wrote > 0 && refused > 0 && atomic_load(&rc.flips) > 0,
	      "race: the race did not happen (wrote %u, refused %u)", wrote, refused);
	return g_failures;
}

static void test_race(void **state)
{
	env *e = *state;
	if (!can_sandbox())
		skip();
	assert_int_equal(run_sandboxed(e, race_sandboxed, NULL), 0);
}

/* Recursive removal stops at a mount inside the tree, and at a proc mount. */
static int mounts_sandboxed(env *e, void *arg)
{
	(void)arg;
	g_failures = 0;
	char p[PATH_MAX];
	pathf(p, "%s/t", e->root);
	mkdir(p, 0755);
	pathf(p, "%s/t/a", e->root);
	mkdir(p, 0755);
	pathf(p, "%s/t/a/bind", e->root);
	mkdir(p, 0755);
	CHECK(mount(e->out, p, NULL, MS_BIND, NULL) == 0, "bind: %s", strerror(errno));
	pathf(p, "%s/t/proc", e->root);
	mkdir(p, 0555);
	CHECK(mount("proc", p, "proc", 0, NULL) == 0, "proc: %s", strerror(errno));
	guard g;
	guard_init(&g, e);
	AGENT_FSCONF_AUTO_ROOT agent_fsconf_root r = { .fd = -1 };
	CHECK(open_root(&r, e) == 0, "root");
	sbx_err err;
	int rc = agent_fsconf_remove(&r, "t/a", true, &err);
	CHECK(rc == -EBUSY, "remove over a bind mount: %d %s", rc, err.msg);
	rc = agent_fsconf_remove(&r, "t/a/bind", true, &err);
	CHECK(rc == -EBUSY, "remove a mount point: %d %s", rc, err.msg);
	rc = agent_fsconf_remove(&r, "t/proc", true, &err);
	CHECK(rc == -EBUSY, "remove proc: %d %s", rc, err.msg);
	/* Reading through a mount inside the root is allowed (volumes). */
	char *data;
	size_t len;
	rc = agent_read(&r, "t/a/bind/shared", &data, &len, &err);
	CHECK(rc == 0 && strcmp(data, "outside-shared") == 0, "read through a volume: %s",
	      err.msg);
	free(data);
	guard_check(&g, e, "mounts");
	guard_free(&g);
	pathf(p, "%s/t/a/bind", e->root);
	umount2(p, MNT_DETACH);
	pathf(p, "%s/t/proc", e->root);
	umount2(p, MNT_DETACH);
	return g_failures;
}

static void test_remove_mounts(void **state)
{
	env *e = *state;
	if (!can_sandbox())
		skip();
	assert_int_equal(run_sandboxed(e, mounts_sandboxed, NULL), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, env_setup, env_teardown)

/* argv[1]: run only the tests matching this pattern (cmocka's filter). */
int main(int argc, char **argv)
{
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	/* SBX_FSCONF_RESOLVER=walk: every test (the corpus and the race too)
	 * against the component walk instead of openat2; =probe: against what
	 * the probe picks here, as the agent does (under gVisor: the walk). */
	const char *use = getenv("SBX_FSCONF_RESOLVER");
	char note[256];
	sbx_err err;
	if (use && strcmp(use, "walk") == 0) {
		agent_fsconf_use(AGENT_FSCONF_WALK);
	} else if (use && strcmp(use, "probe") == 0) {
		if (agent_fsconf_probe(note, sizeof(note), &err) < 0) {
			fprintf(stderr, "probe: %s\n", err.msg);
			return 1;
		}
	} else if (use && strcmp(use, "openat2") != 0) {
		fprintf(stderr, "SBX_FSCONF_RESOLVER=%s: want walk, probe or openat2\n", use);
		return 2;
	}
	print_message("resolver: %s\n", agent_fsconf_resolver_name(agent_fsconf_resolver_in_use()));
	const struct CMUnitTest tests[] = {
		T(test_probe),
		T(test_check_rel),
		T(test_root_open),
		T(test_root_replaced),
		T(test_proc_magic_links),
		T(test_read),
		T(test_write_replace),
		T(test_write_folder_swapped),
		T(test_mkdir),
		T(test_remove),
		T(test_rename),
		T(test_chmod),
		T(test_stat_readlink),
		T(test_names_round_trip),
		T(test_no_openat2),
		T(test_walk_matches_openat2),
		T(test_corpus),
		T(test_race),
		T(test_remove_mounts),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
