/* Host file-system helpers for the runc backend: removing a tree without ever
 * leaving its mount, making folders and small files with exact modes, and
 * reading the bounded tail of a log.
 *
 * Trees it removes may hold anything a guest wrote (symlinks, deep nesting,
 * odd names), so it never follows a symlink and never descends into another
 * mount. It owns no state and must not decide what to remove: callers pass
 * paths they built themselves. */
#ifndef SUP_FSUTIL_H
#define SUP_FSUTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "sbx/err.h"

/* Remove path and everything below it. A path that does not exist is not an
 * error. Refuses (-EBUSY, nothing more removed) when path or anything below
 * it is the root of another mount, so an overlay left mounted or a bind mount
 * is never emptied through. Works at any depth (no PATH_MAX limit). */
int sup_fs_rm_tree(const char *path, sbx_err *err);

/* mkdirat with exactly mode (umask ignored) and owner; an existing folder is
 * not an error when exist_ok (its mode and owner are then left alone). */
int sup_fs_mkdir(int dirfd, const char *name, mode_t mode, uid_t uid, gid_t gid,
		 int exist_ok, sbx_err *err);

/* Create or replace name with data, exactly mode, owned by root. */
int sup_fs_write_file(int dirfd, const char *name, const char *data, size_t len,
		      mode_t mode, sbx_err *err);

/* Read a whole small file (at most cap - 1 bytes, NUL-terminated). Returns
 * the length, -EFBIG when it is larger. */
ssize_t sup_fs_read_small(int dirfd, const char *name, char *buf, size_t cap, sbx_err *err);

/* Fill buf with the last cap - 1 bytes at most of the file at path, made
 * printable on one line (for error messages). Empty when the file is missing. */
void sup_fs_log_tail(const char *path, char *buf, size_t cap);

#endif
