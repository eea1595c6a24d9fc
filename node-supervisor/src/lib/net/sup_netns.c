/* sup_netns: see sup_netns.h. */
#include "sup_netns.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx/cleanup.h"

static int ns_path(const char *name, char *buf, size_t cap, sbx_err *err)
{
	if (!name[0] || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return sbx_err_set(err, -EINVAL, "network namespace name '%s'", name);
	int n = snprintf(buf, cap, SUP_NETNS_DIR "/%s", name);
	if (n < 0 || (size_t)n >= cap)
		return sbx_err_set(err, -ENAMETOOLONG, "network namespace name '%s'", name);
	return 0;
}

int sup_netns_enter(int fd, int *saved, sbx_err *err)
{
	*saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (*saved < 0)
		return sbx_err_sys(err, -errno, "open the thread's network namespace");
	if (setns(fd, CLONE_NEWNET) < 0) {
		int e = errno;
		close(*saved);
		*saved = -1;
		return sbx_err_sys(err, -e, "enter a network namespace");
	}
	return 0;
}

void sup_netns_leave(int *saved)
{
	if (*saved < 0)
		return;
	if (setns(*saved, CLONE_NEWNET) < 0) {
		/* every later socket of this thread would land in the wrong
		 * namespace: a sandbox's, or the router's */
		fprintf(stderr, "sandbox-supervisor: cannot return to the network namespace: %s\n",
			strerror(errno));
		abort();
	}
	close(*saved);
	*saved = -1;
}

int sup_netns_create(const char *name, int *fd, sbx_err *err)
{
	char path[PATH_MAX];
	int rc = ns_path(name, path, sizeof(path), err);
	if (rc < 0)
		return rc;
	if (mkdir(SUP_NETNS_DIR, 0755) < 0 && errno != EEXIST)
		return sbx_err_sys(err, -errno, "mkdir " SUP_NETNS_DIR);
	int f = open(path, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (f < 0)
		return sbx_err_sys(err, -errno, "network namespace %s", path);
	close(f);
	int saved = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	if (saved < 0) {
		rc = sbx_err_sys(err, -errno, "open the thread's network namespace");
		unlink(path);
		return rc;
	}
	if (unshare(CLONE_NEWNET) < 0) {
		rc = sbx_err_sys(err, -errno, "new network namespace");
		close(saved);
		unlink(path);
		return rc;
	}
	rc = 0;
	if (mount("/proc/thread-self/ns/net", path, "none", MS_BIND, NULL) < 0)
		rc = sbx_err_sys(err, -errno, "bind the network namespace at %s", path);
	sup_netns_leave(&saved);
	if (rc < 0) {
		unlink(path);
		return rc;
	}
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0) {
		rc = sbx_err_sys(err, -errno, "open %s", path);
		sup_netns_remove(name, err);
		return rc;
	}
	return 0;
}

int sup_netns_remove(const char *name, sbx_err *err)
{
	char path[PATH_MAX];
	int rc = ns_path(name, path, sizeof(path), err);
	if (rc < 0)
		return rc;
	if (umount2(path, MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
		return sbx_err_sys(err, -errno, "unbind %s", path);
	if (unlink(path) < 0 && errno != ENOENT)
		return sbx_err_sys(err, -errno, "remove %s", path);
	return 0;
}

int sup_netns_open(const char *spec, int *fd, sbx_err *err)
{
	char path[PATH_MAX];
	if (spec[0] == '/') {
		snprintf(path, sizeof(path), "%s", spec);
	} else {
		int rc = ns_path(spec, path, sizeof(path), err);
		if (rc < 0)
			return rc;
	}
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return sbx_err_sys(err, -errno, "network namespace %s", path);
	/* a plain file there is no namespace: setns would say EINVAL later */
	int saved;
	int rc = sup_netns_enter(*fd, &saved, err);
	if (rc < 0) {
		close(*fd);
		*fd = -1;
		return sbx_err_wrap(err, "%s", path);
	}
	sup_netns_leave(&saved);
	return 0;
}

int sup_netns_open_pid(int pid, int *fd, sbx_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", pid);
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return sbx_err_sys(err, -errno, "network namespace of pid %d", pid);
	return 0;
}

int sup_netns_sysctl(const char *path, const char *value, sbx_err *err)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "/proc/sys/net/%s", path);
	SBX_AUTO_CLOSE int fd = open(p, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "sysctl %s", p);
	size_t n = strlen(value);
	if (write(fd, value, n) != (ssize_t)n)
		return sbx_err_sys(err, -errno, "sysctl %s = %s", p, value);
	return 0;
}
