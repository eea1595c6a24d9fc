/* A folder of the host bound into a running container's mount namespace
 * (a volume into a sandbox already made, e.g. one taken from a warm pool):
 * the folder's mount is cloned on the host side (open_tree), made
 * nosuid/nodev (and read-only when asked) while detached, and moved onto
 * the destination by a short-lived child that joined the container's mount
 * namespace (setns: a threaded process cannot; the child shares our memory
 * as a vfork does, so nothing is copied). The destination's folders
 * are made as needed, each opened without following symlinks, so nothing
 * inside the container can steer the mount elsewhere.
 *
 * Also files of the supervisor's own (a sandbox's secrets) on a tmpfs
 * bound the same way (sup_nsmount_files).
 *
 * Owns that one operation; it must not know volumes, sandboxes or
 * runtimes beyond the pid of a process inside the container. Blocking (a
 * clone and a few system calls: about half a millisecond),
 * thread-safe; needs root and Linux >= 5.12 (mount_setattr). */
#ifndef SUP_NSMOUNT_H
#define SUP_NSMOUNT_H

#include <stdbool.h>
#include <sys/types.h>

#include "sbx/err.h"

/* Bind host folder src (a mount point or any folder) at dest (absolute,
 * normalised) inside the mount namespace of pid. 0; -EINVAL when a folder
 * of dest is a symlink or a file inside (the message names it: the
 * caller's path is wrong); else an error naming the step that failed. */
int sup_nsmount_bind(pid_t pid, const char *src, const char *dest, bool read_only, sbx_err *err);

/* files (name: one component) on a tmpfs of their own, each 0400 owned by
 * uid:gid (the folder 0500), made read-only and bound at dest inside the
 * mount namespace of pid. The tmpfs never has a path on the host: it is
 * made detached (fsopen, fsmount) and lives as long as the container's
 * mount of it, so nothing of the host leads to what it holds (secrets).
 * Errors as sup_nsmount_bind's; -EEXIST a name twice. */
typedef struct sup_nsmount_file {
	const char *name;
	const char *data;
	size_t len;
} sup_nsmount_file;
int sup_nsmount_files(pid_t pid, const char *dest, const sup_nsmount_file *files, size_t n, uid_t uid,
		      gid_t gid, sbx_err *err);

#endif
