/* A sandbox's writable layer as a file system of its own, so that the kernel
 * holds what the sandbox writes (the overlay's upper layer: /tmp, /workspace,
 * everything it changes) to its `disk` figure: writes past it fail with
 * ENOSPC inside, for root too. The layer is an ext4 image (a sparse file,
 * <dir>/disk.img) on a loop device, mounted at <dir>/disk, holding the
 * overlay's upper and work folders.
 *
 * The image is as large as the ceiling (--max-resources disk) plus ext4's own
 * overhead; the sandbox's figure is ext4's reserved_clusters
 * (/sys/fs/ext4/<loop device>/reserved_clusters): clusters no allocation may
 * take, root's included (only ext4's own metadata for a delete may dip into
 * them). Changing a figure is one write to that file: no block is allocated
 * or freed, no bitmap read, and `df` inside shows the real use and the
 * figure's room. One template image is made at start (mkfs.ext4); a new
 * layer (at pool fill) is a sparse copy of it, a few hundred KiB of
 * metadata. Kernels without loop devices are refused at start
 * (sup_disk_probe).
 *
 * The loop device detaches itself once the file system is unmounted
 * (LO_FLAGS_AUTOCLEAR), so an unmount is the whole teardown of a device;
 * sup_disk_sweep frees those an earlier run left attached to images below the
 * state folder, and no other.
 *
 * Owns images, their loop devices and mounts; it must not know runtimes or
 * cgroups. Blocking (mkfs runs as a process, file system calls), thread-safe,
 * no state. */
#ifndef SUP_DISK_H
#define SUP_DISK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbx/err.h"

/* Below a sandbox's folder. */
#define SUP_DISK_IMAGE "disk.img"
#define SUP_DISK_MOUNT "disk"
#define SUP_DISK_UPPER "disk/upper"
#define SUP_DISK_WORK "disk/work"

/* Check that this host can make layers (loop-control, ext4, mkfs.ext4), and
 * say how limits are held (a line for the log: the mechanism, and why
 * project quotas are not used). */
int sup_disk_probe(const char *state_dir, char *how, size_t how_size, sbx_err *err);

/* Make (anew) the template of every layer, <state_dir>/images/disk/: an
 * image with room for ceiling bytes. Not thread-safe: once, at start. */
int sup_disk_template(const char *state_dir, uint64_t ceiling, sbx_err *err);

/* Make the layer of the sandbox folder dir from the template, mount it at
 * <dir>/disk and hold it to size bytes. On failure nothing is left mounted
 * (the image file may be left for the caller's removal of dir). */
int sup_disk_make(const char *state_dir, const char *dir, uint64_t size, sbx_err *err);

/* A volume (the same file system, outliving every sandbox): a new image
 * of its own at <dir>/disk.img with room for size bytes (made by mkfs.ext4,
 * with a journal, not copied from the template: a volume is not bound by
 * the sandboxes' ceiling), mounted at <dir>/disk, its root owned by
 * uid:gid, held to size bytes in all (root folder included). On failure
 * nothing is left mounted. */
int sup_disk_make_volume(const char *dir, uint64_t size, uid_t uid, gid_t gid, sbx_err *err);
/* Mount a volume's image made earlier and hold it to size bytes in all
 * again; one still mounted (a supervisor restarted, the host not) is left
 * as it is. */
int sup_disk_mount_volume(const char *dir, uint64_t size, sbx_err *err);

/* Change a made layer's figure from `from` to `to` bytes (one write to its
 * reserved_clusters). A figure under what the sandbox holds already leaves
 * it no room until it deletes; one over what the image can hold is
 * -ENOSPC. */
int sup_disk_set(const char *dir, uint64_t from, uint64_t to, sbx_err *err);

/* Bytes in use in the layer's file system (what the sandbox wrote, and
 * ext4's root folder). */
int sup_disk_used(const char *dir, uint64_t *used, sbx_err *err);

/* Unmount the layer (the loop device goes with it); missing is fine. The
 * image file goes with the folder. */
int sup_disk_unmount(const char *dir, sbx_err *err);

/* Detach every loop device whose image lies below the folder `below` (after
 * an earlier run's mounts there were unmounted). Returns how many. */
int sup_disk_sweep(const char *below, sbx_err *err);

#endif
