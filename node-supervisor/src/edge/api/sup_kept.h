/* What a compatibility layer keeps of a sandbox beside sbx's own record
 * (OpenSandbox's metadata and entrypoint, E2B's metadata and template):
 * one JSON object per sandbox id with its "tenant", held in memory while
 * the sandbox is listed and written through to the catalog as kept
 * records of the layer's kind, read back at start, so it outlives a
 * restart. It knows no layer's fields, and never decides who may see a
 * sandbox: the core does (sup_kept_prune asks it). Loop thread only. */
#ifndef SUP_KEPT_H
#define SUP_KEPT_H

#include <jansson.h>

#include "sbx/err.h"
#include "sup_core.h"

struct sup_catalog;

typedef struct sup_kept {
	const char *kind;            /* the catalog's kind of record: "opensandbox" */
	struct sup_catalog *catalog; /* NULL: kept in memory only */
	json_t *by_id;               /* id -> object with "tenant" */
} sup_kept;

/* Read back what kind kept before (catalog NULL: nothing). */
int sup_kept_open(sup_kept *k, const char *kind, struct sup_catalog *catalog, sbx_err *err);
void sup_kept_release(sup_kept *k);
/* The object kept for id, NULL: none (borrowed). */
json_t *sup_kept_get(const sup_kept *k, const char *id);
/* obj (reference taken) becomes what is kept for id, owned by tenant, and
 * is written through. A catalog that fails is -EIO with err: the object
 * is kept in memory all the same (only its surviving a restart is lost). */
int sup_kept_put(sup_kept *k, const char *id, const char *tenant, json_t *obj, sbx_err *err);
/* obj kept for id written through again after a change. */
int sup_kept_save(sup_kept *k, const char *id, sbx_err *err);
/* What is kept for id goes, and its record (a failed removal is logged). */
void sup_kept_drop(sup_kept *k, const char *id);
/* Drop what is kept of who's sandboxes that core no longer has (expired,
 * or deleted through another API), so the table holds no more than who
 * has. */
void sup_kept_prune(sup_kept *k, sup_core *core, const struct sup_tenant *who);

#endif
