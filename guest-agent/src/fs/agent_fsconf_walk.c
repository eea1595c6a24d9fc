/* agent_fsconf_walk: see agent_fsconf_walk.h. */
#include "agent_fsconf_walk.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/grow.h"

#define RESOLVE_KNOWN \
	(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)
#define O_PATH_DIR (O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

typedef struct ident {
	mode_t mode;
	dev_t dev;
	ino_t ino;
	uint64_t mnt;    /* statx's mount id, when has_mnt */
	bool has_mnt;
	bool knows_root; /* the kernel reports STATX_ATTR_MOUNT_ROOT */
	bool mount_root;
} ident;

typedef struct walk {
	uint64_t flags, resolve;
	mode_t mode;  /* of a file O_CREAT makes */
	int cur;      /* O_PATH folder the next component is looked up in */
	ident cur_id;
	ident *up;    /* the folders above cur, for ".." */
	size_t depth, cap;
	char *buf;    /* the rest of the path, right-aligned: buf[start..MAX) */
	size_t start;
	unsigned links;
} walk;

/* Type, identity and mount of name in fd ("" for fd itself), never
 * following a symlink. */
static int ident_at(int fd, const char *name, ident *id)
{
	struct statx sx;
	int at = AT_SYMLINK_NOFOLLOW | (name[0] ? 0 : AT_EMPTY_PATH);
	memset(id, 0, sizeof(*id));
	if (statx(fd, name, at, STATX_TYPE | STATX_INO | STATX_MNT_ID, &sx) < 0)
		return -errno;
	if ((sx.stx_mask & (STATX_TYPE | STATX_INO)) != (STATX_TYPE | STATX_INO))
		return -EIO;
	id->mode = sx.stx_mode;
	id->dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
	id->ino = sx.stx_ino;
	id->has_mnt = (sx.stx_mask & STATX_MNT_ID) != 0;
	id->mnt = sx.stx_mnt_id;
	id->knows_root = (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0;
	id->mount_root = (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
	return 0;
}

static bool same_inode(const ident *a, const ident *b)
{
	return a->dev == b->dev && a->ino == b->ino;
}

static bool same_mount(const ident *a, const ident *b)
{
	if (a->has_mnt && b->has_mnt)
		return a->mnt == b->mnt;
	return a->dev == b->dev;
}

/* Is the folder w->cur the root of a mount (or of everything)? */
static int cur_is_mount_root(const walk *w)
{
	if (w->cur_id.knows_root)
		return w->cur_id.mount_root;
	ident parent = { 0 };
	int r = ident_at(w->cur, "..", &parent);
	if (r < 0)
		return r;
	return same_inode(&parent, &w->cur_id) || !same_mount(&parent, &w->cur_id);
}

static void set_cur(walk *w, int fd, const ident *id)
{
	close(w->cur);
	w->cur = fd;
	w->cur_id = *id;
}

static int push(walk *w)
{
	int rc = sbx_grow(&w->up, &w->cap, w->depth, sizeof(*w->up), 32, AGENT_FSCONF_WALK_DEPTH);
	if (rc < 0)
		return rc == -ENOSPC ? -ENAMETOOLONG : rc;
	w->up[w->depth++] = w->cur_id;
	return 0;
}

/* "..": the parent of cur, which must be the folder the walk came down
 * through; above the start only without RESOLVE_BENEATH. */
static int climb(walk *w)
{
	if (w->depth == 0 && (w->resolve & RESOLVE_BENEATH))
		return -EXDEV;
	int up = openat(w->cur, "..", O_PATH_DIR);
	if (up < 0)
		return -errno;
	ident id = { 0 };
	int r = ident_at(up, "", &id);
	if (r == 0 && w->depth > 0 && !same_inode(&id, &w->up[w->depth - 1]))
		r = -EAGAIN;
	if (r == 0 && (w->resolve & RESOLVE_NO_XDEV) && !same_mount(&id, &w->cur_id))
		r = -EXDEV;
	if (r < 0) {
		close(up);
		return r;
	}
	if (w->depth > 0)
		w->depth--;
	set_cur(w, up, &id);
	return 0;
}

/* The symlink fd (in cur): refuse it, or put its target in front of the
 * rest of the path. */
static int follow(walk *w, int fd)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) < 0)
		return -errno;
	if (sf.f_type == PROC_SUPER_MAGIC) {
		int root = cur_is_mount_root(w);
		if (root < 0)
			return root;
		if (!root)
			return -ELOOP; /* a magic link: never read as a path */
	}
	if ((w->resolve & RESOLVE_NO_SYMLINKS) || ++w->links > AGENT_FSCONF_WALK_LINKS)
		return -ELOOP;
	char target[PATH_MAX];
	ssize_t n = readlinkat(fd, "", target, sizeof(target));
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ENOENT;
	if ((size_t)n == sizeof(target))
		return -ENAMETOOLONG;
	if (target[0] == '/')
		return -EXDEV; /* beneath only (the entry check): never absolute */
	if ((size_t)n > w->start)
		return -ENAMETOOLONG;
	w->start -= (size_t)n;
	memcpy(w->buf + w->start, target, (size_t)n);
	return 0;
}

/* The last component, found: reopen it with the caller's flags from its
 * folder, without following, and check it is still what was looked at. */
static int open_last(walk *w, int pfd, const char *name, const ident *want)
{
	int fd = openat(pfd, name, (int)(w->flags | O_NOFOLLOW | O_CLOEXEC));
	if (fd < 0)
		return -errno;
	ident got = { 0 };
	int r = ident_at(fd, "", &got);
	if (r == 0 && !same_inode(&got, want))
		r = -EAGAIN;
	if (r < 0) {
		close(fd);
		return r;
	}
	return fd;
}

/* The folder cur itself is the result ("", ".", "..", a trailing "/"). */
static int finish_cur(walk *w)
{
	if (w->flags & O_CREAT)
		return -EISDIR;
	if (w->flags & O_PATH)
		return sbx_steal_fd(&w->cur);
	return open_last(w, w->cur, ".", &w->cur_id);
}

/* One component name in cur. 1: done, *out holds the result; 0: go on. */
static int step(walk *w, const char *name, bool last, bool slash_after, int *out)
{
	bool dotdot = name[0] == '.' && name[1] == '.' && !name[2];
	if ((name[0] == '.' && !name[1]) || dotdot) {
		int r = dotdot ? climb(w) : 0;
		if (r < 0 || !last)
			return r;
		*out = finish_cur(w);
		return 1;
	}
	SBX_AUTO_CLOSE int fd = openat(w->cur, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT && last && !slash_after && (w->flags & O_CREAT)) {
		/* O_EXCL (the entry check): a symlink put there meanwhile is
		 * never followed. */
		*out = openat(w->cur, name, (int)(w->flags | O_NOFOLLOW | O_CLOEXEC), w->mode);
		if (*out < 0)
			*out = -errno;
		return 1;
	}
	if (fd < 0)
		return -errno;
	if (last && (w->flags & O_CREAT)) {
		*out = -EEXIST; /* O_EXCL: whatever it is, a symlink not followed */
		return 1;
	}
	ident id = { 0 };
	int r = ident_at(fd, "", &id);
	if (r < 0)
		return r;
	if (S_ISLNK(id.mode)) {
		if (!last || slash_after || !(w->flags & O_NOFOLLOW))
			return follow(w, fd);
		/* The link itself, as openat2 gives it for O_PATH | O_NOFOLLOW. */
		*out = (w->flags & O_DIRECTORY) ? -ENOTDIR
		       : (w->flags & O_PATH)	? sbx_steal_fd(&fd)
						: -ELOOP;
		return 1;
	}
	if ((w->resolve & RESOLVE_NO_XDEV) && !same_mount(&id, &w->cur_id))
		return -EXDEV;
	if ((!last || slash_after || (w->flags & O_DIRECTORY)) && !S_ISDIR(id.mode))
		return -ENOTDIR;
	if (!last) {
		r = push(w);
		if (r == 0)
			set_cur(w, sbx_steal_fd(&fd), &id);
		return r;
	}
	if (w->flags & O_PATH)
		*out = sbx_steal_fd(&fd);
	else
		*out = open_last(w, w->cur, name, &id);
	return 1;
}

static int run(walk *w)
{
	for (;;) {
		while (w->start < AGENT_FSCONF_WALK_MAX && w->buf[w->start] == '/')
			w->start++;
		if (w->start == AGENT_FSCONF_WALK_MAX)
			return finish_cur(w); /* "/" or a trailing slash after "." */
		size_t s = w->start, e = s;
		while (e < AGENT_FSCONF_WALK_MAX && w->buf[e] != '/')
			e++;
		if (e - s > NAME_MAX)
			return -ENAMETOOLONG;
		char name[NAME_MAX + 1];
		memcpy(name, w->buf + s, e - s);
		name[e - s] = '\0';
		size_t after = e;
		while (after < AGENT_FSCONF_WALK_MAX && w->buf[after] == '/')
			after++;
		bool last = after == AGENT_FSCONF_WALK_MAX;
		w->start = e; /* the rest keeps its leading slash */
		int out = -1;
		int r = step(w, name, last, e < AGENT_FSCONF_WALK_MAX, &out);
		if (r < 0)
			return r;
		if (r == 1)
			return out;
	}
}

int agent_fsconf_walk(int dirfd, const char *path, uint64_t flags, uint64_t mode,
		      uint64_t resolve)
{
	if ((resolve & ~(uint64_t)RESOLVE_KNOWN) ||
	    !(resolve & (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)) ||
	    ((flags & O_CREAT) && !(flags & O_EXCL)) || (flags & O_TRUNC) ||
	    (flags & __O_TMPFILE) == __O_TMPFILE || mode > 07777)
		return -EINVAL;
	size_t len = strnlen(path, PATH_MAX);
	if (len == 0)
		return -ENOENT;
	if (len == PATH_MAX)
		return -ENAMETOOLONG;
	bool abs = path[0] == '/';
	if (abs && (resolve & RESOLVE_BENEATH))
		return -EXDEV;

	walk w = { .flags = flags, .resolve = resolve, .mode = (mode_t)mode, .cur = -1 };
	w.buf = malloc(AGENT_FSCONF_WALK_MAX);
	if (!w.buf)
		return -ENOMEM;
	w.start = AGENT_FSCONF_WALK_MAX - len;
	memcpy(w.buf + w.start, path, len);
	int r;
	w.cur = abs ? open("/", O_PATH_DIR) : openat(dirfd, ".", O_PATH_DIR);
	if (w.cur < 0)
		r = -errno;
	else
		r = ident_at(w.cur, "", &w.cur_id);
	if (r == 0)
		r = run(&w);
	if (w.cur >= 0)
		close(w.cur);
	free(w.up);
	free(w.buf);
	return r;
}

int agent_fsconf_walk_probe(char *msg, size_t cap, bool *by_mount_id)
{
	ident id = { 0 };
	struct statfs sf;
	SBX_AUTO_CLOSE int root = open("/", O_PATH_DIR);
	if (root < 0 || ident_at(root, "", &id) < 0 || fstatfs(root, &sf) < 0) {
		int e = errno;
		snprintf(msg, cap, "statx/fstatfs on an O_PATH fd of /: %s", strerror(e));
		return -e;
	}
	if (by_mount_id)
		*by_mount_id = id.has_mnt;
	/* A procfs symlink must be seen as such through its O_PATH fd, or a
	 * magic link could not be told from a plain one. No /proc: no magic
	 * links to meet. */
	SBX_AUTO_CLOSE int l = open("/proc/self", O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (l < 0 && errno == ENOENT)
		return 0;
	char t[32];
	if (l < 0 || ident_at(l, "", &id) < 0 || !S_ISLNK(id.mode) || fstatfs(l, &sf) < 0 ||
	    sf.f_type != PROC_SUPER_MAGIC || readlinkat(l, "", t, sizeof(t)) <= 0) {
		snprintf(msg, cap, "/proc/self is not seen as a procfs symlink through an O_PATH fd, "
				   "so magic links could not be told apart");
		return -ENOTSUP;
	}
	return 0;
}
