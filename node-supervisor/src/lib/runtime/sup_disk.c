/* sup_disk: see sup_disk.h. Layout below a sandbox's folder:
 *   disk.img         sparse ext4 image (no journal: the layer is thrown away
 *                    after a host crash, as the overlay is mounted volatile)
 *   disk/            its mount (nosuid, nodev)
 *   disk/upper, disk/work   the overlay's folders (made by sup_runc)
 * and the template: <state>/images/disk/disk.img. */
#include "sup_disk.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <linux/quota.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_fsutil.h"
#include "sup_overlay.h"
#include "sup_runc_cmd.h"

#define BLOCK 4096u
/* ext4 keeps up to this many clusters out of every allocation but its own
 * metadata's for a delete (its default reserved_clusters on a large file
 * system); a figure never leaves it less. */
#define FLOOR_CLUSTERS 4096u
#define LOOP_TRIES 16
#define MKFS_TIMEOUT_MS 30000u

/* No journal (see above); no resize inode and one superblock copy: the
 * image never grows, and each of those costs blocks written per image. The
 * inode tables are left unzeroed: the file is new and sparse, so they read
 * as zeros anyway (and noinit_itable keeps the kernel from zeroing them). */
static const char *const mkfs_argv[] = {
	"mkfs.ext4", "-q", "-F", "-b", "4096", "-m", "0",
	"-O", "^has_journal,^resize_inode,sparse_super2",
	"-E", "lazy_itable_init=1,nodiscard,num_backup_sb=0",
};
#define MKFS_ARGC (sizeof(mkfs_argv) / sizeof(mkfs_argv[0]))
/* A volume outlives a host crash, so its file system keeps ext4's journal
 * (the one option that differs, argv[8]). */
#define MKFS_FEATURES 8
static const char mkfs_features_journal[] = "^resize_inode,sparse_super2";

static int path_in(const char *dir, const char *name, char *out, size_t cap, sbx_err *err)
{
	int n = snprintf(out, cap, "%s/%s", dir, name);
	if (n < 0 || (size_t)n >= cap)
		return sbx_err_set(err, -ENAMETOOLONG, "%s/%s: path too long", dir, name);
	return 0;
}

static int run_mkfs(const char *image, bool journal, sbx_err *err)
{
	const char *argv[MKFS_ARGC + 2];
	memcpy(argv, mkfs_argv, sizeof(mkfs_argv));
	if (journal)
		argv[MKFS_FEATURES] = mkfs_features_journal;
	argv[MKFS_ARGC] = image;
	argv[MKFS_ARGC + 1] = NULL;
	char errout[256];
	sup_runc_cmd c = { .argv = argv, .stdout_fd = -1, .stderr_fd = -1, .errout = errout,
			   .errout_cap = sizeof(errout), .timeout_ms = MKFS_TIMEOUT_MS };
	int r = sup_runc_cmd_run(&c, err);
	if (r < 0)
		return sbx_err_wrap(err, "mkfs.ext4 %s", image);
	if (r > 0)
		return sbx_err_set(err, -EIO, "mkfs.ext4 %s: exit %d: %s", image, r, errout);
	return 0;
}

/* Attach img_fd to a free loop device; returns the device's fd (keep it
 * open until the file system is mounted: the device detaches itself at its
 * last close while nothing is mounted from it). */
static int loop_attach(int img_fd, const char *image, char *dev, size_t devcap, sbx_err *err)
{
	SBX_AUTO_CLOSE int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return sbx_err_sys(err, -errno, "open /dev/loop-control");
	uint32_t flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_DIRECT_IO;
	for (int tries = 0; tries < LOOP_TRIES; tries++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0)
			return sbx_err_sys(err, -errno, "find a free loop device");
		snprintf(dev, devcap, "/dev/loop%d", n);
		SBX_AUTO_CLOSE int lfd = open(dev, O_RDWR | O_CLOEXEC);
		if (lfd < 0)
			return sbx_err_sys(err, -errno, "open %s", dev);
		struct loop_config lc;
		memset(&lc, 0, sizeof(lc));
		lc.fd = (uint32_t)img_fd;
		lc.info.lo_flags = flags;
		/* only shown by losetup: its tail is the part that tells */
		size_t len = strlen(image), cap = sizeof(lc.info.lo_file_name) - 1;
		memcpy(lc.info.lo_file_name, len > cap ? image + len - cap : image,
		       len > cap ? cap : len);
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) == 0)
			return sbx_steal_fd(&lfd);
		if (errno == EINVAL && (flags & LO_FLAGS_DIRECT_IO)) {
			/* the state folder's file system takes no O_DIRECT:
			 * buffered it is (the image's pages are cached twice) */
			flags &= ~(uint32_t)LO_FLAGS_DIRECT_IO;
			tries--;
			continue;
		}
		if (errno != EBUSY) /* EBUSY: another process took it first */
			return sbx_err_sys(err, -errno, "attach %s to %s", image, dev);
	}
	return sbx_err_set(err, -EBUSY, "attach %s: no free loop device after %d tries", image,
			   LOOP_TRIES);
}

/* Attach image to a loop device and mount it on mnt. */
static int attach_mount(int fd, const char *image, const char *mnt, sbx_err *err)
{
	char dev[32];
	SBX_AUTO_CLOSE int lfd = loop_attach(fd, image, dev, sizeof(dev), err);
	if (lfd < 0)
		return lfd;
	if (mount(dev, mnt, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME,
		  "noinit_itable,errors=remount-ro") < 0)
		return sbx_err_sys(err, -errno, "mount %s (%s) on %s", dev, image, mnt);
	return 0;
}

/* A new sparse image with room for room bytes, ext4 made on it; returns
 * its fd (read-write). */
static int new_image(const char *image, uint64_t room, bool journal, sbx_err *err)
{
	/* ext4 keeps about 1/64 for inode tables and up to 16 MiB for its
	 * own allocations out of what it shows free (a journal: up to 64 MiB
	 * more on a large file system) */
	uint64_t bytes = (room + room / 32 + ((journal ? 128ull : 64ull) << 20)) & ~((1ull << 20) - 1);
	SBX_AUTO_CLOSE int fd = open(image, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "create %s", image);
	if (ftruncate(fd, (off_t)bytes) < 0)
		return sbx_err_sys(err, -errno, "size %s", image);
	int r = run_mkfs(image, journal, err);
	return r < 0 ? r : sbx_steal_fd(&fd);
}

int sup_disk_template(const char *state_dir, uint64_t ceiling, sbx_err *err)
{
	char dir[PATH_MAX], image[PATH_MAX];
	int r = path_in(state_dir, "images/disk", dir, sizeof(dir), err);
	r = r ?: path_in(dir, SUP_DISK_IMAGE, image, sizeof(image), err);
	if (r < 0)
		return r;
	/* made anew at every start: ceilings change */
	r = sup_fs_rm_tree(dir, err);
	if (r < 0)
		return sbx_err_wrap(err, "disk template");
	if (mkdir(dir, 0700) < 0)
		return sbx_err_sys(err, -errno, "disk template: mkdir %s", dir);
	SBX_AUTO_CLOSE int fd = new_image(image, ceiling, false, err);
	if (fd < 0)
		return sbx_err_wrap(err, "disk template");
	return 0;
}

/* Copy the template's data ranges only: the copy stays as sparse as it. */
static int copy_sparse(int src, int dst, const char *image, sbx_err *err)
{
	struct stat st;
	if (fstat(src, &st) < 0 || ftruncate(dst, st.st_size) < 0)
		return sbx_err_sys(err, -errno, "size %s", image);
	off_t pos = 0;
	for (;;) {
		off_t data = lseek(src, pos, SEEK_DATA);
		if (data < 0 && errno == ENXIO)
			return 0;
		off_t hole = data < 0 ? -1 : lseek(src, data, SEEK_HOLE);
		if (hole < 0)
			return sbx_err_sys(err, -errno, "read the disk template");
		for (off_t in = data, out = data; in < hole;) {
			ssize_t n = copy_file_range(src, &in, dst, &out, (size_t)(hole - in), 0);
			if (n < 0)
				return sbx_err_sys(err, -errno, "copy the disk template to %s", image);
			if (n == 0)
				return sbx_err_set(err, -EIO, "copy the disk template: it shrank");
		}
		pos = hole;
	}
}

/* /sys/fs/ext4/<device>/reserved_clusters of the file system mounted at
 * <dir>/disk, which must be a loop device's. */
static int resv_path(const char *dir, char *out, size_t cap, sbx_err *err)
{
	char mnt[PATH_MAX], link[64], target[PATH_MAX];
	int r = path_in(dir, SUP_DISK_MOUNT, mnt, sizeof(mnt), err);
	if (r < 0)
		return r;
	struct stat st;
	if (stat(mnt, &st) < 0)
		return sbx_err_sys(err, -errno, "disk %s", mnt);
	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	ssize_t n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return sbx_err_sys(err, -errno, "disk %s: device %s", mnt, link);
	target[n] = '\0';
	const char *name = strrchr(target, '/');
	name = name ? name + 1 : target;
	if (strncmp(name, "loop", 4) != 0)
		return sbx_err_set(err, -ENODEV, "disk %s: not mounted from a loop device (%s)", mnt,
				   name);
	snprintf(out, cap, "/sys/fs/ext4/%.32s/reserved_clusters", name);
	return 0;
}

static int write_resv(const char *path, uint64_t clusters, sbx_err *err)
{
	char v[32];
	int len = snprintf(v, sizeof(v), "%llu", (unsigned long long)clusters);
	SBX_AUTO_CLOSE int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, v, (size_t)len) != len)
		return sbx_err_sys(err, -errno, "write %s to %s", v, path);
	return 0;
}

/* Hold a mounted layer to size bytes: all its free clusters but those
 * reserved. A fresh layer (whole: false) gets size bytes on top of what
 * ext4's root folder already takes; a whole one (a volume, mounted again
 * after a host restart with files in it) is held to size bytes in all, so
 * that its figure is the same at every mount: reserved_clusters lives only
 * as long as the mount. */
static int hold(const char *dir, const char *mnt, uint64_t size, bool whole, sbx_err *err)
{
	struct statfs fs;
	if (statfs(mnt, &fs) < 0)
		return sbx_err_sys(err, -errno, "statfs %s", mnt);
	uint64_t want = (size + BLOCK - 1) / BLOCK, free = (uint64_t)fs.f_bfree;
	uint64_t used = whole ? (uint64_t)(fs.f_blocks - fs.f_bfree) : 0;
	if (free + used < want + FLOOR_CLUSTERS)
		return sbx_err_set(err, -ENOSPC, "disk %s: %llu bytes wanted, the image holds %llu",
				   mnt, (unsigned long long)size,
				   (unsigned long long)(free + used > FLOOR_CLUSTERS ? (free + used - FLOOR_CLUSTERS) * BLOCK : 0));
	char path[PATH_MAX];
	int r = resv_path(dir, path, sizeof(path), err);
	/* used over want (a figure lowered by hand): no room at all, and
	 * ext4 takes at most every cluster it has */
	return r ?: write_resv(path, used >= want ? free : free + used - want, err);
}

int sup_disk_make(const char *state_dir, const char *dir, uint64_t size, sbx_err *err)
{
	char tpl[PATH_MAX], image[PATH_MAX], mnt[PATH_MAX];
	int r = path_in(state_dir, "images/disk/" SUP_DISK_IMAGE, tpl, sizeof(tpl), err);
	r = r ?: path_in(dir, SUP_DISK_IMAGE, image, sizeof(image), err);
	r = r ?: path_in(dir, SUP_DISK_MOUNT, mnt, sizeof(mnt), err);
	if (r < 0)
		return r;
	SBX_AUTO_CLOSE int src = open(tpl, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (src < 0)
		return sbx_err_sys(err, -errno, "disk template %s", tpl);
	SBX_AUTO_CLOSE int fd = open(image, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "create %s", image);
	r = copy_sparse(src, fd, image, err);
	if (r < 0)
		return r;
	if (mkdir(mnt, 0700) < 0)
		return sbx_err_sys(err, -errno, "mkdir %s", mnt);
	r = attach_mount(fd, image, mnt, err);
	if (r == 0 && (r = hold(dir, mnt, size, false, err)) < 0) {
		sbx_err ignored;
		sup_overlay_umount(mnt, &ignored);
	}
	return r;
}

/* The loop device image is attached to, if any (its name into dev). */
static bool loop_of(const char *image, char *dev, size_t cap)
{
	SBX_AUTO_CLOSEDIR DIR *d = opendir("/sys/block");
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char p[PATH_MAX], backing[PATH_MAX];
		sbx_err ignored;
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", de->d_name);
		ssize_t n = sup_fs_read_small(AT_FDCWD, p, backing, sizeof(backing), &ignored);
		if (n <= 0)
			continue;
		backing[strcspn(backing, "\n")] = '\0';
		if (strcmp(backing, image) == 0) {
			snprintf(dev, cap, "/dev/%.20s", de->d_name);
			return true;
		}
	}
	return false;
}

int sup_disk_make_volume(const char *dir, uint64_t size, uid_t uid, gid_t gid, sbx_err *err)
{
	char image[PATH_MAX], mnt[PATH_MAX];
	int r = path_in(dir, SUP_DISK_IMAGE, image, sizeof(image), err);
	r = r ?: path_in(dir, SUP_DISK_MOUNT, mnt, sizeof(mnt), err);
	if (r < 0)
		return r;
	SBX_AUTO_CLOSE int fd = new_image(image, size, true, err);
	if (fd < 0)
		return fd;
	if (mkdir(mnt, 0700) < 0)
		return sbx_err_sys(err, -errno, "mkdir %s", mnt);
	r = attach_mount(fd, image, mnt, err);
	if (r < 0)
		return r;
	/* its root is the sandbox user's: what a sandbox writes there is
	 * written as that user */
	if (chown(mnt, uid, gid) < 0 || chmod(mnt, 0755) < 0)
		r = sbx_err_sys(err, -errno, "volume %s: own its root", mnt);
	if (r == 0)
		r = hold(dir, mnt, size, true, err);
	if (r < 0) {
		sbx_err ignored;
		sup_overlay_umount(mnt, &ignored);
	}
	return r;
}

int sup_disk_mount_volume(const char *dir, uint64_t size, sbx_err *err)
{
	char image[PATH_MAX], mnt[PATH_MAX];
	int r = path_in(dir, SUP_DISK_IMAGE, image, sizeof(image), err);
	r = r ?: path_in(dir, SUP_DISK_MOUNT, mnt, sizeof(mnt), err);
	if (r < 0)
		return r;
	struct stat top, in;
	if (stat(dir, &top) < 0 || stat(mnt, &in) < 0)
		return sbx_err_sys(err, -errno, "volume %s", dir);
	if (top.st_dev != in.st_dev)
		return 0; /* mounted still (an earlier run of the supervisor) */
	char dev[32];
	if (loop_of(image, dev, sizeof(dev))) {
		/* still attached: a sandbox's bind holds its file system. A
		 * second device on the image would be a second ext4 mount of it;
		 * the same device is the same file system, mounted here again */
		if (mount(dev, mnt, "ext4", MS_NOSUID | MS_NODEV | MS_NOATIME, NULL) < 0)
			return sbx_err_sys(err, -errno, "mount %s (%s, attached already) on %s", dev,
					   image, mnt);
		return 0;
	}
	SBX_AUTO_CLOSE int fd = open(image, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "open %s", image);
	r = attach_mount(fd, image, mnt, err);
	if (r == 0 && (r = hold(dir, mnt, size, true, err)) < 0) {
		sbx_err ignored;
		sup_overlay_umount(mnt, &ignored);
	}
	return r;
}

int sup_disk_set(const char *dir, uint64_t from, uint64_t to, sbx_err *err)
{
	int64_t delta = (int64_t)((from + BLOCK - 1) / BLOCK) - (int64_t)((to + BLOCK - 1) / BLOCK);
	if (delta == 0)
		return 0;
	char path[PATH_MAX], buf[32];
	int r = resv_path(dir, path, sizeof(path), err);
	if (r < 0)
		return r;
	if (sup_fs_read_small(AT_FDCWD, path, buf, sizeof(buf), err) < 0)
		return (int)err->code;
	char *end;
	errno = 0;
	unsigned long long cur = strtoull(buf, &end, 10);
	if (errno || end == buf)
		return sbx_err_set(err, -EIO, "%s: '%.20s'", path, buf);
	if ((int64_t)cur + delta < (int64_t)FLOOR_CLUSTERS)
		return sbx_err_set(err, -ENOSPC, "disk %s: %llu bytes asked, the image holds at most %llu",
				   dir, (unsigned long long)to,
				   (unsigned long long)(from + (cur - FLOOR_CLUSTERS) * BLOCK));
	return write_resv(path, (uint64_t)((int64_t)cur + delta), err);
}

int sup_disk_used(const char *dir, uint64_t *used, sbx_err *err)
{
	char mnt[PATH_MAX];
	int r = path_in(dir, SUP_DISK_MOUNT, mnt, sizeof(mnt), err);
	if (r < 0)
		return r;
	struct statfs fs;
	if (statfs(mnt, &fs) < 0)
		return sbx_err_sys(err, -errno, "statfs %s", mnt);
	*used = (uint64_t)(fs.f_blocks - fs.f_bfree) * (uint64_t)fs.f_bsize;
	return 0;
}

int sup_disk_unmount(const char *dir, sbx_err *err)
{
	char mnt[PATH_MAX];
	int r = path_in(dir, SUP_DISK_MOUNT, mnt, sizeof(mnt), err);
	return r ?: sup_overlay_umount(mnt, err);
}

int sup_disk_sweep(const char *below, sbx_err *err)
{
	size_t blen = strlen(below);
	SBX_AUTO_CLOSEDIR DIR *d = opendir("/sys/block");
	if (!d)
		return sbx_err_sys(err, -errno, "open /sys/block");
	int freed = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		char p[PATH_MAX], backing[PATH_MAX];
		snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", de->d_name);
		sbx_err ignored;
		if (sup_fs_read_small(AT_FDCWD, p, backing, sizeof(backing), &ignored) < 0)
			continue; /* not attached */
		if (strncmp(backing, below, blen) != 0 || backing[blen] != '/')
			continue;
		snprintf(p, sizeof(p), "/dev/%s", de->d_name);
		SBX_AUTO_CLOSE int fd = open(p, O_RDONLY | O_CLOEXEC);
		/* busy (still mounted somewhere): the kernel then detaches it at
		 * its last close */
		if (fd < 0 || ioctl(fd, LOOP_CLR_FD) < 0)
			return sbx_err_sys(err, -errno, "detach %s (image %s)", p, backing);
		freed++;
	}
	return freed;
}

int sup_disk_probe(const char *state_dir, char *how, size_t how_size, sbx_err *err)
{
	SBX_AUTO_CLOSE int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return sbx_err_sys(err, -errno,
				   "disk limits need loop devices: open /dev/loop-control");
	char fs[4096];
	if (sup_fs_read_small(AT_FDCWD, "/proc/filesystems", fs, sizeof(fs), err) < 0)
		return sbx_err_wrap(err, "disk limits");
	if (!strstr(fs, "\text4\n"))
		return sbx_err_set(err, -ENOTSUP, "disk limits need ext4, which this kernel lacks");
	const char *argv[] = { "mkfs.ext4", "-V", NULL };
	char errout[128];
	sup_runc_cmd c = { .argv = argv, .stdout_fd = -1, .stderr_fd = -1, .errout = errout,
			   .errout_cap = sizeof(errout), .timeout_ms = MKFS_TIMEOUT_MS };
	int r = sup_runc_cmd_run(&c, err);
	if (r > 0)
		r = sbx_err_set(err, -EIO, "exit %d: %s", r, errout);
	if (r < 0)
		return sbx_err_wrap(err, "disk limits need mkfs.ext4 (Debian's e2fsprogs)");
	/* Project quotas on the state folder's file system would bound a
	 * folder without an image; they are detected and named, not used. */
	SBX_AUTO_CLOSE int sfd = open(state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct if_dqinfo info;
	const char *why = "unknown";
	if (sfd < 0)
		why = "state folder not readable";
	/* QCMD() shifts an int past its sign bit: spell it unsigned */
	else if (syscall(SYS_quotactl_fd, sfd, (int)(((unsigned)Q_GETINFO << SUBCMDSHIFT) | PRJQUOTA),
			 0, &info) == 0)
		why = "on for the state folder, but not used by this version";
	else if (errno == ENOSYS)
		why = "this kernel has no quota support";
	else if (errno == ESRCH)
		why = "not on for the state folder's file system";
	else
		why = strerror(errno);
	snprintf(how, how_size, "an ext4 image per sandbox on a loop device (project quotas: %s)",
		 why);
	return 0;
}
