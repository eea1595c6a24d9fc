/* Egress policies (sup_netpol, sup_netpol_json): targets parsed and
 * rendered canonically, bad ones refused naming what is wrong, and the
 * "most specific rule wins" order of API.md, rule against rule. */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "sup_netpol.h"
#include "sup_netpol_json.h"

/* ---- targets ---- */

static void canon(const char *in, const char *want)
{
	sup_netpol_rule r;
	sbx_err e;
	sbx_err_clear(&e);
	int rc = sup_netpol_parse_target(in, &r, &e);
	if (rc != 0)
		fail_msg("%s: %s", in, e.msg);
	char buf[SUP_NETPOL_TARGET_MAX + 8];
	assert_true(sup_netpol_format_target(&r, buf, sizeof(buf)) > 0);
	assert_string_equal(buf, want);
	sup_netpol_rule_free(&r);
}

static void bad(const char *in, const char *needle)
{
	sup_netpol_rule r;
	sbx_err e;
	sbx_err_clear(&e);
	int rc = sup_netpol_parse_target(in, &r, &e);
	if (rc != -EINVAL)
		fail_msg("%s: accepted (%d)", in, rc);
	if (!strstr(e.msg, needle))
		fail_msg("%s: message '%s' lacks '%s'", in, e.msg, needle);
}

static void test_targets_canonical(void **state)
{
	(void)state;
	canon("pkgs.example.com", "pkgs.example.com");
	canon("PKGS.Example.COM.", "pkgs.example.com");
	canon("pkgs.example.com:443", "pkgs.example.com:443");
	canon("*.files.example.com", "*.files.example.com");
	canon("*.Files.example.com.:8080", "*.files.example.com:8080");
	canon("localhost", "localhost");
	canon("under_score.example", "under_score.example");
	canon("10.20.0.0/16:443", "10.20.0.0/16:443");
	canon("10.20.5.0/24", "10.20.5.0/24");
	canon("10.20.5.7", "10.20.5.7");
	canon("10.20.5.7/32", "10.20.5.7");
	canon("0.0.0.0/0", "0.0.0.0/0");
	canon("198.18.0.10:65535", "198.18.0.10:65535");
	canon("2001:db8::/32", "2001:db8::/32");
	canon("2001:DB8:0:0::1", "2001:db8::1");
	canon("[2001:db8::1]:443", "[2001:db8::1]:443");
	canon("[2001:db8::/32]:443", "[2001:db8::/32]:443");
	canon("[2001:db8::1]", "2001:db8::1");
	canon("::/0", "::/0");
	canon("fd00:ec2::254", "fd00:ec2::254");
}

static void test_targets_bad(void **state)
{
	(void)state;
	bad("", "empty");
	bad("10.20.5.7/24", "beyond the prefix");
	bad("10.20.0.0/33", "prefix length");
	bad("10.20.0.0/016", "prefix length");
	bad("10.20.0.0/", "prefix length");
	bad("1.2.3", "not an IPv4 address");
	bad("999.1.1.1", "not an IPv4 address");
	bad("010.1.1.1", "not an IPv4 address");
	bad("example.com:0", "port");
	bad("example.com:65536", "port");
	bad("example.com:", "port");
	bad("example.com:443:1", "IPv6 address");
	bad("example.com:08", "port");
	bad("2001:db8::/129", "prefix length");
	bad("2001:db8::1/64", "beyond the prefix");
	bad("[2001:db8::1]443", "[IPv6]:port");
	bad("[2001:db8::1", "[IPv6]:port");
	bad("[10.0.0.1]:80", "not an IPv6 address");
	bad("::ffff:10.0.0.1", "IPv4-mapped");
	bad("exa mple.com", "spaces");
	bad("example.com\n", "control");
	bad("ex\xc3\xa9mple.com", "non-ASCII");
	bad("*", "not an address");
	bad("*.", "not an address");
	bad("a.*.example.com", "not an address");
	bad("**.example.com", "not an address");
	bad("-.example..com", "not an address");
	bad("a..b", "not an address");
	bad("example.123", "not an address");
	bad("http://example.com", "port");
	char long_label[80];
	memset(long_label, 'a', 64);
	snprintf(long_label + 64, sizeof(long_label) - 64, ".com");
	bad(long_label, "not an address");
	char long_name[300];
	for (int i = 0; i < 64; i++)
		memcpy(long_name + i * 4, "abc.", 4);
	snprintf(long_name + 256, sizeof(long_name) - 256, "com");
	bad(long_name, "not an address");
	char too_long[SUP_NETPOL_TARGET_MAX + 10];
	memset(too_long, 'a', sizeof(too_long) - 1);
	too_long[sizeof(too_long) - 1] = '\0';
	bad(too_long, "longer than");
}

static void test_duplicates_and_bound(void **state)
{
	(void)state;
	sup_netpol p;
	sbx_err e;
	sup_netpol_init(&p, SUP_NETPOL_DENY);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_ALLOW, "Example.com", &e), 0);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_DENY, "example.com.", &e), -EINVAL);
	assert_non_null(strstr(e.msg, "twice"));
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_DENY, "example.com:443", &e), 0);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_ALLOW, "10.0.0.1", &e), 0);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_ALLOW, "10.0.0.1/32", &e), -EINVAL);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_ALLOW, "*.example.com", &e), 0);
	sup_netpol_free(&p);

	sup_netpol_init(&p, SUP_NETPOL_DENY);
	for (int i = 0; i < SUP_NETPOL_MAX_RULES; i++) {
		char t[32];
		snprintf(t, sizeof(t), "10.0.%d.%d", i / 256, i % 256);
		assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_ALLOW, t, &e), 0);
	}
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_ALLOW, "10.1.0.0", &e), -EINVAL);
	assert_non_null(strstr(e.msg, "more than"));
	sup_netpol copy;
	assert_int_equal(sup_netpol_copy(&p, &copy), 0);
	assert_int_equal(copy.n, SUP_NETPOL_MAX_RULES);
	sup_netpol_free(&p);
	sup_netpol_free(&copy);
}

static void test_norm_name(void **state)
{
	(void)state;
	char out[SUP_NETPOL_NAME_MAX + 2];
	assert_int_equal(sup_netpol_norm_name("A.Example.COM.", out, sizeof(out)), 3);
	assert_string_equal(out, "a.example.com");
	assert_int_equal(sup_netpol_norm_name(".", out, sizeof(out)), -EINVAL);
	assert_int_equal(sup_netpol_norm_name("a..b", out, sizeof(out)), -EINVAL);
	assert_int_equal(sup_netpol_norm_name("a.b\\.c", out, sizeof(out)), -EINVAL);
	assert_int_equal(sup_netpol_norm_name("10.0.0.1", out, sizeof(out)), -EINVAL);
	assert_int_equal(sup_netpol_norm_name("x", out, 1), -EINVAL);
}

/* ---- most specific wins ---- */

static sup_netpol pol(sup_netpol_action def, const char *const *rules)
{
	sup_netpol p;
	sbx_err e;
	sup_netpol_init(&p, def);
	for (size_t i = 0; rules[i]; i++) {
		sup_netpol_action a = rules[i][0] == '+' ? SUP_NETPOL_ALLOW : SUP_NETPOL_DENY;
		if (sup_netpol_add(&p, a, rules[i] + 1, &e) < 0)
			fail_msg("%s: %s", rules[i], e.msg);
	}
	return p;
}

static int v4(const sup_netpol *p, const char *a, uint16_t port, const char *name)
{
	uint8_t b[4];
	assert_int_equal(inet_pton(AF_INET, a, b), 1);
	return sup_netpol_decide(p, 4, b, port, name) == SUP_NETPOL_ALLOW;
}

static int v6(const sup_netpol *p, const char *a, uint16_t port, const char *name)
{
	uint8_t b[16];
	assert_int_equal(inet_pton(AF_INET6, a, b), 1);
	return sup_netpol_decide(p, 6, b, port, name) == SUP_NETPOL_ALLOW;
}

/* The example. */
static void test_addresses(void **state)
{
	(void)state;
	static const char *const r[] = { "+pkgs.example.com", "+*.files.example.com",
					 "+10.20.0.0/16:443", "-10.20.5.0/24", NULL };
	sup_netpol p = pol(SUP_NETPOL_DENY, r);
	assert_true(v4(&p, "10.20.1.1", 443, NULL));
	assert_false(v4(&p, "10.20.1.1", 80, NULL));    /* the /16 allows 443 only */
	assert_false(v4(&p, "10.20.1.1", 0, NULL));     /* nor ICMP */
	assert_false(v4(&p, "10.20.5.9", 443, NULL));   /* the /24 is more specific */
	assert_false(v4(&p, "10.21.0.1", 443, NULL));   /* default */
	assert_false(v6(&p, "2001:db8::1", 443, NULL)); /* default, other family */
	/* a name's answer is a /32: it beats the /24 deny */
	assert_true(v4(&p, "10.20.5.9", 80, "pkgs.example.com"));
	assert_true(v4(&p, "10.20.5.9", 22, "a.files.example.com"));
	assert_true(v4(&p, "10.20.5.9", 22, "a.b.files.example.com"));
	/* the wildcard does not cover the name itself */
	assert_false(v4(&p, "10.20.5.9", 443, "files.example.com"));
	assert_false(v4(&p, "10.20.5.9", 443, "other.example.com"));
	sup_netpol_free(&p);
}

static void test_prefix_then_port(void **state)
{
	(void)state;
	/* same prefix: the rule with a port first */
	static const char *const r[] = { "-10.0.0.0/8", "+10.0.0.0/8:22", "+10.1.0.0/16",
					 "-10.1.2.0/24:80", "+2001:db8::/32", "-2001:db8:1::/48",
					 "+[2001:db8:1::/48]:443", NULL };
	sup_netpol p = pol(SUP_NETPOL_ALLOW, r);
	assert_true(v4(&p, "10.9.9.9", 22, NULL));
	assert_false(v4(&p, "10.9.9.9", 23, NULL));
	assert_true(v4(&p, "10.1.9.9", 23, NULL));  /* /16 beats /8:22 and /8 */
	assert_true(v4(&p, "10.1.2.3", 443, NULL)); /* /24:80 does not match 443 */
	assert_false(v4(&p, "10.1.2.3", 80, NULL));
	assert_true(v4(&p, "11.0.0.1", 80, NULL));  /* default allow */
	assert_true(v6(&p, "2001:db8::5", 80, NULL));
	assert_false(v6(&p, "2001:db8:1::5", 80, NULL));
	assert_true(v6(&p, "2001:db8:1::5", 443, NULL));
	sup_netpol_free(&p);
}

static void test_equal_specificity_deny_wins(void **state)
{
	(void)state;
	/* an explicit /32 deny and a name's answer are both full prefix */
	static const char *const r[] = { "+api.example.com", "-10.0.0.5", "+10.0.0.6",
					 "-*.bad.example:443", NULL };
	sup_netpol p = pol(SUP_NETPOL_DENY, r);
	assert_false(v4(&p, "10.0.0.5", 443, "api.example.com"));
	assert_true(v4(&p, "10.0.0.7", 443, "api.example.com"));
	assert_true(v4(&p, "10.0.0.6", 443, NULL));
	sup_netpol_free(&p);
}

static void test_names(void **state)
{
	(void)state;
	static const char *const r[] = { "+*.example.com", "-*.internal.example.com",
					 "+db.internal.example.com:5432", "-api.example.com:22",
					 "+git.example.com:22", "-*.example.com:25", NULL };
	sup_netpol p = pol(SUP_NETPOL_DENY, r);
	sup_netpol_name_verdict *v = malloc(sizeof(*v));
	assert_non_null(v);

	sup_netpol_name(&p, "www.example.com", v);
	assert_true(v->answer);
	assert_true(v->allow_all);
	assert_int_equal(v->n_deny, 1);
	assert_int_equal(v->deny[0], 25);

	sup_netpol_name(&p, "api.example.com", v); /* exact :22 and wildcard :25 */
	assert_true(v->answer && v->allow_all);
	assert_int_equal(v->n_deny, 2);

	/* the more specific wildcard denies; a port rule above it allows */
	sup_netpol_name(&p, "x.internal.example.com", v);
	assert_false(v->answer);
	sup_netpol_name(&p, "db.internal.example.com", v);
	assert_true(v->answer);
	assert_false(v->allow_all);
	assert_int_equal(v->n_allow, 1);
	assert_int_equal(v->allow[0], 5432);
	/* *.example.com:25 is less specific than *.internal: not a deny here */
	assert_int_equal(v->n_deny, 0);

	sup_netpol_name(&p, "example.com", v); /* no rule: the default */
	assert_false(v->answer);
	sup_netpol_name(&p, "example.org", v);
	assert_false(v->answer);

	assert_true(v4(&p, "192.0.2.1", 443, "git.example.com"));
	assert_true(v4(&p, "192.0.2.1", 22, "git.example.com"));
	assert_false(v4(&p, "192.0.2.1", 22, "api.example.com"));
	assert_false(v4(&p, "192.0.2.1", 25, "www.example.com"));
	assert_true(v4(&p, "192.0.2.1", 5432, "db.internal.example.com"));
	assert_false(v4(&p, "192.0.2.1", 5433, "db.internal.example.com"));
	assert_false(v4(&p, "192.0.2.1", 0, "db.internal.example.com"));
	assert_false(v4(&p, "192.0.2.1", 443, "x.internal.example.com"));
	sup_netpol_free(&p);

	/* default allow answers every name but adds no rule: it does not
	 * lift an address deny, while an explicit name allow does */
	static const char *const r2[] = { "-10.0.0.0/8", "-blocked.example", "+ok.example",
					  "-ok2.example:22", "+ports.example:443", NULL };
	p = pol(SUP_NETPOL_ALLOW, r2);
	sup_netpol_name(&p, "anything.example", v);
	assert_true(v->answer);
	assert_false(v->allow_all);
	sup_netpol_name(&p, "blocked.example", v);
	assert_false(v->answer);
	assert_false(v4(&p, "10.1.1.1", 80, "anything.example"));
	assert_true(v4(&p, "10.1.1.1", 80, "ok.example"));
	assert_true(v4(&p, "11.1.1.1", 22, "anything.example"));
	assert_false(v4(&p, "11.1.1.1", 22, "ok2.example"));
	assert_true(v4(&p, "11.1.1.1", 23, "ok2.example"));
	assert_true(v4(&p, "10.1.1.1", 443, "ports.example"));
	assert_false(v4(&p, "10.1.1.1", 80, "ports.example"));
	sup_netpol_free(&p);
	free(v);
}

static void test_compile_order(void **state)
{
	(void)state;
	static const char *const r[] = { "-10.20.5.0/24", "+10.20.0.0/16:443", "+pkgs.example.com",
					 "-10.20.5.7", "+10.20.5.7:443", "+::/0", NULL };
	sup_netpol p = pol(SUP_NETPOL_DENY, r);
	sup_netpol_entry e[16];
	size_t n = sup_netpol_compile(&p, e);
	assert_int_equal(n, 5 + 6);
	/* v4: /32 with port (rule deny? none; deny set, rule allow, allow
	 * set), /32 without (rule deny, allow set), /24, /16:443; then v6 */
	assert_int_equal(e[0].set, SUP_NETPOL_SET_DENY_PORT);
	assert_ptr_equal(e[1].rule, &p.rules[4]);
	assert_int_equal(e[2].set, SUP_NETPOL_SET_ALLOW_PORT);
	assert_ptr_equal(e[3].rule, &p.rules[3]);
	assert_int_equal(e[4].set, SUP_NETPOL_SET_ALLOW);
	assert_ptr_equal(e[5].rule, &p.rules[0]);
	assert_ptr_equal(e[6].rule, &p.rules[1]);
	for (size_t i = 7; i < 11; i++)
		assert_int_equal(e[i].family, 6);
	assert_ptr_equal(e[10].rule, &p.rules[5]);
	sup_netpol_free(&p);
}

/* ---- JSON ---- */

static int parse(const char *s, sup_netpol *p, sbx_err *e)
{
	sbx_err_clear(e);
	return sup_netpol_parse(s, strlen(s), p, e);
}

static void test_json(void **state)
{
	(void)state;
	sup_netpol p;
	sbx_err e;
	assert_int_equal(parse("{\"default_action\":\"deny\",\"egress\":["
			       "{\"action\":\"allow\",\"target\":\"Pkgs.Example.com\"},"
			       "{\"action\":\"deny\",\"target\":\"10.20.5.0/24\"},"
			       "{\"target\":\"2001:db8::1\",\"action\":\"allow\"}]}",
			       &p, &e), 0);
	assert_int_equal(p.n, 3);
	json_t *j = sup_netpol_to_json(&p);
	char *s = json_dumps(j, JSON_COMPACT);
	assert_string_equal(s, "{\"default_action\":\"deny\",\"egress\":["
			       "{\"action\":\"allow\",\"target\":\"pkgs.example.com\"},"
			       "{\"action\":\"deny\",\"target\":\"10.20.5.0/24\"},"
			       "{\"action\":\"allow\",\"target\":\"2001:db8::1\"}]}");
	free(s);
	json_decref(j);
	sup_netpol_free(&p);

	assert_int_equal(parse("{}", &p, &e), 0);
	assert_int_equal(p.default_action, SUP_NETPOL_DENY);
	assert_int_equal(p.n, 0);
	sup_netpol_free(&p);
	assert_int_equal(parse("{\"default_action\":\"allow\"}", &p, &e), 0);
	assert_int_equal(p.default_action, SUP_NETPOL_ALLOW);
	sup_netpol_free(&p);

	static const struct {
		const char *body, *needle;
	} bads[] = {
		{ "[]", "want an object" },
		{ "{\"default_action\":\"maybe\"}", "network.default_action" },
		{ "{\"default_action\":1}", "network.default_action" },
		{ "{\"ingress\":[]}", "unknown field \"ingress\"" },
		{ "{\"egress\":{}}", "want an array" },
		{ "{\"egress\":[1]}", "network.egress[0]" },
		{ "{\"egress\":[{\"action\":\"allow\"}]}", "needs \"action\" and \"target\"" },
		{ "{\"egress\":[{\"action\":\"allow\",\"target\":\"a.com\",\"port\":1}]}",
		  "unknown field \"port\"" },
		{ "{\"egress\":[{\"action\":\"permit\",\"target\":\"a.com\"}]}",
		  "network.egress[0].action" },
		{ "{\"egress\":[{\"action\":\"allow\",\"target\":5}]}", "network.egress[0].target" },
		{ "{\"egress\":[{\"action\":\"allow\",\"target\":\"a\\u0000b\"}]}", "malformed" },
		{ "{\"egress\":[{\"action\":\"allow\",\"target\":\"a.com\"},"
		  "{\"action\":\"deny\",\"target\":\"10.0.0.1/8\"}]}",
		  "network.egress[1]\": target \"10.0.0.1/8\"" },
		{ "{\"egress\":[{\"action\":\"allow\",\"target\":\"a.com\"},"
		  "{\"action\":\"deny\",\"target\":\"A.com\"}]}",
		  "given twice" },
		{ "{\"default_action\":\"deny\",\"default_action\":\"allow\"}", "malformed" },
		{ "{", "malformed" },
	};
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		if (parse(bads[i].body, &p, &e) != -EINVAL)
			fail_msg("%s: accepted", bads[i].body);
		if (!strstr(e.msg, bads[i].needle))
			fail_msg("%s: '%s' lacks '%s'", bads[i].body, e.msg, bads[i].needle);
	}

	/* more rules than allowed */
	json_t *big = json_array();
	for (int i = 0; i <= SUP_NETPOL_MAX_RULES; i++) {
		char t[32];
		snprintf(t, sizeof(t), "10.%d.%d.0/24", i / 256, i % 256);
		json_array_append_new(big, json_pack("{s:s, s:s}", "action", "allow", "target", t));
	}
	json_t *o = json_pack("{s:o}", "egress", big);
	assert_int_equal(sup_netpol_from_json(o, &p, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "more than"));
	json_decref(o);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_targets_canonical),
		cmocka_unit_test(test_targets_bad),
		cmocka_unit_test(test_duplicates_and_bound),
		cmocka_unit_test(test_norm_name),
		cmocka_unit_test(test_addresses),
		cmocka_unit_test(test_prefix_then_port),
		cmocka_unit_test(test_equal_specificity_deny_wins),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_compile_order),
		cmocka_unit_test(test_json),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
