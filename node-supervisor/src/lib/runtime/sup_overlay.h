/* Overlay root file systems of sandboxes on the host: mounting one (image as
 * the read-only lower layer, a per-sandbox upper and work folder), unmounting
 * it, and unmounting whatever an earlier run left mounted below a folder
 * (from /proc/self/mountinfo). Owns no state; it must not remove files. */
#ifndef SUP_OVERLAY_H
#define SUP_OVERLAY_H

#include "sbx/err.h"

/* A path overlayfs can take as an option: absolute, and free of the
 * characters its option parser treats specially (',' ':' '\\'), of control
 * characters and of "." / ".." components and empty ones ("//"). */
int sup_overlay_check_path(const char *what, const char *path, sbx_err *err);

/* Mount an overlay on target (nosuid, nodev); lower is one folder or
 * several, top first, joined by ':'. It is mounted "volatile" where
 * the kernel has it: the upper layer of a sandbox is thrown away after a host
 * crash anyway, and skipping its syncs keeps a guest's fsync storms from
 * stalling the host's disk for every other sandbox. */
int sup_overlay_mount(const char *lower, const char *upper, const char *work,
		      const char *target, sbx_err *err);

/* Unmount target; not mounted or missing is not an error. A busy mount is
 * detached lazily (MNT_DETACH) rather than left behind. */
int sup_overlay_umount(const char *target, sbx_err *err);

/* Unmount every mount strictly below the folder prefix (deepest first).
 * Returns how many it unmounted. */
int sup_overlay_umount_under(const char *prefix, sbx_err *err);

#endif
