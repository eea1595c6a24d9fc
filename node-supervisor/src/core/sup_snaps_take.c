/* A snapshot taken, and the scaffold the operations on a frozen sandbox
 * share (take and fork): an op per sandbox at a time, the freeze around
 * the worker's copy, the volumes it carries packed and staged, the ids.
 * The archive's format is sup_layer_tar's, its keeping the store's; the
 * row goes in the catalog only once the archives are in the store. */
#include "sup_snaps.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/clock.h"
#include "sup_catalog.h"
#include "sup_core_int.h"
#include "sup_disk.h"
#include "sup_fsutil.h"
#include "sup_layer_tar.h"
#include "sup_log.h"
#include "sup_snap_store.h"
#include "sup_snaps_int.h"
#include "sup_snaps_store_int.h"
#include "sup_token.h"
#include "sup_volumes.h"

/* Freeze box, run fn, thaw: the thaw runs whatever fn did. */
int sup_snaps_while_frozen(sup_snaps_op *op, int (*fn)(sup_snaps_op *op), double *frozen_ms)
{
	const sup_runc_cfg *rc = op->s->cfg.runc;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int r = sup_runc_freeze(rc, &op->box, true, &op->err);
	if (r < 0)
		return sbx_err_wrap(&op->err, "freeze sandbox %s", op->box.id);
	r = fn(op);
	sbx_err terr;
	/* a sandbox its owner paused is read as it is and left paused */
	int t = op->was_paused ? 0 : sup_runc_freeze(rc, &op->box, false, &terr);
	*frozen_ms = sbx_ms_since_f(&t0);
	if (t < 0) {
		sup_error("sandbox %s: thaw after a snapshot: %s", op->box.id, terr.msg);
		if (r == 0)
			r = sbx_err_set(&op->err, t, "%s", terr.msg);
	}
	return r;
}

int sup_snaps_upper_of(const sup_runc_box *box, char *out, sbx_err *err)
{
	if (snprintf(out, PATH_MAX, "%s/" SUP_DISK_UPPER, box->dir) >= PATH_MAX)
		return sbx_err_set(err, -ENAMETOOLONG, "sandbox %s: path too long", box->id);
	return 0;
}

/* ---- take ---- */

void sup_snaps_live_remove(sup_snaps *s, sup_snaps_op *op)
{
	for (sup_snaps_op **p = &s->live; *p; p = &(*p)->next_live)
		if (*p == op) {
			*p = op->next_live;
			return;
		}
}

/* The folder dir (the source's layer, or a volume's files) as the archive
 * staged (a new file). */
static int pack_dir(sup_snaps_op *op, const char *dir, const char *staged, const char *what)
{
	SBX_AUTO_CLOSE int up = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (up < 0)
		return sbx_err_sys(&op->err, -errno, "sandbox %s: %s", op->box.id, what);
	SBX_AUTO_CLOSE int out =
		open(staged, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return sbx_err_sys(&op->err, -errno, "%s %s: stage", op->kind == KIND_TAKE ? "snapshot" : "fork", op->id);
	sup_layer_tar_info info;
	int r = sup_layer_tar_pack(up, out, &info, &op->err);
	if (r < 0)
		return sbx_err_wrap(&op->err, "%s", what);
	if (info.skipped)
		sup_info("%s of %s: %llu socket(s) or device node(s) left out", op->id, what,
			 (unsigned long long)info.skipped);
	return 0;
}

/* The source's volumes, each as its archive (while it is frozen). */
int sup_snaps_pack_vols(sup_snaps_op *op)
{
	int r = 0;
	for (unsigned k = 0; r == 0 && k < op->nvols; k++)
		r = pack_dir(op, op->vols[k].root, op->vols[k].staged, "a volume");
	return r;
}

void sup_snaps_unstage_vols(sup_snaps_op *op)
{
	for (unsigned k = 0; k < op->nvols; k++)
		if (op->vols[k].staged[0])
			unlink(op->vols[k].staged);
}

static int pack_upper(sup_snaps_op *op)
{
	char upper[PATH_MAX];
	int r = sup_snaps_upper_of(&op->box, upper, &op->err);
	r = r ?: pack_dir(op, upper, op->staged, "its layer");
	return r ?: sup_snaps_pack_vols(op);
}

static void take_run(sup_job *job)
{
	sup_snaps_op *op = (sup_snaps_op *)job;
	sbx_err_clear(&op->err);
	double frozen = 0;
	op->rc = sup_snap_store_stage(op->s->cfg.store, op->id, op->staged, &op->err);
	if (op->rc == 0)
		op->rc = sup_snaps_while_frozen(op, pack_upper, &frozen);
	if (op->rc < 0) {
		unlink(op->staged);
		sup_snaps_unstage_vols(op);
		return;
	}
	sup_info("snapshot %s of %s: frozen %.1f ms (%u volume(s))", op->id, op->box.id, frozen,
		 op->nvols);
	op->rc = sup_snap_store_commit(op->s->cfg.store, &op->row, op->staged, &op->err);
}

static void take_done(sup_job *job)
{
	sup_snaps_op *op = (sup_snaps_op *)job;
	sup_snaps *s = op->s;
	sup_snaps_live_remove(s, op);
	if (op->rc == 0 && sup_catalog_snap_put(s->cfg.catalog, &op->row, &op->err) < 0) {
		op->rc = op->err.code;
		sup_snaps_store_unstore(&s->st, &op->row);
	}
	if (op->rc < 0)
		sup_warn("snapshot of %s: %s", op->box.id, op->err.msg);
	else
		sup_info("snapshot %s of %s: %llu bytes", op->id, op->box.id,
			 (unsigned long long)op->row.size);
	if (!op->cancelled) {
		sup_snap_view v;
		sup_snaps_view_of(&op->row, &v);
		op->cb(op->rc, op->rc == 0 ? &v : NULL, &op->err, op->ud);
	}
	free(op->vols);
	free(op);
}

/* The sandbox who may snapshot or fork: RUNNING, and its box. */
static const sup_sandbox *running(sup_snaps *s, const sup_tenant *who, const char *id, sbx_err *err)
{
	const sup_sandbox *sb = sup_core_find(s->cfg.core, who, id, err);
	if (sb && sb->state != SUP_SB_RUNNING) {
		sbx_err_set(err, -EBUSY, "sandbox %s is %s", sb->id, sup_sb_state_name(sb->state));
		return NULL;
	}
	return sb;
}

/* Queue op's job; it is live (its sandbox taken) until its done(). */
void sup_snaps_submit(sup_snaps *s, sup_snaps_op *op)
{
	op->next_live = s->live;
	s->live = op;
	sup_workers_submit(s->cfg.workers, &op->job, true);
}

/* An operation on sandbox id (who's, RUNNING, no other snapshot or fork of
 * it under way: *sb), its box copied for the worker. NULL with err set. */
sup_snaps_op *sup_snaps_new_op(sup_snaps *s, const sup_tenant *who, const char *id, op_kind kind,
			    void *ud, const sup_sandbox **sb, sbx_err *err)
{
	*sb = running(s, who, id, err);
	if (!*sb)
		return NULL;
	for (sup_snaps_op *o = s->live; o; o = o->next_live)
		if (strcmp(o->box.id, (*sb)->id) == 0) {
			sbx_err_set(err, -EBUSY, "a snapshot or fork of sandbox %s is under way", (*sb)->id);
			return NULL;
		}
	sup_snaps_op *op = calloc(1, sizeof(*op));
	if (!op) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	op->s = s;
	op->kind = kind;
	op->ud = ud;
	op->box = (*sb)->box;
	op->was_paused = (*sb)->paused;
	return op;
}

int sup_snaps_new_id(const char *prefix, char *out, size_t cap, sbx_err *err)
{
	char hex[13];
	int r = sup_random_hex(hex, 6, err);
	if (r < 0)
		return r;
	snprintf(out, cap, "%s%s", prefix, hex);
	return 0;
}

/* include_volumes: what the source mounts, into op->vols (each with its
 * archive's staged path: stage(op, k, out)) and row's volumes (when row). */
int sup_snaps_carry_vols(sup_snaps *s, sup_snaps_op *op, const sup_sandbox *sb,
		      int (*stage)(sup_snaps *s, sup_snaps_op *op, unsigned k, char *out, sbx_err *err),
		      sup_catalog_snap *row, sbx_err *err)
{
	sup_volumes *vs = sup_core_volumes(s->cfg.core);
	sup_vol_mount m[SUP_VOL_MAX_MOUNTS];
	size_t n = vs ? sup_volumes_of(vs, sb->id, m, SUP_VOL_MAX_MOUNTS) : 0;
	if (n > SUP_VOL_MAX_MOUNTS)
		n = SUP_VOL_MAX_MOUNTS;
	if (n == 0)
		return 0;
	op->vols = calloc(n, sizeof(*op->vols));
	if (!op->vols)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	op->nvols = (unsigned)n;
	for (unsigned k = 0; k < n; k++) {
		uint64_t size = 0;
		int r = sup_volumes_root(vs, sb->tenant, m[k].name, op->vols[k].root, &size, err);
		r = r ?: stage(s, op, k, op->vols[k].staged, err);
		if (r < 0)
			return sbx_err_wrap(err, "volume %s", m[k].name);
		if (row) {
			row->vols[k].m = m[k];
			row->vols[k].vol_size = size;
		}
	}
	if (row)
		row->nvols = (unsigned)n;
	return 0;
}

static int take_stage(sup_snaps *s, sup_snaps_op *op, unsigned k, char *out, sbx_err *err)
{
	return sup_snap_store_vol_stage(s->cfg.store, op->id, k, out, err);
}

int sup_snaps_take(sup_snaps *s, const sup_tenant *who, const char *id, const char *name,
		   bool include_volumes, sup_snaps_cb cb, void *ud, sup_snaps_op **opp,
		   sbx_err *err)
{
	*opp = NULL;
	if (strlen(name) > SUP_SNAPS_NAME_MAX)
		return sbx_err_set(err, -EINVAL, "field \"name\": longer than %d bytes", SUP_SNAPS_NAME_MAX);
	const sup_sandbox *sb;
	sup_snaps_op *op = sup_snaps_new_op(s, who, id, KIND_TAKE, ud, &sb, err);
	if (!op)
		return err->code;
	sup_catalog_snap *row = &op->row;
	int r = sup_snaps_new_id("sn-", op->id, sizeof(op->id), err);
	snprintf(row->id, sizeof(row->id), "%s", op->id);
	if (r == 0 && include_volumes)
		r = sup_snaps_carry_vols(s, op, sb, take_stage, row, err);
	if (r < 0) {
		free(op->vols);
		free(op);
		return r;
	}
	op->cb = cb;
	snprintf(row->id, sizeof(row->id), "%s", op->id);
	snprintf(row->name, sizeof(row->name), "%s", name);
	snprintf(row->tenant, sizeof(row->tenant), "%s", sb->tenant);
	snprintf(row->source, sizeof(row->source), "%s", sb->id);
	snprintf(row->image, sizeof(row->image), "%s", sup_pools_image_of(sb));
	snprintf(row->digest, sizeof(row->digest), "%s", sup_pools_digest_of(sb));
	row->isolation = sup_pools_isolation_of(sb);
	row->created_at = (int64_t)time(NULL);
	op->job.run = take_run;
	op->job.done = take_done;
	sup_snaps_submit(s, op);
	*opp = op;
	return 0;
}
