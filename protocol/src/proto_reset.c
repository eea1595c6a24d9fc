/* The reset operation's arguments and result (proto_reset.h). */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "sbx/proto.h"
#include "sbx/proto_reset.h"

#define K_PATHS "paths"
#define K_TIMEOUT_MS "timeout_ms"
#define K_KILLED "killed"
#define K_REMOVED "removed"
#define K_IPC_REMOVED "ipc_removed"
#define K_DURATION_US "duration_us"

bool sbx_proto_reset_path_ok(const char *s, size_t len)
{
	if (len < 2 || len >= SBX_RESET_PATH_MAX || s[0] != '/' || s[len - 1] == '/' || memchr(s, '\0', len))
		return false;
	for (size_t i = 1; i <= len; i++) {
		/* s[i - 1] is the '/' before a component starting at i */
		size_t n = 0;
		while (i + n < len && s[i + n] != '/')
			n++;
		if (n == 0 || (n == 1 && s[i] == '.') || (n == 2 && s[i] == '.' && s[i + 1] == '.'))
			return false;
		i += n;
	}
	return true;
}

int sbx_proto_reset_pack_args(msgpack_packer *pk, const sbx_proto_reset_args *a, sbx_err *err)
{
	if (a->npaths == 0 || a->npaths > SBX_RESET_MAX_PATHS)
		return sbx_err_set(err, -EINVAL, "reset: 1..%u paths", SBX_RESET_MAX_PATHS);
	if (a->timeout_ms > SBX_RESET_MAX_TIMEOUT_MS)
		return sbx_err_set(err, -EINVAL, "reset: timeout_ms over %u", SBX_RESET_MAX_TIMEOUT_MS);
	for (size_t i = 0; i < a->npaths; i++)
		if (!sbx_proto_reset_path_ok(a->paths[i], strlen(a->paths[i])))
			return sbx_err_set(err, -EINVAL, "reset: %.200s is not an absolute, normalised folder",
					   a->paths[i]);
	msgpack_pack_map(pk, a->timeout_ms ? 2 : 1);
	sbx_proto_pack_str(pk, K_PATHS);
	msgpack_pack_array(pk, a->npaths);
	for (size_t i = 0; i < a->npaths; i++)
		sbx_proto_pack_str(pk, a->paths[i]);
	if (a->timeout_ms) {
		sbx_proto_pack_str(pk, K_TIMEOUT_MS);
		msgpack_pack_uint64(pk, a->timeout_ms);
	}
	return 0;
}

static bool key_is(const msgpack_object_kv *kv, const char *key)
{
	return kv->key.type == MSGPACK_OBJECT_STR && kv->key.via.str.size == strlen(key) &&
	       memcmp(kv->key.via.str.ptr, key, kv->key.via.str.size) == 0;
}

int sbx_proto_reset_parse_args(const msgpack_object *m, sbx_proto_reset_args *a, sbx_err *err)
{
	memset(a, 0, sizeof(*a));
	if (m->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EINVAL, "reset: arguments must be a map");
	for (uint32_t i = 0; i < m->via.map.size; i++) {
		const msgpack_object_kv *kv = &m->via.map.ptr[i];
		if (!key_is(kv, K_PATHS) && !key_is(kv, K_TIMEOUT_MS))
			return sbx_err_set(err, -EINVAL, "reset: unknown argument");
	}
	const msgpack_object *p = sbx_proto_map_get(m, K_PATHS);
	if (!p || p->type != MSGPACK_OBJECT_ARRAY || p->via.array.size == 0 ||
	    p->via.array.size > SBX_RESET_MAX_PATHS)
		return sbx_err_set(err, -EINVAL, "reset: paths must be an array of 1..%u strings",
				   SBX_RESET_MAX_PATHS);
	for (uint32_t i = 0; i < p->via.array.size; i++) {
		const msgpack_object *s = &p->via.array.ptr[i];
		if (s->type != MSGPACK_OBJECT_STR || !sbx_proto_reset_path_ok(s->via.str.ptr, s->via.str.size))
			return sbx_err_set(err, -EINVAL,
					   "reset: paths[%u] is not an absolute, normalised folder other than /",
					   i);
		a->paths[i] = s->via.str.ptr;
		a->lens[i] = s->via.str.size;
	}
	a->npaths = p->via.array.size;
	if (sbx_proto_map_get(m, K_TIMEOUT_MS) &&
	    (!sbx_proto_get_uint(m, K_TIMEOUT_MS, &a->timeout_ms) || a->timeout_ms > SBX_RESET_MAX_TIMEOUT_MS))
		return sbx_err_set(err, -EINVAL, "reset: timeout_ms must be 0..%u", SBX_RESET_MAX_TIMEOUT_MS);
	if (a->timeout_ms == 0)
		a->timeout_ms = SBX_RESET_DEFAULT_TIMEOUT_MS;
	return 0;
}

/* The result's figures, packed in this order under these keys. */
static const struct {
	const char *key;
	size_t off;
} figures[] = {
	{ K_KILLED, offsetof(sbx_proto_reset_result, killed) },
	{ K_REMOVED, offsetof(sbx_proto_reset_result, removed) },
	{ K_IPC_REMOVED, offsetof(sbx_proto_reset_result, ipc_removed) },
	{ K_DURATION_US, offsetof(sbx_proto_reset_result, duration_us) },
};

#define NFIGURES (sizeof(figures) / sizeof(figures[0]))

void sbx_proto_reset_pack_result(msgpack_packer *pk, const sbx_proto_reset_result *r)
{
	msgpack_pack_map(pk, NFIGURES);
	for (size_t i = 0; i < NFIGURES; i++) {
		sbx_proto_pack_str(pk, figures[i].key);
		msgpack_pack_uint64(pk, *(const uint64_t *)((const char *)r + figures[i].off));
	}
}

int sbx_proto_reset_parse_result(const msgpack_object *m, sbx_proto_reset_result *r, sbx_err *err)
{
	memset(r, 0, sizeof(*r));
	if (m->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EINVAL, "reset result: not a map");
	for (size_t i = 0; i < NFIGURES; i++)
		if (!sbx_proto_get_uint(m, figures[i].key, (uint64_t *)((char *)r + figures[i].off)))
			return sbx_err_set(err, -EINVAL, "reset result: %s missing or not a uint",
					   figures[i].key);
	return 0;
}
