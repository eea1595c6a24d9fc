/* sup_snap_store_s3: the snapshot store's object-store half (see
 * sup_snap_store.h for the keys and the order they are written in). */
#include "sup_snap_store_s3.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/grow.h"
#include "sup_img_digest.h"
#include "sup_s3.h"
#include "sup_sha256.h"
#include "sup_snap_manifest.h"

#define IDLE_MAX 4            /* connections kept between calls */
#define HASH_CHUNK (1u << 20) /* bytes read at a time for the digest */
#define KEY_CAP 80 /* "manifests/" + an id (at most 47 bytes) + ".json" */

struct sup_snap_remote {
	char url[sizeof(((sup_snap_store *)0)->location)];
	char endpoint[1024];
	bool has_endpoint;
	pthread_mutex_t mu;
	sup_s3 *idle[IDLE_MAX];
	size_t nidle;
};

/* sup_s3's errors as the store's two kinds (sup_snap_store.h); a missing
 * object and this node's own failures (memory, its disk) stay as they are. */
static int store_err(sbx_err *err)
{
	switch (err->code) {
	case -ECONNREFUSED:
	case -ETIMEDOUT:
		err->code = -EHOSTUNREACH;
		break;
	case -EACCES:
	case -EINVAL:
	case -EEXIST:
	case -EIO:
	case -EPROTO:
	case -E2BIG:
	case -EOPNOTSUPP:
		err->code = -EBADE;
		break;
	default:
		break;
	}
	return err->code;
}

/* A connection of the pool, or a new one. */
static int take(sup_snap_remote *r, sup_s3 **out, sbx_err *err)
{
	pthread_mutex_lock(&r->mu);
	*out = r->nidle ? r->idle[--r->nidle] : NULL;
	pthread_mutex_unlock(&r->mu);
	if (*out)
		return 0;
	sup_s3_opts o = {.endpoint = r->has_endpoint ? r->endpoint : NULL};
	return sup_s3_open(r->url, &o, out, err);
}

static void give(sup_snap_remote *r, sup_s3 *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&r->mu);
	if (r->nidle < IDLE_MAX) {
		r->idle[r->nidle++] = h;
		h = NULL;
	}
	pthread_mutex_unlock(&r->mu);
	sup_s3_close(h);
}

static void keys_of(const char *id, char akey[KEY_CAP], char mkey[KEY_CAP])
{
	snprintf(akey, KEY_CAP, "archives/%s.tar.zst", id);
	snprintf(mkey, KEY_CAP, "manifests/%s.json", id);
}

/* The k-th volume's archive, beside the layer's. */
static void vol_key(const char *id, unsigned k, char key[KEY_CAP])
{
	snprintf(key, KEY_CAP, "archives/%s.v%u.tar.zst", id, k);
}

int sup_snap_s3_open(sup_snap_store *s, const char *url, const char *endpoint, sbx_err *err)
{
	size_t n = strlen(url);
	if (n + 2 > sizeof(s->location) || (endpoint && strlen(endpoint) >= 1024))
		return sbx_err_set(err, -ENAMETOOLONG, "--snapshot-store: too long");
	sup_snap_remote *r = calloc(1, sizeof(*r));
	if (!r)
		return sbx_err_set(err, -ENOMEM, "snapshot store");
	memcpy(r->url, url, n + 1);
	r->has_endpoint = endpoint != NULL;
	if (endpoint)
		snprintf(r->endpoint, sizeof(r->endpoint), "%s", endpoint);
	pthread_mutex_init(&r->mu, NULL);
	/* one connection now: the URL and the credentials are checked here */
	sup_s3 *h;
	int rc = take(r, &h, err);
	if (rc < 0) {
		pthread_mutex_destroy(&r->mu);
		free(r);
		return rc;
	}
	give(r, h);
	/* the location rows name: the URL, ending in one '/' */
	snprintf(s->location, sizeof(s->location), "%s%s", url, url[n - 1] == '/' ? "" : "/");
	s->remote = r;
	return 0;
}

void sup_snap_s3_close(sup_snap_store *s)
{
	sup_snap_remote *r = s->remote;
	if (!r)
		return;
	for (size_t i = 0; i < r->nidle; i++)
		sup_s3_close(r->idle[i]);
	pthread_mutex_destroy(&r->mu);
	free(r);
	s->remote = NULL;
}

/* fd's bytes from its start: their count and sha256; fd is left at 0. */
static int digest_of(int fd, uint64_t *size, char hex[SUP_IMG_HEX_LEN + 1], sbx_err *err)
{
	SBX_AUTO_FREE char *buf = malloc(HASH_CHUNK);
	if (!buf)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	if (lseek(fd, 0, SEEK_SET) < 0)
		return sbx_err_sys(err, -errno, "seek");
	SUP_AUTO_SHA256 sup_sha256 sha = {0};
	int r = sup_sha256_init(&sha, err);
	if (r < 0)
		return r;
	*size = 0;
	for (;;) {
		ssize_t got = read(fd, buf, HASH_CHUNK);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0)
			return sbx_err_sys(err, -errno, "read");
		if (got == 0)
			break;
		sup_sha256_update(&sha, buf, (size_t)got);
		*size += (uint64_t)got;
	}
	r = sup_sha256_final_hex(&sha, hex, err);
	if (r < 0)
		return r;
	if (lseek(fd, 0, SEEK_SET) < 0)
		return sbx_err_sys(err, -errno, "seek");
	return 0;
}

/* Upload the staged file path as key: its size and sha256 into *size,
 * hex. */
static int put_file(sup_s3 *h, const char *path, const char *key, uint64_t *size,
		    char hex[SUP_IMG_HEX_LEN + 1], sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "its staged archive %s", path);
	int r = digest_of(fd, size, hex, err);
	return r ?: sup_s3_put_fd(h, key, fd, err);
}

int sup_snap_s3_commit(const sup_snap_store *s, sup_catalog_snap *row, const char *staged,
		       sbx_err *err)
{
	int r = sup_snap_store_check_id(row->id, err);
	snprintf(row->location, sizeof(row->location), "%s", s->location);
	char akey[KEY_CAP], mkey[KEY_CAP], vkey[KEY_CAP], vpath[PATH_MAX];
	keys_of(row->id, akey, mkey);
	sup_s3 *h = NULL;
	r = r ?: take(s->remote, &h, err);
	/* the archives first (multipart past a part, streamed from the
	 * files), the manifest last: a snapshot is there once its manifest is */
	r = r ?: put_file(h, staged, akey, &row->size, row->sha256, err);
	unsigned k = 0;
	for (; r == 0 && k < row->nvols; k++) {
		vol_key(row->id, k, vkey);
		r = sup_snap_store_vol_stage(s, row->id, k, vpath, err);
		r = r ?: put_file(h, vpath, vkey, &row->vols[k].size, row->vols[k].sha256, err);
	}
	SBX_AUTO_FREE char *man = NULL;
	size_t mlen = 0;
	r = r ?: sup_snap_manifest_render(row, &man, &mlen, err);
	r = r ?: sup_s3_put_buf(h, mkey, man, mlen, err);
	if (r < 0 && h) {
		/* a manifest that went up though its answer did not, then the
		 * archives: nothing half-stored */
		sbx_err ignored;
		sup_s3_delete(h, mkey, &ignored);
		sup_s3_delete(h, akey, &ignored);
		for (unsigned i = 0; i < k; i++) {
			vol_key(row->id, i, vkey);
			sup_s3_delete(h, vkey, &ignored);
		}
	}
	give(s->remote, h);
	unlink(staged);
	for (unsigned i = 0; i < row->nvols; i++) {
		sbx_err ignored;
		if (sup_snap_store_vol_stage(s, row->id, i, vpath, &ignored) == 0)
			unlink(vpath);
	}
	if (r < 0) {
		store_err(err);
		return sbx_err_wrap(err, "snapshot %s: into %s", row->id, s->location);
	}
	return 0;
}

/* Download key into the new file path (O_EXCL) and check it is size
 * bytes of digest sha256. */
static int get_file(sup_s3 *h, const char *key, const char *path, uint64_t want_size,
		    const char *want_sha, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd =
		open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "a file to fetch into");
	int r = sup_s3_get_fd(h, key, fd, err);
	if (r < 0)
		return store_err(err);
	uint64_t size = 0;
	char hex[SUP_IMG_HEX_LEN + 1];
	r = digest_of(fd, &size, hex, err);
	if (r == 0 && (size != want_size || (want_sha[0] && strcmp(hex, want_sha) != 0)))
		r = sbx_err_set(err, -EILSEQ,
				"the store's archive %s is not the one its manifest names (%" PRIu64
				" bytes, sha256 %.12s..., where the manifest says %" PRIu64 " bytes, %.12s...)",
				key, size, hex, want_size, want_sha);
	return r;
}

int sup_snap_s3_fetch(const sup_snap_store *s, const sup_catalog_snap *row, char *out, bool *temp,
		      sbx_err *err)
{
	*temp = false;
	if (!s->remote || strcmp(row->location, s->location) != 0)
		return sbx_err_set(err, -ENOENT, "snapshot %s is kept in %s, which this supervisor does not read",
				   row->id, row->location);
	int r = sup_snap_store_check_id(row->id, err);
	if (r < 0)
		return r;
	/* a unique name (its volumes' go beside it, ".v<k>") */
	if (snprintf(out, PATH_MAX - 8, "%s/%s-XXXXXX", s->stage, row->id) >= PATH_MAX - 8)
		return sbx_err_set(err, -ENAMETOOLONG, "snapshot store: path too long");
	SBX_AUTO_CLOSE int fd = mkostemp(out, O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "snapshot %s: a file to fetch into", row->id);
	unlink(out); /* get_file makes it again, O_EXCL */
	char akey[KEY_CAP], mkey[KEY_CAP], vkey[KEY_CAP], vpath[PATH_MAX];
	keys_of(row->id, akey, mkey);
	sup_s3 *h = NULL;
	r = take(s->remote, &h, err);
	r = r ?: get_file(h, akey, out, row->size, row->sha256, err);
	unsigned k = 0;
	for (; r == 0 && k < row->nvols; k++) {
		vol_key(row->id, k, vkey);
		snprintf(vpath, sizeof(vpath), "%s.v%u", out, k);
		r = get_file(h, vkey, vpath, row->vols[k].size, row->vols[k].sha256, err);
	}
	give(s->remote, h);
	if (r < 0) {
		unlink(out);
		for (unsigned i = 0; i <= k && i < row->nvols; i++) {
			snprintf(vpath, sizeof(vpath), "%s.v%u", out, i);
			unlink(vpath);
		}
		out[0] = '\0';
		return sbx_err_wrap(err, "snapshot %s: fetch from %s", row->id, s->location);
	}
	*temp = true;
	return 0;
}

int sup_snap_s3_remove(const sup_snap_store *s, const sup_catalog_snap *row, sbx_err *err)
{
	/* a row of a store this supervisor does not read (it was started with
	 * another --snapshot-store): its objects are that store's to keep */
	if (!s->remote || strcmp(row->location, s->location) != 0)
		return 0;
	int r = sup_snap_store_check_id(row->id, err);
	if (r < 0)
		return r;
	char akey[KEY_CAP], mkey[KEY_CAP];
	keys_of(row->id, akey, mkey);
	sup_s3 *h = NULL;
	r = take(s->remote, &h, err);
	/* the manifest first: no node finds it from now on */
	r = r ?: sup_s3_delete(h, mkey, err);
	r = r ?: sup_s3_delete(h, akey, err);
	for (unsigned k = 0; r == 0 && k < row->nvols; k++) {
		char vkey[KEY_CAP];
		vol_key(row->id, k, vkey);
		r = sup_s3_delete(h, vkey, err);
	}
	give(s->remote, h);
	if (r < 0) {
		store_err(err);
		return sbx_err_wrap(err, "snapshot %s: remove from %s", row->id, s->location);
	}
	return 0;
}

int sup_snap_store_manifest(const sup_snap_store *s, const char *id, sup_catalog_snap *out,
			    sbx_err *err)
{
	int r = sup_snap_store_check_id(id, err);
	if (r < 0)
		return r;
	if (!s->remote)
		return sbx_err_set(err, -ENOENT, "no snapshot %s", id);
	SBX_AUTO_FREE char *buf = malloc(SUP_SNAP_MANIFEST_MAX);
	if (!buf)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	char akey[KEY_CAP], mkey[KEY_CAP];
	keys_of(id, akey, mkey);
	sup_s3 *h = NULL;
	size_t len = 0;
	r = take(s->remote, &h, err);
	r = r ?: sup_s3_get_buf(h, mkey, buf, SUP_SNAP_MANIFEST_MAX, &len, err);
	give(s->remote, h);
	if (r == -ENOENT)
		return sbx_err_set(err, -ENOENT, "no snapshot %s", id);
	if (r < 0) {
		store_err(err);
		return sbx_err_wrap(err, "snapshot %s: its manifest in %s", id, s->location);
	}
	r = sup_snap_manifest_parse(buf, len, id, out, err);
	if (r == 0)
		snprintf(out->location, sizeof(out->location), "%s", s->location);
	return r;
}

typedef struct ids_ctx {
	int (*fn)(void *ud, const char *id);
	void *ud;
} ids_ctx;

static int id_of_key(void *ud, const char *key, uint64_t size, int64_t mtime)
{
	(void)size;
	(void)mtime;
	ids_ctx *c = ud;
	const char *name = key + strlen("manifests/");
	size_t n = strlen(name);
	char id[KEY_CAP];
	sbx_err ignored;
	/* "<id>.json"; anything else under the folder is not ours to read */
	if (n < 6 || n - 5 >= sizeof(id) || strcmp(name + n - 5, ".json") != 0)
		return 0;
	memcpy(id, name, n - 5);
	id[n - 5] = '\0';
	if (sup_snap_store_check_id(id, &ignored) < 0)
		return 0;
	return c->fn(c->ud, id);
}

int sup_snap_store_ids(const sup_snap_store *s, int (*fn)(void *ud, const char *id), void *ud,
		       sbx_err *err)
{
	if (!s->remote)
		return 0;
	ids_ctx c = {.fn = fn, .ud = ud};
	sup_s3 *h = NULL;
	int r = take(s->remote, &h, err);
	r = r ?: sup_s3_list(h, "manifests/", id_of_key, &c, err);
	give(s->remote, h);
	if (r < 0) {
		store_err(err);
		return sbx_err_wrap(err, "snapshots in %s", s->location);
	}
	return r;
}

/* ---- the orphan sweep ---- */

typedef char sweep_id[48];

typedef struct sweep_arch {
	sweep_id id;
	char key[KEY_CAP];
	int64_t mtime;
} sweep_arch;

typedef struct sweep_ctx {
	sweep_id *manifests;
	size_t nman, capman;
	sweep_arch *arch;
	size_t narch, caparch;
	size_t listed;
} sweep_ctx;

static int sweep_id_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

static int sweep_key(void *ud, const char *key, uint64_t size, int64_t mtime)
{
	(void)size;
	sweep_ctx *c = ud;
	sweep_id id;
	if (++c->listed > SUP_SNAP_SWEEP_LISTED_MAX)
		return -E2BIG;
	if (sup_snap_store_name_id(key, "manifests/", true, id)) {
		if (sbx_grow(&c->manifests, &c->capman, c->nman, sizeof(*c->manifests), 64,
			     SUP_SNAP_SWEEP_LISTED_MAX) < 0)
			return -ENOMEM;
		memcpy(c->manifests[c->nman++], id, sizeof(id));
	} else if (sup_snap_store_name_id(key, "archives/", false, id)) {
		if (sbx_grow(&c->arch, &c->caparch, c->narch, sizeof(*c->arch), 64,
			     SUP_SNAP_SWEEP_LISTED_MAX) < 0)
			return -ENOMEM;
		sweep_arch *a = &c->arch[c->narch++];
		memcpy(a->id, id, sizeof(id));
		snprintf(a->key, sizeof(a->key), "%s", key);
		a->mtime = mtime;
	}
	return 0;
}

static bool known_id(const sup_snap_sweep *sw, const char *id)
{
	return sw->nknown && bsearch(id, sw->known, sw->nknown, sizeof(*sw->known), sweep_id_cmp);
}

/* An unfinished multipart upload of an archive no snapshot here knows,
 * old enough to abort. */
typedef struct sweep_upload {
	char key[KEY_CAP];
	char upload_id[1024];
} sweep_upload;

typedef struct uploads_ctx {
	const sup_snap_sweep *sw;
	sweep_upload *v; /* at most sw->max_remove */
	size_t n, cap;
	size_t listed;
	unsigned seen;
} uploads_ctx;

static int sweep_upload_key(void *ud, const char *key, const char *upload_id, int64_t initiated)
{
	uploads_ctx *c = ud;
	const sup_snap_sweep *sw = c->sw;
	sweep_id id;
	if (++c->listed > SUP_SNAP_SWEEP_LISTED_MAX)
		return -E2BIG;
	/* another key's upload is not ours; one of a snapshot being written
	 * here or a row names is left (its writer is alive, or it is done) */
	if (!sup_snap_store_name_id(key, "archives/", false, id) || known_id(sw, id))
		return 0;
	c->seen++;
	/* young (a writer on any node may still finish it) or of unknown age:
	 * left, as archives are */
	if (initiated < 0 || initiated > sw->now - (int64_t)sw->min_age_s ||
	    c->n >= sw->max_remove || strlen(upload_id) >= sizeof(c->v[0].upload_id))
		return 0;
	if (sbx_grow(&c->v, &c->cap, c->n, sizeof(*c->v), 16, sw->max_remove) < 0)
		return -ENOMEM;
	snprintf(c->v[c->n].key, sizeof(c->v[0].key), "%s", key);
	snprintf(c->v[c->n].upload_id, sizeof(c->v[0].upload_id), "%s", upload_id);
	c->n++;
	return 0;
}

/* The unfinished multipart uploads under archives/ whose writer died (a
 * supervisor killed during a snapshot's upload never sent its abort):
 * their parts are the store's to keep forever otherwise. */
static int sweep_uploads(sup_s3 *h, sup_snap_sweep *sw, sbx_err *err)
{
	uploads_ctx c = {.sw = sw};
	int r = sup_s3_list_uploads(h, "archives/", sweep_upload_key, &c, err);
	if (r == -EOPNOTSUPP) {
		/* s3rver, for one: nothing to list, nothing to abort */
		sw->uploads_unlisted = true;
		free(c.v);
		return 0;
	}
	if (r == -E2BIG || r == -ENOMEM)
		r = sbx_err_set(err, r, "over %u uploads, or out of memory: none aborted",
				SUP_SNAP_SWEEP_LISTED_MAX);
	if (r > 0)
		r = 0;
	sw->uploads = c.seen;
	for (size_t i = 0; r == 0 && i < c.n; i++) {
		r = sup_s3_abort_upload(h, c.v[i].key, c.v[i].upload_id, err);
		if (r == 0)
			sw->aborted++;
	}
	free(c.v);
	return r;
}

int sup_snap_store_sweep(const sup_snap_store *s, sup_snap_sweep *sw, sbx_err *err)
{
	sw->removed = sw->orphans = sw->uploads = sw->aborted = 0;
	sw->uploads_unlisted = false;
	if (!s->remote)
		return 0;
	sweep_ctx c = {0};
	sup_s3 *h = NULL;
	int r = take(s->remote, &h, err);
	if (r == 0) {
		/* every key: archives/ are listed before manifests/, and no
		 * archive is judged before every manifest is known */
		r = sup_s3_list(h, "", sweep_key, &c, err);
		if (r == -E2BIG || r == -ENOMEM)
			r = sbx_err_set(err, r, "over %u keys, or out of memory: no sweep",
					SUP_SNAP_SWEEP_LISTED_MAX);
	}
	if (r == 0 && c.nman)
		qsort(c.manifests, c.nman, sizeof(*c.manifests), sweep_id_cmp);
	for (size_t i = 0; r == 0 && i < c.narch; i++) {
		const sweep_arch *a = &c.arch[i];
		if (c.nman && bsearch(a->id, c.manifests, c.nman, sizeof(*c.manifests), sweep_id_cmp))
			continue; /* its snapshot's */
		if (known_id(sw, a->id))
			continue; /* a row names it (its manifest is being put or read) */
		sw->orphans++;
		/* young (an upload whose manifest is on its way, on any node) or
		 * of unknown age: left */
		if (a->mtime < 0 || a->mtime > sw->now - (int64_t)sw->min_age_s ||
		    sw->removed >= sw->max_remove)
			continue;
		sbx_err e;
		if (sup_s3_delete(h, a->key, &e) < 0) {
			r = sbx_err_set(err, e.code, "%s", e.msg);
			break;
		}
		sw->removed++;
	}
	if (r == 0)
		r = sweep_uploads(h, sw, err);
	give(s->remote, h);
	free(c.manifests);
	free(c.arch);
	if (r < 0) {
		store_err(err);
		return sbx_err_wrap(err, "orphan sweep of %s", s->location);
	}
	return 0;
}
