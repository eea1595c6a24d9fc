/* What a tenant may have: its defaults and bounds applied to a create,
 * the isolations and networks the node offers it, its quotas against what
 * it holds (listed sandboxes, creates waiting, volumes' disk), counted when
 * they refuse. Decides only; acquires and records nothing. Loop thread
 * only. */
#include "sup_core.h"

#include <errno.h>
#include <string.h>

#include "sup_core_op_int.h"
#include "sup_sandbox.h"
#include "sup_volumes.h"

/* May this request have a sandbox of its isolation? Only where the node
 * offers it (its runtime answered at start: some pool runs it) and its
 * tenant may use it. */
int sup_core_allow_isolation(const sup_core *c, const sup_tenant *who, const sup_create_req *req,
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
int sup_core_allow_network(const sup_core *c, const sup_create_req *req, sbx_err *err)
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
int sup_core_apply_tenant(const sup_tenant *who, sup_create_req *req, sbx_err *err)
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

int sup_core_check_quota(sup_core *c, const sup_tenant *who, const sup_resources *want,
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
int sup_core_disk_fits(sup_core *c, const sup_tenant *who, uint64_t size, sbx_err *err)
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
int sup_core_allow_volumes(const sup_core *c, const sup_tenant *who, const sup_create_req *req,
			 sbx_err *err)
{
	if (!c->cfg.volumes)
		return sbx_err_set(err, -EINVAL, "field \"volumes\": this supervisor has no volumes");
	if (req->isolation != SUP_ISO_RUNC)
		return sbx_err_set(err, -EINVAL, "field \"volumes\": volumes are for runc sandboxes, not %s",
				   sup_isolation_names[req->isolation]);
	return sup_volumes_check(c->cfg.volumes, who->name, &req->volumes, err);
}

int sup_core_volume_create(sup_core *c, const sup_tenant *who, const char *name, uint64_t size,
			   sup_volumes_cb cb, void *ud, sbx_err *err)
{
	if (!c->cfg.volumes)
		return sbx_err_set(err, -ENOSYS, "this supervisor has no volumes");
	if (c->shutting_down)
		return sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down");
	int r = sup_core_disk_fits(c, who, size, err);
	return r ?: sup_volumes_create(c->cfg.volumes, who->name, name, size, cb, ud, err);
}
