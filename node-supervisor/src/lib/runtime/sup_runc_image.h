/* Images of the local runc backend: what the read-only lower layers of a
 * sandbox's overlay are, and which host paths are bound into it.
 *
 * "host": a skeleton root made once under <state_dir>/images/host/rootfs
 * (mount points, a minimal /etc with root, the sandbox user uid 1000 and
 * nobody, /workspace, /home/sandbox), with the host's /usr, /bin, /sbin,
 * /lib* and a few /etc entries bound read-only at create time. Where the
 * host path is a symlink (usrmerge: /bin -> usr/bin) the skeleton holds the
 * same symlink instead of a bind mount.
 * A rootfs folder: its absolute path, used as it is.
 * A store image (sup_img_store.h), by ref or digest: its layers' folders,
 * top first, as overlay lower layers; with agent_bundled the image's own
 * /.sbx/sandbox-agent runs instead of the host's bound over it.
 *
 * Owns images/; it must not touch sandboxes/ or run the runtime. */
#ifndef SUP_RUNC_IMAGE_H
#define SUP_RUNC_IMAGE_H

#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "sbx/err.h"
#include "sup_bundle.h"

#define SUP_RUNC_IMAGE_MAX_BINDS 16
#define SUP_RUNC_SANDBOX_UID 1000
#define SUP_RUNC_SANDBOX_GID 1000

typedef struct sup_runc_image {
	char lower[PATH_MAX]; /* overlay lowerdir: folders, top first, ':' between */
	size_t nlower;
	bool host;            /* the "host" image */
	bool agent_bundled;   /* the image runs its own agent */
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

struct sup_img_store;
/* Resolve "host", a rootfs folder path (absolute, no "." / ".." parts, an
 * existing folder, not "/" and not inside the state folder), or a store
 * image (store may be NULL: none). */
int sup_runc_image_resolve(const char *state_dir, struct sup_img_store *store, const char *image,
			   sup_runc_image *img, sbx_err *err);

/* lstat rel (relative) in the merged lower layers, top first: -ENOENT when
 * no layer has it or a whiteout hides it. */
int sup_runc_image_stat(const sup_runc_image *img, const char *rel, struct stat *st);

#endif
