/* The kept objects of a compatibility layer, written through to the
 * catalog's kept records (sup_catalog.h: kind, key and sandbox the id). */
#include "sup_kept.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sup_catalog.h"
#include "sup_log.h"
#include "sup_tenants.h"

static int load_one(const sup_catalog_kept *rec, void *ud, sbx_err *err)
{
	sup_kept *k = ud;
	(void)err;
	json_t *o = rec->len ? json_loadb(rec->value, rec->len, 0, NULL) : NULL;
	if (!json_is_object(o)) {
		/* not a row this build wrote: left out, not fatal */
		sup_warn("%s: the catalog's row for %s is not a JSON object; left out", k->kind, rec->key);
		json_decref(o);
		return 0;
	}
	json_object_set_new(o, "tenant", json_string(rec->tenant));
	json_object_set_new(k->by_id, rec->key, o);
	return 0;
}

int sup_kept_open(sup_kept *k, const char *kind, struct sup_catalog *catalog, sbx_err *err)
{
	k->kind = kind;
	k->catalog = catalog;
	if (!k->by_id)
		k->by_id = json_object();
	if (!k->by_id)
		return sbx_err_set(err, -ENOMEM, "%s: out of memory", kind);
	if (catalog && sup_catalog_kept_each(catalog, kind, load_one, k, err) < 0)
		return sbx_err_wrap(err, "%s: reading what it kept", kind);
	return 0;
}

void sup_kept_release(sup_kept *k)
{
	json_decref(k->by_id);
	k->by_id = NULL;
}

json_t *sup_kept_get(const sup_kept *k, const char *id)
{
	return k->by_id && id ? json_object_get(k->by_id, id) : NULL;
}

int sup_kept_save(sup_kept *k, const char *id, sbx_err *err)
{
	const json_t *o = sup_kept_get(k, id);
	const char *tenant = json_string_value(json_object_get(o, "tenant"));
	if (!k->catalog || !o || !tenant)
		return 0;
	SBX_AUTO_FREE char *text = json_dumps(o, JSON_COMPACT);
	if (!text)
		return sbx_err_set(err, -ENOMEM, "%s: out of memory", k->kind);
	sup_catalog_kept rec = { .kind = k->kind, .key = id, .sandbox = id, .tenant = tenant,
				 .value = text, .len = strlen(text) };
	return sup_catalog_kept_put(k->catalog, &rec, err);
}

int sup_kept_put(sup_kept *k, const char *id, const char *tenant, json_t *obj, sbx_err *err)
{
	if (!k->by_id && !(k->by_id = json_object()))
		return sbx_err_set(err, -ENOMEM, "%s: out of memory", k->kind);
	if (json_object_set_new(obj, "tenant", json_string(tenant)) < 0 ||
	    json_object_set(k->by_id, id, obj) < 0)
		return sbx_err_set(err, -ENOMEM, "%s: out of memory", k->kind);
	return sup_kept_save(k, id, err);
}

void sup_kept_drop(sup_kept *k, const char *id)
{
	sbx_err e;
	/* the row first: id may be the object's own key, freed by the del */
	if (k->catalog && sup_catalog_kept_remove(k->catalog, k->kind, id, &e) < 0)
		sup_warn("%s: %s", k->kind, e.msg);
	if (k->by_id)
		json_object_del(k->by_id, id);
}

void sup_kept_prune(sup_kept *k, sup_core *core, const sup_tenant *who)
{
	const char *id;
	json_t *o, *tmp;
	sbx_err e;
	sup_sandbox_view v;
	if (!k->by_id || !who)
		return;
	json_object_foreach_safe(k->by_id, tmp, id, o) {
		const char *t = json_string_value(json_object_get(o, "tenant"));
		if (t && strcmp(t, who->name) == 0 && sup_core_get(core, who, id, &v, &e) < 0)
			sup_kept_drop(k, id);
	}
}
