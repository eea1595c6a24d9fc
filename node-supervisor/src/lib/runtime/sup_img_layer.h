/* One image layer (a tar, plain or compressed) unpacked into a folder the
 * caller made empty, as overlayfs reads a lower layer: OCI whiteouts
 * (.wh.NAME) become 0/0 character devices, opaque markers (.wh..wh..opq)
 * the trusted.overlay.opaque xattr on their folder.
 *
 * A layer is hostile until proven otherwise. Everything is written through
 * folder fds from the destination down, component by component, never
 * following a symlink, so nothing lands outside the folder: absolute names
 * and ".." components refuse the layer, as does a name whose folder part is
 * a symlink or a hard link whose target is outside the layer or not a
 * regular file. Device nodes and sockets are left out (counted), setuid and
 * setgid bits dropped unless allowed, xattrs not written (a layer's
 * trusted.overlay.* would steer the overlay; a snapshot's user.* are). Past the limits (bytes of
 * file data, entries) the layer is refused. The digests of the blob as
 * stored and of the tar inside it (OCI's diff_id) are checked in the same
 * pass; a mismatch refuses the layer.
 *
 * Owns unpacking only; the caller unpacks into a temporary folder and
 * removes it on failure (nothing is cleaned here), and decides names. */
#ifndef SUP_IMG_LAYER_H
#define SUP_IMG_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include <archive.h>

#include "sbx/err.h"

typedef struct sup_img_limits {
	uint64_t max_layer_bytes; /* file data of one layer */
	uint64_t max_entries;     /* entries of one layer */
	bool allow_setid;         /* keep setuid/setgid bits */
	/* A snapshot's layer (sup_layer_tar.h) rather than an image's: its
	 * user.* xattrs are written (no other namespace), and a device node or
	 * socket refuses it instead of being left out. */
	bool snapshot;
} sup_img_limits;

typedef struct sup_img_layer_info {
	uint64_t bytes;       /* file data written */
	uint64_t entries;
	uint64_t skipped;     /* device nodes and sockets left out */
	uint64_t setid_dropped;
} sup_img_layer_info;

/* Unpack the layer read from blob_fd (at its start) into dest_fd.
 * blob_hex: the blob's sha256 as the manifest names it (NULL: the blob is
 * the tar itself, as in `docker save`); diff_hex: the tar's sha256 (the
 * config's diff_id; NULL: not checked). */
int sup_img_layer_unpack(int blob_fd, const char *blob_hex, const char *diff_hex, int dest_fd,
			 const sup_img_limits *lim, sup_img_layer_info *info, sbx_err *err);

/* Whether a member name may be unpacked: relative, no ".." component, no
 * component longer than NAME_MAX, at most 128 deep. 0 or -EPERM / -ELOOP /
 * -ENAMETOOLONG with err saying why. */
int sup_img_layer_check_name(const char *path, sbx_err *err);

/* Write the data of a's current member into fd (sparse members by their
 * offsets); *total counts the bytes, past max the member is refused
 * (-EFBIG). Shared with the import's staging. */
int sup_img_copy_data(struct archive *a, int fd, uint64_t *total, uint64_t max, const char *member,
		      sbx_err *err);

#endif
