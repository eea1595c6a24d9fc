/* Every parser of the images routes, called through the family's rows as
 * the edge calls them: a request in, the kind of POST, the decoded name,
 * a pool's size and isolation out, or a negative errno with a message
 * (never an answer); and who may: the admin changes, a tenant reads. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sup_images_int.h"
#include "sup_token.h"

static sup_images_ctx ctx;
static sup_imq *q;
static sup_policy *node_policy;
static sup_tenants *tenants;
static const sup_tenant *admin, *alice;

static int setup(void **state)
{
	(void)state;
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
		 "{\"tenants\": {\"admin\": {\"tokens\": [\"%s\"]}, \"alice\": {\"tokens\": [\"%s\"]}}}",
		 h1, h2);
	assert_int_equal(sup_tenants_load_json(json, strlen(json), "test", &node, &tenants, &e), 0);
	admin = sup_tenants_find(tenants, "admin");
	alice = sup_tenants_find(tenants, "alice");
	ctx.max_import = 1000;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sup_tenants_unref(tenants);
	sup_policy_free(node_policy);
	return 0;
}

static void done(void)
{
	if (q) {
		sup_images_family.release(q);
		free(q);
		q = NULL;
	}
}

/* Parse with the row named name (seg: the {ref} segment as sent). */
static int parse(const char *name, const char *seg, const char *query, const char *ctype,
		 const char *body, uint64_t expect, const sup_tenant *who, sbx_err *e)
{
	done();
	sup_http_hdr hdr = { "Content-Type", ctype };
	sup_http_in in = { .pid = seg, .query = query, .body = body ? body : "",
			   .body_len = body ? strlen(body) : 0, .hdrs = &hdr, .nhdrs = ctype ? 1 : 0,
			   .body_expect = expect, .who = who };
	q = calloc(1, sup_images_family.state_size);
	for (size_t i = 0; i < sup_images_family.nroutes; i++) {
		const sup_http_route *r = &sup_images_family.routes[i];
		if (strcmp(r->name, name) != 0)
			continue;
		sbx_err_clear(e);
		return r->parse ? r->parse(&in, &ctx, q, e) : 0;
	}
	fail_msg("no row %s", name);
	return -1;
}

static void test_post_kinds(void **state)
{
	(void)state;
	sbx_err e;
	assert_int_equal(parse("POST images", NULL, NULL, "application/x-tar", NULL, 10, admin, &e), 0);
	assert_int_equal(q->kind, SUP_IM_UPLOAD);
	assert_false(q->named);
	assert_int_equal(parse("POST images", NULL, "name=team%2Fapp:1", "application/gzip; x=1", NULL,
			       UINT64_MAX, admin, &e), 0);
	assert_int_equal(q->kind, SUP_IM_UPLOAD);
	assert_string_equal(q->name, "team/app:1");
	assert_int_equal(parse("POST images", NULL, NULL, "Application/JSON; charset=utf-8", NULL, 20,
			       admin, &e), 0);
	assert_int_equal(q->kind, SUP_IM_PULL);
	/* 415 for another kind or none */
	assert_int_equal(parse("POST images", NULL, NULL, "text/plain", NULL, 10, admin, &e),
			 -EPROTONOSUPPORT);
	assert_non_null(strstr(e.msg, "text/plain"));
	assert_int_equal(parse("POST images", NULL, NULL, NULL, NULL, 10, admin, &e), -EPROTONOSUPPORT);
	/* 413 as announced; an empty body, a bad name, a pull's query: 400 */
	assert_int_equal(parse("POST images", NULL, NULL, "application/x-tar", NULL, 1001, admin, &e),
			 -E2BIG);
	assert_non_null(strstr(e.msg, "--image-max-import"));
	assert_int_equal(parse("POST images", NULL, NULL, "application/json", NULL, 70000, admin, &e),
			 -E2BIG);
	assert_int_equal(parse("POST images", NULL, NULL, "application/x-tar", NULL, 0, admin, &e),
			 -EINVAL);
	assert_int_equal(parse("POST images", NULL, "name=host", "application/x-tar", NULL, 10, admin,
			       &e), -EINVAL);
	assert_int_equal(parse("POST images", NULL, "name=a", "application/json", NULL, 10, admin, &e),
			 -EINVAL);
	/* a tenant is not the admin */
	assert_int_equal(parse("POST images", NULL, NULL, "application/x-tar", NULL, 10, alice, &e),
			 -EPERM);
	done();
}

static void test_names(void **state)
{
	(void)state;
	sbx_err e;
	assert_int_equal(parse("GET image", "docker.io%2Flibrary%2Fpython:3.11-slim", NULL, NULL, NULL,
			       0, alice, &e), 0);
	assert_string_equal(q->name, "docker.io/library/python:3.11-slim");
	assert_int_equal(parse("GET image", "a+b%2b", NULL, NULL, NULL, 0, alice, &e), 0);
	assert_string_equal(q->name, "a+b+"); /* '+' is itself in a path */
	static const char *const bad[] = { "bad%2", "bad%zz", "nul%00x", "host", "%2Fabs",
					   "sha256:00", "a%20b" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse("GET image", bad[i], NULL, NULL, NULL, 0, alice, &e), -EINVAL);
	char longname[SUP_HTTP_SEG_MAX];
	memset(longname, 'a', 300);
	longname[300] = '\0';
	assert_int_equal(parse("GET image", longname, NULL, NULL, NULL, 0, alice, &e), -EINVAL);
	/* DELETE: the admin's */
	assert_int_equal(parse("DELETE image", "tiny", NULL, NULL, NULL, 0, admin, &e), 0);
	assert_int_equal(parse("DELETE image", "tiny", NULL, NULL, NULL, 0, alice, &e), -EPERM);
	assert_non_null(strstr(e.msg, "admin"));
	done();
}

static void test_pool(void **state)
{
	(void)state;
	sbx_err e;
	assert_int_equal(parse("PUT pool", "tiny", NULL, NULL, "{\"size\": 3}", 0, admin, &e), 0);
	assert_int_equal(q->size, 3);
	assert_int_equal(q->isolation, SUP_ISO_RUNC);
	assert_int_equal(parse("PUT pool", "host", NULL, NULL, "{\"size\": 0, \"isolation\": \"gvisor\"}",
			       0, admin, &e), 0);
	assert_int_equal(q->isolation, SUP_ISO_GVISOR);
	assert_string_equal(q->name, "host");
	assert_int_equal(parse("PUT pool", "%2Fsrv%2Froot", NULL, NULL, "{\"size\": 1}", 0, admin, &e), 0);
	assert_string_equal(q->name, "/srv/root");
	static const char *const bad[] = { "{}", "{\"size\": -1}", "{\"size\": 257}", "{\"size\": 1.5}",
					   "{\"size\": \"2\"}", "{\"size\": 1, \"x\": 1}",
					   "{\"size\": 1, \"isolation\": \"xen\"}", "[]", "" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(parse("PUT pool", "tiny", NULL, NULL, bad[i], 0, admin, &e), -EINVAL);
	assert_int_equal(parse("PUT pool", "tiny", NULL, NULL, "{\"size\": 1}", 0, alice, &e), -EPERM);
	done();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_post_kinds),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_pool),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
