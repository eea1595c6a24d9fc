/* The one check of a file path a tenant names in a sandbox (sup_core.h):
 * the sandbox's volume mounts first, then the tenant's path policy. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "sup_core.h"
#include "sup_path.h"

/* A path at or below one of the sandbox's volume mounts is allowed by the
 * mount (read-write unless mounted read-only), whatever the tenant's
 * policy says: the tenant asked for the volume there. 0 with *m filled,
 * 1 when no volume holds the path (the policy decides), or an error. */
static int volume_match(sup_core *c, const char *id, const char *p, size_t len,
			sup_policy_access need, sup_policy_match *m, sbx_err *err)
{
	sup_volumes *v = id && c ? sup_core_volumes(c) : NULL;
	if (!v)
		return 1;
	sbx_err e;
	bool dir = false;
	int n = sup_path_normalize(p, len, m->path, sizeof(m->path), &dir, &e);
	const sup_vol_mount *vm = n < 0 ? NULL : sup_volumes_mount_at(v, id, m->path, (size_t)n);
	if (!vm)
		return 1;
	if (need == SUP_POLICY_WRITE && vm->read_only)
		return sbx_err_set(err, -EPERM, "path %.300s: volume %s is mounted read-only", m->path,
				   vm->name);
	size_t rl = strlen(vm->path);
	snprintf(m->root, sizeof(m->root), "%s", vm->path);
	snprintf(m->rel, sizeof(m->rel), "%s", (size_t)n > rl ? m->path + rl + 1 : "");
	m->mode = vm->read_only ? SUP_POLICY_RO : SUP_POLICY_RW;
	m->is_root = (size_t)n == rl;
	m->dir = dir;
	return 0;
}

int sup_core_check_path(sup_core *c, const sup_tenant *who, const char *id, const char *p,
			size_t len, sup_policy_access need, sup_policy_match *m, sbx_err *err)
{
	if (!who)
		return sbx_err_set(err, -EPERM, "no tenant: no file access");
	int rc = volume_match(c, id, p, len, need, m, err);
	if (rc == 1)
		rc = sup_policy_check(sup_tenant_policy(who), who->name, p, len, need, m, err);
	return rc;
}
