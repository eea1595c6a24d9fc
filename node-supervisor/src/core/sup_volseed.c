/* sup_volseed: see sup_volseed.h. */
#include "sup_volseed.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_layer_tar.h"
#include "sup_log.h"
#include "sup_tenants.h"
#include "sup_token.h"

#define SUFFIX_HEX 4         /* bytes: 8 hex digits after the source's name */
#define MAX_ENTRIES 1000000u /* members one volume's archive may hold */

typedef struct seed_vol {
	sup_volseed *vs;
	uint64_t size;
	char archive[PATH_MAX];
	bool made;
} seed_vol;

struct sup_volseed {
	sup_volumes *v;
	char tenant[SUP_TENANT_NAME_MAX + 1];
	size_t n, pending;
	seed_vol *sv;
	sup_vol_mount *mounts; /* sv[i]'s volume: its new name, path, mode */
	bool undone;           /* undo came (or a volume failed): the made ones go */
	int rc;
	sbx_err err;
	sup_volseed_cb cb;
	void *ud;
};

static void vs_free(sup_volseed *vs)
{
	free(vs->sv);
	free(vs->mounts);
	free(vs);
}

static void deleted(int rc, const sup_volume_view *view, const sbx_err *err, void *ud)
{
	(void)view;
	(void)ud;
	if (rc < 0)
		sup_warn("a volume made for a restore or fork: %s", err->msg);
}

/* The volumes made go, and vs. */
static void drop_made(sup_volseed *vs)
{
	for (size_t i = 0; i < vs->n; i++) {
		sbx_err e;
		if (vs->sv[i].made &&
		    sup_volumes_delete(vs->v, vs->tenant, vs->mounts[i].name, deleted, NULL, &e) < 0)
			sup_warn("volume %s/%s: %s", vs->tenant, vs->mounts[i].name, e.msg);
	}
	vs_free(vs);
}

/* On the worker: the new volume's files from the seed's archive. */
static int fill(const char *root, void *ud, sbx_err *err)
{
	const seed_vol *sv = ud;
	SBX_AUTO_CLOSE int in = open(sv->archive, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return sbx_err_sys(err, -errno, "its archive");
	SBX_AUTO_CLOSE int dir = open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dir < 0)
		return sbx_err_sys(err, -errno, "its files");
	sup_layer_tar_info info;
	/* past the volume's size its file system says ENOSPC first; the bound
	 * on bytes stops a stream that claims more than twice that */
	return sup_layer_tar_unpack(in, dir, 2 * sv->size, MAX_ENTRIES, &info, err);
}

static void made(int rc, const sup_volume_view *view, const sbx_err *err, void *ud)
{
	(void)view;
	seed_vol *sv = ud;
	sup_volseed *vs = sv->vs;
	size_t i = (size_t)(sv - vs->sv);
	vs->pending--;
	if (rc == 0)
		sv->made = true;
	else if (vs->rc == 0) {
		vs->rc = rc;
		vs->err = *err;
		sbx_err_wrap(&vs->err, "volume %s for %s", vs->mounts[i].name, vs->mounts[i].path);
	}
	if (vs->pending)
		return;
	if (vs->undone) {
		drop_made(vs);
		return;
	}
	if (vs->rc < 0) {
		sbx_err e = vs->err;
		sup_volseed_cb cb = vs->cb;
		void *cud = vs->ud;
		drop_made(vs);
		cb(e.code, &e, cud);
		return;
	}
	vs->cb(0, NULL, vs->ud);
}

/* The new name: the source's (cut to leave room) and -<8 hex>. */
static int new_name(const char *from, char *out, size_t cap, sbx_err *err)
{
	char hex[2 * SUFFIX_HEX + 1];
	int r = sup_random_hex(hex, SUFFIX_HEX, err);
	if (r < 0)
		return r;
	int keep = (int)(SUP_VOL_NAME_MAX - 1 - 2 * SUFFIX_HEX);
	snprintf(out, cap, "%.*s-%s", keep, from, hex);
	return 0;
}

int sup_volseed_start(sup_volumes *v, const char *tenant, const sup_vol_seed *seeds, size_t n,
		      sup_volseed_cb cb, void *ud, sup_volseed **out, sbx_err *err)
{
	*out = NULL;
	sup_volseed *vs = calloc(1, sizeof(*vs));
	if (vs) {
		vs->sv = calloc(n, sizeof(*vs->sv));
		vs->mounts = calloc(n, sizeof(*vs->mounts));
	}
	if (!vs || !vs->sv || !vs->mounts) {
		if (vs)
			vs_free(vs);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	vs->v = v;
	snprintf(vs->tenant, sizeof(vs->tenant), "%s", tenant);
	vs->n = n;
	vs->cb = cb;
	vs->ud = ud;
	int r = 0;
	for (size_t i = 0; r == 0 && i < n; i++) {
		seed_vol *sv = &vs->sv[i];
		sv->vs = vs;
		sv->size = seeds[i].size;
		snprintf(sv->archive, sizeof(sv->archive), "%s", seeds[i].archive);
		vs->mounts[i] = seeds[i].m;
		r = new_name(seeds[i].m.name, vs->mounts[i].name, sizeof(vs->mounts[i].name), err);
		r = r ?: sup_volumes_create_filled(v, tenant, vs->mounts[i].name, sv->size, fill, sv,
						   made, sv, err);
		if (r == 0)
			vs->pending++;
	}
	if (r < 0) {
		sbx_err_wrap(err, "a volume of the snapshot");
		/* the ones started go once made */
		if (vs->pending)
			vs->undone = true;
		else
			vs_free(vs);
		return r;
	}
	*out = vs;
	return 0;
}

const sup_vol_mount *sup_volseed_mounts(const sup_volseed *vs, size_t *n)
{
	*n = vs->n;
	return vs->mounts;
}

void sup_volseed_keep(sup_volseed *vs)
{
	for (size_t i = 0; i < vs->n; i++)
		sup_info("volume %s/%s: made for %s from a snapshot's or fork's copy", vs->tenant,
			 vs->mounts[i].name, vs->mounts[i].path);
	vs_free(vs);
}

void sup_volseed_undo(sup_volseed *vs)
{
	vs->undone = true;
	if (vs->pending == 0)
		drop_made(vs);
}
