/* sup_runc_set_limits, sup_runc_usage, sup_runc_freeze: a made sandbox's
 * limits, usage and freezer, its cgroup (sup_cgroup) and its disk layer
 * (sup_disk) together. */
#include "sup_runc.h"

#include "sup_disk.h"

int sup_runc_set_limits(const sup_runc_cfg *cfg, const sup_runc_box *box,
			const sup_resources *from, const sup_resources *to, sbx_err *err)
{
	int r = sup_cgroup_apply(cfg->cgroup, box->cgroup, from, to, err);
	r = r ?: sup_disk_set(box->dir, from->disk, to->disk, err);
	if (r < 0)
		return sbx_err_wrap(err, "sandbox %s", box->id);
	return 0;
}

int sup_runc_usage(const sup_runc_cfg *cfg, const sup_runc_box *box, sup_usage *u, sbx_err *err)
{
	u->known = 0;
	if (sup_disk_used(box->dir, &u->disk, err) == 0)
		u->known |= SUP_USAGE_DISK;
	int r = sup_cgroup_read(cfg->cgroup, box->cgroup, u, err);
	if (r < 0)
		return sbx_err_wrap(err, "sandbox %s", box->id);
	return 0;
}

int sup_runc_freeze(const sup_runc_cfg *cfg, const sup_runc_box *box, bool frozen, sbx_err *err)
{
	int r = sup_cgroup_freeze(cfg->cgroup, box->cgroup, frozen, err);
	if (r < 0)
		return sbx_err_wrap(err, "sandbox %s", box->id);
	return 0;
}
