#include "sbx/proto_exec.h"

#include <errno.h>
#include <string.h>

#include "sbx/proto.h"

const char *const sbx_proto_rlimit_names[SBX_RLIMITS] = { "nofile", "nproc", "fsize", "cpu" };

static bool env_has(const sbx_proto_env *e, const char *key)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->v[i].key, key) == 0)
			return true;
	return false;
}

static void pack_env(msgpack_packer *pk, const sbx_proto_env *over, const sbx_proto_env *base)
{
	size_t n = over->n;
	for (size_t i = 0; i < base->n; i++)
		n += !env_has(over, base->v[i].key);
	msgpack_pack_map(pk, n);
	for (int pass = 0; pass < 2; pass++) {
		const sbx_proto_env *e = pass ? base : over;
		for (size_t i = 0; i < e->n; i++) {
			if (pass && env_has(over, e->v[i].key))
				continue;
			sbx_proto_pack_str(pk, e->v[i].key);
			sbx_proto_pack_str(pk, e->v[i].val);
		}
	}
}

static void str_if(sbx_proto_args *a, const char *key, const char *v)
{
	if (v)
		sbx_proto_args_str(a, key, v, strlen(v));
}

void sbx_proto_exec_encode(const sbx_proto_exec_args *x, const sbx_proto_env *base,
			   sbx_proto_args *a)
{
	static const sbx_proto_env none = { 0 };
	msgpack_packer *pk = &a->pk;
	base = base ? base : &none;
	if (x->argv) {
		sbx_proto_args_key(a, "argv");
		msgpack_pack_array(pk, x->argc);
		for (size_t i = 0; i < x->argc; i++)
			sbx_proto_pack_str(pk, x->argv[i]);
	}
	str_if(a, "cmd", x->cmd);
	if (x->env.n || base->n) {
		sbx_proto_args_key(a, "env");
		pack_env(pk, &x->env, base);
	}
	str_if(a, "cwd", x->cwd);
	if (x->timeout_ms)
		sbx_proto_args_uint(a, "timeout_ms", x->timeout_ms);
	if (x->stdin_pipe)
		sbx_proto_args_bool(a, "stdin", true);
	str_if(a, "user", x->user);
	if (x->allow_root)
		sbx_proto_args_bool(a, "allow_root", true);
	uint32_t nlim = 0;
	for (int i = 0; i < SBX_RLIMITS; i++)
		nlim += x->rlimits[i].set;
	if (nlim) {
		sbx_proto_args_key(a, "rlimits");
		msgpack_pack_map(pk, nlim);
		for (int i = 0; i < SBX_RLIMITS; i++) {
			if (!x->rlimits[i].set)
				continue;
			sbx_proto_pack_str(pk, sbx_proto_rlimit_names[i]);
			if (x->rlimits[i].unlimited)
				sbx_proto_pack_str(pk, "unlimited");
			else
				msgpack_pack_uint64(pk, x->rlimits[i].value);
		}
	}
	if (x->pty) {
		sbx_proto_args_key(a, "pty");
		msgpack_pack_map(pk, (x->cols ? 1 : 0) + (x->rows ? 1 : 0));
		if (x->cols) {
			sbx_proto_pack_str(pk, "cols");
			msgpack_pack_uint16(pk, x->cols);
		}
		if (x->rows) {
			sbx_proto_pack_str(pk, "rows");
			msgpack_pack_uint16(pk, x->rows);
		}
	}
}

/* Absent and nil both mean "not given". */
static const msgpack_object *arg(const msgpack_object *args, const char *key)
{
	const msgpack_object *o = args->type == MSGPACK_OBJECT_MAP ? sbx_proto_map_get(args, key) : NULL;
	return o && o->type != MSGPACK_OBJECT_NIL ? o : NULL;
}

/* key of type t, or absent: into *out. */
static int typed(const msgpack_object *args, const char *key, msgpack_object_type t,
		 const char *want, const msgpack_object **out, sbx_err *err)
{
	*out = arg(args, key);
	if (*out && (*out)->type != t)
		return sbx_err_set(err, -EINVAL, "exec: %s must be %s", key, want);
	return 0;
}

static int decode_rlimits(const msgpack_object *o, sbx_proto_rlimit *out, sbx_err *err)
{
	if (o->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EINVAL, "exec: rlimits must be a map of limit names to integers");
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key, *v = &o->via.map.ptr[i].val;
		int id = -1;
		for (int j = 0; k->type == MSGPACK_OBJECT_STR && j < SBX_RLIMITS; j++)
			if (strlen(sbx_proto_rlimit_names[j]) == k->via.str.size &&
			    memcmp(sbx_proto_rlimit_names[j], k->via.str.ptr, k->via.str.size) == 0)
				id = j;
		if (id < 0)
			return sbx_err_set(err, -EINVAL, "exec: unknown rlimit \"%.*s\" (nofile, nproc, fsize, cpu)",
					   k->type == MSGPACK_OBJECT_STR ? (int)(k->via.str.size > 32 ? 32 : k->via.str.size) : 1,
					   k->type == MSGPACK_OBJECT_STR ? k->via.str.ptr : "?");
		if (out[id].set)
			return sbx_err_set(err, -EINVAL, "exec: rlimit %s given twice", sbx_proto_rlimit_names[id]);
		if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
			out[id].value = v->via.u64;
		else if (v->type == MSGPACK_OBJECT_STR && v->via.str.size == 9 &&
			 memcmp(v->via.str.ptr, "unlimited", 9) == 0)
			out[id].unlimited = true;
		else
			return sbx_err_set(err, -EINVAL, "exec: rlimit %s must be a non-negative integer or \"unlimited\"",
					   sbx_proto_rlimit_names[id]);
		out[id].set = true;
	}
	return 0;
}

static int decode_bool(const msgpack_object *args, const char *key, bool *out, sbx_err *err)
{
	const msgpack_object *o;
	int rc = typed(args, key, MSGPACK_OBJECT_BOOLEAN, "a boolean", &o, err);
	*out = rc == 0 && o && o->via.boolean;
	return rc;
}

int sbx_proto_exec_decode(const msgpack_object *args, sbx_proto_exec_view *v, sbx_err *err)
{
	const msgpack_object *t, *rl;
	memset(v, 0, sizeof(*v));
	if (args->type != MSGPACK_OBJECT_MAP && args->type != MSGPACK_OBJECT_NIL)
		return sbx_err_set(err, -EINVAL, "exec: arguments must be a map");
	int rc = typed(args, "argv", MSGPACK_OBJECT_ARRAY, "a non-empty array of strings", &v->argv, err);
	if (rc == 0)
		rc = typed(args, "cmd", MSGPACK_OBJECT_STR, "a string", &v->cmd, err);
	if (rc == 0)
		rc = typed(args, "env", MSGPACK_OBJECT_MAP, "a map of strings to strings", &v->env, err);
	if (rc == 0)
		rc = typed(args, "cwd", MSGPACK_OBJECT_STR, "a non-empty string", &v->cwd, err);
	if (rc == 0)
		rc = typed(args, "user", MSGPACK_OBJECT_STR, "a user name or uid", &v->user, err);
	if (rc == 0)
		rc = typed(args, "pty", MSGPACK_OBJECT_MAP, "a map {\"cols\", \"rows\"}", &v->pty, err);
	if (rc == 0)
		rc = typed(args, "timeout_ms", MSGPACK_OBJECT_POSITIVE_INTEGER, "a non-negative integer", &t, err);
	if (rc == 0 && t)
		v->timeout_ms = t->via.u64;
	if (rc == 0)
		rc = decode_bool(args, "stdin", &v->stdin_pipe, err);
	if (rc == 0)
		rc = decode_bool(args, "allow_root", &v->allow_root, err);
	rl = rc == 0 ? arg(args, "rlimits") : NULL;
	if (rl)
		rc = decode_rlimits(rl, v->rlimits, err);
	return rc;
}
