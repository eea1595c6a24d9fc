/* The host's look at a reset runc sandbox (sup_runc_clean.h). */
#include "sup_runc_clean.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_disk.h"
#include "sup_log.h"

/* Folders deeper than this in a writable layer make it not reusable. */
#define WALK_MAX_DEPTH 128
/* The agent's own sockets (its listeners and connections). */
#define AGENT_MAX_SOCKETS 4096

typedef struct entry {
	char *rel;                 /* below the upper folder, no leading '/' */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	off_t size;
	struct timespec mtime;
	dev_t rdev;
	uint64_t xhash;            /* extended attributes (but the overlay's bookkeeping) */
} entry;

/* A folder reset empties, or one above it, through the sandbox's root. */
typedef struct pmeta {
	char *rel;
	bool absent;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	uint64_t xhash;
} pmeta;

struct sup_runc_baseline {
	char **paths;              /* reset's folders, relative */
	size_t npaths;
	entry *e;                  /* the upper folder's entries, sorted by rel */
	size_t n, cap;
	pmeta *pm;                 /* the folders and every folder above them */
	size_t npm;
};

static int doubt(sbx_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int doubt(sbx_err *err, const char *fmt, ...)
{
	char msg[SBX_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return sbx_err_set(err, -EBUSY, "not clean after reset: %s", msg);
}

/* FNV-1a over bytes. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 1099511628211ull;
	return h;
}

/* The overlay's own marks that come and go with copy-ups, which say
 * nothing a tenant chose. */
static bool xattr_ignored(const char *name)
{
	static const char *const ign[] = { "trusted.overlay.impure", "trusted.overlay.origin",
					   "trusted.overlay.nlink", "trusted.overlay.uuid" };
	for (size_t i = 0; i < sizeof(ign) / sizeof(ign[0]); i++)
		if (strcmp(name, ign[i]) == 0)
			return true;
	return false;
}

/* Hash of the extended attributes of path (not followed at its end). */
static int xattr_hash(const char *path, uint64_t *out, sbx_err *err)
{
	char names[4096], val[4096];
	ssize_t n = llistxattr(path, names, sizeof(names));
	uint64_t h = 14695981039346656037ull;
	if (n < 0) {
		if (errno == ENOTSUP) {
			*out = h;
			return 0;
		}
		return sbx_err_sys(err, -errno, "list the extended attributes of %s", path);
	}
	/* names come in the file system's order: hash each pair on its own
	 * and add them up, so the order does not count */
	uint64_t sum = 0;
	for (ssize_t off = 0; off < n; off += (ssize_t)strlen(names + off) + 1) {
		const char *name = names + off;
		if (xattr_ignored(name))
			continue;
		ssize_t v = lgetxattr(path, name, val, sizeof(val));
		if (v < 0)
			return sbx_err_sys(err, -errno, "read extended attribute %s of %s", name, path);
		uint64_t one = fnv(14695981039346656037ull, name, strlen(name) + 1);
		sum += fnv(one, val, (size_t)v);
	}
	*out = h ^ sum;
	return 0;
}

/* ---- the writable layer ---- */

typedef struct walk {
	sup_runc_baseline *b;
	char rel[PATH_MAX];
	sbx_err *err;
} walk;

static int add_entry(walk *w, int dirfd, const char *name, const struct stat *st)
{
	sup_runc_baseline *b = w->b;
	if (b->n == SUP_RUNC_BASELINE_MAX)
		return sbx_err_set(w->err, -ENOSPC, "the writable layer holds more than %u entries",
				   SUP_RUNC_BASELINE_MAX);
	if (b->n == b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 64;
		entry *e = realloc(b->e, cap * sizeof(*e));
		if (!e)
			return sbx_err_set(w->err, -ENOMEM, "out of memory");
		b->e = e;
		b->cap = cap;
	}
	entry *e = &b->e[b->n];
	memset(e, 0, sizeof(*e));
	char path[64 + NAME_MAX];
	snprintf(path, sizeof(path), "/proc/self/fd/%d/%s", dirfd, name);
	int r = xattr_hash(path, &e->xhash, w->err);
	if (r < 0)
		return r;
	size_t len = strlen(w->rel);
	if (asprintf(&e->rel, "%s%s%s", w->rel, len ? "/" : "", name) < 0)
		return sbx_err_set(w->err, -ENOMEM, "out of memory");
	e->mode = st->st_mode;
	e->uid = st->st_uid;
	e->gid = st->st_gid;
	e->size = S_ISDIR(st->st_mode) ? 0 : st->st_size;
	if (S_ISDIR(st->st_mode))
		memset(&e->mtime, 0, sizeof(e->mtime));
	else
		e->mtime = st->st_mtim;
	e->rdev = st->st_rdev;
	b->n++;
	return 0;
}

static int walk_dir(walk *w, int fd, int depth)
{
	if (depth > WALK_MAX_DEPTH) {
		close(fd);
		return sbx_err_set(w->err, -ENOSPC, "the writable layer is deeper than %d folders",
				   WALK_MAX_DEPTH);
	}
	DIR *d = fdopendir(fd);
	if (!d) {
		int e = -errno;
		close(fd);
		return sbx_err_sys(w->err, e, "open /%s in the writable layer", w->rel);
	}
	struct dirent *de;
	int r = 0;
	while (r == 0 && (errno = 0, de = readdir(d))) {
		const char *n = de->d_name;
		if (n[0] == '.' && (n[1] == '\0' || (n[1] == '.' && n[2] == '\0')))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = sbx_err_sys(w->err, -errno, "stat /%s/%s in the writable layer", w->rel, n);
			break;
		}
		r = add_entry(w, dirfd(d), n, &st);
		if (r < 0 || !S_ISDIR(st.st_mode))
			continue;
		int child = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (child < 0) {
			r = sbx_err_sys(w->err, -errno, "open /%s/%s in the writable layer", w->rel, n);
			break;
		}
		size_t len = strlen(w->rel);
		if (len + 2 + strlen(n) >= sizeof(w->rel)) {
			close(child);
			r = sbx_err_set(w->err, -ENAMETOOLONG, "a path of the writable layer is too long");
			break;
		}
		snprintf(w->rel + len, sizeof(w->rel) - len, "%s%s", len ? "/" : "", n);
		r = walk_dir(w, child, depth + 1);
		w->rel[len] = '\0';
	}
	if (r == 0 && errno)
		r = sbx_err_sys(w->err, -errno, "read /%s in the writable layer", w->rel);
	closedir(d);
	return r;
}

static int by_rel(const void *a, const void *b)
{
	return strcmp(((const entry *)a)->rel, ((const entry *)b)->rel);
}

static int read_layer(const sup_runc_box *box, sup_runc_baseline *b, sbx_err *err)
{
	char upper[PATH_MAX];
	if (snprintf(upper, sizeof(upper), "%s/%s", box->dir, SUP_DISK_UPPER) >= (int)sizeof(upper))
		return sbx_err_set(err, -ENAMETOOLONG, "sandbox folder too long");
	int fd = open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "open %s", upper);
	walk w = { .b = b, .err = err };
	int r = walk_dir(&w, fd, 0);
	if (r == 0 && b->n > 1)
		qsort(b->e, b->n, sizeof(*b->e), by_rel);
	return r;
}

/* ---- the reset folders, seen through the sandbox's root ---- */

static int open_root(const sup_runc_box *box, sbx_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/root", (int)box->init_pid);
	int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	return fd < 0 ? sbx_err_sys(err, -errno, "open %s", path) : fd;
}

/* rel beneath the sandbox's root, no symlink followed anywhere. */
static int open_in(int root, const char *rel, uint64_t flags)
{
	struct open_how how = { .flags = flags | O_NOFOLLOW | O_CLOEXEC,
				.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	long fd = syscall(SYS_openat2, root, rel, &how, sizeof(how));
	return fd < 0 ? -errno : (int)fd;
}

static int path_meta(int root, const char *rel, pmeta *m, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = open_in(root, rel, O_PATH);
	if (fd == -ENOENT) {
		m->absent = true;
		return 0;
	}
	if (fd < 0)
		return sbx_err_sys(err, fd, "open /%s in the sandbox", rel);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return sbx_err_sys(err, -errno, "stat /%s in the sandbox", rel);
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	m->absent = false;
	m->mode = st.st_mode;
	m->uid = st.st_uid;
	m->gid = st.st_gid;
	return xattr_hash(path, &m->xhash, err);
}

static bool pm_has(const sup_runc_baseline *b, const char *rel, size_t len)
{
	for (size_t i = 0; i < b->npm; i++)
		if (strlen(b->pm[i].rel) == len && strncmp(b->pm[i].rel, rel, len) == 0)
			return true;
	return false;
}

static int pm_add(sup_runc_baseline *b, size_t *cap, const char *rel, size_t len, sbx_err *err)
{
	if (b->npm == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		pmeta *pm = realloc(b->pm, ncap * sizeof(*pm));
		if (!pm)
			return sbx_err_set(err, -ENOMEM, "out of memory");
		b->pm = pm;
		*cap = ncap;
	}
	memset(&b->pm[b->npm], 0, sizeof(b->pm[b->npm]));
	if (!(b->pm[b->npm].rel = strndup(rel, len)))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	b->npm++;
	return 0;
}

/* The root, every reset folder and every folder above one, once each. */
static int collect_pm(sup_runc_baseline *b, sbx_err *err)
{
	size_t cap = 0;
	int r = pm_add(b, &cap, "", 0, err);
	for (size_t i = 0; r == 0 && i < b->npaths; i++) {
		const char *p = b->paths[i];
		size_t n = strlen(p);
		for (size_t len = 1; r == 0 && len <= n; len++)
			if ((p[len] == '/' || p[len] == '\0') && !pm_has(b, p, len))
				r = pm_add(b, &cap, p, len, err);
	}
	return r;
}

void sup_runc_baseline_free(sup_runc_baseline *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->npaths; i++)
		free(b->paths[i]);
	free(b->paths);
	for (size_t i = 0; i < b->n; i++)
		free(b->e[i].rel);
	free(b->e);
	for (size_t i = 0; i < b->npm; i++)
		free(b->pm[i].rel);
	free(b->pm);
	free(b);
}

int sup_runc_baseline_take(const sup_runc_cfg *cfg, const sup_runc_box *box, const char *const *paths,
			   size_t npaths, sup_runc_baseline **out, sbx_err *err)
{
	(void)cfg;
	sup_runc_baseline *b = calloc(1, sizeof(*b));
	if (!b || !(b->paths = calloc(npaths ? npaths : 1, sizeof(*b->paths)))) {
		free(b);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	int r = 0;
	for (size_t i = 0; i < npaths; i++) {
		if (paths[i][0] != '/') {
			r = -EINVAL;
			sbx_err_set(err, r, "reset folder %s: not absolute", paths[i]);
			break;
		}
		if (!(b->paths[i] = strdup(paths[i] + 1))) {
			r = -ENOMEM;
			sbx_err_set(err, r, "out of memory");
			break;
		}
		b->npaths++;
	}
	r = r ?: collect_pm(b, err);
	r = r ?: read_layer(box, b, err);
	SBX_AUTO_CLOSE int root = r < 0 ? -1 : open_root(box, err);
	if (r == 0 && root < 0)
		r = root;
	for (size_t i = 0; r == 0 && i < b->npm; i++)
		r = path_meta(root, b->pm[i].rel[0] ? b->pm[i].rel : ".", &b->pm[i], err);
	if (r < 0) {
		sup_runc_baseline_free(b);
		return sbx_err_wrap(err, "baseline of sandbox %s", box->id);
	}
	*out = b;
	return 0;
}

/* ---- the check ---- */

static int read_small(const char *path, char *buf, size_t cap, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "open %s", path);
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, cap - 1 - have);
		if (n < 0)
			return sbx_err_sys(err, -errno, "read %s", path);
		if (n == 0)
			break;
		have += (size_t)n;
		if (have == cap - 1)
			return sbx_err_set(err, -EFBIG, "%s: more than %zu bytes", path, cap - 1);
	}
	buf[have] = '\0';
	return (int)have;
}

/* The cgroup whose cgroup.procs is procs holds agent alone, and the agent
 * has no child. */
static int check_procs_at(const char *procs, pid_t agent, sbx_err *err)
{
	char path[64], buf[4096];
	int r = read_small(procs, buf, sizeof(buf), err);
	if (r < 0)
		return r;
	char *end;
	long pid = strtol(buf, &end, 10);
	if (pid != agent || strspn(end, "\n") != strlen(end))
		return doubt(err, "its cgroup holds other processes than the agent (%d): %.60s", (int)agent, buf);
	/* the agent's children: every process of the namespace descends from it */
	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)agent, (int)agent);
	if ((r = read_small(path, buf, sizeof(buf), err)) < 0)
		return r;
	if (r > 0 && strspn(buf, " \n") != (size_t)r)
		return doubt(err, "the agent still has children: %.60s", buf);
	return 0;
}

static int check_procs(const sup_runc_cfg *cfg, const sup_runc_box *box, sbx_err *err)
{
	char path[PATH_MAX];
	const sup_cgroup_host *h = cfg->cgroup;
	snprintf(path, sizeof(path), "%s%s%s/cgroup.procs", h->root, h->mode == SUP_CGROUP_V1 ? "/pids" : "",
		 box->cgroup);
	return check_procs_at(path, box->init_pid, err);
}

static int agent_sockets(pid_t pid, unsigned long *ino, size_t cap, size_t *n, sbx_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return sbx_err_sys(err, -errno, "open %s", path);
	struct dirent *de;
	*n = 0;
	while ((de = readdir(d))) {
		char link[64];
		ssize_t l = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);
		if (l <= 0)
			continue;
		link[l] = '\0';
		unsigned long v;
		if (sscanf(link, "socket:[%lu]", &v) == 1 && *n < cap)
			ino[(*n)++] = v;
	}
	closedir(d);
	return 0;
}

/* One of the namespace's socket tables (/proc/<pid>/net/<name>): lines
 * past the header; a unix line's inode must be one of the agent's, a TCP
 * line must not listen, and any UDP or raw line is a bound socket. */
static int check_table(pid_t pid, const char *name, const unsigned long *ino, size_t nino, sbx_err *err)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/net/%s", (int)pid, name);
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : sbx_err_sys(err, -errno, "open %s", path);
	int r = 0;
	bool header = true;
	while (r == 0 && fgets(line, sizeof(line), f)) {
		if (header) {
			header = false;
			continue;
		}
		if (strcmp(name, "unix") == 0) {
			unsigned long v = 0;
			char sock[256] = "";
			/* Num RefCount Protocol Flags Type St Inode [Path] */
			if (sscanf(line, "%*s %*s %*s %*s %*s %*s %lu %255s", &v, sock) < 1) {
				r = sbx_err_set(err, -EPROTO, "%s: a line without an inode", path);
				break;
			}
			bool ours = false;
			for (size_t i = 0; i < nino && !ours; i++)
				ours = ino[i] == v;
			if (!ours)
				r = doubt(err, "a unix socket %s is left", sock[0] ? sock : "(unnamed)");
		} else if (strncmp(name, "tcp", 3) == 0) {
			char local[128], st[8];
			if (sscanf(line, "%*s %127s %*s %7s", local, st) == 2 && strcmp(st, "0A") == 0)
				r = doubt(err, "a TCP socket listens (%s %s)", name, local);
		} else {
			char local[128] = "";
			sscanf(line, "%*s %127s", local);
			r = doubt(err, "a socket is bound (%s %s)", name, local);
		}
	}
	fclose(f);
	return r;
}

static int check_sockets(const sup_runc_box *box, sbx_err *err)
{
	static const char *const tables[] = { "unix", "tcp", "tcp6", "udp", "udp6", "raw", "raw6" };
	unsigned long *ino = calloc(AGENT_MAX_SOCKETS, sizeof(*ino));
	size_t n = 0;
	if (!ino)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int r = agent_sockets(box->init_pid, ino, AGENT_MAX_SOCKETS, &n, err);
	for (size_t i = 0; r == 0 && i < sizeof(tables) / sizeof(tables[0]); i++)
		r = check_table(box->init_pid, tables[i], ino, n, err);
	free(ino);
	return r;
}

/* The System V objects of the sandbox's IPC namespace, read from inside
 * it by this thread (setns changes the calling thread alone) and back. */
static int check_ipc(const sup_runc_box *box, sbx_err *err)
{
	static const char *const files[] = { "shm", "msg", "sem" };
	char path[64], buf[8192];
	SBX_AUTO_CLOSE int home = open("/proc/thread-self/ns/ipc", O_RDONLY | O_CLOEXEC);
	if (home < 0)
		return sbx_err_sys(err, -errno, "open this thread's IPC namespace");
	snprintf(path, sizeof(path), "/proc/%d/ns/ipc", (int)box->init_pid);
	SBX_AUTO_CLOSE int ns = open(path, O_RDONLY | O_CLOEXEC);
	if (ns < 0)
		return sbx_err_sys(err, -errno, "open %s", path);
	if (setns(ns, CLONE_NEWIPC) < 0)
		return sbx_err_sys(err, -errno, "enter the IPC namespace of sandbox %s", box->id);
	int r = 0;
	for (size_t i = 0; r == 0 && i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "/proc/sysvipc/%s", files[i]);
		int n = read_small(path, buf, sizeof(buf), err);
		if (n < 0) {
			r = n;
			break;
		}
		char *nl = strchr(buf, '\n');
		if (nl && nl[1] != '\0')
			r = doubt(err, "System V IPC objects are left (%s)", files[i]);
	}
	if (setns(home, CLONE_NEWIPC) < 0) {
		/* a worker in a sandbox's IPC namespace would do no harm (no
		 * job uses System V IPC), but it must be said */
		sup_error("worker thread: cannot go back to the host's IPC namespace: %s", strerror(errno));
	}
	return r;
}

static int check_empty(int root, const char *rel, sbx_err *err)
{
	int fd = open_in(root, rel, O_RDONLY | O_DIRECTORY);
	if (fd == -ENOENT)
		return 0;
	if (fd < 0)
		return sbx_err_sys(err, fd, "open /%s in the sandbox", rel);
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return sbx_err_sys(err, -errno, "open /%s in the sandbox", rel);
	}
	struct dirent *de;
	int r = 0;
	while (r == 0 && (de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			r = doubt(err, "/%s is not empty (%.100s)", rel, de->d_name);
	closedir(d);
	return r;
}

/* Is rel strictly below one of the reset folders? */
static bool below_reset(const sup_runc_baseline *b, const char *rel)
{
	for (size_t i = 0; i < b->npaths; i++) {
		size_t n = strlen(b->paths[i]);
		if (strncmp(rel, b->paths[i], n) == 0 && rel[n] == '/')
			return true;
	}
	return false;
}

static const pmeta *pm_find(const sup_runc_baseline *b, const char *rel)
{
	for (size_t i = 0; i < b->npm; i++)
		if (strcmp(b->pm[i].rel, rel) == 0)
			return &b->pm[i];
	return NULL;
}

static int check_layer(const sup_runc_box *box, const sup_runc_baseline *b, sbx_err *err)
{
	sup_runc_baseline now = { 0 };
	int r = read_layer(box, &now, err);
	for (size_t i = 0; r == 0 && i < now.n; i++) {
		const entry *e = &now.e[i];
		if (below_reset(b, e->rel)) {
			/* a whiteout hides an image's entry: the folder looks
			 * empty, as reset left it */
			if (!S_ISCHR(e->mode) || e->rdev != 0)
				r = doubt(err, "/%s is left in the writable layer", e->rel);
			continue;
		}
		entry key = { .rel = e->rel };
		const entry *was = bsearch(&key, b->e, b->n, sizeof(*b->e), by_rel);
		if (!was) {
			/* a folder copied up on the way to a reset folder; its
			 * metadata is checked through the root below */
			if (!S_ISDIR(e->mode) || !pm_find(b, e->rel))
				r = doubt(err, "/%s was written to the writable layer", e->rel);
			continue;
		}
		bool meta = was->mode == e->mode && was->uid == e->uid && was->gid == e->gid &&
			    was->rdev == e->rdev && (was->xhash == e->xhash || pm_find(b, e->rel));
		bool data = was->size == e->size && was->mtime.tv_sec == e->mtime.tv_sec &&
			    was->mtime.tv_nsec == e->mtime.tv_nsec;
		if (!meta || !data)
			r = doubt(err, "/%s was changed in the writable layer", e->rel);
	}
	for (size_t i = 0; i < now.n; i++)
		free(now.e[i].rel);
	free(now.e);
	return r;
}

static int check_paths(const sup_runc_box *box, const sup_runc_baseline *b, sbx_err *err)
{
	static const char *const always[] = { "dev/shm", "dev/mqueue" };
	SBX_AUTO_CLOSE int root = open_root(box, err);
	if (root < 0)
		return root;
	int r = 0;
	for (size_t i = 0; r == 0 && i < b->npm; i++) {
		const pmeta *was = &b->pm[i];
		pmeta now = { 0 };
		const char *rel = was->rel[0] ? was->rel : ".";
		r = path_meta(root, rel, &now, err);
		if (r == 0 && (now.absent != was->absent ||
			       (!now.absent && (now.mode != was->mode || now.uid != was->uid ||
						now.gid != was->gid || now.xhash != was->xhash))))
			r = doubt(err, "/%s is not as it was (absent, owner, mode or attributes)", was->rel);
	}
	for (size_t i = 0; r == 0 && i < b->npaths; i++)
		r = check_empty(root, b->paths[i], err);
	for (size_t i = 0; r == 0 && i < sizeof(always) / sizeof(always[0]); i++)
		r = check_empty(root, always[i], err);
	return r;
}

int sup_runc_check_clean(const sup_runc_cfg *cfg, const sup_runc_box *box, const sup_runc_baseline *b,
			 sbx_err *err)
{
	if (box->isolation != SUP_ISO_RUNC)
		return sbx_err_set(err, -ENOTSUP, "only runc sandboxes are checked after a reset");
	int r = check_procs(cfg, box, err);
	r = r ?: check_sockets(box, err);
	r = r ?: check_ipc(box, err);
	r = r ?: check_paths(box, b, err);
	r = r ?: check_layer(box, b, err);
	/* the agent may have died meanwhile: its pid reused by another
	 * process would have passed the checks above on the wrong namespace */
	if (r == 0)
		r = check_procs(cfg, box, err);
	return r;
}

/* ---- a pod's agent (the Kubernetes backend) ---- */

/* The cgroup.procs of pid's own cgroup, from /proc/<pid>/cgroup: the pids
 * controller's line on v1, the unified line ("0::") on v2. */
static int pod_procs(const sup_cgroup_host *h, pid_t pid, char *out, size_t cap, sbx_err *err)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	int r = read_small(path, buf, sizeof(buf), err);
	if (r < 0)
		return r;
	for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2 || c2[1] != '/')
			continue;
		*c2 = '\0';
		bool want = false;
		if (h->mode == SUP_CGROUP_V1) {
			for (char *s2 = NULL, *ctl = strtok_r(c1 + 1, ",", &s2); ctl && !want; ctl = strtok_r(NULL, ",", &s2))
				want = strcmp(ctl, "pids") == 0;
		} else {
			want = c1[1] == '\0' && strncmp(line, "0:", 2) == 0;
		}
		if (!want)
			continue;
		/* a path with ".." would leave the hierarchy */
		if (strstr(c2 + 1, "/..") || snprintf(out, cap, "%s%s%s/cgroup.procs", h->root,
						       h->mode == SUP_CGROUP_V1 ? "/pids" : "", c2 + 1) >= (int)cap)
			return sbx_err_set(err, -EINVAL, "%s: a cgroup path that cannot be used", path);
		return 0;
	}
	return sbx_err_set(err, -ENOENT, "%s: no %s cgroup", path, h->mode == SUP_CGROUP_V1 ? "pids" : "unified");
}

int sup_runc_check_pod(const sup_cgroup_host *h, pid_t pid, const char *const *paths, size_t npaths, sbx_err *err)
{
	static const char *const always[] = { "dev/shm", "dev/mqueue" };
	sup_runc_box box = { .init_pid = pid };
	snprintf(box.id, sizeof(box.id), "agent %d", (int)pid);
	char procs[PATH_MAX];
	int r = pod_procs(h, pid, procs, sizeof(procs), err);
	r = r ?: check_procs_at(procs, pid, err);
	r = r ?: check_sockets(&box, err);
	r = r ?: check_ipc(&box, err);
	SBX_AUTO_CLOSE int root = r ? -1 : open_root(&box, err);
	if (r == 0 && root < 0)
		r = root;
	for (size_t i = 0; r == 0 && i < npaths; i++)
		r = check_empty(root, paths[i][0] == '/' ? paths[i] + 1 : paths[i], err);
	for (size_t i = 0; r == 0 && i < sizeof(always) / sizeof(always[0]); i++)
		r = check_empty(root, always[i], err);
	/* the agent may have died meanwhile, its pid reused (as above) */
	return r ?: check_procs_at(procs, pid, err);
}
