#include "sup_restore.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sup_log.h"

typedef struct kept {
	sup_catalog_rec rec;
	sup_runc_box box;
	int fd;        /* the backend's: its agent's connected socket, -1: none */
} kept;

struct sup_restore {
	const sup_runc_cfg *rcfg;
	const sup_pool_backend *be;
	sup_catalog *cat;
	kept *v;
	size_t n, cap;
	unsigned dropped;
	sup_core *core;        /* adopt: where kept pool sizes go */
	sup_runc_states *states; /* the runtimes' own word, read once */
};

static void forget(sup_restore *r, const char *id, const char *why)
{
	sbx_err e;
	r->dropped++;
	sup_info("sandbox %s: not kept: %s", id, why);
	if (sup_catalog_remove(r->cat, id, &e) < 0)
		sup_warn("sandbox %s: %s", id, e.msg);
}

/* One row: kept when it names a made sandbox the runtime says lives. */
static int check_row(const sup_catalog_rec *rec, void *ud, sbx_err *err)
{
	sup_restore *r = ud;
	sbx_err why;
	(void)err;
	if (rec->phase == SUP_CAT_CREATING) {
		/* its runtime call was killed (sup_runc_kill_calls): whatever it
		 * made is the sweep's */
		forget(r, rec->id, "its create was cut short");
		return 0;
	}
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 16;
		kept *v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			return sbx_err_set(err, -ENOMEM, "restore");
		r->v = v;
		r->cap = cap;
	}
	kept *k = &r->v[r->n];
	memset(k, 0, sizeof(*k));
	k->fd = -1;
	if (r->be ? r->be->adopt(r->be->ud, rec->id, rec->container_id, &k->box, &k->fd, &why) < 0
		  : sup_runc_adopt(r->rcfg, r->states, rec->id, rec->isolation, &k->box, &why) < 0) {
		forget(r, rec->id, why.msg);
		return 0;
	}
	k->rec = *rec;
	k->rec.network = k->rec.secrets = NULL;
	if (sup_env_copy(&rec->env, &k->rec.env) < 0 ||
	    (rec->network && !(k->rec.network = strdup(rec->network))) ||
	    (rec->secrets && !(k->rec.secrets = strdup(rec->secrets))))
		return sbx_err_set(err, -ENOMEM, "restore");
	r->n++;
	return 0;
}

void sup_restore_free(sup_restore *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n; i++) {
		sup_catalog_rec_free(&r->v[i].rec);
		if (r->v[i].fd >= 0)
			close(r->v[i].fd);
	}
	free(r->v);
	free(r);
}

int sup_restore_names(const sup_restore *r, const char ***out, size_t *n)
{
	*n = r->n;
	*out = calloc(r->n + 1, sizeof(**out));
	if (!*out)
		return -ENOMEM;
	for (size_t i = 0; i < r->n; i++)
		(*out)[i] = r->v[i].box.container_id;
	return 0;
}

int sup_restore_prepare(const sup_runc_cfg *rcfg, const sup_pool_backend *be, sup_catalog **cat,
			sup_restore **out, sbx_err *err)
{
	*out = NULL;
	int rc = sup_catalog_open(rcfg->state_dir, cat, err);
	if (rc < 0)
		return rc;
	sup_restore *r = calloc(1, sizeof(*r));
	if (!r)
		return sbx_err_set(err, -ENOMEM, "restore");
	r->rcfg = rcfg;
	r->be = be;
	r->cat = *cat;
	/* first: no runtime call of the dead supervisor may go on (a `run`
	 * finishing after the sweep would leave a container nobody holds) */
	int killed = sup_runc_kill_calls(rcfg, err);
	if (killed < 0) {
		sup_restore_free(r);
		return killed;
	}
	if (killed)
		sup_info("killed %d runtime call(s) an earlier run left going", killed);
	if (sup_runc_thaw_all(rcfg, err) < 0) {
		sup_restore_free(r);
		return err->code;
	}
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	sbx_err lerr;
	/* one listing per runtime, not a `state` process per row (about 0.2 s
	 * each on a loaded machine: 50 sandboxes were 10 s of a start) */
	if (!be && sup_runc_states_read(rcfg, &r->states, &lerr) < 0)
		sup_warn("runtime states: %s (those sandboxes are asked one by one)", lerr.msg);
	rc = sup_catalog_each(*cat, check_row, r, err);
	sup_runc_states_free(r->states);
	r->states = NULL;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	const char **ids = calloc(r->n + 1, sizeof(*ids));
	if (rc == 0 && !ids)
		rc = sbx_err_set(err, -ENOMEM, "restore");
	int left = rc;
	if (rc == 0 && ids) {
		for (size_t i = 0; i < r->n; i++)
			ids[i] = r->v[i].rec.id;
		left = sup_runc_remove_leftovers(rcfg, ids, r->n, err);
	}
	free(ids);
	if (left < 0) {
		sup_restore_free(r);
		return sbx_err_wrap(err, "remove leftovers of an earlier run");
	}
	if (left > 0 || r->n > 0)
		sup_info("earlier run: %zu sandbox(es) kept, %d removed (%u catalog row(s) dropped); "
			 "checked with the runtime in %.1f ms",
			 r->n, left, r->dropped,
			 (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
	*out = r;
	return 0;
}

/* A pool size set at run time by the earlier run, over the flags'. */
static int resize_pool(const char *image, sup_isolation isolation, unsigned size, void *ud,
		       sbx_err *err)
{
	sup_restore *r = ud;
	sup_pool_stats st;
	sbx_err e;
	(void)err;
	if (sup_core_pool_set_size(r->core, image, isolation, size, &st, &e) == 0)
		return 0;
	sup_warn("pool %s (%s): size %u of the earlier run not kept: %s", image,
		 sup_isolation_names[isolation], size, e.msg);
	if (e.code != -EIO && sup_catalog_pool_forget(r->cat, image, isolation, &e) < 0)
		sup_warn("pool %s: %s", image, e.msg);
	return 0;
}

void sup_restore_adopt(sup_restore *r, const sup_runc_cfg *rcfg, sup_core *core)
{
	for (size_t i = 0; i < r->n; i++) {
		kept *k = &r->v[i];
		sbx_err e;
		int fd = k->fd;
		k->fd = -1; /* the core's now, on every path */
		if (sup_core_restore(core, &k->rec, &k->box, fd, &e) == 0)
			continue;
		sup_warn("sandbox %s: not re-adopted, destroying it: %s", k->rec.id, e.msg);
		if ((r->be ? r->be->unmake(r->be->ud, &k->box, &e) : sup_runc_destroy(rcfg, &k->box, &e)) < 0)
			sup_error("sandbox %s: %s", k->rec.id, e.msg);
		if (sup_catalog_remove(r->cat, k->rec.id, &e) < 0)
			sup_warn("sandbox %s: %s", k->rec.id, e.msg);
	}
	sbx_err e;
	r->core = core;
	if (sup_catalog_each_pool(r->cat, resize_pool, r, &e) < 0)
		sup_warn("pool sizes of the earlier run: %s", e.msg);
	sup_restore_free(r);
}
