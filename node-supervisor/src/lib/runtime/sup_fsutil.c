/* sup_fsutil: see sup_fsutil.h. */
#include "sup_fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/dir.h"

/* Bound on descents in one removal, so a tree that keeps growing (a guest
 * still writing) ends in an error instead of a loop. */
#define RM_MAX_DESCENTS (1u << 24)

/* Identity of the mount a file is on: the mount id where the kernel gives it
 * (a bind mount of the same file system has another id but the same st_dev),
 * else st_dev. */
static int mount_key(int fd, uint64_t *key)
{
	struct statx stx;
	if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) < 0)
		return -errno;
	if (stx.stx_mask & STATX_MNT_ID)
		*key = stx.stx_mnt_id;
	else
		*key = ((uint64_t)stx.stx_dev_major << 32) | stx.stx_dev_minor;
	return 0;
}

/* 0 when fd is on the mount mnt, -EBUSY when on another one. */
static int on_mount(int fd, uint64_t mnt)
{
	uint64_t key = 0;
	int r = mount_key(fd, &key);
	return r < 0 ? r : key == mnt ? 0 : -EBUSY;
}

/* Empty the folder fd (taken over) without recursion: descend into a
 * non-empty child, come back up through "..", and re-read the parent; only
 * one folder is open at a time, so depth costs neither stack nor fds. */
static int empty_dir(int fd, uint64_t mnt, const char *top, sbx_err *err)
{
	size_t depth = 0;
	unsigned descents = 0;

	for (;;) {
		DIR *d = fdopendir(fd);
		if (!d) {
			int e = -errno;
			close(fd);
			return sbx_err_sys(err, e, "remove %s: opendir", top);
		}
		int child = -1;
		struct dirent *de;
		bool isdir;
		int next;
		while ((next = sbx_dir_next(d, &de, &isdir)) > 0) {
			const char *n = de->d_name;
			if (!isdir) {
				if (unlinkat(dirfd(d), n, 0) < 0 && errno != ENOENT) {
					int r = sbx_err_sys(err, -errno, "remove %s: unlink %s", top, n);
					closedir(d);
					return r;
				}
				continue;
			}
			if (unlinkat(dirfd(d), n, AT_REMOVEDIR) == 0 || errno == ENOENT)
				continue;
			/* EBUSY: a mount point; the check below says so */
			if (errno != ENOTEMPTY && errno != EEXIST && errno != EBUSY) {
				int r = sbx_err_sys(err, -errno, "remove %s: rmdir %s", top, n);
				closedir(d);
				return r;
			}
			child = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (child < 0) {
				int r = sbx_err_sys(err, -errno, "remove %s: open %s", top, n);
				closedir(d);
				return r;
			}
			int r = on_mount(child, mnt);
			if (r < 0) {
				r = sbx_err_sys(err, r, "remove %s: %s is a mount point, not removing through it",
						top, n);
				close(child);
				closedir(d);
				return r;
			}
			break;
		}
		if (next < 0) { /* an entry's type, or the folder's read */
			int r = de ? sbx_err_sys(err, next, "remove %s: stat %s", top, de->d_name)
				   : sbx_err_sys(err, next, "remove %s: readdir", top);
			closedir(d);
			return r;
		}
		if (child >= 0) {
			closedir(d);
			if (++descents > RM_MAX_DESCENTS) {
				close(child);
				return sbx_err_set(err, -ELOOP, "remove %s: tree keeps changing", top);
			}
			fd = child;
			depth++;
			continue;
		}
		if (depth == 0) {
			closedir(d);
			return 0;
		}
		int up = openat(dirfd(d), "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		closedir(d);
		if (up < 0)
			return sbx_err_sys(err, -errno, "remove %s: open ..", top);
		int r = on_mount(up, mnt);
		if (r < 0) {
			close(up);
			return sbx_err_sys(err, r, "remove %s: climbing back up", top);
		}
		fd = up;
		depth--;
	}
}

int sup_fs_rm_tree(const char *path, sbx_err *err)
{
	size_t len = strlen(path);
	if (len == 0 || len >= PATH_MAX || path[0] != '/')
		return sbx_err_set(err, -EINVAL, "remove %s: not an absolute path", path);
	char parent[PATH_MAX];
	memcpy(parent, path, len + 1);
	while (len > 1 && parent[len - 1] == '/')
		parent[--len] = '\0';
	char *slash = strrchr(parent, '/');
	const char *base = slash + 1;
	if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
		return sbx_err_set(err, -EINVAL, "remove %s: refusing this path", path);
	if (slash == parent)
		return sbx_err_set(err, -EINVAL, "remove %s: refusing a top-level folder", path);
	*slash = '\0';

	SBX_AUTO_CLOSE int pfd = open(parent, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pfd < 0)
		return errno == ENOENT ? 0 : sbx_err_sys(err, -errno, "remove %s: open parent", path);
	int fd = openat(pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return 0;
		if (errno == ENOTDIR || errno == ELOOP) {
			if (unlinkat(pfd, base, 0) < 0 && errno != ENOENT)
				return sbx_err_sys(err, -errno, "remove %s", path);
			return 0;
		}
		return sbx_err_sys(err, -errno, "remove %s: open", path);
	}
	uint64_t key = 0;
	int r = mount_key(pfd, &key);
	if (r == 0)
		r = on_mount(fd, key);
	if (r < 0) {
		close(fd);
		return sbx_err_sys(err, r, "remove %s: a mount point, not removing through it", path);
	}
	r = empty_dir(fd, key, path, err);
	if (r < 0)
		return r;
	if (unlinkat(pfd, base, AT_REMOVEDIR) < 0 && errno != ENOENT)
		return sbx_err_sys(err, -errno, "remove %s: rmdir", path);
	return 0;
}

int sup_fs_mkdir(int dirfd, const char *name, mode_t mode, uid_t uid, gid_t gid,
		 int exist_ok, sbx_err *err)
{
	if (mkdirat(dirfd, name, mode) < 0) {
		if (errno == EEXIST && exist_ok)
			return 0;
		return sbx_err_sys(err, -errno, "mkdir %s", name);
	}
	SBX_AUTO_CLOSE int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "open %s", name);
	if ((uid != 0 || gid != 0) && fchown(fd, uid, gid) < 0)
		return sbx_err_sys(err, -errno, "chown %s", name);
	if (fchmod(fd, mode) < 0)
		return sbx_err_sys(err, -errno, "chmod %s", name);
	return 0;
}

int sup_fs_write_file(int dirfd, const char *name, const char *data, size_t len,
		      mode_t mode, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = openat(dirfd, name,
				       O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "create %s", name);
	size_t off = 0;
	while (off < len) {
		ssize_t n = write(fd, data + off, len - off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return sbx_err_sys(err, -errno, "write %s", name);
		}
		off += (size_t)n;
	}
	if (fchmod(fd, mode) < 0)
		return sbx_err_sys(err, -errno, "chmod %s", name);
	return 0;
}

ssize_t sup_fs_read_small(int dirfd, const char *name, char *buf, size_t cap, sbx_err *err)
{
	if (cap == 0)
		return sbx_err_set(err, -EINVAL, "read %s: no room", name);
	SBX_AUTO_CLOSE int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "open %s", name);
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, cap - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return sbx_err_sys(err, -errno, "read %s", name);
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == cap)
			return sbx_err_set(err, -EFBIG, "read %s: larger than %zu bytes", name, cap - 1);
	}
	buf[len] = '\0';
	return (ssize_t)len;
}

void sup_fs_log_tail(const char *path, char *buf, size_t cap)
{
	if (cap == 0)
		return;
	buf[0] = '\0';
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return;
	off_t want = (off_t)(cap - 1);
	off_t from = st.st_size > want ? st.st_size - want : 0;
	ssize_t n = pread(fd, buf, cap - 1, from);
	if (n <= 0)
		return;
	/* one line for an error message: inner newlines become '|' (same
	 * length), anything else unprintable '?' */
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		n--;
	for (ssize_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)buf[i];
		if (c == '\n')
			buf[i] = '|';
		else if (c < 0x20 || c == 0x7f)
			buf[i] = '?';
	}
	buf[n] = '\0';
}
