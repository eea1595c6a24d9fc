/* agent_fsconf_ops: reading, stat, readlink, write by replace, mkdir, move and
 * chmod beneath a root (see agent_fsconf_ops.h); removal is in agent_fsconf_rm.c. */
#include "agent_fsconf_ops.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"

#define TMP_TRIES 16

static int check_mode(const agent_fsconf_root *root, const char *rel, mode_t mode,
		      const char *what, sbx_err *err)
{
	if (mode & (S_ISUID | S_ISGID))
		return agent_fsconf_fail(err, -EPERM, root, rel, what,
					 "setuid and setgid bits are not set through the file API");
	if (mode & ~(mode_t)01777)
		return agent_fsconf_fail(err, -EINVAL, root, rel, what, "mode beyond 01777");
	return 0;
}

static bool same_inode(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Open rel for real only after an O_PATH look at what it is, so a FIFO or a
 * device is never opened; then check the fd is the inode that was looked at
 * (a swap in between gives -EAGAIN). want: S_IFREG, or 0 for file or folder. */
static int open_checked(const agent_fsconf_root *root, const char *rel, uint64_t flags,
			mode_t want, struct stat *st, const char *what, sbx_err *err)
{
	SBX_AUTO_CLOSE int pfd = agent_fsconf_open(root, rel, O_PATH, 0, what, err);
	if (pfd < 0)
		return pfd;
	struct stat first;
	if (fstat(pfd, &first) < 0)
		return agent_fsconf_fail(err, -errno, root, rel, what, NULL);
	if (want == S_IFREG && S_ISDIR(first.st_mode))
		return agent_fsconf_fail(err, -EISDIR, root, rel, what, "is a folder");
	if (!S_ISREG(first.st_mode) && (want == S_IFREG || !S_ISDIR(first.st_mode)))
		return agent_fsconf_fail(err, want == S_IFREG ? -EINVAL : -EPERM, root, rel, what,
					 want == S_IFREG ? "not a regular file"
							 : "not a regular file or folder");
	SBX_AUTO_CLOSE int fd = agent_fsconf_open(root, rel, flags | O_NOCTTY | O_NONBLOCK, 0,
						  what, err);
	if (fd < 0)
		return fd;
	if (fstat(fd, st) < 0)
		return agent_fsconf_fail(err, -errno, root, rel, what, NULL);
	if (!same_inode(&first, st))
		return agent_fsconf_fail(err, -EAGAIN, root, rel, what,
					 "replaced while it was being opened");
	/* O_NONBLOCK was for the open only. */
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
		return agent_fsconf_fail(err, -errno, root, rel, what, NULL);
	return sbx_steal_fd(&fd);
}

int agent_fsconf_open_read(const agent_fsconf_root *root, const char *rel, struct stat *st,
			   sbx_err *err)
{
	return open_checked(root, rel, O_RDONLY, S_IFREG, st, "read", err);
}

int agent_fsconf_open_dir(const agent_fsconf_root *root, const char *rel, const char *what,
			  sbx_err *err)
{
	int fd = agent_fsconf_open(root, rel, O_RDONLY | O_DIRECTORY, 0, what, err);
	if (fd != -ENOTDIR)
		return fd;
	struct stat st;
	sbx_err e2 = { 0 };
	if (agent_fsconf_stat(root, rel, true, &st, &e2) == 0 && !S_ISDIR(st.st_mode))
		return agent_fsconf_fail(err, -EINVAL, root, rel, what, "not a folder");
	return fd;
}

int agent_fsconf_stat(const agent_fsconf_root *root, const char *rel, bool follow,
		      struct stat *st, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd =
		agent_fsconf_open(root, rel, O_PATH | (follow ? 0 : O_NOFOLLOW), 0, "stat", err);
	if (fd < 0)
		return fd;
	if (fstat(fd, st) < 0)
		return agent_fsconf_fail(err, -errno, root, rel, "stat", NULL);
	return 0;
}

ssize_t agent_fsconf_readlink(const agent_fsconf_root *root, const char *rel, char *buf,
			      size_t cap, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = agent_fsconf_open(root, rel, O_PATH | O_NOFOLLOW, 0, "readlink",
						  err);
	if (fd < 0)
		return fd;
	struct stat st;
	if (fstat(fd, &st) < 0)
		return agent_fsconf_fail(err, -errno, root, rel, "readlink", NULL);
	if (!S_ISLNK(st.st_mode))
		return agent_fsconf_fail(err, -EINVAL, root, rel, "readlink", "not a symlink");
	/* An O_PATH fd of the link itself and an empty name: the link is read,
	 * nothing is resolved. */
	ssize_t n = readlinkat(fd, "", buf, cap);
	if (n < 0)
		return agent_fsconf_fail(err, -errno, root, rel, "readlink", NULL);
	if ((size_t)n >= cap)
		return agent_fsconf_fail(err, -ENAMETOOLONG, root, rel, "readlink",
					 "target longer than the buffer");
	buf[n] = '\0';
	return n;
}

static uint64_t tmp_random(void)
{
	uint64_t v = 0;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) == (ssize_t)sizeof(v))
		return v;
	/* Names only need to differ; O_EXCL keeps collisions harmless. */
	static uint64_t counter;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40) ^
	       ++counter;
}

void agent_fsconf_tmp_abort(agent_fsconf_tmp *tmp)
{
	if (tmp->name[0] && tmp->dirfd >= 0)
		unlinkat(tmp->dirfd, tmp->name, 0);
	tmp->name[0] = '\0';
	if (tmp->fd >= 0)
		close(tmp->fd);
	if (tmp->dirfd >= 0)
		close(tmp->dirfd);
	tmp->fd = tmp->dirfd = -1;
	free(tmp->rel);
	tmp->rel = NULL;
}

int agent_fsconf_tmp_open(const agent_fsconf_root *root, const char *rel,
			  const agent_fsconf_create *opt, agent_fsconf_tmp *tmp, sbx_err *err)
{
	memset(tmp, 0, sizeof(*tmp));
	tmp->fd = tmp->dirfd = -1;
	tmp->overwrite = opt->overwrite;
	int r = check_mode(root, rel, opt->mode, "write", err);
	if (r < 0)
		return r;
	size_t len = strnlen(rel, PATH_MAX);
	if (len > 0 && len < PATH_MAX && rel[len - 1] == '/')
		return agent_fsconf_fail(err, -EISDIR, root, rel, "write", "names a folder");
	r = agent_fsconf_open_parent(root, rel, tmp->leaf, sizeof(tmp->leaf), "write", err);
	if (r < 0)
		return r;
	tmp->dirfd = r;

	struct stat st;
	if (fstatat(tmp->dirfd, tmp->leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		/* Said now rather than after the whole upload. */
		if (S_ISDIR(st.st_mode))
			r = agent_fsconf_fail(err, -EISDIR, root, rel, "write", "is a folder");
		else if (!opt->overwrite)
			r = agent_fsconf_fail(err, -EEXIST, root, rel, "write", "exists");
	} else if (errno != ENOENT) {
		r = agent_fsconf_fail(err, -errno, root, rel, "write", NULL);
	}
	if (r >= 0 && fstat(tmp->dirfd, &st) < 0)
		r = agent_fsconf_fail(err, -errno, root, rel, "write", NULL);
	if (r < 0)
		goto fail;
	tmp->dir_dev = st.st_dev;
	tmp->dir_ino = st.st_ino;
	tmp->dir_len = len - strlen(tmp->leaf);
	tmp->rel = strndup(rel, len);
	if (!tmp->rel) {
		r = agent_fsconf_fail(err, -ENOMEM, root, rel, "write", NULL);
		goto fail;
	}

	for (int i = 0; i < TMP_TRIES; i++) {
		snprintf(tmp->name, sizeof(tmp->name), ".sbx-tmp-%016llx",
			 (unsigned long long)tmp_random());
		/* O_EXCL on one name in a pinned folder: no symlink is followed. */
		r = agent_fsconf_resolve(tmp->dirfd, tmp->name, O_WRONLY | O_CREAT | O_EXCL |
					 O_NOFOLLOW, 0600, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					 RESOLVE_NO_MAGICLINKS);
		if (r != -EEXIST)
			break;
	}
	if (r < 0) {
		tmp->name[0] = '\0';
		r = agent_fsconf_fail(err, r, root, rel, "write", "temporary file");
		goto fail;
	}
	tmp->fd = r;
	if ((opt->uid != (uid_t)-1 || opt->gid != (gid_t)-1) &&
	    fchown(tmp->fd, opt->uid, opt->gid) < 0) {
		r = agent_fsconf_fail(err, -errno, root, rel, "write", "chown");
		goto fail;
	}
	/* After chown, which clears setuid bits anyway; exact, whatever the umask. */
	if (fchmod(tmp->fd, opt->mode) < 0) {
		r = agent_fsconf_fail(err, -errno, root, rel, "write", "chmod");
		goto fail;
	}
	return 0;
fail:
	agent_fsconf_tmp_abort(tmp);
	return r;
}

int agent_fsconf_tmp_commit(const agent_fsconf_root *root, agent_fsconf_tmp *tmp, sbx_err *err)
{
	if (tmp->fd < 0 || !tmp->rel) {
		agent_fsconf_tmp_abort(tmp);
		return sbx_err_set(err, -EBADF, "write under %s: no temporary file", root->path);
	}
	int r;
	char dir[PATH_MAX];
	memcpy(dir, tmp->rel, tmp->dir_len);
	dir[tmp->dir_len] = '\0';
	SBX_AUTO_CLOSE int now = agent_fsconf_open(root, dir, O_PATH | O_DIRECTORY, 0, "write",
						   err);
	struct stat st;
	if (now < 0) {
		r = sbx_err_wrap(err, "folder of the upload");
	} else if (fstat(now, &st) < 0) {
		r = agent_fsconf_fail(err, -errno, root, tmp->rel, "write", NULL);
	} else if (st.st_dev != tmp->dir_dev || st.st_ino != tmp->dir_ino) {
		r = agent_fsconf_fail(err, -ESTALE, root, tmp->rel, "write",
				      "its folder was moved or replaced during the write");
	} else if (renameat2(tmp->dirfd, tmp->name, tmp->dirfd, tmp->leaf,
			     tmp->overwrite ? 0 : RENAME_NOREPLACE) < 0) {
		int e = -errno;
		const char *why = e == -EEXIST ? "exists" : e == -EISDIR ? "is a folder" : NULL;
		r = agent_fsconf_fail(err, e, root, tmp->rel, "write", why);
	} else {
		tmp->name[0] = '\0'; /* renamed: nothing left to remove */
		r = 0;
	}
	agent_fsconf_tmp_abort(tmp);
	return r;
}

/* The new folder name in dirfd gets its owner, then exactly mode (mkdirat
 * applies the umask). */
static int set_dir_mode(const agent_fsconf_root *root, const char *rel, int dirfd,
			const char *name, mode_t mode, const agent_fsconf_dirs *opt, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = agent_fsconf_open_child(dirfd, name, O_RDONLY | O_DIRECTORY, err);
	if (fd < 0)
		return sbx_err_wrap(err, "mkdir %s/%s", root->path, rel);
	if ((opt->uid != (uid_t)-1 || opt->gid != (gid_t)-1) && fchown(fd, opt->uid, opt->gid) < 0)
		return agent_fsconf_fail(err, -errno, root, rel, "mkdir", "chown");
	if (fchmod(fd, mode) < 0)
		return agent_fsconf_fail(err, -errno, root, rel, "mkdir", "chmod");
	return 0;
}

static int mkdir_one(const agent_fsconf_root *root, const char *rel, const agent_fsconf_dirs *opt,
		     sbx_err *err)
{
	char leaf[NAME_MAX + 1];
	SBX_AUTO_CLOSE int pfd = agent_fsconf_open_parent(root, rel, leaf, sizeof(leaf), "mkdir",
							  err);
	if (pfd < 0)
		return pfd;
	/* Created closed (0700) and opened up by set_dir_mode. */
	if (mkdirat(pfd, leaf, 0700) < 0)
		return agent_fsconf_fail(err, -errno, root, rel, "mkdir",
					 errno == EEXIST ? "exists" : NULL);
	return set_dir_mode(root, rel, pfd, leaf, opt->mode, opt, err);
}

/* mkdir -p: each prefix is resolved from the root again (so symlinks inside
 * the root work and `..` is the kernel's business), and a missing one is
 * made in the folder the previous prefix resolved to. */
static int mkdir_parents(const agent_fsconf_root *root, const char *rel,
			 const agent_fsconf_dirs *opt, sbx_err *err)
{
	SBX_AUTO_CLOSE int cur = agent_fsconf_open(root, "", O_PATH | O_DIRECTORY, 0, "mkdir", err);
	if (cur < 0)
		return cur;
	size_t len = strlen(rel);
	char prefix[PATH_MAX];
	size_t i = 0;
	while (i < len) {
		while (i < len && rel[i] == '/')
			i++;
		if (i == len)
			break;
		size_t s = i;
		while (i < len && rel[i] != '/')
			i++;
		memcpy(prefix, rel, i);
		prefix[i] = '\0';
		bool last = rel[i + strspn(rel + i, "/")] == '\0';
		int fd = agent_fsconf_resolve(root->fd, prefix, O_PATH | O_DIRECTORY, 0,
					      AGENT_FSCONF_RESOLVE_BENEATH);
		if (fd == -ENOENT) {
			char name[NAME_MAX + 1];
			if (i - s > NAME_MAX)
				return agent_fsconf_fail(err, -ENAMETOOLONG, root, prefix, "mkdir",
							 NULL);
			memcpy(name, rel + s, i - s);
			name[i - s] = '\0';
			if (mkdirat(cur, name, 0700) == 0) {
				/* Only the folder asked for gets its mode: the ones
				 * above stay open to the sandbox user. */
				int r = set_dir_mode(root, prefix, cur, name,
						     last ? opt->mode : AGENT_FSCONF_PARENT_MODE, opt, err);
				if (r < 0)
					return r;
			} else if (errno != EEXIST) {
				return agent_fsconf_fail(err, -errno, root, prefix, "mkdir", NULL);
			}
			fd = agent_fsconf_resolve(root->fd, prefix, O_PATH | O_DIRECTORY, 0,
						  AGENT_FSCONF_RESOLVE_BENEATH);
		}
		if (fd == -ENOTDIR && last)
			return agent_fsconf_fail(err, -EEXIST, root, rel, "mkdir",
						 "exists and is not a folder");
		if (fd < 0)
			return agent_fsconf_resolve_fail(err, fd, root, prefix, "mkdir");
		close(cur);
		cur = fd;
	}
	return 0;
}

int agent_fsconf_mkdir_as(const agent_fsconf_root *root, const char *rel,
			  const agent_fsconf_dirs *opt, sbx_err *err)
{
	int r = check_mode(root, rel, opt->mode, "mkdir", err);
	if (r < 0)
		return r;
	if (!opt->parents && rel[0] == '\0')
		return agent_fsconf_fail(err, -EEXIST, root, rel, "mkdir", "the root exists");
	if (!opt->parents)
		return mkdir_one(root, rel, opt, err);
	r = agent_fsconf_check_rel(rel, strnlen(rel, PATH_MAX), err);
	if (r < 0)
		return sbx_err_wrap(err, "mkdir under %s", root->path);
	return mkdir_parents(root, rel, opt, err);
}


int agent_fsconf_rename(const agent_fsconf_root *from_root, const char *from_rel,
			const agent_fsconf_root *to_root, const char *to_rel, bool overwrite,
			sbx_err *err)
{
	char from_leaf[NAME_MAX + 1], to_leaf[NAME_MAX + 1];
	SBX_AUTO_CLOSE int from = agent_fsconf_open_parent(from_root, from_rel, from_leaf,
							   sizeof(from_leaf), "move", err);
	if (from < 0)
		return from;
	SBX_AUTO_CLOSE int to = agent_fsconf_open_parent(to_root, to_rel, to_leaf,
							 sizeof(to_leaf), "move to", err);
	if (to < 0)
		return to;
	if (renameat2(from, from_leaf, to, to_leaf, overwrite ? 0 : RENAME_NOREPLACE) == 0)
		return 0;
	int e = -errno;
	if (e == -ENOTEMPTY)
		e = -EEXIST; /* the kernel's word for "a folder is in the way" */
	const char *why = e == -EEXIST ? "the target exists"
			  : e == -EXDEV ? "the target is on another file system"
					: NULL;
	const char *fs = from_rel[0] ? "/" : "", *ts = to_rel[0] ? "/" : "";
	if (why)
		return sbx_err_set(err, e, "move %s%s%s to %s%s%s: %s", from_root->path, fs,
				   from_rel, to_root->path, ts, to_rel, why);
	return sbx_err_sys(err, e, "move %s%s%s to %s%s%s", from_root->path, fs, from_rel,
			   to_root->path, ts, to_rel);
}

int agent_fsconf_chmod(const agent_fsconf_root *root, const char *rel, mode_t mode,
		       sbx_err *err)
{
	int r = check_mode(root, rel, mode, "chmod", err);
	if (r < 0)
		return r;
	struct stat st = { 0 };
	SBX_AUTO_CLOSE int fd = open_checked(root, rel, O_RDONLY, 0, &st, "chmod", err);
	if (fd < 0)
		return fd;
	if (S_ISREG(st.st_mode) && st.st_nlink > 1) {
		char msg[96];
		snprintf(msg, sizeof(msg), "%ju hard links; a shared inode is not changed in place",
			 (uintmax_t)st.st_nlink);
		return agent_fsconf_fail(err, -EMLINK, root, rel, "chmod", msg);
	}
	if (fchmod(fd, mode) < 0)
		return agent_fsconf_fail(err, -errno, root, rel, "chmod", NULL);
	return 0;
}
