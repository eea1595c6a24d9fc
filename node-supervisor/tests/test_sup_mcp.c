/* Every parser of the MCP routes, called through the family's route rows
 * as the edge calls them: the transport's headers and the message kept
 * for the act (a body that is no JSON-RPC message is the act's to answer,
 * with its JSON-RPC code), a server's definition for PUT, names checked;
 * a negative errno with a message otherwise (never an answer). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sup_mcp_int.h"

static sup_mcp_ctx ctx;
static mq *q;

static void done(void)
{
	if (q) {
		sup_mcp_family.release(q);
		free(q);
		q = NULL;
	}
}

static int parse(const char *name, const char *server, const char *body, const sup_http_hdr *hdrs, size_t nhdrs,
		 sbx_err *e)
{
	done();
	sup_http_in in = { .id = "sb-1", .pid = server, .body = body ? body : "",
			   .body_len = body ? strlen(body) : 0, .hdrs = hdrs, .nhdrs = nhdrs };
	q = calloc(1, sup_mcp_family.state_size);
	for (size_t i = 0; i < sup_mcp_family.nroutes; i++) {
		const sup_http_route *r = &sup_mcp_family.routes[i];

		if (strcmp(r->name, name) != 0)
			continue;
		sbx_err_clear(e);
		return r->parse(&in, &ctx, q, e);
	}
	fail_msg("no route %s", name);
	return 0;
}

static void post(void **state)
{
	static const sup_http_hdr h[] = {
		{ "Mcp-Session-Id", "0123456789abcdef0123456789abcdef" },
		{ "accept", "application/json, text/event-stream" },
		{ "MCP-Protocol-Version", "2025-06-18" },
		{ "Origin", "http://a.test" },
	};
	sbx_err e;

	assert_int_equal(parse("POST mcp", "everything", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", h,
			       4, &e), 0);
	assert_string_equal(q->id, "sb-1");
	assert_string_equal(q->name, "everything");
	assert_int_equal(q->what, MQ_POST);
	assert_true(q->msg_ok);
	assert_string_equal(q->msg.method, "tools/list");
	assert_string_equal(q->sid, "0123456789abcdef0123456789abcdef");
	assert_string_equal(q->accept, "application/json, text/event-stream");
	assert_string_equal(q->version, "2025-06-18");
	assert_string_equal(q->origin, "http://a.test");
	assert_null(q->last_event);

	/* Not a message: kept for the act, which answers in JSON-RPC. */
	assert_int_equal(parse("POST mcp", "everything", "{\"jsonrpc\":", NULL, 0, &e), 0);
	assert_false(q->msg_ok);
	assert_int_equal(q->rpc_code, MCP_RPC_PARSE_ERROR);
	assert_int_equal(parse("POST mcp", "everything", "[{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]", NULL, 0, &e), 0);
	assert_false(q->msg_ok);
	assert_int_equal(q->rpc_code, MCP_RPC_INVALID_REQUEST);
	assert_null(q->sid);

	assert_int_equal(parse("POST mcp", "../x", "{}", NULL, 0, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "MCP server name"));
	assert_int_equal(parse("POST mcp", ".hidden", "{}", NULL, 0, &e), -EINVAL);
}

static void get_delete_list(void **state)
{
	static const sup_http_hdr h[] = {
		{ "Accept", "text/event-stream" },
		{ "Last-Event-ID", "3-17" },
	};
	sbx_err e;

	assert_int_equal(parse("GET mcp stream", "fs", NULL, h, 2, &e), 0);
	assert_int_equal(q->what, MQ_GET);
	assert_string_equal(q->last_event, "3-17");
	assert_int_equal(parse("DELETE mcp", "fs", NULL, NULL, 0, &e), 0);
	assert_int_equal(q->what, MQ_DELETE);
	assert_null(q->sid);
	assert_int_equal(parse("GET mcp", NULL, NULL, NULL, 0, &e), 0);
	assert_int_equal(q->what, MQ_LIST);
	assert_string_equal(q->name, "");
}

static void put(void **state)
{
	sbx_err e;

	assert_int_equal(parse("PUT mcp", "lint", "{\"command\":\"npx\",\"args\":[\"-y\",\"x\"],\"env\":{\"A\":\"1\"},"
						  "\"cwd\":\"/workspace\"}", NULL, 0, &e), 0);
	assert_string_equal(q->server.name, "lint");
	assert_int_equal(q->server.argc, 3);
	assert_string_equal(q->server.argv[0], "npx");
	assert_string_equal(q->server.argv[2], "x");
	assert_null(q->server.argv[3]);
	assert_string_equal(q->server.cwd, "/workspace");
	assert_int_equal(q->server.env.n, 1);

	assert_int_equal(parse("PUT mcp", "lint", "{\"args\":[]}", NULL, 0, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "command"));
	assert_int_equal(parse("PUT mcp", "lint", "{\"command\":\"x\",\"transport\":\"sse\"}", NULL, 0, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "unknown field"));
	assert_int_equal(parse("PUT mcp", "lint", "[]", NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("PUT mcp", "a b", "{\"command\":\"x\"}", NULL, 0, &e), -EINVAL);
	done();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(post),
		cmocka_unit_test(get_delete_list),
		cmocka_unit_test(put),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
