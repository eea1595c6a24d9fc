/* sup_layer_tar: see sup_layer_tar.h.
 *
 * The walk is ours (openat from the upper folder down) rather than
 * archive_read_disk's traversal, which may change the process's current
 * folder that worker threads share; each member's stat and sparse map come
 * from archive_read_disk_entry_from_file on the member's own fd. */
#include "sup_layer_tar.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "sbx/cleanup.h"
#include "sup_img_layer.h"

#define MAX_DEPTH 128
#define BLOCK (256u * 1024u)
#define XATTR_LIST_MAX_BYTES 65536
#define XATTR_VALUE_MAX_BYTES 65536

bool sup_layer_wh_reserved(const char *name)
{
	return strncmp(name, SUP_LAYER_WH_PREFIX, strlen(SUP_LAYER_WH_PREFIX)) == 0;
}

int sup_layer_wh_name(const char *name, char *out, size_t cap)
{
	size_t n = strlen(SUP_LAYER_WH_PREFIX) + strlen(name);
	if (!name[0] || n > NAME_MAX || n + 1 > cap)
		return -ENAMETOOLONG;
	snprintf(out, cap, "%s%s", SUP_LAYER_WH_PREFIX, name);
	return 0;
}

/* ---- pack -------------------------------------------------------------- */

typedef struct pack {
	struct archive *w;
	struct archive *disk; /* for archive_read_disk_entry_from_file */
	struct archive_entry_linkresolver *links;
	sup_layer_tar_info *info;
	dev_t dev;            /* the upper folder's file system */
	char path[PATH_MAX];  /* the member name being built */
	char *buf;
} pack;

static int ar_err(struct archive *a, const char *what, const char *path, sbx_err *err)
{
	int e = archive_errno(a);
	return sbx_err_set(err, e == ENOSPC ? -ENOSPC : -EIO, "%s '%.200s': %s", what, path,
			   archive_error_string(a) ? archive_error_string(a) : "failed");
}

/* The user.* xattrs of fd into e (trusted.overlay.* is the overlay's own,
 * security.* the host's: neither goes into a snapshot). */
static int add_user_xattrs(int fd, struct archive_entry *e, const char *path, sbx_err *err)
{
	SBX_AUTO_FREE char *list = malloc(XATTR_LIST_MAX_BYTES);
	SBX_AUTO_FREE char *val = malloc(XATTR_VALUE_MAX_BYTES);
	if (!list || !val)
		return sbx_err_set(err, -ENOMEM, "xattrs");
	ssize_t n = flistxattr(fd, list, XATTR_LIST_MAX_BYTES);
	if (n < 0)
		return errno == ENOTSUP ? 0 : sbx_err_sys(err, -errno, "'%.200s': list xattrs", path);
	for (char *k = list; k < list + n; k += strlen(k) + 1) {
		if (strncmp(k, "user.", 5) != 0)
			continue;
		ssize_t v = fgetxattr(fd, k, val, XATTR_VALUE_MAX_BYTES);
		if (v < 0)
			return sbx_err_sys(err, -errno, "'%.200s': xattr %.64s", path, k);
		archive_entry_xattr_add_entry(e, k, val, (size_t)v);
	}
	return 0;
}

static int write_header(pack *p, struct archive_entry *e, sbx_err *err)
{
	if (archive_write_header(p->w, e) != ARCHIVE_OK)
		return ar_err(p->w, "write", archive_entry_pathname(e), err);
	p->info->entries++;
	return 0;
}

/* An empty member that names a deletion or an opaque folder. */
static int write_marker(pack *p, const char *name, sbx_err *err)
{
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return sbx_err_set(err, -ENOMEM, "entry");
	archive_entry_copy_pathname(e, name);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_entry_set_perm(e, 0644);
	archive_entry_set_size(e, 0);
	int r = write_header(p, e, err);
	archive_entry_free(e);
	return r;
}

static int write_data(pack *p, int fd, struct archive_entry *e, sbx_err *err)
{
	/* holes read back as zeros; the pax writer leaves out the bytes its
	 * sparse map names as holes */
	if (lseek(fd, 0, SEEK_SET) < 0)
		return sbx_err_sys(err, -errno, "'%.200s': seek", archive_entry_pathname(e));
	for (;;) {
		ssize_t n = read(fd, p->buf, BLOCK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sbx_err_sys(err, -errno, "'%.200s': read", archive_entry_pathname(e));
		if (n == 0)
			return 0;
		p->info->bytes += (uint64_t)n;
		if (archive_write_data(p->w, p->buf, (size_t)n) < 0)
			return ar_err(p->w, "write", archive_entry_pathname(e), err);
	}
}

/* A regular file, folder or fifo opened as fd (-1: a fifo, not opened). */
static int member(pack *p, int fd, const struct stat *st, sbx_err *err)
{
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return sbx_err_set(err, -ENOMEM, "entry");
	archive_entry_copy_pathname(e, p->path);
	int r = 0;
	if (fd >= 0) {
		if (archive_read_disk_entry_from_file(p->disk, e, fd, st) != ARCHIVE_OK)
			r = ar_err(p->disk, "stat", p->path, err);
		r = r ?: add_user_xattrs(fd, e, p->path, err);
	} else {
		archive_entry_copy_stat(e, st);
	}
	archive_entry_set_uname(e, NULL);
	archive_entry_set_gname(e, NULL);
	struct archive_entry *spare = NULL;
	if (r == 0 && S_ISREG(st->st_mode))
		archive_entry_linkify(p->links, &e, &spare);
	/* a hard link after its first name comes back with no data */
	r = r ?: write_header(p, e, err);
	if (r == 0 && S_ISREG(st->st_mode) && archive_entry_size(e) > 0)
		r = write_data(p, fd, e, err);
	archive_entry_free(e);
	archive_entry_free(spare);
	return r;
}

static int symlink_member(pack *p, int dir, const char *name, const struct stat *st, sbx_err *err)
{
	char target[PATH_MAX];
	ssize_t n = readlinkat(dir, name, target, sizeof(target) - 1);
	if (n < 0)
		return sbx_err_sys(err, -errno, "'%.200s': readlink", p->path);
	target[n] = '\0';
	struct archive_entry *e = archive_entry_new();
	if (!e)
		return sbx_err_set(err, -ENOMEM, "entry");
	archive_entry_copy_pathname(e, p->path);
	archive_entry_copy_stat(e, st);
	archive_entry_copy_symlink(e, target);
	int r = write_header(p, e, err);
	archive_entry_free(e);
	return r;
}

static int walk(pack *p, int dir, size_t len, unsigned depth, sbx_err *err);

/* Set p->path to the folder's path + name; returns the old length. */
static int push(pack *p, size_t len, const char *name, size_t *nlen, sbx_err *err)
{
	int n = snprintf(p->path + len, sizeof(p->path) - len, "%s%s", len ? "/" : "", name);
	if (n < 0 || (size_t)n >= sizeof(p->path) - len)
		return sbx_err_set(err, -ENAMETOOLONG, "'%.200s/%.200s': path too long", p->path, name);
	*nlen = len + (size_t)n;
	return 0;
}

static int one(pack *p, int dir, const char *name, size_t len, unsigned depth, sbx_err *err)
{
	size_t nlen = 0;
	int r = push(p, len, name, &nlen, err);
	if (r < 0)
		return r;
	struct stat st;
	if (fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_sys(err, -errno, "'%.200s': stat", p->path);
	if (S_ISCHR(st.st_mode) && st.st_rdev == 0) {
		/* overlayfs's deletion of a lower file */
		char wh[NAME_MAX + 1];
		if (sup_layer_wh_name(name, wh, sizeof(wh)) < 0)
			return sbx_err_set(err, -ENAMETOOLONG, "'%.200s': name too long for a whiteout",
					   p->path);
		p->path[len] = '\0';
		r = push(p, len, wh, &nlen, err);
		return r ?: write_marker(p, p->path, err);
	}
	if (sup_layer_wh_reserved(name))
		return sbx_err_set(err, -EINVAL,
				   "'%.200s': a file named .wh.* would read back as a deletion", p->path);
	if (S_ISLNK(st.st_mode))
		return symlink_member(p, dir, name, &st, err);
	if (S_ISFIFO(st.st_mode))
		return member(p, -1, &st, err);
	if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
		p->info->skipped++;
		return 0;
	}
	if (S_ISDIR(st.st_mode) && st.st_dev != p->dev)
		return sbx_err_set(err, -EXDEV, "'%.200s': another file system", p->path);
	SBX_AUTO_CLOSE int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY |
					      (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
	if (fd < 0)
		return sbx_err_sys(err, -errno, "'%.200s': open", p->path);
	r = member(p, fd, &st, err);
	if (r < 0 || !S_ISDIR(st.st_mode))
		return r;
	if (depth + 1 >= MAX_DEPTH)
		return sbx_err_set(err, -ELOOP, "'%.200s': deeper than %d", p->path, MAX_DEPTH);
	char opq[2];
	if (fgetxattr(fd, "trusted.overlay.opaque", opq, sizeof(opq)) == 1 && opq[0] == 'y') {
		size_t mlen = 0;
		r = push(p, nlen, SUP_LAYER_WH_OPAQUE, &mlen, err);
		r = r ?: write_marker(p, p->path, err);
		p->path[nlen] = '\0';
		if (r < 0)
			return r;
	}
	return walk(p, fd, nlen, depth + 1, err);
}

/* Every entry of the folder dir (whose path is p->path[0..len)). */
static int walk(pack *p, int dir, size_t len, unsigned depth, sbx_err *err)
{
	int dfd = dup(dir);
	if (dfd < 0)
		return sbx_err_sys(err, -errno, "dup");
	SBX_AUTO_CLOSEDIR DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return sbx_err_sys(err, -errno, "'%.200s': open folder", p->path);
	}
	struct dirent *de;
	errno = 0;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		int r = one(p, dir, de->d_name, len, depth, err);
		p->path[len] = '\0';
		if (r < 0)
			return r;
		errno = 0;
	}
	if (errno)
		return sbx_err_sys(err, -errno, "'%.200s': read folder", p->path);
	return 0;
}

static void free_archive_w(struct archive **a)
{
	if (*a)
		archive_write_free(*a);
}

static void free_archive_r(struct archive **a)
{
	if (*a)
		archive_read_free(*a);
}

int sup_layer_tar_pack(int upper_fd, int out_fd, sup_layer_tar_info *info, sbx_err *err)
{
	memset(info, 0, sizeof(*info));
	__attribute__((cleanup(free_archive_w))) struct archive *w = archive_write_new();
	__attribute__((cleanup(free_archive_r))) struct archive *disk = archive_read_disk_new();
	SBX_AUTO_FREE pack *p = calloc(1, sizeof(*p));
	SBX_AUTO_FREE char *buf = malloc(BLOCK);
	struct archive_entry_linkresolver *links = archive_entry_linkresolver_new();
	if (!w || !disk || !p || !buf || !links) {
		archive_entry_linkresolver_free(links);
		return sbx_err_set(err, -ENOMEM, "snapshot archive");
	}
	struct stat st;
	if (fstat(upper_fd, &st) < 0) {
		archive_entry_linkresolver_free(links);
		return sbx_err_sys(err, -errno, "snapshot: stat the layer");
	}
	*p = (pack){.w = w, .disk = disk, .links = links, .info = info, .dev = st.st_dev, .buf = buf};
	archive_entry_linkresolver_set_strategy(links, ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE);
	/* stat and sparse maps from the disk reader; xattrs are ours */
	archive_read_disk_set_behavior(disk, ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
					     ARCHIVE_READDISK_NO_FFLAGS);
	int r = 0;
	if (archive_write_set_format_pax(w) != ARCHIVE_OK ||
	    archive_write_add_filter_zstd(w) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(w, 1) != ARCHIVE_OK ||
	    archive_write_open_fd(w, out_fd) != ARCHIVE_OK)
		r = ar_err(w, "open", "archive", err);
	r = r ?: walk(p, upper_fd, 0, 0, err);
	/* what the resolver still holds (links whose other names never came) */
	struct archive_entry *e = NULL, *spare = NULL;
	while (r == 0) {
		archive_entry_linkify(links, &e, &spare);
		if (!e)
			break;
		archive_entry_free(e);
		e = NULL;
	}
	archive_entry_linkresolver_free(links);
	if (r == 0 && archive_write_close(w) != ARCHIVE_OK)
		r = ar_err(w, "close", "archive", err);
	return r < 0 ? sbx_err_wrap(err, "snapshot") : 0;
}

/* ---- unpack ------------------------------------------------------------ */

int sup_layer_tar_unpack(int in_fd, int upper_fd, uint64_t max_bytes, uint64_t max_entries,
			 sup_layer_tar_info *info, sbx_err *err)
{
	memset(info, 0, sizeof(*info));
	sup_img_limits lim = {.max_layer_bytes = max_bytes, .max_entries = max_entries,
			      .allow_setid = false, .snapshot = true};
	sup_img_layer_info li;
	int r = sup_img_layer_unpack(in_fd, NULL, NULL, upper_fd, &lim, &li, err);
	info->bytes = li.bytes;
	info->entries = li.entries;
	info->setid_dropped = li.setid_dropped;
	if (r == 0 || r == -ENOSPC || r == -ENOMEM || r == -EIO)
		return r;
	/* anything else is the archive's fault */
	err->code = -EILSEQ;
	return -EILSEQ;
}
