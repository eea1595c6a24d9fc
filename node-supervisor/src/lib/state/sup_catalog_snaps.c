/* The catalog's snapshots (steps 4, 5 and 8): a row per snapshot (its
 * store's location and archive digest among its columns) and the volumes
 * it carries, in mount order (removed with it). Stores and reads rows; the
 * archives are the snapshot store's. */
#include "sup_catalog.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sup_catalog_int.h"

/* ---- snapshots ---- */

static int snap_vols_put(sup_catalog *c, const sup_catalog_snap *s, sbx_err *err)
{
	sqlite3_stmt *st = NULL;
	int r = s->nvols ? sup_catalog_prepare(c, "INSERT INTO snapshot_volumes (snapshot, pos, name, mount,"
				      " read_only, vol_size, size, sha256) VALUES (?1, ?2, ?3, ?4, ?5,"
				      " ?6, ?7, ?8)", &st, err)
			 : 0;
	for (unsigned i = 0; r == 0 && i < s->nvols && i < SUP_VOL_MAX_MOUNTS; i++) {
		const sup_catalog_snap_vol *v = &s->vols[i];
		sqlite3_bind_text(st, 1, s->id, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 2, (int)i);
		sqlite3_bind_text(st, 3, v->m.name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, v->m.path, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 5, v->m.read_only);
		sqlite3_bind_int64(st, 6, (sqlite3_int64)v->vol_size);
		sqlite3_bind_int64(st, 7, (sqlite3_int64)v->size);
		sqlite3_bind_text(st, 8, v->sha256, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE)
			r = sup_catalog_db_err(c, err, "record a snapshot's volumes");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return r;
}

static int snap_vols_get(sup_catalog *c, sup_catalog_snap *s, sbx_err *err)
{
	sqlite3_stmt *st;
	s->nvols = 0;
	int r = sup_catalog_prepare(c, "SELECT name, mount, read_only, vol_size, size, sha256 FROM"
			   " snapshot_volumes WHERE snapshot = ?1 ORDER BY pos", &st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, s->id, -1, SQLITE_STATIC);
	int rc;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && s->nvols < SUP_VOL_MAX_MOUNTS) {
		sup_catalog_snap_vol *v = &s->vols[s->nvols++];
		sup_catalog_col_text(st, 0, v->m.name, sizeof(v->m.name));
		sup_catalog_col_text(st, 1, v->m.path, sizeof(v->m.path));
		v->m.read_only = sqlite3_column_int(st, 2) != 0;
		v->vol_size = (uint64_t)sqlite3_column_int64(st, 3);
		v->size = (uint64_t)sqlite3_column_int64(st, 4);
		sup_catalog_col_text(st, 5, v->sha256, sizeof(v->sha256));
	}
	r = rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : sup_catalog_db_err(c, err, "read a snapshot's volumes");
	sqlite3_finalize(st);
	return r;
}

static int snap_put_row(sup_catalog *c, const sup_catalog_snap *s, sbx_err *err);

int sup_catalog_snap_put(sup_catalog *c, const sup_catalog_snap *s, sbx_err *err)
{
	if (!s->nvols)
		return snap_put_row(c, s, err);
	int r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err);
	r = r ?: snap_put_row(c, s, err);
	r = r ?: snap_vols_put(c, s, err);
	if (r == 0)
		return sup_catalog_exec(c, "COMMIT;", err);
	sbx_err ignored;
	sup_catalog_exec(c, "ROLLBACK;", &ignored);
	return r;
}

static int snap_put_row(sup_catalog *c, const sup_catalog_snap *s, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c,
			"INSERT INTO snapshots (id, name, tenant, source, image, digest, isolation, size,"
			" created_at, location, sha256) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
			" ?11)",
			&st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, s->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, s->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 3, s->tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, s->source, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 5, s->image, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 6, s->digest, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 7, (int)s->isolation);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)s->size);
	sqlite3_bind_int64(st, 9, s->created_at);
	sqlite3_bind_text(st, 10, s->location, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 11, s->sha256, -1, SQLITE_STATIC);
	return sup_catalog_step_done(c, st, "record a snapshot", err);
}

static void snap_row(sqlite3_stmt *st, sup_catalog_snap *s)
{
	memset(s, 0, sizeof(*s));
	sup_catalog_col_text(st, 0, s->id, sizeof(s->id));
	sup_catalog_col_text(st, 1, s->name, sizeof(s->name));
	sup_catalog_col_text(st, 2, s->tenant, sizeof(s->tenant));
	sup_catalog_col_text(st, 3, s->source, sizeof(s->source));
	sup_catalog_col_text(st, 4, s->image, sizeof(s->image));
	sup_catalog_col_text(st, 5, s->digest, sizeof(s->digest));
	s->isolation = (sup_isolation)sqlite3_column_int(st, 6);
	s->size = (uint64_t)sqlite3_column_int64(st, 7);
	s->created_at = sqlite3_column_int64(st, 8);
	sup_catalog_col_text(st, 9, s->location, sizeof(s->location));
	sup_catalog_col_text(st, 10, s->sha256, sizeof(s->sha256));
}

#define SNAP_COLS                                                                           \
	"id, name, tenant, source, image, digest, isolation, size, created_at, location, sha256"

int sup_catalog_snap_get(sup_catalog *c, const char *id, sup_catalog_snap *out, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c, "SELECT " SNAP_COLS " FROM snapshots WHERE id = ?1", &st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		snap_row(st, out);
	else if (rc == SQLITE_DONE)
		r = sbx_err_set(err, -ENOENT, "no snapshot %.64s", id);
	else
		r = sup_catalog_db_err(c, err, "read a snapshot");
	sqlite3_finalize(st);
	return r ?: snap_vols_get(c, out, err);
}

int sup_catalog_snap_remove(sup_catalog *c, const char *id, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c, "DELETE FROM snapshots WHERE id = ?1", &st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	return sup_catalog_step_done(c, st, "remove a snapshot", err);
}

int sup_catalog_snap_each(sup_catalog *c, const char *tenant,
			  void (*fn)(const sup_catalog_snap *s, void *ud), void *ud, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c,
			"SELECT " SNAP_COLS " FROM snapshots WHERE ?1 IS NULL OR tenant = ?1 ORDER BY seq",
			&st, err);
	if (r < 0)
		return r;
	if (tenant)
		sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	SBX_AUTO_FREE sup_catalog_snap *s = malloc(sizeof(*s));
	if (!s) {
		sqlite3_finalize(st);
		return sbx_err_set(err, -ENOMEM, "catalog");
	}
	int rc = SQLITE_DONE;
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		snap_row(st, s);
		r = snap_vols_get(c, s, err);
		if (r == 0)
			fn(s, ud);
	}
	if (r == 0)
		r = rc == SQLITE_DONE ? 0 : sup_catalog_db_err(c, err, "list snapshots");
	sqlite3_finalize(st);
	return r;
}
