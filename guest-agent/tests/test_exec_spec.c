/* exec_spec.c and env.c: exec arguments to a spec, env merge, bad input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "env.h"
#include "exec_spec.h"

static char *base_env[] = { "PATH=/usr/bin:/bin", "HOME=/root", "LANG=C.UTF-8", NULL };

/* Parse the msgpack value described by a tiny builder callback. */
typedef void (*build_fn)(msgpack_packer *pk);

static int parse_built(build_fn build, agent_exec_spec *spec, sbx_err *err)
{
	msgpack_sbuffer buf;
	msgpack_packer pk;
	msgpack_unpacked u;
	int ret;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	build(&pk);
	msgpack_unpacked_init(&u);
	assert_int_equal(msgpack_unpack_next(&u, buf.data, buf.size, NULL), MSGPACK_UNPACK_SUCCESS);
	ret = agent_exec_spec_parse(&u.data, base_env, spec, err);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&buf);
	return ret;
}

static void str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

static const char *env_get(char **env, const char *name)
{
	size_t n = strlen(name);

	for (; *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

static size_t env_count(char **env)
{
	size_t n = 0;

	while (env[n])
		n++;
	return n;
}

static void build_argv_full(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 6);
	str(pk, "argv");
	msgpack_pack_array(pk, 2);
	str(pk, "echo");
	str(pk, "hi there");
	str(pk, "env");
	msgpack_pack_map(pk, 2);
	str(pk, "LANG");
	str(pk, "de_DE.UTF-8");
	str(pk, "FOO");
	str(pk, "a=b");
	str(pk, "cwd");
	str(pk, "/tmp");
	str(pk, "timeout_ms");
	msgpack_pack_uint64(pk, 1500);
	str(pk, "stdin");
	msgpack_pack_true(pk);
	str(pk, "unknown_key_is_ignored");
	msgpack_pack_nil(pk);
}

static void argv_full(void **state)
{
	agent_exec_spec s;
	sbx_err err = { 0 };

	assert_int_equal(parse_built(build_argv_full, &s, &err), 0);
	assert_string_equal(s.argv[0], "echo");
	assert_string_equal(s.argv[1], "hi there");
	assert_null(s.argv[2]);
	assert_false(s.shell);
	assert_string_equal(s.cwd, "/tmp");
	assert_int_equal(s.timeout_ms, 1500);
	assert_true(s.stdin_pipe);
	/* The request's variables override the base and add to it. */
	assert_string_equal(env_get(s.envp, "LANG"), "de_DE.UTF-8");
	assert_string_equal(env_get(s.envp, "FOO"), "a=b");
	assert_string_equal(env_get(s.envp, "HOME"), "/root");
	assert_int_equal(env_count(s.envp), 4);
	assert_string_equal(s.path, "/usr/bin:/bin");
	agent_exec_spec_free(&s);
}

static void build_cmd(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	str(pk, "cmd");
	str(pk, "echo hi | tr a-z A-Z");
	str(pk, "env");
	msgpack_pack_map(pk, 1);
	str(pk, "PATH");
	str(pk, "/opt/bin");
}

static void cmd_runs_sh(void **state)
{
	agent_exec_spec s;
	sbx_err err = { 0 };

	assert_int_equal(parse_built(build_cmd, &s, &err), 0);
	assert_true(s.shell);
	assert_string_equal(s.argv[0], "/bin/sh");
	assert_string_equal(s.argv[1], "-c");
	assert_string_equal(s.argv[2], "echo hi | tr a-z A-Z");
	assert_null(s.argv[3]);
	assert_null(s.cwd);
	assert_int_equal(s.timeout_ms, 0);
	assert_false(s.stdin_pipe);
	/* The lookup uses the request's PATH. */
	assert_string_equal(s.path, "/opt/bin");
	assert_int_equal(env_count(s.envp), 3);
	agent_exec_spec_free(&s);
}

/* ---- bad input: each builder and the message it must produce ---- */

static void b_none(msgpack_packer *pk) { msgpack_pack_map(pk, 0); }
static void b_not_map(msgpack_packer *pk) { msgpack_pack_array(pk, 0); }
static void b_both(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	str(pk, "cmd"); str(pk, "true");
	str(pk, "argv"); msgpack_pack_array(pk, 1); str(pk, "true");
}
static void b_argv_empty(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	str(pk, "argv"); msgpack_pack_array(pk, 0);
}
static void b_argv_int(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	str(pk, "argv"); msgpack_pack_array(pk, 2); str(pk, "echo"); msgpack_pack_int(pk, 3);
}
static void b_argv_nul(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	str(pk, "argv"); msgpack_pack_array(pk, 1); msgpack_pack_str_with_body(pk, "a\0b", 3);
}
static void b_argv0_empty(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	str(pk, "argv"); msgpack_pack_array(pk, 1); str(pk, "");
}
static void b_cmd_int(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 1);
	str(pk, "cmd"); msgpack_pack_int(pk, 1);
}
static void b_env_list(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	str(pk, "cmd"); str(pk, "true");
	str(pk, "env"); msgpack_pack_array(pk, 1); str(pk, "A=B");
}
static void b_env_eq(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	str(pk, "cmd"); str(pk, "true");
	str(pk, "env"); msgpack_pack_map(pk, 1); str(pk, "A=B"); str(pk, "c");
}
static void b_env_val_int(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	str(pk, "cmd"); str(pk, "true");
	str(pk, "env"); msgpack_pack_map(pk, 1); str(pk, "A"); msgpack_pack_int(pk, 1);
}
static void b_timeout_neg(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	str(pk, "cmd"); str(pk, "true");
	str(pk, "timeout_ms"); msgpack_pack_int(pk, -5);
}
static void b_timeout_huge(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	str(pk, "cmd"); str(pk, "true");
	str(pk, "timeout_ms"); msgpack_pack_uint64(pk, UINT64_MAX);
}
static void b_cwd_empty(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	str(pk, "cmd"); str(pk, "true");
	str(pk, "cwd"); str(pk, "");
}
static void b_stdin_str(msgpack_packer *pk)
{
	msgpack_pack_map(pk, 2);
	str(pk, "cmd"); str(pk, "true");
	str(pk, "stdin"); str(pk, "data");
}

static void bad_input(void **state)
{
	static const struct {
		build_fn build;
		const char *msg;
	} cases[] = {
		{ b_none, "exactly one of argv and cmd" },
		{ b_not_map, "arguments must be a map" },
		{ b_both, "exactly one of argv and cmd" },
		{ b_argv_empty, "argv must be a non-empty array" },
		{ b_argv_int, "argv[1] is not a string" },
		{ b_argv_nul, "argv contains a NUL byte" },
		{ b_argv0_empty, "argv[0] is empty" },
		{ b_cmd_int, "cmd must be a string" },
		{ b_env_list, "env must be a map" },
		{ b_env_eq, "without '='" },
		{ b_env_val_int, "env must be a map of strings to strings" },
		{ b_timeout_neg, "timeout_ms must be a non-negative integer" },
		{ b_timeout_huge, "timeout_ms must be at most" },
		{ b_cwd_empty, "cwd must be a non-empty string" },
		{ b_stdin_str, "stdin must be a boolean" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		agent_exec_spec s;
		sbx_err err = { 0 };
		int ret = parse_built(cases[i].build, &s, &err);
		if (ret != -EINVAL || !strstr(err.msg, cases[i].msg))
			fail_msg("case %zu: ret %d, message \"%s\", want \"%s\"", i, ret, err.msg, cases[i].msg);
		assert_null(s.argv); /* nothing left allocated */
	}
}

static void base_env_defaults(void **state)
{
	char *bare[] = { "FOO=1", "not-a-variable", NULL };
	char *with_path[] = { "PATH=/x", "HOME=/h", NULL };
	sbx_err err = { 0 };
	char **env;

	assert_int_equal(agent_env_init(bare, &err), 0);
	env = (char **)agent_env_base();
	assert_string_equal(env_get(env, "FOO"), "1");
	assert_string_equal(env_get(env, "PATH"), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	assert_non_null(env_get(env, "HOME"));
	assert_int_equal(env_count(env), 3);

	assert_int_equal(agent_env_init(with_path, &err), 0);
	env = (char **)agent_env_base();
	assert_string_equal(env_get(env, "PATH"), "/x");
	assert_string_equal(env_get(env, "HOME"), "/h");
	assert_int_equal(env_count(env), 2);
	agent_env_free();
	assert_null(agent_env_base()[0]);
}

static void env_merge_last_wins(void **state)
{
	char *base[] = { "A=1", "B=2", NULL };
	char *over[] = { "B=3", "C=4", "B=5", NULL };
	sbx_err err = { 0 };
	char **env;

	assert_int_equal(agent_env_merge(base, over, &env, &err), 0);
	assert_int_equal(env_count(env), 3);
	assert_string_equal(env_get(env, "A"), "1");
	assert_string_equal(env_get(env, "B"), "5");
	assert_string_equal(env_get(env, "C"), "4");
	free(env);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(argv_full),
		cmocka_unit_test(cmd_runs_sh),
		cmocka_unit_test(bad_input),
		cmocka_unit_test(base_env_defaults),
		cmocka_unit_test(env_merge_last_wins),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
