/* File operations beneath an allowed root: the building blocks the agent's
 * file protocol ops are made of (read, write by replace, mkdir, remove,
 * stat, readlink, move, chmod), each confined by agent_fsconf.h.
 *
 * Every function takes an open root and a path relative to it, resolves the
 * path (or its folder) with openat2 beneath the root, and then acts on the
 * fd, or on one entry name in a folder fd, so nothing is looked up twice by
 * path. Calls that act on an entry (remove, move, mkdir, replace) never
 * follow its last component; calls on content (read, chmod, stat with
 * follow) follow symlinks that stay inside the root.
 *
 * Hard links: a hard link is the same inode under another name, so one to a
 * file elsewhere in the sandbox is inside the root by path. Reads follow it,
 * as the kernel does: link(2) checked the creator's access to the inode
 * (fs.protected_hardlinks) and cannot cross a mount, so reading it hands out
 * nothing its creator could not have copied into the root. Changing such an
 * inode in place could reach further (the agent may be more privileged than
 * whoever made the link), so nothing here does: a write replaces the entry
 * with a new file (the other names keep the old content), and chmod refuses
 * a regular file with more than one link (-EMLINK).
 *
 * Modes: 0 to 01777; setuid and setgid bits are refused (-EPERM), since the
 * agent may create files as root.
 *
 * Returns 0 (or a count / fd) or a negative errno with err naming the path:
 *   -EACCES  the path leads outside its root        -ELOOP   loop or magic link
 *   -EINVAL  bad path or argument, not a symlink    -ENOENT, -EEXIST, -EISDIR,
 *   -EBUSY   the root itself, or a mount point      -ENOTDIR, -ENOTEMPTY,
 *   -EMLINK  shared inode (chmod)                   -ESTALE (a folder moved
 *   -ENOSYS  no openat2: file operations refused     during a write/removal)
 * This module owns no state and must not know the protocol. */
#ifndef AGENT_FSCONF_OPS_H
#define AGENT_FSCONF_OPS_H

#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "agent_fsconf.h"
#include "sbx/err.h"

/* Regular file opened O_RDONLY (anything else: -EISDIR or -EINVAL, and a
 * FIFO or device is never opened for reading). *st describes the fd. */
int agent_fsconf_open_read(const agent_fsconf_root *root, const char *rel, struct stat *st,
			   sbx_err *err);

/* Folder opened O_RDONLY | O_DIRECTORY, for listing (fdopendir) or
 * watching (what names the operation in errors). Entries are then examined
 * with fstatat/readlinkat(fd, name, AT_SYMLINK_NOFOLLOW) and descended with
 * agent_fsconf_open_child, never by path. rel naming something else than a
 * folder is -EINVAL (bad_request); a component on the way that is not a
 * folder stays -ENOTDIR (not_found). */
int agent_fsconf_open_dir(const agent_fsconf_root *root, const char *rel, const char *what,
			  sbx_err *err);

/* stat of rel; follow: a final symlink is followed (inside the root only). */
int agent_fsconf_stat(const agent_fsconf_root *root, const char *rel, bool follow,
		      struct stat *st, sbx_err *err);

/* The target of the symlink rel, reported, never followed: NUL-terminated in
 * buf; returns its length. -EINVAL when rel is not a symlink, -ENAMETOOLONG
 * when cap is too small. */
ssize_t agent_fsconf_readlink(const agent_fsconf_root *root, const char *rel, char *buf,
			      size_t cap, sbx_err *err);

/* Write by replace: a temporary file in the target's folder, renamed over
 * the target when complete, so a cut upload leaves the old file untouched. */
typedef struct agent_fsconf_create {
	mode_t mode;    /* exact permission bits of the new file */
	uid_t uid;      /* owner; (uid_t)-1 leaves the agent's */
	gid_t gid;      /* group; (gid_t)-1 leaves the agent's */
	bool overwrite; /* false: -EEXIST when the target exists */
} agent_fsconf_create;

typedef struct agent_fsconf_tmp {
	int fd;                  /* write the content here; -1 when released */
	int dirfd;               /* the target's folder (O_PATH) */
	char name[32];           /* the temporary entry in dirfd */
	char leaf[NAME_MAX + 1]; /* the target's name in dirfd */
	char *rel;               /* target below the root, for the commit check */
	size_t dir_len;          /* rel[0..dir_len) is the folder */
	dev_t dir_dev;
	ino_t dir_ino;
	bool overwrite;
} agent_fsconf_tmp;

int agent_fsconf_tmp_open(const agent_fsconf_root *root, const char *rel,
			  const agent_fsconf_create *opt, agent_fsconf_tmp *tmp, sbx_err *err);
/* Rename the temporary file over the target. Before that, the folder must
 * still be what rel's folder resolves to beneath root (reopened by the
 * caller, may be another agent_fsconf_root of the same path): a folder moved
 * or swapped for a symlink during the upload gives -ESTALE, and the file
 * lands nowhere. Releases tmp in every case. */
int agent_fsconf_tmp_commit(const agent_fsconf_root *root, agent_fsconf_tmp *tmp,
			    sbx_err *err);
/* Remove the temporary file and release tmp; safe on a released tmp. */
void agent_fsconf_tmp_abort(agent_fsconf_tmp *tmp);
#define AGENT_FSCONF_AUTO_TMP __attribute__((cleanup(agent_fsconf_tmp_abort)))

/* Folders made above the one asked for (parents). */
#define AGENT_FSCONF_PARENT_MODE 0755

typedef struct agent_fsconf_dirs {
	mode_t mode;  /* exact permission bits of the folder asked for */
	uid_t uid;    /* owner of every folder made; (uid_t)-1 leaves the agent's */
	gid_t gid;    /* group; (gid_t)-1 leaves the agent's */
	bool parents; /* also the missing folders above (AGENT_FSCONF_PARENT_MODE) */
} agent_fsconf_dirs;

/* mkdir with exactly opt->mode, owned by opt->uid/gid; with parents also the
 * missing folders above it (mode AGENT_FSCONF_PARENT_MODE, the same owner),
 * and an existing folder is not an error (it is left as it is). Symlinked
 * folders on the way are followed while they stay inside the root. */
int agent_fsconf_mkdir_as(const agent_fsconf_root *root, const char *rel,
			  const agent_fsconf_dirs *opt, sbx_err *err);
/* The same, owned by the agent's user. */
static inline int agent_fsconf_mkdir(const agent_fsconf_root *root, const char *rel, mode_t mode,
				     bool parents, sbx_err *err)
{
	agent_fsconf_dirs opt = { .mode = mode, .uid = (uid_t)-1, .gid = (gid_t)-1,
				  .parents = parents };
	return agent_fsconf_mkdir_as(root, rel, &opt, err);
}

/* Remove the entry rel (a symlink is removed, not followed); a non-empty
 * folder only when recursive. Recursive removal uses one fd at a time at any
 * depth, never crosses into another mount (-EBUSY, nothing beyond removed),
 * and checks each ".." it climbs against the folder it came down from
 * (-ESTALE if the tree was moved under it). */
int agent_fsconf_remove(const agent_fsconf_root *root, const char *rel, bool recursive,
			sbx_err *err);

/* Remove everything in the root folder itself (hidden entries too), as a
 * recursive removal does (no mount crossed: -EBUSY); the folder stays.
 * Adds the entries removed to *removed. */
int agent_fsconf_empty(const agent_fsconf_root *root, uint64_t *removed, sbx_err *err);

/* Move from_rel to to_rel (roots may differ); the entry itself moves, a
 * symlink is not followed. !overwrite: -EEXIST when to_rel exists. -EXDEV
 * when the two are on different file systems (the caller may copy). */
int agent_fsconf_rename(const agent_fsconf_root *from_root, const char *from_rel,
			const agent_fsconf_root *to_root, const char *to_rel, bool overwrite,
			sbx_err *err);

/* chmod a regular file or a folder (a symlink inside the root is followed),
 * through an fd of it, never by path. Refuses other types (-EPERM) and
 * shared inodes (-EMLINK). */
int agent_fsconf_chmod(const agent_fsconf_root *root, const char *rel, mode_t mode,
		       sbx_err *err);

#endif
