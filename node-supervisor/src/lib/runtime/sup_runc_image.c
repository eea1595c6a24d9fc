/* sup_runc_image: see sup_runc_image.h. */
#include "sup_runc_image.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_fsutil.h"
#include "sup_img_store.h"
#include "sup_overlay.h"

#define U SUP_RUNC_SANDBOX_UID
#define G SUP_RUNC_SANDBOX_GID
#define MANIFEST_MAX 16384

/* Host paths mirrored into the "host" image: a folder or file there becomes
 * a read-only bind mount, a symlink becomes the same symlink. */
static const char *const host_mirrors[] = {
	"/usr",		    "/bin",	     "/sbin",	       "/lib",		 "/lib32",
	"/lib64",	    "/libx32",	     "/etc/alternatives", "/etc/ld.so.cache", "/etc/ssl",
	"/etc/services",    "/etc/protocols", "/etc/os-release", "/etc/localtime",
};

typedef struct skel_dir {
	const char *path;
	mode_t mode;
	uid_t uid;
	gid_t gid;
} skel_dir;

static const skel_dir skel_dirs[] = {
	{"proc", 0555, 0, 0},	  {"sys", 0555, 0, 0},	     {"dev", 0755, 0, 0},
	{"tmp", 01777, 0, 0},	  {"run", 0755, 0, 0},	     {"run/sandbox", 0755, 0, 0},
	{"var", 0755, 0, 0},	  {"var/tmp", 01777, 0, 0},  {"etc", 0755, 0, 0},
	{"root", 0700, 0, 0},	  {"home", 0755, 0, 0},	     {"home/sandbox", 0755, U, G},
	{"workspace", 0755, U, G}, {".sbx", 0755, 0, 0},
};

typedef struct skel_file {
	const char *path;
	mode_t mode;
	const char *content;
} skel_file;

static const skel_file skel_files[] = {
	{"etc/passwd", 0644,
	 "root:x:0:0:root:/root:/bin/sh\n"
	 "sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n"
	 "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"},
	{"etc/group", 0644, "root:x:0:\ntty:x:5:\nsandbox:x:1000:\nnogroup:x:65534:\n"},
	/* per-sandbox copies with the hostname go into each upper layer */
	{"etc/hostname", 0644, "sandbox\n"},
	{"etc/hosts", 0644, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"},
	{"etc/nsswitch.conf", 0644,
	 "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
	 "networks: files\nprotocols: files\nservices: files\n"},
	/* loopback only: there is no name server to reach */
	{"etc/resolv.conf", 0644, "# sbx sandbox: loopback only, no name server\n"},
	{".sbx/sandbox-agent", 0755, ""},
};

typedef struct manifest {
	char text[MANIFEST_MAX];
	size_t len;
	bool overflow;
} manifest;

__attribute__((format(printf, 2, 3))) static void mf_add(manifest *m, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(m->text + m->len, sizeof(m->text) - m->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(m->text) - m->len)
		m->overflow = true;
	else
		m->len += (size_t)n;
}

static unsigned long long fnv64(const char *s)
{
	unsigned long long h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

/* The manifest says what the skeleton holds for this host; a skeleton whose
 * manifest matches is kept, so sandboxes still mounted on it stay whole. */
static int host_manifest(manifest *m, sbx_err *err)
{
	m->len = 0;
	m->overflow = false;
	mf_add(m, "sbx host skeleton v1\n");
	for (size_t i = 0; i < sizeof(skel_dirs) / sizeof(skel_dirs[0]); i++)
		mf_add(m, "d %s %o %u %u\n", skel_dirs[i].path, (unsigned)skel_dirs[i].mode,
		       skel_dirs[i].uid, skel_dirs[i].gid);
	for (size_t i = 0; i < sizeof(host_mirrors) / sizeof(host_mirrors[0]); i++) {
		const char *p = host_mirrors[i];
		struct stat st;
		if (lstat(p, &st) < 0) {
			if (errno != ENOENT)
				return sbx_err_sys(err, -errno, "host image: lstat %s", p);
			continue;
		}
		if (S_ISLNK(st.st_mode)) {
			char target[PATH_MAX];
			ssize_t n = readlink(p, target, sizeof(target) - 1);
			if (n < 0)
				return sbx_err_sys(err, -errno, "host image: readlink %s", p);
			target[n] = '\0';
			mf_add(m, "l %s %s\n", p + 1, target);
		} else if (S_ISDIR(st.st_mode)) {
			mf_add(m, "bd %s\n", p + 1);
		} else if (S_ISREG(st.st_mode)) {
			mf_add(m, "bf %s\n", p + 1);
		}
	}
	for (size_t i = 0; i < sizeof(skel_files) / sizeof(skel_files[0]); i++)
		mf_add(m, "f %s %o %016llx\n", skel_files[i].path, (unsigned)skel_files[i].mode,
		       fnv64(skel_files[i].content));
	if (m->overflow)
		return sbx_err_set(err, -E2BIG, "host image: manifest too long");
	return 0;
}

/* Build the skeleton the manifest describes into rootfs (an empty folder). */
static int build_skeleton(int root, const manifest *m, sbx_err *err)
{
	for (size_t i = 0; i < sizeof(skel_dirs) / sizeof(skel_dirs[0]); i++) {
		const skel_dir *d = &skel_dirs[i];
		int r = sup_fs_mkdir(root, d->path, d->mode, d->uid, d->gid, 0, err);
		if (r < 0)
			return r;
	}
	/* walk the manifest's mirror lines, so what is built is what it says */
	SBX_AUTO_FREE char *copy = strndup(m->text, m->len);
	if (!copy)
		return sbx_err_set(err, -ENOMEM, "host image");
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		int r = 0;
		if (strncmp(line, "l ", 2) == 0) {
			char *path = line + 2, *target = strchr(path, ' ');
			if (!target)
				continue;
			*target++ = '\0';
			if (symlinkat(target, root, path) < 0)
				r = sbx_err_sys(err, -errno, "symlink %s", path);
		} else if (strncmp(line, "bd ", 3) == 0) {
			r = sup_fs_mkdir(root, line + 3, 0755, 0, 0, 1, err);
		} else if (strncmp(line, "bf ", 3) == 0) {
			r = sup_fs_write_file(root, line + 3, "", 0, 0644, err);
		}
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < sizeof(skel_files) / sizeof(skel_files[0]); i++) {
		const skel_file *f = &skel_files[i];
		int r = sup_fs_write_file(root, f->path, f->content, strlen(f->content), f->mode, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Fill the empty folder dir with manifest + rootfs/. */
static int build_into(const char *dir, const manifest *m, sbx_err *err)
{
	SBX_AUTO_CLOSE int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || fchmod(dfd, 0755) < 0)
		return sbx_err_sys(err, -errno, "open %s", dir);
	int r = sup_fs_mkdir(dfd, "rootfs", 0755, 0, 0, 0, err);
	if (r < 0)
		return r;
	SBX_AUTO_CLOSE int root = openat(dfd, "rootfs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (root < 0)
		return sbx_err_sys(err, -errno, "open %s/rootfs", dir);
	r = build_skeleton(root, m, err);
	if (r < 0)
		return r;
	return sup_fs_write_file(dfd, "manifest", m->text, m->len, 0644, err);
}

static int path_join(char *buf, size_t cap, const char *a, const char *b, sbx_err *err)
{
	int n = snprintf(buf, cap, "%s/%s", a, b);
	if (n < 0 || (size_t)n >= cap)
		return sbx_err_set(err, -ENAMETOOLONG, "path %s/%s too long", a, b);
	return 0;
}

int sup_runc_image_prepare_host(const char *state_dir, sbx_err *err)
{
	char images[PATH_MAX], host[PATH_MAX], tmp[PATH_MAX];
	int r = path_join(images, sizeof(images), state_dir, "images", err);
	if (r == 0)
		r = path_join(host, sizeof(host), images, "host", err);
	if (r == 0)
		r = path_join(tmp, sizeof(tmp), images, ".host-XXXXXX", err);
	if (r < 0)
		return sbx_err_wrap(err, "host image");

	SBX_AUTO_FREE manifest *want = malloc(sizeof(*want));
	SBX_AUTO_FREE char *have = malloc(MANIFEST_MAX);
	if (!want || !have)
		return sbx_err_set(err, -ENOMEM, "host image");
	r = host_manifest(want, err);
	if (r < 0)
		return r;

	SBX_AUTO_CLOSE int hostfd = open(host, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (hostfd >= 0) {
		struct stat st;
		sbx_err ignored;
		ssize_t n = sup_fs_read_small(hostfd, "manifest", have, MANIFEST_MAX, &ignored);
		if (n >= 0 && (size_t)n == want->len && memcmp(have, want->text, want->len) == 0 &&
		    fstatat(hostfd, "rootfs", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
			return 0;
	} else if (errno != ENOENT) {
		return sbx_err_sys(err, -errno, "host image: open %s", host);
	}

	if (!mkdtemp(tmp))
		return sbx_err_sys(err, -errno, "host image: mkdtemp %s", tmp);
	r = build_into(tmp, want, err);
	/* swap the new skeleton in whole; the old one (if any) ends up at tmp */
	if (r == 0 && hostfd >= 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, host, RENAME_EXCHANGE) < 0)
		r = sbx_err_sys(err, -errno, "replace %s", host);
	else if (r == 0 && hostfd < 0 && rename(tmp, host) < 0)
		r = sbx_err_sys(err, -errno, "rename to %s", host);
	sbx_err rm_err;
	int rr = sup_fs_rm_tree(tmp, &rm_err);
	if (r < 0)
		return sbx_err_wrap(err, "host image");
	if (rr < 0) {
		*err = rm_err;
		return sbx_err_wrap(err, "host image: remove the old skeleton");
	}
	return 0;
}

int sup_runc_image_stat(const sup_runc_image *img, const char *rel, struct stat *st)
{
	for (const char *l = img->lower; *l;) {
		const char *end = strchrnul(l, ':');
		char path[PATH_MAX];
		int n = snprintf(path, sizeof(path), "%.*s/%s", (int)(end - l), l, rel);
		if (n < 0 || (size_t)n >= sizeof(path))
			return -ENAMETOOLONG;
		if (lstat(path, st) == 0) {
			/* a whiteout (0/0 character device) hides the layers below */
			if (S_ISCHR(st->st_mode) && st->st_rdev == 0)
				return -ENOENT;
			return 0;
		}
		if (errno != ENOENT && errno != ENOTDIR)
			return -errno;
		l = *end ? end + 1 : end;
	}
	return -ENOENT;
}

/* The layers of a store image, top first. */
static int resolve_store(struct sup_img_store *store, const char *image, sup_runc_image *img,
			 sbx_err *err)
{
	sup_image im;
	int r = sup_img_store_get(store, image, &im, err);
	if (r < 0)
		return r;
	size_t len = 0;
	for (size_t i = im.nlayers; r == 0 && i-- > 0;) {
		char path[PATH_MAX];
		r = sup_img_store_layer_path(store, im.layers[i], path, sizeof(path), err);
		int n = r < 0 ? 0 : snprintf(img->lower + len, sizeof(img->lower) - len, "%s%s", len ? ":" : "", path);
		if (r == 0 && (n < 0 || (size_t)n >= sizeof(img->lower) - len))
			r = sbx_err_set(err, -ENAMETOOLONG, "image %.200s: too many layers for one overlay", image);
		len += (size_t)n;
		img->nlower++;
	}
	if (r == 0 && im.nlayers == 0)
		r = sbx_err_set(err, -EINVAL, "image %.200s: no layers", image);
	img->agent_bundled = im.agent_bundled;
	sup_image_release(&im);
	return r;
}

int sup_runc_image_resolve(const char *state_dir, struct sup_img_store *store, const char *image,
			   sup_runc_image *img, sbx_err *err)
{
	memset(img, 0, sizeof(*img));
	if (store && strcmp(image, "host") != 0 && image[0] != '/') {
		int r = resolve_store(store, image, img, err);
		if (r < 0)
			return r;
	} else if (strcmp(image, "host") == 0) {
		char images[PATH_MAX];
		int r = path_join(images, sizeof(images), state_dir, "images/host", err);
		if (r == 0)
			r = path_join(img->lower, sizeof(img->lower), images, "rootfs", err);
		if (r < 0)
			return sbx_err_wrap(err, "image host");
		SBX_AUTO_CLOSE int root = open(img->lower, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (root < 0)
			return sbx_err_sys(err, -errno, "image host: %s (not prepared?)", img->lower);
		img->host = true;
		for (size_t i = 0; i < sizeof(host_mirrors) / sizeof(host_mirrors[0]); i++) {
			struct stat st;
			const char *p = host_mirrors[i];
			if (fstatat(root, p + 1, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
			    !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
				continue;
			if (img->n_binds == SUP_RUNC_IMAGE_MAX_BINDS)
				return sbx_err_set(err, -E2BIG, "image host: too many binds");
			img->binds[img->n_binds++] = (sup_bundle_bind){
				.source = p, .destination = p, .readonly = true, .noexec = false};
		}
	} else {
		int r = sup_overlay_check_path("image", image, err);
		if (r < 0)
			return r;
		if (!realpath(image, img->lower))
			return sbx_err_sys(err, -errno, "image '%s'", image);
		struct stat st;
		if (stat(img->lower, &st) < 0)
			return sbx_err_sys(err, -errno, "image '%s'", image);
		if (!S_ISDIR(st.st_mode))
			return sbx_err_set(err, -ENOTDIR, "image '%s': not a folder", image);
		if (strcmp(img->lower, "/") == 0)
			return sbx_err_set(err, -EINVAL, "image '%s': the host root is not an image", image);
		r = sup_overlay_check_path("image", img->lower, err);
		if (r < 0)
			return r;
		char state_real[PATH_MAX];
		if (!realpath(state_dir, state_real))
			return sbx_err_sys(err, -errno, "state folder %s", state_dir);
		size_t n = strlen(state_real), m = strlen(img->lower);
		/* neither inside the state folder nor one of its parents */
		if ((m >= n && strncmp(img->lower, state_real, n) == 0 &&
		     (img->lower[n] == '/' || img->lower[n] == '\0')) ||
		    (n > m && strncmp(state_real, img->lower, m) == 0 && state_real[m] == '/'))
			return sbx_err_set(err, -EINVAL,
					   "image '%s': overlaps the supervisor's state folder", image);
	}
	if (img->nlower == 0)
		img->nlower = 1;
	struct stat est;
	if (sup_runc_image_stat(img, "etc", &est) == 0 && S_ISDIR(est.st_mode)) {
		img->etc_dir = true;
		img->etc_mode = est.st_mode & 07777;
		img->etc_uid = est.st_uid;
		img->etc_gid = est.st_gid;
	}
	return 0;
}
