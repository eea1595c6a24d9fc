/* sup_catalog: see sup_catalog.h. Schema 1:
 *   sandboxes  one row per sandbox; seq keeps creation order
 *   env        its create-time env, in order (removed with its sandbox)
 * Step 2 (volumes):
 *   volumes        one row per volume: tenant, name, size, created
 *   volume_mounts  which sandbox mounts which volume where (removed with
 *                  its sandbox)
 * Step 3 (lifecycle):
 *   sandboxes.paused  frozen by pause
 *   sandboxes.network its egress policy (JSON), '' for none
 *   pools             sizes set at run time, by image and isolation
 * Step 4 (snapshots):
 *   snapshots      one row per snapshot of the store
 * Step 5 (snapshot store):
 *   snapshots.location  the store holding its archive ('' the state folder,
 *                       else "s3://bucket/prefix/")
 *   snapshots.sha256    its archive's digest ('' unknown)
 * Step 8 (snapshots with volumes):
 *   snapshot_volumes  the volumes a snapshot carries, in mount order
 *                     (removed with its snapshot)
 * Step 9 (kept records):
 *   kept           what a layer above keeps (kind, key, value, tenant,
 *                  times), the sandbox it goes with; step 6's osbx_kept
 *                  rows moved into it (kind "opensandbox"), that table
 *                  dropped
 * Step 10 (secrets):
 *   secrets            one row per tenant's secret: its sealed value
 *                      (sup_secret.h: ciphertext only), size and dates
 *   sandboxes.secrets  which secrets a sandbox was given, as the core's
 *                      text (names, never a value); '' for none
 * Here: the schema and its steps, the sandboxes' rows and the pools'; the
 * volumes' rows are sup_catalog_vols.c, the snapshots' sup_catalog_snaps.c, the secrets'
 * sup_catalog_secrets.c. */
#include "sup_catalog.h"

#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sup_catalog_int.h"

static const char schema_v1[] =
	"CREATE TABLE sandboxes ("
	" seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	" id TEXT NOT NULL UNIQUE,"
	" phase INTEGER NOT NULL,"
	" image TEXT NOT NULL,"
	" digest TEXT NOT NULL DEFAULT '',"
	" isolation INTEGER NOT NULL,"
	" container_id TEXT NOT NULL DEFAULT '',"
	" net_slot INTEGER NOT NULL DEFAULT 0,"
	" tenant TEXT NOT NULL DEFAULT '',"
	" allow_root INTEGER NOT NULL DEFAULT 0,"
	" created_at INTEGER NOT NULL DEFAULT 0,"
	" expires_at INTEGER NOT NULL DEFAULT 0,"
	" cpu_milli INTEGER NOT NULL DEFAULT 0,"
	" memory INTEGER NOT NULL DEFAULT 0,"
	" pids INTEGER NOT NULL DEFAULT 0,"
	" disk INTEGER NOT NULL DEFAULT 0);"
	"CREATE TABLE env ("
	" id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
	" pos INTEGER NOT NULL,"
	" key TEXT NOT NULL,"
	" val TEXT NOT NULL,"
	" PRIMARY KEY (id, pos));"
	"PRAGMA user_version = 1;";

/* Step 2: volumes, and their mounts (a sandbox's row going takes its
 * mounts with it; a volume's row goes only by its DELETE). */
static const char schema_v2[] =
	"CREATE TABLE volumes ("
	" tenant TEXT NOT NULL,"
	" name TEXT NOT NULL,"
	" size INTEGER NOT NULL,"
	" created_at INTEGER NOT NULL,"
	" PRIMARY KEY (tenant, name));"
	"CREATE TABLE volume_mounts ("
	" id TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,"
	" pos INTEGER NOT NULL,"
	" tenant TEXT NOT NULL,"
	" name TEXT NOT NULL,"
	" path TEXT NOT NULL,"
	" read_only INTEGER NOT NULL,"
	" PRIMARY KEY (id, pos));"
	"PRAGMA user_version = 2;";

/* Step 3: only its own column and table (other steps add theirs). */
static const char schema_v3[] =
	"ALTER TABLE sandboxes ADD COLUMN paused INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN network TEXT NOT NULL DEFAULT '';"
	"CREATE TABLE pools ("
	" seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	" image TEXT NOT NULL,"
	" isolation INTEGER NOT NULL,"
	" size INTEGER NOT NULL,"
	" UNIQUE (image, isolation));"
	"PRAGMA user_version = 3;";

/* Step 4: the snapshots of the store. */
static const char schema_snapshots[] =
	"CREATE TABLE IF NOT EXISTS snapshots ("
	" seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	" id TEXT NOT NULL UNIQUE,"
	" name TEXT NOT NULL,"
	" tenant TEXT NOT NULL,"
	" source TEXT NOT NULL,"
	" image TEXT NOT NULL,"
	" digest TEXT NOT NULL DEFAULT '',"
	" isolation INTEGER NOT NULL,"
	" size INTEGER NOT NULL,"
	" created_at INTEGER NOT NULL);"
	"PRAGMA user_version = 4;";

/* Step 5: where a snapshot's archive is, and its digest. */
static const char schema_snap_store[] =
	"ALTER TABLE snapshots ADD COLUMN location TEXT NOT NULL DEFAULT '';"
	"ALTER TABLE snapshots ADD COLUMN sha256 TEXT NOT NULL DEFAULT '';"
	"PRAGMA user_version = 5;";

/* Step 6: the OpenSandbox layer's own table (sdkcli's step); step 9
 * moves its rows into kept and drops it. */
static const char schema_osbx[] =
	"CREATE TABLE IF NOT EXISTS osbx_kept ("
	" seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	" id TEXT NOT NULL UNIQUE REFERENCES sandboxes(id) ON DELETE CASCADE,"
	" tenant TEXT NOT NULL,"
	" kept TEXT NOT NULL);"
	"PRAGMA user_version = 6;";

/* Step 8: the volumes a snapshot carries (state2's step; only its table). */
static const char schema_snap_vols[] =
	"CREATE TABLE IF NOT EXISTS snapshot_volumes ("
	" snapshot TEXT NOT NULL REFERENCES snapshots(id) ON DELETE CASCADE,"
	" pos INTEGER NOT NULL,"
	" name TEXT NOT NULL,"
	" mount TEXT NOT NULL,"
	" read_only INTEGER NOT NULL,"
	" vol_size INTEGER NOT NULL,"
	" size INTEGER NOT NULL,"
	" sha256 TEXT NOT NULL DEFAULT '',"
	" PRIMARY KEY (snapshot, pos));"
	"PRAGMA user_version = 8;";

/* Step 9: kept records, the OpenSandbox layer's rows among them. */
static const char schema_kept[] =
	"CREATE TABLE IF NOT EXISTS kept ("
	" seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	" kind TEXT NOT NULL,"
	" key TEXT NOT NULL,"
	" sandbox TEXT REFERENCES sandboxes(id) ON DELETE CASCADE,"
	" tenant TEXT NOT NULL,"
	" value BLOB NOT NULL,"
	" created_at INTEGER NOT NULL,"
	" updated_at INTEGER NOT NULL,"
	" UNIQUE (kind, key));"
	"INSERT INTO kept (kind, key, sandbox, tenant, value, created_at, updated_at)"
	" SELECT 'opensandbox', id, id, tenant, kept, CAST(strftime('%s', 'now') AS INTEGER),"
	" CAST(strftime('%s', 'now') AS INTEGER) FROM osbx_kept ORDER BY seq;"
	"DROP TABLE osbx_kept;"
	"PRAGMA user_version = 9;";

/* Step 10: the tenants' secrets (sealed), and a sandbox's bindings. */
static const char schema_secrets[] =
	"CREATE TABLE secrets ("
	" tenant TEXT NOT NULL,"
	" name TEXT NOT NULL,"
	" sealed BLOB NOT NULL,"
	" size INTEGER NOT NULL,"
	" created_at INTEGER NOT NULL,"
	" updated_at INTEGER NOT NULL,"
	" PRIMARY KEY (tenant, name));"
	"ALTER TABLE sandboxes ADD COLUMN secrets TEXT NOT NULL DEFAULT '';"
	"PRAGMA user_version = 10;";

void sup_catalog_rec_free(sup_catalog_rec *r)
{
	for (size_t i = 0; i < r->env.n; i++) {
		free(r->env.v[i].key);
		free(r->env.v[i].val);
	}
	free(r->env.v);
	r->env.v = NULL;
	r->env.n = 0;
	free(r->network);
	r->network = NULL;
	free(r->secrets);
	r->secrets = NULL;
}

/* The last failure's errno: a full file system (SQLite's SQLITE_FULL, from
 * ENOSPC) is the client's 507 no_space, as for any other write that finds
 * no room; anything else is an I/O error. */
static int db_errno(sup_catalog *c)
{
	return (sqlite3_errcode(c->db) & 0xff) == SQLITE_FULL ? -ENOSPC : -EIO;
}

int sup_catalog_db_err(sup_catalog *c, sbx_err *err, const char *what)
{
	return sbx_err_set(err, db_errno(c), "catalog %s: %s: %s", c->path, what,
			   sqlite3_errmsg(c->db));
}

int sup_catalog_exec(sup_catalog *c, const char *sql, sbx_err *err)
{
	char *msg = NULL;
	if (sqlite3_exec(c->db, sql, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	int r = sbx_err_set(err, db_errno(c), "catalog %s: %s", c->path,
			    msg ? msg : sqlite3_errmsg(c->db));
	sqlite3_free(msg);
	return r;
}

int sup_catalog_prepare(sup_catalog *c, const char *sql, sqlite3_stmt **st, sbx_err *err)
{
	if (sqlite3_prepare_v2(c->db, sql, -1, st, NULL) != SQLITE_OK)
		return sup_catalog_db_err(c, err, "prepare");
	return 0;
}

/* Step a statement that returns no rows, and finalize it. */
int sup_catalog_step_done(sup_catalog *c, sqlite3_stmt *st, const char *what, sbx_err *err)
{
	int rc = sqlite3_step(st);
	int r = rc == SQLITE_DONE ? 0 : sup_catalog_db_err(c, err, what);
	sqlite3_finalize(st);
	return r;
}

/* The file's schema version; a file that is no database is refused here. */
static int schema_of(sup_catalog *c, int *version, sbx_err *err)
{
	sqlite3_stmt *st;
	if (sqlite3_prepare_v2(c->db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK ||
	    sqlite3_step(st) != SQLITE_ROW) {
		sbx_err_set(err, -EPROTO,
			    "catalog %s is not a readable catalog (%s); move it away to start "
			    "without the sandboxes it names",
			    c->path, sqlite3_errmsg(c->db));
		sqlite3_finalize(st);
		return err->code;
	}
	*version = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return 0;
}

int sup_catalog_open(const char *dir, sup_catalog **out, sbx_err *err)
{
	*out = NULL;
	sup_catalog *c = calloc(1, sizeof(*c));
	if (!c)
		return sbx_err_set(err, -ENOMEM, "catalog");
	if (snprintf(c->path, sizeof(c->path), "%s/" SUP_CATALOG_FILE, dir) >= (int)sizeof(c->path)) {
		free(c);
		return sbx_err_set(err, -ENAMETOOLONG, "catalog: state folder path too long");
	}
	int r = 0;
	if (sqlite3_open_v2(c->path, &c->db,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW, NULL) !=
	    SQLITE_OK)
		r = c->db ? sup_catalog_db_err(c, err, "open") : sbx_err_set(err, -ENOMEM, "catalog");
	int version = 0;
	r = r ?: schema_of(c, &version, err);
	if (r == 0 && version > SUP_CATALOG_SCHEMA)
		r = sbx_err_set(err, -EPROTO,
				"catalog %s has schema %d, newer than this supervisor's %d: run the "
				"newer supervisor, or move the file away to start without its sandboxes",
				c->path, version, SUP_CATALOG_SCHEMA);
	/* WAL: a commit appends to the log, readers never block the writer;
	 * NORMAL: the log is synced at checkpoints, not at every commit. A
	 * commit survives the process's death (the kernel holds the pages);
	 * what a power loss could take is only rows of sandboxes the power
	 * loss killed too (DESIGN.md). */
	r = r ?: sup_catalog_exec(c, "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;"
			     "PRAGMA foreign_keys = ON;", err);
	if (r == 0 && version == 0)
		r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err) ?: sup_catalog_exec(c, schema_v1, err)
								 ?: sup_catalog_exec(c, "COMMIT;", err);
	if (r == 0 && version < 2)
		r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err) ?: sup_catalog_exec(c, schema_v2, err)
								 ?: sup_catalog_exec(c, "COMMIT;", err);
	if (r == 0 && version < 3)
		r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err) ?: sup_catalog_exec(c, schema_v3, err)
								 ?: sup_catalog_exec(c, "COMMIT;", err);
	if (r == 0 && version < 4)
		r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err) ?: sup_catalog_exec(c, schema_snapshots, err)
								 ?: sup_catalog_exec(c, "COMMIT;", err);
	if (r == 0 && version < 5)
		r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err) ?: sup_catalog_exec(c, schema_snap_store, err)
								 ?: sup_catalog_exec(c, "COMMIT;", err);
	if (r == 0 && version < 6)
		r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err) ?: sup_catalog_exec(c, schema_osbx, err)
								 ?: sup_catalog_exec(c, "COMMIT;", err);
	if (r == 0 && version < 8)
		r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err) ?: sup_catalog_exec(c, schema_snap_vols, err)
								 ?: sup_catalog_exec(c, "COMMIT;", err);
	if (r == 0 && version < 9)
		r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err) ?: sup_catalog_exec(c, schema_kept, err)
								 ?: sup_catalog_exec(c, "COMMIT;", err);
	if (r == 0 && version < 10)
		r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err) ?: sup_catalog_exec(c, schema_secrets, err)
								 ?: sup_catalog_exec(c, "COMMIT;", err);
	if (r < 0) {
		sqlite3_close(c->db);
		free(c);
		return r;
	}
	*out = c;
	return 0;
}

void sup_catalog_close(sup_catalog *c)
{
	if (!c)
		return;
	sqlite3_close(c->db);
	free(c);
}

int sup_catalog_intent(sup_catalog *c, const char *id, const char *image, const char *digest,
		       sup_isolation isolation, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c,
			"INSERT INTO sandboxes (id, phase, image, digest, isolation) VALUES (?1, ?2, ?3, ?4, ?5)",
			&st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, SUP_CAT_CREATING);
	sqlite3_bind_text(st, 3, image, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, digest ? digest : "", -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 5, (int)isolation);
	return sup_catalog_step_done(c, st, "record a create", err);
}

static void bind_res(sqlite3_stmt *st, int first, const sup_resources *res)
{
	sqlite3_bind_int64(st, first, res->cpu_milli);
	sqlite3_bind_int64(st, first + 1, (sqlite3_int64)res->memory);
	sqlite3_bind_int64(st, first + 2, res->pids);
	sqlite3_bind_int64(st, first + 3, (sqlite3_int64)res->disk);
}

int sup_catalog_made(sup_catalog *c, const char *id, const char *container_id, unsigned net_slot,
		     const sup_resources *res, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c,
			"UPDATE sandboxes SET phase = ?2, container_id = ?3, net_slot = ?4, cpu_milli = ?5,"
			" memory = ?6, pids = ?7, disk = ?8 WHERE id = ?1",
			&st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, SUP_CAT_MADE);
	sqlite3_bind_text(st, 3, container_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, net_slot);
	bind_res(st, 5, res);
	r = sup_catalog_step_done(c, st, "record a made sandbox", err);
	if (r == 0 && sqlite3_changes(c->db) != 1)
		r = sbx_err_set(err, -ENOENT, "catalog %s: no create of %s recorded", c->path, id);
	return r;
}

static int put_running(sup_catalog *c, const sup_catalog_rec *rec, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c,
			"INSERT INTO sandboxes (id, phase, image, digest, isolation, container_id, net_slot,"
			" tenant, allow_root, created_at, expires_at, cpu_milli, memory, pids, disk, paused,"
			" network, secrets)"
			" VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,"
			" ?18)"
			" ON CONFLICT (id) DO UPDATE SET phase = ?2, image = ?3, digest = ?4,"
			" isolation = ?5, container_id = ?6, net_slot = ?7, tenant = ?8, allow_root = ?9,"
			" created_at = ?10, expires_at = ?11, cpu_milli = ?12, memory = ?13, pids = ?14,"
			" disk = ?15, paused = ?16, network = ?17, secrets = ?18",
			&st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, rec->id, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, SUP_CAT_RUNNING);
	sqlite3_bind_text(st, 3, rec->image, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, rec->digest, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 5, (int)rec->isolation);
	sqlite3_bind_text(st, 6, rec->container_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 7, rec->net_slot);
	sqlite3_bind_text(st, 8, rec->tenant, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 9, rec->allow_root);
	sqlite3_bind_int64(st, 10, rec->created_at);
	sqlite3_bind_int64(st, 11, rec->expires_at);
	bind_res(st, 12, &rec->res);
	sqlite3_bind_int(st, 16, rec->paused);
	sqlite3_bind_text(st, 17, rec->network ? rec->network : "", -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 18, rec->secrets ? rec->secrets : "", -1, SQLITE_STATIC);
	r = sup_catalog_step_done(c, st, "record a sandbox", err);
	if (r == 0)
		r = sup_catalog_prepare(c, "DELETE FROM env WHERE id = ?1", &st, err);
	if (r == 0) {
		sqlite3_bind_text(st, 1, rec->id, -1, SQLITE_STATIC);
		r = sup_catalog_step_done(c, st, "record a sandbox's env", err);
	}
	st = NULL;
	if (r == 0)
		r = sup_catalog_prepare(c, "INSERT INTO env (id, pos, key, val) VALUES (?1, ?2, ?3, ?4)", &st, err);
	for (size_t i = 0; r == 0 && i < rec->env.n; i++) {
		sqlite3_bind_text(st, 1, rec->id, -1, SQLITE_STATIC);
		sqlite3_bind_int64(st, 2, (sqlite3_int64)i);
		sqlite3_bind_text(st, 3, rec->env.v[i].key, -1, SQLITE_STATIC);
		sqlite3_bind_text(st, 4, rec->env.v[i].val, -1, SQLITE_STATIC);
		if (sqlite3_step(st) != SQLITE_DONE)
			r = sup_catalog_db_err(c, err, "record a sandbox's env");
		sqlite3_reset(st);
	}
	sqlite3_finalize(st);
	return r;
}

int sup_catalog_running(sup_catalog *c, const sup_catalog_rec *rec, sbx_err *err)
{
	int r = sup_catalog_exec(c, "BEGIN IMMEDIATE;", err);
	if (r < 0)
		return r;
	r = put_running(c, rec, err);
	if (r == 0)
		return sup_catalog_exec(c, "COMMIT;", err);
	sbx_err ignored;
	sup_catalog_exec(c, "ROLLBACK;", &ignored);
	return r;
}

int sup_catalog_remove(sup_catalog *c, const char *id, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c, "DELETE FROM sandboxes WHERE id = ?1", &st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
	return sup_catalog_step_done(c, st, "remove a sandbox", err);
}

void sup_catalog_col_text(sqlite3_stmt *st, int i, char *out, size_t cap)
{
	const unsigned char *t = sqlite3_column_text(st, i);
	snprintf(out, cap, "%s", t ? (const char *)t : "");
}

static int read_env(sup_catalog *c, sqlite3_stmt *est, sup_catalog_rec *rec, sbx_err *err)
{
	sqlite3_reset(est);
	sqlite3_bind_text(est, 1, rec->id, -1, SQLITE_STATIC);
	int rc;
	while ((rc = sqlite3_step(est)) == SQLITE_ROW) {
		sbx_proto_kv *v = realloc(rec->env.v, (rec->env.n + 1) * sizeof(*v));
		if (!v)
			return sbx_err_set(err, -ENOMEM, "catalog: env");
		rec->env.v = v;
		const unsigned char *k = sqlite3_column_text(est, 0), *val = sqlite3_column_text(est, 1);
		v[rec->env.n].key = strdup(k ? (const char *)k : "");
		v[rec->env.n].val = strdup(val ? (const char *)val : "");
		rec->env.n++;
		if (!v[rec->env.n - 1].key || !v[rec->env.n - 1].val)
			return sbx_err_set(err, -ENOMEM, "catalog: env");
	}
	return rc == SQLITE_DONE ? 0 : sup_catalog_db_err(c, err, "read env");
}

int sup_catalog_each(sup_catalog *c,
		     int (*fn)(const sup_catalog_rec *r, void *ud, sbx_err *err), void *ud,
		     sbx_err *err)
{
	sqlite3_stmt *st = NULL, *est = NULL;
	SBX_AUTO_FREE sup_catalog_rec *rec = calloc(1, sizeof(*rec));
	if (!rec)
		return sbx_err_set(err, -ENOMEM, "catalog");
	int r = sup_catalog_prepare(c,
			"SELECT id, phase, image, digest, isolation, container_id, net_slot, tenant,"
			" allow_root, created_at, expires_at, cpu_milli, memory, pids, disk, paused, network,"
			" secrets FROM sandboxes ORDER BY seq",
			&st, err);
	r = r ?: sup_catalog_prepare(c, "SELECT key, val FROM env WHERE id = ?1 ORDER BY pos", &est, err);
	int rc = SQLITE_DONE;
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		memset(rec, 0, sizeof(*rec));
		sup_catalog_col_text(st, 0, rec->id, sizeof(rec->id));
		rec->phase = (sup_catalog_phase)sqlite3_column_int(st, 1);
		sup_catalog_col_text(st, 2, rec->image, sizeof(rec->image));
		sup_catalog_col_text(st, 3, rec->digest, sizeof(rec->digest));
		int iso = sqlite3_column_int(st, 4);
		rec->isolation = iso >= 0 && iso < SUP_ISO_N ? (sup_isolation)iso : SUP_ISO_RUNC;
		sup_catalog_col_text(st, 5, rec->container_id, sizeof(rec->container_id));
		rec->net_slot = (unsigned)sqlite3_column_int64(st, 6);
		sup_catalog_col_text(st, 7, rec->tenant, sizeof(rec->tenant));
		rec->allow_root = sqlite3_column_int(st, 8) != 0;
		rec->created_at = sqlite3_column_int64(st, 9);
		rec->expires_at = sqlite3_column_int64(st, 10);
		rec->res.cpu_milli = (uint32_t)sqlite3_column_int64(st, 11);
		rec->res.memory = (uint64_t)sqlite3_column_int64(st, 12);
		rec->res.pids = (uint32_t)sqlite3_column_int64(st, 13);
		rec->res.disk = (uint64_t)sqlite3_column_int64(st, 14);
		rec->paused = sqlite3_column_int(st, 15) != 0;
		const unsigned char *net = sqlite3_column_text(st, 16);
		if (net && net[0] && !(rec->network = strdup((const char *)net)))
			r = sbx_err_set(err, -ENOMEM, "catalog: network");
		const unsigned char *sec = sqlite3_column_text(st, 17);
		if (sec && sec[0] && !(rec->secrets = strdup((const char *)sec)))
			r = sbx_err_set(err, -ENOMEM, "catalog: secrets");
		r = r ?: read_env(c, est, rec, err);
		if (r == 0)
			r = fn(rec, ud, err);
		sup_catalog_rec_free(rec);
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = sup_catalog_db_err(c, err, "read");
	sqlite3_finalize(st);
	sqlite3_finalize(est);
	return r;
}

int sup_catalog_pool_size(sup_catalog *c, const char *image, sup_isolation isolation,
			  unsigned size, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c,
			"INSERT INTO pools (image, isolation, size) VALUES (?1, ?2, ?3)"
			" ON CONFLICT (image, isolation) DO UPDATE SET size = ?3",
			&st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, image, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, (int)isolation);
	sqlite3_bind_int64(st, 3, size);
	return sup_catalog_step_done(c, st, "record a pool's size", err);
}

int sup_catalog_pool_forget(sup_catalog *c, const char *image, sup_isolation isolation,
			    sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c, "DELETE FROM pools WHERE image = ?1 AND isolation = ?2", &st, err);
	if (r < 0)
		return r;
	sqlite3_bind_text(st, 1, image, -1, SQLITE_STATIC);
	sqlite3_bind_int(st, 2, (int)isolation);
	return sup_catalog_step_done(c, st, "forget a pool's size", err);
}

int sup_catalog_each_pool(sup_catalog *c,
			  int (*fn)(const char *image, sup_isolation isolation, unsigned size,
				    void *ud, sbx_err *err),
			  void *ud, sbx_err *err)
{
	sqlite3_stmt *st;
	int r = sup_catalog_prepare(c, "SELECT image, isolation, size FROM pools ORDER BY seq", &st, err);
	if (r < 0)
		return r;
	int rc = SQLITE_DONE;
	char image[4096];
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		sup_catalog_col_text(st, 0, image, sizeof(image));
		int iso = sqlite3_column_int(st, 1);
		sqlite3_int64 size = sqlite3_column_int64(st, 2);
		if (iso < 0 || iso >= SUP_ISO_N || size < 0 || size > UINT_MAX)
			continue; /* not a row this build wrote */
		r = fn(image, (sup_isolation)iso, (unsigned)size, ud, err);
	}
	if (r == 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = sup_catalog_db_err(c, err, "read pools");
	sqlite3_finalize(st);
	return r;
}
