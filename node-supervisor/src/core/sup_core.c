#include "sup_core.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <inttypes.h>
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
#include "sup_core_mcp.h"
#include "sup_log.h"
#include "sup_net.h"
#include "sup_sandbox.h"
#include "sup_volseed.h"
#include "sup_volumes.h"
#include "sup_snaps.h"

TAILQ_HEAD(sup_reg_list, sup_sandbox);

struct sup_core {
	struct event_base *base;
	sup_pools *pools;
	sup_core_cfg cfg;
	void *index;                /* tsearch tree of listed sandboxes by id */
	struct sup_reg_list listed; /* creation order */
	TAILQ_HEAD(, sup_op) creates;
	size_t captured;            /* bytes held by all execs in flight */
	bool shutting_down;
	/* For /metrics. */
	sup_hist exec_seconds;
	uint64_t execs[SUP_CORE_EXEC_RESULTS]; /* by exec_result */
	uint64_t oom_killed;        /* execs the kernel killed for memory */
	sup_ctab *refusals;         /* quota refusals by tenant and figure */
	struct sup_snaps *snaps;    /* restores from snapshots; NULL: none */
};

enum exec_result { EXEC_EXITED, EXEC_SIGNALED, EXEC_TIMED_OUT, EXEC_FAILED };
const char *const sup_core_exec_results[SUP_CORE_EXEC_RESULTS] = { "exited", "signaled",
								   "timed_out", "failed" };

typedef enum sup_op_kind {
	OP_CREATE = 1,
	OP_EXEC,
	OP_DELETE,
	OP_CALL,
	OP_FETCH,
	OP_VOLS
} sup_op_kind;

typedef struct sup_bytes {
	uint8_t *p;
	size_t len;
	size_t alloc;
	size_t limit;
	bool truncated;
	size_t *budget_used; /* the core's total, shared by every exec */
	size_t budget;
} sup_bytes;

struct sup_op {
	sup_core *core;
	sup_op_kind kind;
	void *ud;
	TAILQ_ENTRY(sup_op) link; /* core->creates, sb->execs or sb->delete_waiters */
	sup_sandbox *sb;
	union {
		struct {
			sup_acquire *acq;
			sup_create_req req;
			sup_core_sandbox_cb cb;
			char tenant[SUP_TENANT_NAME_MAX + 1];
			bool allow_root;
			/* failed once it had its sandbox: answered with fail
			 * when the container is gone (failed_gone) */
			bool failing, in_destroy;
			sbx_err fail;
		} create;
		struct {
			sup_exec_call *call;
			sup_core_exec_cb cb;
			const sup_core_stream_cbs *scb; /* streaming: no capture */
			sup_bytes out, err;
			struct timespec start;
		} exec;
		struct {
			sup_core_done_cb cb;
		} del;
		struct {
			sup_agent_call *call;
			const sup_core_call_cbs *cbs;
		} call;
		/* a create with a step first (OP_FETCH: a restore's archive
		 * fetched from the object store; OP_VOLS: a restore's or
		 * fork's volumes made), then the create proper (create) */
		struct {
			sup_op *create;
			sup_create_req req;
			sup_core_sandbox_cb cb;
			const sup_tenant *who;
			sup_snaps_job *job;   /* OP_FETCH: the download */
			char snap[SUP_ID_MAX];
			bool held;            /* OP_FETCH: a downloaded archive to drop at the end */
			sup_volseed *vs;      /* OP_VOLS: the volumes made */
		} pre;
	} u;
};

/* ---- captured output: bounded per stream and in total ---- */

static void bytes_free(sup_bytes *b)
{
	*b->budget_used -= b->len;
	free(b->p);
	b->p = NULL;
	b->len = 0;
}

static void bytes_append(sup_bytes *b, const uint8_t *p, size_t n)
{
	size_t room = b->limit - b->len;
	size_t global = b->budget > *b->budget_used ? b->budget - *b->budget_used : 0;
	if (room > global)
		room = global;
	if (n > room) {
		b->truncated = true;
		n = room;
	}
	if (n == 0)
		return;
	if (b->len + n > b->alloc) {
		size_t a = b->alloc ? b->alloc : 4096;
		while (a < b->len + n)
			a *= 2;
		if (a > b->limit)
			a = b->limit;
		uint8_t *q = realloc(b->p, a);
		if (!q) {
			b->truncated = true;
			return;
		}
		b->p = q;
		b->alloc = a;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	*b->budget_used += n;
}

/* ---- registry ---- */

static int cmp_id(const void *a, const void *b)
{
	return strcmp(((const sup_sandbox *)a)->id, ((const sup_sandbox *)b)->id);
}

static sup_sandbox *lookup(sup_core *c, const char *id)
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
	sup_sandbox *sb = lookup(c, id);
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
	sup_sandbox *sb = lookup(c, id);
	if (sb)
		sb->forked = true;
}

sup_pools *sup_core_pools(sup_core *c)
{
	return c->pools;
}

void sup_core_set_snaps(sup_core *c, struct sup_snaps *snaps)
{
	c->snaps = snaps;
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

static void view_of(const sup_sandbox *sb, sup_sandbox_view *v)
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
}

/* A call the agent let pass its deadline counts against the sandbox. */
static void count_timeout(sup_sandbox *sb, const sbx_err *err)
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
		bytes_free(&op->u.exec.out);
		bytes_free(&op->u.exec.err);
		free(op);
	}
}

/* Its volumes are free again once the container is gone (no second writer
 * while the first may still write), or when it never got them. */
static void release_volumes(sup_core *c, const sup_sandbox *sb)
{
	if (c->cfg.volumes)
		sup_volumes_release(c->cfg.volumes, sb->id);
}

static void on_destroyed(sup_sandbox *sb, int rc, const sbx_err *err, void *ud)
{
	sup_core *c = ud;
	unlist(c, sb);
	release_volumes(c, sb);
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
	sup_env_free(&sb->env);
	/* one with volumes mounted into it, or whose id went out in a
	 * signed URL, is never another's (the pools reuse a sandbox only when
	 * asked to, and only a clean one) */
	sup_vol_mount v[1];
	bool reusable = (!c->cfg.volumes || sup_volumes_of(c->cfg.volumes, sb->id, v, 1) == 0) &&
			!sb->id_given_out;
	sup_pools_release(c->pools, sb, reusable, urgent, on_destroyed, c);
}

static void tell(sup_core *c, sup_core_life what, const sup_sandbox *sb)
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
	tell(c, SUP_LIFE_EXPIRED, sb);
	core_destroy(c, sb, false, -EBUSY, "the sandbox reached its timeout and is being destroyed");
}

/* ---- create ---- */

/* What the catalog keeps of a handed-out sandbox, all of it from here
 * (and what the pools' backend shows of it: sup_pools_note). */
static int record(sup_core *c, const sup_sandbox *sb, sbx_err *err)
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
	r->env = sb->env;
	/* its egress policy, to load again into its plumbing at a restart */
	const sup_netpol *pol = sb->net_slot ? sup_net_policy(c->cfg.net, sb->net_slot) : NULL;
	r->network = pol ? sup_netpol_to_text(pol) : NULL;
	if (pol && !r->network)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int rc = sup_catalog_running(c->cfg.catalog, r, err);
	free(r->network);
	return rc;
}

/* Into the registry, its lifetime running for seconds more. */
static int list_sandbox(sup_core *c, sup_sandbox *sb, time_t seconds, sbx_err *err)
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

/* A create's sandbox destroyed after a failure: its volumes are free now
 * that its container is gone, and only then is the create answered (so a
 * restore's volumes made for it can go, and no second writer mounts one
 * the dying container still has). Not answered when it was cancelled. */
static void failed_gone(sup_sandbox *sb, int rc, const sbx_err *err, void *ud)
{
	sup_op *op = ud;
	(void)rc;
	(void)err;
	release_volumes(op->core, sb);
	if (op->u.create.in_destroy) {
		op->u.create.failing = false; /* ended at once: acquired() answers */
		return;
	}
	if (op->u.create.cb)
		op->u.create.cb(op->u.create.fail.code, NULL, &op->u.create.fail, op->ud);
	sup_create_req_free(&op->u.create.req);
	free(op);
}

/* The sandbox is RUNNING: list it with the request's lifetime and env.
 * On failure the sandbox is being destroyed and op is answered by
 * failed_gone. */
static int adopt(sup_core *c, sup_sandbox *sb, sup_op *op, sbx_err *err)
{
	sup_create_req *req = &op->u.create.req;
	sb->core = c;
	memcpy(sb->tenant, op->u.create.tenant, sizeof(sb->tenant));
	sb->allow_root = op->u.create.allow_root;
	sb->created_at = time(NULL);
	sb->expires_at = sb->created_at + (time_t)req->timeout_s;
	sb->env = req->env;
	req->env.v = NULL;
	req->env.n = 0;
	int rc = 0;
	/* its plumbing was made at pool fill: only its rules are loaded now */
	if (req->network && sup_net_apply(c->cfg.net, sb->net_slot, req->network, err) < 0) {
		sup_error("sandbox %s: network policy: %s", sb->id, err->msg);
		rc = err->code = -EIO; /* ours, not the client's */
	}
	/* its volumes bound into the running container (a short-lived child each) */
	if (rc == 0 && req->volumes.n &&
	    (rc = sup_volumes_attach(c->cfg.volumes, sb->tenant, sb->id, sb->box.init_pid,
				     &req->volumes, err)) < 0)
		sup_error("sandbox %s: volumes: %s", sb->id, err->msg);
	/* the image's Env under the request's */
	const sup_env *image_env;
	const char *image_user, *image_workdir;
	sup_pools_image_config(sb, &image_env, &image_user, &image_workdir);
	if (rc == 0 && sup_env_under(&sb->env, image_env) < 0)
		rc = sbx_err_set(err, -ENOMEM, "out of memory");
	/* durable before the answer: a restart finds what the client was told */
	if (rc == 0 && (rc = record(c, sb, err)) < 0) {
		sup_error("sandbox %s: %s", sb->id, err->msg);
		rc = err->code = -EIO;
	}
	if (rc < 0 || list_sandbox(c, sb, (time_t)req->timeout_s, err) < 0) {
		sup_env_free(&sb->env);
		/* the volumes once the container is gone, as on any destroy */
		op->u.create.failing = op->u.create.in_destroy = true;
		sup_pools_destroy(c->pools, sb, false, failed_gone, op);
		op->u.create.in_destroy = false;
		return rc < 0 ? rc : err->code;
	}
	sup_core_mcp_hand_out(sb, &req->mcp);
	char cpus[16], mem[24], disk[24];
	sup_resources_format_cpus(sb->res.cpu_milli, cpus, sizeof(cpus));
	sup_resources_format_size(sb->res.memory, mem, sizeof(mem));
	sup_resources_format_size(sb->res.disk, disk, sizeof(disk));
	sup_info("sandbox %s: handed out to tenant %s (image %s, %s, timeout %us, %zu env, cpus=%s,memory=%s,pids=%u,disk=%s, %s)",
		 sb->id, sb->tenant, sup_pools_image_of(sb), sup_isolation_names[sup_pools_isolation_of(sb)],
		 req->timeout_s, sb->env.n, cpus, mem, (unsigned)sb->res.pids, disk,
		 req->network ? "network by policy" : "loopback only");
	tell(c, SUP_LIFE_CREATED, sb);
	return 0;
}

/* Whether op waits for its failed sandbox's destroy (it is answered and
 * freed then); else it is answered and freed now. */
static bool acquired(sup_sandbox *sb, int rc, const sbx_err *err, sup_op *op)
{
	sup_core *c = op->core;
	TAILQ_REMOVE(&c->creates, op, link);
	sbx_err_clear(&op->u.create.fail);
	if (rc == 0 && (rc = adopt(c, sb, op, &op->u.create.fail)) < 0) {
		if (op->u.create.failing)
			return true;
		err = &op->u.create.fail; /* its destroy already ended */
	}
	sup_sandbox_view v;
	if (rc == 0)
		view_of(sb, &v);
	op->u.create.cb(rc, rc == 0 ? &v : NULL, err, op->ud);
	sup_create_req_free(&op->u.create.req);
	free(op);
	return false;
}

static void on_acquired(sup_sandbox *sb, int rc, const sbx_err *err, void *ud)
{
	acquired(sb, rc, err, ud);
}

/* May this request have a sandbox of its isolation? Only where the node
 * offers it (its runtime answered at start: some pool runs it) and its
 * tenant may use it. */
static int allow_isolation(const sup_core *c, const sup_tenant *who, const sup_create_req *req,
			   sbx_err *err)
{
	bool offered = false;
	for (size_t i = 0; i < sup_pools_count(c->pools) && !offered; i++) {
		sup_pool_stats s;
		sup_pools_stats(c->pools, i, &s);
		offered = s.isolation == req->isolation;
	}
	if (!offered)
		return sbx_err_set(err, -EINVAL, "isolation \"%s\" is not offered on this node%s",
				   sup_isolation_names[req->isolation],
				   req->isolation == SUP_ISO_GVISOR ? " (its runtime, runsc, did not answer at start)"
								    : "");
	if (!sup_tenant_may_isolation(who, req->isolation))
		return sbx_err_set(err, -EPERM, "tenant %s may not use isolation \"%s\"", who->name,
				   sup_isolation_names[req->isolation]);
	return 0;
}

/* A policy needs the node's egress (--uplink) and a sandbox plumbed for
 * it: runc's only. runsc runs with --network none, whose netstack has
 * loopback alone and would never use a link in the sandbox's namespace. */
static int allow_network(const sup_core *c, const sup_create_req *req, sbx_err *err)
{
	if (!req->network)
		return 0;
	if (!c->cfg.net)
		return sbx_err_set(err, -EINVAL,
				   "field \"network\": this supervisor gives sandboxes no network "
				   "(start it with --uplink)");
	if (req->isolation != SUP_ISO_RUNC)
		return sbx_err_set(err, -EINVAL,
				   "field \"network\": %s sandboxes have loopback only (egress by "
				   "policy is for runc sandboxes)",
				   sup_isolation_names[req->isolation]);
	return 0;
}

/* What req leaves out is who's; what it names must be within who's. */
static int apply_tenant(const sup_tenant *who, sup_create_req *req, sbx_err *err)
{
	if (!(req->given & SUP_CREATE_GIVEN_ISOLATION) && who->default_isolation < SUP_ISO_N)
		req->isolation = (sup_isolation)who->default_isolation;
	sup_resources_take(&req->resources, &who->res_default,
			   ~req->given & (SUP_RES_CPUS | SUP_RES_MEMORY | SUP_RES_PIDS | SUP_RES_DISK));
	if (req->timeout_s > who->max_timeout_s) {
		if (req->given & SUP_CREATE_GIVEN_TIMEOUT)
			return sbx_err_set(err, -EINVAL,
					   "field \"timeout\": %u seconds is over tenant %s's most of %u",
					   req->timeout_s, who->name, who->max_timeout_s);
		req->timeout_s = who->max_timeout_s;
	}
	const char *image = req->image ? req->image : "host";
	if (!sup_tenant_may_image(who, image))
		return sbx_err_set(err, -EPERM, "tenant %s may not use image \"%.200s\"", who->name,
				   image);
	return 0;
}

/* ---- quotas ---- */

/* What tenant holds: its listed sandboxes (destroying ones too, until
 * they are gone) and its creates still waiting for a pool. */
static void tenant_held(const sup_core *c, const char *tenant, sup_quota *h)
{
	memset(h, 0, sizeof(*h));
	const sup_sandbox *sb;
	TAILQ_FOREACH(sb, &c->listed, reg_link)
	if (strcmp(sb->tenant, tenant) == 0)
		sup_quota_add(h, &sb->res);
	const sup_op *op;
	TAILQ_FOREACH(op, &c->creates, link)
	if (strcmp(op->u.create.tenant, tenant) == 0)
		sup_quota_add(h, &op->u.create.req.resources);
	/* a volume is disk the tenant holds, as a sandbox's is */
	if (c->cfg.volumes)
		h->disk += sup_volumes_tenant_bytes(c->cfg.volumes, tenant);
}

static int check_quota(sup_core *c, const sup_tenant *who, const sup_resources *want,
		       sbx_err *err)
{
	if (!who->quota.set)
		return 0;
	sup_quota h;
	tenant_held(c, who->name, &h);
	const char *fig = NULL;
	int rc = sup_quota_check(who, &h, want, &fig, err);
	if (rc < 0 && c->refusals) {
		const char *labels[] = { who->name, fig };
		sup_ctab_add(c->refusals, labels, 1);
	}
	return rc;
}

/* size more bytes of disk (volumes) within who's disk quota: -EDQUOT. */
static int disk_fits(sup_core *c, const sup_tenant *who, uint64_t size, sbx_err *err)
{
	if (!(who->quota.set & SUP_QUOTA_DISK))
		return 0;
	sup_quota h;
	tenant_held(c, who->name, &h);
	if (h.disk + size <= who->quota.disk)
		return 0;
	char held[24], want[24], max[24];
	sup_resources_format_size(h.disk, held, sizeof(held));
	sup_resources_format_size(size, want, sizeof(want));
	sup_resources_format_size(who->quota.disk, max, sizeof(max));
	if (c->refusals) {
		const char *labels[] = { who->name, "disk" };
		sup_ctab_add(c->refusals, labels, 1);
	}
	return sbx_err_set(err, -EDQUOT,
			   "tenant %s is over its quota of disk: it holds %s (sandboxes and "
			   "volumes), asks %s more, over its %s",
			   who->name, held, want, max);
}

/* Volumes mount into runc sandboxes (runsc's gofer would not see a mount
 * made in its sandbox's namespace): each one the tenant's, free for the
 * mode asked now (taken for good as the sandbox is handed out). */
static int allow_volumes(const sup_core *c, const sup_tenant *who, const sup_create_req *req,
			 sbx_err *err)
{
	if (!c->cfg.volumes)
		return sbx_err_set(err, -EINVAL, "field \"volumes\": this supervisor has no volumes");
	if (req->isolation != SUP_ISO_RUNC)
		return sbx_err_set(err, -EINVAL, "field \"volumes\": volumes are for runc sandboxes, not %s",
				   sup_isolation_names[req->isolation]);
	return sup_volumes_check(c->cfg.volumes, who->name, &req->volumes, err);
}

/* ---- a create with a step first: a restore from an object store (its
 * archive fetched off the loop by sup_snaps_fetch, dropped once the create
 * is over), a restore or fork with volumes (made first by sup_volseed,
 * mounted by the create with the request's own, deleted again if it
 * fails); one op kind each, one scaffold ---- */

static sup_op *pre_new(sup_core *c, sup_op_kind kind, const sup_tenant *who,
		       sup_core_sandbox_cb cb, void *ud, sbx_err *err)
{
	sup_op *op = calloc(1, sizeof(*op));
	if (!op) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	op->core = c;
	op->kind = kind;
	op->ud = ud;
	op->u.pre.cb = cb;
	op->u.pre.who = who;
	return op;
}

/* What the step holds goes (rc < 0) or is kept (rc 0), and op. */
static void pre_end(sup_op *op, int rc)
{
	if (op->u.pre.held)
		sup_snaps_fetched_drop(op->core->snaps, op->u.pre.snap);
	if (op->u.pre.vs && rc == 0)
		sup_volseed_keep(op->u.pre.vs);
	else if (op->u.pre.vs)
		sup_volseed_undo(op->u.pre.vs);
	sup_create_req_free(&op->u.pre.req);
	free(op);
}

/* The answer: the create's, or the step's failure (v NULL). */
static void pre_answer(sup_op *op, int rc, const sup_sandbox_view *v, const sbx_err *err)
{
	sup_core_sandbox_cb cb = op->u.pre.cb;
	void *cud = op->ud;
	op->u.pre.create = NULL;
	pre_end(op, rc);
	cb(rc, v, err, cud);
}

static void pre_created(int rc, const sup_sandbox_view *v, const sbx_err *err, void *ud)
{
	pre_answer(ud, rc, v, err);
}

/* The step is done: the create proper, with the request. */
static int pre_go(sup_op *op, sbx_err *err)
{
	return sup_core_create(op->core, op->u.pre.who, &op->u.pre.req, pre_created, op,
			       &op->u.pre.create, err);
}

/* The archive is here. */
static int fetch_go(sup_op *op, sbx_err *err)
{
	op->u.pre.held = true;
	op->u.pre.req.snapshot_fetched = true;
	return pre_go(op, err);
}

static void fetched(int rc, const sbx_err *err, void *ud)
{
	sup_op *op = ud;
	op->u.pre.job = NULL;
	sbx_err e = *err;
	if (rc == 0 && fetch_go(op, &e) == 0)
		return;
	pre_answer(op, e.code, NULL, &e);
}

static int create_from_store(sup_core *c, const sup_tenant *who, sup_create_req *req,
			     sup_core_sandbox_cb cb, void *ud, sup_op **opp, sbx_err *err)
{
	if (strlen(req->snapshot) >= SUP_ID_MAX)
		return sbx_err_set(err, -EINVAL, "field \"snapshot\": not a snapshot id");
	sup_op *op = pre_new(c, OP_FETCH, who, cb, ud, err);
	if (!op)
		return err->code;
	snprintf(op->u.pre.snap, sizeof(op->u.pre.snap), "%s", req->snapshot);
	op->u.pre.req = *req;
	int rc = sup_snaps_fetch(c->snaps, who, op->u.pre.snap, fetched, op, &op->u.pre.job, err);
	if (rc == 1)
		rc = fetch_go(op, err);
	if (rc < 0) {
		*req = op->u.pre.req; /* the caller's again */
		memset(&op->u.pre.req, 0, sizeof(op->u.pre.req));
		pre_end(op, rc);
		return rc;
	}
	memset(req, 0, sizeof(*req));
	*opp = op;
	return 0;
}

/* The volumes are made: the create mounts them with the request's own. */
static void vols_made(int rc, const sbx_err *err, void *ud)
{
	sup_op *op = ud;
	sbx_err e = rc < 0 ? *err : (sbx_err){0};
	if (rc < 0)
		op->u.pre.vs = NULL; /* it freed itself and its volumes */
	sup_create_req *req = &op->u.pre.req;
	size_t n = 0;
	const sup_vol_mount *m = rc == 0 ? sup_volseed_mounts(op->u.pre.vs, &n) : NULL;
	sup_vol_mount *all = NULL;
	if (m) {
		all = realloc(req->volumes.v, (req->volumes.n + n) * sizeof(*all));
		if (!all)
			rc = sbx_err_set(&e, -ENOMEM, "out of memory");
	} else if (rc == 0) {
		rc = sbx_err_set(&e, -ENOMEM, "no volumes made");
	}
	if (rc == 0 && all) {
		memcpy(all + req->volumes.n, m, n * sizeof(*all));
		req->volumes.v = all;
		req->volumes.n += n;
		req->vols_seeded = true;
		if (pre_go(op, &e) == 0)
			return;
	}
	pre_answer(op, e.code, NULL, &e);
}

static int create_with_volumes(sup_core *c, const sup_tenant *who, sup_create_req *req,
			       sup_core_sandbox_cb cb, void *ud, sup_op **opp, sbx_err *err)
{
	if (!c->cfg.volumes)
		return sbx_err_set(err, -EINVAL, "the snapshot carries volumes: this supervisor has none");
	if (req->isolation != SUP_ISO_RUNC)
		return sbx_err_set(err, -EINVAL, "the snapshot carries volumes: volumes are for runc "
				   "sandboxes, not %s", sup_isolation_names[req->isolation]);
	/* the request's own volumes and these, as one list (same paths in
	 * both, or one below another, are 400), and all of it within the
	 * tenant's disk beside the sandbox's */
	sup_vol_mount all[SUP_VOL_MAX_MOUNTS * 2];
	uint64_t bytes = req->resources.disk;
	size_t n = 0;
	for (size_t i = 0; i < req->volumes.n && n < SUP_VOL_MAX_MOUNTS * 2; i++)
		all[n++] = req->volumes.v[i];
	for (size_t i = 0; i < req->nvol_seeds && n < SUP_VOL_MAX_MOUNTS * 2; i++) {
		all[n] = req->vol_seeds[i].m;
		/* unique, and no volume's name (no '#' in those) */
		snprintf(all[n++].name, sizeof(all[0].name), "#%zu", i);
		bytes += req->vol_seeds[i].size;
	}
	sup_vol_mounts list = {.v = all, .n = n};
	int rc = sup_volspec_mounts_ok(&list, err);
	rc = rc ?: disk_fits(c, who, bytes, err);
	if (rc < 0)
		return rc;
	sup_op *op = pre_new(c, OP_VOLS, who, cb, ud, err);
	if (!op)
		return err->code;
	rc = sup_volseed_start(c->cfg.volumes, who->name, req->vol_seeds, req->nvol_seeds, vols_made,
			       op, &op->u.pre.vs, err);
	if (rc < 0) {
		free(op);
		return rc;
	}
	op->u.pre.req = *req;
	memset(req, 0, sizeof(*req));
	*opp = op;
	return 0;
}

int sup_core_create(sup_core *c, const sup_tenant *who, sup_create_req *req,
		    sup_core_sandbox_cb cb, void *ud, sup_op **opp, sbx_err *err)
{
	*opp = NULL;
	if (c->shutting_down)
		return sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down");
	if (c->cfg.backend && (req->volumes.n || req->snapshot))
		return sbx_err_set(err, -ENOSYS, "%s not offered with the %s backend",
				   req->volumes.n ? "volumes are" : "a sandbox from a snapshot is", c->cfg.backend);
	if (req->snapshot && !req->snapshot_fetched && sup_snaps_remote(c->snaps))
		return create_from_store(c, who, req, cb, ud, opp, err);
	/* seeded once: a create with volumes to make comes here again */
	int rc = req->snapshot && !req->seed ? sup_snaps_seed(c->snaps, who, req, err) : 0;
	if (rc == 0)
		rc = apply_tenant(who, req, err);
	if (rc == 0)
		rc = allow_isolation(c, who, req, err);
	if (rc == 0)
		rc = allow_network(c, req, err);
	if (rc == 0 && req->nvol_seeds && !req->vols_seeded)
		return create_with_volumes(c, who, req, cb, ud, opp, err);
	/* a backend's template sets the limits: the quota counts those */
	if (rc == 0 && c->cfg.backend)
		rc = sup_pools_fit(c->pools, req->acquire ? req->acquire : req->image ? req->image : "host",
				   req->isolation, req->given, &req->resources, err);
	if (rc == 0)
		rc = check_quota(c, who, &req->resources, err);
	if (rc == 0 && req->volumes.n)
		rc = allow_volumes(c, who, req, err);
	if (rc < 0)
		return rc;
	sup_op *op = calloc(1, sizeof(*op));
	if (!op)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	op->core = c;
	op->kind = OP_CREATE;
	op->ud = ud;
	op->u.create.req = *req;
	memset(req, 0, sizeof(*req));
	op->u.create.cb = cb;
	memcpy(op->u.create.tenant, who->name, sizeof(op->u.create.tenant));
	op->u.create.allow_root = who->allow_root;
	sup_create_req *rq = &op->u.create.req;
	const char *image = rq->acquire ? rq->acquire : rq->image ? rq->image : "host";
	sup_sandbox *now = NULL;
	if (rq->seed)
		rc = sup_pools_acquire_seeded(c->pools, image, rq->isolation, &rq->resources, rq->seed,
					      on_acquired, op, &op->u.create.acq, err);
	else
		rc = sup_pools_acquire(c->pools, image, rq->isolation, &rq->resources, on_acquired, op,
				       &now, &op->u.create.acq, err);
	if (rc < 0) {
		sup_create_req_free(&op->u.create.req);
		free(op);
		return rc;
	}
	TAILQ_INSERT_TAIL(&c->creates, op, link);
	if (now) {
		/* answered and freed now, or once its failed sandbox is gone */
		if (acquired(now, 0, NULL, op))
			*opp = op;
		return 0;
	}
	*opp = op;
	return 0;
}

/* ---- get / list ---- */

int sup_core_get(sup_core *c, const sup_tenant *who, const char *id, sup_sandbox_view *out,
		 sbx_err *err)
{
	sup_sandbox *sb = lookup_for(c, who, id, err);
	if (!sb)
		return err->code;
	view_of(sb, out);
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
		view_of(sb, &v);
		fn(&v, ud);
	}
}

/* ---- network ---- */

int sup_core_set_network(sup_core *c, const char *id, const sup_netpol *p, sup_sandbox_view *out,
			 sbx_err *err)
{
	sup_sandbox *sb = lookup(c, id);
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
	if (record(c, sb, err) < 0) {
		sup_error("sandbox %s: %s", sb->id, err->msg);
		err->code = -EIO;
		return sbx_err_wrap(err, "sandbox %s: policy in force but not kept for a restart",
				    sb->id);
	}
	sup_info("sandbox %s: network policy replaced (%zu rules, default %s)", sb->id, p->n,
		 p->default_action == SUP_NETPOL_ALLOW ? "allow" : "deny");
	view_of(sb, out);
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
	if (record(c, sb, err) < 0) {
		sb->expires_at = was;
		sup_error("sandbox %s: %s", sb->id, err->msg);
		err->code = -EIO;
		return sbx_err_wrap(err, "sandbox %s: new timeout not kept", sb->id);
	}
	struct timeval tv = { (time_t)seconds, 0 };
	evtimer_add(sb->expiry, &tv);
	sup_info("sandbox %s: lifetime renewed: %us from now", sb->id, seconds);
	view_of(sb, out);
	return 0;
}

/* ---- pause / resume ---- */

int sup_core_pause(sup_core *c, const char *id, bool paused, sup_sandbox_view *out, sbx_err *err)
{
	sup_sandbox *sb = c->shutting_down ? NULL : lookup(c, id);
	if (!sb)
		return c->shutting_down ? sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down")
					: sbx_err_set(err, -ENOENT, "no sandbox %.64s", id);
	if (sb->state == SUP_SB_RUNNING && sb->paused == paused) {
		view_of(sb, out); /* already so: the same answer again */
		return 0;
	}
	if (sb->state == SUP_SB_FAILED)
		return sbx_err_set(err, -EBUSY, "sandbox %s failed (%s); delete it and create another",
				   sb->id, sb->reason[0] ? sb->reason : "the agent connection was lost");
	if (sup_pools_freeze(c->pools, sb, paused, err) < 0)
		return sbx_err_wrap(err, "%s", paused ? "pause" : "resume");
	/* durable before the answer: a restart re-adopts it as it was told */
	if (record(c, sb, err) < 0) {
		sbx_err undo;
		sup_error("sandbox %s: %s", sb->id, err->msg);
		if (sup_pools_freeze(c->pools, sb, !paused, &undo) < 0)
			sup_error("sandbox %s: %s", sb->id, undo.msg);
		err->code = -EIO;
		return sbx_err_wrap(err, "sandbox %s: not %s", sb->id, paused ? "paused" : "resumed");
	}
	sup_info("sandbox %s: %s", sb->id, paused ? "paused" : "resumed");
	view_of(sb, out);
	return 0;
}

bool sup_core_paused(sup_core *c, const char *id)
{
	const sup_sandbox *sb = lookup(c, id);
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
		tell(c, SUP_LIFE_DELETED, sb);
		core_destroy(c, sb, true, -EBUSY, "the sandbox was deleted while the command ran");
	}
	*opp = op;
	return 0;
}

/* ---- exec ---- */

static void exec_on_data(sup_exec_call *call, sup_chan ch, const uint8_t *p, size_t n,
			 size_t cost, void *ud)
{
	sup_op *op = ud;
	if (op->u.exec.scb) {
		op->u.exec.scb->on_data(ch, p, n, cost, op->ud);
		return;
	}
	bytes_append(ch == SUP_CH_STDOUT ? &op->u.exec.out : &op->u.exec.err, p, n);
	/* Buffered (or dropped past the cap): the agent may send more at once,
	 * so a chatty command is never blocked by the cap. */
	sup_agent_exec_consumed(call, cost);
}

static uint64_t elapsed_us(const struct timespec *start)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t us = (int64_t)(now.tv_sec - start->tv_sec) * 1000000 +
		     (now.tv_nsec - start->tv_nsec) / 1000;
	return us < 0 ? 0 : (uint64_t)us;
}

static void count_exec(sup_core *c, int rc, const sup_exec_status *st, uint64_t us)
{
	enum exec_result r = EXEC_FAILED;
	if (st)
		r = st->timed_out ? EXEC_TIMED_OUT : st->exited ? EXEC_EXITED : EXEC_SIGNALED;
	c->execs[r]++;
	if (rc == 0 || st)
		sup_hist_observe(&c->exec_seconds, (double)us / 1e6);
	if (st && st->oom_killed)
		c->oom_killed++;
}

static void exec_on_done(sup_exec_call *call, int rc, const sup_exec_status *st,
			 const sbx_err *err, void *ud)
{
	sup_op *op = ud;
	(void)call;
	TAILQ_REMOVE(&op->sb->execs, op, link);
	op->u.exec.call = NULL;
	if (rc == -ETIME)
		count_timeout(op->sb, err);
	count_exec(op->core, rc, st, elapsed_us(&op->u.exec.start));
	if (st && st->oom_killed)
		tell(op->core, SUP_LIFE_OOM, op->sb);
	if (op->u.exec.scb) {
		sup_exec_status s2;
		if (rc == 0) {
			s2 = *st;
			uint64_t measured = elapsed_us(&op->u.exec.start);
			if (!s2.duration_us || s2.duration_us > measured)
				s2.duration_us = measured;
		}
		op->u.exec.scb->on_done(rc, rc == 0 ? &s2 : NULL, err, op->ud);
	} else if (rc == 0 || (rc == -ETIME && st)) {
		sup_exec_result r = {
			.st = *st,
			.out = op->u.exec.out.p,
			.out_len = op->u.exec.out.len,
			.out_truncated = op->u.exec.out.truncated,
			.err = op->u.exec.err.p,
			.err_len = op->u.exec.err.len,
			.err_truncated = op->u.exec.err.truncated,
		};
		/* The guest's own figure is more precise, but not above what we
		 * measured around it. */
		uint64_t measured = elapsed_us(&op->u.exec.start);
		if (!r.st.duration_us || r.st.duration_us > measured)
			r.st.duration_us = measured;
		op->u.exec.cb(rc, &r, err, op->ud);
	} else {
		op->u.exec.cb(rc, NULL, err, op->ud);
	}
	bytes_free(&op->u.exec.out);
	bytes_free(&op->u.exec.err);
	free(op);
}

static const sup_exec_cbs exec_cbs = {
	.on_data = exec_on_data,
	.on_done = exec_on_done,
};

/* The sandbox id names, with a live agent to send work to; NULL with err
 * (a negative code) when there is none. */
static sup_sandbox *running_sandbox(sup_core *c, const char *id, sbx_err *err)
{
	sup_sandbox *sb = c->shutting_down ? NULL : lookup(c, id);
	if (c->shutting_down)
		sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down");
	else if (!sb)
		sbx_err_set(err, -ENOENT, "no sandbox %.64s", id);
	else if (sb->state == SUP_SB_DESTROYING)
		sbx_err_set(err, -EBUSY, "sandbox %s is being destroyed", sb->id);
	else if (sb->state != SUP_SB_RUNNING || !sb->agent)
		sbx_err_set(err, -ECONNRESET, "sandbox %s failed (%s); delete it and create another",
			    sb->id, sb->reason[0] ? sb->reason : "the agent connection was lost");
	else if (sb->paused)
		/* the one check: exec, files, ports, MCP and processes all come here */
		sbx_err_set(err, -EHOSTDOWN, "sandbox %s is paused; resume it first", sb->id);
	else
		return sb;
	return NULL;
}

sup_agent *sup_core_agent(sup_core *c, const char *id, sbx_err *err)
{
	sup_sandbox *sb = running_sandbox(c, id, err);

	return sb ? sb->agent : NULL;
}

/* The policy every command passes, in the foreground or not: root only
 * with --allow-root (the agent checks the uid the user resolves to). */
static sup_sandbox *command_sandbox(sup_core *c, const char *id, sup_exec_spec *spec, sbx_err *err)
{
	sup_sandbox *sb = running_sandbox(c, id, err);
	if (!sb)
		return NULL;
	if (spec->x.user && (strcmp(spec->x.user, "root") == 0 || strcmp(spec->x.user, "0") == 0) &&
	    !sb->allow_root) {
		sbx_err_set(err, -EPERM,
			    "running as root is not allowed for tenant %s (allow_root, or --allow-root without --tenants)",
			    sb->tenant);
		return NULL;
	}
	spec->x.allow_root = sb->allow_root;
	/* the image's User (when not root) and WorkingDir are the defaults */
	const sup_env *image_env;
	const char *image_user, *image_workdir;
	sup_pools_image_config(sb, &image_env, &image_user, &image_workdir);
	if ((!spec->x.user && image_user && !(spec->x.user = strdup(image_user))) ||
	    (!spec->x.cwd && image_workdir && !(spec->x.cwd = strdup(image_workdir)))) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	return sb;
}

int sup_core_command_prepare(sup_core *c, const char *id, sup_exec_spec *spec, const sup_env **env,
			     sbx_err *err)
{
	sup_sandbox *sb = command_sandbox(c, id, spec, err);
	if (!sb)
		return err->code;
	*env = &sb->env;
	return 0;
}

static int exec_start(sup_core *c, const char *id, sup_exec_spec *spec, sup_core_exec_cb cb,
		      const sup_core_stream_cbs *scb, void *ud, sup_op **opp, sbx_err *err)
{
	*opp = NULL;
	sup_sandbox *sb = command_sandbox(c, id, spec, err);
	if (!sb)
		return err->code;
	int rc;
	unsigned inflight = 0;
	sup_op *o;
	TAILQ_FOREACH(o, &sb->execs, link)
	inflight += o->kind == OP_EXEC;
	if (inflight >= c->cfg.max_execs)
		return sbx_err_set(err, -EAGAIN, "sandbox %s already runs %u commands; try again later",
				   sb->id, inflight);
	sup_op *op = calloc(1, sizeof(*op));
	if (!op)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	op->core = c;
	op->kind = OP_EXEC;
	op->ud = ud;
	op->sb = sb;
	op->u.exec.cb = cb;
	op->u.exec.scb = scb;
	sup_bytes proto = { .limit = spec->max_output_set ? spec->max_output : c->cfg.max_output,
			    .budget_used = &c->captured,
			    .budget = c->cfg.max_output_total };
	op->u.exec.out = proto;
	op->u.exec.err = proto;
	clock_gettime(CLOCK_MONOTONIC, &op->u.exec.start);
	rc = sup_agent_exec(sb->agent, spec, &sb->env, &exec_cbs, op, &op->u.exec.call, err);
	if (rc == 0)
		spec->stdin_data = NULL; /* the call owns it now */
	sup_exec_spec_free(spec);
	if (rc < 0) {
		free(op);
		return sbx_err_wrap(err, "sandbox %s", sb->id);
	}
	TAILQ_INSERT_TAIL(&sb->execs, op, link);
	*opp = op;
	return 0;
}

int sup_core_exec(sup_core *c, const char *id, sup_exec_spec *spec, sup_core_exec_cb cb,
		  void *ud, sup_op **opp, sbx_err *err)
{
	return exec_start(c, id, spec, cb, NULL, ud, opp, err);
}

int sup_core_exec_stream(sup_core *c, const char *id, sup_exec_spec *spec,
			 const sup_core_stream_cbs *cbs, void *ud, sup_op **opp, sbx_err *err)
{
	return exec_start(c, id, spec, NULL, cbs, ud, opp, err);
}

void sup_op_consumed(sup_op *op, size_t cost)
{
	if (op->kind == OP_EXEC && op->u.exec.call)
		sup_agent_exec_consumed(op->u.exec.call, cost);
	else if (op->kind == OP_CALL && op->u.call.call)
		sup_agent_call_consumed(op->u.call.call, cost);
}

/* ---- other agent operations ---- */

static void call_on_data(sup_agent_call *call, const char *ch, size_t ch_len, const uint8_t *p,
			 size_t n, size_t cost, void *ud)
{
	sup_op *op = ud;
	if (op->u.call.cbs->on_output) {
		op->u.call.cbs->on_output(sup_agent_chan(ch, ch_len), p, n, cost, op->ud);
		return;
	}
	if (!op->u.call.cbs->on_data) {
		sup_agent_call_consumed(call, cost);
		return;
	}
	op->u.call.cbs->on_data(p, n, cost, op->ud);
}

static void call_on_event(sup_agent_call *call, const msgpack_object *map, size_t cost, void *ud)
{
	sup_op *op = ud;
	if (!op->u.call.cbs->on_event) {
		sup_agent_call_consumed(call, cost);
		return;
	}
	op->u.call.cbs->on_event(map, cost, op->ud);
}

static void call_on_done(sup_agent_call *call, int rc, const msgpack_object *result,
			 const sbx_err *err, void *ud)
{
	sup_op *op = ud;
	(void)call;
	TAILQ_REMOVE(&op->sb->execs, op, link);
	op->u.call.call = NULL;
	if (rc == -ETIME)
		count_timeout(op->sb, err);
	op->u.call.cbs->on_done(rc, result, err, op->ud);
	free(op);
}

static void call_on_writable(sup_agent_call *call, void *ud)
{
	sup_op *op = ud;
	(void)call;
	if (op->u.call.cbs->on_writable)
		op->u.call.cbs->on_writable(op->ud);
}

static const sup_agent_call_cbs call_cbs = {
	.on_data = call_on_data,
	.on_writable = call_on_writable,
	.on_event = call_on_event,
	.on_done = call_on_done,
};

int sup_core_call_add_data(sup_op *op, const uint8_t *p, size_t n, struct evbuffer *dst)
{
	if (op->kind == OP_CALL && op->u.call.call)
		return sup_agent_call_add_data(op->u.call.call, p, n, dst);
	return n == 0 || evbuffer_add(dst, p, n) == 0 ? 0 : -ENOMEM;
}

int sup_core_call_send(sup_op *op, const char *ch, const uint8_t *p, size_t n, bool eof,
		       sbx_err *err)
{
	if (op->kind != OP_CALL || !op->u.call.call)
		return sbx_err_set(err, -EINVAL, "not an agent call");
	return sup_agent_call_send(op->u.call.call, ch, p, n, eof, err);
}

int sup_core_call_send_from(sup_op *op, const char *ch, struct evbuffer *src, size_t n,
			    sbx_err *err)
{
	if (op->kind != OP_CALL || !op->u.call.call)
		return sbx_err_set(err, -EINVAL, "not an agent call");
	return sup_agent_call_send_from(op->u.call.call, ch, src, n, err);
}

int sup_core_call(sup_core *c, const char *id, const char *opname, sbx_proto_args *args,
		  const sup_core_call_cbs *cbs, void *ud, sup_op **opp, sbx_err *err)
{
	*opp = NULL;
	size_t args_len = 0;
	const char *enc = sbx_proto_args_done(args, &args_len);
	sup_sandbox *sb = running_sandbox(c, id, err);
	sup_op *op = sb && enc ? calloc(1, sizeof(*op)) : NULL;
	int rc;
	if (!op) {
		sbx_proto_args_destroy(args);
		return sb ? sbx_err_set(err, -ENOMEM, "out of memory") : err->code;
	}
	op->core = c;
	op->kind = OP_CALL;
	op->ud = ud;
	op->sb = sb;
	op->u.call.cbs = cbs;
	rc = sup_agent_call_start(sb->agent, opname, enc, args_len, cbs->wait, 0, &call_cbs, op,
				  &op->u.call.call, err);
	sbx_proto_args_destroy(args);
	if (rc < 0) {
		free(op);
		return sbx_err_wrap(err, "sandbox %s", sb->id);
	}
	TAILQ_INSERT_TAIL(&sb->execs, op, link);
	*opp = op;
	return 0;
}

void sup_core_blame(sup_core *c, const char *id, const sbx_err *err)
{
	sup_sandbox *sb = err->code == -EPROTO ? lookup(c, id) : NULL;
	if (sb && sb->agent)
		sup_agent_blame(sb->agent, "%s", err->msg);
}

void sup_core_id_given_out(sup_core *c, const char *id)
{
	sup_sandbox *sb = lookup(c, id);
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
		bytes_free(&op->u.exec.out);
		bytes_free(&op->u.exec.err);
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
			sup_snaps_job_cancel(op->u.pre.job);
		if (op->u.pre.create)
			sup_op_cancel(op->u.pre.create);
		pre_end(op, -ECANCELED);
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
	if (rc == 0 && list_sandbox(c, sb, sb->expires_at - time(NULL), &e) < 0) {
		sup_error("sandbox %s: not re-adopted: %s", sb->id, e.msg);
		sup_env_free(&sb->env);
		release_volumes(c, sb);
		sup_pools_destroy(c->pools, sb, false, NULL, NULL);
		return;
	}
	if (rc < 0) {
		sup_env_free(&sb->env);
		release_volumes(c, sb);
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
		sup_env_free(&sb->env);
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

int sup_core_volume_create(sup_core *c, const sup_tenant *who, const char *name, uint64_t size,
			   sup_volumes_cb cb, void *ud, sbx_err *err)
{
	if (!c->cfg.volumes)
		return sbx_err_set(err, -ENOSYS, "this supervisor has no volumes");
	if (c->shutting_down)
		return sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down");
	int r = disk_fits(c, who, size, err);
	return r ?: sup_volumes_create(c->cfg.volumes, who->name, name, size, cb, ud, err);
}
