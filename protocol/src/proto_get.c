/* Typed access to decoded msgpack maps (args and results). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"

const msgpack_object *sbx_proto_map_get(const msgpack_object *map, const char *key)
{
	if (!map || map->type != MSGPACK_OBJECT_MAP)
		return NULL;
	size_t klen = strlen(key);
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object *k = &map->via.map.ptr[i].key;
		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == klen &&
		    memcmp(k->via.str.ptr, key, klen) == 0)
			return &map->via.map.ptr[i].val;
	}
	return NULL;
}

bool sbx_proto_get_str(const msgpack_object *map, const char *key, const char **s, size_t *len)
{
	const msgpack_object *o = sbx_proto_map_get(map, key);
	if (!o || o->type != MSGPACK_OBJECT_STR)
		return false;
	*s = o->via.str.size ? o->via.str.ptr : "";
	*len = o->via.str.size;
	return true;
}

bool sbx_proto_get_uint(const msgpack_object *map, const char *key, uint64_t *v)
{
	const msgpack_object *o = sbx_proto_map_get(map, key);
	if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return false;
	*v = o->via.u64;
	return true;
}

bool sbx_proto_get_int(const msgpack_object *map, const char *key, int64_t *v)
{
	const msgpack_object *o = sbx_proto_map_get(map, key);
	if (!o)
		return false;
	if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
		*v = o->via.i64;
		return true;
	}
	if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= INT64_MAX) {
		*v = (int64_t)o->via.u64;
		return true;
	}
	return false;
}

bool sbx_proto_get_bool(const msgpack_object *map, const char *key, bool *v)
{
	const msgpack_object *o = sbx_proto_map_get(map, key);
	if (!o || o->type != MSGPACK_OBJECT_BOOLEAN)
		return false;
	*v = o->via.boolean;
	return true;
}

bool sbx_proto_get_bin(const msgpack_object *map, const char *key, const uint8_t **p, size_t *len)
{
	const msgpack_object *o = sbx_proto_map_get(map, key);
	if (!o || o->type != MSGPACK_OBJECT_BIN)
		return false;
	*p = (const uint8_t *)o->via.bin.ptr;
	*len = o->via.bin.size;
	return true;
}

char *sbx_proto_strdup(const msgpack_object *o)
{
	if (!o || o->type != MSGPACK_OBJECT_STR)
		return NULL;
	if (o->via.str.size && memchr(o->via.str.ptr, '\0', o->via.str.size))
		return NULL;
	char *s = malloc((size_t)o->via.str.size + 1);
	if (!s)
		return NULL;
	if (o->via.str.size)
		memcpy(s, o->via.str.ptr, o->via.str.size);
	s[o->via.str.size] = '\0';
	return s;
}
