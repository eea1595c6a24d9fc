/* agent_fsconf: see agent_fsconf.h. */
#include "agent_fsconf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <unistd.h>

#include "agent_fsconf_walk.h"

#ifndef SYS_openat2
#define SYS_openat2 437 /* the same number on every architecture */
#endif

/* The kernel answers -EAGAIN when a rename or mount raced a ".." under
 * RESOLVE_BENEATH; a busy tree gets a few more tries, then the error. */
#define EAGAIN_TRIES 32

static agent_fsconf_resolver resolver = AGENT_FSCONF_OPENAT2;

void agent_fsconf_use(agent_fsconf_resolver r)
{
	resolver = r;
}

agent_fsconf_resolver agent_fsconf_resolver_in_use(void)
{
	return resolver;
}

const char *agent_fsconf_resolver_name(agent_fsconf_resolver r)
{
	switch (r) {
	case AGENT_FSCONF_OPENAT2:
		return "openat2";
	case AGENT_FSCONF_WALK:
		return "walk";
	default:
		return "none";
	}
}

static int sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode,
		       uint64_t resolve)
{
	struct open_how how = { .flags = flags | O_CLOEXEC, .mode = mode, .resolve = resolve };
	long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	return fd >= 0 ? (int)fd : -errno;
}

int agent_fsconf_resolve(int dirfd, const char *path, uint64_t flags, uint64_t mode,
			 uint64_t resolve)
{
	for (int i = 0;; i++) {
		int fd;
		if (resolver == AGENT_FSCONF_OPENAT2)
			fd = sys_openat2(dirfd, path, flags, mode, resolve);
		else if (resolver == AGENT_FSCONF_WALK)
			fd = agent_fsconf_walk(dirfd, path, flags, mode, resolve);
		else
			fd = -ENOSYS;
		if (fd >= 0)
			return fd;
		if (fd == -EINTR || (fd == -EAGAIN && i < EAGAIN_TRIES))
			continue;
		return fd;
	}
}

int agent_fsconf_fail(sbx_err *err, int code, const agent_fsconf_root *root, const char *rel,
		      const char *what, const char *msg)
{
	const char *sep = rel && rel[0] ? "/" : "";
	rel = rel ? rel : "";
	if (msg)
		return sbx_err_set(err, code, "%s %s%s%s: %s", what, root->path, sep, rel, msg);
	return sbx_err_sys(err, code, "%s %s%s%s", what, root->path, sep, rel);
}

static const char no_openat2[] =
	"openat2 is not available (Linux 5.6+ needed, or a seccomp filter denies it) and the "
	"component walk is not in use: file operations are refused";

int agent_fsconf_resolve_fail(sbx_err *err, int code, const agent_fsconf_root *root,
			      const char *rel, const char *what)
{
	switch (code) {
	case -EXDEV:
		return agent_fsconf_fail(err, -EACCES, root, rel, what, "leads outside its root");
	case -ELOOP:
		return agent_fsconf_fail(err, code, root, rel, what,
					 "a symlink loop, or a /proc magic link");
	case -ENOSYS:
		return agent_fsconf_fail(err, code, root, rel, what, no_openat2);
	case -EAGAIN:
		return agent_fsconf_fail(err, code, root, rel, what,
					 "the tree kept changing during the lookup");
	default:
		return agent_fsconf_fail(err, code, root, rel, what, NULL);
	}
}

/* 0 when openat2 with RESOLVE_BENEATH works here, else -errno. */
static int openat2_works(void)
{
	int top = sys_openat2(AT_FDCWD, "/", O_PATH | O_DIRECTORY, 0,
			      RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	if (top < 0)
		return top;
	int fd = sys_openat2(top, ".", O_PATH | O_DIRECTORY, 0, AGENT_FSCONF_RESOLVE_BENEATH);
	close(top);
	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int agent_fsconf_probe(char *note, size_t cap, sbx_err *err)
{
	int r = openat2_works();
	if (r == 0) {
		resolver = AGENT_FSCONF_OPENAT2;
		snprintf(note, cap, "openat2 (RESOLVE_BENEATH)");
		return resolver;
	}
	char why[160];
	bool by_mount_id = false;
	int w = agent_fsconf_walk_probe(why, sizeof(why), &by_mount_id);
	if (w < 0) {
		resolver = AGENT_FSCONF_NONE;
		return sbx_err_set(err, -ENOSYS, "openat2: %s; the component walk cannot be used "
				   "either (%s): file operations are refused", strerror(-r), why);
	}
	resolver = AGENT_FSCONF_WALK;
	snprintf(note, cap, "component walk (openat2: %s); mounts told apart by %s", strerror(-r),
		 by_mount_id ? "mount id" : "device number");
	return resolver;
}

int agent_fsconf_check_rel(const char *rel, size_t len, sbx_err *err)
{
	if (memchr(rel, '\0', len))
		return sbx_err_set(err, -EINVAL, "path of %zu bytes contains a NUL byte", len);
	if (len >= PATH_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "path of %zu bytes: the limit is %d", len,
				   PATH_MAX - 1);
	if (len > 0 && rel[0] == '/')
		return sbx_err_set(err, -EINVAL,
				   "path %.*s: absolute, want it relative to its root", (int)len, rel);
	return 0;
}

/* The same checks on a C string, without reading past PATH_MAX bytes. */
static int check(const agent_fsconf_root *root, const char *rel, const char *what, sbx_err *err)
{
	if (root->fd < 0)
		return sbx_err_set(err, -EBADF, "%s %s: root not open", what, root->path);
	int r = agent_fsconf_check_rel(rel, strnlen(rel, PATH_MAX), err);
	return r < 0 ? sbx_err_wrap(err, "%s under %s", what, root->path) : 0;
}

static bool normalised_abs(const char *p, size_t len)
{
	if (len == 0 || p[0] != '/')
		return false;
	if (len == 1)
		return true;
	if (p[len - 1] == '/')
		return false;
	for (size_t i = 0; i < len; i++) {
		if (p[i] != '/')
			continue;
		size_t n = 1;
		while (i + n < len && p[i + n] != '/')
			n++;
		n--; /* bytes of the component after this slash */
		if (n == 0 || (n == 1 && p[i + 1] == '.') ||
		    (n == 2 && p[i + 1] == '.' && p[i + 2] == '.'))
			return false;
	}
	return true;
}

int agent_fsconf_root_open(agent_fsconf_root *root, const char *path, sbx_err *err)
{
	root->fd = -1;
	root->path[0] = '\0';
	size_t len = strnlen(path, PATH_MAX);
	if (len >= PATH_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "root of %zu bytes or more: the limit is %d",
				   len, PATH_MAX - 1);
	memcpy(root->path, path, len + 1);
	if (!normalised_abs(path, len))
		return sbx_err_set(err, -EINVAL, "root %s: want an absolute, normalised path",
				   path);
	int fd = agent_fsconf_resolve(AT_FDCWD, path, O_PATH | O_DIRECTORY, 0,
				      RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
	if (fd == -ELOOP)
		return sbx_err_set(err, fd, "root %s: a symlink on its path; roots are opened "
				   "without following any", path);
	if (fd == -ENOSYS)
		return sbx_err_set(err, fd, "root %s: %s", path, no_openat2);
	if (fd < 0)
		return sbx_err_sys(err, fd, "root %s", path);
	root->fd = fd;
	return 0;
}

void agent_fsconf_root_close(agent_fsconf_root *root)
{
	if (root->fd >= 0)
		close(root->fd);
	root->fd = -1;
}

int agent_fsconf_open(const agent_fsconf_root *root, const char *rel, uint64_t flags,
		      uint64_t mode, const char *what, sbx_err *err)
{
	int r = check(root, rel, what, err);
	if (r < 0)
		return r;
	int fd = agent_fsconf_resolve(root->fd, rel[0] ? rel : ".", flags, mode,
				      AGENT_FSCONF_RESOLVE_BENEATH);
	return fd >= 0 ? fd : agent_fsconf_resolve_fail(err, fd, root, rel, what);
}

int agent_fsconf_open_parent(const agent_fsconf_root *root, const char *rel, char *leaf,
			     size_t leaf_cap, const char *what, sbx_err *err)
{
	int r = check(root, rel, what, err);
	if (r < 0)
		return r;
	size_t end = strlen(rel);
	while (end > 0 && rel[end - 1] == '/')
		end--;
	if (end == 0)
		return agent_fsconf_fail(err, -EBUSY, root, rel, what, "is the root itself");
	size_t start = end;
	while (start > 0 && rel[start - 1] != '/')
		start--;
	size_t n = end - start;
	if ((n == 1 && rel[start] == '.') || (n == 2 && rel[start] == '.' && rel[start + 1] == '.'))
		return agent_fsconf_fail(err, -EINVAL, root, rel, what,
					 "ends in . or ..; name the entry itself");
	if (n > NAME_MAX || n >= leaf_cap)
		return agent_fsconf_fail(err, -ENAMETOOLONG, root, rel, what, NULL);
	memcpy(leaf, rel + start, n);
	leaf[n] = '\0';

	char dir[PATH_MAX];
	memcpy(dir, rel, start);
	dir[start] = '\0';
	int fd = agent_fsconf_resolve(root->fd, start ? dir : ".", O_PATH | O_DIRECTORY, 0,
				      AGENT_FSCONF_RESOLVE_BENEATH);
	return fd >= 0 ? fd : agent_fsconf_resolve_fail(err, fd, root, rel, what);
}

int agent_fsconf_open_child(int dirfd, const char *name, uint64_t flags, sbx_err *err)
{
	if (!name[0] || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return sbx_err_set(err, -EINVAL, "open %s: not a single entry name", name);
	int fd = agent_fsconf_resolve(dirfd, name, flags | O_NOFOLLOW, 0,
				      RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
	if (fd == -EXDEV)
		return sbx_err_set(err, -EBUSY, "open %s: a mount point, not crossed", name);
	return fd >= 0 ? fd : sbx_err_sys(err, fd, "open %s", name);
}
