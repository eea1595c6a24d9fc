/* The agent's file answers as OpenSandbox's FileInfo: a stat, and the
 * entries of a listing or a search, each checked as sbx's own routes check
 * them (sup_api_files.c): the agent is a guest, and a path it names must
 * stay below the folder asked for. Pure: nothing but the maps given
 * (fuzz_osbx_entries runs it). */
#include "sup_osbx_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_api.h"
#include "sup_path.h"
#include "sup_text.h"

/* The longest path an entry may name below its folder. */
#define ENTRY_PATH_MAX 4096

void sup_osbx_time_ms(uint64_t ms, char *buf, size_t size)
{
	char s[32];
	sup_rfc3339((time_t)(ms / 1000), s, sizeof(s));
	size_t n = strlen(s);
	if (n && s[n - 1] == 'Z')
		s[n - 1] = '\0';
	snprintf(buf, size, "%s.%03uZ", s, (unsigned)(ms % 1000));
}

static const char *type_of(const msgpack_object *m)
{
	const char *t;
	size_t n;
	if (!sbx_proto_get_str(m, "type", &t, &n))
		return NULL;
	if (n == 4 && memcmp(t, "file", 4) == 0)
		return "file";
	if (n == 3 && memcmp(t, "dir", 3) == 0)
		return "directory";
	if (n == 7 && memcmp(t, "symlink", 7) == 0)
		return "symlink";
	return "other";
}

static const char *who_name(uint64_t id, char *buf, size_t size)
{
	if (id == 0)
		return "root";
	if (id == 1000)
		return "sandbox";
	snprintf(buf, size, "%" PRIu64, id);
	return buf;
}

json_t *sup_osbx_info_json(const char *path, const msgpack_object *m, sbx_err *err)
{
	uint64_t size, mode, mt, uid, gid;
	const char *type = m && m->type == MSGPACK_OBJECT_MAP ? type_of(m) : NULL;
	if (!type || !sbx_proto_get_uint(m, "size", &size) || !sbx_proto_get_uint(m, "mode", &mode) ||
	    !sbx_proto_get_uint(m, "mtime_ns", &mt) || !sbx_proto_get_uint(m, "uid", &uid) ||
	    !sbx_proto_get_uint(m, "gid", &gid) || mode > 07777 || size > (1ull << 62) ||
	    mt > (1ull << 62)) {
		sbx_err_set(err, -EPROTO, "agent: stat keys missing or out of range");
		return NULL;
	}
	char ts[40], u[24], g[24];
	sup_osbx_time_ms(mt / 1000000, ts, sizeof(ts));
	/* mode as their octal digits written in decimal: 0644 -> 644 */
	json_int_t dm = 0, mul = 1;
	for (uint64_t v = mode & 0777; v; v /= 8, mul *= 10)
		dm += (json_int_t)(v % 8) * mul;
	json_t *o = json_pack("{s:s, s:I, s:I, s:s, s:s, s:s, s:s}", "type", type, "size",
			      (json_int_t)size, "mode", dm, "owner", who_name(uid, u, sizeof(u)), "group",
			      who_name(gid, g, sizeof(g)), "modified_at", ts, "created_at", ts);
	if (!o || sup_api_set_bytes(o, "path", path, strlen(path)) < 0) {
		json_decref(o);
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	return o;
}

json_t *sup_osbx_entries_json(const char *base, const msgpack_object *res, sbx_err *err)
{
	const msgpack_object *ents = res ? sbx_proto_map_get(res, "entries") : NULL;
	if (!ents || ents->type != MSGPACK_OBJECT_ARRAY) {
		sbx_err_set(err, -EPROTO, "agent: listing without entries");
		return NULL;
	}
	json_t *a = json_array();
	for (uint32_t i = 0; a && i < ents->via.array.size; i++) {
		const msgpack_object *e = &ents->via.array.ptr[i];
		const char *rel;
		size_t rl;
		if (e->type != MSGPACK_OBJECT_MAP || !sbx_proto_get_str(e, "path", &rel, &rl) ||
		    rl >= ENTRY_PATH_MAX || !sup_path_rel_ok(rel, rl) || rel[0] == '/') {
			sbx_err_set(err, -EPROTO, "agent: a listing entry without a valid path");
			json_decref(a);
			return NULL;
		}
		SBX_AUTO_FREE char *full = sup_api_path_join(base, rel, rl);
		json_t *o = full ? sup_osbx_info_json(full, e, err) : NULL;
		if (!o || json_array_append_new(a, o) < 0) {
			if (!err->code)
				sbx_err_set(err, -ENOMEM, "out of memory");
			json_decref(a);
			return NULL;
		}
	}
	if (!a && !err->code)
		sbx_err_set(err, -ENOMEM, "out of memory");
	return a;
}
