/* The catalog's secrets (step 10): each tenant's, by name, sealed before
 * they come here (sup_secret.h); the catalog keeps bytes it cannot open
 * and never sees a value. */
#include "sup_catalog.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_catalog_int.h"

int sup_catalog_secret_put(sup_catalog *c, const sup_catalog_secret *s, bool *created,
			   sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err);
	r = r ?: sup_catalog_prepare(c, "SELECT 1 FROM secrets WHERE tenant = ?1 AND name = ?2", &st, err);
	if (r == 0) {
		sqlite3_bind_text(st, 1, s->tenant, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, s->name, -1, SQLITE_STATIC);
		int rc = sqlite3_step(st);
		*created = rc == SQLITE_DONE;
		if (rc != SQLITE_DONE && rc != SQLITE_ROW)
			r = sup_catalog_db_err(c, err, "read a secret");
		sqlite3_finalize(st);
	}
	r = r ?: sup_catalog_prepare(c,
			 "INSERT INTO secrets (tenant, name, sealed, size, created_at, updated_at)"
			 " VALUES (?1, ?2, ?3, ?4, ?5, ?5)"
			 " ON CONFLICT (tenant, name) DO UPDATE SET sealed = ?3, size = ?4,"
			 " updated_at = ?5",
			 &st, err);
	if (r == 0) {
		sqlite3_bind_text(st, 1, s->tenant, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 2, s->name, -1, SQLITE_STATIC);
		sqlite3_bind_blob(st, 3, s->sealed, (int)s->sealed_len, SQLITE_STATIC);
		sqlite3_bind_int64(st, 4, (sqlite3_int64)s->size);
		sqlite3_bind_int64(st, 5, s->updated_at);
		r = sup_catalog_step_done(c, st, "record a secret", err);
	}
	if (r == 0)
		return sup_catalog_exec(c, "COMMIT;", err);
	sbx_err ignored;
	sup_catalog_exec(c, "ROLLBACK;", &ignored);
	return r;
}

int sup_catalog_secret_get(sup_catalog *c, const char *tenant, const char *name,
			   sup_catalog_secret *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c,
			"SELECT sealed, size, created_at, updated_at FROM secrets"
			" WHERE tenant = ?1 AND name = ?2",
			&st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		snprintf(out->tenant, sizeof(out->tenant), "%s", tenant);
		snprintf(out->name, sizeof(out->name), "%s", name);
		const void *b = sqlite3_column_blob(st, 0);
		int n = sqlite3_column_bytes(st, 0);
		out->sealed = malloc(n > 0 ? (size_t)n : 1);
		if (!out->sealed)
			r = sbx_err_set(err, -ENOMEM, "out of memory");
		else if (n > 0)
			memcpy(out->sealed, b, (size_t)n);
		out->sealed_len = n > 0 ? (size_t)n : 0;
		out->size = (uint64_t)sqlite3_column_int64(st, 1);
		out->created_at = sqlite3_column_int64(st, 2);
		out->updated_at = sqlite3_column_int64(st, 3);
	} else if (rc == SQLITE_DONE) {
		r = sbx_err_set(err, -ENOENT, "secret %s: not found", name);
	} else {
		r = sup_catalog_db_err(c, err, "read a secret");
	}
	sqlite3_finalize(st);
	return r;
}

int sup_catalog_secret_remove(sup_catalog *c, const char *tenant, const char *name, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c, "DELETE FROM secrets WHERE tenant = ?1 AND name = ?2", &st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
	r = sup_catalog_step_done(c, st, "remove a secret", err);
	if (r == 0 && sqlite3_changes(c->db) == 0)
		r = sbx_err_set(err, -ENOENT, "secret %s: not found", name);
	return r;
}

int sup_catalog_secret_each(sup_catalog *c, const char *tenant,
			    int (*fn)(const sup_catalog_secret *s, void *ud, sbx_err *err), void *ud,
			    sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c,
			"SELECT tenant, name, size, created_at, updated_at FROM secrets"
			" WHERE ?1 IS NULL OR tenant = ?1 ORDER BY tenant, name",
			&st, err);
	if (r < 0)
		return r;
	if (tenant)
		sqlite3_bind_text(st, 1, tenant, -1, SQLITE_STATIC);
	int rc = SQLITE_DONE;
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		sup_catalog_secret s = { 0 };
		sup_catalog_col_text(st, 0, s.tenant, sizeof(s.tenant));
		sup_catalog_col_text(st, 1, s.name, sizeof(s.name));
		s.size = (uint64_t)sqlite3_column_int64(st, 2);
		s.created_at = sqlite3_column_int64(st, 3);
		s.updated_at = sqlite3_column_int64(st, 4);
		r = fn(&s, ud, err);
	}
	if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = sup_catalog_db_err(c, err, "read secrets");
	sqlite3_finalize(st);
	return r;
}
