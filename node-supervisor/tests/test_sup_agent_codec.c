/* The agent client's side of the exec operation: the args map it sends
 * (checked by decoding with msgpack) and the validation of the result map
 * an untrusted agent sends back (sup_agent). */
#include <errno.h>
#include <msgpack.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sbx/proto.h"
#include "sup_agent.h"

static char *dup_(const char *s)
{
	return strdup(s);
}

static const msgpack_object *get(const msgpack_object *m, const char *k)
{
	return sbx_proto_map_get(m, k);
}

static bool str_eq(const msgpack_object *o, const char *s)
{
	return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == strlen(s) &&
	       memcmp(o->via.str.ptr, s, o->via.str.size) == 0;
}

static void test_encode_argv_env_merge(void **state)
{
	(void)state;
	sup_exec_spec s = { 0 };
	s.x.argc = 2;
	s.x.argv = calloc(3, sizeof(char *));
	s.x.argv[0] = dup_("echo");
	s.x.argv[1] = dup_("hi");
	s.x.cwd = dup_("/tmp");
	s.x.timeout_ms = 1500;
	s.x.env.n = 1;
	s.x.env.v = calloc(1, sizeof(sup_kv));
	s.x.env.v[0] = (sup_kv){ dup_("A"), dup_("exec") };
	sup_env base = { 0 };
	base.n = 2;
	base.v = calloc(2, sizeof(sup_kv));
	base.v[0] = (sup_kv){ dup_("A"), dup_("sandbox") };
	base.v[1] = (sup_kv){ dup_("B"), dup_("sandbox") };

	sbx_proto_args sb;
	sbx_proto_args_init(&sb);
	sbx_err e;
	size_t len;
	assert_int_equal(sup_agent_encode_exec_args(&s, &base, &sb, &e), 0);
	const char *enc = sbx_proto_args_done(&sb, &len);
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	assert_int_equal(msgpack_unpack_next(&u, enc, len, NULL), MSGPACK_UNPACK_SUCCESS);
	const msgpack_object *m = &u.data;
	assert_int_equal(m->type, MSGPACK_OBJECT_MAP);
	assert_int_equal(m->via.map.size, 4);
	const msgpack_object *argv = get(m, "argv");
	assert_non_null(argv);
	assert_int_equal(argv->via.array.size, 2);
	assert_true(str_eq(&argv->via.array.ptr[1], "hi"));
	assert_null(get(m, "cmd"));
	assert_true(str_eq(get(m, "cwd"), "/tmp"));
	uint64_t t;
	assert_true(sbx_proto_get_uint(m, "timeout_ms", &t));
	assert_int_equal(t, 1500);
	const msgpack_object *env = get(m, "env");
	assert_int_equal(env->via.map.size, 2); /* A once: the exec's value wins */
	assert_true(str_eq(get(env, "A"), "exec"));
	assert_true(str_eq(get(env, "B"), "sandbox"));
	msgpack_unpacked_destroy(&u);
	sbx_proto_args_destroy(&sb);
	sup_exec_spec_free(&s);
	sup_env_free(&base);
}

/* Encode s with no sandbox env into sb and unpack it into u (which points
 * into sb: destroy u, then sb). */
static void encode_unpack(const sup_exec_spec *s, sbx_proto_args *sb, msgpack_unpacked *u)
{
	sbx_proto_args_init(sb);
	sbx_err e;
	size_t len;
	assert_int_equal(sup_agent_encode_exec_args(s, NULL, sb, &e), 0);
	const char *enc = sbx_proto_args_done(sb, &len);
	msgpack_unpacked_init(u);
	assert_int_equal(msgpack_unpack_next(u, enc, len, NULL), MSGPACK_UNPACK_SUCCESS);
}

static void test_encode_cmd_minimal(void **state)
{
	(void)state;
	sup_exec_spec s = { 0 };
	s.x.cmd = dup_("echo hi | tr a-z A-Z");
	sbx_proto_args sb;
	msgpack_unpacked u;
	encode_unpack(&s, &sb, &u);
	assert_int_equal(u.data.via.map.size, 1);
	assert_true(str_eq(get(&u.data, "cmd"), "echo hi | tr a-z A-Z"));
	msgpack_unpacked_destroy(&u);
	sbx_proto_args_destroy(&sb);
	sup_exec_spec_free(&s);
}

static void test_encode_options(void **state)
{
	(void)state;
	sup_exec_spec s = { 0 };
	s.x.cmd = dup_("cat");
	s.x.stdin_pipe = true;
	s.x.user = dup_("sandbox");
	s.x.rlimits[SBX_RLIMIT_NOFILE] = (sbx_proto_rlimit){ .set = true, .value = 64 };
	s.x.rlimits[SBX_RLIMIT_FSIZE] = (sbx_proto_rlimit){ .set = true, .unlimited = true };
	sbx_proto_args sb;
	msgpack_unpacked u;
	encode_unpack(&s, &sb, &u);
	assert_int_equal(u.data.via.map.size, 4);
	const msgpack_object *in = get(&u.data, "stdin");
	assert_true(in && in->type == MSGPACK_OBJECT_BOOLEAN && in->via.boolean);
	assert_true(str_eq(get(&u.data, "user"), "sandbox"));
	assert_null(get(&u.data, "allow_root"));
	const msgpack_object *rl = get(&u.data, "rlimits");
	assert_true(rl && rl->type == MSGPACK_OBJECT_MAP && rl->via.map.size == 2);
	assert_int_equal(get(rl, "nofile")->via.u64, 64);
	assert_true(str_eq(get(rl, "fsize"), "unlimited"));
	msgpack_unpacked_destroy(&u);
	sbx_proto_args_destroy(&sb);
	sup_exec_spec_free(&s);
}

/* Build a result map from a tiny description: each pair is key + packer. */
static int parse_result(void (*pack)(msgpack_packer *pk), sup_exec_status *st)
{
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	pack(&pk);
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	assert_int_equal(msgpack_unpack_next(&u, sb.data, sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
	sbx_err e;
	sbx_err_clear(&e);
	int rc = sup_agent_parse_exec_result(&u.data, st, &e);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

static void kv_int(msgpack_packer *pk, const char *k, int64_t v)
{
	sbx_proto_pack_str(pk, k);
	msgpack_pack_int64(pk, v);
}

static void kv_nil(msgpack_packer *pk, const char *k)
{
	sbx_proto_pack_str(pk, k);
	msgpack_pack_nil(pk);
}

static void p_exit3(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 4);
	kv_int(pk, "exit_code", 3);
	kv_nil(pk, "signal");
	sbx_proto_pack_str(pk, "timed_out");
	msgpack_pack_false(pk);
	kv_int(pk, "duration_us", 1234);
}
static void p_signal9(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 4);
	kv_nil(pk, "exit_code");
	kv_int(pk, "signal", 9);
	sbx_proto_pack_str(pk, "timed_out");
	msgpack_pack_true(pk);
	sbx_proto_pack_str(pk, "extra_future_key");
	msgpack_pack_array(pk, 0);
}
static void p_oom9(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	kv_nil(pk, "exit_code");
	kv_int(pk, "signal", 9);
	sbx_proto_pack_str(pk, "oom_killed");
	msgpack_pack_true(pk);
}
/* an agent claiming an OOM kill for a command that exited 0 */
static void p_oom_exit(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	kv_int(pk, "exit_code", 0);
	kv_nil(pk, "signal");
	sbx_proto_pack_str(pk, "oom_killed");
	msgpack_pack_true(pk);
}
/* a shell whose child the OOM killer took */
static void p_oom_137(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	kv_int(pk, "exit_code", 137);
	kv_nil(pk, "signal");
	sbx_proto_pack_str(pk, "oom_killed");
	msgpack_pack_true(pk);
}
static void p_oom_int(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	kv_nil(pk, "exit_code");
	kv_int(pk, "signal", 9);
	kv_int(pk, "oom_killed", 1);
}
static void p_both(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	kv_int(pk, "exit_code", 0);
	kv_int(pk, "signal", 9);
}
static void p_neither(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	kv_int(pk, "duration_us", 5);
}
static void p_exit_range(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	kv_int(pk, "exit_code", 256);
}
static void p_exit_neg(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	kv_int(pk, "exit_code", -1);
}
static void p_signal_range(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	kv_int(pk, "signal", 65);
}
static void p_exit_str(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	sbx_proto_pack_str(pk, "exit_code");
	sbx_proto_pack_str(pk, "0");
}
static void p_timed_out_int(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	kv_int(pk, "exit_code", 0);
	kv_int(pk, "timed_out", 1);
}
static void p_duration_neg(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	kv_int(pk, "exit_code", 0);
	kv_int(pk, "duration_us", -5);
}
static void p_not_map(msgpack_packer *pk)
{
	msgpack_pack_array(pk, 1);
	msgpack_pack_int(pk, 0);
}

/* exit 0 with a rusage value of one of these shapes. */
enum { RU_OK, RU_NEG, RU_MISSING, RU_STR };
static int ru_shape;

static void p_rusage_shaped(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 3);
	kv_int(pk, "exit_code", 0);
	kv_nil(pk, "signal");
	sbx_proto_pack_str(pk, "rusage");
	if (ru_shape == RU_STR) {
		sbx_proto_pack_str(pk, "lots");
		return;
	}
	msgpack_pack_map(pk, ru_shape == RU_MISSING ? 1 : 3);
	kv_int(pk, "max_rss_kb", ru_shape == RU_NEG ? -1 : 2048);
	if (ru_shape == RU_MISSING)
		return;
	kv_int(pk, "user_ms", 7);
	kv_int(pk, "sys_ms", 3);
}

static void test_result_rusage(void **state)
{
	(void)state;
	sup_exec_status st;
	ru_shape = RU_OK;
	assert_int_equal(parse_result(p_rusage_shaped, &st), 0);
	assert_true(st.has_rusage);
	assert_int_equal(st.max_rss_kb, 2048);
	assert_int_equal(st.user_ms, 7);
	assert_int_equal(st.sys_ms, 3);
	for (ru_shape = RU_NEG; ru_shape <= RU_STR; ru_shape++)
		if (parse_result(p_rusage_shaped, &st) != -EPROTO)
			fail_msg("accepted hostile rusage shape %d", ru_shape);
}

static void test_result_valid(void **state)
{
	(void)state;
	sup_exec_status st;
	assert_int_equal(parse_result(p_exit3, &st), 0);
	assert_true(st.exited);
	assert_int_equal(st.exit_code, 3);
	assert_false(st.timed_out);
	assert_int_equal(st.duration_us, 1234);
	assert_int_equal(parse_result(p_signal9, &st), 0);
	assert_false(st.exited);
	assert_int_equal(st.signal, 9);
	assert_true(st.timed_out);
	assert_false(st.has_rusage);
	assert_false(st.oom_killed);
	assert_int_equal(parse_result(p_oom9, &st), 0);
	assert_true(st.oom_killed);
	assert_int_equal(parse_result(p_oom_exit, &st), 0);
	assert_false(st.oom_killed);
	assert_int_equal(parse_result(p_oom_137, &st), 0);
	assert_true(st.oom_killed);
}

static void test_result_hostile(void **state)
{
	(void)state;
	void (*bad[])(msgpack_packer *) = { p_both,      p_neither,      p_exit_range,
					    p_exit_neg,  p_signal_range, p_exit_str,
					    p_timed_out_int, p_duration_neg, p_not_map, p_oom_int };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sup_exec_status st;
		if (parse_result(bad[i], &st) != -EPROTO)
			fail_msg("accepted hostile result %zu", i);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_argv_env_merge),
		cmocka_unit_test(test_encode_cmd_minimal),
		cmocka_unit_test(test_encode_options),
		cmocka_unit_test(test_result_valid),
		cmocka_unit_test(test_result_hostile),
		cmocka_unit_test(test_result_rusage),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
