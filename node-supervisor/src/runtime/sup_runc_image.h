/* Images of the local runc backend: what the read-only lower layer of a
 * sandbox's overlay is, and which host paths are bound into it.
 *
 * "host": a skeleton root made once under <state_dir>/images/host/rootfs
 * (mount points, a minimal /etc with root, the sandbox user uid 1000 and
 * nobody, /workspace, /home/sandbox), with the host's /usr, /bin, /sbin,
 * /lib* and a few /etc entries bound read-only at create time. Where the
 * host path is a symlink (usrmerge: /bin -> usr/bin) the skeleton holds the
 * same symlink instead of a bind mount.
 * A rootfs folder: its absolute path, used as it is.
 *
 * Owns images/; it must not touch sandboxes/ or run the runtime. */
#ifndef SUP_RUNC_IMAGE_H
#define SUP_RUNC_IMAGE_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "sbx/err.h"
#include "sup_bundle.h"

#define SUP_RUNC_IMAGE_MAX_BINDS 16
#define SUP_RUNC_SANDBOX_UID 1000
#define SUP_RUNC_SANDBOX_GID 1000

typedef struct sup_runc_image {
	char lower[PATH_MAX]; /* overlay lower folder */
	bool host;            /* the "host" image */
	sup_bundle_bind binds[SUP_RUNC_IMAGE_MAX_BINDS]; /* static strings */
	size_t n_binds;
	bool etc_dir; /* lower has a real /etc folder (mode and owner below) */
	mode_t etc_mode;
	uid_t etc_uid;
	gid_t etc_gid;
} sup_runc_image;

/* Make (or keep, when its manifest still matches the host) the skeleton of
 * the "host" image. Not thread-safe: call once at start. */
int sup_runc_image_prepare_host(const char *state_dir, sbx_err *err);

/* Resolve "host" or a rootfs folder path (absolute, no "." / ".." parts, an
 * existing folder, not "/" and not inside the state folder). */
int sup_runc_image_resolve(const char *state_dir, const char *image, sup_runc_image *img,
			   sbx_err *err);

#endif
