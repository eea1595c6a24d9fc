/* A start taking back the sandboxes an earlier run handed out (or left
 * pooled): each into the pool of its image (a cold one of its digest when
 * none serves it now), its egress plumbing made again, its agent dialled;
 * the core hears when it answers (hooks.on_adopted). Start-up only: the
 * plumbing blocks. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sbx/cleanup.h"
#include "sup_catalog.h"
#include "sup_img_store.h"
#include "sup_log.h"
#include "sup_net.h"
#include "sup_pool_int.h"

/* An adopted sandbox's egress: its slot (so its addresses) again, its link
 * from the new router made as for a new one, rejecting everything until the
 * core loads its policy again. Start-up only: the plumbing blocks. */
static int replumb(sup_pools *p, sup_sandbox *sb, unsigned slot, sbx_err *err)
{
	int rc = sup_net_slot_claim(p->cfg.net, slot, err);
	if (rc < 0)
		return rc;
	sup_rtnl *nl = NULL;
	rc = sup_net_plumb(p->cfg.net, slot, sb->box.init_pid, &nl, err);
	if (rc == 0 && (rc = sup_net_slot_ready(p->cfg.net, slot, nl, err)) < 0) {
		sbx_err e;
		nl = sup_net_slot_release(p->cfg.net, slot);
		if (sup_net_unplumb(p->cfg.net, slot, nl, &e) < 0)
			sup_warn("sandbox %s: %s", sb->id, e.msg);
	}
	if (rc < 0) {
		sup_net_slot_put(p->cfg.net, slot);
		return sbx_err_wrap(err, "its egress plumbing");
	}
	sb->net_slot = slot;
	return 0;
}

int sup_pools_adopt(sup_pools *p, const sup_catalog_rec *rec, const sup_runc_box *box, int agent_fd,
		    sup_sandbox **out, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = agent_fd;
	*out = NULL;
	if (rec->net_slot && !p->cfg.net)
		return sbx_err_set(err, -EOPNOTSUPP,
				   "it has egress plumbing (slot %u) and this start has no --uplink",
				   rec->net_slot);
	sup_pool *pool = NULL;
	for (size_t i = 0; !pool && i < p->npools; i++)
		if (strcmp(p->pools[i].image, rec->image) == 0 &&
		    strcmp(p->pools[i].digest, rec->digest) == 0 && p->pools[i].isolation == rec->isolation)
			pool = &p->pools[i];
	/* a store image without a pool now: a cold pool of its digest (a ref
	 * may name another image by now) */
	if (!pool && rec->digest[0] && p->cfg.store)
		pool = sup_pool_add(p, rec->digest, rec->isolation, 0, err);
	else if (!pool)
		sbx_err_set(err, -ENOENT, "image %.200s (%s) is not served any more", rec->image,
			    sup_isolation_names[rec->isolation]);
	if (!pool)
		return err->code;
	if (pool->digest[0] && sup_img_store_pin(p->cfg.store, pool->digest, 1) < 0)
		return sbx_err_set(err, -ENOENT, "its image %s was deleted", pool->digest);
	sup_sandbox *sb = calloc(1, sizeof(*sb));
	if (!sb) {
		if (pool->digest[0])
			sup_img_store_pin(p->cfg.store, pool->digest, -1);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	snprintf(sb->id, sizeof(sb->id), "%s", rec->id);
	sb->pool = pool;
	sb->box = *box;
	sb->res = rec->res;
	sb->state = SUP_SB_CONNECTING;
	sb->adopting = rec->phase == SUP_CAT_RUNNING;
	/* a paused one's agent cannot answer the handshake frozen: thawed
	 * until it has (agent_on_ready freezes it again) */
	sb->paused = sb->adopting && rec->paused;
	if ((sb->paused && sup_runc_freeze(p->cfg.runc, &sb->box, false, err) < 0) ||
	    (rec->net_slot && replumb(p, sb, rec->net_slot, err) < 0)) {
		sup_pool_unpin(sb);
		free(sb);
		return err->code;
	}
	clock_gettime(CLOCK_MONOTONIC, &sb->queued_at);
	TAILQ_INIT(&sb->delete_waiters);
	TAILQ_INIT(&sb->execs);
	int rc = fd >= 0 ? sup_agent_open(p->base, sbx_steal_fd(&fd), sb->id, p->cfg.handshake_timeout_ms,
					  &p->cfg.agent, &sup_pool_agent_cbs, sb, &sb->agent, err)
			 : sup_agent_connect(p->base, sb->box.socket_path, sb->id, p->cfg.handshake_timeout_ms,
					     &p->cfg.agent, &sup_pool_agent_cbs, sb, &sb->agent, err);
	if (rc < 0) {
		if (sb->net_slot) {
			sbx_err e;
			if (sup_net_unplumb(p->cfg.net, sb->net_slot,
					    sup_net_slot_release(p->cfg.net, sb->net_slot), &e) < 0)
				sup_warn("sandbox %s: %s", sb->id, e.msg);
			sup_net_slot_put(p->cfg.net, sb->net_slot);
		}
		sup_pool_unpin(sb);
		free(sb);
		return err->code;
	}
	TAILQ_INSERT_TAIL(&p->all, sb, all_link);
	p->nalive++;
	pool->creating++;
	*out = sb;
	return 0;
}
