/* Node names and node-tagged sandbox ids (sup_nodeid): made ids read back
 * to their node, ids of no node (an earlier version's, or not ids) read as
 * none, names checked, the default from the host name always valid. */
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
		char id[48], node[SUP_NODE_NAME_MAX + 1];
		sbx_err e;
		assert_int_equal(sup_nodeid_make(nodes[i], id, sizeof(id), &e), 0);
		assert_true(strlen(id) <= 40);
		assert_int_equal(strncmp(id, "sb-", 3), 0);
		assert_true(sup_nodeid_node(id, node, sizeof(node)));
		assert_string_equal(node, nodes[i]);
	}
}

static void test_ids_of_no_node(void **state)
{
	(void)state;
	char node[SUP_NODE_NAME_MAX + 1];
	const char *none[] = {
		"sb-000000000000",         /* an earlier version's */
		"sb-nope", "sb-", "", "x-n1-0123456789ab",
		"sb-n1-0123456789aB",      /* not lower hex */
		"sb-n1-0123456789a",       /* 11 hex */
		"sb--0123456789ab",        /* an empty node */
		"sb-N1-0123456789ab",      /* not a node name */
		"sb-abcdefghij0123456789x-0123456789ab", /* a name over 20 */
	};
	for (size_t i = 0; i < sizeof(none) / sizeof(none[0]); i++)
		assert_false(sup_nodeid_node(none[i], node, sizeof(node)));
	/* A node name with dashes: up to the last one. */
	assert_true(sup_nodeid_node("sb-rack-2-n-0123456789ab", node, sizeof(node)));
	assert_string_equal(node, "rack-2-n");
	/* Too small a buffer is no node rather than a cut one. */
	char small[3];
	assert_false(sup_nodeid_node("sb-n12-0123456789ab", small, sizeof(small)));
}

static void test_names(void **state)
{
	(void)state;
	sbx_err e;
	assert_int_equal(sup_nodeid_name_check("n1", &e), 0);
	assert_int_equal(sup_nodeid_name_check("node-a-1", &e), 0);
	const char *bad[] = { "", "-n1", "n1-", "N1", "n_1", "n.1", "abcdefghij0123456789x" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(sup_nodeid_name_check(bad[i], &e), -EINVAL);
	char def[SUP_NODE_NAME_MAX + 1];
	sup_nodeid_default(def);
	assert_int_equal(sup_nodeid_name_check(def, &e), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_made_ids_name_their_node),
		cmocka_unit_test(test_ids_of_no_node),
		cmocka_unit_test(test_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
