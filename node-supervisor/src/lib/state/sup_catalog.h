/* The supervisor's catalog: what it runs, kept in SQLite (WAL) under the
 * state folder so that a restarted supervisor (a crash, SIGKILL, a rolling
 * upgrade) re-adopts its sandboxes instead of sweeping them.
 *
 * One row per sandbox, from the moment its runtime create is about to be
 * called (phase "creating": an intent, naming the id the runtime will use)
 * until its destroy finished (the row is removed). A made sandbox is
 * "made" (pooled: its container id and network slot known); a handed-out
 * one "running", with its owner, lifetime, limits and env. A write has
 * returned once it is committed (see DESIGN.md for synchronous=NORMAL in
 * WAL mode: it survives the process, which is what a sandbox survives).
 *
 * Owns the database file and its schema (PRAGMA user_version: an older one
 * is upgraded, a newer one refused). It must not know the pools, the core
 * or the runtime: it stores the plain record below and gives it back.
 * Loop thread only (one connection, no locking of ours). */
#ifndef SUP_CATALOG_H
#define SUP_CATALOG_H

#include <stdbool.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sbx/proto_exec.h"
#include "sup_isolation.h"
#include "sup_resources.h"
#include "sup_volspec.h"

/* The schema this build reads and writes. */
#define SUP_CATALOG_SCHEMA 10
#define SUP_CATALOG_FILE "catalog.db"

typedef struct sup_catalog sup_catalog;

typedef enum sup_catalog_phase {
	SUP_CAT_CREATING = 1, /* runtime create may be in flight */
	SUP_CAT_MADE = 2,     /* container made, in its pool */
	SUP_CAT_RUNNING = 3,  /* handed out */
} sup_catalog_phase;

/* Every field a sandbox keeps across a restart, in one place: a new field
 * of a sandbox that must survive is added here, in the schema and in the
 * write and read of sup_catalog.c (CONTRIBUTING.md). */
typedef struct sup_catalog_rec {
	char id[48];
	sup_catalog_phase phase;
	char image[4096];        /* the pool's image name (host, a folder, a store name) */
	char digest[80];         /* a store image's digest, "" otherwise */
	sup_isolation isolation;
	char container_id[64];   /* from MADE on */
	unsigned net_slot;       /* its egress plumbing, 0: none */
	/* RUNNING only */
	char tenant[128];       /* at least SUP_TENANT_NAME_MAX + 1 (checked where it is filled) */
	bool allow_root;
	int64_t created_at, expires_at; /* seconds since the epoch */
	bool paused;             /* frozen by pause (schema 3) */
	char *network;           /* its egress policy as the API's JSON, NULL: none
				  * (schema 3); owned by the record */
	sup_resources res;       /* limits in force (MADE: the pools' defaults) */
	sbx_proto_env env;       /* owned by the record (sup_catalog_rec_free) */
	char *secrets;           /* the secrets it was given, as the core writes them (names
				  * only), NULL: none (schema 10); owned by the record */
} sup_catalog_rec;

void sup_catalog_rec_free(sup_catalog_rec *r);

/* Open (or make) <dir>/catalog.db. A file that is not a database, or of a
 * schema newer than SUP_CATALOG_SCHEMA, is refused (-EPROTO, err says what
 * to do) and left alone. */
int sup_catalog_open(const char *dir, sup_catalog **out, sbx_err *err);
void sup_catalog_close(sup_catalog *c);

/* A create of id is about to be run: phase CREATING. */
int sup_catalog_intent(sup_catalog *c, const char *id, const char *image, const char *digest,
		       sup_isolation isolation, sbx_err *err);
/* Its container is made: phase MADE with the pools' limits. */
int sup_catalog_made(sup_catalog *c, const char *id, const char *container_id, unsigned net_slot,
		     const sup_resources *res, sbx_err *err);
/* Handed out (or changed while handed out): r replaces the row (phase
 * RUNNING), env included, in one transaction. */
int sup_catalog_running(sup_catalog *c, const sup_catalog_rec *r, sbx_err *err);
/* Destroyed: the row goes (none is not an error). */
int sup_catalog_remove(sup_catalog *c, const char *id, sbx_err *err);

/* A pool's size set at run time (PUT /v1/pools/{image}, schema 3): kept
 * until the next set, and applied again at start over the flags' size. */
int sup_catalog_pool_size(sup_catalog *c, const char *image, sup_isolation isolation,
			  unsigned size, sbx_err *err);
/* Every pool size set, in the order they were first set; fn as below. */
int sup_catalog_each_pool(sup_catalog *c,
			  int (*fn)(const char *image, sup_isolation isolation, unsigned size,
				    void *ud, sbx_err *err),
			  void *ud, sbx_err *err);
/* Forget a pool's size (its image is gone). */
int sup_catalog_pool_forget(sup_catalog *c, const char *image, sup_isolation isolation,
			    sbx_err *err);

/* Every row, oldest first; r is freed after fn returns. fn returning < 0
 * (with err set) stops the walk with that code. */
int sup_catalog_each(sup_catalog *c,
		     int (*fn)(const sup_catalog_rec *r, void *ud, sbx_err *err), void *ud,
		     sbx_err *err);

/* ---- volumes (schema step 2) ----
 * A volume's row lives from its create to its delete, whatever sandboxes
 * come and go; a sandbox's mounts of volumes go with its row. */
typedef struct sup_catalog_vol {
	char tenant[128];
	char name[SUP_VOL_NAME_MAX + 1];
	uint64_t size;
	int64_t created_at;
} sup_catalog_vol;

/* A new volume (-EIO when the tenant has one of that name). */
int sup_catalog_vol_put(sup_catalog *c, const sup_catalog_vol *v, sbx_err *err);
int sup_catalog_vol_remove(sup_catalog *c, const char *tenant, const char *name, sbx_err *err);
/* Every volume, oldest first. */
int sup_catalog_vol_each(sup_catalog *c, int (*fn)(const sup_catalog_vol *v, void *ud, sbx_err *err),
			 void *ud, sbx_err *err);
/* Sandbox id (whose row must exist) mounts m[0..n) of tenant's volumes:
 * replaces what was recorded, in one transaction. */
int sup_catalog_vol_mounts_put(sup_catalog *c, const char *id, const char *tenant,
			       const sup_vol_mount *m, size_t n, sbx_err *err);
/* Every recorded mount, by sandbox, in order. */
int sup_catalog_vol_mounts_each(sup_catalog *c,
				int (*fn)(const char *id, const char *tenant, const sup_vol_mount *m,
					  void *ud, sbx_err *err),
				void *ud, sbx_err *err);

/* ---- snapshots (schema steps 4, 5 and 8) ----
 * One row per snapshot in the store: what restores it (its image) and
 * whose it is. The archive itself is the snapshot store's. */

/* Step 8: a volume the snapshot carries ("include_volumes"): which of the
 * source's volumes it was, where and how the source mounted it, and its
 * archive (kept beside the layer's by the store). */
typedef struct sup_catalog_snap_vol {
	sup_vol_mount m;        /* the source's volume name, mount path, mode */
	uint64_t vol_size;      /* that volume's size: a restore makes one as big */
	uint64_t size;          /* bytes of its archive */
	char sha256[65];        /* its archive's digest ("" unknown: a local one) */
} sup_catalog_snap_vol;

typedef struct sup_catalog_snap {
	char id[48];
	char name[128];
	char tenant[128];
	char source[48];        /* the sandbox it was taken of */
	char image[4096];       /* that sandbox's image name */
	char digest[80];        /* a store image's digest, "" otherwise */
	sup_isolation isolation;
	uint64_t size;          /* bytes of the archive */
	int64_t created_at;     /* seconds since the epoch */
	/* step 5: the store holding the archive: "" the state folder, else
	 * "s3://bucket/prefix/" (the object store it was read from or put in) */
	char location[1100];
	char sha256[65];        /* the archive's digest, lowercase hex ("" unknown) */
	unsigned nvols;         /* step 8: the volumes it carries, in mount order */
	sup_catalog_snap_vol vols[SUP_VOL_MAX_MOUNTS];
} sup_catalog_snap;

/* The row and its volumes, in one transaction. */
int sup_catalog_snap_put(sup_catalog *c, const sup_catalog_snap *s, sbx_err *err);
/* -ENOENT when there is no such row. */
int sup_catalog_snap_get(sup_catalog *c, const char *id, sup_catalog_snap *out, sbx_err *err);
int sup_catalog_snap_remove(sup_catalog *c, const char *id, sbx_err *err);
/* Every row of tenant (NULL: all), oldest first. */
int sup_catalog_snap_each(sup_catalog *c, const char *tenant,
			  void (*fn)(const sup_catalog_snap *s, void *ud), void *ud, sbx_err *err);

/* ---- kept records (schema step 9) ----
 * What a layer above the core keeps beside sbx's own rows so that it
 * outlives a restart (the OpenSandbox layer's metadata of a sandbox: kind
 * "opensandbox", key the sandbox's id): a value of bytes (JSON text or any
 * blob) the catalog stores and never reads, the tenant that owns it, and
 * its times. One record per (kind, key); a record naming a sandbox goes
 * with that sandbox's row. The catalog knows no kind. */
typedef struct sup_catalog_kept {
	const char *kind;
	const char *key;
	const char *sandbox; /* the sandbox row it goes with; NULL: none */
	const char *tenant;
	const void *value;
	size_t len;
	int64_t created_at;  /* seconds since the epoch; set by put */
	int64_t updated_at;
} sup_catalog_kept;

/* Insert or replace (kind, key): created_at is the first put's, updated_at
 * now. A sandbox the catalog does not have: -EIO. */
int sup_catalog_kept_put(sup_catalog *c, const sup_catalog_kept *k, sbx_err *err);
int sup_catalog_kept_remove(sup_catalog *c, const char *kind, const char *key, sbx_err *err);
/* Every record of kind, oldest first (k valid during fn); fn's error stops
 * the walk. */
int sup_catalog_kept_each(sup_catalog *c, const char *kind,
			  int (*fn)(const sup_catalog_kept *k, void *ud, sbx_err *err), void *ud,
			  sbx_err *err);

/* ---- secrets (schema step 10; sup_catalog_secrets.c) ----
 * A tenant's secret as the catalog keeps it: sealed (sup_secret.h), so
 * the file holds no value; the catalog neither seals nor opens. */
typedef struct sup_catalog_secret {
	char tenant[128];
	char name[72];          /* at least SUP_SECRET_NAME_MAX + 1 (checked where it is filled) */
	uint8_t *sealed;        /* _get: malloc'd, the caller frees; _each: NULL */
	size_t sealed_len;
	uint64_t size;          /* bytes of the value */
	int64_t created_at, updated_at; /* seconds since the epoch */
} sup_catalog_secret;

/* Write s (sealed, size, updated_at; a new row takes updated_at as its
 * created_at too, a row there keeps its own). *created tells which. */
int sup_catalog_secret_put(sup_catalog *c, const sup_catalog_secret *s, bool *created,
			   sbx_err *err);
/* -ENOENT when tenant has no secret name. */
int sup_catalog_secret_get(sup_catalog *c, const char *tenant, const char *name,
			   sup_catalog_secret *out, sbx_err *err);
/* -ENOENT when there was none. */
int sup_catalog_secret_remove(sup_catalog *c, const char *tenant, const char *name, sbx_err *err);
/* tenant's secrets (NULL: every tenant's) by tenant and name, without
 * their sealed values; fn's error stops the walk. */
int sup_catalog_secret_each(sup_catalog *c, const char *tenant,
			    int (*fn)(const sup_catalog_secret *s, void *ud, sbx_err *err), void *ud,
			    sbx_err *err);

#endif
