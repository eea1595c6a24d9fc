/* The agent's file answers as OpenSandbox's FileInfo: a stat, and the
 * entries of a listing or a search, each checked by the readers every
 * family shares (sup_api_stat_read, sup_api_entry_read): the agent is a guest, and a path it names must
 * stay below the folder asked for. Pure: nothing but the maps given
 * (fuzz_osbx_entries runs it). */
#include "sup_osbx_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "sup_api.h"
#include "sup_text.h"

void sup_osbx_time_ms(uint64_t ms, char *buf, size_t size)
{
	char s[32];
	sup_rfc3339((time_t)(ms / 1000), s, sizeof(s));
	size_t n = strlen(s);
	if (n && s[n - 1] == 'Z')
		s[n - 1] = '\0';
	snprintf(buf, size, "%s.%03uZ", s, (unsigned)(ms % 1000));
}

/* sbx's file types as theirs. */
static const char *type_of(const sup_api_stat *st)
{
	if (strcmp(st->type, "file") == 0)
		return "file";
	if (strcmp(st->type, "dir") == 0)
		return "directory";
	if (strcmp(st->type, "symlink") == 0)
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

static json_t *info_of(const char *path, const sup_api_stat *st, sbx_err *err)
{
	char ts[40], u[24], g[24];
	sup_osbx_time_ms(st->mtime_ns / 1000000, ts, sizeof(ts));
	/* mode as their octal digits written in decimal: 0644 -> 644 */
	json_int_t dm = 0, mul = 1;
	for (uint64_t v = st->mode & 0777; v; v /= 8, mul *= 10)
		dm += (json_int_t)(v % 8) * mul;
	json_t *o = json_pack("{s:s, s:I, s:I, s:s, s:s, s:s, s:s}", "type", type_of(st), "size",
			      (json_int_t)st->size, "mode", dm, "owner", who_name(st->uid, u, sizeof(u)),
			      "group", who_name(st->gid, g, sizeof(g)), "modified_at", ts, "created_at",
			      ts);
	if (!o || sup_api_set_bytes(o, "path", path, strlen(path)) < 0) {
		json_decref(o);
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	return o;
}

json_t *sup_osbx_info_json(const char *path, const msgpack_object *m, sbx_err *err)
{
	sup_api_stat st;
	if (sup_api_stat_read(m, &st, err) < 0)
		return NULL;
	return info_of(path, &st, err);
}

json_t *sup_osbx_entries_json(const char *base, const msgpack_object *res, sbx_err *err)
{
	const msgpack_object *ents = sup_api_listing_entries(res, err);
	if (!ents)
		return NULL;
	json_t *a = json_array();
	for (uint32_t i = 0; a && i < ents->via.array.size; i++) {
		sup_api_entry ent = { 0 };
		json_t *o = sup_api_entry_read(base, &ents->via.array.ptr[i], &ent, err) < 0
				    ? NULL
				    : info_of(ent.path, &ent.st, err);
		free(ent.path);
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
