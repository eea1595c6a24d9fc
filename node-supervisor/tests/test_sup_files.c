/* Every parser of the file routes, called through the family's route rows
 * as the edge calls them: a request in, the checked paths and the agent's
 * arguments out, or a negative errno with a message (never an answer). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sbx/proto.h"
#include "sup_files_int.h"

static sup_files_ctx ctx;
static sup_fq *q;
static msgpack_unpacked args;
static sup_policy *node_policy;
static sup_tenants *tenants;
static const sup_tenant *who; /* the caller of parse() */

/* Two tenants: "default" with the node's policy (the built-in one), and
 * "ro" whose own paths make /workspace read-only and give nothing else. */
static int setup(void **state)
{
	sbx_err e;
	assert_int_equal(sup_policy_new_default(&node_policy, &e), 0);
	static const char *const isos[] = { "runc" };
	sup_tenants_node node = { .policy = node_policy, .max_timeout_s = 60, .isolations = isos,
				  .nisolations = 1 };
	sup_resources_default(&node.res_default);
	node.res_max = node.res_default;
	char json[512];
	char h1[SUP_TOKEN_HASH_TEXT_LEN + 1], h2[SUP_TOKEN_HASH_TEXT_LEN + 1];
	assert_int_equal(sup_token_hash_text("t1", 2, h1, &e), 0);
	assert_int_equal(sup_token_hash_text("t2", 2, h2, &e), 0);
	snprintf(json, sizeof(json),
		 "{\"tenants\": {\"default\": {\"tokens\": [\"%s\"]}, \"ro\": {\"tokens\": [\"%s\"], "
		 "\"paths\": [{\"root\": \"/workspace\", \"mode\": \"ro\"}]}}}",
		 h1, h2);
	assert_int_equal(sup_tenants_load_json(json, strlen(json), "test", &node, &tenants, &e), 0);
	who = sup_tenants_find(tenants, "default");
	ctx.max_upload = 1000;
	return 0;
}

static int teardown(void **state)
{
	sup_tenants_unref(tenants);
	sup_policy_free(node_policy);
	return 0;
}

static void done(void)
{
	if (q) {
		sup_files_family.release(q);
		free(q);
		q = NULL;
	}
	msgpack_unpacked_destroy(&args);
	msgpack_unpacked_init(&args);
}

/* Parse with the row named name; on success the agent's arguments are in
 * args. */
static int parse(const char *name, const char *query, const char *body, const sup_http_hdr *hdrs,
		 size_t nhdrs, uint64_t expect, sbx_err *e)
{
	done();
	sup_http_in in = { .id = "sb-1", .query = query, .body = body ? body : "",
			   .body_len = body ? strlen(body) : 0, .hdrs = hdrs, .nhdrs = nhdrs,
			   .body_expect = expect, .who = who };
	q = calloc(1, sup_files_family.state_size);
	for (size_t i = 0; i < sup_files_family.nroutes; i++) {
		const sup_http_route *r = &sup_files_family.routes[i];
		if (strcmp(r->name, name) != 0)
			continue;
		sbx_err_clear(e);
		int rc = r->parse(&in, &ctx, q, e);
		size_t len;
		const char *enc = rc == 0 ? sbx_proto_args_done(&q->args, &len) : NULL;
		if (enc)
			assert_int_equal(msgpack_unpack_next(&args, enc, len, NULL), MSGPACK_UNPACK_SUCCESS);
		return rc;
	}
	fail_msg("no route %s", name);
	return 0;
}

#define P(name, query, e) parse(name, query, NULL, NULL, 0, 0, e)
#define B(name, body, e) parse(name, NULL, body, NULL, 0, 0, e)

static bool arg_is(const char *key, const char *want)
{
	const char *s;
	size_t n;
	return sbx_proto_get_str(&args.data, key, &s, &n) && n == strlen(want) && memcmp(s, want, n) == 0;
}

static uint64_t arg_uint(const char *key)
{
	uint64_t v = UINT64_MAX;
	sbx_proto_get_uint(&args.data, key, &v);
	return v;
}

static bool arg_bool(const char *key)
{
	bool v = false;
	assert_true(sbx_proto_get_bool(&args.data, key, &v));
	return v;
}

static void test_query_routes(void **state)
{
	sbx_err e;
	assert_int_equal(P("GET fs/stat", "path=/workspace/a%20b/../c", &e), 0);
	assert_string_equal(q->aop, SBX_OP_FS_STAT);
	assert_true(arg_is("root", "/workspace") && arg_is("path", "c"));
	assert_string_equal(q->subj, "/workspace/c");
	assert_int_equal(P("GET fs/stat", NULL, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "\"path\" is required"));
	assert_int_equal(P("GET fs/stat", "path=/a&path=/b", &e), -EINVAL);
	assert_int_equal(P("GET fs/stat", "path=/w&depth=1", &e), -EINVAL);
	assert_int_equal(P("GET fs/stat", "path=/etc/passwd", &e), -EPERM);
	assert_string_equal(q->subj, "/etc/passwd");
	assert_int_equal(P("GET fs/stat", "path=workspace", &e), -EINVAL);
	char longp[5100] = "path=/workspace/";
	memset(longp + 16, 'a', 5000);
	assert_int_equal(P("GET fs/stat", longp, &e), -ENAMETOOLONG);

	assert_int_equal(P("GET fs/list", "path=/tmp&depth=5", &e), 0);
	assert_int_equal(arg_uint("depth"), 5);
	assert_int_equal(P("GET fs/list", "path=/tmp", &e), 0);
	assert_int_equal(arg_uint("depth"), 1);
	assert_int_equal(P("GET fs/list", "path=/tmp&depth=33", &e), -EINVAL);

	assert_int_equal(P("DELETE files", "path=/tmp/x&recursive=true", &e), 0);
	assert_true(arg_bool("recursive"));
	assert_int_equal(q->status, 204);
	assert_int_equal(P("DELETE files", "path=/tmp/x&recursive=2", &e), -EINVAL);
	assert_int_equal(P("DELETE files", "path=/tmp", &e), -EPERM);
	assert_non_null(strstr(e.msg, "policy root"));

	sup_http_hdr acc = { "Accept", "application/x-ndjson" };
	assert_int_equal(parse("GET fs/watch", "path=/workspace&recursive=1", NULL, &acc, 1, 0, &e), 0);
	assert_true(arg_bool("recursive"));
	assert_int_equal(q->fmt, SUP_STREAM_NDJSON);
	assert_int_equal(P("GET fs/watch", "path=/workspace", &e), 0);
	assert_int_equal(q->fmt, SUP_STREAM_SSE);
	done();
}

static void test_download_and_upload(void **state)
{
	sbx_err e;
	sup_http_hdr range = { "Range", "bytes=10-19" };
	assert_int_equal(parse("GET files", "path=/tmp/f", NULL, &range, 1, 0, &e), 0);
	assert_true(q->ranged && !q->suffix);
	assert_int_equal(q->want_off, 10);
	assert_int_equal(q->want_len, 10);
	range.value = "bytes=-5";
	assert_int_equal(parse("GET files", "path=/tmp/f", NULL, &range, 1, 0, &e), 0);
	assert_true(q->suffix);
	assert_int_equal(q->want_len, 5);
	range.value = "bytes=5-1";
	assert_int_equal(parse("GET files", "path=/tmp/f", NULL, &range, 1, 0, &e), -ERANGE);
	range.value = "bytes=0-1,3-4";
	assert_int_equal(parse("GET files", "path=/tmp/f", NULL, &range, 1, 0, &e), -ERANGE);
	assert_int_equal(P("GET files", "path=/tmp/d/", &e), -EINVAL);

	assert_int_equal(parse("PUT files", "path=/tmp/f&mode=0600&parents=1&overwrite=0", NULL, NULL,
			       0, 10, &e), 0);
	assert_string_equal(q->aop, SBX_OP_FILE_WRITE);
	assert_int_equal(arg_uint("mode"), 0600);
	assert_true(arg_bool("parents") && !arg_bool("overwrite"));
	assert_int_equal(arg_uint("max_bytes"), 1000);
	assert_int_equal(parse("PUT files", "path=/tmp/f&mode=4755", NULL, NULL, 0, 10, &e), -EINVAL);
	assert_int_equal(parse("PUT files", "path=/tmp/f", NULL, NULL, 0, 1001, &e), -E2BIG);
	assert_int_equal(parse("PUT files", "path=/tmp/f", NULL, NULL, 0, UINT64_MAX, &e), 0);
	assert_int_equal(parse("PUT files", "path=/tmp/", NULL, NULL, 0, 1, &e), -EINVAL);
	assert_int_equal(parse("PUT files", "path=/tmp", NULL, NULL, 0, 1, &e), -EINVAL);
	done();
}

static void test_body_routes(void **state)
{
	sbx_err e;
	assert_int_equal(B("POST fs/mkdir", "{\"path\":\"/tmp/d\",\"parents\":true,\"mode\":448}", &e), 0);
	assert_true(arg_is("path", "d") && arg_bool("parents"));
	assert_int_equal(arg_uint("mode"), 448);
	assert_int_equal(B("POST fs/mkdir", "{\"path\":\"/tmp/d\"}", &e), 0);
	assert_int_equal(arg_uint("mode"), 0755);
	assert_int_equal(B("POST fs/mkdir", "{\"path\":1}", &e), -EINVAL);
	assert_int_equal(B("POST fs/mkdir", "{\"path\":\"/tmp/d\",\"x\":1}", &e), -EINVAL);
	assert_int_equal(B("POST fs/mkdir", "{\"path\":\"/tmp/d\",\"mode\":4096}", &e), -EINVAL);
	assert_int_equal(B("POST fs/mkdir", "[]", &e), -EINVAL);
	assert_int_equal(B("POST fs/mkdir", "{\"path\":\"/tmp/d\",\"parents\":\"yes\"}", &e), -EINVAL);

	assert_int_equal(B("POST fs/chmod", "{\"path\":\"/tmp/f\"}", &e), -EINVAL);
	assert_int_equal(B("POST fs/chmod", "{\"path\":\"/tmp/f\",\"mode\":420}", &e), 0);

	assert_int_equal(B("POST fs/move", "{\"from\":\"/tmp/a\",\"to\":\"/workspace/b\"}", &e), 0);
	assert_true(arg_is("root", "/tmp") && arg_is("path", "a"));
	assert_true(arg_is("to_root", "/workspace") && arg_is("to", "b") && !arg_bool("overwrite"));
	assert_int_equal(B("POST fs/move", "{\"from\":\"/tmp\",\"to\":\"/workspace/b\"}", &e), -EPERM);
	assert_string_equal(q->subj, "/tmp");
	assert_int_equal(B("POST fs/move", "{\"from\":\"/tmp/a\",\"to\":\"/etc/b\"}", &e), -EPERM);
	assert_string_equal(q->subj, "/etc/b");

	assert_int_equal(B("POST fs/search", "{\"path\":\"/tmp\",\"glob\":\"*.c\"}", &e), 0);
	assert_true(arg_is("glob", "*.c"));
	assert_int_equal(arg_uint("max"), 1000);
	assert_int_equal(B("POST fs/search", "{\"path\":\"/tmp\"}", &e), -EINVAL);
	assert_int_equal(B("POST fs/search", "{\"path\":\"/tmp\",\"glob\":\"*\",\"max\":0}", &e), -EINVAL);
	done();
}

/* A tenant's own paths decide, not the node's policy. */
static void test_tenant_policy(void **state)
{
	sbx_err e;
	who = sup_tenants_find(tenants, "ro");
	assert_int_equal(P("GET fs/stat", "path=/workspace/a", &e), 0);
	assert_int_equal(P("DELETE files", "path=/workspace/a", &e), -EPERM);
	assert_non_null(strstr(e.msg, "read-only"));
	assert_int_equal(P("GET fs/stat", "path=/tmp/a", &e), -EPERM);
	who = sup_tenants_find(tenants, "default");
	assert_int_equal(P("DELETE files", "path=/workspace/a", &e), 0);
	assert_int_equal(P("GET fs/stat", "path=/tmp/a", &e), 0);
	done();
}

int main(void)
{
	msgpack_unpacked_init(&args);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_routes),
		cmocka_unit_test(test_download_and_upload),
		cmocka_unit_test(test_body_routes),
		cmocka_unit_test(test_tenant_policy),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
