/* Metrics (sup_metrics): histogram buckets, the exposition text exactly,
 * escaping, the counter table's bound, and Debian's promtool accepting
 * what is rendered. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_metrics.h"

static void test_hist_buckets(void **state)
{
	(void)state;
	sup_hist h = { 0 };
	sup_hist_observe(&h, 0.00005); /* first bucket */
	sup_hist_observe(&h, 0.0001);  /* le is inclusive */
	sup_hist_observe(&h, 0.003);
	sup_hist_observe(&h, 1000);    /* past every bound */
	assert_int_equal(h.count, 4);
	assert_int_equal(h.counts[0], 2);
	assert_int_equal(h.counts[5], 1); /* 0.005 */
	assert_int_equal(h.counts[SUP_HIST_NB], 1);
	assert_true(h.sum > 1000.003 && h.sum < 1000.004);
}

static void test_text(void **state)
{
	(void)state;
	sup_prom w;
	sup_prom_init(&w);
	sup_prom_family(&w, "sbx_x_total", "counter", "Things, with a \\ backslash\nand a line.");
	const char *l[] = { "image", "a\"b\\c\nd", "state", "running", NULL };
	sup_prom_sample(&w, "sbx_x_total", l, 3);
	sup_prom_sample(&w, "sbx_x_total", NULL, 0.25);
	sup_hist h = { 0 };
	sup_hist_observe(&h, 0.002);
	sup_prom_family(&w, "sbx_y_seconds", "histogram", "Y.");
	const char *l2[] = { "isolation", "runc", NULL };
	sup_prom_hist(&w, "sbx_y_seconds", l2, &h);
	size_t len;
	const char *t = sup_prom_text(&w, &len);
	assert_non_null(t);
	assert_int_equal(strlen(t), len);
	const char *want_head =
		"# HELP sbx_x_total Things, with a \\\\ backslash\\nand a line.\n"
		"# TYPE sbx_x_total counter\n"
		"sbx_x_total{image=\"a\\\"b\\\\c\\nd\",state=\"running\"} 3\n"
		"sbx_x_total 0.25\n"
		"# HELP sbx_y_seconds Y.\n"
		"# TYPE sbx_y_seconds histogram\n"
		"sbx_y_seconds_bucket{isolation=\"runc\",le=\"0.0001\"} 0\n";
	assert_memory_equal(t, want_head, strlen(want_head));
	assert_non_null(strstr(t, "sbx_y_seconds_bucket{isolation=\"runc\",le=\"0.001\"} 0\n"
				  "sbx_y_seconds_bucket{isolation=\"runc\",le=\"0.0025\"} 1\n"));
	assert_non_null(strstr(t, "sbx_y_seconds_bucket{isolation=\"runc\",le=\"+Inf\"} 1\n"
				  "sbx_y_seconds_sum{isolation=\"runc\"} 0.002\n"
				  "sbx_y_seconds_count{isolation=\"runc\"} 1\n"));
	sup_prom_release(&w);
}

static void test_ctab_bound(void **state)
{
	(void)state;
	static const char *const names[] = { "route", "status" };
	sup_ctab *t = sup_ctab_new(2, names, 3);
	assert_non_null(t);
	const char *a[] = { "GET x", "200" }, *b[] = { "GET x", "404" }, *c[] = { "PUT y", "200" },
		   *d[] = { "PUT y", "500" };
	sup_ctab_add(t, a, 1);
	sup_ctab_add(t, a, 2);
	sup_ctab_add(t, b, 1);
	sup_ctab_add(t, c, 1);
	sup_ctab_add(t, d, 5); /* the fourth: over the bound */
	assert_int_equal(sup_ctab_get(t, a), 3);
	assert_int_equal(sup_ctab_get(t, d), 0);
	sup_prom w;
	sup_prom_init(&w);
	sup_prom_family(&w, "sbx_http_requests_total", "counter", "Requests.");
	sup_ctab_render(t, &w, "sbx_http_requests_total");
	size_t len;
	const char *txt = sup_prom_text(&w, &len);
	assert_non_null(strstr(txt, "sbx_http_requests_total{route=\"GET x\",status=\"200\"} 3\n"));
	assert_non_null(strstr(txt, "sbx_http_requests_total{route=\"other\",status=\"other\"} 5\n"));
	sup_prom_release(&w);
	sup_ctab_free(t);
	assert_null(sup_ctab_new(0, names, 3));
}

/* What we render is what Prometheus reads: promtool's own check. */
static void test_promtool(void **state)
{
	(void)state;
	sup_prom w;
	sup_prom_init(&w);
	sup_prom_family(&w, "sbx_things_total", "counter", "Things counted.");
	const char *l[] = { "tenant", "a\"\\\nb", NULL };
	sup_prom_sample(&w, "sbx_things_total", l, 12345678901.0);
	sup_prom_family(&w, "sbx_level_bytes", "gauge", "A level.");
	sup_prom_sample(&w, "sbx_level_bytes", NULL, 1.5e-7);
	sup_prom_family(&w, "sbx_wait_seconds", "histogram", "Waits.");
	sup_hist h = { 0 };
	for (int i = 0; i < 100; i++)
		sup_hist_observe(&h, i * 0.01);
	sup_prom_hist(&w, "sbx_wait_seconds", NULL, &h);
	size_t len;
	const char *t = sup_prom_text(&w, &len);
	FILE *p = popen("promtool check metrics >/tmp/test_sup_metrics.out 2>&1", "w");
	assert_non_null(p);
	assert_int_equal(fwrite(t, 1, len, p), len);
	int st = pclose(p);
	if (st != 0) {
		system("cat /tmp/test_sup_metrics.out >&2");
		fail_msg("promtool check metrics: status %d on\n%s", st, t);
	}
	unlink("/tmp/test_sup_metrics.out");
	sup_prom_release(&w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hist_buckets),
		cmocka_unit_test(test_text),
		cmocka_unit_test(test_ctab_bound),
		cmocka_unit_test(test_promtool),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
