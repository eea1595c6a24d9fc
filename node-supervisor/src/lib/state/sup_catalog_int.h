/* What the catalog's files share (sup_catalog.c, sup_catalog_vols.c,
 * sup_catalog_snaps.c, sup_catalog_kept.c, sup_catalog_secrets.c): the
 * handle and the statement helpers. Nothing outside these files includes
 * this; the interface is sup_catalog.h. */
#ifndef SUP_CATALOG_INT_H
#define SUP_CATALOG_INT_H

#include <limits.h>
#include <sqlite3.h>
#include <stddef.h>

#include "sup_catalog.h"

struct sup_catalog {
	sqlite3 *db;
	char path[PATH_MAX];
};

/* -EIO (-ENOSPC when the file system is full) with the catalog's path,
 * what was done and SQLite's message. */
int sup_catalog_db_err(sup_catalog *c, sbx_err *err, const char *what);
/* Run sql (no rows). */
int sup_catalog_exec(sup_catalog *c, const char *sql, sbx_err *err);
int sup_catalog_prepare(sup_catalog *c, const char *sql, sqlite3_stmt **st, sbx_err *err);
/* Step a statement that returns no rows, and finalize it. */
int sup_catalog_step_done(sup_catalog *c, sqlite3_stmt *st, const char *what, sbx_err *err);
/* Column i's text into out ("" for NULL), cut to cap. */
void sup_catalog_col_text(sqlite3_stmt *st, int i, char *out, size_t cap);

#endif
