/* sup_volumes: see sup_volumes.h. Layout:
 *   <state>/volumes/<tenant>/<name>/disk.img, disk/   (sup_disk)
 * The registry is two small arrays (volumes, and claims: one per mount of
 * a volume by a sandbox), searched linearly: a node holds a few hundred
 * volumes at most, each sandbox at most SUP_VOL_MAX_MOUNTS. */
#include "sup_volumes.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sup_catalog.h"
#include "sup_disk.h"
#include "sup_fsutil.h"
#include "sup_log.h"
#include "sup_nsmount.h"
#include "sup_path.h"
#include "sup_runc_image.h"

typedef enum vol_state { VOL_CREATING, VOL_READY, VOL_DELETING } vol_state;
static const char *const state_names[] = { "creating", "ready", "deleting" };

typedef struct vol {
	sup_catalog_vol c; /* tenant, name, size, created_at */
	vol_state state;
	char dir[PATH_MAX];
} vol;

typedef struct claim {
	char id[48];
	char tenant[128];
	sup_vol_mount m;
	bool pending; /* read from the catalog, its sandbox not taken back yet */
} claim;

struct sup_volumes {
	char state_dir[PATH_MAX];
	struct sup_catalog *cat;
	sup_workers *workers;
	vol **v;
	size_t n, cap;
	claim *cl;
	size_t ncl, capcl;
};

/* A create or delete on a worker. */
typedef struct vol_job {
	sup_job job;
	sup_volumes *vs;
	vol *vol;
	bool create;
	sup_volumes_fill_fn fill; /* create: what fills it, or NULL */
	void *fill_ud;
	int rc;
	sbx_err err;
	sup_volumes_cb cb;
	void *ud;
} vol_job;

static vol *find(const sup_volumes *v, const char *tenant, const char *name)
{
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->v[i]->c.tenant, tenant) == 0 && strcmp(v->v[i]->c.name, name) == 0)
			return v->v[i];
	return NULL;
}

static int not_found(const char *name, sbx_err *err)
{
	return sbx_err_set(err, -ENOENT, "volume %.64s: not found", name);
}

static void users_of(const sup_volumes *v, const vol *x, unsigned *readers, const char **writer)
{
	*readers = 0;
	*writer = NULL;
	for (size_t i = 0; i < v->ncl; i++) {
		const claim *c = &v->cl[i];
		if (c->pending || strcmp(c->tenant, x->c.tenant) != 0 || strcmp(c->m.name, x->c.name) != 0)
			continue;
		if (c->m.read_only)
			(*readers)++;
		else
			*writer = c->id;
	}
}

static void view_of(const sup_volumes *v, const vol *x, sup_volume_view *out)
{
	memset(out, 0, sizeof(*out));
	out->tenant = x->c.tenant;
	out->name = x->c.name;
	out->size = x->c.size;
	out->created_at = x->c.created_at;
	out->state = state_names[x->state];
	users_of(v, x, &out->readers, &out->writer);
}

static int dir_of(const sup_volumes *v, const char *tenant, const char *name, char *out,
		  size_t cap, sbx_err *err)
{
	int n = snprintf(out, cap, "%s/volumes/%s/%s", v->state_dir, tenant, name);
	if (n < 0 || (size_t)n >= cap)
		return sbx_err_set(err, -ENAMETOOLONG, "volume %s: path too long", name);
	return 0;
}

static vol *add(sup_volumes *v, const sup_catalog_vol *c, vol_state st, sbx_err *err)
{
	if (v->n == v->cap) {
		size_t cap = v->cap ? v->cap * 2 : 16;
		vol **nv = realloc(v->v, cap * sizeof(vol *));
		if (!nv) {
			sbx_err_set(err, -ENOMEM, "out of memory");
			return NULL;
		}
		v->v = nv;
		v->cap = cap;
	}
	vol *x = calloc(1, sizeof(*x));
	if (!x || dir_of(v, c->tenant, c->name, x->dir, sizeof(x->dir), err) < 0) {
		if (!x)
			sbx_err_set(err, -ENOMEM, "out of memory");
		free(x);
		return NULL;
	}
	x->c = *c;
	x->state = st;
	v->v[v->n++] = x;
	return x;
}

static void drop(sup_volumes *v, vol *x)
{
	for (size_t i = 0; i < v->n; i++)
		if (v->v[i] == x) {
			memmove(&v->v[i], &v->v[i + 1], (v->n - i - 1) * sizeof(vol *));
			v->n--;
			break;
		}
	free(x);
}

/* ---- start ---- */

static int load_vol(const sup_catalog_vol *c, void *ud, sbx_err *err)
{
	sup_volumes *v = ud;
	vol *x = add(v, c, VOL_READY, err);
	if (!x)
		return err->code;
	sbx_err e;
	if (sup_disk_mount_volume(x->dir, x->c.size, &e) < 0) {
		/* kept (listed, deletable), but no sandbox can mount it */
		sup_error("volume %s/%s: %s", c->tenant, c->name, e.msg);
		x->state = VOL_DELETING;
	}
	return 0;
}

static int push_claim(sup_volumes *v, const char *id, const char *tenant, const sup_vol_mount *m,
		      bool pending, sbx_err *err)
{
	if (v->ncl == v->capcl) {
		size_t cap = v->capcl ? v->capcl * 2 : 16;
		claim *nc = realloc(v->cl, cap * sizeof(*nc));
		if (!nc)
			return sbx_err_set(err, -ENOMEM, "out of memory");
		v->cl = nc;
		v->capcl = cap;
	}
	claim *c = &v->cl[v->ncl++];
	memset(c, 0, sizeof(*c));
	snprintf(c->id, sizeof(c->id), "%s", id);
	snprintf(c->tenant, sizeof(c->tenant), "%s", tenant);
	c->m = *m;
	c->pending = pending;
	return 0;
}

static int load_claim(const char *id, const char *tenant, const sup_vol_mount *m, void *ud,
		      sbx_err *err)
{
	return push_claim(ud, id, tenant, m, true, err);
}

int sup_volumes_open(const char *state_dir, struct sup_catalog *cat, sup_workers *workers,
		     sup_volumes **out, sbx_err *err)
{
	*out = NULL;
	sup_volumes *v = calloc(1, sizeof(*v));
	if (!v)
		return sbx_err_set(err, -ENOMEM, "volumes");
	snprintf(v->state_dir, sizeof(v->state_dir), "%s", state_dir);
	v->cat = cat;
	v->workers = workers;
	char top[PATH_MAX];
	snprintf(top, sizeof(top), "%s/volumes", state_dir);
	int r = 0;
	if (mkdir(top, 0700) < 0 && errno != EEXIST)
		r = sbx_err_sys(err, -errno, "volumes: mkdir %s", top);
	r = r ?: sup_catalog_vol_each(cat, load_vol, v, err);
	r = r ?: sup_catalog_vol_mounts_each(cat, load_claim, v, err);
	if (r < 0) {
		sup_volumes_free(v);
		return sbx_err_wrap(err, "volumes");
	}
	if (v->n)
		sup_info("volumes: %zu taken back, %zu mount(s) of sandboxes recorded", v->n, v->ncl);
	*out = v;
	return 0;
}

void sup_volumes_free(sup_volumes *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->n; i++) {
		unsigned readers;
		const char *writer;
		users_of(v, v->v[i], &readers, &writer);
		bool held = readers || writer;
		for (size_t j = 0; j < v->ncl && !held; j++)
			held = v->cl[j].pending && strcmp(v->cl[j].tenant, v->v[i]->c.tenant) == 0 &&
			       strcmp(v->cl[j].m.name, v->v[i]->c.name) == 0;
		sbx_err e;
		/* a sandbox still holds it (a handover): its mount stays for the
		 * next start, which finds it mounted */
		if (!held && v->v[i]->state == VOL_READY && sup_disk_unmount(v->v[i]->dir, &e) < 0)
			sup_warn("volume %s/%s: %s", v->v[i]->c.tenant, v->v[i]->c.name, e.msg);
		free(v->v[i]);
	}
	free(v->v);
	free(v->cl);
	free(v);
}

/* ---- create, delete ---- */

static int mkdir_ok(const char *path, sbx_err *err)
{
	if (mkdir(path, 0700) < 0 && errno != EEXIST)
		return sbx_err_sys(err, -errno, "mkdir %s", path);
	return 0;
}

static void vol_job_run(sup_job *job)
{
	vol_job *j = (vol_job *)job;
	vol *x = j->vol;
	sbx_err_clear(&j->err);
	char tdir[PATH_MAX];
	if (snprintf(tdir, sizeof(tdir), "%s/volumes/%s", j->vs->state_dir, x->c.tenant) >= (int)sizeof(tdir)) {
		j->rc = sbx_err_set(&j->err, -ENAMETOOLONG, "volume %s: path too long", x->c.name);
		return;
	}
	if (!j->create) {
		/* unmounted first: a folder still mounted is never removed */
		j->rc = sup_disk_unmount(x->dir, &j->err);
		j->rc = j->rc ?: sup_fs_rm_tree(x->dir, &j->err);
		rmdir(tdir); /* the tenant's last one: its folder goes too */
		return;
	}
	j->rc = mkdir_ok(tdir, &j->err);
	/* a folder left by a create cut short (no catalog row names it) */
	j->rc = j->rc ?: sup_fs_rm_tree(x->dir, &j->err);
	j->rc = j->rc ?: mkdir_ok(x->dir, &j->err);
	j->rc = j->rc ?: sup_disk_make_volume(x->dir, x->c.size, SUP_RUNC_SANDBOX_UID,
					       SUP_RUNC_SANDBOX_GID, &j->err);
	if (j->rc == 0 && j->fill) {
		char root[PATH_MAX];
		if (snprintf(root, sizeof(root), "%s/" SUP_DISK_MOUNT, x->dir) >= (int)sizeof(root))
			j->rc = sbx_err_set(&j->err, -ENAMETOOLONG, "volume %s: path too long", x->c.name);
		j->rc = j->rc ?: j->fill(root, j->fill_ud, &j->err);
		if (j->rc < 0) {
			sbx_err ignored;
			sup_disk_unmount(x->dir, &ignored);
		}
	}
	if (j->rc < 0) {
		sbx_err ignored;
		sup_fs_rm_tree(x->dir, &ignored);
	}
}

static void vol_job_done(sup_job *job)
{
	vol_job *j = (vol_job *)job;
	sup_volumes *v = j->vs;
	vol *x = j->vol;
	if (j->create && j->rc == 0 && (j->rc = sup_catalog_vol_put(v->cat, &x->c, &j->err)) < 0) {
		sbx_err ignored;
		sup_disk_unmount(x->dir, &ignored);
		sup_fs_rm_tree(x->dir, &ignored);
	}
	if (j->rc < 0) {
		sup_error("volume %s/%s: %s failed: %s", x->c.tenant, x->c.name,
			  j->create ? "create" : "delete", j->err.msg);
		if (j->create) {
			drop(v, x);
		} else {
			x->state = VOL_READY; /* still listed: a delete may be tried again */
			sbx_err e;
			if (sup_disk_mount_volume(x->dir, x->c.size, &e) < 0)
				x->state = VOL_DELETING;
		}
		j->cb(j->rc, NULL, &j->err, j->ud);
	} else if (j->create) {
		x->state = VOL_READY;
		sup_info("volume %s/%s: made (%llu bytes)", x->c.tenant, x->c.name,
			 (unsigned long long)x->c.size);
		sup_volume_view view;
		view_of(v, x, &view);
		j->cb(0, &view, NULL, j->ud);
	} else {
		sup_info("volume %s/%s: deleted", x->c.tenant, x->c.name);
		drop(v, x);
		j->cb(0, NULL, NULL, j->ud);
	}
	free(j);
}

static int submit(sup_volumes *v, vol *x, bool create, sup_volumes_fill_fn fill, void *fill_ud,
		  sup_volumes_cb cb, void *ud, sbx_err *err)
{
	vol_job *j = calloc(1, sizeof(*j));
	if (!j)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	j->job.run = vol_job_run;
	j->job.done = vol_job_done;
	j->vs = v;
	j->vol = x;
	j->create = create;
	j->fill = fill;
	j->fill_ud = fill_ud;
	j->cb = cb;
	j->ud = ud;
	sup_workers_submit(v->workers, &j->job, true);
	return 0;
}

int sup_volumes_create(sup_volumes *v, const char *tenant, const char *name, uint64_t size,
		       sup_volumes_cb cb, void *ud, sbx_err *err)
{
	return sup_volumes_create_filled(v, tenant, name, size, NULL, NULL, cb, ud, err);
}

int sup_volumes_create_filled(sup_volumes *v, const char *tenant, const char *name,
			      uint64_t size, sup_volumes_fill_fn fill, void *fill_ud,
			      sup_volumes_cb cb, void *ud, sbx_err *err)
{
	if (find(v, tenant, name))
		return sbx_err_set(err, -EEXIST, "volume %.64s exists", name);
	sup_catalog_vol c = { .size = size, .created_at = (int64_t)time(NULL) };
	snprintf(c.tenant, sizeof(c.tenant), "%s", tenant);
	snprintf(c.name, sizeof(c.name), "%s", name);
	vol *x = add(v, &c, VOL_CREATING, err);
	if (!x)
		return err->code;
	int r = submit(v, x, true, fill, fill_ud, cb, ud, err);
	if (r < 0)
		drop(v, x);
	return r;
}

int sup_volumes_get(sup_volumes *v, const char *tenant, const char *name, sup_volume_view *out,
		    sbx_err *err)
{
	vol *x = find(v, tenant, name);
	if (!x)
		return not_found(name, err);
	view_of(v, x, out);
	if (x->state == VOL_READY) {
		sbx_err e;
		out->has_used = sup_disk_used(x->dir, &out->used, &e) == 0;
	}
	return 0;
}

void sup_volumes_list(sup_volumes *v, const char *tenant,
		      void (*fn)(const sup_volume_view *view, void *ud), void *ud)
{
	for (size_t i = 0; i < v->n; i++) {
		if (tenant && strcmp(v->v[i]->c.tenant, tenant) != 0)
			continue;
		sup_volume_view view;
		view_of(v, v->v[i], &view);
		fn(&view, ud);
	}
}

static bool claimed(const sup_volumes *v, const vol *x)
{
	for (size_t i = 0; i < v->ncl; i++)
		if (!v->cl[i].pending && strcmp(v->cl[i].tenant, x->c.tenant) == 0 && strcmp(v->cl[i].m.name, x->c.name) == 0)
			return true;
	return false;
}

int sup_volumes_delete(sup_volumes *v, const char *tenant, const char *name, sup_volumes_cb cb,
		       void *ud, sbx_err *err)
{
	vol *x = find(v, tenant, name);
	if (!x)
		return not_found(name, err);
	if (x->state == VOL_CREATING)
		return sbx_err_set(err, -ETXTBSY, "volume %.64s: still being made", name);
	if (claimed(v, x))
		return sbx_err_set(err, -ETXTBSY, "volume %.64s: mounted by a sandbox", name);
	/* catalog first: a crash from here on leaves files no row names,
	 * which the next create of the name removes */
	int r = sup_catalog_vol_remove(v->cat, tenant, name, err);
	if (r < 0)
		return r;
	x->state = VOL_DELETING;
	return submit(v, x, false, NULL, NULL, cb, ud, err);
}

int sup_volumes_root(const sup_volumes *v, const char *tenant, const char *name, char *out,
		     uint64_t *size, sbx_err *err)
{
	const vol *x = find(v, tenant, name);
	if (!x)
		return not_found(name, err);
	if (x->state != VOL_READY)
		return sbx_err_set(err, -ETXTBSY, "volume %s: not ready", name);
	if (snprintf(out, PATH_MAX, "%s/" SUP_DISK_MOUNT, x->dir) >= PATH_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "volume %s: path too long", name);
	*size = x->c.size;
	return 0;
}

uint64_t sup_volumes_tenant_bytes(const sup_volumes *v, const char *tenant)
{
	uint64_t sum = 0;
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->v[i]->c.tenant, tenant) == 0)
			sum += v->v[i]->c.size;
	return sum;
}

/* ---- mounts ---- */

int sup_volumes_check(const sup_volumes *v, const char *tenant, const sup_vol_mounts *m,
		      sbx_err *err)
{
	for (size_t i = 0; i < m->n; i++) {
		const vol *x = find(v, tenant, m->v[i].name);
		if (!x)
			return not_found(m->v[i].name, err);
		if (x->state != VOL_READY)
			return sbx_err_set(err, -ETXTBSY, "volume %s: %s", x->c.name,
					   x->state == VOL_CREATING ? "still being made" : "being deleted");
		unsigned readers;
		const char *writer;
		users_of(v, x, &readers, &writer);
		if (writer)
			return sbx_err_set(err, -ETXTBSY, "volume %s: mounted read-write by sandbox %s",
					   x->c.name, writer);
		if (!m->v[i].read_only && readers)
			return sbx_err_set(err, -ETXTBSY,
					   "volume %s: mounted read-only by %u sandbox(es); read-write "
					   "needs it alone",
					   x->c.name, readers);
	}
	return 0;
}

int sup_volumes_attach(sup_volumes *v, const char *tenant, const char *id, pid_t pid,
		       const sup_vol_mounts *m, sbx_err *err)
{
	int r = sup_volumes_check(v, tenant, m, err);
	if (r < 0)
		return r;
	struct timespec t0, t1, t2;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t i = 0; i < m->n && r == 0; i++)
		r = push_claim(v, id, tenant, &m->v[i], false, err);
	r = r ?: sup_catalog_vol_mounts_put(v->cat, id, tenant, m->v, m->n, err);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	for (size_t i = 0; i < m->n && r == 0; i++) {
		const vol *x = find(v, tenant, m->v[i].name);
		char src[PATH_MAX];
		if (snprintf(src, sizeof(src), "%s/" SUP_DISK_MOUNT, x->dir) >= (int)sizeof(src))
			r = sbx_err_set(err, -ENAMETOOLONG, "volume %s: path too long", x->c.name);
		r = r ?: sup_nsmount_bind(pid, src, m->v[i].path, m->v[i].read_only, err);
		if (r < 0)
			sbx_err_wrap(err, "volume %s", x->c.name);
	}
	clock_gettime(CLOCK_MONOTONIC, &t2);
	if (r == 0)
		sup_debug("sandbox %s: %zu volume(s): recorded in %ld us, bound in %ld us", id, m->n,
			  (long)((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000),
			  (long)((t2.tv_sec - t1.tv_sec) * 1000000 + (t2.tv_nsec - t1.tv_nsec) / 1000));
	return r;
}

void sup_volumes_release(sup_volumes *v, const char *id)
{
	size_t k = 0;
	for (size_t i = 0; i < v->ncl; i++)
		if (strcmp(v->cl[i].id, id) != 0)
			v->cl[k++] = v->cl[i];
	v->ncl = k;
}

int sup_volumes_restore(sup_volumes *v, const char *id, bool handed_out, sbx_err *err)
{
	size_t n = 0;
	for (size_t i = 0; i < v->ncl; i++)
		if (strcmp(v->cl[i].id, id) == 0) {
			v->cl[i].pending = false;
			n++;
		}
	if (n && !handed_out) {
		sup_volumes_release(v, id);
		return sbx_err_set(err, -EBUSY, "a pooled sandbox with %zu volume(s) mounted", n);
	}
	return 0;
}

void sup_volumes_restored(sup_volumes *v)
{
	size_t k = 0;
	for (size_t i = 0; i < v->ncl; i++)
		if (!v->cl[i].pending)
			v->cl[k++] = v->cl[i];
	v->ncl = k;
}

size_t sup_volumes_of(const sup_volumes *v, const char *id, sup_vol_mount *out, size_t cap)
{
	size_t n = 0;
	for (size_t i = 0; i < v->ncl; i++)
		if (!v->cl[i].pending && strcmp(v->cl[i].id, id) == 0) {
			if (n < cap)
				out[n] = v->cl[i].m;
			n++;
		}
	return n;
}

const sup_vol_mount *sup_volumes_mount_at(const sup_volumes *v, const char *id, const char *path,
					  size_t len)
{
	for (size_t i = 0; i < v->ncl; i++) {
		const claim *c = &v->cl[i];
		if (!c->pending && strcmp(c->id, id) == 0 &&
		    sup_path_is_under(path, len, c->m.path, strlen(c->m.path)))
			return &c->m;
	}
	return NULL;
}
