/* The E2B layer's pure half: their create body (into sbx's own create,
 * through sup_api's parser), their Sandbox shape, the list's query (their
 * double-encoded metadata), access tokens, error bodies and Connect's
 * framing; and its parsers called through the families' rows as the edge
 * calls them (a request in, state out, or a negative errno with a
 * message). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sup_e2b_int.h"

static const char *aliases[] = { "code-interpreter-v1=sbx/code-interpreter", "base=" };
static sup_e2b_ctx ctx = {
	.node = "n1",
	.aliases = aliases,
	.naliases = 2,
	.limits = { .default_timeout_s = 300, .max_timeout_s = 86400,
		    .res_default = { .cpu_milli = 1000, .memory = 1ull << 30, .pids = 1024, .disk = 1ull << 30 },
		    .res_max = { .cpu_milli = 4000, .memory = 8ull << 30, .pids = 4096, .disk = 8ull << 30 } },
};

static void test_create(void **unused)
{
	sup_create_req c;
	json_t *kept;
	sbx_err e;
	const char *ok = "{\"templateID\":\"code-interpreter-v1\",\"timeout\":120,\"metadata\":{\"a\":\"b\"},"
			 "\"envVars\":{\"K\":\"V\"},\"secure\":true,\"autoPause\":false}";
	assert_int_equal(sup_e2b_parse_create(ok, strlen(ok), &ctx, &c, &kept, &e), 0);
	assert_string_equal(c.image, "sbx/code-interpreter");
	assert_int_equal(c.timeout_s, 120);
	assert_string_equal(json_string_value(json_object_get(json_object_get(kept, "metadata"), "a")), "b");
	assert_string_equal(json_string_value(json_object_get(kept, "templateID")), "code-interpreter-v1");
	sup_create_req_free(&c);
	json_decref(kept);
	/* base: sbx's default image (NULL); no template: the same */
	assert_int_equal(sup_e2b_parse_create("{}", 2, &ctx, &c, &kept, &e), 0);
	assert_null(c.image);
	sup_create_req_free(&c);
	json_decref(kept);
	/* any other name is an image's own */
	const char *own = "{\"templateID\":\"busybox\"}";
	assert_int_equal(sup_e2b_parse_create(own, strlen(own), &ctx, &c, &kept, &e), 0);
	assert_string_equal(c.image, "busybox");
	sup_create_req_free(&c);
	json_decref(kept);
	struct {
		const char *body, *word;
	} bad[] = {
		{ "[]", "object" },
		{ "{\"autoPause\":true}", "autoPause" },
		{ "{\"autoResume\":{\"enabled\":true}}", "autoResume" },
		{ "{\"network\":{\"allowOut\":[\"x\"]}}", "network" },
		{ "{\"volumeMounts\":[{\"name\":\"v\",\"path\":\"/m\"}]}", "volumeMounts" },
		{ "{\"mcp\":{\"x\":{}}}", "mcp" },
		{ "{\"nope\":1}", "nope" },
		{ "{\"templateID\":\"\"}", "templateID" },
		{ "{\"timeout\":0}", "timeout" },
		{ "{\"timeout\":\"9\"}", "timeout" },
		{ "{\"metadata\":{\"a\":1}}", "metadata" },
		{ "{\"envVars\":[]}", "envVars" },
		{ "{\"timeout\":999999999}", "timeout" }, /* over the max: sbx's own check */
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(sup_e2b_parse_create(bad[i].body, strlen(bad[i].body), &ctx, &c, &kept, &e), -EINVAL);
		if (!strstr(e.msg, bad[i].word))
			fail_msg("%s: %s", bad[i].body, e.msg);
		json_decref(kept);
	}
}

static void test_timeout(void **unused)
{
	unsigned t;
	sbx_err e;
	assert_int_equal(sup_e2b_parse_timeout("{\"timeout\":30}", 14, false, &t, &e), 0);
	assert_int_equal(t, 30);
	assert_int_equal(sup_e2b_parse_timeout("", 0, true, &t, &e), 0);
	assert_int_equal(t, 0);
	assert_int_equal(sup_e2b_parse_timeout("{}", 2, true, &t, &e), 0);
	assert_int_equal(sup_e2b_parse_timeout("{\"memory\":false}", 16, true, &t, &e), 0);
	assert_int_equal(sup_e2b_parse_timeout("{}", 2, false, &t, &e), -EINVAL);
	assert_int_equal(sup_e2b_parse_timeout("{\"timeout\":-1}", 14, false, &t, &e), -EINVAL);
	assert_int_equal(sup_e2b_parse_timeout("{\"x\":1}", 7, true, &t, &e), -EINVAL);
}

static void test_sandbox_json(void **unused)
{
	sup_sandbox_view v = { .id = "n1-abc", .state = "paused", .created_at = 1796162400,
			       .expires_at = 1796162700,
			       .resources = { .cpu_milli = 1500, .memory = 512ull << 20, .disk = 1ull << 30 } };
	json_t *kept = json_pack("{s:s, s:{s:s}}", "templateID", "base", "metadata", "k", "v");
	json_t *o = sup_e2b_sandbox_json(&ctx, &v, kept, "tok");
	assert_string_equal(json_string_value(json_object_get(o, "sandboxID")), "n1-abc");
	assert_string_equal(json_string_value(json_object_get(o, "envdAccessToken")), "tok");
	assert_string_equal(json_string_value(json_object_get(o, "envdVersion")), SUP_E2B_ENVD_VERSION);
	assert_string_equal(json_string_value(json_object_get(o, "clientID")), "n1");
	json_decref(o);
	o = sup_e2b_sandbox_json(&ctx, &v, kept, NULL);
	assert_null(json_object_get(o, "envdAccessToken"));
	assert_string_equal(json_string_value(json_object_get(o, "state")), "paused");
	assert_string_equal(json_string_value(json_object_get(o, "startedAt")), "2026-12-01T22:00:00Z");
	assert_string_equal(json_string_value(json_object_get(o, "endAt")), "2026-12-01T22:05:00Z");
	assert_int_equal(json_integer_value(json_object_get(o, "cpuCount")), 2);
	assert_int_equal(json_integer_value(json_object_get(o, "memoryMB")), 512);
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "metadata"), "k")), "v");
	json_decref(o);
	json_decref(kept);
}

static void test_list_query(void **unused)
{
	sup_e2b_listq lq;
	sbx_err e;
	/* their SDK: metadata=a%3Db%252520c (a=b%20c once, then "b c") */
	assert_int_equal(sup_e2b_listq_parse("metadata=a%3Db%252520c%26x%3Dy&state=running&limit=10",
					     &lq, &e), 0);
	assert_string_equal(json_string_value(json_object_get(lq.meta, "a")), "b c");
	assert_string_equal(json_string_value(json_object_get(lq.meta, "x")), "y");
	assert_true(lq.running);
	assert_false(lq.paused);
	assert_int_equal(lq.limit, 10);
	json_t *kept = json_pack("{s:{s:s, s:s, s:s}}", "metadata", "a", "b c", "x", "y", "z", "1");
	assert_true(sup_e2b_listq_match(&lq, "running", kept));
	assert_false(sup_e2b_listq_match(&lq, "paused", kept));
	json_object_set_new(json_object_get(kept, "metadata"), "x", json_string("n"));
	assert_false(sup_e2b_listq_match(&lq, "running", kept));
	assert_false(sup_e2b_listq_match(&lq, "running", NULL));
	json_decref(kept);
	sup_e2b_listq_free(&lq);
	assert_int_equal(sup_e2b_listq_parse(NULL, &lq, &e), 0);
	assert_int_equal(lq.limit, SUP_E2B_PAGE);
	assert_true(sup_e2b_listq_match(&lq, "paused", NULL));
	sup_e2b_listq_free(&lq);
	const char *bad[] = { "state=sleeping", "limit=0", "limit=1001", "metadata=novalue",
			      "order=desc", "startedAfter=x", "nextToken=", "what=1", NULL };
	for (int i = 0; bad[i]; i++) {
		assert_int_equal(sup_e2b_listq_parse(bad[i], &lq, &e), -EINVAL);
		sup_e2b_listq_free(&lq);
	}
}

static void test_token(void **unused)
{
	char a[SUP_E2B_TOKEN_MAX + 1], b[SUP_E2B_TOKEN_MAX + 1];
	assert_int_equal(sup_e2b_token(&ctx, "alice", "n1-abc", a), 0);
	assert_int_equal(strlen(a), 64 + 1 + 5);
	assert_string_equal(a + 64, ".alice");
	assert_int_equal(sup_e2b_token(&ctx, "alice", "n1-abd", b), 0);
	assert_string_not_equal(a, b);
	assert_int_equal(sup_e2b_token(&ctx, "bob", "n1-abc", b), 0);
	assert_memory_not_equal(a, b, 64);
	sup_e2b_ctx other = ctx;
	other.access_key[0] ^= 1;
	assert_int_equal(sup_e2b_token(&other, "alice", "n1-abc", b), 0);
	assert_string_not_equal(a, b);
	char longname[80];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[79] = '\0';
	assert_int_equal(sup_e2b_token(&ctx, longname, "n1-abc", b), -EINVAL);
}

static void test_errors(void **unused)
{
	json_t *sbx = json_pack("{s:{s:s, s:s}}", "error", "code", "not_found", "message", "no sandbox x");
	json_t *o = sup_e2b_error(404, "/e2b/sandboxes/x", sbx);
	assert_int_equal(json_integer_value(json_object_get(o, "code")), 404);
	assert_string_equal(json_string_value(json_object_get(o, "message")), "no sandbox x");
	json_decref(o);
	o = sup_e2b_error(404, "/e2b/sandboxes/n1-a/envd/process.Process/List", sbx);
	assert_string_equal(json_string_value(json_object_get(o, "code")), "not_found");
	json_decref(o);
	o = sup_e2b_error(404, "/e2b/sandboxes/n1-a/envd/files", sbx);
	assert_int_equal(json_integer_value(json_object_get(o, "code")), 404);
	json_decref(o);
	json_decref(sbx);
	assert_string_equal(sup_e2b_connect_code(400), "invalid_argument");
	assert_string_equal(sup_e2b_connect_code(401), "unauthenticated");
	assert_string_equal(sup_e2b_connect_code(409), "already_exists");
	assert_string_equal(sup_e2b_connect_code(504), "deadline_exceeded");
	assert_string_equal(sup_e2b_connect_code(500), "internal");
}

static const sup_http_hdr unary_hdrs[] = { { "Content-Type", "application/json" },
					   { "Authorization", "Basic cm9vdDo=" } };
static const sup_http_hdr stream_hdrs[] = { { "Content-Type", "application/connect+json" } };

static int parse_row(const sup_http_family *f, const char *name, const sup_http_hdr *hdrs, size_t nh,
		     const char *body, size_t len, sup_eq **out, sbx_err *e)
{
	sup_http_in in = { .id = "n1-abc", .method = "POST", .path = "/x", .body = body ? body : "",
			   .body_len = len, .hdrs = hdrs, .nhdrs = nh };
	for (size_t i = 0; i < f->nroutes; i++) {
		const sup_http_route *r = &f->routes[i];
		if (strcmp(r->name, name) != 0)
			continue;
		in.method = r->method;
		*out = calloc(1, f->state_size);
		sbx_err_clear(e);
		return r->parse ? r->parse(&in, &ctx, *out, e) : 0;
	}
	fail_msg("no route %s", name);
	return 0;
}

static void done(sup_eq *q)
{
	sup_e2b_envd_family.release(q);
	free(q);
}

static void test_rows(void **unused)
{
	sup_eq *q;
	sbx_err e;
	const char *list = "{}";
	assert_int_equal(parse_row(&sup_e2b_envd_family, "envd List", unary_hdrs, 2, list, 2, &q, &e), 0);
	assert_string_equal(q->user, "root");
	done(q);
	assert_int_equal(parse_row(&sup_e2b_envd_family, "envd List", stream_hdrs, 1, list, 2, &q, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "Content-Type"));
	done(q);
	/* a stream's request: one envelope; its errors wait for the act */
	const char env[] = "\x00\x00\x00\x00\x02{}";
	assert_int_equal(parse_row(&sup_e2b_envd_family, "envd Start", stream_hdrs, 1, env, 7, &q, &e), 0);
	assert_int_equal(q->early, 0);
	assert_true(json_is_object(q->msg));
	done(q);
	const char *bad[][2] = { { "\x01\x00\x00\x00\x02{}", "flags" }, /* compressed */
				 { "\x00\x00\x00\x00\x05{}", "says" },
				 { "\x00\x00", "envelope" },
				 { "\x00\x00\x00\x00\x02[]", "object" } };
	size_t lens[] = { 7, 7, 2, 7 };
	for (size_t i = 0; i < 4; i++) {
		assert_int_equal(parse_row(&sup_e2b_envd_family, "envd Start", stream_hdrs, 1, bad[i][0], lens[i],
					   &q, &e), 0);
		assert_int_equal(q->early, -EINVAL);
		if (!strstr(q->early_err.msg, bad[i][1]))
			fail_msg("%zu: %s", i, q->early_err.msg);
		done(q);
	}
	/* the code interpreter's execute */
	const char *ex = "{\"code\":\"1+1\",\"context_id\":null,\"language\":\"js\",\"env_vars\":null}";
	assert_int_equal(parse_row(&sup_e2b_envd_family, "e2b execute", unary_hdrs, 2, ex, strlen(ex), &q, &e), 0);
	assert_string_equal(q->ctx_id, "javascript");
	done(q);
	const char *both = "{\"code\":\"1\",\"context_id\":\"python\",\"language\":\"python\"}";
	assert_int_equal(parse_row(&sup_e2b_envd_family, "e2b execute", unary_hdrs, 2, both, strlen(both), &q, &e),
			 -EINVAL);
	done(q);
	const char *envs = "{\"code\":\"1\",\"env_vars\":{\"A\":\"1\"}}";
	assert_int_equal(parse_row(&sup_e2b_envd_family, "e2b execute", unary_hdrs, 2, envs, strlen(envs), &q, &e),
			 -EINVAL);
	done(q);
	/* the control plane's create through its row */
	const char *cr = "{\"templateID\":\"base\",\"timeout\":60}";
	assert_int_equal(parse_row(&sup_e2b_family, "e2b create", NULL, 0, cr, strlen(cr), &q, &e), 0);
	assert_int_equal(q->create.timeout_s, 60);
	sup_e2b_family.release(q);
	free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_create),	 cmocka_unit_test(test_timeout),   cmocka_unit_test(test_sandbox_json),
		cmocka_unit_test(test_list_query), cmocka_unit_test(test_token),   cmocka_unit_test(test_errors),
		cmocka_unit_test(test_rows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
