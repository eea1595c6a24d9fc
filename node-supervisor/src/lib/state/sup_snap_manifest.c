/* sup_snap_manifest: see sup_snap_manifest.h. */
#include "sup_snap_manifest.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "sup_isolation.h"
#include "sup_volspec.h"

static json_t *render_vols(const sup_catalog_snap *r)
{
	json_t *a = json_array();
	for (unsigned i = 0; a && i < r->nvols; i++) {
		const sup_catalog_snap_vol *v = &r->vols[i];
		if (json_array_append_new(a, json_pack("{s:s, s:s, s:b, s:I, s:I, s:s}", "name",
							 v->m.name, "mount", v->m.path, "read_only",
							 v->m.read_only, "vol_size",
							 (json_int_t)v->vol_size, "size",
							 (json_int_t)v->size, "sha256", v->sha256)) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

int sup_snap_manifest_render(const sup_catalog_snap *r, char **out, size_t *len, sbx_err *err)
{
	json_t *j = json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:s, s:I}", "version",
			      r->nvols ? 2 : 1, "id", r->id, "name", r->name, "tenant",
			      r->tenant, "source", r->source, "image", r->image, "digest", r->digest,
			      "isolation", sup_isolation_names[r->isolation], "size", (json_int_t)r->size,
			      "sha256", r->sha256, "created_at", (json_int_t)r->created_at);
	if (j && r->nvols && json_object_set_new(j, "volumes", render_vols(r)) < 0) {
		json_decref(j);
		j = NULL;
	}
	*out = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(j);
	if (!*out)
		return sbx_err_set(err, -ENOMEM, "snapshot %s: its manifest", r->id);
	*len = strlen(*out);
	return 0;
}

/* A string field into out (cap bytes with its NUL); false if absent, not
 * a string, too long or holding a NUL. */
static bool str_field(json_t *j, const char *key, char *out, size_t cap)
{
	json_t *v = json_object_get(j, key);
	if (!json_is_string(v) || json_string_length(v) >= cap ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return false;
	memcpy(out, json_string_value(v), json_string_length(v) + 1);
	return true;
}

static bool int_field(json_t *j, const char *key, json_int_t *out)
{
	json_t *v = json_object_get(j, key);
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = json_integer_value(v);
	return true;
}

static bool is_hex64(const char *s)
{
	size_t n = strspn(s, "0123456789abcdef");
	return n == 64 && s[n] == '\0';
}

/* "volumes" of a version 2 manifest into out; false for anything that is
 * not such a list (a name or mount the API would refuse included). */
static bool vols_field(json_t *j, sup_catalog_snap *out)
{
	json_t *a = json_object_get(j, "volumes");
	if (!a)
		return true;
	if (!json_is_array(a) || json_array_size(a) > SUP_VOL_MAX_MOUNTS)
		return false;
	sup_vol_mount m[SUP_VOL_MAX_MOUNTS];
	for (size_t i = 0; i < json_array_size(a); i++) {
		json_t *e = json_array_get(a, i);
		sup_catalog_snap_vol *v = &out->vols[i];
		json_int_t vs = 0, size = 0;
		json_t *ro = json_object_get(e, "read_only");
		sbx_err ignored;
		if (!json_is_object(e) || json_object_size(e) != 6 ||
		    !str_field(e, "name", v->m.name, sizeof(v->m.name)) ||
		    !sup_volspec_name_ok(v->m.name, strlen(v->m.name)) ||
		    !str_field(e, "mount", v->m.path, sizeof(v->m.path)) ||
		    sup_volspec_mount_path_ok(v->m.path, strlen(v->m.path), &ignored) < 0 ||
		    !json_is_boolean(ro) || !int_field(e, "vol_size", &vs) ||
		    sup_volspec_size_ok((uint64_t)vs, &ignored) < 0 || !int_field(e, "size", &size) ||
		    !str_field(e, "sha256", v->sha256, sizeof(v->sha256)) || !is_hex64(v->sha256))
			return false;
		v->m.read_only = json_is_true(ro);
		v->vol_size = (uint64_t)vs;
		v->size = (uint64_t)size;
		m[i] = v->m;
	}
	out->nvols = (unsigned)json_array_size(a);
	sup_vol_mounts all = {.v = m, .n = out->nvols};
	sbx_err ignored;
	return sup_volspec_mounts_ok(&all, &ignored) == 0;
}

int sup_snap_manifest_parse(const char *buf, size_t len, const char *id, sup_catalog_snap *out,
			    sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	json_error_t je;
	json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return sbx_err_set(err, -EBADE, "snapshot %s: its manifest is no JSON: %s", id, je.text);
	char iso[16];
	json_int_t version = 0, size = 0, created = 0;
	const char *bad = NULL;
	if (!json_is_object(j))
		bad = "not an object";
	else if (!int_field(j, "version", &version) || version < 1 ||
		 version > SUP_SNAP_MANIFEST_VERSION)
		bad = "version";
	else if (!str_field(j, "id", out->id, sizeof(out->id)) || strcmp(out->id, id) != 0)
		bad = "id";
	else if (!str_field(j, "name", out->name, sizeof(out->name)))
		bad = "name";
	else if (!str_field(j, "tenant", out->tenant, sizeof(out->tenant)) || !out->tenant[0])
		bad = "tenant";
	else if (!str_field(j, "source", out->source, sizeof(out->source)))
		bad = "source";
	else if (!str_field(j, "image", out->image, sizeof(out->image)) || !out->image[0])
		bad = "image";
	else if (!str_field(j, "digest", out->digest, sizeof(out->digest)))
		bad = "digest";
	else if (!str_field(j, "isolation", iso, sizeof(iso)) ||
		 sup_isolation_parse(iso, strlen(iso), &out->isolation) < 0)
		bad = "isolation";
	else if (!int_field(j, "size", &size))
		bad = "size";
	else if (!str_field(j, "sha256", out->sha256, sizeof(out->sha256)) || !is_hex64(out->sha256))
		bad = "sha256";
	else if (!int_field(j, "created_at", &created))
		bad = "created_at";
	else if ((version == 1 && json_object_get(j, "volumes")) || !vols_field(j, out))
		bad = "volumes";
	json_decref(j);
	if (bad)
		return sbx_err_set(err, -EBADE, "snapshot %s: its manifest is not one (%s)", id, bad);
	out->size = (uint64_t)size;
	out->created_at = (int64_t)created;
	return 0;
}
