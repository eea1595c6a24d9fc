#include "sbx/proto_args.h"

#include <string.h>

#include "sbx/proto.h"

void sbx_proto_args_init(sbx_proto_args *a)
{
	memset(a, 0, sizeof(*a));
	msgpack_sbuffer_init(&a->pairs);
	msgpack_sbuffer_init(&a->map);
	msgpack_packer_init(&a->pk, &a->pairs, msgpack_sbuffer_write);
}

void sbx_proto_args_key(sbx_proto_args *a, const char *key)
{
	sbx_proto_pack_str(&a->pk, key);
	a->n++;
}

void sbx_proto_args_str(sbx_proto_args *a, const char *key, const char *v, size_t n)
{
	sbx_proto_args_key(a, key);
	sbx_proto_pack_strn(&a->pk, v, n);
}

void sbx_proto_args_uint(sbx_proto_args *a, const char *key, uint64_t v)
{
	sbx_proto_args_key(a, key);
	msgpack_pack_uint64(&a->pk, v);
}

void sbx_proto_args_bool(sbx_proto_args *a, const char *key, bool v)
{
	sbx_proto_args_key(a, key);
	if (v)
		msgpack_pack_true(&a->pk);
	else
		msgpack_pack_false(&a->pk);
}

const char *sbx_proto_args_done(sbx_proto_args *a, size_t *len)
{
	msgpack_packer pk;
	msgpack_packer_init(&pk, &a->map, msgpack_sbuffer_write);
	a->map.size = 0;
	if (msgpack_pack_map(&pk, a->n) < 0 ||
	    (a->pairs.size && msgpack_sbuffer_write(&a->map, a->pairs.data, a->pairs.size) < 0))
		return NULL;
	*len = a->map.size;
	return a->map.data;
}

void sbx_proto_args_destroy(sbx_proto_args *a)
{
	msgpack_sbuffer_destroy(&a->pairs);
	msgpack_sbuffer_destroy(&a->map);
	sbx_proto_args_init(a); /* a second destroy is harmless */
}
