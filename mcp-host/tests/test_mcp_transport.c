/* Streamable HTTP's decisions (transport.h): Origin against the allowlist,
 * Accept, MCP-Protocol-Version, what a POSTed message asks, and where a
 * server's messages go (answers on their request's stream, once; the
 * server's own requests to the newest stream; stray answers dropped). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "mcp_host/transport.h"

static void origin(void **state)
{
	sbx_err err = { 0 };

	assert_int_equal(mcp_tx_origin(NULL, NULL, &err), 0);
	assert_int_equal(mcp_tx_origin(NULL, "http://evil.example", &err), -EPERM);
	assert_int_equal(mcp_tx_origin("", "http://localhost", &err), -EPERM);
	assert_int_equal(mcp_tx_origin("http://a.test, http://localhost:3000", "http://localhost:3000", &err), 0);
	assert_int_equal(mcp_tx_origin("http://a.test,http://localhost:3000", "HTTP://A.TEST", &err), 0);
	assert_int_equal(mcp_tx_origin("http://localhost:3000", "http://localhost:30000", &err), -EPERM);
	assert_int_equal(mcp_tx_origin("http://localhost:3000", "http://localhost:300", &err), -EPERM);
}

static void accept_version(void **state)
{
	sbx_err err = { 0 };
	mcp_tx_reply r;

	assert_int_equal(mcp_tx_post_accept("application/json, text/event-stream", &r, &err), 0);
	assert_int_equal(r, MCP_TX_SSE);
	assert_int_equal(mcp_tx_post_accept("application/json", &r, &err), 0);
	assert_int_equal(r, MCP_TX_JSON);
	assert_int_equal(mcp_tx_post_accept(NULL, &r, &err), 0);
	assert_int_equal(r, MCP_TX_JSON);
	assert_int_equal(mcp_tx_post_accept("text/html", &r, &err), -ENOTSUP);
	assert_int_equal(mcp_tx_get_accept("text/event-stream", &err), 0);
	assert_int_equal(mcp_tx_get_accept("application/json", &err), -ENOTSUP);
	assert_int_equal(mcp_tx_version(NULL, &err), 0);
	assert_int_equal(mcp_tx_version("2025-06-18", &err), 0);
	assert_int_equal(mcp_tx_version("2025-11-25", &err), 0);
	assert_int_equal(mcp_tx_version("2024-11-05", &err), -EINVAL);
	assert_int_equal(mcp_tx_version("", &err), -EINVAL);
}

static void post_kind(const char *body, bool in_session, int want_rc, mcp_tx_post want, const char *want_key)
{
	sbx_err err = { 0 };
	char key[MCP_SESSION_KEY_MAX];
	mcp_rpc_msg m;
	mcp_tx_post k = 0;
	int code;

	assert_int_equal(mcp_rpc_parse(body, strlen(body), &m, &code, &err), 0);
	assert_int_equal(mcp_tx_post_kind(&m, in_session, &k, key, &err), want_rc);
	if (want_rc == 0) {
		assert_int_equal(k, want);
		assert_string_equal(key, want_key);
	}
	mcp_rpc_msg_free(&m);
}

static void kinds(void **state)
{
	const char *init = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{}}";

	post_kind(init, false, 0, MCP_TX_INIT, "n:0");
	post_kind(init, true, -EINVAL, 0, "");
	post_kind("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/list\"}", true, 0, MCP_TX_CALL, "s:a");
	post_kind("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/list\"}", false, -EINVAL, 0, "");
	post_kind("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", true, 0, MCP_TX_PASS, "");
	post_kind("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}", true, 0, MCP_TX_PASS, "");
	post_kind("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":3}}", true, 0,
		  MCP_TX_CANCEL, "n:3");
	post_kind("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{}}", true, 0,
		  MCP_TX_CANCEL, "");
}

static int route(mcp_session *s, const char *line, mcp_tx_route *r, uint32_t *stream)
{
	sbx_err err = { 0 };

	return mcp_tx_route_msg(s, line, strlen(line), r, stream, &err);
}

static void routing(void **state)
{
	mcp_session_opts o = { .max_sessions = 2, .replay_bytes = 4096, .replay_events = 8 };
	mcp_session_table *t;
	mcp_session *s;
	sbx_err err = { 0 };
	mcp_tx_route r;
	uint32_t st;

	assert_int_equal(mcp_session_table_new(&o, &t, &err), 0);
	assert_int_equal(mcp_session_open(t, "everything", 1, &s, &err), 0);
	assert_int_equal(mcp_session_pending_add(s, "n:0", 1), 0);
	assert_true(mcp_session_stream_pending(s, 1));
	assert_int_equal(route(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{}}", &r, &st), 0);
	assert_int_equal(r, MCP_TX_LATEST);
	assert_int_equal(route(s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"roots/list\"}", &r, &st), 0);
	assert_int_equal(r, MCP_TX_LATEST);
	assert_int_equal(route(s, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{\"protocolVersion\":\"2025-06-18\"}}", &r,
			       &st), 0);
	assert_int_equal(r, MCP_TX_STREAM);
	assert_int_equal(st, 1);
	assert_string_equal(mcp_session_version(s), "2025-06-18");
	assert_false(mcp_session_stream_pending(s, 1));
	/* A second answer to the same id: nobody waits for it. */
	assert_int_equal(route(s, "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}", &r, &st), 0);
	assert_int_equal(r, MCP_TX_DROP);
	assert_int_equal(route(s, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":1,\"message\":\"x\"}}", &r, &st),
			 0);
	assert_int_equal(r, MCP_TX_DROP);
	assert_int_equal(route(s, "[1]", &r, &st), -EINVAL);
	mcp_session_table_free(t, NULL, NULL);
}

static void line(void **state)
{
	const char *one = "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}";
	const char *two = "{\n \"jsonrpc\": \"2.0\",\n \"method\": \"x\", \"params\": {\"t\": \"a\\nb\"}\n}";
	sbx_err err = { 0 };
	const char *out;
	size_t len;
	char *owned;
	mcp_rpc_msg m;
	int code;

	assert_int_equal(mcp_rpc_parse(one, strlen(one), &m, &code, &err), 0);
	assert_int_equal(mcp_tx_line(&m, one, strlen(one), &out, &len, &owned, &err), 0);
	assert_ptr_equal(out, one);
	assert_null(owned);
	mcp_rpc_msg_free(&m);
	assert_int_equal(mcp_rpc_parse(two, strlen(two), &m, &code, &err), 0);
	assert_int_equal(mcp_tx_line(&m, two, strlen(two), &out, &len, &owned, &err), 0);
	assert_non_null(owned);
	assert_null(memchr(out, '\n', len));
	assert_non_null(strstr(out, "a\\nb"));
	free(owned);
	mcp_rpc_msg_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(origin), cmocka_unit_test(accept_version), cmocka_unit_test(kinds),
		cmocka_unit_test(routing), cmocka_unit_test(line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
