#include "sup_nsmount.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sbx/cleanup.h"

#define MAX_DEPTH 64
/* a tmpfs's room: its files' pages, and some for its folder */
#define SUP_NSMOUNT_FILES_SLACK (64u * 1024)
static size_t f_round(size_t len)
{
	return (len + 4095) & ~(size_t)4095;
}

/* What the child reports: the step that failed, its errno, and for a
 * folder of the destination, which one and whether it is a symlink. */
typedef struct nsm_result {
	int step; /* 0: done */
	int err;
	size_t comp;
	bool symlink;
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

/* In the child: raw system calls only (it shares the memory of a process
 * with threads: no lock one of them holds may be taken here). comps: the destination's
 * components, n of them. */
static nsm_result child_bind(int ns, int tree, char *const *comps, size_t n)
{
	nsm_result res = { 0 };
	if (setns(ns, CLONE_NEWNS) < 0)
		return (nsm_result){ .step = STEP_SETNS, .err = errno };
	/* setns made the namespace's root our root and cwd */
	int dir = (int)syscall(SYS_open, "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return (nsm_result){ .step = STEP_OPEN_ROOT, .err = errno };
	for (size_t i = 0; i < n && res.step == 0; i++) {
		if (mkdirat(dir, comps[i], 0755) < 0 && errno != EEXIST)
			res = (nsm_result){ .step = STEP_MKDIR, .err = errno, .comp = i };
		int next = res.step ? -1 : openat2_dir(dir, comps[i]);
		if (res.step == 0 && next < 0) {
			res = (nsm_result){ .step = STEP_OPEN_DIR, .err = errno, .comp = i };
			struct stat st;
			res.symlink = fstatat(dir, comps[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode);
		}
		close(dir);
		dir = next;
	}
	if (res.step == 0 &&
	    syscall(SYS_move_mount, tree, "", dir, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
		res = (nsm_result){ .step = STEP_MOVE, .err = errno };
	if (dir >= 0)
		close(dir);
	return res;
}

/* The child's whole world: it shares our memory (CLONE_VM) and runs while
 * we wait (CLONE_VFORK), so it reads its arguments and writes its result
 * here. */
typedef struct nsm_child {
	int ns, tree;
	char *const *comps;
	size_t n;
	nsm_result res;
} nsm_child;

static int child_main(void *arg)
{
	nsm_child *c = arg;
	c->res = child_bind(c->ns, c->tree, c->comps, c->n);
	return 0;
}

#define CHILD_STACK (64 * 1024)

/* A folder of the destination is a file or a symlink in the container's
 * files (its image's or a restored layer's, e.g. /workspace/data -> /etc):
 * the path asked for is wrong, not the bind (-EINVAL). comps were split
 * in place from dest's copy: rejoined up to the one refused. */
static int not_a_folder(const char *dest, char *const *comps, const nsm_result *res, sbx_err *err)
{
	char at[PATH_MAX];
	size_t len = 0;
	for (size_t i = 0; i <= res->comp && len < sizeof(at); i++)
		len += (size_t)snprintf(at + len, sizeof(at) - len, "/%s", comps[i]);
	return sbx_err_set(err, -EINVAL, "mount path %s: %s is %s in the sandbox, not a folder", dest, at,
			   res->symlink ? "a symbolic link" : "a file");
}

/* The detached mount tree moved onto dest (made as needed) inside the
 * mount namespace of pid. */
static int move_into(pid_t pid, int tree, const char *dest, sbx_err *err)
{
	/* the destination's components, split before the clone */
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
	/* CLONE_VM | CLONE_VFORK, as posix_spawn: no copy of our page tables
	 * (a fork of the supervisor costs milliseconds), no CLONE_FS (setns
	 * of a mount namespace refuses a shared fs_struct) */
	SBX_AUTO_FREE char *stack = malloc(CHILD_STACK);
	if (!stack)
		return sbx_err_set(err, -ENOMEM, "bind %s: out of memory", dest);
	nsm_child c = { .ns = ns, .tree = tree, .comps = comps, .n = n, .res = { .step = STEP_MOVE, .err = EIO } };
	pid_t child = clone(child_main, stack + CHILD_STACK, CLONE_VM | CLONE_VFORK | SIGCHLD, &c);
	if (child < 0)
		return sbx_err_sys(err, -errno, "bind %s: clone", dest);
	int status;
	while (waitpid(child, &status, 0) < 0 && errno == EINTR)
		;
	if (c.res.step == STEP_OPEN_DIR && (c.res.err == ENOTDIR || c.res.err == ELOOP))
		return not_a_folder(dest, comps, &c.res, err);
	if (c.res.step != 0)
		return sbx_err_sys(err, -c.res.err, "bind %s into pid %d: %s", dest, (int)pid,
				   step_names[c.res.step]);
	return 0;
}

int sup_nsmount_bind(pid_t pid, const char *src, const char *dest, bool read_only, sbx_err *err)
{
	SBX_AUTO_CLOSE int tree = (int)syscall(SYS_open_tree, AT_FDCWD, src,
					       OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (tree < 0)
		return sbx_err_sys(err, -errno, "bind %s: clone the mount of %s", dest, src);
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
					      (read_only ? MOUNT_ATTR_RDONLY : 0) };
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return sbx_err_sys(err, -errno, "bind %s: set the mount's flags", dest);
	return move_into(pid, tree, dest, err);
}

/* A new tmpfs, detached: never on a path of the host. */
static int tmpfs_detached(size_t size, uid_t uid, gid_t gid, sbx_err *err)
{
	SBX_AUTO_CLOSE int fs = (int)syscall(SYS_fsopen, "tmpfs", FSOPEN_CLOEXEC);
	if (fs < 0)
		return sbx_err_sys(err, -errno, "files: open a tmpfs");
	char sz[32], u[16], g[16];
	snprintf(sz, sizeof(sz), "%zu", size);
	snprintf(u, sizeof(u), "%u", (unsigned)uid);
	snprintf(g, sizeof(g), "%u", (unsigned)gid);
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "size", sz, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "mode", "0500", 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "uid", u, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "gid", g, 0) < 0 ||
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
		return sbx_err_sys(err, -errno, "files: configure a tmpfs");
	int mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
			       MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	if (mnt < 0)
		return sbx_err_sys(err, -errno, "files: mount a tmpfs");
	return mnt;
}

static int write_file(int dir, const sup_nsmount_file *f, uid_t uid, gid_t gid, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = openat(dir, f->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "files: make %s", f->name);
	for (size_t at = 0; at < f->len;) {
		ssize_t w = write(fd, f->data + at, f->len - at);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return sbx_err_sys(err, w < 0 ? -errno : -EIO, "files: write %s", f->name);
		at += (size_t)w;
	}
	if (fchown(fd, uid, gid) < 0)
		return sbx_err_sys(err, -errno, "files: own %s", f->name);
	return 0;
}

int sup_nsmount_files(pid_t pid, const char *dest, const sup_nsmount_file *files, size_t n, uid_t uid,
		      gid_t gid, sbx_err *err)
{
	size_t size = SUP_NSMOUNT_FILES_SLACK;
	for (size_t i = 0; i < n; i++)
		size += f_round(files[i].len);
	SBX_AUTO_CLOSE int mnt = tmpfs_detached(size, uid, gid, err);
	if (mnt < 0)
		return sbx_err_wrap(err, "bind %s", dest);
	for (size_t i = 0; i < n; i++)
		if (write_file(mnt, &files[i], uid, gid, err) < 0)
			return sbx_err_wrap(err, "bind %s", dest);
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_RDONLY };
	if (syscall(SYS_mount_setattr, mnt, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
		return sbx_err_sys(err, -errno, "bind %s: make the files read-only", dest);
	return move_into(pid, mnt, dest, err);
}
