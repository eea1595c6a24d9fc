/* Node names and node-tagged sandbox ids (sup_nodeid): made ids read back
 * to their node's tag, ids of no node (an earlier version's, or not ids)
 * read as none, names checked as DNS-1123 subdomains, tags short, stable
 * and the name itself for a short name (ids made before tags stay valid),
 * the default from the host name always valid and its own tag. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "sup_nodeid.h"

static void test_made_ids_name_their_node(void **state)
{
	(void)state;
	const char *nodes[] = { "n1", "worker-7", "a", "abcdefghij0123456789" };
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		char id[48], tag[SUP_NODEID_TAG_MAX + 1], back[SUP_NODEID_TAG_MAX + 1];
		sbx_err e;
		sup_nodeid_tag(nodes[i], tag);
		assert_string_equal(tag, nodes[i]); /* a short name is its own tag */
		assert_int_equal(sup_nodeid_make(tag, id, sizeof(id), &e), 0);
		assert_true(strlen(id) <= 40);
		assert_int_equal(strncmp(id, "sb-", 3), 0);
		assert_true(sup_nodeid_tag_of(id, back, sizeof(back)));
		assert_string_equal(back, nodes[i]);
	}
}

static void test_ids_of_no_node(void **state)
{
	(void)state;
	char node[SUP_NODEID_TAG_MAX + 1];
	const char *none[] = {
		"sb-000000000000",         /* an earlier version's */
		"sb-nope", "sb-", "", "x-n1-0123456789ab",
		"sb-n1-0123456789aB",      /* not lower hex */
		"sb-n1-0123456789a",       /* 11 hex */
		"sb--0123456789ab",        /* an empty node */
		"sb-N1-0123456789ab",      /* not a node name */
		"sb-abcdefghij0123456789x-0123456789ab", /* a tag over 20 */
		"sb-n.1-0123456789ab",     /* a name, not a tag */
	};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		assert_false(sup_nodeid_tag_of(none[i], node, sizeof(node)));
	/* A node name with dashes: up to the last one. */
	assert_true(sup_nodeid_tag_of("sb-rack-2-n-0123456789ab", node, sizeof(node)));
	assert_string_equal(node, "rack-2-n");
	/* Too small a buffer is no node rather than a cut one. */
	char small[3];
	assert_false(sup_nodeid_tag_of("sb-n12-0123456789ab", small, sizeof(small)));
}

static void test_names(void **state)
{
	(void)state;
	sbx_err e;
	assert_int_equal(sup_nodeid_name_check("n1", &e), 0);
	assert_int_equal(sup_nodeid_name_check("node-a-1", &e), 0);
	/* what clouds call their nodes */
	assert_int_equal(sup_nodeid_name_check("ip-10-0-1-23.eu-west-1.compute.internal", &e), 0);
	assert_int_equal(sup_nodeid_name_check("gke-prod-default-pool-4c8e1f2a-x7k2", &e), 0);
	assert_int_equal(sup_nodeid_name_check("abcdefghij0123456789x", &e), 0);
	char longest[SUP_NODE_NAME_MAX + 2];
	/* 63.63.63.61 = 253 */
	memset(longest, 'a', SUP_NODE_NAME_MAX);
	longest[63] = longest[127] = longest[191] = '.';
	longest[SUP_NODE_NAME_MAX] = '\0';
	assert_int_equal(sup_nodeid_name_check(longest, &e), 0);
	longest[SUP_NODE_NAME_MAX] = 'a';
	longest[SUP_NODE_NAME_MAX + 1] = '\0';
	assert_int_equal(sup_nodeid_name_check(longest, &e), -EINVAL); /* 254 */
	char label64[80];
	memset(label64, 'b', 64);
	snprintf(label64 + 64, sizeof(label64) - 64, ".c");
	const char *bad[] = { "", "-n1", "n1-", "N1", "n_1", ".n1", "n1.", "n..1", "n.-1",
			      "n-.1", "n 1", "n/1", label64 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sup_nodeid_name_check(bad[i], &e), -EINVAL);
	char def[SUP_NODEID_TAG_MAX + 1], tag[SUP_NODEID_TAG_MAX + 1];
	sup_nodeid_default(def);
	assert_int_equal(sup_nodeid_name_check(def, &e), 0);
	sup_nodeid_tag(def, tag);
	assert_string_equal(tag, def);
}

/* A long or dotted name: a short tag of [a-z0-9-], its first label's start
 * then 8 of base32, the same for the same name, different for others. */
static void test_tags_of_long_names(void **state)
{
	(void)state;
	char a[SUP_NODEID_TAG_MAX + 1], b[SUP_NODEID_TAG_MAX + 1], c[SUP_NODEID_TAG_MAX + 1];
	char id[48], back[SUP_NODEID_TAG_MAX + 1];
	sbx_err e;
	sup_nodeid_tag("ip-10-0-1-23.eu-west-1.compute.internal", a);
	sup_nodeid_tag("ip-10-0-1-23.eu-west-1.compute.internal", b);
	sup_nodeid_tag("ip-10-0-1-24.eu-west-1.compute.internal", c);
	assert_string_equal(a, b);
	assert_string_not_equal(a, c);
	assert_int_equal(strncmp(a, "ip-10-0-1-2-", 12), 0); /* the label's first 11 */
	assert_int_equal(strlen(a), 12 + SUP_NODEID_TAG_HASH);
	assert_int_equal(strspn(a + 12, "abcdefghijklmnopqrstuvwxyz234567"), SUP_NODEID_TAG_HASH);
	/* a label cut at a '-': the '-' dropped before the hash's */
	sup_nodeid_tag("worker-pool-a.example.com", b);
	assert_int_equal(strncmp(b, "worker-pool-", 12), 0);
	/* a dotted short name is hashed too: ids carry no dots */
	sup_nodeid_tag("n.1", b);
	assert_null(strchr(b, '.'));
	assert_int_equal(strncmp(b, "n-", 2), 0);
	/* 21 bytes without dots: hashed, its start kept */
	sup_nodeid_tag("abcdefghij0123456789x", c);
	assert_int_equal(strncmp(c, "abcdefghij0-", 12), 0);
	/* the longest name: an id within 40 bytes, read back to its tag */
	char longest[SUP_NODE_NAME_MAX + 1];
	memset(longest, 'z', SUP_NODE_NAME_MAX);
	longest[63] = longest[127] = longest[191] = '.';
	longest[SUP_NODE_NAME_MAX] = '\0';
	sup_nodeid_tag(longest, a);
	assert_true(strlen(a) <= SUP_NODEID_TAG_MAX);
	assert_int_equal(sup_nodeid_make(a, id, sizeof(id), &e), 0);
	assert_true(strlen(id) <= 40);
	assert_true(sup_nodeid_tag_of(id, back, sizeof(back)));
	assert_string_equal(back, a);
	/* tags of many names: no two alike (40 bits of hash) */
	enum { N = 2000 };
	static char tags[N][SUP_NODEID_TAG_MAX + 1];
	for (int i = 0; i < N; i++) {
		char name[64];
		snprintf(name, sizeof(name), "node-%d.pool.example.com", i);
		sup_nodeid_tag(name, tags[i]);
		for (int k = 0; k < i; k++)
			assert_string_not_equal(tags[i], tags[k]);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_made_ids_name_their_node),
		cmocka_unit_test(test_ids_of_no_node),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_tags_of_long_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
