/* reset's arguments and result (sbx/proto_reset.h): what one side packs the
 * other parses back, and what either must refuse. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sbx/proto.h"
#include "sbx/proto_reset.h"
#include "test_msgpack.h"

static msgpack_unpacked u;
static msgpack_sbuffer sb;
static msgpack_packer pk;

static const msgpack_object *unpack(void)
{
	msgpack_unpacked_destroy(&u);
	msgpack_unpacked_init(&u);
	assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
	return &u.data;
}

static int setup(void **state)
{
	tm_init(&sb, &pk);
	msgpack_unpacked_init(&u);
	return 0;
}

static int teardown(void **state)
{
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
	return 0;
}

static void paths(void **state)
{
	assert_true(sbx_proto_reset_path_ok("/tmp", 4));
	assert_true(sbx_proto_reset_path_ok("/home/sandbox", 13));
	assert_true(sbx_proto_reset_path_ok("/a/.b/..c", 9));
	assert_false(sbx_proto_reset_path_ok("/", 1));
	assert_false(sbx_proto_reset_path_ok("", 0));
	assert_false(sbx_proto_reset_path_ok("tmp", 3));
	assert_false(sbx_proto_reset_path_ok("/tmp/", 5));
	assert_false(sbx_proto_reset_path_ok("//tmp", 5));
	assert_false(sbx_proto_reset_path_ok("/a//b", 5));
	assert_false(sbx_proto_reset_path_ok("/a/./b", 6));
	assert_false(sbx_proto_reset_path_ok("/a/../b", 7));
	assert_false(sbx_proto_reset_path_ok("/..", 3));
	assert_false(sbx_proto_reset_path_ok("/a\0b", 4));
	char big[SBX_RESET_PATH_MAX + 1];
	memset(big, 'x', sizeof(big));
	big[0] = '/';
	assert_true(sbx_proto_reset_path_ok(big, SBX_RESET_PATH_MAX - 1));
	assert_false(sbx_proto_reset_path_ok(big, SBX_RESET_PATH_MAX));
}

static void args_round_trip(void **state)
{
	sbx_proto_reset_args a = { .paths = { "/workspace", "/tmp", "/dev/shm" }, .npaths = 3, .timeout_ms = 700 };
	sbx_proto_reset_args b;
	sbx_err err = { 0 };
	assert_int_equal(sbx_proto_reset_pack_args(&pk, &a, &err), 0);
	assert_int_equal(sbx_proto_reset_parse_args(unpack(), &b, &err), 0);
	assert_int_equal(b.npaths, 3);
	assert_int_equal(b.timeout_ms, 700);
	assert_int_equal(b.lens[2], 8);
	assert_memory_equal(b.paths[2], "/dev/shm", 8);

	/* no timeout: the default */
	msgpack_sbuffer_clear(&sb);
	a.timeout_ms = 0;
	assert_int_equal(sbx_proto_reset_pack_args(&pk, &a, &err), 0);
	assert_int_equal(sbx_proto_reset_parse_args(unpack(), &b, &err), 0);
	assert_int_equal(b.timeout_ms, SBX_RESET_DEFAULT_TIMEOUT_MS);
}

static void args_refused(void **state)
{
	sbx_proto_reset_args a = { .paths = { "/tmp/" }, .npaths = 1 };
	sbx_proto_reset_args b;
	sbx_err err = { 0 };
	assert_int_equal(sbx_proto_reset_pack_args(&pk, &a, &err), -EINVAL);
	a.paths[0] = "/tmp";
	a.npaths = 0;
	assert_int_equal(sbx_proto_reset_pack_args(&pk, &a, &err), -EINVAL);
	a.npaths = SBX_RESET_MAX_PATHS + 1;
	assert_int_equal(sbx_proto_reset_pack_args(&pk, &a, &err), -EINVAL);
	a.npaths = 1;
	a.timeout_ms = SBX_RESET_MAX_TIMEOUT_MS + 1;
	assert_int_equal(sbx_proto_reset_pack_args(&pk, &a, &err), -EINVAL);
	assert_int_equal(sb.size, 0);

	/* what a hostile requester may send: each refused with a message */
	for (int i = 0; i < 12; i++) {
		msgpack_sbuffer_clear(&sb);
		switch (i) {
		case 0: /* nil */
			msgpack_pack_nil(&pk);
			break;
		case 1: /* {} */
			msgpack_pack_map(&pk, 0);
			break;
		case 2: /* {"paths": []} */
			msgpack_pack_map(&pk, 1);
			sbx_proto_pack_str(&pk, "paths");
			msgpack_pack_array(&pk, 0);
			break;
		case 3: /* {"paths": "/tmp"} */
			msgpack_pack_map(&pk, 1);
			sbx_proto_pack_str(&pk, "paths");
			sbx_proto_pack_str(&pk, "/tmp");
			break;
		case 4: /* {"paths": [1]} */
			msgpack_pack_map(&pk, 1);
			sbx_proto_pack_str(&pk, "paths");
			msgpack_pack_array(&pk, 1);
			msgpack_pack_int(&pk, 1);
			break;
		case 5: /* {"paths": [<17 times /tmp>]} */
			msgpack_pack_map(&pk, 1);
			sbx_proto_pack_str(&pk, "paths");
			msgpack_pack_array(&pk, SBX_RESET_MAX_PATHS + 1);
			for (unsigned k = 0; k <= SBX_RESET_MAX_PATHS; k++)
				sbx_proto_pack_str(&pk, "/tmp");
			break;
		default: { /* {"paths": [P], K: V} */
			static const char *const p[] = { "/", "/a/../b", "/tmp", "/tmp", "/tmp", "/tmp" };
			const char *path = p[i - 6];
			msgpack_pack_map(&pk, i < 8 ? 1 : 2);
			sbx_proto_pack_str(&pk, "paths");
			msgpack_pack_array(&pk, 1);
			sbx_proto_pack_str(&pk, path);
			if (i == 8) { /* an unknown key */
				sbx_proto_pack_str(&pk, "x");
				msgpack_pack_int(&pk, 1);
			} else if (i == 9) {
				sbx_proto_pack_str(&pk, "timeout_ms");
				msgpack_pack_int(&pk, -1);
			} else if (i == 10) {
				sbx_proto_pack_str(&pk, "timeout_ms");
				msgpack_pack_uint64(&pk, SBX_RESET_MAX_TIMEOUT_MS + 1);
			} else if (i == 11) {
				sbx_proto_pack_str(&pk, "timeout_ms");
				sbx_proto_pack_str(&pk, "1");
			}
			break;
		}
		}
		sbx_err_clear(&err);
		if (sbx_proto_reset_parse_args(unpack(), &b, &err) != -EINVAL)
			fail_msg("case %d accepted", i);
		assert_true(err.msg[0] != '\0');
	}
}

static void result_round_trip(void **state)
{
	sbx_proto_reset_result r = { .killed = 5, .removed = 1u << 20, .ipc_removed = 2, .duration_us = 12345 };
	sbx_proto_reset_result back;
	sbx_err err = { 0 };
	sbx_proto_reset_pack_result(&pk, &r);
	assert_int_equal(sbx_proto_reset_parse_result(unpack(), &back, &err), 0);
	assert_memory_equal(&r, &back, sizeof(r));

	/* a result missing a figure is refused (the supervisor trusts none) */
	msgpack_sbuffer_clear(&sb);
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, "killed");
	msgpack_pack_uint64(&pk, 1);
	assert_int_equal(sbx_proto_reset_parse_result(unpack(), &back, &err), -EINVAL);
	msgpack_sbuffer_clear(&sb);
	msgpack_pack_array(&pk, 0);
	assert_int_equal(sbx_proto_reset_parse_result(unpack(), &back, &err), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(paths),
		cmocka_unit_test_setup_teardown(args_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(args_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(result_round_trip, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
