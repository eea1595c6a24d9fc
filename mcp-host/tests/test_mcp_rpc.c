/* JSON-RPC messages (rpc.h): every kind sorted right, every malformed one
 * refused with the code a client expects, error bodies, and the line
 * splitter over arbitrary cuts and its bound. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mcp_host/rpc.h"

static int parse(const char *s, mcp_rpc_msg *m, int *code)
{
	sbx_err err = { 0 };

	*code = 0;
	return mcp_rpc_parse(s, strlen(s), m, code, &err);
}

static void kinds(void **state)
{
	mcp_rpc_msg m;
	const char *v = NULL;
	int code;

	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
			       "{\"protocolVersion\":\"2025-06-18\"}}", &m, &code), 0);
	assert_int_equal(m.kind, MCP_RPC_REQUEST);
	assert_string_equal(m.method, "initialize");
	assert_true(mcp_rpc_is_initialize(&m, &v));
	assert_string_equal(v, "2025-06-18");
	mcp_rpc_msg_free(&m);

	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m, &code), 0);
	assert_int_equal(m.kind, MCP_RPC_NOTIFICATION);
	assert_null(m.id);
	assert_false(mcp_rpc_is_initialize(&m, &v));
	mcp_rpc_msg_free(&m);

	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":\"r-1\",\"result\":{\"roots\":[]}}", &m, &code), 0);
	assert_int_equal(m.kind, MCP_RPC_RESPONSE);
	assert_string_equal(json_string_value(m.id), "r-1");
	mcp_rpc_msg_free(&m);

	assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}", &m,
			       &code), 0);
	assert_int_equal(m.kind, MCP_RPC_ERROR);
	mcp_rpc_msg_free(&m);
}

static void versions(void **state)
{
	assert_true(mcp_rpc_version_supported("2025-06-18"));
	assert_true(mcp_rpc_version_supported("2025-11-25"));
	assert_true(mcp_rpc_version_supported(MCP_RPC_VERSION_LATEST));
	assert_false(mcp_rpc_version_supported("2025-03-26"));
	assert_false(mcp_rpc_version_supported("2024-11-05"));
	assert_false(mcp_rpc_version_supported("2025-06-18 "));
	assert_false(mcp_rpc_version_supported(""));
	assert_false(mcp_rpc_version_supported(NULL));
}

static void refusals(void **state)
{
	static const struct {
		const char *in;
		int code;
	} bad[] = {
		{ "", MCP_RPC_PARSE_ERROR },
		{ "{\"jsonrpc\":\"2.0\",", MCP_RPC_PARSE_ERROR },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"} trailing", MCP_RPC_PARSE_ERROR },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"a\"}", MCP_RPC_PARSE_ERROR },
		{ "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\"}]", MCP_RPC_INVALID_REQUEST },
		{ "42", MCP_RPC_INVALID_REQUEST },
		{ "{\"id\":1,\"method\":\"a\"}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"a\"}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"a\"}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"a\"}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"a\"}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"params\":3}", MCP_RPC_INVALID_PARAMS },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"result\":{}}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"result\":{}}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{\"code\":1,\"message\":\"m\"}}",
		  MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"x\",\"message\":\"m\"}}", MCP_RPC_INVALID_REQUEST },
		{ "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":\"boom\"}", MCP_RPC_INVALID_REQUEST },
	};
	mcp_rpc_msg m;
	int code;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (parse(bad[i].in, &m, &code) != -EINVAL || code != bad[i].code)
			fail_msg("%s: code %d, want %d", bad[i].in, code, bad[i].code);
		assert_null(m.root);
	}
	/* NUL inside the body */
	assert_int_equal(mcp_rpc_parse("{\"a\":\"\0\"}", 9, &m, &code, NULL), -EINVAL);
	assert_int_equal(code, MCP_RPC_PARSE_ERROR);
}

static void error_bodies_and_keys(void **state)
{
	mcp_rpc_msg m;
	json_t *id = json_string("abc\"\n");
	size_t len;
	char key[16];
	int code;
	char *body = mcp_rpc_error_body(id, MCP_RPC_INVALID_REQUEST, "bad \"thing\"", &len);

	assert_non_null(body);
	assert_int_equal(strlen(body), len);
	assert_null(strchr(body, '\n'));
	assert_int_equal(mcp_rpc_parse(body, len, &m, &code, NULL), 0);
	assert_int_equal(m.kind, MCP_RPC_ERROR);
	assert_string_equal(json_string_value(m.id), "abc\"\n");
	mcp_rpc_msg_free(&m);
	free(body);
	body = mcp_rpc_error_body(NULL, MCP_RPC_PARSE_ERROR, "x", &len);
	assert_string_equal(body, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"x\"}}");
	free(body);

	assert_int_equal(mcp_rpc_id_key(id, key, sizeof(key)), 0);
	assert_string_equal(key, "s:abc\"\n");
	json_decref(id);
	id = json_integer(-12);
	assert_int_equal(mcp_rpc_id_key(id, key, sizeof(key)), 0);
	assert_string_equal(key, "n:-12");
	json_decref(id);
	id = json_string("a-very-long-identifier");
	assert_int_equal(mcp_rpc_id_key(id, key, sizeof(key)), -ENAMETOOLONG);
	json_decref(id);
	assert_int_equal(mcp_rpc_id_key(json_null(), key, sizeof(key)), -EINVAL);
}

typedef struct got {
	char all[4096];
	size_t len;
	int lines;
	int stop_at;
} got;

static int on_line(const char *line, size_t len, void *ud)
{
	got *g = ud;

	assert_null(memchr(line, '\n', len));
	memcpy(g->all + g->len, line, len);
	g->len += len;
	g->all[g->len++] = '|';
	g->lines++;
	return g->lines == g->stop_at ? -ECANCELED : 0;
}

static void lines_any_cut(void **state)
{
	const char *in = "{\"a\":1}\n\n  \r\n{\"b\":2}\r\n{\"c\":\"three\"}\n{\"d\"";
	const char *want = "{\"a\":1}|{\"b\":2}\r|{\"c\":\"three\"}|";
	size_t n = strlen(in);

	/* Every way to cut the input in two, and byte by byte. */
	for (size_t cut = 0; cut <= n; cut++) {
		mcp_rpc_lines l;
		got g = { .len = 0 };

		mcp_rpc_lines_init(&l, 64);
		assert_int_equal(mcp_rpc_lines_feed(&l, in, cut, on_line, &g, NULL), 0);
		assert_int_equal(mcp_rpc_lines_feed(&l, in + cut, n - cut, on_line, &g, NULL), 0);
		g.all[g.len] = '\0';
		assert_string_equal(g.all, want);
		assert_int_equal(mcp_rpc_lines_pending(&l), 4);
		mcp_rpc_lines_free(&l);
	}
	{
		mcp_rpc_lines l;
		got g = { .len = 0 };

		mcp_rpc_lines_init(&l, 64);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(mcp_rpc_lines_feed(&l, in + i, 1, on_line, &g, NULL), 0);
		g.all[g.len] = '\0';
		assert_string_equal(g.all, want);
		mcp_rpc_lines_free(&l);
	}
}

static void lines_bound_and_stop(void **state)
{
	char big[200];
	mcp_rpc_lines l;
	got g = { .len = 0 };
	sbx_err err = { 0 };

	memset(big, 'x', sizeof(big));
	/* Over the bound: in one piece with its newline, and in pieces. */
	mcp_rpc_lines_init(&l, 100);
	big[150] = '\n';
	assert_int_equal(mcp_rpc_lines_feed(&l, big, 151, on_line, &g, &err), -EMSGSIZE);
	mcp_rpc_lines_free(&l);
	mcp_rpc_lines_init(&l, 100);
	assert_int_equal(mcp_rpc_lines_feed(&l, big, 60, on_line, &g, &err), 0);
	assert_int_equal(mcp_rpc_lines_feed(&l, big, 60, on_line, &g, &err), -EMSGSIZE);
	mcp_rpc_lines_free(&l);
	/* Exactly at the bound is fine. */
	mcp_rpc_lines_init(&l, 100);
	big[100] = '\n';
	assert_int_equal(mcp_rpc_lines_feed(&l, big, 101, on_line, &g, &err), 0);
	assert_int_equal(g.lines, 1);
	mcp_rpc_lines_free(&l);
	/* The callback stops the feed. */
	mcp_rpc_lines_init(&l, 100);
	g.lines = 0;
	g.stop_at = 2;
	assert_int_equal(mcp_rpc_lines_feed(&l, "a\nb\nc\n", 6, on_line, &g, &err), -ECANCELED);
	assert_int_equal(g.lines, 2);
	mcp_rpc_lines_free(&l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kinds),
		cmocka_unit_test(versions),
		cmocka_unit_test(refusals),
		cmocka_unit_test(error_bodies_and_keys),
		cmocka_unit_test(lines_any_cut),
		cmocka_unit_test(lines_bound_and_stop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
