/* sup_runc_fill: see sup_runc_fill in sup_runc.h.
 *
 * The fork slot is a lower layer of the sandbox's overlay, mounted empty.
 * The overlay looks a name up in its layers once and keeps what it found
 * (its dentries), so files put into the slot after the mount show for
 * every path nothing has looked at yet, and are missed (or an image file a
 * whiteout deletes is still shown) where something did: the kernel calls
 * such changes undefined. A sandbox not handed out yet has looked at
 * little (the runtime's mount points, the agent's start), so the fill
 * checks instead of trusting: every path of the layer is looked up through
 * the mounted tree afterwards and must show what the layer holds (the same
 * file, by its inode's figures: the slot's names are hard links into the
 * layer; a deletion: nothing; a folder the layer makes opaque: nothing of
 * the image's). Any difference is -ESTALE and the caller makes the fork
 * another way. */
#include "sup_runc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_disk.h"

#define FILL_TIMEOUT_MS 120000u
#define DEPTH_MAX 128
#define OPEN_DIR (O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)

static bool whiteout(const struct stat *st)
{
	return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}

static bool opaque(int dirfd)
{
	char v[2];
	return fgetxattr(dirfd, "trusted.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y';
}

static bool dotdot(const char *n)
{
	return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2]));
}

static int stale(sbx_err *err, const char *what, const char *name)
{
	return sbx_err_set(err, -ESTALE, "the mounted tree does not show the layer's %.200s (%s)",
			   name, what);
}

/* A stream of folder dirfd's names, on a descriptor of its own; NULL
 * with err set. */
static DIR *read_dir(int dirfd, sbx_err *err)
{
	int fd = openat(dirfd, ".", OPEN_DIR);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		sbx_err_sys(err, -errno, "fork fill: read a folder");
		if (fd >= 0)
			close(fd);
	}
	return d;
}

/* Every name the merged folder shows is the layer's or the sandbox's own
 * upper's: nothing of the image shows through an opaque folder. */
static int check_opaque(int layer, int upper, int merged, sbx_err *err)
{
	SBX_AUTO_CLOSEDIR DIR *d = read_dir(merged, err);
	if (!d)
		return err->code;
	struct dirent *de;
	while ((de = readdir(d))) {
		struct stat st;
		if (dotdot(de->d_name))
			continue;
		if (fstatat(layer, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && !whiteout(&st))
			continue;
		if (upper >= 0 && fstatat(upper, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			continue;
		return stale(err, "an opaque folder shows an image file", de->d_name);
	}
	return 0;
}

static int check_dir(int layer, int upper, int merged, unsigned depth, sbx_err *err);

/* One entry of the layer against the merged tree. */
static int check_entry(int layer, int upper, int merged, const char *name, unsigned depth,
		       sbx_err *err)
{
	struct stat ls, us, ms;
	if (fstatat(layer, name, &ls, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_sys(err, -errno, "fork fill: %.200s", name);
	bool has_up = upper >= 0 && fstatat(upper, name, &us, AT_SYMLINK_NOFOLLOW) == 0;
	bool shown = fstatat(merged, name, &ms, AT_SYMLINK_NOFOLLOW) == 0;
	if (whiteout(&ls))
		return shown && !has_up ? stale(err, "a deleted file shows", name) : 0;
	if (!shown)
		return stale(err, "missing", name);
	if (has_up && !(S_ISDIR(us.st_mode) && S_ISDIR(ls.st_mode)))
		return 0; /* the sandbox's own file (its /etc/hostname) is above */
	if ((ms.st_mode & S_IFMT) != (ls.st_mode & S_IFMT))
		return stale(err, "another kind of file", name);
	if (!S_ISDIR(ls.st_mode)) {
		/* a hard link of the layer's: its inode, seen through the overlay */
		if (ms.st_size != ls.st_size || ms.st_mode != ls.st_mode || ms.st_uid != ls.st_uid ||
		    ms.st_mtim.tv_sec != ls.st_mtim.tv_sec ||
		    ms.st_mtim.tv_nsec != ls.st_mtim.tv_nsec)
			return stale(err, "another file", name);
		return 0;
	}
	if (!has_up && (ms.st_mode != ls.st_mode || ms.st_uid != ls.st_uid || ms.st_gid != ls.st_gid))
		return stale(err, "another folder", name);
	SBX_AUTO_CLOSE int l = openat(layer, name, OPEN_DIR);
	SBX_AUTO_CLOSE int m = openat(merged, name, OPEN_DIR);
	SBX_AUTO_CLOSE int u = has_up ? openat(upper, name, OPEN_DIR) : -1;
	if (l < 0 || m < 0 || (has_up && u < 0))
		return stale(err, "a folder that does not open", name);
	return check_dir(l, u, m, depth + 1, err);
}

static int check_dir(int layer, int upper, int merged, unsigned depth, sbx_err *err)
{
	if (depth > DEPTH_MAX)
		return sbx_err_set(err, -ESTALE, "fork fill: the layer is deeper than %d folders", DEPTH_MAX);
	int r = opaque(layer) ? check_opaque(layer, upper, merged, err) : 0;
	if (r < 0)
		return r;
	SBX_AUTO_CLOSEDIR DIR *d = read_dir(layer, err);
	if (!d)
		return err->code;
	struct dirent *de;
	while (r == 0 && (de = readdir(d)))
		if (!dotdot(de->d_name))
			r = check_entry(layer, upper, merged, de->d_name, depth, err);
	return r;
}

static int slot_empty(const char *slot, sbx_err *err)
{
	SBX_AUTO_CLOSEDIR DIR *d = opendir(slot);
	if (!d)
		return sbx_err_sys(err, -errno, "fork slot %s", slot);
	struct dirent *de;
	while ((de = readdir(d)))
		if (!dotdot(de->d_name))
			return sbx_err_set(err, -EBUSY, "fork slot %s: filled already", slot);
	return 0;
}

static int path_in(char *out, const char *dir, const char *rel, sbx_err *err)
{
	if (snprintf(out, PATH_MAX, "%s/%s", dir, rel) >= PATH_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "fork fill: path too long");
	return 0;
}

int sup_runc_fill(const sup_runc_box *box, const char *layer, sbx_err *err)
{
	char slot[PATH_MAX], rootfs[PATH_MAX], upper[PATH_MAX], from[PATH_MAX + 2];
	int r = path_in(slot, box->dir, SUP_RUNC_FORK_SLOT, err);
	r = r ?: path_in(rootfs, box->dir, "bundle/rootfs", err);
	r = r ?: path_in(upper, box->dir, SUP_DISK_UPPER, err);
	r = r ?: path_in(from, layer, ".", err);
	r = r ?: slot_empty(slot, err);
	if (r < 0)
		return r;
	/* hard links: the layer's data is not copied again, and the overlay
	 * never writes a lower layer (a write copies the file up) */
	const char *argv[] = {"cp", "-a", "--link", from, slot, NULL};
	char errout[256] = "";
	sup_runc_cmd c = {.argv = argv, .stdout_fd = -1, .stderr_fd = -1, .errout = errout,
			  .errout_cap = sizeof(errout), .timeout_ms = FILL_TIMEOUT_MS};
	r = sup_runc_cmd_run(&c, err);
	if (r > 0)
		return sbx_err_set(err, -EIO, "fork fill of %s: cp exit %d: %s", box->id, r, errout);
	if (r < 0)
		return sbx_err_wrap(err, "fork fill of %s", box->id);
	SBX_AUTO_CLOSE int l = open(layer, OPEN_DIR);
	SBX_AUTO_CLOSE int u = open(upper, OPEN_DIR);
	SBX_AUTO_CLOSE int m = open(rootfs, OPEN_DIR);
	if (l < 0 || u < 0 || m < 0)
		return sbx_err_sys(err, -errno, "fork fill of %s: open its layers", box->id);
	r = check_dir(l, u, m, 0, err);
	return r < 0 ? sbx_err_wrap(err, "fork fill of %s", box->id) : 0;
}
