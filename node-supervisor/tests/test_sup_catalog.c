/* The catalog (sup_catalog) on a real SQLite file in a fresh folder: rows
 * written, read back after a close and reopen (what a restarted supervisor
 * sees), their order and env; the schema version set, a newer one and a
 * file that is no database refused with a clear message and left as they
 * were; the file in WAL mode; a write that finds its file system full is
 * -ENOSPC (the client's 507), not an I/O error. sqlite3 itself reads the
 * file back as an independent reader. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_catalog.h"

/* Step 10 undone: what a file of schema 9 or older lacks. */
#define NO_SECRETS "DROP TABLE secrets; ALTER TABLE sandboxes DROP COLUMN secrets;"

typedef struct fixture {
	char dir[64];
	char file[128];
} fixture;

static int setup(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/sbx-catalog-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->file, sizeof(f->file), "%s/" SUP_CATALOG_FILE, f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	fixture *f = *state;
	static const char *const tails[] = { "", "-wal", "-shm" };
	for (size_t i = 0; i < 3; i++) {
		char p[160];
		snprintf(p, sizeof(p), "%s%s", f->file, tails[i]);
		unlink(p);
	}
	assert_int_equal(rmdir(f->dir), 0);
	free(f);
	return 0;
}

typedef struct seen {
	sup_catalog_rec v[8];
	size_t n;
} seen;

static int collect(const sup_catalog_rec *r, void *ud, sbx_err *err)
{
	seen *s = ud;
	(void)err;
	assert_true(s->n < 8);
	sup_catalog_rec *d = &s->v[s->n++];
	*d = *r;
	d->network = r->network ? strdup(r->network) : NULL;
	d->secrets = r->secrets ? strdup(r->secrets) : NULL;
	d->env.v = calloc(r->env.n + 1, sizeof(*d->env.v));
	assert_non_null(d->env.v);
	for (size_t i = 0; i < r->env.n; i++) {
		d->env.v[i].key = strdup(r->env.v[i].key);
		d->env.v[i].val = strdup(r->env.v[i].val);
	}
	return 0;
}

static void seen_free(seen *s)
{
	for (size_t i = 0; i < s->n; i++)
		sup_catalog_rec_free(&s->v[i]);
	s->n = 0;
}

static void read_all(sup_catalog *c, seen *s)
{
	sbx_err err;
	assert_int_equal(sup_catalog_each(c, collect, s, &err), 0);
}

static void test_write_reopen(void **state)
{
	fixture *f = *state;
	sup_catalog *c;
	sbx_err err;
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	const sup_resources def = { 1000, 512ull << 20, 128, 1ull << 30 };
	assert_int_equal(sup_catalog_intent(c, "sb-a", "host", "", SUP_ISO_RUNC, &err), 0);
	assert_int_equal(sup_catalog_intent(c, "sb-b", "alpine:3", "sha256:beef", SUP_ISO_GVISOR, &err), 0);
	assert_int_equal(sup_catalog_intent(c, "sb-c", "host", "", SUP_ISO_RUNC, &err), 0);
	/* an id is recorded once */
	assert_int_not_equal(sup_catalog_intent(c, "sb-a", "host", "", SUP_ISO_RUNC, &err), 0);
	assert_int_equal(sup_catalog_made(c, "sb-a", "sbx-1234abcd-sb-a", 7, &def, &err), 0);
	assert_int_equal(sup_catalog_made(c, "sb-nope", "x", 0, &def, &err), -ENOENT);
	sbx_proto_kv kv[] = { { "A", "1" }, { "PATH", "/bin:/usr/bin" }, { "EMPTY", "" } };
	sup_catalog_rec run = { .isolation = SUP_ISO_RUNC, .net_slot = 7, .allow_root = true,
				.created_at = 1700000000, .expires_at = 1700000300,
				.res = { 500, 256ull << 20, 64, 100ull << 20 },
				.env = { kv, 3 } };
	snprintf(run.id, sizeof(run.id), "sb-a");
	snprintf(run.image, sizeof(run.image), "host");
	snprintf(run.container_id, sizeof(run.container_id), "sbx-1234abcd-sb-a");
	snprintf(run.tenant, sizeof(run.tenant), "team-a");
	assert_int_equal(sup_catalog_running(c, &run, &err), 0);
	/* a second write replaces the env, not appends to it */
	run.env.n = 2;
	run.expires_at = 1700000600;
	assert_int_equal(sup_catalog_running(c, &run, &err), 0);
	assert_int_equal(sup_catalog_remove(c, "sb-c", &err), 0);
	assert_int_equal(sup_catalog_remove(c, "sb-c", &err), 0); /* gone already: fine */
	sup_catalog_close(c);

	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	seen s = { 0 };
	read_all(c, &s);
	assert_int_equal(s.n, 2);
	sup_catalog_rec *a = &s.v[0], *b = &s.v[1];
	assert_string_equal(a->id, "sb-a");
	assert_int_equal(a->phase, SUP_CAT_RUNNING);
	assert_string_equal(a->tenant, "team-a");
	assert_true(a->allow_root);
	assert_int_equal(a->net_slot, 7);
	assert_string_equal(a->container_id, "sbx-1234abcd-sb-a");
	assert_int_equal(a->created_at, 1700000000);
	assert_int_equal(a->expires_at, 1700000600);
	assert_int_equal(a->res.cpu_milli, 500);
	assert_int_equal(a->res.memory, 256ull << 20);
	assert_int_equal(a->res.pids, 64);
	assert_int_equal(a->res.disk, 100ull << 20);
	assert_int_equal(a->env.n, 2);
	assert_string_equal(a->env.v[0].key, "A");
	assert_string_equal(a->env.v[1].val, "/bin:/usr/bin");
	assert_string_equal(b->id, "sb-b");
	assert_int_equal(b->phase, SUP_CAT_CREATING);
	assert_string_equal(b->image, "alpine:3");
	assert_string_equal(b->digest, "sha256:beef");
	assert_int_equal(b->isolation, SUP_ISO_GVISOR);
	assert_int_equal(b->env.n, 0);
	seen_free(&s);
	/* removing a sandbox takes its env with it */
	assert_int_equal(sup_catalog_remove(c, "sb-a", &err), 0);
	sup_catalog_close(c);

	/* an independent reader: sqlite3 itself, on the same file */
	sqlite3 *db;
	assert_int_equal(sqlite3_open_v2(f->file, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT (SELECT count(*) FROM env),"
					    " (SELECT count(*) FROM sandboxes),"
					    " (SELECT user_version FROM pragma_user_version)",
					    -1, &st, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 0);
	assert_int_equal(sqlite3_column_int(st, 1), 1);
	assert_int_equal(sqlite3_column_int(st, 2), SUP_CATALOG_SCHEMA);
	sqlite3_finalize(st);
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	sqlite3_close(db);
}

/* A catalog holding one made row, sb-a, then sql run on its file by
 * sqlite3 itself (what another version of the supervisor left). */
/* Step 6's table, as schema-6 to -8 files have it. */
#define OSBX_KEPT_V6                                                                        \
	"CREATE TABLE osbx_kept (seq INTEGER PRIMARY KEY AUTOINCREMENT,"                    \
	" id TEXT NOT NULL UNIQUE REFERENCES sandboxes(id) ON DELETE CASCADE,"              \
	" tenant TEXT NOT NULL, kept TEXT NOT NULL);"

static void one_row_then(const fixture *f, const char *sql)
{
	sup_catalog *c;
	sbx_err err;
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	assert_int_equal(sup_catalog_intent(c, "sb-a", "host", "", SUP_ISO_RUNC, &err), 0);
	sup_catalog_close(c);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(f->file, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

static void test_newer_schema_refused(void **state)
{
	fixture *f = *state;
	sup_catalog *c;
	sbx_err err;
	char sql[64], want[80];
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", SUP_CATALOG_SCHEMA + 1);
	snprintf(want, sizeof(want), "schema %d, newer than this supervisor's %d", SUP_CATALOG_SCHEMA + 1,
		 SUP_CATALOG_SCHEMA);
	one_row_then(f, sql);
	sqlite3 *db;
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), -EPROTO);
	assert_null(c);
	assert_non_null(strstr(err.msg, want));
	/* left as it was: the newer supervisor still finds its row */
	assert_int_equal(sqlite3_open(f->file, &db), SQLITE_OK);
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT id FROM sandboxes", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), "sb-a");
	sqlite3_finalize(st);
	sqlite3_close(db);
}

typedef struct vols_seen {
	sup_catalog_vol v[4];
	size_t n;
	char mid[4][48];
	sup_vol_mount m[4];
	size_t nm;
} vols_seen;

static int collect_vol(const sup_catalog_vol *v, void *ud, sbx_err *err)
{
	vols_seen *s = ud;
	(void)err;
	assert_true(s->n < 4);
	s->v[s->n++] = *v;
	return 0;
}

static int collect_mount(const char *id, const char *tenant, const sup_vol_mount *m, void *ud,
			 sbx_err *err)
{
	vols_seen *s = ud;
	(void)err;
	assert_string_equal(tenant, "alice");
	assert_true(s->nm < 4);
	snprintf(s->mid[s->nm], sizeof(s->mid[0]), "%s", id);
	s->m[s->nm++] = *m;
	return 0;
}

/* Step 2: a catalog of schema 1 (its volume tables dropped, its version
 * set back) is upgraded keeping its sandboxes; volumes and mounts come
 * back after a reopen; a sandbox's mounts go with its row, a volume's row
 * only by its own remove; a second volume of a name is refused. */
static void test_volumes(void **state)
{
	fixture *f = *state;
	sup_catalog *c;
	sbx_err err;
	/* a schema-1 file has none of the later steps either */
	one_row_then(f, NO_SECRETS "DROP TABLE volume_mounts; DROP TABLE volumes; DROP TABLE snapshots; DROP TABLE kept;"
			"ALTER TABLE sandboxes DROP COLUMN paused; ALTER TABLE sandboxes DROP COLUMN network;"
			"DROP TABLE pools; PRAGMA user_version = 1");

	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	sup_catalog_vol v = { .tenant = "alice", .name = "proj", .size = 64u << 20, .created_at = 1 };
	assert_int_equal(sup_catalog_vol_put(c, &v, &err), 0);
	assert_int_equal(sup_catalog_vol_put(c, &v, &err), -EIO);
	v.created_at = 2;
	snprintf(v.name, sizeof(v.name), "ref");
	assert_int_equal(sup_catalog_vol_put(c, &v, &err), 0);
	sup_vol_mount m[2] = { { .name = "proj", .path = "/workspace/proj" },
			       { .name = "ref", .path = "/ref", .read_only = true } };
	assert_int_equal(sup_catalog_vol_mounts_put(c, "sb-a", "alice", m, 2, &err), 0);
	/* a sandbox the catalog does not hold cannot mount anything */
	assert_int_equal(sup_catalog_vol_mounts_put(c, "sb-none", "alice", m, 1, &err), -EIO);
	sup_catalog_close(c);

	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	vols_seen s = { 0 };
	assert_int_equal(sup_catalog_vol_each(c, collect_vol, &s, &err), 0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.v[0].name, "proj");
	assert_string_equal(s.v[1].name, "ref");
	assert_int_equal(s.v[0].size, 64u << 20);
	assert_int_equal(sup_catalog_vol_mounts_each(c, collect_mount, &s, &err), 0);
	assert_int_equal(s.nm, 2);
	assert_string_equal(s.mid[0], "sb-a");
	assert_string_equal(s.m[0].path, "/workspace/proj");
	assert_false(s.m[0].read_only);
	assert_true(s.m[1].read_only);
	/* the sandbox goes: its mounts with it, the volumes stay */
	assert_int_equal(sup_catalog_remove(c, "sb-a", &err), 0);
	memset(&s, 0, sizeof(s));
	assert_int_equal(sup_catalog_vol_mounts_each(c, collect_mount, &s, &err), 0);
	assert_int_equal(s.nm, 0);
	assert_int_equal(sup_catalog_vol_remove(c, "alice", "proj", &err), 0);
	assert_int_equal(sup_catalog_vol_each(c, collect_vol, &s, &err), 0);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.v[0].name, "ref");
	sup_catalog_close(c);
}

static void count_snap(const sup_catalog_snap *s, void *ud)
{
	(void)s;
	(*(int *)ud)++;
}

/* A schema-2 file (sandboxes, volumes) gains the snapshots table (and step
 * 5's location and digest); rows of both are kept, read back and removed. */
static void test_snapshots_step(void **state)
{
	fixture *f = *state;
	sup_catalog *c;
	sbx_err err;
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	assert_int_equal(sup_catalog_intent(c, "sb-a", "host", "", SUP_ISO_RUNC, &err), 0);
	sup_catalog_close(c);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(f->file, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, NO_SECRETS "DROP TABLE kept; DROP TABLE snapshots; PRAGMA user_version = 3", NULL, NULL,
				      NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	sup_catalog_snap s = {.isolation = SUP_ISO_RUNC, .size = 1234, .created_at = 99};
	snprintf(s.id, sizeof(s.id), "sn-1");
	snprintf(s.name, sizeof(s.name), "first");
	snprintf(s.tenant, sizeof(s.tenant), "t1");
	snprintf(s.source, sizeof(s.source), "sb-a");
	snprintf(s.image, sizeof(s.image), "host");
	assert_int_equal(sup_catalog_snap_put(c, &s, &err), 0);
	snprintf(s.id, sizeof(s.id), "sn-2");
	/* step 5: where the archive is and its digest */
	snprintf(s.location, sizeof(s.location), "s3://snaps/p/");
	snprintf(s.sha256, sizeof(s.sha256), "%064d", 7);
	snprintf(s.tenant, sizeof(s.tenant), "t2");
	assert_int_equal(sup_catalog_snap_put(c, &s, &err), 0);
	assert_int_equal(sup_catalog_snap_put(c, &s, &err), -EIO); /* ids are unique */
	sup_catalog_close(c);
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	sup_catalog_snap g;
	assert_int_equal(sup_catalog_snap_get(c, "sn-1", &g, &err), 0);
	assert_string_equal(g.name, "first");
	assert_string_equal(g.tenant, "t1");
	assert_int_equal(g.size, 1234);
	assert_int_equal(g.created_at, 99);
	assert_string_equal(g.location, "");
	assert_string_equal(g.sha256, "");
	assert_int_equal(sup_catalog_snap_get(c, "sn-2", &g, &err), 0);
	assert_string_equal(g.location, "s3://snaps/p/");
	assert_int_equal(strlen(g.sha256), 64);
	int n = 0;
	assert_int_equal(sup_catalog_snap_each(c, "t1", count_snap, &n, &err), 0);
	assert_int_equal(n, 1);
	n = 0;
	assert_int_equal(sup_catalog_snap_each(c, NULL, count_snap, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(sup_catalog_snap_remove(c, "sn-1", &err), 0);
	assert_int_equal(sup_catalog_snap_get(c, "sn-1", &g, &err), -ENOENT);
	sup_catalog_close(c);
}

static void vols_of_snap(const sup_catalog_snap *s, void *ud)
{
	char *out = ud;
	size_t n = strlen(out);
	snprintf(out + n, 256 - n, "%s:%u;", s->id, s->nvols);
}

/* Step 10: a catalog of schema 9 (no secrets table, no sandboxes.secrets)
 * upgraded with its rows kept; a sandbox's secrets' names and the sealed
 * rows written, read back after a reopen, listed and removed. */
static int secret_names(const sup_catalog_secret *s, void *ud, sbx_err *err)
{
	(void)err;
	assert_null(s->sealed);
	size_t at = strlen(ud);
	snprintf((char *)ud + at, 256 - at, "%s/%s:%llu;", s->tenant, s->name,
		 (unsigned long long)s->size);
	return 0;
}

static void test_secrets_step(void **state)
{
	fixture *f = *state;
	sup_catalog *c;
	sbx_err err;
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	assert_int_equal(sup_catalog_intent(c, "sb-old", "host", "", SUP_ISO_RUNC, &err), 0);
	sup_catalog_close(c);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(f->file, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, NO_SECRETS "PRAGMA user_version = 9", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	seen s = { .n = 0 };
	read_all(c, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.v[0].id, "sb-old");
	assert_null(s.v[0].secrets);
	seen_free(&s);
	sup_catalog_rec run = { .isolation = SUP_ISO_RUNC, .created_at = 1, .expires_at = 2 };
	snprintf(run.id, sizeof(run.id), "sb-old");
	snprintf(run.image, sizeof(run.image), "host");
	snprintf(run.tenant, sizeof(run.tenant), "t1");
	run.secrets = "openai=OPENAI_API_KEY\n";
	assert_int_equal(sup_catalog_running(c, &run, &err), 0);
	uint8_t sealed[] = { 1, 2, 3, 0, 5 };
	sup_catalog_secret sec = { .sealed = sealed, .sealed_len = sizeof(sealed), .size = 2,
				   .updated_at = 100 };
	snprintf(sec.tenant, sizeof(sec.tenant), "t1");
	snprintf(sec.name, sizeof(sec.name), "openai");
	bool created;
	assert_int_equal(sup_catalog_secret_put(c, &sec, &created, &err), 0);
	assert_true(created);
	sec.updated_at = 200;
	sec.size = 3;
	assert_int_equal(sup_catalog_secret_put(c, &sec, &created, &err), 0);
	assert_false(created);
	snprintf(sec.tenant, sizeof(sec.tenant), "t0");
	assert_int_equal(sup_catalog_secret_put(c, &sec, &created, &err), 0);
	sup_catalog_close(c);
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	read_all(c, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.v[0].secrets, "openai=OPENAI_API_KEY\n");
	seen_free(&s);
	sup_catalog_secret got;
	assert_int_equal(sup_catalog_secret_get(c, "t1", "openai", &got, &err), 0);
	assert_int_equal(got.sealed_len, sizeof(sealed));
	assert_memory_equal(got.sealed, sealed, sizeof(sealed));
	assert_int_equal(got.size, 3);
	assert_int_equal(got.created_at, 100);
	assert_int_equal(got.updated_at, 200);
	free(got.sealed);
	assert_int_equal(sup_catalog_secret_get(c, "t2", "openai", &got, &err), -ENOENT);
	char names[256] = "";
	assert_int_equal(sup_catalog_secret_each(c, NULL, secret_names, names, &err), 0);
	assert_string_equal(names, "t0/openai:3;t1/openai:3;");
	names[0] = 0;
	assert_int_equal(sup_catalog_secret_each(c, "t1", secret_names, names, &err), 0);
	assert_string_equal(names, "t1/openai:3;");
	assert_int_equal(sup_catalog_secret_remove(c, "t1", "openai", &err), 0);
	assert_int_equal(sup_catalog_secret_remove(c, "t1", "openai", &err), -ENOENT);
	sup_catalog_close(c);
}

/* Step 8: a schema-6 file gains snapshot_volumes; a snapshot's volumes
 * are written with its row, read back in order, listed, and go with it. */
static void test_snapshot_volumes_step(void **state)
{
	fixture *f = *state;
	sup_catalog *c;
	sbx_err err;
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	sup_catalog_close(c);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(f->file, &db), SQLITE_OK);
	/* as a schema-6 file is: step 6's table, none of 8's and 9's */
	assert_int_equal(sqlite3_exec(db, NO_SECRETS "DROP TABLE snapshot_volumes; DROP TABLE kept;" OSBX_KEPT_V6
				      "PRAGMA user_version = 6", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	static sup_catalog_snap s, g;
	memset(&s, 0, sizeof(s));
	snprintf(s.id, sizeof(s.id), "sn-v");
	snprintf(s.tenant, sizeof(s.tenant), "t1");
	snprintf(s.image, sizeof(s.image), "host");
	s.nvols = 2;
	snprintf(s.vols[0].m.name, sizeof(s.vols[0].m.name), "proj");
	snprintf(s.vols[0].m.path, sizeof(s.vols[0].m.path), "/workspace/proj");
	s.vols[0].vol_size = 64u << 20;
	s.vols[0].size = 1000;
	snprintf(s.vols[1].m.name, sizeof(s.vols[1].m.name), "ref");
	snprintf(s.vols[1].m.path, sizeof(s.vols[1].m.path), "/data/ref");
	s.vols[1].m.read_only = true;
	s.vols[1].vol_size = 32u << 20;
	snprintf(s.vols[1].sha256, sizeof(s.vols[1].sha256), "%064d", 5);
	assert_int_equal(sup_catalog_snap_put(c, &s, &err), 0);
	/* a second row of the id fails whole: no volume rows of it added */
	assert_int_equal(sup_catalog_snap_put(c, &s, &err), -EIO);
	s.nvols = 0;
	snprintf(s.id, sizeof(s.id), "sn-w");
	assert_int_equal(sup_catalog_snap_put(c, &s, &err), 0);
	sup_catalog_close(c);
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	assert_int_equal(sup_catalog_snap_get(c, "sn-v", &g, &err), 0);
	assert_int_equal(g.nvols, 2);
	assert_string_equal(g.vols[0].m.name, "proj");
	assert_string_equal(g.vols[0].m.path, "/workspace/proj");
	assert_false(g.vols[0].m.read_only);
	assert_int_equal(g.vols[0].vol_size, 64u << 20);
	assert_int_equal(g.vols[0].size, 1000);
	assert_string_equal(g.vols[1].m.name, "ref");
	assert_true(g.vols[1].m.read_only);
	assert_int_equal(strlen(g.vols[1].sha256), 64);
	char got[256] = "";
	assert_int_equal(sup_catalog_snap_each(c, NULL, vols_of_snap, got, &err), 0);
	assert_string_equal(got, "sn-v:2;sn-w:0;");
	assert_int_equal(sup_catalog_snap_remove(c, "sn-v", &err), 0);
	sup_catalog_close(c);
	assert_int_equal(sqlite3_open(f->file, &db), SQLITE_OK);
	sqlite3_stmt *st;
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM snapshot_volumes", -1, &st, NULL),
			 SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
}

static int collect_pool(const char *image, sup_isolation isolation, unsigned size, void *ud,
			sbx_err *err)
{
	char *out = ud;
	(void)err;
	size_t n = strlen(out);
	snprintf(out + n, 256 - n, "%s/%d=%u;", image, (int)isolation, size);
	return 0;
}

/* Step 3: a paused sandbox, its policy and pool sizes kept; a schema-1 file (no such
 * column nor table) upgraded with its rows. */
typedef struct kept_rows {
	unsigned n;
	char last[256];
	int64_t created_at, updated_at;
	char value[64];
	size_t len;
} kept_rows;

static int count_kept(const sup_catalog_kept *k, void *ud, sbx_err *err)
{
	kept_rows *r = ud;
	(void)err;
	r->n++;
	snprintf(r->last, sizeof(r->last), "%s %s %s %s %.*s", k->kind, k->key,
		 k->sandbox ? k->sandbox : "-", k->tenant, (int)k->len, (const char *)k->value);
	r->created_at = k->created_at;
	r->updated_at = k->updated_at;
	r->len = k->len < sizeof(r->value) ? k->len : sizeof(r->value);
	memcpy(r->value, k->value, r->len);
	return 0;
}

/* Step 9: a schema-8 file's OpenSandbox rows (osbx_kept) become kept
 * records of kind "opensandbox", in their order, that table gone; a
 * record is replaced in place (its created_at kept), read back after a
 * reopen, goes with its sandbox's row; one naming no sandbox stays. */
static void test_kept_step(void **state)
{
	fixture *f = *state;
	sup_catalog *c;
	sbx_err err;
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	assert_int_equal(sup_catalog_intent(c, "sb-a", "host", "", SUP_ISO_RUNC, &err), 0);
	assert_int_equal(sup_catalog_intent(c, "sb-b", "host", "", SUP_ISO_RUNC, &err), 0);
	sup_catalog_close(c);
	sqlite3 *db;
	assert_int_equal(sqlite3_open(f->file, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, NO_SECRETS "DROP TABLE kept;" OSBX_KEPT_V6
					  "INSERT INTO osbx_kept (id, tenant, kept) VALUES"
					  " ('sb-b', 't2', '{}'), ('sb-a', 't1', '{\"metadata\":{}}');"
					  "PRAGMA user_version = 8", NULL, NULL, NULL),
			 SQLITE_OK);
	sqlite3_close(db);

	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	kept_rows r = { 0 };
	assert_int_equal(sup_catalog_kept_each(c, "opensandbox", count_kept, &r, &err), 0);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.last, "opensandbox sb-a sb-a t1 {\"metadata\":{}}"); /* their order */
	assert_true(r.created_at > 0 && r.updated_at == r.created_at);
	int64_t made = r.created_at;
	sup_catalog_kept k = { .kind = "opensandbox", .key = "sb-a", .sandbox = "sb-a", .tenant = "t1",
			       .value = "{\"metadata\":{\"k\":\"v\"}}" };
	k.len = strlen(k.value);
	assert_int_equal(sup_catalog_kept_put(c, &k, &err), 0);
	/* a sandbox the catalog does not have: refused */
	k.key = k.sandbox = "sb-none";
	assert_int_equal(sup_catalog_kept_put(c, &k, &err), -EIO);
	/* another kind, naming no sandbox, a blob with a NUL in it */
	sup_catalog_kept other = { .kind = "other", .key = "x", .tenant = "t3", .value = "a\0b", .len = 3 };
	assert_int_equal(sup_catalog_kept_put(c, &other, &err), 0);
	sup_catalog_close(c);

	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	assert_int_equal(sqlite3_open(f->file, &db), SQLITE_OK);
	sqlite3_stmt *st;
	assert_int_not_equal(sqlite3_prepare_v2(db, "SELECT 1 FROM osbx_kept", -1, &st, NULL), SQLITE_OK);
	sqlite3_close(db);
	r = (kept_rows){ 0 };
	assert_int_equal(sup_catalog_kept_each(c, "opensandbox", count_kept, &r, &err), 0);
	assert_int_equal(r.n, 2);
	assert_string_equal(r.last, "opensandbox sb-a sb-a t1 {\"metadata\":{\"k\":\"v\"}}");
	assert_int_equal(r.created_at, made);
	assert_true(r.updated_at >= made);
	assert_int_equal(sup_catalog_remove(c, "sb-b", &err), 0);
	assert_int_equal(sup_catalog_remove(c, "sb-a", &err), 0);
	r = (kept_rows){ 0 };
	assert_int_equal(sup_catalog_kept_each(c, "opensandbox", count_kept, &r, &err), 0);
	assert_int_equal(r.n, 0);
	r = (kept_rows){ 0 };
	assert_int_equal(sup_catalog_kept_each(c, "other", count_kept, &r, &err), 0);
	assert_int_equal(r.n, 1);
	assert_int_equal(r.len, 3); /* the blob's bytes, its NUL among them */
	assert_memory_equal(r.value, "a\0b", 3);
	assert_int_equal(sup_catalog_kept_remove(c, "other", "x", &err), 0);
	assert_int_equal(sup_catalog_kept_remove(c, "other", "none", &err), 0);
	r = (kept_rows){ 0 };
	assert_int_equal(sup_catalog_kept_each(c, "other", count_kept, &r, &err), 0);
	assert_int_equal(r.n, 0);
	sup_catalog_close(c);
}

static void test_paused_and_pool_sizes(void **state)
{
	fixture *f = *state;
	sup_catalog *c;
	sbx_err err;
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	sup_catalog_rec *r = calloc(1, sizeof(*r));
	assert_non_null(r);
	snprintf(r->id, sizeof(r->id), "sb-p");
	snprintf(r->image, sizeof(r->image), "host");
	snprintf(r->tenant, sizeof(r->tenant), "alice");
	r->paused = true;
	r->network = strdup("{\"default_action\":\"deny\",\"egress\":[]}");
	assert_int_equal(sup_catalog_running(c, r, &err), 0);
	assert_int_equal(sup_catalog_pool_size(c, "host", SUP_ISO_RUNC, 3, &err), 0);
	assert_int_equal(sup_catalog_pool_size(c, "alpine:3", SUP_ISO_GVISOR, 1, &err), 0);
	assert_int_equal(sup_catalog_pool_size(c, "host", SUP_ISO_RUNC, 0, &err), 0); /* replaced */
	sup_catalog_close(c);
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	seen s = { 0 };
	read_all(c, &s);
	assert_int_equal(s.n, 1);
	assert_true(s.v[0].paused);
	assert_string_equal(s.v[0].network, "{\"default_action\":\"deny\",\"egress\":[]}");
	seen_free(&s);
	char pools[256] = "";
	assert_int_equal(sup_catalog_each_pool(c, collect_pool, pools, &err), 0);
	assert_string_equal(pools, "host/0=0;alpine:3/1=1;");
	assert_int_equal(sup_catalog_pool_forget(c, "alpine:3", SUP_ISO_GVISOR, &err), 0);
	pools[0] = '\0';
	assert_int_equal(sup_catalog_each_pool(c, collect_pool, pools, &err), 0);
	assert_string_equal(pools, "host/0=0;");
	r->paused = false;
	free(r->network);
	r->network = NULL;
	assert_int_equal(sup_catalog_running(c, r, &err), 0);
	read_all(c, &s);
	assert_false(s.v[0].paused);
	assert_null(s.v[0].network);
	seen_free(&s);
	sup_catalog_close(c);

	/* back to schema 1 by hand, a paused row in it: upgraded, row kept */
	sqlite3 *db;
	assert_int_equal(sqlite3_open(f->file, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, NO_SECRETS "ALTER TABLE sandboxes DROP COLUMN paused;"
					  "ALTER TABLE sandboxes DROP COLUMN network; DROP TABLE pools;"
					  "DROP TABLE volume_mounts; DROP TABLE volumes; DROP TABLE snapshots; DROP TABLE kept;"
					  "PRAGMA user_version = 1;", NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), 0);
	read_all(c, &s);
	assert_int_equal(s.n, 1);
	assert_string_equal(s.v[0].tenant, "alice");
	assert_false(s.v[0].paused);
	seen_free(&s);
	pools[0] = '\0';
	assert_int_equal(sup_catalog_each_pool(c, collect_pool, pools, &err), 0);
	assert_string_equal(pools, "");
	sup_catalog_close(c);
	free(r);
}

static void test_not_a_database_refused(void **state)
{
	fixture *f = *state;
	static const char junk[] = "this is not a database, it is a file someone wrote here by hand\n"
				   "with enough bytes to pass a header's length..............................";
	int fd = open(f->file, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
	close(fd);
	sup_catalog *c;
	sbx_err err;
	assert_int_equal(sup_catalog_open(f->dir, &c, &err), -EPROTO);
	assert_null(c);
	assert_non_null(strstr(err.msg, "is not a readable catalog"));
	assert_non_null(strstr(err.msg, "move it away"));
	struct stat st;
	assert_int_equal(stat(f->file, &st), 0);
	assert_int_equal(st.st_size, (off_t)sizeof(junk));
}

static void test_symlink_refused(void **state)
{
	fixture *f = *state;
	char target[160];
	snprintf(target, sizeof(target), "%s/elsewhere", f->dir);
	assert_int_equal(symlink(target, f->file), 0);
	sup_catalog *c;
	sbx_err err;
	assert_true(sup_catalog_open(f->dir, &c, &err) < 0);
	assert_null(c);
	assert_int_equal(access(target, F_OK), -1); /* nothing made through it */
}

/* In a child with a mount namespace of its own (gone with it): the folder a
 * small tmpfs, the catalog made there, the rest filled; then rows until a
 * write fails. Its exit: 0 -ENOSPC, 77 no namespace (not root), else what
 * went wrong (said on stderr). */
static int full_child(const char *dir)
{
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return 77;
	if (mount("sbx-catalog-full", dir, "tmpfs", 0, "size=512k") < 0) {
		perror("mount tmpfs");
		return 2;
	}
	sup_catalog *c;
	sbx_err err;
	if (sup_catalog_open(dir, &c, &err) < 0) {
		fprintf(stderr, "open: %s\n", err.msg);
		return 3;
	}
	char fill[160];
	snprintf(fill, sizeof(fill), "%s/fill", dir);
	int fd = open(fill, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	static const char block[4096];
	while (fd >= 0 && write(fd, block, sizeof(block)) > 0)
		;
	if (fd >= 0)
		close(fd);
	int rc = 0;
	for (int i = 0; i < 1000 && rc == 0; i++) {
		char id[32];
		snprintf(id, sizeof(id), "sb-full-%d", i);
		rc = sup_catalog_intent(c, id, "host", "", SUP_ISO_RUNC, &err);
	}
	if (rc != -ENOSPC)
		fprintf(stderr, "rows on a full file system: %d (%s)\n", rc, rc ? err.msg : "no failure");
	else if (!strstr(err.msg, "full"))
		fprintf(stderr, "-ENOSPC without SQLite's word for it: %s\n", err.msg);
	sup_catalog_close(c);
	return rc != -ENOSPC ? 4 : !strstr(err.msg, "full") ? 5 : 0;
}

static void test_full_file_system_is_enospc(void **state)
{
	fixture *f = *state;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(full_child(f->dir));
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status) == 77)
		skip(); /* no mount namespace: not root */
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_write_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_newer_schema_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_volumes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshots_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kept_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_volumes_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_secrets_step, setup, teardown),
		cmocka_unit_test_setup_teardown(test_paused_and_pool_sizes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_a_database_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_symlink_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_file_system_is_enospc, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
