/* The pools of store images: a pool per (image, isolation), found by name
 * or by the digest a store name resolves to now, made at run time (size 0)
 * for a store image without one, sized at run time (pinning its image
 * while size > 0). Knows nothing of a sandbox's life beyond the pool's
 * counts. Loop thread only. */
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_img_store.h"
#include "sup_log.h"
#include "sup_pool_int.h"

/* ---- pools of store images ---- */

static int image_config(sup_pool *pool, const sup_image *im, sbx_err *err)
{
	pool->env.v = calloc(im->nenv + 1, sizeof(*pool->env.v));
	if (!pool->env.v)
		return sbx_err_set(err, -ENOMEM, "pool %s", pool->image);
	for (size_t i = 0; i < im->nenv; i++) {
		const char *eq = strchr(im->env[i], '=');
		sup_kv *kv = &pool->env.v[pool->env.n];
		kv->key = strndup(im->env[i], (size_t)(eq - im->env[i]));
		kv->val = strdup(eq + 1);
		pool->env.n++;
		if (!kv->key || !kv->val)
			return sbx_err_set(err, -ENOMEM, "pool %s", pool->image);
	}
	/* "user[:group]": the agent takes a name or uid; root stays the
	 * sandbox user's default (root only with --allow-root) */
	if (im->user) {
		size_t n = strcspn(im->user, ":");
		if (!(n == 4 && strncmp(im->user, "root", 4) == 0) && !(n == 1 && im->user[0] == '0') && n > 0 &&
		    !(pool->user = strndup(im->user, n)))
			return sbx_err_set(err, -ENOMEM, "pool %s", pool->image);
	}
	if (im->workdir && !(pool->workdir = strdup(im->workdir)))
		return sbx_err_set(err, -ENOMEM, "pool %s", pool->image);
	if (im->service && !(pool->service = strdup(im->service)))
		return sbx_err_set(err, -ENOMEM, "pool %s", pool->image);
	snprintf(pool->digest, sizeof(pool->digest), "%s", im->digest);
	return 0;
}

void sup_pool_clear(sup_pool *pool)
{
	sup_pools *p = pool->owner;
	if (pool->pinned)
		sup_img_store_pin(p->cfg.store, pool->digest, -1);
	sup_env_free(&pool->env);
	free(pool->user);
	free(pool->workdir);
	free(pool->service);
	free(pool->image_owned);
	sup_pool_sizer_clear(pool);
	if (pool->backoff_timer)
		event_free(pool->backoff_timer);
}

/* A pool of image (host, a rootfs folder, or a name the store has) with
 * size ready sandboxes. */
sup_pool *sup_pool_add(sup_pools *p, const char *image, sup_isolation isolation, unsigned size,
			  sbx_err *err)
{
	if (p->npools == p->cap) {
		sbx_err_set(err, -ENOSPC, "image %.200s: no room for another pool (%zu)", image, p->cap);
		return NULL;
	}
	sup_pool *pool = &p->pools[p->npools];
	memset(pool, 0, sizeof(*pool));
	pool->owner = p;
	pool->isolation = isolation;
	pool->size = size;
	pool->target = size;
	pool->why = "size";
	pool->res = *p->cfg.runc->res;
	TAILQ_INIT(&pool->ready);
	TAILQ_INIT(&pool->waiters);
	pool->image_owned = strdup(image);
	pool->image = pool->image_owned;
	pool->backoff_timer = evtimer_new(p->base, sup_pool_on_backoff_end, pool);
	int r = pool->image_owned && pool->backoff_timer ? 0 : sbx_err_set(err, -ENOMEM, "pools");
	if (r == 0 && p->cfg.store && strcmp(image, "host") != 0 && image[0] != '/') {
		sup_image im;
		r = sup_img_store_get(p->cfg.store, image, &im, err);
		if (r == 0) {
			r = image_config(pool, &im, err);
			sup_image_release(&im);
		}
		if (r == 0 && size > 0) {
			r = sup_img_store_pin(p->cfg.store, pool->digest, 1);
			pool->pinned = r == 0;
		}
	}
	if (r < 0) {
		sup_pool_clear(pool);
		return NULL;
	}
	p->npools++;
	return pool;
}

/* The pool of (image, isolation); with NULL, *image_known says whether
 * another isolation serves image. */
static sup_pool *find_pool(const sup_pools *p, const char *image, sup_isolation isolation,
			   bool *image_known)
{
	*image_known = false;
	for (size_t i = 0; i < p->npools; i++) {
		if (strcmp(p->pools[i].image, image) != 0)
			continue;
		*image_known = true;
		if (p->pools[i].isolation == isolation)
			return &p->pools[i];
	}
	return NULL;
}

/* The pool serving image: host and rootfs folders by name (pooled by the
 * operator only); a store image by its digest as the store resolves the
 * name now (a ref moved by an import names the new image), with a pool of
 * size 0 (cold creates) made for it on first use. */
sup_pool *sup_pool_for(sup_pools *p, const char *image, sup_isolation isolation, sbx_err *err)
{
	bool image_known;
	if (!p->cfg.store || strcmp(image, "host") == 0 || image[0] == '/' ||
	    !sup_img_store_is_name(image)) {
		sup_pool *pool = find_pool(p, image, isolation, &image_known);
		if (!pool && image_known)
			sbx_err_set(err, -EINVAL, "isolation \"%s\" is not offered for image \"%.200s\" "
				    "on this node", sup_isolation_names[isolation], image);
		else if (!pool)
			sbx_err_set(err, -EINVAL, "unknown image \"%.200s\" (this supervisor serves %s%s)",
				    image, p->pools[0].image, p->npools > 1 ? " and others" : "");
		return pool;
	}
	sup_image im;
	if (sup_img_store_get(p->cfg.store, image, &im, err) < 0) {
		sbx_err_set(err, -EINVAL, "unknown image \"%.200s\": neither host nor an image of the store",
			    image);
		return NULL;
	}
	sup_pool *pool = NULL;
	for (size_t i = 0; !pool && i < p->npools; i++)
		if (strcmp(p->pools[i].digest, im.digest) == 0 && p->pools[i].isolation == isolation)
			pool = &p->pools[i];
	sup_image_release(&im);
	if (!pool && !p->cfg.runc->runtimes[isolation].binary) {
		sbx_err_set(err, -EINVAL, "isolation \"%s\" is not offered on this node",
			    sup_isolation_names[isolation]);
		return NULL;
	}
	if (!pool) {
		pool = sup_pool_add(p, image, isolation, 0, err);
		if (pool)
			sup_info("pool %s: made for cold creates (%s)", pool->image, pool->digest);
	}
	return pool;
}

int sup_pools_set_size(sup_pools *p, const char *image, sup_isolation isolation, unsigned size,
		       sup_pool_stats *out, sbx_err *err)
{
	if (p->shutting_down)
		return sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down");
	sup_pool *pool = sup_pool_for(p, image, isolation, err);
	if (!pool)
		return err->code;
	/* a pool of size > 0 pins its image, so it cannot be deleted under it */
	if (pool->digest[0] && size > 0 && !pool->pinned) {
		if (sup_img_store_pin(p->cfg.store, pool->digest, 1) < 0)
			return sbx_err_set(err, -ENOENT, "no image %.200s", image);
		pool->pinned = true;
	} else if (pool->digest[0] && size == 0 && pool->pinned) {
		sup_img_store_pin(p->cfg.store, pool->digest, -1);
		pool->pinned = false;
	}
	unsigned old = pool->size;
	pool->size = size;
	sup_info("pool %s (%s): size %u (was %u)", pool->image, sup_isolation_names[isolation], size,
		 old);
	/* the floor moved: demand may keep it above (the next second says) */
	sup_pool_retarget(pool, sup_pool_sized(pool) && pool->target > size ? pool->target : size,
			  "size");
	sup_pools_stats(p, (size_t)(pool - p->pools), out);
	return 0;
}
