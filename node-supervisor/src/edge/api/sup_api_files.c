/* The agent's file answers (stat keys, fs.list and fs.search entries)
 * checked once (sup_api_stat_read, sup_api_entry_read: every family's
 * view of them, the OpenSandbox one's too) and rendered as sbx's API shows
 * them: the files routes and the MCP tools answer with the same shapes; and the bytes of a path or a name
 * as JSON text (sup_api_set_bytes). Pure: nothing but the maps given. */
#include "sup_api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_b64.h"
#include "sup_path.h"
#include "sup_text.h"

int sup_api_set_bytes(json_t *o, const char *name, const char *bytes, size_t n)
{
	const uint8_t *p = (const uint8_t *)bytes;
	if (!p || n == 0)
		return json_object_set_new_nocheck(o, name, json_string(""));
	if (sup_utf8_valid(p, n))
		return json_object_set_new_nocheck(o, name, json_stringn_nocheck((const char *)p, n));
	size_t tlen, blen;
	char *text = sup_utf8_repair(p, n, &tlen);
	char *b64 = sup_base64_encode(p, n, &blen);
	int rc = -1;
	if (text && b64) {
		char key[32];
		snprintf(key, sizeof(key), "%s_b64", name);
		rc = json_object_set_new_nocheck(o, name, json_stringn_nocheck(text, tlen));
		if (rc == 0)
			rc = json_object_set_new_nocheck(o, key, json_stringn_nocheck(b64, blen));
	}
	free(text);
	free(b64);
	return rc;
}

static const char *const stat_types[] = { "file",   "dir",  "symlink", "fifo",
					  "socket", "char", "block",   "other" };

int sup_api_stat_read(const msgpack_object *map, sup_api_stat *st, sbx_err *err)
{
	const char *t;
	size_t tl;
	memset(st, 0, sizeof(*st));
	if (!map || map->type != MSGPACK_OBJECT_MAP || !sbx_proto_get_str(map, "type", &t, &tl))
		return sbx_err_set(err, -EPROTO, "agent: stat without a type");
	for (size_t i = 0; i < sizeof(stat_types) / sizeof(stat_types[0]); i++)
		if (strlen(stat_types[i]) == tl && memcmp(stat_types[i], t, tl) == 0)
			st->type = stat_types[i];
	if (!st->type)
		return sbx_err_set(err, -EPROTO, "agent: stat with an unknown type");
	static const char *const keys[] = { "size", "mode", "mtime_ns", "uid", "gid", "nlink", "ino" };
	uint64_t *v[] = { &st->size, &st->mode, &st->mtime_ns, &st->uid, &st->gid, &st->nlink, &st->ino };
	for (size_t i = 0; i < 7; i++)
		if (!sbx_proto_get_uint(map, keys[i], v[i]) || *v[i] > (1ull << 62))
			return sbx_err_set(err, -EPROTO, "agent: stat key %s missing or not a uint",
					   keys[i]);
	if (st->mode > 07777)
		return sbx_err_set(err, -EPROTO, "agent: stat mode out of range");
	const char *tg;
	size_t tgl;
	if (sbx_proto_get_str(map, "target", &tg, &tgl) && tgl <= 4096) {
		st->target = tg;
		st->target_len = tgl;
	}
	return 0;
}

int sup_api_stat_json(const msgpack_object *map, json_t *o, sbx_err *err)
{
	sup_api_stat st;
	int rc = sup_api_stat_read(map, &st, err);
	if (rc < 0)
		return rc;
	json_object_set_new(o, "type", json_string(st.type));
	static const char *const keys[] = { "size", "mode", "mtime_ns", "uid", "gid", "nlink", "ino" };
	const uint64_t v[] = { st.size, st.mode, st.mtime_ns, st.uid, st.gid, st.nlink, st.ino };
	for (size_t i = 0; i < 7; i++)
		json_object_set_new(o, keys[i], json_integer((json_int_t)v[i]));
	char ts[40];
	sup_rfc3339((time_t)(st.mtime_ns / 1000000000ull), ts, sizeof(ts));
	json_object_set_new(o, "mtime", json_string(ts));
	if (st.target)
		sup_api_set_bytes(o, "target", st.target, st.target_len);
	return 0;
}

char *sup_api_path_join(const char *base, const char *rel, size_t rl)
{
	char *out = NULL;
	const char *sep = strcmp(base, "/") != 0 && rl ? "/" : "";
	if (asprintf(&out, "%s%s%.*s", base, sep, (int)rl, rel) < 0)
		return NULL;
	return out;
}

const msgpack_object *sup_api_listing_entries(const msgpack_object *res, sbx_err *err)
{
	const msgpack_object *ents = sbx_proto_map_get(res, "entries");
	if (!ents || ents->type != MSGPACK_OBJECT_ARRAY) {
		sbx_err_set(err, -EPROTO, "agent: listing without entries");
		return NULL;
	}
	return ents;
}

int sup_api_entry_read(const char *base, const msgpack_object *e, sup_api_entry *out, sbx_err *err)
{
	const char *rel;
	size_t rl;
	memset(out, 0, sizeof(*out));
	if (e->type != MSGPACK_OBJECT_MAP || !sbx_proto_get_str(e, "path", &rel, &rl) ||
	    !sbx_proto_get_str(e, "name", &out->name, &out->name_len) || rl >= 4096 ||
	    !sup_path_rel_ok(rel, rl) || memchr(out->name, '\0', out->name_len) ||
	    memchr(out->name, '/', out->name_len))
		return sbx_err_set(err, -EPROTO, "agent: a listing entry without a valid path or name");
	int rc = sup_api_stat_read(e, &out->st, err);
	if (rc < 0)
		return rc;
	out->path = sup_api_path_join(base, rel, rl);
	return out->path ? 0 : sbx_err_set(err, -ENOMEM, "out of memory");
}

/* One entry of a listing as the API shows it. */
static json_t *render_entry(const char *base, const msgpack_object *e, sbx_err *err)
{
	sup_api_entry ent;
	/* ent.path is set whenever the read returns 0; the check is for the
	 * analyzer, which cannot see that sbx_err_set's code is negative */
	if (sup_api_entry_read(base, e, &ent, err) < 0 || !ent.path)
		return NULL;
	SBX_AUTO_FREE char *full = ent.path;
	json_t *je = json_object();
	if (!je || sup_api_set_bytes(je, "path", full, strlen(full)) < 0 ||
	    sup_api_set_bytes(je, "name", ent.name, ent.name_len) < 0 || sup_api_stat_json(e, je, err) < 0) {
		json_decref(je);
		if (!err->code)
			sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	return je;
}

json_t *sup_api_render_listing(const char *base, const msgpack_object *res, sbx_err *err)
{
	const msgpack_object *ents = sup_api_listing_entries(res, err);
	bool trunc = false;
	if (!ents)
		return NULL;
	sbx_proto_get_bool(res, "truncated", &trunc);
	json_t *arr = json_array();
	json_t *o = json_object();
	if (!arr || !o || sup_api_set_bytes(o, "path", base, strlen(base)) < 0 || json_object_set_new(o, "entries", arr) < 0) {
		json_decref(o);
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	for (uint32_t i = 0; i < ents->via.array.size; i++) {
		json_t *je = render_entry(base, &ents->via.array.ptr[i], err);
		if (!je || json_array_append_new(arr, je) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	json_object_set_new(o, "count", json_integer((json_int_t)json_array_size(arr)));
	json_object_set_new(o, "truncated", json_boolean(trunc));
	return o;
}

