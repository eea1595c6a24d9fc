/* sup_img_layer: see sup_img_layer.h.
 *
 * Two libarchive readers in a chain: the outer one takes the blob through
 * every decompression filter libarchive has ("raw" format: the decompressed
 * bytes as one entry) and hashes the blob as stored; the inner one reads
 * tar from the outer one's data and hashes the tar (the diff_id). One pass
 * over the blob checks both digests and unpacks. libarchive's own
 * archive_write_disk is not used: it resolves names against the process's
 * current folder, which worker threads share, and its SECURE_* flags refuse
 * what they catch only for that path; here every name is walked from the
 * layer's own folder fd. */
#include "sup_img_layer.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "sbx/cleanup.h"
#include "sup_img_digest.h"
#include "sup_sha256.h"

#define BLOCK (64u * 1024u)
#define MAX_DEPTH 128
#define WH_PREFIX ".wh."
#define WH_OPAQUE ".wh..wh..opq"

typedef struct chain {
	int fd;
	sup_sha256 blob_sha;
	sup_sha256 tar_sha;
	struct archive *outer;
	uint64_t tar_bytes;  /* decompressed bytes read */
	uint64_t tar_cap;    /* bound on them: a bomb of headers stops here */
	bool over;
	bool padded;         /* the zeros after the stored tar were given */
	int read_errno;
	char buf[BLOCK];
	char tbuf[BLOCK];
} chain;

static la_ssize_t outer_read(struct archive *a, void *ud, const void **buf)
{
	chain *c = ud;
	(void)a;
	ssize_t n;
	do
		n = read(c->fd, c->buf, sizeof(c->buf));
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		c->read_errno = errno;
		return -1;
	}
	sup_sha256_update(&c->blob_sha, c->buf, (size_t)n);
	*buf = c->buf;
	return n;
}

static la_ssize_t inner_read(struct archive *a, void *ud, const void **buf)
{
	chain *c = ud;
	(void)a;
	la_ssize_t n = archive_read_data(c->outer, c->tbuf, sizeof(c->tbuf));
	if (n < 0)
		return -1;
	if (n == 0 && !c->padded) {
		/* Some writers (umoci's insert) end a layer right after the last
		 * member's data, without its padding or the end-of-archive
		 * blocks; readers of other runtimes take that. Zeros complete it
		 * here, outside the digest: the tar as stored is what is hashed. */
		c->padded = true;
		memset(c->tbuf, 0, 1536);
		*buf = c->tbuf;
		return 1536;
	}
	c->tar_bytes += (uint64_t)n;
	if (c->tar_bytes > c->tar_cap) {
		c->over = true;
		return -1;
	}
	sup_sha256_update(&c->tar_sha, c->tbuf, (size_t)n);
	*buf = c->tbuf;
	return n;
}

static void chain_free(chain **c)
{
	if (!*c)
		return;
	sup_sha256_free(&(*c)->blob_sha);
	sup_sha256_free(&(*c)->tar_sha);
	free(*c);
}
#define AUTO_CHAIN __attribute__((cleanup(chain_free)))

static void archive_cleanup(struct archive **a)
{
	if (*a)
		archive_read_free(*a);
}
#define AUTO_ARCHIVE __attribute__((cleanup(archive_cleanup)))

/* ---- names ------------------------------------------------------------ */

typedef struct name {
	char buf[PATH_MAX];
	char *comp[MAX_DEPTH];
	size_t n;
} name;

/* Split a member name into components: "./" and "." dropped, absolute
 * names and ".." refused (the layer is then refused: a well-made layer
 * has neither). */
static int split_name(const char *what, const char *path, name *nm, sbx_err *err)
{
	nm->n = 0;
	if (!path)
		return sbx_err_set(err, -EINVAL, "%s without a name", what);
	if (path[0] == '/')
		return sbx_err_set(err, -EPERM, "%s '%.200s': absolute name", what, path);
	size_t len = strlen(path);
	if (len >= sizeof(nm->buf))
		return sbx_err_set(err, -ENAMETOOLONG, "%s: name too long", what);
	memcpy(nm->buf, path, len + 1);
	char *save = NULL;
	for (char *c = strtok_r(nm->buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
		if (strcmp(c, ".") == 0)
			continue;
		if (strcmp(c, "..") == 0)
			return sbx_err_set(err, -EPERM, "%s '%.200s': '..' in the name", what, path);
		if (strlen(c) > NAME_MAX)
			return sbx_err_set(err, -ENAMETOOLONG, "%s '%.200s': component too long", what, path);
		if (nm->n == MAX_DEPTH)
			return sbx_err_set(err, -ELOOP, "%s '%.200s': deeper than %d", what, path, MAX_DEPTH);
		nm->comp[nm->n++] = c;
	}
	return 0;
}

int sup_img_layer_check_name(const char *path, sbx_err *err)
{
	SBX_AUTO_FREE name *nm = malloc(sizeof(*nm));
	if (!nm)
		return sbx_err_set(err, -ENOMEM, "entry name");
	return split_name("entry", path, nm, err);
}

/* The folder holding the last component, walked from root without
 * following symlinks; missing folders are made (0755, root) when create.
 * Returns an fd. */
static int open_parent(int root, const name *nm, bool create, const char *path, sbx_err *err)
{
	int fd = dup(root);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "dup");
	for (size_t i = 0; i + 1 < nm->n; i++) {
		int next = openat(fd, nm->comp[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (next < 0 && errno == ENOENT && create) {
			if (mkdirat(fd, nm->comp[i], 0755) < 0 && errno != EEXIST) {
				int e = errno;
				close(fd);
				return sbx_err_sys(err, -e, "'%.200s': mkdir", path);
			}
			next = openat(fd, nm->comp[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		}
		int e = errno;
		close(fd);
		if (next < 0) {
			if (e == ELOOP || e == ENOTDIR)
				return sbx_err_set(err, -EPERM, "'%.200s': goes through a symlink or a file",
						   path);
			return sbx_err_sys(err, -e, "'%.200s'", path);
		}
		fd = next;
	}
	return fd;
}

/* Make room for a new non-folder entry: what a layer names twice, the
 * last one wins (as tar extracts). A folder in the way refuses. */
static int clear_slot(int dir, const char *base, const char *path, sbx_err *err)
{
	if (unlinkat(dir, base, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno == EISDIR)
		return sbx_err_set(err, -EEXIST, "'%.200s': a folder of the layer is in the way", path);
	return sbx_err_sys(err, -errno, "'%.200s': unlink", path);
}

/* ---- entries ---------------------------------------------------------- */

typedef struct ctx {
	int root;
	const sup_img_limits *lim;
	sup_img_layer_info *info;
	struct archive *in;
} ctx;

/* A snapshot's user.* xattrs (trusted.* would steer the overlay, security.*
 * the host's LSMs: never written). */
static int user_xattrs(ctx *x, struct archive_entry *e, int fd, const char *path, sbx_err *err)
{
	if (!x->lim->snapshot)
		return 0;
	const char *xname;
	const void *val;
	size_t size;
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &xname, &val, &size) == ARCHIVE_OK) {
		if (strncmp(xname, "user.", 5) != 0)
			continue;
		if (fsetxattr(fd, xname, val, size, 0) < 0)
			return sbx_err_sys(err, -errno, "'%.200s': xattr %.64s", path, xname);
	}
	return 0;
}

static mode_t keep_mode(ctx *x, mode_t mode)
{
	if (!x->lim->allow_setid && (mode & (S_ISUID | S_ISGID)) && !S_ISDIR(mode)) {
		x->info->setid_dropped++;
		mode &= ~(mode_t)(S_ISUID | S_ISGID);
	}
	return mode & 07777;
}

int sup_img_copy_data(struct archive *a, int fd, uint64_t *total, uint64_t max, const char *member,
		      sbx_err *err)
{
	const void *buf;
	size_t len;
	la_int64_t off;
	int r;
	while ((r = archive_read_data_block(a, &buf, &len, &off)) == ARCHIVE_OK) {
		*total += len;
		if (off < 0 || (uint64_t)off + len > max || *total > max)
			return sbx_err_set(err, -EFBIG, "'%.200s': larger than %llu bytes", member,
					   (unsigned long long)max);
		for (size_t done = 0; done < len;) {
			ssize_t n = pwrite(fd, (const char *)buf + done, len - done, off + (off_t)done);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				return sbx_err_sys(err, n < 0 ? -errno : -EIO, "'%.200s': write", member);
			done += (size_t)n;
		}
	}
	if (r != ARCHIVE_EOF)
		return sbx_err_set(err, -EBADMSG, "'%.200s': %s", member, archive_error_string(a));
	return 0;
}

static int regular(ctx *x, struct archive_entry *e, int dir, const char *base, const char *path,
		   sbx_err *err)
{
	la_int64_t size = archive_entry_size(e);
	if (size < 0 || (uint64_t)size > x->lim->max_layer_bytes ||
	    x->info->bytes + (uint64_t)size > x->lim->max_layer_bytes)
		return sbx_err_set(err, -EFBIG, "'%.200s': layer larger than %llu bytes", path,
				   (unsigned long long)x->lim->max_layer_bytes);
	int r = clear_slot(dir, base, path, err);
	if (r < 0)
		return r;
	SBX_AUTO_CLOSE int fd = openat(dir, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "'%.200s': create", path);
	r = sup_img_copy_data(x->in, fd, &x->info->bytes, x->lim->max_layer_bytes, path, err);
	if (r < 0)
		return r;
	if (ftruncate(fd, size) < 0)
		return sbx_err_sys(err, -errno, "'%.200s': truncate", path);
	r = user_xattrs(x, e, fd, path, err);
	if (r < 0)
		return r;
	/* owner first: chown clears the setid bits chmod then sets */
	if (fchown(fd, archive_entry_uid(e), archive_entry_gid(e)) < 0 ||
	    fchmod(fd, keep_mode(x, archive_entry_mode(e))) < 0)
		return sbx_err_sys(err, -errno, "'%.200s': owner or mode", path);
	struct timespec ts[2] = {{.tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e)},
				 {.tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e)}};
	futimens(fd, ts);
	return 0;
}

static int folder(ctx *x, struct archive_entry *e, int dir, const char *base, const char *path,
		  sbx_err *err)
{
	if (mkdirat(dir, base, 0700) < 0 && errno != EEXIST)
		return sbx_err_sys(err, -errno, "'%.200s': mkdir", path);
	SBX_AUTO_CLOSE int fd = openat(dir, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && (errno == ENOTDIR || errno == ELOOP)) {
		/* a file or symlink of the layer named before: the folder wins */
		if (unlinkat(dir, base, 0) < 0 || mkdirat(dir, base, 0700) < 0)
			return sbx_err_sys(err, -errno, "'%.200s': replace with a folder", path);
		fd = openat(dir, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return sbx_err_sys(err, -errno, "'%.200s': open", path);
	if (fchown(fd, archive_entry_uid(e), archive_entry_gid(e)) < 0 ||
	    fchmod(fd, keep_mode(x, archive_entry_mode(e))) < 0)
		return sbx_err_sys(err, -errno, "'%.200s': owner or mode", path);
	return user_xattrs(x, e, fd, path, err);
}

static int symlink_entry(struct archive_entry *e, int dir, const char *base, const char *path,
			 sbx_err *err)
{
	/* the target is stored, never followed here: inside the sandbox it
	 * resolves against the sandbox's own root */
	const char *target = archive_entry_symlink(e);
	if (!target || !target[0] || strlen(target) >= PATH_MAX)
		return sbx_err_set(err, -EINVAL, "'%.200s': symlink without a usable target", path);
	int r = clear_slot(dir, base, path, err);
	if (r < 0)
		return r;
	if (symlinkat(target, dir, base) < 0)
		return sbx_err_sys(err, -errno, "'%.200s': symlink", path);
	if (fchownat(dir, base, archive_entry_uid(e), archive_entry_gid(e), AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_sys(err, -errno, "'%.200s': owner", path);
	return 0;
}

static int hardlink_entry(ctx *x, const char *target, int dir, const char *base, const char *path,
			  sbx_err *err)
{
	SBX_AUTO_FREE name *tn = malloc(sizeof(*tn));
	if (!tn)
		return sbx_err_set(err, -ENOMEM, "hard link");
	int r = split_name("hard link target", target, tn, err);
	if (r < 0)
		return sbx_err_wrap(err, "'%.200s'", path);
	if (tn->n == 0)
		return sbx_err_set(err, -EPERM, "'%.200s': hard link to the layer's root", path);
	SBX_AUTO_CLOSE int tdir = open_parent(x->root, tn, false, target, err);
	if (tdir < 0)
		return tdir;
	const char *tbase = tn->comp[tn->n - 1];
	struct stat st;
	if (fstatat(tdir, tbase, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return sbx_err_sys(err, -errno, "'%.200s': hard link target '%.200s'", path, target);
	if (!S_ISREG(st.st_mode))
		return sbx_err_set(err, -EPERM, "'%.200s': hard link to '%.200s', not a regular file",
				   path, target);
	r = clear_slot(dir, base, path, err);
	if (r < 0)
		return r;
	if (linkat(tdir, tbase, dir, base, 0) < 0)
		return sbx_err_sys(err, -errno, "'%.200s': link", path);
	return 0;
}

static int whiteout(int dir, const char *base, const char *path, sbx_err *err)
{
	if (strcmp(base, WH_OPAQUE) == 0) {
		if (fsetxattr(dir, "trusted.overlay.opaque", "y", 1, 0) < 0)
			return sbx_err_sys(err, -errno, "'%.200s': mark the folder opaque", path);
		return 0;
	}
	const char *hidden = base + strlen(WH_PREFIX);
	if (!hidden[0] || strcmp(hidden, ".") == 0 || strcmp(hidden, "..") == 0)
		return sbx_err_set(err, -EINVAL, "'%.200s': whiteout of nothing", path);
	int r = clear_slot(dir, hidden, path, err);
	if (r < 0)
		return r;
	if (mknodat(dir, hidden, S_IFCHR | 0000, makedev(0, 0)) < 0)
		return sbx_err_sys(err, -errno, "'%.200s': whiteout", path);
	return 0;
}

static int entry(ctx *x, struct archive_entry *e, sbx_err *err)
{
	const char *path = archive_entry_pathname(e);
	SBX_AUTO_FREE name *nm = malloc(sizeof(*nm));
	if (!nm)
		return sbx_err_set(err, -ENOMEM, "layer entry");
	int r = split_name("entry", path, nm, err);
	if (r < 0)
		return r;
	if (++x->info->entries > x->lim->max_entries)
		return sbx_err_set(err, -EFBIG, "layer has more than %llu entries",
				   (unsigned long long)x->lim->max_entries);
	if (nm->n == 0)
		return 0; /* "./": the root is the layer folder itself */
	SBX_AUTO_CLOSE int dir = open_parent(x->root, nm, true, path, err);
	if (dir < 0)
		return dir;
	const char *base = nm->comp[nm->n - 1];
	if (strncmp(base, WH_PREFIX, strlen(WH_PREFIX)) == 0)
		return whiteout(dir, base, path, err);
	const char *hl = archive_entry_hardlink(e);
	if (hl)
		return hardlink_entry(x, hl, dir, base, path, err);
	switch (archive_entry_filetype(e)) {
	case AE_IFREG:
		return regular(x, e, dir, base, path, err);
	case AE_IFDIR:
		return folder(x, e, dir, base, path, err);
	case AE_IFLNK:
		return symlink_entry(e, dir, base, path, err);
	case AE_IFIFO:
		r = clear_slot(dir, base, path, err);
		if (r == 0 && mknodat(dir, base, S_IFIFO | keep_mode(x, archive_entry_mode(e)), 0) < 0)
			r = sbx_err_sys(err, -errno, "'%.200s': fifo", path);
		return r;
	default:
		/* device nodes and sockets: a sandbox gets its devices from the
		 * runtime, never from an image; a snapshot names a deletion by
		 * a .wh. name, never by a device */
		if (x->lim->snapshot)
			return sbx_err_set(err, -EPERM, "'%.200s': a device node or socket", path);
		x->info->skipped++;
		return 0;
	}
}

int sup_img_layer_unpack(int blob_fd, const char *blob_hex, const char *diff_hex, int dest_fd,
			 const sup_img_limits *lim, sup_img_layer_info *info, sbx_err *err)
{
	memset(info, 0, sizeof(*info));
	AUTO_CHAIN chain *c = calloc(1, sizeof(*c));
	if (!c)
		return sbx_err_set(err, -ENOMEM, "layer");
	c->fd = blob_fd;
	/* file data plus a generous 2 KiB of headers per entry */
	c->tar_cap = lim->max_layer_bytes + lim->max_entries * 2048 + (1u << 20);
	if (sup_sha256_init(&c->blob_sha, err) < 0 || sup_sha256_init(&c->tar_sha, err) < 0)
		return sbx_err_wrap(err, "layer");

	AUTO_ARCHIVE struct archive *outer = archive_read_new();
	AUTO_ARCHIVE struct archive *in = archive_read_new();
	if (!outer || !in)
		return sbx_err_set(err, -ENOMEM, "layer");
	c->outer = outer;
	archive_read_support_filter_all(outer);
	archive_read_support_format_raw(outer);
	archive_read_support_format_tar(in);
	struct archive_entry *e;
	if (archive_read_open(outer, c, NULL, outer_read, NULL) != ARCHIVE_OK ||
	    archive_read_next_header(outer, &e) != ARCHIVE_OK)
		return sbx_err_set(err, -EBADMSG, "layer: %s",
				   c->read_errno ? strerror(c->read_errno) : archive_error_string(outer));
	if (archive_read_open(in, c, NULL, inner_read, NULL) != ARCHIVE_OK)
		return sbx_err_set(err, -EBADMSG, "layer: not a tar: %s", archive_error_string(in));

	ctx x = {.root = dest_fd, .lim = lim, .info = info, .in = in};
	int r;
	while ((r = archive_read_next_header(in, &e)) == ARCHIVE_OK) {
		int rc = entry(&x, e, err);
		if (rc < 0)
			return sbx_err_wrap(err, "layer");
	}
	if (c->over)
		return sbx_err_set(err, -EFBIG, "layer: more than %llu bytes of tar",
				   (unsigned long long)c->tar_cap);
	if (r != ARCHIVE_EOF)
		return sbx_err_set(err, -EBADMSG, "layer: %s", archive_error_string(in));
	/* the tar's end marker may be followed by padding: hash it all */
	for (;;) {
		la_ssize_t n = archive_read_data(outer, c->tbuf, sizeof(c->tbuf));
		if (n < 0)
			return sbx_err_set(err, -EBADMSG, "layer: %s", archive_error_string(outer));
		if (n == 0)
			break;
		c->tar_bytes += (uint64_t)n;
		if (c->tar_bytes > c->tar_cap)
			return sbx_err_set(err, -EFBIG, "layer: more than %llu bytes of tar",
					   (unsigned long long)c->tar_cap);
		sup_sha256_update(&c->tar_sha, c->tbuf, (size_t)n);
	}
	/* and whatever of the blob the decompressor left unread */
	for (;;) {
		ssize_t n = read(blob_fd, c->buf, sizeof(c->buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sbx_err_sys(err, -errno, "layer: read");
		if (n == 0)
			break;
		sup_sha256_update(&c->blob_sha, c->buf, (size_t)n);
	}
	char hex[SUP_IMG_HEX_LEN + 1];
	if (sup_sha256_final_hex(&c->tar_sha, hex, err) < 0)
		return sbx_err_wrap(err, "layer");
	if (diff_hex && strcmp(hex, diff_hex) != 0)
		return sbx_err_set(err, -EBADMSG, "layer: its tar is sha256:%s, the config says sha256:%s",
				   hex, diff_hex);
	if (sup_sha256_final_hex(&c->blob_sha, hex, err) < 0)
		return sbx_err_wrap(err, "layer");
	if (blob_hex && strcmp(hex, blob_hex) != 0)
		return sbx_err_set(err, -EBADMSG, "layer: blob is sha256:%s, the manifest says sha256:%s",
				   hex, blob_hex);
	return 0;
}
