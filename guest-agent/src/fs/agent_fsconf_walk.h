/* The second way to resolve a path beneath a root, for kernels without
 * openat2 (gVisor 2022-12 answers ENOSYS; Linux before 5.6): a walk of one
 * component at a time, each opened O_PATH | O_NOFOLLOW from the folder fd
 * before it, so nothing is ever looked up twice by path.
 *
 * It gives what agent_fsconf asks of openat2, and refuses the rest:
 *   RESOLVE_BENEATH       an absolute path, an absolute symlink or a ".."
 *                         above the start: -EXDEV. A ".." climbs from the
 *                         folder fd to its parent and checks that this is the
 *                         folder the walk came down through (device and
 *                         inode); otherwise -EAGAIN, as the kernel answers
 *                         when a rename races a "..".
 *   RESOLVE_NO_SYMLINKS   any symlink on the way: -ELOOP.
 *   RESOLVE_NO_MAGICLINKS any symlink on procfs except those at the root of a
 *                         proc mount (self, thread-self, mounts, net): -ELOOP.
 *                         Magic links (fd/N, root, cwd, exe, ns/...) all live
 *                         in per-process folders; a proc link is never read
 *                         as a path.
 *   RESOLVE_NO_XDEV       a mount crossed: -EXDEV. Mounts are told apart by
 *                         statx's mount id where the kernel has it, else by
 *                         device number (gVisor gives every mount its own).
 * Relative symlinks are followed by the walk itself (target put in front of
 * the rest of the path), at most 40 (-ELOOP beyond, as the kernel). The last
 * component is opened with the caller's flags from its folder fd with
 * O_NOFOLLOW and must be the inode the walk looked at (a swap in between:
 * -EAGAIN), so a kernel that follows a symlink despite O_NOFOLLOW (gVisor
 * does with O_DIRECTORY) cannot be led anywhere.
 *
 * Refused with -EINVAL (never done less safely): O_CREAT without O_EXCL,
 * O_TRUNC, resolve flags other than the four above, and a lookup that may
 * follow symlinks without RESOLVE_BENEATH. A path or symlink chain longer
 * than AGENT_FSCONF_WALK_MAX bytes in all, or deeper than
 * AGENT_FSCONF_WALK_DEPTH folders: -ENAMETOOLONG.
 *
 * This module owns the walk only: no state between calls, no policy. */
#ifndef AGENT_FSCONF_WALK_H
#define AGENT_FSCONF_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define AGENT_FSCONF_WALK_MAX (4 * 4096)
#define AGENT_FSCONF_WALK_DEPTH 4096
#define AGENT_FSCONF_WALK_LINKS 40

/* What openat2(dirfd, path, {flags | O_CLOEXEC, mode, resolve}) would give:
 * the fd or a negative errno. */
int agent_fsconf_walk(int dirfd, const char *path, uint64_t flags, uint64_t mode,
		      uint64_t resolve);

/* Check once that this kernel gives what the walk relies on: O_PATH opens of
 * symlinks with fstat and readlinkat(fd, ""), fstatfs on O_PATH fds (to see
 * procfs). Also picks how mounts are told apart. 0, or a negative errno with
 * why in msg. by_mount_id (may be NULL) says how mounts are told apart. */
int agent_fsconf_walk_probe(char *msg, size_t cap, bool *by_mount_id);

#endif
