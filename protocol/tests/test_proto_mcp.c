/* The mcp.* arguments and results (sbx/proto_mcp.h): what one side packs
 * the other parses back, and what either must refuse. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sbx/proto.h"
#include "sbx/proto_mcp.h"
#include "test_msgpack.h"

typedef struct packed {
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_unpacked u;
} packed;

static void begin(packed *p)
{
	tm_init(&p->sb, &p->pk);
	msgpack_unpacked_init(&p->u);
}

static const msgpack_object *obj(packed *p)
{
	assert_int_equal(msgpack_unpack_next(&p->u, p->sb.data, p->sb.size, NULL), MSGPACK_UNPACK_SUCCESS);
	return &p->u.data;
}

static void end(packed *p)
{
	msgpack_unpacked_destroy(&p->u);
	msgpack_sbuffer_destroy(&p->sb);
}

static void names(void **state)
{
	assert_true(sbx_proto_mcp_name_ok("files", 5));
	assert_true(sbx_proto_mcp_name_ok("a.b_c-D9", 8));
	assert_false(sbx_proto_mcp_name_ok("", 0));
	assert_false(sbx_proto_mcp_name_ok(".hidden", 7));
	assert_false(sbx_proto_mcp_name_ok("a/b", 3));
	assert_false(sbx_proto_mcp_name_ok("a b", 3));
	assert_false(sbx_proto_mcp_name_ok("a\0b", 3));
	assert_false(sbx_proto_mcp_name_ok("%2e%2e", 6));
	char longname[SBX_MCP_NAME_MAX + 2];
	memset(longname, 'x', sizeof(longname));
	assert_true(sbx_proto_mcp_name_ok(longname, SBX_MCP_NAME_MAX));
	assert_false(sbx_proto_mcp_name_ok(longname, SBX_MCP_NAME_MAX + 1));
}

static void config_round_trip(void **state)
{
	const char *argv[] = { "node", "server.js", NULL };
	const char *env[] = { "A=1", "B=x=y", NULL };
	sbx_proto_mcp_config c = { .name = "srv", .argv = argv, .env = env, .cwd = "/w", .max_line = 8192 };
	const char *name;
	size_t len;
	uint64_t max_line;
	sbx_err err = { 0 };
	packed p;

	begin(&p);
	assert_int_equal(sbx_proto_mcp_pack_config(&p.pk, &c, &err), 0);
	const msgpack_object *o = obj(&p);
	assert_int_equal(sbx_proto_mcp_parse_config(o, &name, &len, &max_line, &err), 0);
	assert_int_equal(len, 3);
	assert_memory_equal(name, "srv", 3);
	assert_int_equal(max_line, 8192);
	const char *v;
	size_t vlen;
	assert_true(sbx_proto_get_str(sbx_proto_map_get(o, "env"), "B", &v, &vlen));
	assert_int_equal(vlen, 3);
	assert_memory_equal(v, "x=y", 3);
	end(&p);

	/* Defaults and refusals on the packing side. */
	c.max_line = 0;
	c.env = NULL;
	c.cwd = NULL;
	begin(&p);
	assert_int_equal(sbx_proto_mcp_pack_config(&p.pk, &c, &err), 0);
	assert_int_equal(sbx_proto_mcp_parse_config(obj(&p), &name, &len, &max_line, &err), 0);
	assert_int_equal(max_line, SBX_MCP_DEFAULT_MAX_LINE);
	end(&p);
	c.max_line = 100;
	assert_int_equal(sbx_proto_mcp_pack_config(&p.pk, &c, &err), -EINVAL);
	c.max_line = 0;
	c.argv = (const char *const[]){ NULL };
	assert_int_equal(sbx_proto_mcp_pack_config(&p.pk, &c, &err), -EINVAL);
	c.argv = argv;
	c.env = (const char *const[]){ "NOEQUALS", NULL };
	assert_int_equal(sbx_proto_mcp_pack_config(&p.pk, &c, &err), -EINVAL);
	c.env = NULL;
	c.name = "../etc";
	assert_int_equal(sbx_proto_mcp_pack_config(&p.pk, &c, &err), -EINVAL);
}

static void config_refusals(void **state)
{
	const char *name;
	size_t len;
	uint64_t max_line;
	sbx_err err = { 0 };
	packed p;

	/* exec's keys a server does not take */
	begin(&p);
	msgpack_pack_map(&p.pk, 2);
	sbx_proto_pack_str(&p.pk, "name");
	sbx_proto_pack_str(&p.pk, "x");
	sbx_proto_pack_str(&p.pk, "pty");
	msgpack_pack_map(&p.pk, 0);
	assert_int_equal(sbx_proto_mcp_parse_config(obj(&p), &name, &len, &max_line, &err), -EINVAL);
	assert_non_null(strstr(err.msg, "unknown argument pty"));
	end(&p);
	/* a non-str key */
	begin(&p);
	msgpack_pack_map(&p.pk, 1);
	msgpack_pack_int(&p.pk, 1);
	msgpack_pack_int(&p.pk, 1);
	assert_int_equal(sbx_proto_mcp_parse_config(obj(&p), &name, &len, &max_line, &err), -EINVAL);
	end(&p);
	/* max_line out of range, of the wrong type */
	for (int i = 0; i < 3; i++) {
		begin(&p);
		msgpack_pack_map(&p.pk, 2);
		sbx_proto_pack_str(&p.pk, "name");
		sbx_proto_pack_str(&p.pk, "x");
		sbx_proto_pack_str(&p.pk, "max_line");
		if (i == 0)
			msgpack_pack_uint64(&p.pk, SBX_MCP_MAX_MAX_LINE + 1);
		else if (i == 1)
			msgpack_pack_int64(&p.pk, -5);
		else
			sbx_proto_pack_str(&p.pk, "4096");
		assert_int_equal(sbx_proto_mcp_parse_config(obj(&p), &name, &len, &max_line, &err), -EINVAL);
		end(&p);
	}
	/* not a map */
	begin(&p);
	msgpack_pack_nil(&p.pk);
	assert_int_equal(sbx_proto_mcp_parse_config(obj(&p), &name, &len, &max_line, &err), -EINVAL);
	end(&p);
}

static void open_and_opened(void **state)
{
	const char *name;
	size_t len;
	uint64_t idle;
	int64_t pid;
	bool spare;
	sbx_err err = { 0 };
	packed p;

	begin(&p);
	sbx_proto_mcp_pack_open(&p.pk, "s1", 0);
	assert_int_equal(sbx_proto_mcp_parse_open(obj(&p), &name, &len, &idle, &err), 0);
	assert_int_equal(idle, 0);
	end(&p);
	begin(&p);
	sbx_proto_mcp_pack_open(&p.pk, "s1", SBX_MCP_MAX_IDLE_MS + 1);
	assert_int_equal(sbx_proto_mcp_parse_open(obj(&p), &name, &len, &idle, &err), -EINVAL);
	end(&p);
	begin(&p);
	sbx_proto_mcp_pack_name(&p.pk, "s1");
	assert_int_equal(sbx_proto_mcp_parse_open(obj(&p), &name, &len, &idle, &err), 0);
	assert_int_equal(idle, SBX_MCP_DEFAULT_IDLE_MS);
	end(&p);
	begin(&p);
	sbx_proto_mcp_pack_opened(&p.pk, 77, true);
	assert_int_equal(sbx_proto_mcp_parse_opened(obj(&p), &pid, &spare, &err), 0);
	assert_int_equal(pid, 77);
	assert_true(spare);
	end(&p);
	begin(&p);
	sbx_proto_mcp_pack_opened(&p.pk, 0, false);
	assert_int_equal(sbx_proto_mcp_parse_opened(obj(&p), &pid, &spare, &err), -EPROTO);
	end(&p);
}

static void status_list_round_trip(void **state)
{
	sbx_proto_mcp_status in[2] = {
		{ .name = "a", .state = SBX_MCP_READY, .max_line = 4096, .spare_pid = 12, .sessions = 1, .opened = 5,
		  .started = 6, .msgs_in = 10, .msgs_out = 11 },
		{ .name = "b", .state = SBX_MCP_CRASHED, .max_line = 1024, .crashes = 2, .has_exit = true,
		  .exit_code = -1, .exit_signal = 9, .stderr_tail = "one\n\nthree" },
	};
	sbx_proto_mcp_status *out = NULL;
	sbx_err err = { 0 };
	size_t n;
	packed p;

	begin(&p);
	sbx_proto_mcp_pack_list(&p.pk, in, 2);
	assert_int_equal(sbx_proto_mcp_parse_list(obj(&p), &out, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_memory_equal(&out[0], &in[0], sizeof(in[0]));
	assert_string_equal(out[1].stderr_tail, "one\n\nthree");
	assert_int_equal(out[1].exit_signal, 9);
	assert_int_equal(out[1].exit_code, -1);
	assert_true(out[1].has_exit);
	assert_int_equal(out[1].state, SBX_MCP_CRASHED);
	free(out);
	end(&p);
}

/* The supervisor trusts no status from a guest. */
static void status_refusals(void **state)
{
	static const char *const bad[] = { "state", "spare_pid", "stderr_nl", "stderr_long", "exit", "count" };
	sbx_proto_mcp_status st = { .name = "a", .state = SBX_MCP_READY };
	sbx_proto_mcp_status *out;
	sbx_err err = { 0 };
	size_t n;
	packed p;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		begin(&p);
		msgpack_pack_map(&p.pk, 1);
		sbx_proto_pack_str(&p.pk, "servers");
		msgpack_pack_array(&p.pk, 1);
		/* A good status with one field made bad, packed by hand. */
		msgpack_pack_map(&p.pk, 13);
		sbx_proto_pack_str(&p.pk, "name");
		sbx_proto_pack_str(&p.pk, "a");
		sbx_proto_pack_str(&p.pk, "state");
		sbx_proto_pack_str(&p.pk, strcmp(bad[i], "state") ? "ready" : "exploded");
		sbx_proto_pack_str(&p.pk, "spare_pid");
		msgpack_pack_int64(&p.pk, strcmp(bad[i], "spare_pid") ? 1 : -4);
		static const char *const counters[] = { "max_line", "sessions", "opened", "started",
							"crashes",  "bad_output", "msgs_in", "msgs_out" };
		for (size_t k = 0; k < 8; k++) {
			sbx_proto_pack_str(&p.pk, counters[k]);
			if (k == 7 && !strcmp(bad[i], "count"))
				msgpack_pack_int64(&p.pk, -1);
			else
				msgpack_pack_uint64(&p.pk, 1);
		}
		sbx_proto_pack_str(&p.pk, "last_exit");
		msgpack_pack_map(&p.pk, 2);
		sbx_proto_pack_str(&p.pk, "exit_code");
		msgpack_pack_int64(&p.pk, strcmp(bad[i], "exit") ? 1 : 9999);
		sbx_proto_pack_str(&p.pk, "signal");
		msgpack_pack_int64(&p.pk, 0);
		sbx_proto_pack_str(&p.pk, "stderr");
		msgpack_pack_array(&p.pk, 1);
		if (!strcmp(bad[i], "stderr_nl")) {
			sbx_proto_pack_str(&p.pk, "a\nb");
		} else if (!strcmp(bad[i], "stderr_long")) {
			char big[SBX_MCP_STDERR_TAIL + 10];
			memset(big, 'x', sizeof(big));
			sbx_proto_pack_strn(&p.pk, big, sizeof(big));
		} else {
			sbx_proto_pack_str(&p.pk, "fine");
		}
		assert_int_equal(sbx_proto_mcp_parse_list(obj(&p), &out, &n, &err), -EPROTO);
		assert_null(out);
		end(&p);
	}
	/* More servers than an agent may have. */
	begin(&p);
	msgpack_pack_map(&p.pk, 1);
	sbx_proto_pack_str(&p.pk, "servers");
	msgpack_pack_array(&p.pk, SBX_MCP_MAX_SERVERS + 1);
	for (unsigned i = 0; i < SBX_MCP_MAX_SERVERS + 1; i++)
		sbx_proto_mcp_pack_status(&p.pk, &st);
	assert_int_equal(sbx_proto_mcp_parse_list(obj(&p), &out, &n, &err), -EPROTO);
	end(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names),
		cmocka_unit_test(config_round_trip),
		cmocka_unit_test(config_refusals),
		cmocka_unit_test(open_and_opened),
		cmocka_unit_test(status_list_round_trip),
		cmocka_unit_test(status_refusals),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
