/* What the OpenSandbox layer keeps of a sandbox beside sbx's record (their
 * metadata, entrypoint, extensions: x->kept, id -> object with its
 * "tenant"), written through to the catalog as kept records of kind
 * "opensandbox" (key and sandbox: the sandbox's id) so that it outlives a
 * restart of the supervisor, and read back at start. */
#include "sup_osbx_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sup_catalog.h"
#include "sup_log.h"

#define KEPT_KIND "opensandbox"

static int load_one(const sup_catalog_kept *rec, void *ud, sbx_err *err)
{
	sup_osbx_ctx *x = ud;
	const char *id = rec->key;
	(void)err;
	json_t *k = rec->len ? json_loadb(rec->value, rec->len, 0, NULL) : NULL;
	if (!json_is_object(k)) {
		/* not a row this build wrote: left out, not fatal */
		sup_warn("osbx: the catalog's row for %s is not a JSON object; left out", id);
		json_decref(k);
		return 0;
	}
	json_object_set_new(k, "tenant", json_string(rec->tenant));
	json_object_set_new(x->kept, id, k);
	return 0;
}

int sup_osbx_ctx_open(sup_osbx_ctx *x, struct sup_catalog *catalog, sbx_err *err)
{
	x->catalog = catalog;
	if (!x->kept)
		x->kept = json_object();
	if (!x->kept)
		return sbx_err_set(err, -ENOMEM, "osbx: out of memory");
	if (!catalog)
		return 0;
	if (sup_catalog_kept_each(catalog, KEPT_KIND, load_one, x, err) < 0)
		return sbx_err_wrap(err, "osbx: reading what it kept");
	return 0;
}

int sup_osbx_kept_save(sup_osbx_ctx *x, const char *id, sbx_err *err)
{
	const json_t *k = x->kept ? json_object_get(x->kept, id) : NULL;
	const char *tenant = json_string_value(json_object_get(k, "tenant"));
	if (!x->catalog || !k || !tenant)
		return 0;
	SBX_AUTO_FREE char *text = json_dumps(k, JSON_COMPACT);
	if (!text)
		return sbx_err_set(err, -ENOMEM, "osbx: out of memory");
	sup_catalog_kept rec = { .kind = KEPT_KIND, .key = id, .sandbox = id, .tenant = tenant,
				 .value = text, .len = strlen(text) };
	return sup_catalog_kept_put(x->catalog, &rec, err);
}

void sup_osbx_kept_drop(sup_osbx_ctx *x, const char *id)
{
	sbx_err e;
	/* the row first: id may be the object's own key, freed by the del */
	if (x->catalog && sup_catalog_kept_remove(x->catalog, KEPT_KIND, id, &e) < 0)
		sup_warn("osbx: %s", e.msg);
	if (x->kept)
		json_object_del(x->kept, id);
}
