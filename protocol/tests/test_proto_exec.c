/* The exec arguments' codec: what the requester encodes, the agent's
 * decoder reads back key by key; the sandbox env under the request's; the
 * types and rlimits it refuses. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sbx/proto.h"
#include "sbx/proto_exec.h"

static const msgpack_object *get(const msgpack_object *m, const char *k)
{
	return sbx_proto_map_get(m, k);
}

static bool str_is(const msgpack_object *o, const char *s)
{
	return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
	       memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

static void test_round_trip(void **state)
{
	char *argv[] = { "ls", "-l", NULL };
	sbx_proto_kv over[] = { { "A", "exec" } }, base[] = { { "A", "sandbox" }, { "B", "b" } };
	sbx_proto_env benv = { base, 2 };
	sbx_proto_exec_args x = { .argv = argv, .argc = 2, .env = { over, 1 }, .cwd = "/tmp",
				  .timeout_ms = 1500, .stdin_pipe = true, .user = "sandbox",
				  .allow_root = true, .pty = true, .cols = 100, .rows = 30 };
	x.rlimits[SBX_RLIMIT_NOFILE] = (sbx_proto_rlimit){ .set = true, .value = 64 };
	x.rlimits[SBX_RLIMIT_CPU] = (sbx_proto_rlimit){ .set = true, .unlimited = true };
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_exec_encode(&x, &benv, &a);
	size_t len;
	const char *enc = sbx_proto_args_done(&a, &len);
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	assert_int_equal(msgpack_unpack_next(&u, enc, len, NULL), MSGPACK_UNPACK_SUCCESS);
	sbx_proto_exec_view v;
	sbx_err e;
	assert_int_equal(sbx_proto_exec_decode(&u.data, &v, &e), 0);
	assert_int_equal(v.argv->via.array.size, 2);
	assert_true(str_is(&v.argv->via.array.ptr[1], "-l"));
	assert_null(v.cmd);
	assert_int_equal(v.env->via.map.size, 2); /* A once: the request's wins */
	assert_true(str_is(get(v.env, "A"), "exec"));
	assert_true(str_is(get(v.env, "B"), "b"));
	assert_true(str_is(v.cwd, "/tmp"));
	assert_true(str_is(v.user, "sandbox"));
	assert_int_equal(v.timeout_ms, 1500);
	assert_true(v.stdin_pipe && v.allow_root);
	assert_true(v.rlimits[SBX_RLIMIT_NOFILE].set && v.rlimits[SBX_RLIMIT_NOFILE].value == 64);
	assert_true(v.rlimits[SBX_RLIMIT_CPU].unlimited);
	assert_false(v.rlimits[SBX_RLIMIT_NPROC].set);
	uint64_t c;
	assert_true(sbx_proto_get_uint(v.pty, "cols", &c) && c == 100);
	msgpack_unpacked_destroy(&u);
	sbx_proto_args_destroy(&a);
}

/* Decode text built with msgpack_pack_* calls in pack. */
static int decode(void (*pack)(msgpack_packer *pk), sbx_err *e)
{
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pack(&pk);
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
	sbx_proto_exec_view v;
	int rc = sbx_proto_exec_decode(&u.data, &v, e);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static void cwd_int(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	sbx_proto_pack_str(pk, "cwd");
	msgpack_pack_int(pk, 1);
}

static void rlimit_twice(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	sbx_proto_pack_str(pk, "rlimits");
	msgpack_pack_map(pk, 2);
	sbx_proto_pack_str(pk, "cpu");
	msgpack_pack_int(pk, 1);
	sbx_proto_pack_str(pk, "cpu");
	msgpack_pack_int(pk, 2);
}

static void rlimit_unknown(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	sbx_proto_pack_str(pk, "rlimits");
	msgpack_pack_map(pk, 1);
	sbx_proto_pack_str(pk, "stack");
	msgpack_pack_int(pk, 1);
}

static void not_a_map(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 0);
}

static void test_refused(void **state)
{
	sbx_err e;
	assert_int_equal(decode(cwd_int, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "cwd"));
	assert_int_equal(decode(rlimit_twice, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "twice"));
	assert_int_equal(decode(rlimit_unknown, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "stack"));
	assert_int_equal(decode(not_a_map, &e), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
