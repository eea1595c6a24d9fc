/* A sandbox's writable layer (its overlay's upper folder) as a snapshot
 * archive, and back: a pax tar compressed with zstd, written and read with
 * libarchive.
 *
 * Packing walks the upper folder through folder fds, never following a
 * symlink nor leaving its file system, and writes regular files (sparse
 * ones by their data runs), folders, symlinks, hard links (once with data,
 * then as links), fifos, modes, owners, mtimes and user.* xattrs. What
 * overlayfs writes for a deletion becomes what OCI layers say: a 0/0
 * character device NAME is an empty member .wh.NAME, a folder marked
 * trusted.overlay.opaque gets a member DIR/.wh..wh..opq. A file the guest
 * named .wh.* itself cannot be told from a deletion: it refuses the
 * snapshot. Sockets and other device nodes are left out (counted).
 *
 * Unpacking is sup_img_layer_unpack's (hostile until proven otherwise:
 * everything written through fds from the destination down, absolute
 * names, "..", symlinked folders and hard links out of the layer refused)
 * with a snapshot's rules: device nodes and sockets refuse the archive,
 * setuid and setgid bits are stripped, user.* xattrs written, no digest
 * checked. The caller unpacks into a layer it may throw away.
 *
 * Owns the archive format only: where an archive lives and when a sandbox
 * is frozen are the caller's. Blocking, thread-safe, no state. */
#ifndef SUP_LAYER_TAR_H
#define SUP_LAYER_TAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"

#define SUP_LAYER_WH_PREFIX ".wh."
#define SUP_LAYER_WH_OPAQUE ".wh..wh..opq"

typedef struct sup_layer_tar_info {
	uint64_t bytes;   /* file data */
	uint64_t entries; /* members written or read */
	uint64_t skipped; /* packing: sockets and device nodes left out */
	uint64_t setid_dropped; /* unpacking */
} sup_layer_tar_info;

/* Write the layer below the folder upper_fd to out_fd (at its position).
 * -EINVAL when the guest named a file .wh.*; -EIO (err quoting libarchive)
 * when the archive could not be written; -ENOSPC from the store's disk. */
int sup_layer_tar_pack(int upper_fd, int out_fd, sup_layer_tar_info *info, sbx_err *err);

/* Unpack the archive read from in_fd into the empty-or-fresh folder
 * upper_fd; at most max_bytes of file data and max_entries members.
 * -ENOSPC when the layer's file system fills; -EILSEQ (err says which
 * member and why) for an archive refused: corrupt, hostile, too large. */
int sup_layer_tar_unpack(int in_fd, int upper_fd, uint64_t max_bytes, uint64_t max_entries,
			 sup_layer_tar_info *info, sbx_err *err);

/* The member name an overlay whiteout of name becomes (".wh." name) into
 * out: 0, or -ENAMETOOLONG when it does not fit in out or in NAME_MAX. */
int sup_layer_wh_name(const char *name, char *out, size_t cap);

/* Whether a name in the upper folder reads as an OCI whiteout (".wh."...). */
bool sup_layer_wh_reserved(const char *name);

#endif
