/* A create: the request checked against the node and its tenant, a
 * sandbox acquired from the pools (ready, cold or seeded) and adopted:
 * its network policy, volumes and env, its record in the catalog before
 * the answer, and into the registry. Must not answer before the catalog
 * holds what the client is told. Loop thread only. */
#include "sup_core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sup_core_mcp.h"
#include "sup_core_op_int.h"
#include "sup_core_secrets.h"
#include "sup_log.h"
#include "sup_net.h"
#include "sup_sandbox.h"
#include "sup_volumes.h"

/* A create's sandbox destroyed after a failure: its volumes are free now
 * that its container is gone, and only then is the create answered (so a
 * restore's volumes made for it can go, and no second writer mounts one
 * the dying container still has). Not answered when it was cancelled. */
static void failed_gone(sup_sandbox *sb, int rc, const sbx_err *err, void *ud)
{
	sup_op *op = ud;
	(void)rc;
	(void)err;
	sup_core_release_volumes(op->core, sb);
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
	/* its secrets' values into its env, opened now */
	int rc = sup_core_secrets_give(c->cfg.secrets, sb, &req->secrets, err);
	/* its plumbing was made at pool fill: only its rules are loaded now */
	if (rc == 0 && req->network && sup_net_apply(c->cfg.net, sb->net_slot, req->network, err) < 0) {
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
	if (rc == 0 && (rc = sup_core_record(c, sb, err)) < 0) {
		sup_error("sandbox %s: %s", sb->id, err->msg);
		rc = err->code = -EIO;
	}
	if (rc < 0 || sup_core_list_sandbox(c, sb, (time_t)req->timeout_s, err) < 0) {
		sup_core_secrets_env_free(sb);
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
	sup_core_tell(c, SUP_LIFE_CREATED, sb);
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
		sup_core_view_of(sb, &v);
	op->u.create.cb(rc, rc == 0 ? &v : NULL, err, op->ud);
	sup_create_req_free(&op->u.create.req);
	free(op);
	return false;
}

static void on_acquired(sup_sandbox *sb, int rc, const sbx_err *err, void *ud)
{
	acquired(sb, rc, err, ud);
}

/* ---- the create, step by step ----
 * 1 the node takes it; 2 a snapshot kept in an object store is fetched
 * first (sup_core_prep.c), and the create starts again with it; 3 the
 * request within the node and its tenant; 4 the volumes a snapshot carries
 * are made first (sup_core_prep.c), and the create starts again with them;
 * 5 what it will hold fits; 6 a sandbox acquired, adopted on_acquired. */

/* 1. The node takes a create of this kind now. */
static int create_offered(const sup_core *c, const sup_create_req *req, sbx_err *err)
{
	if (c->shutting_down)
		return sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down");
	if (c->cfg.backend && (req->volumes.n || req->snapshot))
		return sbx_err_set(err, -ENOSYS, "%s not offered with the %s backend",
				   req->volumes.n ? "volumes are" : "a sandbox from a snapshot is", c->cfg.backend);
	return 0;
}

/* 2. Its snapshot's archive must be fetched first. */
static bool create_fetches(const sup_core *c, const sup_create_req *req)
{
	return req->snapshot && !req->snapshot_fetched && c->restorer && c->restorer->remote(c->snaps);
}

/* 3. What it asks, within the node and its tenant: a snapshot's image and
 * seed (once: a create with volumes to make comes here again), the
 * tenant's defaults and bounds, the isolation, the network. */
static int create_allowed(sup_core *c, const sup_tenant *who, sup_create_req *req, sbx_err *err)
{
	int rc = 0;
	if (req->snapshot && !req->seed)
		rc = c->restorer ? c->restorer->seed(c->snaps, who, req, err)
				 : sbx_err_set(err, -EINVAL, "field \"snapshot\": this supervisor keeps no snapshots");
	rc = rc ?: sup_core_apply_tenant(who, req, err);
	rc = rc ?: sup_core_allow_isolation(c, who, req, err);
	rc = rc ?: sup_core_allow_network(c, req, err);
	rc = rc ?: sup_core_secrets_check(c->cfg.secrets, who->name, &req->secrets, &req->env, err);
	/* a file is bound into the container's own mount namespace: runc's
	 * (gVisor's files are its own kernel's; a pod's, its node's) */
	if (rc == 0 && sup_core_secrets_files(&req->secrets) &&
	    (c->cfg.backend || req->isolation != SUP_ISO_RUNC))
		rc = sbx_err_set(err, -EINVAL,
				 "field \"secret_files\": files are given to runc sandboxes only (this is %s); "
				 "use \"secrets\" (variables)",
				 c->cfg.backend ? c->cfg.backend : sup_isolation_names[req->isolation]);
	return rc;
}

/* 5. What it will hold fits: a backend's template sets the limits (the
 * quota counts those), the tenant's quota, its volumes. */
static int create_fits(sup_core *c, const sup_tenant *who, sup_create_req *req, sbx_err *err)
{
	int rc = 0;
	if (c->cfg.backend)
		rc = sup_pools_fit(c->pools, req->acquire ? req->acquire : req->image ? req->image : "host",
				   req->isolation, req->given, &req->resources, err);
	rc = rc ?: sup_core_check_quota(c, who, &req->resources, err);
	if (rc == 0 && req->volumes.n)
		rc = sup_core_allow_volumes(c, who, req, err);
	return rc;
}

/* 6. A sandbox from the pools (req taken): handed out now, or to
 * on_acquired once one is ready. */
static int create_acquire(sup_core *c, const sup_tenant *who, sup_create_req *req,
			  sup_core_sandbox_cb cb, void *ud, sup_op **opp, sbx_err *err)
{
	int rc;
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

int sup_core_create(sup_core *c, const sup_tenant *who, sup_create_req *req,
		    sup_core_sandbox_cb cb, void *ud, sup_op **opp, sbx_err *err)
{
	*opp = NULL;
	int rc = create_offered(c, req, err);
	if (rc < 0)
		return rc;
	if (create_fetches(c, req))
		return sup_core_create_from_store(c, who, req, cb, ud, opp, err);
	rc = create_allowed(c, who, req, err);
	if (rc == 0 && req->nvol_seeds && !req->vols_seeded)
		return sup_core_create_with_volumes(c, who, req, cb, ud, opp, err);
	rc = rc ?: create_fits(c, who, req, err);
	return rc ?: create_acquire(c, who, req, cb, ud, opp, err);
}
