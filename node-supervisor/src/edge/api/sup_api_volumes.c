/* The JSON of volumes: POST /v1/volumes, a create's "volumes", and the
 * renderings (sup_api.h). The rules themselves are sup_volspec's. */
#include "sup_api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/json_auto.h"
#include "sup_text.h"

int sup_api_parse_volume_create(const char *body, size_t len, char *name, size_t name_cap,
				uint64_t *size, sbx_err *err)
{
	json_error_t je;
	SBX_AUTO_JSON json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return sbx_err_set(err, -EINVAL, "malformed JSON at line %d column %d: %s", je.line,
				   je.column, je.text);
	if (!json_is_object(j))
		return sbx_err_set(err, -EINVAL, "body must be a JSON object");
	json_t *n = json_object_get(j, "name"), *sz = json_object_get(j, "size");
	if (!n || !sz)
		return sbx_err_set(err, -EINVAL, "fields \"name\" and \"size\" are required");
	if (json_object_size(j) != 2)
		return sbx_err_set(err, -EINVAL, "only fields \"name\" and \"size\" are allowed");
	if (!json_is_string(n) || !sup_volspec_name_ok(json_string_value(n), json_string_length(n)) ||
	    json_string_length(n) >= name_cap)
		return sbx_err_set(err, -EINVAL,
				   "field \"name\": want 1..%d of a-z 0-9 . _ - (starting with a letter "
				   "or digit)",
				   SUP_VOL_NAME_MAX);
	snprintf(name, name_cap, "%s", json_string_value(n));
	int rc = sup_resources_total_from_json("disk", sz, "size", size, err);
	return rc < 0 ? rc : sup_volspec_size_ok(*size, err);
}

static int parse_mount(json_t *o, size_t i, sup_vol_mount *m, sbx_err *err)
{
	if (!json_is_object(o))
		return sbx_err_set(err, -EINVAL, "field \"volumes[%zu]\": want an object", i);
	const char *key;
	json_t *val;
	json_object_foreach(o, key, val)
		if (strcmp(key, "name") != 0 && strcmp(key, "mount") != 0 && strcmp(key, "read_only") != 0)
			return sbx_err_set(err, -EINVAL,
					   "field \"volumes[%zu]\": unknown field \"%.64s\" (name, mount, read_only)",
					   i, key);
	json_t *n = json_object_get(o, "name"), *p = json_object_get(o, "mount"),
	       *ro = json_object_get(o, "read_only");
	if (!json_is_string(n) || !sup_volspec_name_ok(json_string_value(n), json_string_length(n)))
		return sbx_err_set(err, -EINVAL, "field \"volumes[%zu].name\": want a volume's name", i);
	if (!json_is_string(p))
		return sbx_err_set(err, -EINVAL, "field \"volumes[%zu].mount\": want an absolute path", i);
	if (ro && !json_is_boolean(ro))
		return sbx_err_set(err, -EINVAL, "field \"volumes[%zu].read_only\": want a boolean", i);
	int rc = sup_volspec_mount_path_ok(json_string_value(p), json_string_length(p), err);
	if (rc < 0)
		return sbx_err_wrap(err, "field \"volumes[%zu]\"", i);
	snprintf(m->name, sizeof(m->name), "%s", json_string_value(n));
	snprintf(m->path, sizeof(m->path), "%s", json_string_value(p));
	m->read_only = ro && json_is_true(ro);
	return 0;
}

int sup_api_parse_volume_mounts(json_t *v, sup_vol_mounts *out, sbx_err *err)
{
	if (!json_is_array(v))
		return sbx_err_set(err, -EINVAL, "field \"volumes\": want an array");
	size_t n = json_array_size(v);
	if (n > SUP_VOL_MAX_MOUNTS)
		return sbx_err_set(err, -EINVAL, "field \"volumes\": more than %d", SUP_VOL_MAX_MOUNTS);
	if (n == 0)
		return 0;
	out->v = calloc(n, sizeof(*out->v));
	if (!out->v)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		int rc = parse_mount(json_array_get(v, i), i, &out->v[i], err);
		if (rc < 0)
			return rc;
		out->n = i + 1;
	}
	return sup_volspec_mounts_ok(out, err);
}

json_t *sup_api_render_volume_mounts(const sup_vol_mount *m, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++)
		if (json_array_append_new(a, json_pack("{s:s, s:s, s:b}", "name", m[i].name, "mount",
						       m[i].path, "read_only", m[i].read_only)) < 0) {
			json_decref(a);
			a = NULL;
		}
	return a;
}

json_t *sup_api_render_volume(const sup_volume_view *v)
{
	char created[32];
	sup_rfc3339((time_t)v->created_at, created, sizeof(created));
	json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:{s:I, s:s?}}", "name", v->name, "tenant",
			      v->tenant, "size", (json_int_t)v->size, "created_at", created, "state",
			      v->state, "mounted", "readers", (json_int_t)v->readers, "writer",
			      v->writer);
	if (o && v->has_used && json_object_set_new(o, "used", json_integer((json_int_t)v->used)) < 0) {
		json_decref(o);
		o = NULL;
	}
	return o;
}
