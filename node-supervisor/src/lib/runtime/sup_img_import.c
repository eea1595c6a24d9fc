/* sup_img_import: see sup_img_import.h. */
#include "sup_img_import.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>

#include "sbx/cleanup.h"
#include "sup_fsutil.h"
#include "sup_img_layer.h"
#include "sup_img_manifest.h"
#include "sup_sha256.h"

#define BLOCK (64u * 1024u)
#define AGENT_IN_IMAGE "/.sbx/sandbox-agent"

/* ---- staging a stream ------------------------------------------------- */

typedef struct src {
	sup_img_read_fn read;
	void *ud;
	sbx_err err;
	int failed;
	char buf[BLOCK];
} src;

static la_ssize_t src_read(struct archive *a, void *ud, const void **buf)
{
	src *s = ud;
	(void)a;
	ssize_t n = s->read(s->ud, s->buf, sizeof(s->buf), &s->err);
	if (n < 0) {
		s->failed = (int)n;
		if (!s->err.code)
			sbx_err_sys(&s->err, (int)n, "read the image");
		return -1;
	}
	*buf = s->buf;
	return n;
}

/* The members an import uses, by name: top-level documents, blobs, and a
 * docker save's <hex>.json and <hex>/layer.tar. Returns the folder to
 * make first ("" for none), or NULL to skip the member. */
static const char *wanted(const char *name)
{
	static const char *const docs[] = {"oci-layout", "index.json", "manifest.json", "repositories"};
	for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++)
		if (strcmp(name, docs[i]) == 0)
			return "";
	if (strncmp(name, "blobs/sha256/", 13) == 0 && sup_img_is_hex(name + 13))
		return "blobs/sha256";
	char hex[SUP_IMG_HEX_LEN + 1];
	if (strlen(name) < SUP_IMG_HEX_LEN)
		return NULL;
	memcpy(hex, name, SUP_IMG_HEX_LEN);
	hex[SUP_IMG_HEX_LEN] = '\0';
	if (!sup_img_is_hex(hex))
		return NULL;
	const char *rest = name + SUP_IMG_HEX_LEN;
	if (strcmp(rest, ".json") == 0)
		return "";
	if (strcmp(rest, "/layer.tar") == 0 || strcmp(rest, ".tar") == 0)
		return "";
	return NULL;
}

static int stage_member(struct archive *a, int stage, const char *name, const char *folder,
			uint64_t *total, uint64_t max, sbx_err *err)
{
	if (folder[0]) {
		int r = sup_fs_mkdir(stage, "blobs", 0700, 0, 0, 1, err);
		r = r ?: sup_fs_mkdir(stage, folder, 0700, 0, 0, 1, err);
		if (r < 0)
			return r;
	} else if (strchr(name, '/')) {
		char dir[SUP_IMG_HEX_LEN + 1];
		snprintf(dir, sizeof(dir), "%.64s", name);
		int r = sup_fs_mkdir(stage, dir, 0700, 0, 0, 1, err);
		if (r < 0)
			return r;
	}
	/* a member named twice: the last one counts, as tar extracts */
	unlinkat(stage, name, 0);
	SBX_AUTO_CLOSE int fd = openat(stage, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "stage %s", name);
	int r = sup_img_copy_data(a, fd, total, max, name, err);
	return r < 0 ? sbx_err_wrap(err, "the image archive (at most %llu bytes)", (unsigned long long)max) : 0;
}

static int stage_stream(sup_img_store *s, src *in, int stage, sbx_err *err)
{
	struct archive *a = archive_read_new();
	if (!a)
		return sbx_err_set(err, -ENOMEM, "image archive");
	archive_read_support_filter_all(a);
	archive_read_support_format_tar(a);
	uint64_t total = 0, max = sup_img_store_cfg_of(s)->max_import_bytes;
	int r = 0;
	if (archive_read_open(a, in, NULL, src_read, NULL) != ARCHIVE_OK)
		r = -EBADMSG;
	struct archive_entry *e;
	int h = ARCHIVE_FATAL;
	while (r == 0 && (h = archive_read_next_header(a, &e)) == ARCHIVE_OK) {
		const char *name = archive_entry_pathname(e);
		while (name && strncmp(name, "./", 2) == 0)
			name += 2;
		const char *folder = name ? wanted(name) : NULL;
		if (!folder || archive_entry_filetype(e) != AE_IFREG)
			continue; /* libarchive skips the member's data */
		r = stage_member(a, stage, name, folder, &total, max, err);
	}
	if (r == 0 && h != ARCHIVE_EOF)
		r = -EBADMSG;
	if (r == -EBADMSG) {
		if (in->failed)
			*err = in->err;
		else
			sbx_err_set(err, -EBADMSG, "not a tar archive: %s", archive_error_string(a));
		r = err->code;
	}
	archive_read_free(a);
	return r;
}

/* ---- documents -------------------------------------------------------- */

/* Read a JSON document of the layout (at most SUP_IMG_DOC_MAX), check it
 * against want_hex (when given) and size (>= 0), and give its own digest. */
static int read_doc(int dir, const char *path, const char *want_hex, int64_t size, char **out,
		    size_t *len, char hex[SUP_IMG_HEX_LEN + 1], sbx_err *err)
{
	SBX_AUTO_FREE char *buf = malloc(SUP_IMG_DOC_MAX + 1);
	if (!buf)
		return sbx_err_set(err, -ENOMEM, "%s", path);
	ssize_t n = sup_fs_read_small(dir, path, buf, SUP_IMG_DOC_MAX + 1, err);
	if (n < 0)
		return n == -ENOENT ? sbx_err_set(err, -ENOENT, "%s: missing from the image", path) : (int)n;
	SUP_AUTO_SHA256 sup_sha256 sha = {0};
	int r = sup_sha256_init(&sha, err);
	if (r < 0)
		return sbx_err_wrap(err, "%s", path);
	sup_sha256_update(&sha, buf, (size_t)n);
	r = sup_sha256_final_hex(&sha, hex, err);
	if (r < 0)
		return sbx_err_wrap(err, "%s", path);
	if (want_hex && strcmp(hex, want_hex) != 0)
		return sbx_err_set(err, -EBADMSG, "%s: content is sha256:%s, not the digest it is named by",
				   path, hex);
	if (size >= 0 && n != size)
		return sbx_err_set(err, -EBADMSG, "%s: %zd bytes, the descriptor says %lld", path, n,
				   (long long)size);
	*out = buf;
	buf = NULL;
	*len = (size_t)n;
	return 0;
}

/* ---- layers ----------------------------------------------------------- */

/* A new folder store/tmp/<what>-XXXXXX; its path into path. */
static int make_tmp(sup_img_store *s, const char *what, char path[PATH_MAX], sbx_err *err)
{
	int n = snprintf(path, PATH_MAX, "%s/tmp/%s-XXXXXX", sup_img_store_root(s), what);
	if (n < 0 || n >= PATH_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "store/tmp: path too long");
	if (!mkdtemp(path))
		return sbx_err_sys(err, -errno, "store/tmp: mkdtemp");
	return 0;
}

static int size_file(int dir, uint64_t bytes, sbx_err *err)
{
	char buf[32];
	int n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)bytes);
	return sup_fs_write_file(dir, "size", buf, (size_t)n, 0644, err);
}

static int ensure_layer(sup_img_store *s, int layout, const sup_img_desc *blob, const char *diff,
			sup_img_imported *out, uint64_t *bytes, sbx_err *err)
{
	SBX_AUTO_CLOSE int layers = sup_img_store_dirfd(s, "layers");
	if (layers < 0)
		return sbx_err_sys(err, layers, "store/layers");
	char path[PATH_MAX], buf[32];
	snprintf(path, sizeof(path), "%s/size", diff);
	sbx_err ignored;
	if (sup_fs_read_small(layers, path, buf, sizeof(buf), &ignored) > 0) {
		*bytes = strtoull(buf, NULL, 10);
		out->layers_shared++;
		return 0;
	}
	SBX_AUTO_CLOSE int blob_fd = openat(layout, blob->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (blob_fd < 0)
		return sbx_err_sys(err, -errno, "layer %s", blob->path);
	/* unpacked whole in store/tmp (same file system), then renamed in */
	char tmp[PATH_MAX];
	int r = make_tmp(s, "layer", tmp, err);
	if (r < 0)
		return r;
	SBX_AUTO_CLOSE int d = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	r = d < 0 ? sbx_err_sys(err, -errno, "layer folder") : sup_fs_mkdir(d, "root", 0755, 0, 0, 0, err);
	SBX_AUTO_CLOSE int root = r < 0 ? -1 : openat(d, "root", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	sup_img_layer_info info = {0};
	if (r == 0 && root < 0)
		r = sbx_err_sys(err, -errno, "layer folder");
	r = r ?: sup_img_layer_unpack(blob_fd, blob->hex[0] ? blob->hex : NULL, diff, root,
				      &sup_img_store_cfg_of(s)->limits, &info, err);
	r = r ?: size_file(d, info.bytes, err);
	if (r == 0 && renameat(AT_FDCWD, tmp, layers, diff) < 0 && errno != EEXIST && errno != ENOTEMPTY)
		r = sbx_err_sys(err, -errno, "layer %s: into the store", diff);
	/* failed, or another import made the same layer first: ours goes */
	sup_fs_rm_tree(tmp, &ignored);
	if (r < 0)
		return sbx_err_wrap(err, "layer sha256:%.12s", diff);
	*bytes = info.bytes;
	out->layers_new++;
	return 0;
}

/* Does the image hold the agent (a regular executable file), looking from
 * the top layer down as the overlay would? */
static bool has_agent(sup_img_store *s, const sup_image *im)
{
	for (size_t i = im->nlayers; i-- > 0;) {
		char path[PATH_MAX];
		sbx_err ignored;
		if (sup_img_store_layer_path(s, im->layers[i], path, sizeof(path), &ignored) < 0)
			return false;
		strncat(path, AGENT_IN_IMAGE, sizeof(path) - strlen(path) - 1);
		struct stat st;
		if (lstat(path, &st) == 0)
			return S_ISREG(st.st_mode) && (st.st_mode & 0111);
	}
	return false;
}

/* ---- one image -------------------------------------------------------- */

static int import_plan(sup_img_store *s, int layout, sup_img_plan *p, bool oci, const char *ref,
		       sup_img_imported *out, sbx_err *err)
{
	SBX_AUTO_FREE char *doc = NULL;
	size_t len = 0;
	char hex[SUP_IMG_HEX_LEN + 1] = "";
	int r;
	if (oci) {
		if (p->manifest.size == -2) {
			r = read_doc(layout, p->manifest.path, p->manifest.hex, -1, &doc, &len, hex, err);
			r = r ?: sup_img_parse_platforms(doc, len, p, err);
			free(doc);
			doc = NULL;
			if (r < 0)
				return r;
		}
		r = read_doc(layout, p->manifest.path, p->manifest.hex, p->manifest.size, &doc, &len, hex, err);
		r = r ?: sup_img_parse_manifest(doc, len, p, err);
		free(doc);
		doc = NULL;
		if (r < 0)
			return r;
	}
	r = read_doc(layout, p->config.path, oci ? p->config.hex : NULL, p->config.size, &doc, &len, hex, err);
	sup_img_config cfg = {0};
	r = r ?: sup_img_parse_config(doc, len, &cfg, err);
	if (r < 0)
		return r;
	sup_image im = {0};
	snprintf(im.digest, sizeof(im.digest), "sha256:%s", hex);
	if (cfg.ndiff != p->nlayers) {
		r = sbx_err_set(err, -EBADMSG, "config names %zu layers, the manifest %zu", cfg.ndiff,
				p->nlayers);
		goto out;
	}
	for (size_t i = 0; i < p->nlayers; i++) {
		uint64_t bytes = 0;
		r = ensure_layer(s, layout, &p->layers[i], cfg.diff_ids[i], out, &bytes, err);
		if (r < 0)
			goto out;
		memcpy(im.layers[im.nlayers++], cfg.diff_ids[i], SUP_IMG_HEX_LEN + 1);
		im.size += bytes;
	}
	if (ref) {
		snprintf(im.refs[0], sizeof(im.refs[0]), "%s", ref);
		im.nrefs = 1;
	} else {
		memcpy(im.refs, p->refs, sizeof(im.refs));
		im.nrefs = p->nrefs;
	}
	im.env = cfg.env;
	im.nenv = cfg.nenv;
	im.workdir = cfg.workdir;
	im.user = cfg.user;
	im.service = cfg.service;
	im.imported_at = time(NULL);
	im.agent_bundled = cfg.entry0 && strcmp(cfg.entry0, AGENT_IN_IMAGE) == 0 && has_agent(s, &im);
	r = sup_img_store_commit(s, &im, err);
	if (r == 0 && out->n < SUP_IMG_IMPORT_MAX)
		memcpy(out->digests[out->n++], im.digest, sizeof(im.digest));
out:
	sup_img_config_release(&cfg);
	return r;
}

static int import_layout(sup_img_store *s, int layout, const char *ref, sup_img_imported *out,
			 sbx_err *err)
{
	SBX_AUTO_FREE sup_img_plan *plans = calloc(SUP_IMG_IMPORT_MAX, sizeof(*plans));
	SBX_AUTO_FREE char *doc = NULL;
	if (!plans)
		return sbx_err_set(err, -ENOMEM, "import");
	size_t len = 0, n = 0;
	char hex[SUP_IMG_HEX_LEN + 1] = "";
	bool oci = faccessat(layout, "index.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
	int r;
	if (oci) {
		r = read_doc(layout, "index.json", NULL, -1, &doc, &len, hex, err);
		r = r ?: sup_img_parse_index(doc, len, plans, SUP_IMG_IMPORT_MAX, &n, err);
	} else if (faccessat(layout, "manifest.json", F_OK, AT_SYMLINK_NOFOLLOW) == 0) {
		r = read_doc(layout, "manifest.json", NULL, -1, &doc, &len, hex, err);
		r = r ?: sup_img_parse_docker(doc, len, plans, SUP_IMG_IMPORT_MAX, &n, err);
	} else {
		r = sbx_err_set(err, -EINVAL,
				"neither an OCI image layout (index.json) nor a docker save archive (manifest.json)");
	}
	if (r < 0)
		return r;
	if (ref && n != 1)
		return sbx_err_set(err, -EINVAL, "a name was given, but the archive holds %zu images", n);
	for (size_t i = 0; i < n; i++) {
		r = import_plan(s, layout, &plans[i], oci, ref, out, err);
		if (r < 0)
			return r;
	}
	return 0;
}

static int check_ref(const char *ref, sbx_err *err)
{
	if (ref && !sup_img_ref_ok(ref))
		return sbx_err_set(err, -EINVAL,
				   "image name '%.100s': want 1-255 of [A-Za-z0-9._/:@+-], not host or sha256:",
				   ref);
	return 0;
}

int sup_img_import_stream(sup_img_store *s, sup_img_read_fn read, void *ud, const char *ref,
			  sup_img_imported *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	int r = check_ref(ref, err);
	if (r < 0)
		return r;
	SBX_AUTO_FREE src *in = calloc(1, sizeof(*in));
	if (!in)
		return sbx_err_set(err, -ENOMEM, "import");
	in->read = read;
	in->ud = ud;
	char tmp[PATH_MAX];
	r = make_tmp(s, "import", tmp, err);
	if (r < 0)
		return sbx_err_wrap(err, "import");
	SBX_AUTO_CLOSE int stage = open(tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	sup_img_store_import_begin(s);
	r = stage < 0 ? sbx_err_sys(err, -errno, "import: stage") : stage_stream(s, in, stage, err);
	r = r ?: import_layout(s, stage, ref, out, err);
	sup_img_store_import_end(s);
	sbx_err ignored;
	sup_fs_rm_tree(tmp, &ignored);
	return r < 0 ? sbx_err_wrap(err, "import") : 0;
}

static ssize_t fd_read(void *ud, void *buf, size_t cap, sbx_err *err)
{
	int fd = *(int *)ud;
	ssize_t n;
	do
		n = read(fd, buf, cap);
	while (n < 0 && errno == EINTR);
	return n < 0 ? sbx_err_sys(err, -errno, "read the image") : n;
}

int sup_img_import_path(sup_img_store *s, const char *path, const char *ref,
			sup_img_imported *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	int r = check_ref(ref, err);
	if (r < 0)
		return r;
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return sbx_err_sys(err, -errno, "import %s", path);
	if (!S_ISDIR(st.st_mode))
		return sup_img_import_stream(s, fd_read, &fd, ref, out, err) < 0
			       ? sbx_err_wrap(err, "%s", path)
			       : 0;
	sup_img_store_import_begin(s);
	r = import_layout(s, fd, ref, out, err);
	sup_img_store_import_end(s);
	return r < 0 ? sbx_err_wrap(err, "import %s", path) : 0;
}
