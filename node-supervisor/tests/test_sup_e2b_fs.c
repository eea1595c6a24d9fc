/* The E2B layer's filesystem parsers through the envd family's rows, as
 * the edge calls them: their paths (absolute, "~", "~/x", relative: the
 * user's home) through the tenant's path policy (the built-in one: /tmp,
 * /workspace, /home/sandbox), the root and the part below it that go to
 * the agent, and each call's refusals; /files' query and body types. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sup_e2b_fs_int.h"
#include "sup_policy.h"
#include "sup_tenants.h"
#include "sup_token.h"

static sup_e2b_ctx ctx;
static sup_policy *node_policy;
static sup_tenants *tenants;
static const sup_tenant *who;
static sup_eq *q;

static int setup(void **state)
{
	sbx_err e;
	(void)state;
	assert_int_equal(sup_policy_new_default(&node_policy, &e), 0);
	static const char *const isos[] = { "runc" };
	sup_tenants_node node = { .policy = node_policy, .max_timeout_s = 60, .isolations = isos,
				  .nisolations = 1 };
	sup_resources_default(&node.res_default);
	node.res_max = node.res_default;
	char json[256], h[SUP_TOKEN_HASH_TEXT_LEN + 1];
	assert_int_equal(sup_token_hash_text("t1", 2, h, &e), 0);
	snprintf(json, sizeof(json), "{\"tenants\": {\"default\": {\"tokens\": [\"%s\"]}}}", h);
	assert_int_equal(sup_tenants_load_json(json, strlen(json), "test", &node, &tenants, &e), 0);
	who = sup_tenants_find(tenants, "default");
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
		sup_e2b_envd_family.release(q);
		free(q);
		q = NULL;
	}
}

/* The row named name with the body (and headers, query). */
static int parse(const char *name, const char *ctype, const char *auth, const char *query, const char *body,
		 size_t len, sbx_err *e)
{
	done();
	sup_http_hdr hdrs[2];
	size_t nh = 0;
	if (ctype)
		hdrs[nh++] = (sup_http_hdr){ "Content-Type", ctype };
	if (auth)
		hdrs[nh++] = (sup_http_hdr){ "Authorization", auth };
	sup_http_in in = { .id = "sb-1", .path = "/x", .query = query, .body = body ? body : "",
			   .body_len = len, .hdrs = hdrs, .nhdrs = nh, .who = who };
	for (size_t i = 0; i < sup_e2b_envd_family.nroutes; i++) {
		const sup_http_route *r = &sup_e2b_envd_family.routes[i];
		if (strcmp(r->name, name) != 0)
			continue;
		in.method = r->method;
		q = calloc(1, sup_e2b_envd_family.state_size);
		sbx_err_clear(e);
		return r->parse(&in, &ctx, q, e);
	}
	fail_msg("no route %s", name);
	return 0;
}

static int rpc(const char *name, const char *msg, const char *auth, sbx_err *e)
{
	return parse(name, "application/json", auth, NULL, msg, strlen(msg), e);
}

/* A stream call's one envelope around msg. */
static int stream(const char *name, const char *msg, sbx_err *e)
{
	char buf[512];
	size_t n = strlen(msg);
	buf[0] = 0;
	buf[1] = (char)(n >> 24);
	buf[2] = (char)(n >> 16);
	buf[3] = (char)(n >> 8);
	buf[4] = (char)n;
	memcpy(buf + 5, msg, n);
	return parse(name, "application/connect+json", NULL, NULL, buf, n + 5, e);
}

static void at(const char *path, const char *root, const char *rel)
{
	assert_string_equal(q->fs->m.path, path);
	assert_string_equal(q->fs->m.root, root);
	assert_string_equal(q->fs->m.rel, rel);
}

static void test_paths(void **unused)
{
	(void)unused;
	sbx_err e;
	assert_int_equal(rpc("envd Stat", "{\"path\":\"/tmp/a/../b\"}", NULL, &e), 0);
	at("/tmp/b", "/tmp", "b");
	assert_int_equal(rpc("envd Stat", "{\"path\":\"~\"}", NULL, &e), 0);
	at("/home/sandbox", "/home/sandbox", "");
	assert_int_equal(rpc("envd Stat", "{\"path\":\"~/x/y\"}", NULL, &e), 0);
	at("/home/sandbox/x/y", "/home/sandbox", "x/y");
	assert_int_equal(rpc("envd Stat", "{\"path\":\"rel.txt\"}", NULL, &e), 0);
	at("/home/sandbox/rel.txt", "/home/sandbox", "rel.txt");
	/* E2B's "user" is the sandbox user; root's home is outside the policy */
	assert_int_equal(rpc("envd Stat", "{\"path\":\"a\"}", "Basic dXNlcjo=", &e), 0); /* user: */
	at("/home/sandbox/a", "/home/sandbox", "a");
	assert_int_equal(rpc("envd Stat", "{\"path\":\"a\"}", "Basic cm9vdDo=", &e), -EPERM); /* root: */
	/* a relative path cannot climb out of the home past the policy */
	assert_int_equal(rpc("envd Stat", "{\"path\":\"../../etc/passwd\"}", NULL, &e), -EPERM);
	assert_int_equal(rpc("envd Stat", "{\"path\":\"/etc/passwd\"}", NULL, &e), -EPERM);
	assert_int_equal(rpc("envd Stat", "{\"path\":\"~bob/x\"}", NULL, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "~user"));
	assert_int_equal(rpc("envd Stat", "{\"path\":\"\"}", NULL, &e), -EINVAL);
	assert_int_equal(rpc("envd Stat", "{\"path\":\"/tmp/a\\u0000b\"}", NULL, &e), -EINVAL);
	assert_int_equal(rpc("envd Stat", "{\"path\":7}", NULL, &e), -EINVAL);
	assert_int_equal(rpc("envd Stat", "{}", NULL, &e), -EINVAL);
	char big[5000];
	memset(big, 'a', sizeof(big));
	memcpy(big, "{\"path\":\"/tmp/", 14);
	memcpy(big + sizeof(big) - 3, "\"}", 3);
	assert_int_equal(rpc("envd Stat", big, NULL, &e), -EINVAL);
	/* not JSON, the wrong type */
	assert_int_equal(rpc("envd Stat", "{", NULL, &e), -EINVAL);
	assert_int_equal(parse("envd Stat", "application/proto", NULL, NULL, "x", 1, &e), -EINVAL);
	done();
}

static void test_calls(void **unused)
{
	(void)unused;
	sbx_err e;
	assert_int_equal(rpc("envd ListDir", "{\"path\":\"/tmp\",\"depth\":3}", NULL, &e), 0);
	assert_int_equal(q->fs->depth, 3);
	assert_int_equal(rpc("envd ListDir", "{\"path\":\"/tmp\"}", NULL, &e), 0);
	assert_int_equal(q->fs->depth, 1);
	assert_int_equal(rpc("envd ListDir", "{\"path\":\"/tmp\",\"depth\":0}", NULL, &e), 0);
	assert_int_equal(q->fs->depth, 1);
	assert_int_equal(rpc("envd ListDir", "{\"path\":\"/tmp\",\"depth\":33}", NULL, &e), -EINVAL);
	assert_int_equal(rpc("envd ListDir", "{\"path\":\"/tmp\",\"depth\":\"2\"}", NULL, &e), -EINVAL);
	assert_int_equal(rpc("envd MakeDir", "{\"path\":\"/workspace/a/b\"}", NULL, &e), 0);
	at("/workspace/a/b", "/workspace", "a/b");
	assert_int_equal(rpc("envd Move", "{\"source\":\"/tmp/a\",\"destination\":\"~/b\"}", NULL, &e), 0);
	at("/tmp/a", "/tmp", "a");
	assert_string_equal(q->fs->m2.path, "/home/sandbox/b");
	assert_string_equal(q->fs->m2.rel, "b");
	assert_int_equal(rpc("envd Move", "{\"source\":\"/tmp\",\"destination\":\"/workspace/t\"}", NULL, &e), -EPERM);
	assert_int_equal(rpc("envd Move", "{\"source\":\"/tmp/a\",\"destination\":\"/tmp\"}", NULL, &e), -EPERM);
	assert_int_equal(rpc("envd Move", "{\"source\":\"/tmp/a\"}", NULL, &e), -EINVAL);
	assert_int_equal(rpc("envd Move", "{\"source\":\"/tmp/a\",\"destination\":\"/etc/a\"}", NULL, &e), -EPERM);
	assert_int_equal(rpc("envd Remove", "{\"path\":\"/tmp/x\"}", NULL, &e), 0);
	assert_int_equal(rpc("envd Remove", "{\"path\":\"~\"}", NULL, &e), -EPERM); /* a policy root */
	assert_non_null(strstr(e.msg, "policy root"));
	/* WatchDir: a stream's errors wait for the act (their end-stream) */
	assert_int_equal(stream("envd WatchDir", "{\"path\":\"/tmp\",\"recursive\":1}", &e), 0);
	assert_int_equal(q->early, -EINVAL);
	assert_non_null(strstr(q->early_err.msg, "recursive"));
	assert_int_equal(stream("envd WatchDir", "{\"path\":\"~/d\",\"recursive\":true}", &e), 0);
	assert_int_equal(q->early, 0);
	assert_true(q->fs->recursive);
	at("/home/sandbox/d", "/home/sandbox", "d");
	assert_int_equal(stream("envd WatchDir", "{\"path\":\"/etc/x\"}", &e), 0);
	assert_int_equal(q->early, -EPERM);
	done();
}

static void test_files(void **unused)
{
	(void)unused;
	sbx_err e;
	assert_int_equal(parse("envd GET files", NULL, NULL, "path=%7E%2Fa.txt&username=user", NULL, 0, &e), 0);
	at("/home/sandbox/a.txt", "/home/sandbox", "a.txt");
	assert_int_equal(parse("envd GET files", NULL, NULL, "username=user", NULL, 0, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "path"));
	assert_int_equal(parse("envd GET files", NULL, NULL, "path=/tmp/a&signature=x", NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("envd GET files", NULL, NULL, "path=/etc/shadow", NULL, 0, &e), -EPERM);
	assert_int_equal(parse("envd GET files", NULL, NULL, "path=a&username=root", NULL, 0, &e), -EPERM);
	/* POST: multipart (path optional: each part's filename), or one file at ?path= */
	assert_int_equal(parse("envd POST files", "multipart/form-data; boundary=XyZ", NULL, NULL, NULL, 0, &e), 0);
	assert_non_null(q->fs->parser);
	assert_false(q->fs->octet);
	assert_int_equal(parse("envd POST files", "multipart/form-data", NULL, NULL, NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("envd POST files", "application/octet-stream", NULL, "path=/tmp/o", NULL, 0, &e), 0);
	assert_true(q->fs->octet);
	at("/tmp/o", "/tmp", "o");
	assert_int_equal(parse("envd POST files", "application/octet-stream", NULL, NULL, NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("envd POST files", "application/octet-stream", NULL, "path=/tmp", NULL, 0, &e), -EINVAL);
	assert_int_equal(parse("envd POST files", "application/octet-stream", NULL, "path=/etc/o", NULL, 0, &e), -EPERM);
	done();
	/* a Content-Encoding is refused */
	sup_http_hdr h[] = { { "Content-Type", "application/octet-stream" }, { "Content-Encoding", "gzip" } };
	sup_http_in in = { .id = "sb-1", .method = "POST", .path = "/x", .query = "path=/tmp/g", .body = "",
			   .hdrs = h, .nhdrs = 2, .who = who };
	for (size_t i = 0; i < sup_e2b_envd_family.nroutes; i++)
		if (strcmp(sup_e2b_envd_family.routes[i].name, "envd POST files") == 0) {
			q = calloc(1, sup_e2b_envd_family.state_size);
			assert_int_equal(sup_e2b_envd_family.routes[i].parse(&in, &ctx, q, &e), -EINVAL);
			assert_non_null(strstr(e.msg, "Content-Encoding"));
		}
	done();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_calls),
		cmocka_unit_test(test_files),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
