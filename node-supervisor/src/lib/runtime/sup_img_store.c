/* sup_img_store: see sup_img_store.h. */
#include "sup_img_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "sbx/cleanup.h"
#include "sbx/grow.h"
#include "sbx/json_auto.h"
#include "sup_fsutil.h"

#define RECORD_MAX (1u << 20)

struct sup_img_store {
	sup_img_store_cfg cfg;
	char root[256];      /* <state>/store (the state folder is short: sup_runc) */
	pthread_mutex_t mu;
	sup_image *images;   /* sorted by digest */
	size_t n, cap;
	unsigned imports;    /* running now */
	uint64_t gc_bytes;   /* freed by every GC of this process */
	uint64_t gc_layers;
};

void sup_image_release(sup_image *im)
{
	for (size_t i = 0; i < im->nenv; i++)
		free(im->env[i]);
	free(im->env);
	free(im->workdir);
	free(im->user);
	free(im->service);
	memset(im, 0, sizeof(*im));
}

static int image_copy(sup_image *dst, const sup_image *src)
{
	*dst = *src;
	dst->env = NULL;
	dst->nenv = 0;
	dst->workdir = src->workdir ? strdup(src->workdir) : NULL;
	dst->user = src->user ? strdup(src->user) : NULL;
	dst->service = src->service ? strdup(src->service) : NULL;
	dst->env = calloc(src->nenv + 1, sizeof(char *));
	bool ok = dst->env && (!src->workdir || dst->workdir) && (!src->user || dst->user) &&
		  (!src->service || dst->service);
	for (size_t i = 0; ok && i < src->nenv; i++, dst->nenv++)
		ok = (dst->env[i] = strdup(src->env[i])) != NULL;
	if (!ok) {
		sup_image_release(dst);
		return -ENOMEM;
	}
	return 0;
}

const sup_img_store_cfg *sup_img_store_cfg_of(const sup_img_store *s)
{
	return &s->cfg;
}

const char *sup_img_store_root(const sup_img_store *s)
{
	return s->root;
}

/* ---- records on disk -------------------------------------------------- */

static json_t *record_json(const sup_image *im)
{
	json_t *refs = json_array(), *layers = json_array(), *env = json_array();
	for (size_t i = 0; refs && i < im->nrefs; i++)
		json_array_append_new(refs, json_string(im->refs[i]));
	for (size_t i = 0; layers && i < im->nlayers; i++)
		json_array_append_new(layers, json_string(im->layers[i]));
	for (size_t i = 0; env && i < im->nenv; i++)
		json_array_append_new(env, json_string(im->env[i]));
	return json_pack("{s:s, s:o, s:o, s:o, s:s?, s:s?, s:b, s:s?, s:I, s:I}", "digest",
			 im->digest, "refs", refs, "layers", layers, "env", env, "workdir",
			 im->workdir, "user", im->user, "agent_bundled", im->agent_bundled,
			 "service", im->service, "size", (json_int_t)im->size, "imported_at",
			 (json_int_t)im->imported_at);
}

static int record_parse(const char *text, size_t len, sup_image *im, sbx_err *err)
{
	memset(im, 0, sizeof(*im));
	json_error_t je;
	SBX_AUTO_JSON json_t *j = json_loadb(text, len, 0, &je);
	const char *digest = json_string_value(json_object_get(j, "digest"));
	char hex[SUP_IMG_HEX_LEN + 1];
	if (!j || sup_img_digest_parse("record", digest, hex, err) < 0)
		return sbx_err_set(err, -EINVAL, "image record: unreadable");
	snprintf(im->digest, sizeof(im->digest), "%s", digest);
	size_t i;
	json_t *v;
	json_t *refs = json_object_get(j, "refs"), *layers = json_object_get(j, "layers");
	for (i = 0; i < json_array_size(refs) && (v = json_array_get(refs, i)); i++)
		if (im->nrefs < SUP_IMG_MAX_REFS && json_is_string(v) && sup_img_ref_ok(json_string_value(v)))
			snprintf(im->refs[im->nrefs++], SUP_IMG_REF_MAX + 1, "%s", json_string_value(v));
	for (i = 0; i < json_array_size(layers) && (v = json_array_get(layers, i)); i++) {
		if (im->nlayers == SUP_IMG_MAX_LAYERS || !json_is_string(v) || !sup_img_is_hex(json_string_value(v)))
			return sbx_err_set(err, -EINVAL, "image record %s: bad layer list", digest);
		snprintf(im->layers[im->nlayers++], SUP_IMG_HEX_LEN + 1, "%s", json_string_value(v));
	}
	json_t *env = json_object_get(j, "env");
	im->env = calloc(json_array_size(env) + 1, sizeof(char *));
	if (!im->env)
		return sbx_err_set(err, -ENOMEM, "image record");
	for (i = 0; i < json_array_size(env) && (v = json_array_get(env, i)); i++)
		if (json_is_string(v) && (im->env[im->nenv] = strdup(json_string_value(v))))
			im->nenv++;
	const char *wd = json_string_value(json_object_get(j, "workdir"));
	const char *user = json_string_value(json_object_get(j, "user"));
	im->workdir = wd ? strdup(wd) : NULL;
	im->user = user ? strdup(user) : NULL;
	im->agent_bundled = json_is_true(json_object_get(j, "agent_bundled"));
	const char *svc = json_string_value(json_object_get(j, "service"));
	/* written by us from a checked label: a record changed since is not used */
	if (svc && (svc[0] != '/' || strlen(svc) > SUP_IMG_SERVICE_MAX)) {
		sup_image_release(im);
		return sbx_err_set(err, -EINVAL, "image record: bad service");
	}
	im->service = svc ? strdup(svc) : NULL;
	im->size = (uint64_t)json_integer_value(json_object_get(j, "size"));
	im->imported_at = (time_t)json_integer_value(json_object_get(j, "imported_at"));
	return 0;
}

static int record_write(sup_img_store *s, const sup_image *im, sbx_err *err)
{
	SBX_AUTO_JSON json_t *j = record_json(im);
	SBX_AUTO_FREE char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (!text)
		return sbx_err_set(err, -ENOMEM, "image record");
	SBX_AUTO_CLOSE int dir = sup_img_store_dirfd(s, "images");
	if (dir < 0)
		return sbx_err_sys(err, dir, "image record: store/images");
	char name[SUP_IMG_HEX_LEN + 8], tmp[SUP_IMG_HEX_LEN + 16];
	snprintf(name, sizeof(name), "%s.json", im->digest + 7);
	snprintf(tmp, sizeof(tmp), ".%s.tmp", im->digest + 7);
	int r = sup_fs_write_file(dir, tmp, text, strlen(text), 0600, err);
	if (r == 0 && renameat(dir, tmp, dir, name) < 0)
		r = sbx_err_sys(err, -errno, "image record %s", name);
	return r;
}

static int record_remove(sup_img_store *s, const char *digest)
{
	SBX_AUTO_CLOSE int dir = sup_img_store_dirfd(s, "images");
	char name[SUP_IMG_HEX_LEN + 8];
	snprintf(name, sizeof(name), "%s.json", digest + 7);
	if (dir < 0 || (unlinkat(dir, name, 0) < 0 && errno != ENOENT))
		return -errno;
	return 0;
}

/* ---- the index -------------------------------------------------------- */

static int cmp_digest(const void *a, const void *b)
{
	return strcmp(((const sup_image *)a)->digest, ((const sup_image *)b)->digest);
}

static sup_image *find_locked(sup_img_store *s, const char *name)
{
	for (size_t i = 0; i < s->n; i++) {
		if (strcmp(s->images[i].digest, name) == 0)
			return &s->images[i];
		for (size_t k = 0; k < s->images[i].nrefs; k++)
			if (strcmp(s->images[i].refs[k], name) == 0)
				return &s->images[i];
	}
	return NULL;
}

static int add_locked(sup_img_store *s, sup_image *im)
{
	int rc = sbx_grow(&s->images, &s->cap, s->n, sizeof(*s->images), 16, SUP_IMG_STORE_MAX);
	if (rc < 0)
		return rc;
	s->images[s->n++] = *im;
	memset(im, 0, sizeof(*im));
	qsort(s->images, s->n, sizeof(*s->images), cmp_digest);
	return 0;
}

static void drop_ref(sup_image *im, size_t k)
{
	memmove(im->refs[k], im->refs[k + 1], (im->nrefs - k - 1) * sizeof(im->refs[0]));
	im->nrefs--;
}

static int load_records(sup_img_store *s, sbx_err *err)
{
	SBX_AUTO_CLOSE int dir = sup_img_store_dirfd(s, "images");
	SBX_AUTO_CLOSEDIR DIR *d = dir >= 0 ? fdopendir(dup(dir)) : NULL;
	if (!d)
		return sbx_err_sys(err, -errno, "image store: read records");
	SBX_AUTO_FREE char *buf = malloc(RECORD_MAX);
	if (!buf)
		return sbx_err_set(err, -ENOMEM, "image store");
	struct dirent *de;
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		if (len != SUP_IMG_HEX_LEN + 5 || strcmp(de->d_name + SUP_IMG_HEX_LEN, ".json") != 0)
			continue;
		sbx_err rerr;
		sup_image im;
		ssize_t n = sup_fs_read_small(dir, de->d_name, buf, RECORD_MAX, &rerr);
		if (n < 0 || record_parse(buf, (size_t)n, &im, &rerr) < 0) {
			/* a record torn by a crash: the image is gone, its layers
			 * go with the next GC */
			unlinkat(dir, de->d_name, 0);
			continue;
		}
		int rc = add_locked(s, &im);
		if (rc < 0) {
			sup_image_release(&im);
			return sbx_err_set(err, rc, "image store: more than %d image records, or out of memory",
					   SUP_IMG_STORE_MAX);
		}
	}
	return 0;
}

int sup_img_store_dirfd(const sup_img_store *s, const char *sub)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/%s", s->root, sub);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int sup_img_store_open(const sup_img_store_cfg *cfg, sup_img_store **out, sbx_err *err)
{
	*out = NULL;
	sup_img_store *s = calloc(1, sizeof(*s));
	if (!s)
		return sbx_err_set(err, -ENOMEM, "image store");
	s->cfg = *cfg;
	pthread_mutex_init(&s->mu, NULL);
	int n = snprintf(s->root, sizeof(s->root), "%s/store", cfg->state_dir);
	int r = n < 0 || (size_t)n >= sizeof(s->root) ? sbx_err_set(err, -ENAMETOOLONG, "image store: path") : 0;
	SBX_AUTO_CLOSE int state = r ? -1 : open(cfg->state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (r == 0 && state < 0)
		r = sbx_err_sys(err, -errno, "image store: %s", cfg->state_dir);
	r = r ?: sup_fs_mkdir(state, "store", 0700, 0, 0, 1, err);
	r = r ?: sup_fs_mkdir(state, "store/layers", 0755, 0, 0, 1, err);
	r = r ?: sup_fs_mkdir(state, "store/images", 0700, 0, 0, 1, err);
	if (r == 0) {
		/* an import the last run did not finish */
		char tmp[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s/tmp", s->root);
		r = sup_fs_rm_tree(tmp, err);
	}
	r = r ?: sup_fs_mkdir(state, "store/tmp", 0700, 0, 0, 0, err);
	r = r ?: load_records(s, err);
	if (r < 0) {
		sup_img_store_free(s);
		return sbx_err_wrap(err, "image store");
	}
	*out = s;
	return 0;
}

void sup_img_store_free(sup_img_store *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < s->n; i++)
		sup_image_release(&s->images[i]);
	free(s->images);
	pthread_mutex_destroy(&s->mu);
	free(s);
}

bool sup_img_store_is_name(const char *name)
{
	char hex[SUP_IMG_HEX_LEN + 1];
	sbx_err ignored;
	return sup_img_ref_ok(name) || sup_img_digest_parse("image", name, hex, &ignored) == 0;
}

int sup_img_store_get(sup_img_store *s, const char *name, sup_image *out, sbx_err *err)
{
	pthread_mutex_lock(&s->mu);
	sup_image *im = find_locked(s, name);
	int r = im ? image_copy(out, im) : -ENOENT;
	pthread_mutex_unlock(&s->mu);
	if (r == -ENOENT)
		return sbx_err_set(err, r, "no image %.255s", name);
	if (r < 0)
		return sbx_err_set(err, r, "image %.255s", name);
	return 0;
}

size_t sup_img_store_count(sup_img_store *s)
{
	pthread_mutex_lock(&s->mu);
	size_t n = s->n;
	pthread_mutex_unlock(&s->mu);
	return n;
}

int sup_img_store_at(sup_img_store *s, size_t i, sup_image *out)
{
	pthread_mutex_lock(&s->mu);
	int r = i < s->n ? image_copy(out, &s->images[i]) : -ENOENT;
	pthread_mutex_unlock(&s->mu);
	return r;
}

unsigned sup_img_store_layers(sup_img_store *s, uint64_t *bytes)
{
	SBX_AUTO_CLOSE int dir = sup_img_store_dirfd(s, "layers");
	SBX_AUTO_CLOSEDIR DIR *d = dir >= 0 ? fdopendir(dup(dir)) : NULL;
	unsigned n = 0;
	*bytes = 0;
	struct dirent *de;
	while (d && (de = readdir(d))) {
		char path[SUP_IMG_HEX_LEN + 8], buf[32];
		sbx_err ignored;
		if (!sup_img_is_hex(de->d_name))
			continue;
		n++;
		snprintf(path, sizeof(path), "%.64s/size", de->d_name);
		if (sup_fs_read_small(dir, path, buf, sizeof(buf), &ignored) > 0)
			*bytes += strtoull(buf, NULL, 10);
	}
	return n;
}

uint64_t sup_img_store_usage(sup_img_store *s)
{
	uint64_t bytes;
	sup_img_store_layers(s, &bytes);
	return bytes;
}

int sup_img_store_layer_path(const sup_img_store *s, const char *hex, char *buf, size_t cap,
			     sbx_err *err)
{
	if (!sup_img_is_hex(hex))
		return sbx_err_set(err, -EINVAL, "layer '%.80s': not a digest", hex);
	int n = snprintf(buf, cap, "%s/layers/%s/root", s->root, hex);
	if (n < 0 || (size_t)n >= cap)
		return sbx_err_set(err, -ENAMETOOLONG, "layer %s: path too long", hex);
	return 0;
}

int sup_img_store_pin(sup_img_store *s, const char *digest, int delta)
{
	pthread_mutex_lock(&s->mu);
	sup_image *im = find_locked(s, digest);
	int r = im ? 0 : -ENOENT;
	if (im && delta > 0)
		im->pins++;
	else if (im && im->pins > 0)
		im->pins--;
	pthread_mutex_unlock(&s->mu);
	return r;
}

int sup_img_store_delete(sup_img_store *s, const char *name, sbx_err *err)
{
	pthread_mutex_lock(&s->mu);
	int r = 0;
	sup_image *im = find_locked(s, name);
	if (!im) {
		r = sbx_err_set(err, -ENOENT, "no image %.255s", name);
	} else if (strcmp(im->digest, name) != 0 && im->nrefs > 1) {
		/* one of several refs: the image stays under the others */
		sup_image copy;
		r = image_copy(&copy, im);
		if (r == 0) {
			for (size_t k = 0; k < copy.nrefs; k++)
				if (strcmp(copy.refs[k], name) == 0)
					drop_ref(&copy, k--);
			r = record_write(s, &copy, err);
			if (r == 0) {
				sup_image_release(im);
				*im = copy;
			} else {
				sup_image_release(&copy);
			}
		} else {
			sbx_err_set(err, r, "delete image");
		}
	} else if (im->pins > 0) {
		r = sbx_err_set(err, -EBUSY, "image %.255s is in use by %u sandbox(es) or pool(s)", name,
				im->pins);
	} else {
		r = record_remove(s, im->digest);
		if (r < 0) {
			sbx_err_sys(err, r, "delete image %.255s", name);
		} else {
			sup_image_release(im);
			size_t i = (size_t)(im - s->images);
			memmove(&s->images[i], &s->images[i + 1], (s->n - i - 1) * sizeof(*im));
			s->n--;
		}
	}
	pthread_mutex_unlock(&s->mu);
	return r;
}

static bool named_locked(sup_img_store *s, const char *hex)
{
	for (size_t i = 0; i < s->n; i++)
		for (size_t k = 0; k < s->images[i].nlayers; k++)
			if (strcmp(s->images[i].layers[k], hex) == 0)
				return true;
	return false;
}

int sup_img_store_gc(sup_img_store *s, uint64_t *freed, unsigned *layers, sbx_err *err)
{
	*freed = 0;
	*layers = 0;
	SBX_AUTO_CLOSE int dir = sup_img_store_dirfd(s, "layers");
	SBX_AUTO_CLOSE int tmp = sup_img_store_dirfd(s, "tmp");
	SBX_AUTO_CLOSEDIR DIR *d = dir >= 0 ? fdopendir(dup(dir)) : NULL;
	if (!d || tmp < 0)
		return sbx_err_sys(err, -errno, "image GC: store/layers");
	char gone[PATH_MAX];
	int n = snprintf(gone, sizeof(gone), "%s/tmp/gc-XXXXXX", s->root);
	if (n < 0 || (size_t)n >= sizeof(gone) || !mkdtemp(gone))
		return sbx_err_sys(err, -errno, "image GC: store/tmp");
	SBX_AUTO_CLOSE int gone_fd = open(gone, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	/* Under the lock only renames into store/tmp (the same file system):
	 * an import's commit waits for them, and the GC never starts while an
	 * import is between unpacking and commit. The files are removed after,
	 * so the loop's lookups never wait for a large layer's removal; a crash
	 * meanwhile leaves them in tmp/, which the next start empties. */
	pthread_mutex_lock(&s->mu);
	int r = gone_fd < 0 ? sbx_err_sys(err, -errno, "image GC: store/tmp") : 0;
	if (r == 0 && s->imports > 0)
		r = sbx_err_set(err, -EBUSY, "image GC: an import is running; try again after it");
	struct dirent *de;
	while (r == 0 && (de = readdir(d))) {
		if (!sup_img_is_hex(de->d_name) || named_locked(s, de->d_name))
			continue;
		char path[PATH_MAX], buf[32];
		sbx_err ignored;
		snprintf(path, sizeof(path), "%.64s/size", de->d_name);
		uint64_t size = sup_fs_read_small(dir, path, buf, sizeof(buf), &ignored) > 0
					? strtoull(buf, NULL, 10)
					: 0;
		if (renameat(dir, de->d_name, gone_fd, de->d_name) < 0) {
			r = sbx_err_sys(err, -errno, "image GC: layer %.64s", de->d_name);
			break;
		}
		*freed += size;
		(*layers)++;
	}
	s->gc_bytes += *freed;
	s->gc_layers += *layers;
	pthread_mutex_unlock(&s->mu);
	sbx_err rm_err;
	if (sup_fs_rm_tree(gone, &rm_err) < 0 && r == 0) {
		*err = rm_err;
		r = rm_err.code;
	}
	return r;
}

void sup_img_store_gc_totals(sup_img_store *s, uint64_t *bytes, uint64_t *layers)
{
	pthread_mutex_lock(&s->mu);
	*bytes = s->gc_bytes;
	*layers = s->gc_layers;
	pthread_mutex_unlock(&s->mu);
}

void sup_img_store_import_begin(sup_img_store *s)
{
	pthread_mutex_lock(&s->mu);
	s->imports++;
	pthread_mutex_unlock(&s->mu);
}

void sup_img_store_import_end(sup_img_store *s)
{
	pthread_mutex_lock(&s->mu);
	s->imports--;
	pthread_mutex_unlock(&s->mu);
}

int sup_img_store_commit(sup_img_store *s, const sup_image *im, sbx_err *err)
{
	sup_image rec;
	if (image_copy(&rec, im) < 0)
		return sbx_err_set(err, -ENOMEM, "image record");
	pthread_mutex_lock(&s->mu);
	int r = 0;
	/* the same image again: its refs join the ones it had */
	sup_image *old = find_locked(s, im->digest);
	if (old) {
		rec.pins = old->pins;
		rec.imported_at = old->imported_at;
		for (size_t k = 0; k < old->nrefs; k++) {
			bool have = false;
			for (size_t m = 0; m < rec.nrefs; m++)
				have |= strcmp(rec.refs[m], old->refs[k]) == 0;
			if (!have && rec.nrefs < SUP_IMG_MAX_REFS)
				memcpy(rec.refs[rec.nrefs++], old->refs[k], sizeof(rec.refs[0]));
		}
	}
	/* a new image past the bound is refused before anything is written */
	if (!old && s->n >= SUP_IMG_STORE_MAX)
		r = sbx_err_set(err, -ENOSPC, "image store: it holds %d images, its most; delete some",
				SUP_IMG_STORE_MAX);
	/* a ref names one image: taken from any other that had it */
	for (size_t i = 0; r == 0 && i < s->n; i++) {
		sup_image *o = &s->images[i];
		if (o == old)
			continue;
		bool changed = false;
		for (size_t k = 0; k < o->nrefs; k++) {
			bool taken = false;
			for (size_t m = 0; m < rec.nrefs; m++)
				taken |= strcmp(o->refs[k], rec.refs[m]) == 0;
			if (taken) {
				drop_ref(o, k--);
				changed = true;
			}
		}
		if (changed)
			r = record_write(s, o, err);
	}
	r = r ?: record_write(s, &rec, err);
	if (r == 0 && old) {
		sup_image_release(old);
		*old = rec;
	} else if (r == 0) {
		r = add_locked(s, &rec);
		if (r < 0)
			sbx_err_set(err, r, "image store: add %s", rec.digest);
	}
	pthread_mutex_unlock(&s->mu);
	if (r < 0)
		sup_image_release(&rec);
	return r;
}
