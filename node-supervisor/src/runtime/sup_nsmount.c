#include "sup_nsmount.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx/cleanup.h"

#define MAX_DEPTH 64

/* What the child reports: the step that failed and its errno. */
typedef struct nsm_result {
	int step; /* 0: done */
	int err;
} nsm_result;

enum { STEP_SETNS = 1, STEP_OPEN_ROOT, STEP_MKDIR, STEP_OPEN_DIR, STEP_MOVE };
static const char *const step_names[] = {
	"", "join the mount namespace", "open its root", "make the folder", "open the folder",
	"move the mount"
};

static int openat2_dir(int dirfd, const char *name)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW,
				.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					   RESOLVE_NO_MAGICLINKS };
	return (int)syscall(SYS_openat2, dirfd, name, &how, sizeof(how));
}

/* In the child: raw system calls only (the parent has threads; no lock a
 * thread held at the fork may be taken here). comps: the destination's
 * components, n of them. */
static nsm_result child_bind(int ns, int tree, char *const *comps, size_t n)
{
	nsm_result res = { 0, 0 };
	if (setns(ns, CLONE_NEWNS) < 0)
		return (nsm_result){ STEP_SETNS, errno };
	/* setns made the namespace's root our root and cwd */
	int dir = (int)syscall(SYS_open, "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return (nsm_result){ STEP_OPEN_ROOT, errno };
	for (size_t i = 0; i < n && res.step == 0; i++) {
		if (mkdirat(dir, comps[i], 0755) < 0 && errno != EEXIST)
			res = (nsm_result){ STEP_MKDIR, errno };
		int next = res.step ? -1 : openat2_dir(dir, comps[i]);
		if (res.step == 0 && next < 0)
			res = (nsm_result){ STEP_OPEN_DIR, errno };
		close(dir);
		dir = next;
	}
	if (res.step == 0 &&
	    syscall(SYS_move_mount, tree, "", dir, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		res = (nsm_result){ STEP_MOVE, errno };
	if (dir >= 0)
		close(dir);
	return res;
}

int sup_nsmount_bind(pid_t pid, const char *src, const char *dest, bool read_only, sbx_err *err)
{
	/* the destination's components, split before the fork */
	char path[PATH_MAX];
	char *comps[MAX_DEPTH];
	size_t n = 0;
	if (dest[0] != '/' || snprintf(path, sizeof(path), "%s", dest) >= (int)sizeof(path))
		return sbx_err_set(err, -EINVAL, "bind %s: want an absolute path", dest);
	for (char *s = path + 1, *save = NULL, *c; (c = strtok_r(s, "/", &save)); s = NULL) {
		if (n == MAX_DEPTH || strcmp(c, ".") == 0 || strcmp(c, "..") == 0)
			return sbx_err_set(err, -EINVAL, "bind %s: too deep or not normalised", dest);
		comps[n++] = c;
	}
	char nspath[64];
	snprintf(nspath, sizeof(nspath), "/proc/%d/ns/mnt", (int)pid);
	SBX_AUTO_CLOSE int ns = open(nspath, O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return sbx_err_sys(err, -errno, "bind %s: open %s", dest, nspath);
	SBX_AUTO_CLOSE int tree = (int)syscall(SYS_open_tree, AT_FDCWD, src,
					       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return sbx_err_sys(err, -errno, "bind %s: clone the mount of %s", dest, src);
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
					      (read_only ? MOUNT_ATTR_RDONLY : 0) };
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return sbx_err_sys(err, -errno, "bind %s: set the mount's flags", dest);
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return sbx_err_sys(err, -errno, "bind %s: pipe", dest);
	SBX_AUTO_CLOSE int rd = p[0];
	SBX_AUTO_CLOSE int wr = p[1];
	pid_t child = fork();
	if (child < 0)
		return sbx_err_sys(err, -errno, "bind %s: fork", dest);
	if (child == 0) {
		nsm_result res = child_bind(ns, tree, comps, n);
		_exit(write(wr, &res, sizeof(res)) == (ssize_t)sizeof(res) ? 0 : 1);
	}
	close(wr);
	wr = -1;
	nsm_result res = { STEP_MOVE, EIO };
	ssize_t got;
	do
		got = read(rd, &res, sizeof(res));
	while (got < 0 && errno == EINTR);
	int status;
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (got != (ssize_t)sizeof(res))
		return sbx_err_set(err, -EIO, "bind %s: the helper died without a word", dest);
	if (res.step != 0)
		return sbx_err_sys(err, -res.err, "bind %s into pid %d: %s", dest, (int)pid,
				   step_names[res.step]);
	return 0;
}
