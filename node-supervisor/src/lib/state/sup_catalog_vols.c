/* The catalog's volumes (step 2): a row per volume (tenant, name, size,
 * created) and which sandbox mounts which volume where (a mount's row goes
 * with its sandbox's). Stores and reads rows; decides nothing. */
#include "sup_catalog.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sup_catalog_int.h"

/* ---- volumes (step 2) ---- */

int sup_catalog_vol_put(sup_catalog *c, const sup_catalog_vol *v, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c, "INSERT INTO volumes (tenant, name, size, created_at) VALUES (?1, ?2, ?3, ?4)",
			&st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, v->tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, v->name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)v->size);
	sqlite3_bind_int64(st, 4, v->created_at);
	return sup_catalog_step_done(c, st, "record a volume", err);
}

int sup_catalog_vol_remove(sup_catalog *c, const char *tenant, const char *name, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c, "DELETE FROM volumes WHERE tenant = ?1 AND name = ?2", &st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	return sup_catalog_step_done(c, st, "remove a volume", err);
}

int sup_catalog_vol_each(sup_catalog *c, int (*fn)(const sup_catalog_vol *v, void *ud, sbx_err *err),
			 void *ud, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c, "SELECT tenant, name, size, created_at FROM volumes ORDER BY created_at, tenant, name",
			&st, err);
	if (r < 0)
		return r;
	int rc = SQLITE_DONE;
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		sup_catalog_vol v;
		sup_catalog_col_text(st, 0, v.tenant, sizeof(v.tenant));
		sup_catalog_col_text(st, 1, v.name, sizeof(v.name));
		v.size = (uint64_t)sqlite3_column_int64(st, 2);
		v.created_at = sqlite3_column_int64(st, 3);
		r = fn(&v, ud, err);
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = sup_catalog_db_err(c, err, "read volumes");
	sqlite3_finalize(st);
	return r;
}

int sup_catalog_vol_mounts_put(sup_catalog *c, const char *id, const char *tenant,
			       const sup_vol_mount *m, size_t n, sbx_err *err)
{
	sqlite3_stmt *st = NULL;
	int r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err);
	r = r ?: sup_catalog_prepare(c, "DELETE FROM volume_mounts WHERE id = ?1", &st, err);
	if (r == 0) {
		sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
		r = sup_catalog_step_done(c, st, "record a sandbox's volumes", err);
	}
	st = NULL;
	r = r ?: sup_catalog_prepare(c, "INSERT INTO volume_mounts (id, pos, tenant, name, path, read_only)"
			    " VALUES (?1, ?2, ?3, ?4, ?5, ?6)", &st, err);
	for (size_t i = 0; r == 0 && i < n; i++) {
		sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
		sqlite3_bind_text(st, 3, tenant, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, m[i].name, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 5, m[i].path, -1, SQLITE_STATIC);
		sqlite3_bind_int(st, 6, m[i].read_only);
		if (sqlite3_step(st) != SQLITE_DONE)
			r = sup_catalog_db_err(c, err, "record a sandbox's volumes");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	if (r == 0)
		return sup_catalog_exec(c, "COMMIT;", err);
	sbx_err ignored;
	sup_catalog_exec(c, "ROLLBACK;", &ignored);
	return r;
}

int sup_catalog_vol_mounts_each(sup_catalog *c,
				int (*fn)(const char *id, const char *tenant, const sup_vol_mount *m,
					  void *ud, sbx_err *err),
				void *ud, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c, "SELECT id, tenant, name, path, read_only FROM volume_mounts ORDER BY id, pos",
			&st, err);
	if (r < 0)
		return r;
	int rc = SQLITE_DONE;
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		char id[48], tenant[128];
		sup_vol_mount m;
		sup_catalog_col_text(st, 0, id, sizeof(id));
		sup_catalog_col_text(st, 1, tenant, sizeof(tenant));
		sup_catalog_col_text(st, 2, m.name, sizeof(m.name));
		sup_catalog_col_text(st, 3, m.path, sizeof(m.path));
		m.read_only = sqlite3_column_int(st, 4) != 0;
		r = fn(id, tenant, &m, ud, err);
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = sup_catalog_db_err(c, err, "read volume mounts");
	sqlite3_finalize(st);
	return r;
}
