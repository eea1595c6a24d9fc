/* sup_core: see sup_core.h. The registry (lookup, views, the catalog's
 * record of a sandbox), a sandbox's end (delete, expiry, shutdown), its
 * settings (network, lifetime, pause), cancel, a restart's adoption, and
 * the core's life. A create (sup_core_create.c, with its tenant's bounds in
 * sup_core_tenant.c and its steps first in sup_core_prep.c) and the work
 * sent to an agent (sup_core_exec.c) are beside it. */
#include "sup_core.h"

#include <errno.h>
#include <event2/event.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_agent.h"
#include "sup_catalog.h"
#include "sup_core_int.h"
#include "sup_core_op_int.h"
#include "sup_core_secrets.h"
#include "sup_log.h"
#include "sup_net.h"
#include "sup_sandbox.h"
#include "sup_volumes.h"

/* ---- registry ---- */

static int cmp_id(const void *a, const void *b)
{
	return strcmp(((const sup_sandbox *)a)->id, ((const sup_sandbox *)b)->id);
}

sup_sandbox *sup_core_lookup(sup_core *c, const char *id)
{
	if (strlen(id) >= SUP_ID_MAX)
		return NULL;
	sup_sandbox key;
	memcpy(key.id, id, strlen(id) + 1);
	void *r = tfind(&key, &c->index, cmp_id);
	return r ? *(sup_sandbox **)r : NULL;
}

static bool sees(const sup_tenant *who, const sup_sandbox *sb)
{
	return who->admin || strcmp(who->name, sb->tenant) == 0;
}

/* The sandbox id as who may see it: another tenant's is not there. */
static sup_sandbox *lookup_for(sup_core *c, const sup_tenant *who, const char *id, sbx_err *err)
{
	sup_sandbox *sb = sup_core_lookup(c, id);
	if (!sb || !sees(who, sb)) {
		sbx_err_set(err, -ENOENT, "no sandbox %.64s", id);
		return NULL;
	}
	return sb;
}

const sup_sandbox *sup_core_find(sup_core *c, const sup_tenant *who, const char *id, sbx_err *err)
{
	return lookup_for(c, who, id, err);
}

void sup_core_mark_forked(sup_core *c, const char *id)
{
	sup_sandbox *sb = sup_core_lookup(c, id);
	if (sb)
		sb->forked = true;
}

sup_pools *sup_core_pools(sup_core *c)
{
	return c->pools;
}

void sup_core_set_restorer(sup_core *c, const sup_core_restorer *r, struct sup_snaps *s)
{
	c->restorer = r;
	c->snaps = s;
}

int sup_core_check_owner(sup_core *c, const sup_tenant *who, const char *id, sbx_err *err)
{
	return lookup_for(c, who, id, err) ? 0 : err->code;
}

static void unlist(sup_core *c, sup_sandbox *sb)
{
	if (!sb->listed)
		return;
	tdelete(sb, &c->index, cmp_id);
	TAILQ_REMOVE(&c->listed, sb, reg_link);
	sb->listed = false;
}

void sup_core_view_of(const sup_sandbox *sb, sup_sandbox_view *v)
{
	memset(v, 0, sizeof(*v));
	v->id = sb->id;
	v->state = sb->state == SUP_SB_RUNNING && sb->paused ? "paused" : sup_sb_state_name(sb->state);
	v->image = sup_pools_image_of(sb);
	v->isolation = sup_pools_isolation_of(sb);
	v->created_at = sb->created_at;
	v->expires_at = sb->expires_at;
	if (sb->state == SUP_SB_FAILED)
		v->reason = sb->reason[0] ? sb->reason : "the agent connection was lost";
	if (sb->agent) {
		sup_agent_stats st;
		sup_agent_stats_get(sb->agent, &st);
		v->agent_streams = st.streams;
		v->agent_waiting = st.waiting;
		v->agent_queued = st.queued;
	}
	v->agent_timeouts = sb->agent_timeouts;
	v->resources = sb->res;
	v->network = sb->core ? sup_net_policy(sb->core->cfg.net, sb->net_slot) : NULL;
	if (v->network)
		sup_net_addresses(sb->net_slot, v->addr4, sizeof(v->addr4), v->addr6, sizeof(v->addr6));
	if (sb->core && sb->core->cfg.volumes) {
		size_t n = sup_volumes_of(sb->core->cfg.volumes, sb->id, v->volumes, SUP_VOL_MAX_MOUNTS);
		v->nvolumes = n < SUP_VOL_MAX_MOUNTS ? n : SUP_VOL_MAX_MOUNTS;
	}
	v->secrets = sb->secrets.n ? &sb->secrets : NULL;
}

/* A call the agent let pass its deadline counts against the sandbox. */
void sup_core_count_timeout(sup_sandbox *sb, const sbx_err *err)
{
	sb->agent_timeouts++;
	sup_warn("sandbox %s: agent timeout (%u so far): %s", sb->id, sb->agent_timeouts, err->msg);
}

/* ---- destroy (DELETE, expiry, shutdown) ---- */

static void fail_execs(sup_sandbox *sb, int code, const char *why)
{
	sup_op *op;
	while ((op = TAILQ_FIRST(&sb->execs)) != NULL) {
		TAILQ_REMOVE(&sb->execs, op, link);
		sbx_err e;
		sbx_err_set(&e, code, "%s", why);
		if (op->kind == OP_CALL) {
			if (op->u.call.call)
				sup_agent_call_cancel(op->u.call.call);
			op->u.call.cbs->on_done(code, NULL, &e, op->ud);
			free(op);
			continue;
		}
		if (op->u.exec.call)
			sup_agent_exec_cancel(op->u.exec.call);
		if (op->u.exec.scb)
			op->u.exec.scb->on_done(code, NULL, &e, op->ud);
		else
			op->u.exec.cb(code, NULL, &e, op->ud);
		sup_core_bytes_free(&op->u.exec.out);
		sup_core_bytes_free(&op->u.exec.err);
		free(op);
	}
}

/* Its volumes are free again once the container is gone (no second writer
 * while the first may still write), or when it never got them. */
void sup_core_release_volumes(sup_core *c, const sup_sandbox *sb)
{
	if (c->cfg.volumes)
		sup_volumes_release(c->cfg.volumes, sb->id);
}

static void on_destroyed(sup_sandbox *sb, int rc, const sbx_err *err, void *ud)
{
	sup_core *c = ud;
	unlist(c, sb);
	sup_core_release_volumes(c, sb);
	sup_op *op;
	while ((op = TAILQ_FIRST(&sb->delete_waiters)) != NULL) {
		TAILQ_REMOVE(&sb->delete_waiters, op, link);
		op->u.del.cb(rc, err, op->ud);
		free(op);
	}
}

/* Release the core's fields and hand the sandbox back to the pools, which
 * destroy it (it stays listed, state destroying, until the container is
 * gone) or reset it for the next owner (unlisted at once). */
static void core_destroy(sup_core *c, sup_sandbox *sb, bool urgent, int exec_code,
			 const char *exec_why)
{
	if (sb->expiry) {
		event_free(sb->expiry);
		sb->expiry = NULL;
	}
	fail_execs(sb, exec_code, exec_why);
	/* one with volumes or secret files mounted into it, or whose id went
	 * out in a signed URL, is never another's (the pools reuse a sandbox
	 * only when asked to, and only a clean one) */
	sup_vol_mount v[1];
	bool reusable = (!c->cfg.volumes || sup_volumes_of(c->cfg.volumes, sb->id, v, 1) == 0) &&
			!sb->id_given_out && !sup_core_secrets_files(&sb->secrets);
	sup_core_secrets_env_free(sb);
	sup_pools_release(c->pools, sb, reusable, urgent, on_destroyed, c);
}

void sup_core_tell(sup_core *c, sup_core_life what, const sup_sandbox *sb)
{
	if (c->cfg.on_life)
		c->cfg.on_life(c->cfg.life_ud, what, sb->id, sup_pools_image_of(sb), sb->tenant);
}

static void on_expiry(evutil_socket_t fd, short what, void *ud)
{
	sup_sandbox *sb = ud;
	(void)fd;
	(void)what;
	sup_core *c = sb->core;
	sup_info("sandbox %s: lifetime over, destroying", sb->id);
	sup_core_tell(c, SUP_LIFE_EXPIRED, sb);
	core_destroy(c, sb, false, -EBUSY, "the sandbox reached its timeout and is being destroyed");
}

/* What the catalog keeps of a handed-out sandbox, all of it from here
 * (and what the pools' backend shows of it: sup_pools_note). */
int sup_core_record(sup_core *c, const sup_sandbox *sb, sbx_err *err)
{
	sup_pools_note(c->pools, sb);
	if (!c->cfg.catalog)
		return 0;
	SBX_AUTO_FREE sup_catalog_rec *r = calloc(1, sizeof(*r));
	if (!r)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	memcpy(r->id, sb->id, sizeof(sb->id));
	snprintf(r->image, sizeof(r->image), "%s", sup_pools_image_of(sb));
	snprintf(r->digest, sizeof(r->digest), "%s", sup_pools_digest_of(sb));
	r->isolation = sup_pools_isolation_of(sb);
	memcpy(r->container_id, sb->box.container_id, sizeof(sb->box.container_id));
	r->net_slot = sb->net_slot;
	_Static_assert(sizeof(r->tenant) >= sizeof(sb->tenant) && sizeof(r->id) >= sizeof(sb->id) &&
			       sizeof(r->container_id) >= sizeof(sb->box.container_id),
		       "the catalog's record holds a sandbox's names");
	memcpy(r->tenant, sb->tenant, sizeof(sb->tenant));
	r->allow_root = sb->allow_root;
	r->created_at = sb->created_at;
	r->expires_at = sb->expires_at;
	r->paused = sb->paused;
	r->res = sb->res;
	/* the secrets by name only: their values stay out of the file */
	bool oom;
	r->secrets = sup_core_secrets_text(&sb->secrets, &oom);
	if (oom || sup_core_secrets_plain_env(sb, &r->env) < 0) {
		free(r->secrets);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	/* its egress policy, to load again into its plumbing at a restart */
	const sup_netpol *pol = sb->net_slot ? sup_net_policy(c->cfg.net, sb->net_slot) : NULL;
	r->network = pol ? sup_netpol_to_text(pol) : NULL;
	int rc = pol && !r->network ? sbx_err_set(err, -ENOMEM, "out of memory")
				    : sup_catalog_running(c->cfg.catalog, r, err);
	sup_catalog_rec_free(r);
	return rc;
}

/* Into the registry, its lifetime running for seconds more. */
int sup_core_list_sandbox(sup_core *c, sup_sandbox *sb, time_t seconds, sbx_err *err)
{
	sb->expiry = evtimer_new(c->base, on_expiry, sb);
	if (!sb->expiry || !tsearch(sb, &c->index, cmp_id)) {
		if (sb->expiry)
			event_free(sb->expiry);
		sb->expiry = NULL;
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	struct timeval tv = { seconds > 0 ? seconds : 0, 0 };
	evtimer_add(sb->expiry, &tv);
	TAILQ_INSERT_TAIL(&c->listed, sb, reg_link);
	sb->listed = true;
	return 0;
}

/* ---- get / list ---- */

int sup_core_get(sup_core *c, const sup_tenant *who, const char *id, sup_sandbox_view *out,
		 sbx_err *err)
{
	sup_sandbox *sb = lookup_for(c, who, id, err);
	if (!sb)
		return err->code;
	sup_core_view_of(sb, out);
	/* Read now: a few cgroup files and a statfs, no process. A sandbox
	 * on its way out may have lost its cgroup already: no usage then. */
	sbx_err uerr;
	if (sb->state != SUP_SB_DESTROYING &&
	    sup_pools_usage(c->pools, sb, &out->usage, &uerr) == 0)
		out->has_usage = true;
	else if (sb->state != SUP_SB_DESTROYING)
		sup_warn("sandbox %s: usage: %s", sb->id, uerr.msg);
	return 0;
}

void sup_core_list(sup_core *c, const sup_tenant *who,
		   void (*fn)(const sup_sandbox_view *v, void *ud), void *ud)
{
	sup_sandbox *sb;
	TAILQ_FOREACH(sb, &c->listed, reg_link)
	{
		if (!sees(who, sb))
			continue;
		sup_sandbox_view v;
		sup_core_view_of(sb, &v);
		fn(&v, ud);
	}
}

/* ---- network ---- */

int sup_core_set_network(sup_core *c, const char *id, const sup_netpol *p, sup_sandbox_view *out,
			 sbx_err *err)
{
	sup_sandbox *sb = sup_core_lookup(c, id);
	if (!sb)
		return sbx_err_set(err, -ENOENT, "no sandbox %.64s", id);
	if (!c->cfg.net)
		return sbx_err_set(err, -EINVAL,
				   "this supervisor gives sandboxes no network (start it with --uplink)");
	if (!sb->net_slot)
		return sbx_err_set(err, -EINVAL,
				   "sandbox %s is a %s sandbox: loopback only (egress by policy is for "
				   "runc sandboxes)",
				   sb->id, sup_isolation_names[sup_pools_isolation_of(sb)]);
	if (sb->state != SUP_SB_RUNNING)
		return sbx_err_set(err, -EBUSY, "sandbox %s is %s", sb->id, sup_sb_state_name(sb->state));
	int rc = sup_net_apply(c->cfg.net, sb->net_slot, p, err);
	if (rc < 0) {
		sup_error("sandbox %s: network policy: %s", sb->id, err->msg);
		err->code = -EIO; /* ours, not the client's */
		return sbx_err_wrap(err, "sandbox %s", sb->id);
	}
	/* durable before the answer: a restart loads this one again */
	if (sup_core_record(c, sb, err) < 0) {
		sup_error("sandbox %s: %s", sb->id, err->msg);
		err->code = -EIO;
		return sbx_err_wrap(err, "sandbox %s: policy in force but not kept for a restart",
				    sb->id);
	}
	sup_info("sandbox %s: network policy replaced (%zu rules, default %s)", sb->id, p->n,
		 p->default_action == SUP_NETPOL_ALLOW ? "allow" : "deny");
	sup_core_view_of(sb, out);
	return 0;
}

/* ---- lifetime ---- */

int sup_core_set_timeout(sup_core *c, const sup_tenant *who, const char *id, unsigned seconds,
			 sup_sandbox_view *out, sbx_err *err)
{
	sup_sandbox *sb = lookup_for(c, who, id, err);
	if (!sb)
		return err->code;
	if (seconds > who->max_timeout_s)
		return sbx_err_set(err, -EINVAL, "field \"timeout\": %u seconds is over tenant %s's most of %u",
				   seconds, who->name, who->max_timeout_s);
	if (sb->state == SUP_SB_DESTROYING || !sb->expiry)
		return sbx_err_set(err, -EBUSY, "sandbox %s is being destroyed", sb->id);
	time_t was = sb->expires_at;
	sb->expires_at = time(NULL) + (time_t)seconds;
	/* durable before the answer, as at create */
	if (sup_core_record(c, sb, err) < 0) {
		sb->expires_at = was;
		sup_error("sandbox %s: %s", sb->id, err->msg);
		err->code = -EIO;
		return sbx_err_wrap(err, "sandbox %s: new timeout not kept", sb->id);
	}
	struct timeval tv = { (time_t)seconds, 0 };
	evtimer_add(sb->expiry, &tv);
	sup_info("sandbox %s: lifetime renewed: %us from now", sb->id, seconds);
	sup_core_view_of(sb, out);
	return 0;
}

/* ---- pause / resume ---- */

int sup_core_pause(sup_core *c, const char *id, bool paused, sup_sandbox_view *out, sbx_err *err)
{
	sup_sandbox *sb = c->shutting_down ? NULL : sup_core_lookup(c, id);
	if (!sb)
		return c->shutting_down ? sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down")
					: sbx_err_set(err, -ENOENT, "no sandbox %.64s", id);
	if (sb->state == SUP_SB_RUNNING && sb->paused == paused) {
		sup_core_view_of(sb, out); /* already so: the same answer again */
		return 0;
	}
	if (sb->state == SUP_SB_FAILED)
		return sbx_err_set(err, -EBUSY, "sandbox %s failed (%s); delete it and create another",
				   sb->id, sb->reason[0] ? sb->reason : "the agent connection was lost");
	if (sup_pools_freeze(c->pools, sb, paused, err) < 0)
		return sbx_err_wrap(err, "%s", paused ? "pause" : "resume");
	/* durable before the answer: a restart re-adopts it as it was told */
	if (sup_core_record(c, sb, err) < 0) {
		sbx_err undo;
		sup_error("sandbox %s: %s", sb->id, err->msg);
		if (sup_pools_freeze(c->pools, sb, !paused, &undo) < 0)
			sup_error("sandbox %s: %s", sb->id, undo.msg);
		err->code = -EIO;
		return sbx_err_wrap(err, "sandbox %s: not %s", sb->id, paused ? "paused" : "resumed");
	}
	sup_info("sandbox %s: %s", sb->id, paused ? "paused" : "resumed");
	sup_core_view_of(sb, out);
	return 0;
}

bool sup_core_paused(sup_core *c, const char *id)
{
	const sup_sandbox *sb = sup_core_lookup(c, id);
	return sb && sb->state == SUP_SB_RUNNING && sb->paused;
}

/* ---- delete ---- */

int sup_core_delete(sup_core *c, const sup_tenant *who, const char *id, sup_core_done_cb cb,
		    void *ud, sup_op **opp, sbx_err *err)
{
	*opp = NULL;
	sup_sandbox *sb = lookup_for(c, who, id, err);
	if (!sb)
		return err->code;
	sup_op *op = calloc(1, sizeof(*op));
	if (!op)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	op->core = c;
	op->kind = OP_DELETE;
	op->ud = ud;
	op->sb = sb;
	op->u.del.cb = cb;
	TAILQ_INSERT_TAIL(&sb->delete_waiters, op, link);
	if (sb->state != SUP_SB_DESTROYING) {
		sup_info("sandbox %s: delete requested", sb->id);
		sup_core_tell(c, SUP_LIFE_DELETED, sb);
		core_destroy(c, sb, true, -EBUSY, "the sandbox was deleted while the command ran");
	}
	*opp = op;
	return 0;
}

void sup_core_blame(sup_core *c, const char *id, const sbx_err *err)
{
	sup_sandbox *sb = err->code == -EPROTO ? sup_core_lookup(c, id) : NULL;
	if (sb && sb->agent)
		sup_agent_blame(sb->agent, "%s", err->msg);
}

void sup_core_id_given_out(sup_core *c, const char *id)
{
	sup_sandbox *sb = sup_core_lookup(c, id);
	if (sb)
		sb->id_given_out = true;
}

/* ---- cancel ---- */

void sup_op_cancel(sup_op *op)
{
	switch (op->kind) {
	case OP_CREATE:
		if (op->u.create.failing) {
			/* its sandbox's destroy goes on; failed_gone frees op */
			op->u.create.cb = NULL;
			return;
		}
		TAILQ_REMOVE(&op->core->creates, op, link);
		sup_pools_acquire_cancel(op->u.create.acq);
		sup_create_req_free(&op->u.create.req);
		break;
	case OP_EXEC:
		TAILQ_REMOVE(&op->sb->execs, op, link);
		if (op->u.exec.call)
			sup_agent_exec_cancel(op->u.exec.call);
		sup_core_bytes_free(&op->u.exec.out);
		sup_core_bytes_free(&op->u.exec.err);
		break;
	case OP_CALL:
		TAILQ_REMOVE(&op->sb->execs, op, link);
		if (op->u.call.call)
			sup_agent_call_cancel(op->u.call.call);
		break;
	case OP_DELETE:
		/* The destroy goes on; only the answer is not wanted. */
		TAILQ_REMOVE(&op->sb->delete_waiters, op, link);
		break;
	case OP_FETCH:
	case OP_VOLS:
		/* a create not handed a sandbox yet mounts nothing: the
		 * download and the volumes made go with the request */
		if (op->u.pre.job)
			op->core->restorer->job_cancel(op->u.pre.job);
		if (op->u.pre.create)
			sup_op_cancel(op->u.pre.create);
		sup_core_prep_end(op, -ECANCELED);
		return;
	}
	free(op);
}

/* ---- pools' hooks ---- */

static void on_sandbox_failed(sup_sandbox *sb, const sbx_err *why, void *ud)
{
	(void)ud;
	fail_execs(sb, -ECONNRESET, why->msg);
}

/* A re-adopted sandbox's agent answered: listed again with what is left
 * of its lifetime (none: it expires at once). */
static void on_sandbox_adopted(sup_sandbox *sb, int rc, const sbx_err *why, void *ud)
{
	sup_core *c = ud;
	sbx_err e;
	(void)why;
	if (rc == 0 && sup_core_list_sandbox(c, sb, sb->expires_at - time(NULL), &e) < 0) {
		sup_error("sandbox %s: not re-adopted: %s", sb->id, e.msg);
		sup_core_secrets_env_free(sb);
		sup_core_release_volumes(c, sb);
		sup_pools_destroy(c->pools, sb, false, NULL, NULL);
		return;
	}
	if (rc < 0) {
		sup_core_secrets_env_free(sb);
		sup_core_release_volumes(c, sb);
	}
}

sup_pools_hooks sup_core_pool_hooks(sup_core *c)
{
	sup_pools_hooks h = { .on_failed = on_sandbox_failed, .on_adopted = on_sandbox_adopted,
			      .ud = c };
	return h;
}

int sup_core_restore(sup_core *c, const sup_catalog_rec *rec, const sup_runc_box *box, int fd,
		     sbx_err *err)
{
	sup_sandbox *sb;
	if (c->cfg.volumes &&
	    sup_volumes_restore(c->cfg.volumes, rec->id, rec->phase == SUP_CAT_RUNNING, err) < 0) {
		if (fd >= 0)
			close(fd);
		return err->code;
	}
	int rc = sup_pools_adopt(c->pools, rec, box, fd, &sb, err);
	if (rc < 0 && c->cfg.volumes)
		sup_volumes_release(c->cfg.volumes, rec->id);
	if (rc < 0 || rec->phase != SUP_CAT_RUNNING)
		return rc;
	/* the core's fields now; it is listed once its agent answers */
	sb->core = c;
	snprintf(sb->tenant, sizeof(sb->tenant), "%.*s", (int)sizeof(sb->tenant) - 1, rec->tenant);
	sb->allow_root = rec->allow_root;
	sb->created_at = (time_t)rec->created_at;
	sb->expires_at = (time_t)rec->expires_at;
	/* its plumbing was made again by the adopt: its policy goes back in */
	if (rec->network && sb->net_slot) {
		sup_netpol pol;
		int prc = sup_netpol_from_text(rec->network, &pol, err);
		if (prc == 0) {
			prc = sup_net_apply(c->cfg.net, sb->net_slot, &pol, err);
			sup_netpol_free(&pol);
		}
		if (prc < 0)
			sup_error("sandbox %s: its network policy not loaded again (no egress): %s",
				  sb->id, err->msg);
	}
	if (sup_env_copy(&rec->env, &sb->env) < 0) {
		sup_warn("sandbox %s: out of memory for its env: commands run without it", sb->id);
	}
	sup_core_secrets_restore(c->cfg.secrets, sb, rec->secrets);
	return 0;
}

/* ---- life ---- */

sup_core *sup_core_new(struct event_base *base, sup_pools *pools, const sup_core_cfg *cfg,
		       sbx_err *err)
{
	sup_core *c = calloc(1, sizeof(*c));
	if (!c) {
		sbx_err_set(err, -ENOMEM, "core");
		return NULL;
	}
	c->base = base;
	c->pools = pools;
	c->cfg = *cfg;
	static const char *const refusal_labels[] = { "tenant", "resource" };
	c->refusals = sup_ctab_new(2, refusal_labels, 4 * SUP_TENANTS_MAX);
	if (!c->refusals) {
		free(c);
		sbx_err_set(err, -ENOMEM, "core");
		return NULL;
	}
	TAILQ_INIT(&c->listed);
	TAILQ_INIT(&c->creates);
	return c;
}

void sup_core_set_pools(sup_core *c, sup_pools *pools)
{
	c->pools = pools;
}

static void noop_free(void *p)
{
	(void)p;
}

void sup_core_free(sup_core *c)
{
	if (!c)
		return;
	tdestroy(c->index, noop_free);
	sup_ctab_free(c->refusals);
	free(c);
}

void sup_core_figures(const sup_core *c, sup_core_figs *out)
{
	out->pools = c->pools;
	out->exec_seconds = &c->exec_seconds;
	out->execs = c->execs;
	out->oom_killed = c->oom_killed;
	out->refusals = c->refusals;
	out->first = TAILQ_FIRST(&c->listed);
}

const sup_sandbox *sup_core_next(const sup_sandbox *sb)
{
	return TAILQ_NEXT(sb, reg_link);
}

size_t sup_core_listed_count(const sup_core *c)
{
	size_t n = 0;
	const sup_sandbox *sb;
	TAILQ_FOREACH(sb, &c->listed, reg_link)
		n += sb->state != SUP_SB_DESTROYING;
	return n;
}

size_t sup_core_pool_count(const sup_core *c)
{
	return sup_pools_count(c->pools);
}

void sup_core_pool_stats(const sup_core *c, size_t i, sup_pool_stats *out)
{
	sup_pools_stats(c->pools, i, out);
}

int sup_core_pool_set_size(sup_core *c, const char *image, sup_isolation isolation, unsigned size,
			   sup_pool_stats *out, sbx_err *err)
{
	int rc = sup_pools_set_size(c->pools, image, isolation, size, out, err);
	/* kept for the next start (as the image was named: a ref moved meanwhile
	 * then sizes the image it names then) */
	if (rc == 0 && c->cfg.catalog &&
	    sup_catalog_pool_size(c->cfg.catalog, image, isolation, size, err) < 0) {
		sup_error("pool %s: %s", image, err->msg);
		err->code = -EIO;
		return sbx_err_wrap(err, "pool %s: size %u in force, but not kept for the next start",
				    image, size);
	}
	return rc;
}

void sup_core_handover(sup_core *c, void (*done)(void *ud), void *ud)
{
	c->shutting_down = true;
	sup_sandbox *sb;
	while ((sb = TAILQ_FIRST(&c->listed)) != NULL) {
		if (sb->expiry)
			event_free(sb->expiry);
		sb->expiry = NULL;
		fail_execs(sb, -ESHUTDOWN, "the supervisor is being replaced");
		sup_core_secrets_env_free(sb);
		unlist(c, sb);
	}
	sup_pools_handover(c->pools, done, ud);
}

void sup_core_shutdown(sup_core *c, void (*done)(void *ud), void *ud)
{
	c->shutting_down = true;
	/* Waiting creates are failed by the pools (-ESHUTDOWN). */
	sup_sandbox *sb, *next;
	for (sb = TAILQ_FIRST(&c->listed); sb; sb = next) {
		next = TAILQ_NEXT(sb, reg_link);
		if (sb->state != SUP_SB_DESTROYING)
			core_destroy(c, sb, false, -ESHUTDOWN, "the supervisor is shutting down");
	}
	sup_pools_shutdown(c->pools, done, ud);
}

/* ---- volumes ---- */

struct sup_volumes *sup_core_volumes(sup_core *c)
{
	return c->cfg.volumes;
}
