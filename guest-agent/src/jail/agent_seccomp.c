/* agent_seccomp_get: the profile file (or the built-in one), compiled once
 * per version of the file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "agent_seccomp.h"

/* Generated from seccomp/default.json at build time (cmake/embed.cmake). */
extern const char agent_seccomp_builtin_json[];
extern const size_t agent_seccomp_builtin_len;

static struct {
	agent_seccomp_filter *builtin;
	agent_seccomp_filter *file; /* compiled from path as it was at st */
	char path[PATH_MAX];
	struct stat st;
} cache;

const char *agent_seccomp_builtin_profile(size_t *len)
{
	if (len)
		*len = agent_seccomp_builtin_len;
	return agent_seccomp_builtin_json;
}

void agent_seccomp_cache_clear(void)
{
	agent_seccomp_unref(cache.builtin);
	agent_seccomp_unref(cache.file);
	cache.builtin = cache.file = NULL;
	cache.path[0] = '\0';
}

static bool same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

static int get_builtin(agent_seccomp_filter **out, sbx_err *err)
{
	if (!cache.builtin) {
		int rc = agent_seccomp_compile(agent_seccomp_builtin_json, agent_seccomp_builtin_len,
					       AGENT_SECCOMP_ORIGIN_BUILTIN, &cache.builtin, err);
		if (rc < 0)
			return rc;
	}
	*out = agent_seccomp_ref(cache.builtin);
	return 0;
}

/* The whole file, at most AGENT_SECCOMP_MAX_PROFILE_BYTES. It may grow while
 * being read: the bound is on what is read, not on what fstat said. */
static int read_profile(int fd, const char *path, char **buf, size_t *len, sbx_err *err)
{
	size_t cap = AGENT_SECCOMP_MAX_PROFILE_BYTES + 1, n = 0;
	SBX_AUTO_FREE char *b = malloc(cap);

	if (!b)
		return sbx_err_set(err, -ENOMEM, "seccomp profile %s: out of memory", path);
	for (;;) {
		ssize_t r = read(fd, b + n, cap - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return sbx_err_sys(err, -errno, "seccomp profile %s: read", path);
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == cap)
			return sbx_err_set(err, -EFBIG, "seccomp profile %s: larger than %u bytes", path,
					   AGENT_SECCOMP_MAX_PROFILE_BYTES);
	}
	*buf = sbx_steal_ptr(&b);
	*len = n;
	return 0;
}

int agent_seccomp_get(const char *path, agent_seccomp_filter **out, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = -1;
	SBX_AUTO_FREE char *json = NULL;
	agent_seccomp_filter *f = NULL;
	struct stat st;
	size_t len = 0;
	int rc;

	*out = NULL;
	if (!path)
		path = AGENT_SECCOMP_DEFAULT_PATH;
	if (strlen(path) >= sizeof(cache.path))
		return sbx_err_set(err, -ENAMETOOLONG, "seccomp profile path too long");
	/* O_NONBLOCK: a FIFO put in place of the profile must not hang the
	 * agent; it is refused below as not a regular file. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return get_builtin(out, err);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "seccomp profile %s", path);
	if (fstat(fd, &st) < 0)
		return sbx_err_sys(err, -errno, "seccomp profile %s", path);
	if (!S_ISREG(st.st_mode))
		return sbx_err_set(err, -EINVAL, "seccomp profile %s: not a regular file", path);
	if (cache.file && strcmp(cache.path, path) == 0 && same_file(&st, &cache.st)) {
		*out = agent_seccomp_ref(cache.file);
		return 0;
	}
	rc = read_profile(fd, path, &json, &len, err);
	if (rc < 0)
		return rc;
	rc = agent_seccomp_compile(json, len, path, &f, err);
	if (rc < 0)
		return rc;
	agent_seccomp_unref(cache.file);
	cache.file = f;
	cache.st = st;
	snprintf(cache.path, sizeof(cache.path), "%s", path);
	*out = agent_seccomp_ref(f);
	return 0;
}
