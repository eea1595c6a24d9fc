/* The catalog's kept records (step 9): what a layer above the core keeps
 * beside sbx's own rows, one per (kind, key), its value stored as given
 * and never read here; a record naming a sandbox goes with its row. */
#include "sup_catalog.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <time.h>

#include "sup_catalog_int.h"

int sup_catalog_kept_put(sup_catalog *c, const sup_catalog_kept *k, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c,
				    "INSERT INTO kept (kind, key, sandbox, tenant, value, created_at, updated_at)"
				    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)"
				    " ON CONFLICT(kind, key) DO UPDATE SET sandbox = ?3, tenant = ?4, value = ?5,"
				    " updated_at = ?6",
				    &st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, k->kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, k->key, -1, SQLITE_STATIC);
	if (k->sandbox)
		sqlite3_bind_text(st, 3, k->sandbox, -1, SQLITE_STATIC);
	else
		sqlite3_bind_null(st, 3);
	sqlite3_bind_text(st, 4, k->tenant, -1, SQLITE_STATIC);
	/* a blob of no bytes is still a value, not NULL */
	sqlite3_bind_blob64(st, 5, k->len ? k->value : "", k->len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)time(NULL));
	return sup_catalog_step_done(c, st, "record a kept record", err);
}

int sup_catalog_kept_remove(sup_catalog *c, const char *kind, const char *key, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c, "DELETE FROM kept WHERE kind = ?1 AND key = ?2", &st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
	return sup_catalog_step_done(c, st, "remove a kept record", err);
}

int sup_catalog_kept_each(sup_catalog *c, const char *kind,
			  int (*fn)(const sup_catalog_kept *k, void *ud, sbx_err *err), void *ud,
			  sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c,
				    "SELECT kind, key, sandbox, tenant, value, created_at, updated_at"
				    " FROM kept WHERE kind = ?1 ORDER BY seq",
				    &st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, kind, -1, SQLITE_STATIC);
	int rc = SQLITE_DONE;
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		sup_catalog_kept k = {
			.kind = (const char *)sqlite3_column_text(st, 0),
			.key = (const char *)sqlite3_column_text(st, 1),
			.sandbox = (const char *)sqlite3_column_text(st, 2),
			.tenant = (const char *)sqlite3_column_text(st, 3),
			.value = sqlite3_column_blob(st, 4),
			.len = (size_t)sqlite3_column_bytes(st, 4),
			.created_at = sqlite3_column_int64(st, 5),
			.updated_at = sqlite3_column_int64(st, 6),
		};
		if (k.kind && k.key && k.tenant && (k.value || k.len == 0))
			r = fn(&k, ud, err);
	}
	if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = sup_catalog_db_err(c, err, "read the kept records");
	sqlite3_finalize(st);
	return r;
}
