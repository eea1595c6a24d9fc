/* The tenants file (sup_tenants): strict parsing with errors naming the
 * field, hashed tokens and their lookup, the settings a tenant leaves to
 * the node, the single tenant without a file, and holding a set across a
 * reload. Files on a real temp folder. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_tenants.h"

static const char *const isos[] = { "runc", "gvisor" };
static sup_policy *node_policy;
static sup_tenants_node node;

static int setup(void **state)
{
	(void)state;
	sbx_err e;
	if (sup_policy_new_default(&node_policy, &e) < 0)
		return -1;
	node = (sup_tenants_node){ .policy = node_policy,
				   .allow_root = false,
				   .max_timeout_s = 7 * 86400,
				   .isolations = isos,
				   .nisolations = 2 };
	sup_resources_default(&node.res_default);
	node.res_max = node.res_default;
	node.res_max.cpu_milli = 4000;
	node.res_max.memory = 8ull << 30;
	node.res_max.disk = 50ull << 30;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	sup_policy_free(node_policy);
	return 0;
}

/* The stored form of token t (a test's own computation of SHA-256 is
 * libcrypto's: checked against a known vector below). */
static const char *hash_of(const char *t)
{
	static char buf[4][SUP_TOKEN_HASH_TEXT_LEN + 1];
	static int next;
	char *b = buf[next++ % 4];
	sbx_err e;
	assert_int_equal(sup_token_hash_text(t, strlen(t), b, &e), 0);
	return b;
}

static int load(const char *json, sup_tenants **ts, sbx_err *e)
{
	return sup_tenants_load_json(json, strlen(json), "t.json", &node, ts, e);
}

static void test_hash_vector(void **state)
{
	(void)state;
	/* SHA-256("abc"), FIPS 180-2 appendix B.1. */
	assert_string_equal(hash_of("abc"),
			    "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	uint8_t h[SUP_TOKEN_HASH_LEN];
	const char *up = "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD";
	assert_int_equal(sup_token_hash_parse(up, strlen(up), h), -EINVAL);
	const char *s = hash_of("abc");
	assert_int_equal(sup_token_hash_parse(s, strlen(s), h), 0);
	assert_int_equal(h[0], 0xba);
	assert_int_equal(h[31], 0xad);
	assert_int_equal(sup_token_hash_parse(s, strlen(s) - 1, h), -EINVAL);
	assert_int_equal(sup_token_hash_parse(s + 7, strlen(s) - 7, h), -EINVAL);
}

static void test_full_file(void **state)
{
	(void)state;
	char json[4096];
	snprintf(json, sizeof(json),
		 "{\"tenants\": {"
		 "\"alice\": {\"tokens\": [\"%s\", \"%s\"],"
		 "  \"quota\": {\"sandboxes\": 3, \"cpus\": 1.5, \"memory\": \"2G\", \"disk\": 1073741824},"
		 "  \"images\": [\"host\"], \"isolation\": [\"gvisor\", \"runc\"],"
		 "  \"paths\": [{\"root\": \"/workspace\", \"mode\": \"ro\"}],"
		 "  \"allow_root\": true, \"max_timeout\": 600,"
		 "  \"default_resources\": {\"cpus\": 0.5, \"memory\": \"256M\"}},"
		 "\"admin\": {\"tokens\": [\"%s\"]},"
		 "\"bob\": {\"tokens\": [\"%s\"], \"isolation\": \"runc\"}}}",
		 hash_of("a1"), hash_of("a2"), hash_of("root-tok"), hash_of("b1"));
	sup_tenants *ts = NULL;
	sbx_err e;
	assert_int_equal(load(json, &ts, &e), 0);
	assert_int_equal(sup_tenants_count(ts), 3);
	const sup_tenant *a = sup_tenants_find(ts, "alice");
	assert_non_null(a);
	assert_false(a->admin);
	assert_int_equal(a->quota.set, SUP_QUOTA_SANDBOXES | SUP_QUOTA_CPUS | SUP_QUOTA_MEMORY |
					       SUP_QUOTA_DISK);
	assert_int_equal(a->quota.sandboxes, 3);
	assert_int_equal(a->quota.cpu_milli, 1500);
	assert_int_equal(a->quota.memory, 2ull << 30);
	assert_int_equal(a->quota.disk, 1ull << 30);
	assert_true(sup_tenant_may_image(a, "host"));
	assert_false(sup_tenant_may_image(a, "/srv/py"));
	assert_true(sup_tenant_may_isolation(a, 0));
	assert_true(sup_tenant_may_isolation(a, 1));
	assert_int_equal(a->default_isolation, 1);
	assert_true(a->allow_root);
	assert_int_equal(a->max_timeout_s, 600);
	assert_int_equal(a->res_default.cpu_milli, 500);
	assert_int_equal(a->res_default.memory, 256ull << 20);
	assert_int_equal(a->res_default.pids, node.res_default.pids); /* the node's */
	/* Its own paths: /workspace read-only, /tmp nothing. */
	sup_policy_match m;
	assert_ptr_not_equal(sup_tenant_policy(a), node_policy);
	assert_int_equal(sup_policy_check(sup_tenant_policy(a), a->name, "/workspace/x", 12,
					  SUP_POLICY_WRITE, &m, &e), -EPERM);
	assert_int_equal(sup_policy_check(sup_tenant_policy(a), a->name, "/workspace/x", 12,
					  SUP_POLICY_READ, &m, &e), 0);
	assert_int_equal(sup_policy_check(sup_tenant_policy(a), a->name, "/tmp/x", 6,
					  SUP_POLICY_READ, &m, &e), -EPERM);

	/* What bob leaves out is the node's. */
	const sup_tenant *b = sup_tenants_find(ts, "bob");
	assert_false(b->admin);
	assert_int_equal(b->quota.set, 0);
	assert_true(sup_tenant_may_image(b, "anything"));
	assert_true(sup_tenant_may_isolation(b, 0));
	assert_false(sup_tenant_may_isolation(b, 1));
	assert_false(b->allow_root);
	assert_int_equal(b->max_timeout_s, node.max_timeout_s);
	assert_memory_equal(&b->res_default, &node.res_default, sizeof(sup_resources));
	assert_ptr_equal(sup_tenant_policy(b), node_policy);
	assert_int_equal(sup_policy_check(sup_tenant_policy(b), b->name, "/tmp/x", 6,
					  SUP_POLICY_WRITE, &m, &e), 0);

	assert_true(sup_tenants_find(ts, "admin")->admin);

	/* Tokens: each opens its own tenant; anything else nothing. */
	assert_ptr_equal(sup_tenants_auth(ts, "a1", 2), a);
	assert_ptr_equal(sup_tenants_auth(ts, "a2", 2), a);
	assert_ptr_equal(sup_tenants_auth(ts, "b1", 2), b);
	assert_ptr_equal(sup_tenants_auth(ts, "root-tok", 8), sup_tenants_find(ts, "admin"));
	assert_null(sup_tenants_auth(ts, "a3", 2));
	assert_null(sup_tenants_auth(ts, "a", 1));
	assert_null(sup_tenants_auth(ts, "", 0));
	/* The hash is not the token. */
	const char *ha = hash_of("a1");
	assert_null(sup_tenants_auth(ts, ha, strlen(ha)));
	sup_tenants_unref(ts);
}

/* Each bad file names what is wrong. */
static void test_errors_name_the_field(void **state)
{
	(void)state;
	char ok[80];
	snprintf(ok, sizeof(ok), "\"%s\"", hash_of("x"));
	static const struct {
		const char *body; /* @: a valid token hash */
		const char *want; /* in the message */
	} cases[] = {
		{ "[]", "want an object" },
		{ "{\"tenant\": {}}", "unknown key \"tenant\"" },
		{ "{\"tenants\": {}}", "non-empty object" },
		{ "{\"tenants\": {\"a b\": {\"tokens\": [@]}}}", "name \"a b\"" },
		{ "{\"tenants\": {\"a\": {}}}", "tenants.a.tokens: missing" },
		{ "{\"tenants\": {\"a\": {\"tokens\": []}}}", "tenants.a.tokens: want a non-empty" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [\"secret\"]}}}", "tenants.a.tokens[0]: want \"sha256:\"" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"quota\": {\"ram\": 1}}}}", "tenants.a.quota: unknown key \"ram\"" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"quota\": {\"memory\": \"lots\"}}}}", "tenants.a.quota.memory: 'lots' is not a size" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"quota\": {\"cpus\": \"2\"}}}}", "tenants.a.quota.cpus: want a number" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"quota\": {\"sandboxes\": -1}}}}", "tenants.a.quota.sandboxes: want a whole number" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"images\": \"host\"}}}", "tenants.a.images: want an array" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"isolation\": \"kvm\"}}}", "tenants.a.isolation: want runc or gvisor" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"paths\": [{\"root\": \"x\", \"mode\": \"rw\"}]}}}", "tenants.a.paths[0].root" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"allow_root\": 1}}}", "tenants.a.allow_root: want true or false" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"max_timeout\": 0}}}", "tenants.a.max_timeout: want 1..604800" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"max_timeout\": 604801}}}", "tenants.a.max_timeout" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"default_resources\": {\"memory\": \"16G\"}}}}", "tenants.a.default_resources: field \"resources.memory\": 16G is over this supervisor's ceiling of 8G" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@], \"colour\": 1}}}", "tenants.a: unknown key \"colour\"" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@]}, \"b\": {\"tokens\": [@]}}}", "tenants.a.tokens[0] and tenants.b.tokens[0]: the same token" },
		{ "{\"tenants\": {\"a\": {\"tokens\": [@]}}, }", "t.json: line 1" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char json[1024];
		size_t o = 0;
		for (const char *c = cases[i].body; *c && o + sizeof(ok) < sizeof(json); c++)
			if (*c == '@')
				o += (size_t)snprintf(json + o, sizeof(json) - o, "%s", ok);
			else
				json[o++] = *c;
		json[o] = '\0';
		sup_tenants *ts = (sup_tenants *)&ts; /* must be reset */
		sbx_err e;
		int rc = load(json, &ts, &e);
		if (rc != -EINVAL || !strstr(e.msg, cases[i].want))
			fail_msg("case %zu: rc %d, message \"%s\", want \"%s\"", i, rc, e.msg,
				 cases[i].want);
		assert_null(ts);
	}
}

static void test_file_and_single(void **state)
{
	(void)state;
	char dir[] = "/tmp/sup-tenants-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof(path), "%s/tenants.json", dir);
	sup_tenants *ts = NULL;
	sbx_err e;
	assert_int_equal(sup_tenants_load_file(path, &node, &ts, &e), -ENOENT);
	assert_non_null(strstr(e.msg, "tenants.json"));
	FILE *f = fopen(path, "w");
	fprintf(f, "{\"tenants\": {\"admin\": {\"tokens\": [\"%s\"]}}}\n", hash_of("t"));
	fclose(f);
	assert_int_equal(sup_tenants_load_file(path, &node, &ts, &e), 0);
	assert_true(sup_tenants_auth(ts, "t", 1)->admin);
	sup_tenants_unref(ts);
	unlink(path);
	rmdir(dir);

	/* Without a file: the token is one tenant, admin, all the node's. */
	assert_int_equal(sup_tenants_single("0123abcd", &node, &ts, &e), 0);
	assert_int_equal(sup_tenants_count(ts), 1);
	const sup_tenant *t = sup_tenants_auth(ts, "0123abcd", 8);
	assert_non_null(t);
	assert_string_equal(t->name, SUP_TENANT_SINGLE);
	assert_true(t->admin);
	assert_int_equal(t->quota.set, 0);
	assert_ptr_equal(sup_tenant_policy(t), node_policy);
	assert_null(sup_tenants_auth(ts, "0123abce", 8));
	sup_tenants_unref(ts);
}

/* A held tenant outlives the loader's reference (a reload meanwhile);
 * ASan says whether anything was freed early or leaked. */
static void test_hold_across_reload(void **state)
{
	(void)state;
	char json[256];
	snprintf(json, sizeof(json), "{\"tenants\": {\"a\": {\"tokens\": [\"%s\"]}}}", hash_of("k"));
	sup_tenants *ts = NULL;
	sbx_err e;
	assert_int_equal(load(json, &ts, &e), 0);
	const sup_tenant *t = sup_tenant_hold(sup_tenants_auth(ts, "k", 1));
	sup_tenant_hold(t);
	sup_tenants_unref(ts); /* the reload dropped it */
	assert_string_equal(t->name, "a");
	sup_tenant_release(t);
	assert_string_equal(t->name, "a");
	sup_tenant_release(t);
}

/* Quota arithmetic: what is over, by how much, in the file's own units. */
static void test_quota_check(void **state)
{
	(void)state;
	char json[512];
	snprintf(json, sizeof(json),
		 "{\"tenants\": {\"q\": {\"tokens\": [\"%s\"], \"quota\": {\"sandboxes\": 3, "
		 "\"cpus\": 1.5, \"memory\": \"4G\"}}}}",
		 hash_of("q"));
	sup_tenants *ts = NULL;
	sbx_err e;
	assert_int_equal(load(json, &ts, &e), 0);
	const sup_tenant *t = sup_tenants_find(ts, "q");
	sup_resources one = { .cpu_milli = 500, .memory = 1ull << 30, .pids = 64, .disk = 100ull << 30 };
	sup_quota held = { 0 };
	const char *fig = NULL;
	/* Three of them fit (disk has no quota: 300G is fine). */
	for (int i = 0; i < 3; i++) {
		assert_int_equal(sup_quota_check(t, &held, &one, &fig, &e), 0);
		sup_quota_add(&held, &one);
	}
	assert_int_equal(held.sandboxes, 3);
	assert_int_equal(held.cpu_milli, 1500);
	assert_int_equal(sup_quota_check(t, &held, &one, &fig, &e), -EDQUOT);
	assert_string_equal(fig, "sandboxes");
	assert_string_equal(e.msg, "tenant q is over its quota of sandboxes: it holds 3, asks 1 more, 1 over its 3");
	/* Memory: 2G held, 3G asked: 1G over 4G. */
	sup_quota h2 = { .sandboxes = 1, .cpu_milli = 100, .memory = 2ull << 30 };
	sup_resources big = one;
	big.memory = 3ull << 30;
	assert_int_equal(sup_quota_check(t, &h2, &big, &fig, &e), -EDQUOT);
	assert_string_equal(fig, "memory");
	assert_string_equal(e.msg, "tenant q is over its quota of memory: it holds 2G, asks 3G more, 1G over its 4G");
	/* CPUs: 1.25 held, 0.5 asked: 0.25 over 1.5. */
	sup_quota h3 = { .sandboxes = 1, .cpu_milli = 1250 };
	assert_int_equal(sup_quota_check(t, &h3, &one, &fig, &e), -EDQUOT);
	assert_string_equal(fig, "cpus");
	assert_non_null(strstr(e.msg, "it holds 1.25, asks 0.5 more, 0.25 over its 1.5"));
	/* Exactly at the quota is fine. */
	sup_quota h4 = { .sandboxes = 2, .cpu_milli = 1000, .memory = 3ull << 30 };
	assert_int_equal(sup_quota_check(t, &h4, &one, &fig, &e), 0);
	sup_tenants_unref(ts);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_vector),
		cmocka_unit_test(test_full_file),
		cmocka_unit_test(test_errors_name_the_field),
		cmocka_unit_test(test_file_and_single),
		cmocka_unit_test(test_hold_across_reload),
		cmocka_unit_test(test_quota_check),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
