/* Request parsing/validation and JSON rendering of the HTTP API (sup_api). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "sbx/proto.h"
#include "sup_api.h"

static const sup_api_limits lim = {
	.default_timeout_s = 3600,
	.max_timeout_s = 86400,
	.res_default = { .cpu_milli = 1000, .memory = 1u << 30, .pids = 1024, .disk = 10ull << 30 },
	.res_max = { .cpu_milli = 2000, .memory = 2u << 30, .pids = 4096, .disk = 20ull << 30 },
};

static int create(const char *body, sup_create_req *r, sbx_err *e)
{
	sbx_err_clear(e);
	return sup_api_parse_create(body, strlen(body), &lim, r, e);
}

/* POST .../timeout: the one field, whole seconds within the node's most. */
static void test_parse_timeout(void **state)
{
	(void)state;
	static const struct {
		const char *body;
		int rc;
		unsigned want;
		const char *msg;
	} cases[] = {
		{ "{\"timeout\": 600}", 0, 600, NULL },
		{ "{\"timeout\": 1}", 0, 1, NULL },
		{ "{\"timeout\": 86400}", 0, 86400, NULL },
		{ "{\"timeout\": 86401}", -EINVAL, 0, "want 1..86400 seconds" },
		{ "{\"timeout\": 0}", -EINVAL, 0, "want 1..86400 seconds" },
		{ "{\"timeout\": -5}", -EINVAL, 0, "want 1..86400 seconds" },
		{ "{\"timeout\": 1.5}", -EINVAL, 0, "integer number of seconds" },
		{ "{\"timeout\": \"60\"}", -EINVAL, 0, "integer number of seconds" },
		{ "{}", -EINVAL, 0, "is required" },
		{ "{\"timeout\": 60, \"x\": 1}", -EINVAL, 0, "only field" },
		{ "[60]", -EINVAL, 0, NULL },
		{ "", -EINVAL, 0, NULL },
		{ "{\"timeout\": 60, \"timeout\": 61}", -EINVAL, 0, NULL },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		unsigned got = 0;
		sbx_err e;
		sbx_err_clear(&e);
		int rc = sup_api_parse_timeout(cases[i].body, strlen(cases[i].body), &lim, &got, &e);
		assert_int_equal(rc, cases[i].rc);
		if (rc == 0)
			assert_int_equal(got, cases[i].want);
		if (cases[i].msg)
			assert_non_null(strstr(e.msg, cases[i].msg));
	}
}

static int exec_(const char *body, sup_exec_spec *s, sbx_err *e)
{
	sbx_err_clear(e);
	return sup_api_parse_exec(body, strlen(body), s, e);
}

static void test_create_defaults(void **state)
{
	(void)state;
	sup_create_req r;
	sbx_err e;
	assert_int_equal(create("", &r, &e), 0);
	assert_null(r.image);
	assert_int_equal(r.isolation, SUP_ISO_RUNC);
	assert_int_equal(r.timeout_s, 3600);
	assert_int_equal(r.env.n, 0);
	assert_memory_equal(&r.resources, &lim.res_default, sizeof(r.resources));
	sup_create_req_free(&r);
	assert_int_equal(create("{}", &r, &e), 0);
	assert_int_equal(r.timeout_s, 3600);
	assert_memory_equal(&r.resources, &lim.res_default, sizeof(r.resources));
	sup_create_req_free(&r);
}

/* The create body hands "resources" to sup_resources (tested there): the
 * defaults fill what it leaves out, the ceiling is the supervisor's. */
static void test_create_resources(void **state)
{
	(void)state;
	sup_create_req r;
	sbx_err e;
	assert_int_equal(create("{\"resources\":{\"cpus\":0.5,\"memory\":\"256M\"}}", &r, &e), 0);
	assert_int_equal(r.resources.cpu_milli, 500);
	assert_int_equal(r.resources.memory, 256u << 20);
	assert_int_equal(r.resources.pids, 1024);
	assert_int_equal(r.resources.disk, 10ull << 30);
	sup_create_req_free(&r);
	assert_int_equal(create("{\"resources\":{\"memory\":\"3G\"}}", &r, &e), -EINVAL);
	assert_string_equal(e.msg, "field \"resources.memory\": 3G is over this supervisor's ceiling of 2G");
	assert_int_equal(create("{\"resources\":[]}", &r, &e), -EINVAL);
	assert_int_equal(create("{\"image\":\"host\",\"resources\":{\"pids\":\"1\"}}", &r, &e), -EINVAL);
	assert_null(r.image); /* freed on failure */
}

static void test_create_full(void **state)
{
	(void)state;
	sup_create_req r;
	sbx_err e;
	assert_int_equal(create("{\"image\":\"host\",\"timeout\":60,\"env\":{\"A\":\"1\",\"B\":\"x y\"},"
				"\"isolation\":\"gvisor\"}",
				&r, &e), 0);
	assert_string_equal(r.image, "host");
	assert_int_equal(r.isolation, SUP_ISO_GVISOR);
	assert_int_equal(r.timeout_s, 60);
	assert_int_equal(r.env.n, 2);
	assert_string_equal(r.env.v[0].key, "A");
	assert_string_equal(r.env.v[0].val, "1");
	assert_string_equal(r.env.v[1].val, "x y");
	sup_create_req_free(&r);
}

/* "mcp": the mcpServers shape MCP clients' config files use, strictly. */
static void test_create_mcp(void **state)
{
	(void)state;
	sup_create_req r;
	sbx_err e;
	assert_int_equal(create("{\"mcp\":{\"servers\":{"
				"\"files\":{\"command\":\"npx\",\"args\":[\"-y\",\"@modelcontextprotocol/server-filesystem\","
				"\"\",\"/workspace\"],\"env\":{\"DEBUG\":\"1\"},\"cwd\":\"/workspace\"},"
				"\"echo\":{\"command\":\"/usr/bin/cat\"}}}}",
				&r, &e), 0);
	assert_int_equal(r.mcp.n, 2);
	const sup_mcp_server *f = &r.mcp.v[0], *c = &r.mcp.v[1];
	assert_string_equal(f->name, "files");
	assert_int_equal(f->argc, 5);
	assert_string_equal(f->argv[0], "npx");
	assert_string_equal(f->argv[2], "@modelcontextprotocol/server-filesystem");
	assert_string_equal(f->argv[3], "");
	assert_null(f->argv[5]);
	assert_int_equal(f->env.n, 1);
	assert_string_equal(f->env.v[0].key, "DEBUG");
	assert_string_equal(f->cwd, "/workspace");
	assert_string_equal(c->name, "echo");
	assert_int_equal(c->argc, 1);
	assert_string_equal(c->argv[0], "/usr/bin/cat");
	assert_null(c->argv[1]);
	assert_null(c->cwd);
	sup_create_req_free(&r);
	assert_int_equal(r.mcp.n, 0);

	static const struct {
		const char *body, *msg;
	} bad[] = {
		{ "{\"mcp\":[]}", "field \"mcp\": want" },
		{ "{\"mcp\":{}}", "field \"mcp\": want" },
		{ "{\"mcp\":{\"servers\":{},\"extra\":1}}", "field \"mcp\": want" },
		{ "{\"mcp\":{\"servers\":[]}}", "field \"mcp\": want" },
		{ "{\"mcp\":{\"servers\":{\"a\":{}}}}", "mcp server a: field \"command\" is required" },
		{ "{\"mcp\":{\"servers\":{\"a\":[]}}}", "mcp server a: want an object" },
		{ "{\"mcp\":{\"servers\":{\"a\":{\"command\":\"\"}}}}", "must not be empty" },
		{ "{\"mcp\":{\"servers\":{\"a\":{\"command\":1}}}}", "want a string" },
		{ "{\"mcp\":{\"servers\":{\"a\":{\"command\":\"x\",\"args\":\"-y\"}}}}", "\"args\": want an array" },
		{ "{\"mcp\":{\"servers\":{\"a\":{\"command\":\"x\",\"args\":[1]}}}}", "args[0]" },
		{ "{\"mcp\":{\"servers\":{\"a\":{\"command\":\"x\",\"env\":{\"A=B\":\"1\"}}}}}", "env" },
		{ "{\"mcp\":{\"servers\":{\"a\":{\"command\":\"x\",\"cwd\":\"\"}}}}", "cwd" },
		{ "{\"mcp\":{\"servers\":{\"a\":{\"command\":\"x\",\"transport\":\"sse\"}}}}",
		  "unknown field \"transport\"" },
		{ "{\"mcp\":{\"servers\":{\"../a\":{\"command\":\"x\"}}}}", "name \"../a\"" },
		{ "{\"mcp\":{\"servers\":{\".a\":{\"command\":\"x\"}}}}", "name \".a\"" },
		{ "{\"mcp\":{\"servers\":{\"a b\":{\"command\":\"x\"}}}}", "name \"a b\"" },
		{ "{\"mcp\":{\"servers\":{\"a\":{\"command\":\"x\"},\"a\":{\"command\":\"y\"}}}}", "duplicate" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (create(bad[i].body, &r, &e) != -EINVAL)
			fail_msg("accepted %s", bad[i].body);
		if (!strstr(e.msg, bad[i].msg))
			fail_msg("%s: message \"%s\" lacks \"%s\"", bad[i].body, e.msg, bad[i].msg);
		assert_int_equal(r.mcp.n, 0);
	}
	/* At most SBX_MCP_MAX_SERVERS (32). */
	char body[4096] = "{\"mcp\":{\"servers\":{";
	for (int i = 0; i < 33; i++)
		snprintf(body + strlen(body), sizeof(body) - strlen(body), "%s\"s%d\":{\"command\":\"x\"}",
			 i ? "," : "", i);
	strcat(body, "}}}");
	assert_int_equal(create(body, &r, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "more than 32"));
}

static void test_create_volumes(void **state)
{
	(void)state;
	sup_create_req r;
	sbx_err e;
	assert_int_equal(create("{\"volumes\":[{\"name\":\"proj\",\"mount\":\"/workspace/proj\"},"
				"{\"name\":\"ref\",\"mount\":\"/ref\",\"read_only\":true}]}",
				&r, &e), 0);
	assert_int_equal(r.volumes.n, 2);
	assert_string_equal(r.volumes.v[0].name, "proj");
	assert_string_equal(r.volumes.v[0].path, "/workspace/proj");
	assert_false(r.volumes.v[0].read_only);
	assert_true(r.volumes.v[1].read_only);
	json_t *a = sup_api_render_volume_mounts(r.volumes.v, r.volumes.n);
	char *txt = json_dumps(a, JSON_COMPACT);
	assert_string_equal(txt, "[{\"name\":\"proj\",\"mount\":\"/workspace/proj\",\"read_only\":false},"
				 "{\"name\":\"ref\",\"mount\":\"/ref\",\"read_only\":true}]");
	free(txt);
	json_decref(a);
	sup_create_req_free(&r);
	assert_int_equal(create("{\"volumes\":[]}", &r, &e), 0);
	assert_int_equal(r.volumes.n, 0);
	sup_create_req_free(&r);
	static const char *const bad[] = {
		"{\"volumes\":{}}",
		"{\"volumes\":[1]}",
		"{\"volumes\":[{\"name\":\"p\"}]}",
		"{\"volumes\":[{\"mount\":\"/p\"}]}",
		"{\"volumes\":[{\"name\":\"P\",\"mount\":\"/p\"}]}",
		"{\"volumes\":[{\"name\":\"p\",\"mount\":\"/\"}]}",
		"{\"volumes\":[{\"name\":\"p\",\"mount\":\"p\"}]}",
		"{\"volumes\":[{\"name\":\"p\",\"mount\":\"/p/\"}]}",
		"{\"volumes\":[{\"name\":\"p\",\"mount\":\"/proc/p\"}]}",
		"{\"volumes\":[{\"name\":\"p\",\"mount\":\"/p\\u0000x\"}]}",
		"{\"volumes\":[{\"name\":\"p\",\"mount\":\"/p\",\"read_only\":\"yes\"}]}",
		"{\"volumes\":[{\"name\":\"p\",\"mount\":\"/p\",\"ro\":true}]}",
		"{\"volumes\":[{\"name\":\"p\",\"mount\":\"/p\"},{\"name\":\"q\",\"mount\":\"/p/q\"}]}",
		"{\"volumes\":[{\"name\":\"p\",\"mount\":\"/p\"},{\"name\":\"p\",\"mount\":\"/q\"}]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = create(bad[i], &r, &e);
		if (rc != -EINVAL)
			fail_msg("accepted %s", bad[i]);
		assert_true(e.msg[0] != '\0');
	}
}

static void test_volume_create(void **state)
{
	(void)state;
	char name[SUP_VOL_NAME_MAX + 1];
	uint64_t size;
	sbx_err e;
	const char *ok = "{\"name\":\"proj\",\"size\":\"2G\"}";
	assert_int_equal(sup_api_parse_volume_create(ok, strlen(ok), name, sizeof(name), &size, &e), 0);
	assert_string_equal(name, "proj");
	assert_int_equal(size, 2ull << 30);
	ok = "{\"size\":33554432,\"name\":\"a\"}";
	assert_int_equal(sup_api_parse_volume_create(ok, strlen(ok), name, sizeof(name), &size, &e), 0);
	assert_int_equal(size, 32ull << 20);
	static const char *const bad[] = {
		"", "{", "[]", "{}", "{\"name\":\"p\"}", "{\"size\":\"1G\"}",
		"{\"name\":\"p\",\"size\":\"1G\",\"x\":1}", "{\"name\":1,\"size\":\"1G\"}",
		"{\"name\":\"../p\",\"size\":\"1G\"}", "{\"name\":\"p\",\"size\":\"1K\"}",
		"{\"name\":\"p\",\"size\":\"2T\"}", "{\"name\":\"p\",\"size\":-1}",
		"{\"name\":\"p\",\"size\":\"lots\"}", "{\"name\":\"p\",\"size\":true}",
		"{\"name\":\"p\",\"name\":\"q\",\"size\":\"1G\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = sup_api_parse_volume_create(bad[i], strlen(bad[i]), name, sizeof(name), &size, &e);
		if (rc != -EINVAL)
			fail_msg("accepted %s", bad[i]);
		assert_true(e.msg[0] != '\0');
	}
}

static void test_create_bad(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"{",                              /* malformed */
		"[]",                             /* not an object */
		"\"host\"",
		"{\"image\":1}",                  /* wrong types */
		"{\"image\":\"\"}",
		"{\"timeout\":\"60\"}",
		"{\"timeout\":1.5}",
		"{\"timeout\":0}",
		"{\"timeout\":-1}",
		"{\"timeout\":86401}",
		"{\"timeout\":true}",
		"{\"env\":[]}",
		"{\"env\":{\"A\":1}}",
		"{\"env\":{\"A=B\":\"1\"}}",
		"{\"env\":{\"\":\"1\"}}",
		"{\"env\":{\"A\":\"x\\u0000y\"}}",
		"{\"env\":{\"A\\u0000B\":\"x\"}}",
		"{\"imag\":\"host\"}",            /* unknown field */
		"{\"isolation\":\"kata\"}",       /* unknown isolation */
		"{\"isolation\":\"gvisor \"}",
		"{\"isolation\":\"gvisor\\u0000\"}",
		"{\"isolation\":1}",
		"{\"isolation\":null}",
		"{\"image\\u0000x\":\"host\"}",
		"{\"image\":\"host\",\"image\":\"host\"}", /* duplicate */
		"{\"timeout\":99999999999999999999999}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sup_create_req r;
		sbx_err e;
		int rc = create(bad[i], &r, &e);
		if (rc != -EINVAL)
			fail_msg("accepted %s", bad[i]);
		assert_true(e.msg[0] != '\0');
	}
}

static void test_create_message_names_field(void **state)
{
	(void)state;
	sup_create_req r;
	sbx_err e;
	assert_int_equal(create("{\"timeout\":\"x\"}", &r, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "timeout"));
	assert_int_equal(create("{\"bogus\":1}", &r, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "bogus"));
}

static void test_exec_argv(void **state)
{
	(void)state;
	sup_exec_spec s;
	sbx_err e;
	assert_int_equal(exec_("{\"argv\":[\"echo\",\"hi\",\"\"],\"cwd\":\"/tmp\",\"timeout\":1.5,"
			       "\"env\":{\"X\":\"y\"}}", &s, &e), 0);
	assert_int_equal(s.x.argc, 3);
	assert_string_equal(s.x.argv[0], "echo");
	assert_string_equal(s.x.argv[2], "");
	assert_null(s.x.argv[3]);
	assert_null(s.x.cmd);
	assert_string_equal(s.x.cwd, "/tmp");
	assert_int_equal(s.x.timeout_ms, 1500);
	assert_int_equal(s.x.env.n, 1);
	sup_exec_spec_free(&s);
}

static void test_exec_cmd(void **state)
{
	(void)state;
	sup_exec_spec s;
	sbx_err e;
	assert_int_equal(exec_("{\"cmd\":\"echo hi | tr a-z A-Z\",\"timeout\":2}", &s, &e), 0);
	assert_string_equal(s.x.cmd, "echo hi | tr a-z A-Z");
	assert_null(s.x.argv);
	assert_int_equal(s.x.timeout_ms, 2000);
	sup_exec_spec_free(&s);
	/* A tiny timeout still rounds up to a real one. */
	assert_int_equal(exec_("{\"cmd\":\"true\",\"timeout\":0.0001}", &s, &e), 0);
	assert_int_equal(s.x.timeout_ms, 1);
	sup_exec_spec_free(&s);
}

static void test_exec_bad(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"",
		"{}",                                   /* neither */
		"{\"argv\":[\"a\"],\"cmd\":\"b\"}",    /* both */
		"{\"argv\":[]}",
		"{\"argv\":\"echo hi\"}",
		"{\"argv\":[\"echo\",1]}",
		"{\"argv\":[\"\"]}",
		"{\"argv\":[\"a\\u0000b\"]}",
		"{\"cmd\":\"\"}",
		"{\"cmd\":[\"echo\"]}",
		"{\"cmd\":\"x\\u0000\"}",
		"{\"cmd\":\"true\",\"cwd\":\"tmp\"}",
		"{\"cmd\":\"true\",\"cwd\":1}",
		"{\"cmd\":\"true\",\"timeout\":0}",
		"{\"cmd\":\"true\",\"timeout\":-2}",
		"{\"cmd\":\"true\",\"timeout\":\"5\"}",
		"{\"cmd\":\"true\",\"timeout\":1e12}",
		"{\"cmd\":\"true\",\"env\":{\"A\":null}}",
		"{\"cmd\":\"true\",\"stdin\":1}",
		"{\"cmd\":\"true\",\"stdin_b64\":\"eA=\"}",
		"{\"cmd\":\"true\",\"stdin_b64\":\"e*==\"}",
		"{\"cmd\":\"true\",\"stdin_b64\":\"e===\"}",
		"{\"cmd\":\"true\",\"stdin\":\"x\",\"stdin_b64\":\"eA==\"}",
		"{\"cmd\":\"true\",\"user\":\"\"}",
		"{\"cmd\":\"true\",\"user\":7}",
		"{\"cmd\":\"true\",\"rlimits\":{\"nofile\":-1}}",
		"{\"cmd\":\"true\",\"rlimits\":{\"core\":1}}",
		"{\"cmd\":\"true\",\"rlimits\":{\"cpu\":\"lots\"}}",
		"{\"cmd\":\"true\",\"max_output\":-1}",
		"{\"cmd\":\"true\",\"max_output\":1.5}",
		"{\"cmd\":\"true\",\"max_output\":1099511627776}",
		"{\"cmd\":\"true\",\"pty\":true}",
		"{\"cmd\":\"true\",\"pty\":{\"cols\":0}}",
		"{\"cmd\":\"true\",\"pty\":{\"rows\":70000}}",
		"{\"cmd\":\"true\",\"pty\":{\"width\":80}}",
		"{\"cmd\":\"true\"} trailing",
		"{\"cmd\":\"tr\\ud800\"}",             /* lone surrogate */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sup_exec_spec s;
		sbx_err e;
		if (exec_(bad[i], &s, &e) != -EINVAL)
			fail_msg("accepted %s", bad[i]);
	}
}

static void test_exec_options(void **state)
{
	(void)state;
	sup_exec_spec s;
	sbx_err e;
	assert_int_equal(exec_("{\"cmd\":\"cat\",\"stdin_b64\":\"AP8=\",\"user\":\"sandbox\","
			       "\"rlimits\":{\"nofile\":10,\"cpu\":\"unlimited\"},\"max_output\":0}",
			       &s, &e),
			 0);
	assert_true(s.x.stdin_pipe);
	assert_int_equal(s.stdin_len, 2);
	assert_int_equal(s.stdin_data[0], 0);
	assert_int_equal(s.stdin_data[1], 0xff);
	assert_string_equal(s.x.user, "sandbox");
	assert_true(s.x.rlimits[SBX_RLIMIT_NOFILE].set);
	assert_int_equal(s.x.rlimits[SBX_RLIMIT_NOFILE].value, 10);
	assert_true(s.x.rlimits[SBX_RLIMIT_CPU].unlimited);
	assert_false(s.x.rlimits[SBX_RLIMIT_NPROC].set);
	assert_true(s.max_output_set);
	assert_int_equal(s.max_output, 0);
	assert_false(s.x.allow_root); /* never from a client */
	sup_exec_spec_free(&s);
	/* stdin is text: NUL only through stdin_b64. */
	assert_int_equal(exec_("{\"cmd\":\"cat\",\"stdin\":\"a\\u0000b\"}", &s, &e), -EINVAL);
	assert_int_equal(exec_("{\"cmd\":\"cat\",\"stdin\":\"h\u00e9\"}", &s, &e), 0);
	assert_int_equal(s.stdin_len, 3);
	assert_memory_equal(s.stdin_data, "h\xc3\xa9", 3);
	sup_exec_spec_free(&s);
	assert_int_equal(exec_("{\"cmd\":\"true\",\"allow_root\":true}", &s, &e), -EINVAL);
}

static void test_exec_argv_limit(void **state)
{
	(void)state;
	size_t n = SUP_API_MAX_ARGV + 1;
	char *body = malloc(n * 4 + 32);
	strcpy(body, "{\"argv\":[");
	for (size_t i = 0; i < n; i++)
		strcat(body, i ? ",\"a\"" : "\"a\"");
	strcat(body, "]}");
	sup_exec_spec s;
	sbx_err e;
	assert_int_equal(exec_(body, &s, &e), -EINVAL);
	free(body);
}

static json_t *parse(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);
	assert_non_null(j);
	return j;
}

/* POST .../processes: the exec body's parser leaves its own keys alone. */
static void test_exec_obj_skip(void **state)
{
	static const char *const skip[] = { "tag", "buffer", NULL };
	json_t *j = parse("{\"cmd\":\"sleep 1\",\"tag\":7,\"buffer\":\"x\",\"cwd\":\"/tmp\"}");
	sup_exec_spec s;
	sbx_err e;
	assert_int_equal(sup_api_parse_exec_obj(j, skip, &s, &e), 0);
	assert_string_equal(s.x.cmd, "sleep 1");
	assert_string_equal(s.x.cwd, "/tmp");
	sup_exec_spec_free(&s);
	assert_int_equal(sup_api_parse_exec_obj(j, NULL, &s, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "unknown field"));
	json_decref(j);
}

static void test_render_sandbox(void **state)
{
	(void)state;
	sup_sandbox_view v = { .id = "sb-0123456789ab", .state = "running", .image = "host",
			       .expires_at = 3600, .agent_streams = 2, .agent_waiting = 1,
			       .agent_queued = 4096, .agent_timeouts = 3,
			       .resources = { .cpu_milli = 500, .memory = 1u << 28, .pids = 256,
					      .disk = 1u << 29 } };
	json_t *j = sup_api_render_sandbox(&v);
	char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	assert_string_equal(s, "{\"agent\":{\"queued_bytes\":4096,\"streams\":2,\"timeouts\":3,"
			       "\"waiting\":1},\"created_at\":\"1970-01-01T00:00:00Z\","
			       "\"expires_at\":\"1970-01-01T01:00:00Z\",\"id\":\"sb-0123456789ab\","
			       "\"image\":\"host\",\"isolation\":\"runc\",\"resources\":{\"cpus\":0.5,\"disk\":536870912,"
			       "\"memory\":268435456,\"pids\":256},\"state\":\"running\"}");
	free(s);
	json_decref(j);
	v.has_usage = true;
	v.usage = (sup_usage){ .memory = 1, .memory_peak = 2, .cpu_ns = 250000000, .pids = 3,
			       .disk = 4, .oom_kills = 5, .known = 0x3f };
	j = sup_api_render_sandbox(&v);
	s = json_dumps(json_object_get(j, "usage"), JSON_SORT_KEYS | JSON_COMPACT);
	assert_string_equal(s, "{\"cpu_seconds\":0.25,\"disk_bytes\":4,\"memory_bytes\":1,"
			       "\"memory_peak_bytes\":2,\"oom_kills\":5,\"pids\":3}");
	free(s);
	json_decref(j);
	/* failed: the reason, which may quote the guest's bytes */
	v.state = "failed";
	v.reason = "the agent broke the protocol: \xff";
	j = sup_api_render_sandbox(&v);
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "reason")),
			    "the agent broke the protocol: \xEF\xBF\xBD");
	json_decref(j);
	v.isolation = SUP_ISO_GVISOR;
	j = sup_api_render_sandbox(&v);
	assert_string_equal(json_string_value(json_object_get(j, "isolation")), "gvisor");
	json_decref(j);
}

static void test_render_exec_exit(void **state)
{
	(void)state;
	sup_exec_result r = { 0 };
	r.st.exited = true;
	r.st.exit_code = 3;
	r.st.duration_us = 1499;
	r.out = (const uint8_t *)"hi\n";
	r.out_len = 3;
	r.err = (const uint8_t *)"a\0b";
	r.err_len = 3;
	json_t *j = sup_api_render_exec(&r);
	char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	assert_string_equal(s, "{\"duration_ms\":1,\"exit_code\":3,\"oom_killed\":false,"
			       "\"signal\":null,\"stderr\":\"a\\u0000b\",\"stdout\":\"hi\\n\","
			       "\"timed_out\":false,\"truncated\":false}");
	free(s);
	json_decref(j);
}

static void test_render_exec_signal_and_binary(void **state)
{
	(void)state;
	sup_exec_result r = { 0 };
	r.st.signal = 9;
	r.st.timed_out = true;
	r.st.oom_killed = true;
	r.out = (const uint8_t *)"ok\xff\xfe";
	r.out_len = 4;
	r.out_truncated = true;
	json_t *j = sup_api_render_exec(&r);
	assert_true(json_is_null(json_object_get(j, "exit_code")));
	assert_string_equal(json_string_value(json_object_get(j, "signal")), "KILL");
	assert_true(json_is_true(json_object_get(j, "timed_out")));
	assert_true(json_is_true(json_object_get(j, "oom_killed")));
	assert_true(json_is_true(json_object_get(j, "truncated")));
	assert_string_equal(json_string_value(json_object_get(j, "stdout")),
			    "ok\xEF\xBF\xBD\xEF\xBF\xBD");
	assert_string_equal(json_string_value(json_object_get(j, "stdout_b64")), "b2v//g==");
	assert_null(json_object_get(j, "stderr_b64"));
	assert_string_equal(json_string_value(json_object_get(j, "stderr")), "");
	json_decref(j);
}

/* A command whose agent let the deadline pass: the timed-out result the
 * supervisor made up says the kill is not confirmed (the route adds the
 * error beside it). */
static void test_render_exec_timeout(void **state)
{
	(void)state;
	sup_exec_result r = { 0 };
	r.st.signal = 9;
	r.st.timed_out = true;
	r.st.kill_unconfirmed = true;
	r.st.duration_us = 4000000;
	r.out = (const uint8_t *)"partial\n";
	r.out_len = 8;
	json_t *j = sup_api_render_exec(&r);
	char *s = json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT);
	assert_string_equal(s, "{\"duration_ms\":4000,\"exit_code\":null,\"kill_confirmed\":false,"
			       "\"oom_killed\":false,\"signal\":\"KILL\",\"stderr\":\"\","
			       "\"stdout\":\"partial\\n\",\"timed_out\":true,\"truncated\":false}");
	free(s);
	json_decref(j);
}

/* An fs.list result of one entry at path rel (stat keys of a file). */
static void listing_of(const char *rel, msgpack_sbuffer *sb, msgpack_unpacked *u)
{
	static const char *const keys[] = { "size", "mode", "mtime_ns", "uid", "gid", "nlink", "ino" };
	msgpack_packer pk;
	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, "entries");
	msgpack_pack_array(&pk, 1);
	msgpack_pack_map(&pk, 3 + 7);
	sbx_proto_pack_str(&pk, "path");
	sbx_proto_pack_str(&pk, rel);
	sbx_proto_pack_str(&pk, "name");
	sbx_proto_pack_str(&pk, "x");
	sbx_proto_pack_str(&pk, "type");
	sbx_proto_pack_str(&pk, "file");
	for (size_t i = 0; i < 7; i++) {
		sbx_proto_pack_str(&pk, keys[i]);
		msgpack_pack_uint64(&pk, i == 1 ? 0644 : 1);
	}
	msgpack_unpacked_init(u);
	assert_int_equal(msgpack_unpack_next(u, sb->data, sb->size, NULL), MSGPACK_UNPACK_SUCCESS);
}

/* A listing's entries name paths below the folder, in normal form: an
 * agent's "../../etc/shadow" was shown as /workspace/../../etc/shadow
 * (found by fuzz_agent_reply). */
static void test_render_listing_paths(void **state)
{
	(void)state;
	msgpack_sbuffer sb;
	msgpack_unpacked u;
	sbx_err e;
	listing_of("a/b", &sb, &u);
	json_t *o = sup_api_render_listing("/workspace", &u.data, &e);
	assert_non_null(o);
	json_t *ent = json_array_get(json_object_get(o, "entries"), 0);
	assert_string_equal(json_string_value(json_object_get(ent, "path")), "/workspace/a/b");
	json_decref(o);
	msgpack_unpacked_destroy(&u);
	msgpack_sbuffer_destroy(&sb);
	static const char *const bad[] = { "../../etc/shadow", "a/../../x", "./x", "a/.",
					   "a//b", "a/", "/etc", "", ".." };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		listing_of(bad[i], &sb, &u);
		sbx_err_clear(&e);
		o = sup_api_render_listing("/workspace", &u.data, &e);
		if (o)
			fail_msg("entry path \"%s\" accepted", bad[i]);
		assert_int_equal(e.code, -EPROTO);
		msgpack_unpacked_destroy(&u);
		msgpack_sbuffer_destroy(&sb);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create_defaults),
		cmocka_unit_test(test_create_full),
		cmocka_unit_test(test_create_resources),
		cmocka_unit_test(test_create_bad),
		cmocka_unit_test(test_create_mcp),
		cmocka_unit_test(test_create_volumes),
		cmocka_unit_test(test_volume_create),
		cmocka_unit_test(test_create_message_names_field),
		cmocka_unit_test(test_exec_argv),
		cmocka_unit_test(test_exec_cmd),
		cmocka_unit_test(test_exec_bad),
		cmocka_unit_test(test_exec_options),
		cmocka_unit_test(test_exec_argv_limit),
		cmocka_unit_test(test_exec_obj_skip),
		cmocka_unit_test(test_render_sandbox),
		cmocka_unit_test(test_parse_timeout),
		cmocka_unit_test(test_render_exec_timeout),
		cmocka_unit_test(test_render_exec_exit),
		cmocka_unit_test(test_render_exec_signal_and_binary),
		cmocka_unit_test(test_render_listing_paths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
