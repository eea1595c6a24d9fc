/* Every parser of the contexts routes, called through the family's rows as
 * the edge calls them; and the checks of the context driver's lines
 * (sup_ctx_msg.c), which come from the guest. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sup_contexts_int.h"
#include "sup_ctx_int.h"

static sup_contexts_ctx ctx;
static cx_req *q;

static void done(void)
{
	if (q) {
		sup_contexts_family.release(q);
		free(q);
		q = NULL;
	}
}

static int parse(const char *name, const char *pid, const char *body, const char *accept, sbx_err *e)
{
	sup_http_hdr h[] = { { "Accept", accept } };
	sup_http_in in = { .id = "sb-1", .pid = pid, .body = body ? body : "", .body_len = body ? strlen(body) : 0,
			   .hdrs = h, .nhdrs = accept ? 1 : 0 };

	done();
	q = calloc(1, sup_contexts_family.state_size);
	for (size_t i = 0; i < sup_contexts_family.nroutes; i++) {
		const sup_http_route *r = &sup_contexts_family.routes[i];
		if (strcmp(r->name, name) != 0)
			continue;
		sbx_err_clear(e);
		return r->parse ? r->parse(&in, &ctx, q, e) : 0;
	}
	fail_msg("no route %s", name);
	return 0;
}

static void test_create(void **state)
{
	sbx_err e;

	assert_int_equal(parse("POST contexts", NULL, "", NULL, &e), 0);
	assert_int_equal(q->spec.lang, SUP_CTX_PYTHON);
	assert_int_equal(parse("POST contexts", NULL,
			       "{\"language\":\"javascript\",\"cwd\":\"/w\",\"env\":{\"A_1\":\"x y\"}}", NULL, &e),
			 0);
	assert_int_equal(q->spec.lang, SUP_CTX_JAVASCRIPT);
	assert_string_equal(q->spec.cwd, "/w");
	assert_string_equal(json_string_value(json_object_get(q->spec.env, "A_1")), "x y");
	assert_int_equal(parse("POST contexts", NULL, "{\"language\":\"bash\",\"cwd\":null,\"env\":null}", NULL, &e), 0);
	assert_int_equal(q->spec.lang, SUP_CTX_BASH);
	assert_null(q->spec.cwd);
	static const char *const bad[] = {
		"{\"language\":\"cobol\"}", "{\"language\":1}", "{\"cwd\":\"rel\"}", "{\"cwd\":5}",
		"{\"env\":{\"1A\":\"x\"}}", "{\"env\":{\"A-B\":\"x\"}}", "{\"env\":{\"A\":1}}",
		"{\"env\":[]}", "{\"other\":1}", "nope", "[]", "{\"language\":\"python\",\"language\":\"bash\"}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse("POST contexts", NULL, bad[i], NULL, &e), -EINVAL);
		assert_true(e.msg[0] != '\0');
	}
	done();
}

static void test_named_and_run(void **state)
{
	sbx_err e;

	assert_int_equal(parse("GET context", "ctx-0123abcd", NULL, NULL, &e), 0);
	assert_string_equal(q->ctx, "ctx-0123abcd");
	assert_int_equal(parse("DELETE context", "python", NULL, NULL, &e), 0);
	assert_int_equal(parse("POST context interrupt", "bash", NULL, NULL, &e), 0);
	assert_int_equal(parse("POST context restart", "javascript", NULL, NULL, &e), 0);
	static const char *const bad[] = { "ctx-", "ctx-XYZ", "Python", "../x", "ctx-0123456789abcdef0123456789abcdef" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse("GET context", bad[i], NULL, NULL, &e), -ENOENT);

	assert_int_equal(parse("POST context run", "python", "{\"code\":\"1+1\"}", NULL, &e), 0);
	assert_string_equal(q->cell.code, "1+1");
	assert_int_equal(q->cell.timeout_ms, SUP_CTX_DEFAULT_TIMEOUT_MS);
	assert_int_equal(q->fmt, SUP_STREAM_NONE);
	assert_int_equal(parse("POST context run", "python", "{\"code\":\"x\",\"timeout\":1.5}", "application/x-ndjson",
			       &e), 0);
	assert_int_equal(q->cell.timeout_ms, 1500);
	assert_int_equal(q->fmt, SUP_STREAM_NDJSON);
	static const char *const badrun[] = { "{}", "{\"code\":1}", "{\"code\":\"x\",\"timeout\":0}",
					      "{\"code\":\"x\",\"timeout\":-1}", "{\"code\":\"x\",\"timeout\":86401}",
					      "{\"code\":\"x\",\"timeout\":\"1\"}", "{\"code\":\"x\",\"other\":1}",
					      "{\"code\":\"a\\u0000b\"}", "" };
	for (size_t i = 0; i < sizeof(badrun) / sizeof(badrun[0]); i++)
		assert_int_equal(parse("POST context run", "python", badrun[i], NULL, &e), -EINVAL);
	assert_int_equal(parse("POST context run", "nope", "{\"code\":\"1\"}", NULL, &e), -ENOENT);
	done();
}

static int msg(const char *line, sup_ctx_msg *m)
{
	sbx_err e = { 0 };
	int rc = sup_ctx_msg_parse(line, strlen(line), m, &e);

	if (rc < 0)
		assert_true(e.msg[0] != '\0');
	return rc;
}

static void test_driver_lines(void **state)
{
	sup_ctx_msg m;

	assert_int_equal(msg("{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"status\":\"ok\"}}", &m), 0);
	assert_int_equal(m.kind, SUP_CTX_MSG_ANSWER);
	assert_int_equal(m.id, 7);
	assert_non_null(m.result);
	sup_ctx_msg_free(&m);
	assert_int_equal(msg("{\"id\":3,\"error\":{\"code\":-1,\"message\":\"no \\u0001such\"}}", &m), 0);
	assert_null(m.result);
	assert_string_equal(m.failed, "no ?such");
	sup_ctx_msg_free(&m);
	assert_int_equal(msg("{\"method\":\"stream\",\"params\":{\"name\":\"stderr\",\"text\":\"x\\n\"}}", &m), 0);
	assert_int_equal(m.kind, SUP_CTX_MSG_STDERR);
	assert_string_equal(json_string_value(json_object_get(m.event, "text")), "x\n");
	sup_ctx_msg_free(&m);
	assert_int_equal(msg("{\"method\":\"display\",\"params\":{\"data\":{\"text/plain\":\"1\",\"image/svg+xml\":\"<s/>\"},"
			     "\"main\":true}}", &m), 0);
	assert_int_equal(m.kind, SUP_CTX_MSG_RESULT);
	assert_true(json_is_true(json_object_get(m.event, "main")));
	assert_int_equal(json_object_size(json_object_get(m.event, "data")), 2);
	sup_ctx_msg_free(&m);
	assert_int_equal(msg("{\"method\":\"error\",\"params\":{\"name\":\"E\",\"value\":\"v\",\"traceback\":[\"a\",\"b\"]}}", &m), 0);
	assert_int_equal(json_array_size(json_object_get(m.event, "traceback")), 2);
	sup_ctx_msg_free(&m);
	assert_int_equal(msg("{\"method\":\"died\",\"params\":{\"reason\":\"killed\",\"oom\":true}}", &m), 0);
	assert_true(m.kind == SUP_CTX_MSG_DIED && m.oom);
	assert_string_equal(m.reason, "killed");
	assert_int_equal(msg("{\"method\":\"later\",\"params\":{}}", &m), 0);
	assert_int_equal(m.kind, SUP_CTX_MSG_IGNORED);

	static const char *const bad[] = {
		"[]", "nope", "{\"id\":\"x\",\"result\":{}}", "{\"id\":-1,\"result\":{}}", "{\"id\":1}",
		"{\"method\":5}", "{\"method\":\"stream\",\"params\":[]}",
		"{\"method\":\"stream\",\"params\":{\"name\":\"stdin\",\"text\":\"x\"}}",
		"{\"method\":\"stream\",\"params\":{\"name\":\"stdout\",\"text\":\"a\\u0000b\"}}",
		"{\"method\":\"display\",\"params\":{\"data\":{\"Text/Plain\":\"1\"}}}",
		"{\"method\":\"display\",\"params\":{\"data\":{\"text\":\"1\"}}}",
		"{\"method\":\"display\",\"params\":{\"data\":{\"text/plain\":1}}}",
		"{\"method\":\"display\",\"params\":{\"data\":{\"a/b/c\":\"1\"}}}",
		"{\"method\":\"display\",\"params\":{\"data\":{},\"main\":\"yes\"}}",
		"{\"method\":\"error\",\"params\":{\"name\":\"E\",\"value\":\"v\",\"traceback\":[1]}}",
		"{\"method\":\"error\",\"params\":{\"name\":\"E\"}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(msg(bad[i], &m), -EPROTO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create),
		cmocka_unit_test(test_named_and_run),
		cmocka_unit_test(test_driver_lines),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
