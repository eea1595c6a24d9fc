/* agent_fsconf_rm: removing an entry or a whole tree beneath a root (see
 * agent_fsconf_ops.h). A tree is emptied without recursion and with one folder fd
 * at a time: go down into a non-empty child, come back up through "..", and
 * read the folder again. The way down is by single names with no symlink and
 * no mount crossing (agent_fsconf_open_child); the way up is checked against
 * the identity of the folder it came down from, so a tree moved while it is
 * being removed stops the removal instead of leading it somewhere else. */
#include "agent_fsconf_ops.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/dir.h"

/* Depth bound (16 bytes of memory a level), and a bound on descents so a tree
 * that keeps growing under a writer ends in an error, not a loop. */
#define RM_MAX_DEPTH 65536u
#define RM_MAX_DESCENTS (1u << 24)
#define RM_TRIES 4

typedef struct rm_ident {
	dev_t dev;
	ino_t ino;
} rm_ident;

typedef struct rm_walk {
	const agent_fsconf_root *root;
	const char *rel;
	sbx_err *err;
	rm_ident *up; /* identities of the folders above the current one */
	size_t depth, cap;
	unsigned descents;
	uint64_t removed; /* entries unlinked */
} rm_walk;

static int rm_fail(rm_walk *w, int code, const char *name, const char *msg)
{
	const char *sep = w->rel[0] ? "/" : "";
	if (msg)
		return sbx_err_set(w->err, code, "remove %s%s%s: %s: %s", w->root->path, sep,
				   w->rel, name, msg);
	return sbx_err_sys(w->err, code, "remove %s%s%s: %s", w->root->path, sep, w->rel, name);
}

static void closedir_keep_errno(DIR *d)
{
	int e = errno;
	closedir(d);
	errno = e;
}

/* Remove what can be removed in d; returns a child folder fd to go down
 * into, -1 when d is empty, or a negative errno (< -1). */
static int rm_scan(rm_walk *w, DIR *d)
{
	struct dirent *de;
	bool dir;
	int r;
	while ((r = sbx_dir_next(d, &de, &dir)) > 0) {
		const char *n = de->d_name;
		if (unlinkat(dirfd(d), n, dir ? AT_REMOVEDIR : 0) == 0) {
			w->removed++;
			continue;
		}
		if (errno == ENOENT)
			continue;
		if (errno == EBUSY)
			return rm_fail(w, -EBUSY, n, "a mount point, not removed through");
		if (!dir || (errno != ENOTEMPTY && errno != EEXIST))
			return rm_fail(w, -errno, n, NULL);
		sbx_err cerr;
		int child = agent_fsconf_open_child(dirfd(d), n, O_RDONLY | O_DIRECTORY, &cerr);
		if (child == -ENOENT)
			continue;
		if (child < 0)
			return sbx_err_set(w->err, child, "remove %s/%s: %s", w->root->path, w->rel,
					   cerr.msg);
		return child;
	}
	if (r < 0) /* an entry's type, or the folder's read */
		return de ? rm_fail(w, r, de->d_name, NULL) : rm_fail(w, r, ".", "readdir");
	return -1;
}

/* Empty the folder fd (taken over). */
static int rm_empty(rm_walk *w, int fd)
{
	for (;;) {
		DIR *d = fdopendir(fd);
		if (!d) {
			int e = -errno;
			close(fd);
			return rm_fail(w, e, ".", "opendir");
		}
		int child = rm_scan(w, d);
		if (child < -1) {
			closedir(d);
			return child;
		}
		struct stat st;
		if (child >= 0) {
			if (w->depth == RM_MAX_DEPTH || ++w->descents > RM_MAX_DESCENTS) {
				close(child);
				closedir(d);
				return rm_fail(w, -ELOOP, ".", w->depth == RM_MAX_DEPTH
							 ? "deeper than the removal allows"
							 : "the tree keeps growing");
			}
			if (w->depth == w->cap) {
				size_t cap = w->cap ? w->cap * 2 : 64;
				rm_ident *up = realloc(w->up, cap * sizeof(*up));
				if (!up) {
					close(child);
					closedir(d);
					return rm_fail(w, -ENOMEM, ".", NULL);
				}
				w->up = up;
				w->cap = cap;
			}
			if (fstat(dirfd(d), &st) < 0) {
				int e = -errno;
				close(child);
				closedir(d);
				return rm_fail(w, e, ".", "stat");
			}
			w->up[w->depth++] = (rm_ident){ st.st_dev, st.st_ino };
			closedir(d);
			fd = child;
			continue;
		}
		if (w->depth == 0) {
			closedir(d);
			return 0;
		}
		/* Up by "..", which must be the folder we came down from. */
		int up = agent_fsconf_resolve(dirfd(d), "..", O_RDONLY | O_DIRECTORY, 0,
					      RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
						      RESOLVE_NO_XDEV);
		closedir_keep_errno(d);
		if (up < 0)
			return rm_fail(w, up, "..", NULL);
		const rm_ident *want = &w->up[--w->depth];
		if (fstat(up, &st) < 0 || st.st_dev != want->dev || st.st_ino != want->ino) {
			close(up);
			return rm_fail(w, -ESTALE, "..", "the tree was moved during the removal");
		}
		fd = up;
	}
}

static int rm_tree(const agent_fsconf_root *root, const char *rel, int pfd, const char *leaf,
		   sbx_err *err)
{
	rm_walk w = { .root = root, .rel = rel, .err = err };
	int r = 0;
	for (int i = 0; i < RM_TRIES; i++) {
		sbx_err cerr;
		int top = agent_fsconf_open_child(pfd, leaf, O_RDONLY | O_DIRECTORY, &cerr);
		if (top < 0) {
			r = agent_fsconf_fail(err, top, root, rel, "remove", cerr.msg);
			break;
		}
		w.depth = 0;
		r = rm_empty(&w, top);
		if (r < 0)
			break;
		if (unlinkat(pfd, leaf, AT_REMOVEDIR) == 0)
			break;
		r = -errno;
		if (r != -ENOTEMPTY && r != -EEXIST) {
			r = agent_fsconf_fail(err, r, root, rel, "remove", NULL);
			break;
		}
		/* Refilled meanwhile: empty it again, a few times. */
		r = agent_fsconf_fail(err, -ENOTEMPTY, root, rel, "remove",
				      "kept being filled during the removal");
	}
	free(w.up);
	return r;
}

int agent_fsconf_remove(const agent_fsconf_root *root, const char *rel, bool recursive,
			sbx_err *err)
{
	char leaf[NAME_MAX + 1];
	SBX_AUTO_CLOSE int pfd = agent_fsconf_open_parent(root, rel, leaf, sizeof(leaf), "remove",
							  err);
	if (pfd < 0)
		return pfd;
	struct stat st;
	if (fstatat(pfd, leaf, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return agent_fsconf_fail(err, -errno, root, rel, "remove", NULL);
	if (unlinkat(pfd, leaf, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0)
		return 0;
	int e = -errno;
	if (e == -EBUSY)
		return agent_fsconf_fail(err, e, root, rel, "remove", "a mount point");
	if (!S_ISDIR(st.st_mode) || (e != -ENOTEMPTY && e != -EEXIST))
		return agent_fsconf_fail(err, e, root, rel, "remove", NULL);
	if (!recursive)
		return agent_fsconf_fail(err, -ENOTEMPTY, root, rel, "remove",
					 "folder not empty; remove it recursively");
	return rm_tree(root, rel, pfd, leaf, err);
}

int agent_fsconf_empty(const agent_fsconf_root *root, uint64_t *removed, sbx_err *err)
{
	rm_walk w = { .root = root, .rel = "", .err = err };
	int fd = openat(root->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int r = fd < 0 ? rm_fail(&w, -errno, ".", "open") : rm_empty(&w, fd);
	free(w.up);
	*removed += w.removed;
	return r;
}
