/* The kube module's pure parts: kubeconfig (YAML and JSON, inline and file
 * credentials, relative paths, what is refused), the in-cluster service
 * account, backoff bounds, the write queue's bounds (dropped counted, the
 * latest write of an object wins), and the node directory (Lease parsing,
 * expiry, pick). Files on a real temp folder; no network. */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_kube_cfg.h"
#include "sup_kube_dir.h"
#include "sup_kube_retry.h"

static char dir[] = "/tmp/sbx-kube-test-XXXXXX";

static void put(const char *name, const char *text)
{
	char p[256];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	FILE *f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void path_of(const char *name, char *p, size_t cap)
{
	snprintf(p, cap, "%s/%s", dir, name);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* kubectl's own shape: YAML, current context, CA as data, a token */
static void kubeconfig_yaml(void **state)
{
	(void)state;
	/* "PEM-CA\n" in base64 */
	put("kc.yaml", "apiVersion: v1\nkind: Config\ncurrent-context: b\n"
		       "clusters:\n- name: c1\n  cluster:\n    server: https://10.0.0.1:6443/\n"
		       "    certificate-authority-data: UEVNLUNBCg==\n"
		       "- name: c2\n  cluster:\n    server: http://127.0.0.1:8080\n"
		       "    certificate-authority: ca.pem\n    insecure-skip-tls-verify: true\n"
		       "contexts:\n- name: a\n  context: {cluster: c1, user: u1}\n"
		       "- name: b\n  context:\n    cluster: c2\n    user: u2\n    namespace: team-x\n"
		       "users:\n- name: u1\n  user:\n    token: \"abc.def\"\n"
		       "- name: u2\n  user:\n    tokenFile: tok\n");
	put("ca.pem", "FILE-CA\n");
	put("tok", "from-file\n\n");
	char p[256];
	path_of("kc.yaml", p, sizeof(p));
	sup_kube_cfg c;
	sbx_err e;
	assert_int_equal(sup_kube_cfg_load_file(p, NULL, &c, &e), 0);
	assert_string_equal(c.server, "http://127.0.0.1:8080");
	assert_string_equal(c.ca.p, "FILE-CA\n");
	assert_string_equal(c.token.p, "from-file");
	assert_true(c.insecure);
	assert_string_equal(c.ns, "team-x");
	sup_kube_cfg_release(&c);
	assert_int_equal(sup_kube_cfg_load_file(p, "a", &c, &e), 0);
	assert_string_equal(c.server, "https://10.0.0.1:6443");
	assert_string_equal(c.ca.p, "PEM-CA\n");
	assert_int_equal(c.ca.len, 7);
	assert_string_equal(c.token.p, "abc.def");
	assert_false(c.insecure);
	assert_string_equal(c.ns, "");
	sup_kube_cfg_release(&c);
	assert_int_equal(sup_kube_cfg_load_file(p, "nope", &c, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "no context named 'nope'"));
}

/* The test harness's shape: JSON is YAML; a client certificate and key */
static void kubeconfig_json_cert(void **state)
{
	(void)state;
	put("cert.pem", "CERT");
	put("key.pem", "KEY");
	char kp[256];
	path_of("key.pem", kp, sizeof(kp));
	char text[1024];
	snprintf(text, sizeof(text),
		 "{\"current-context\":\"x\",\"clusters\":[{\"name\":\"k\",\"cluster\":{\"server\":\"https://h:1\"}}],"
		 "\"contexts\":[{\"name\":\"x\",\"context\":{\"cluster\":\"k\",\"user\":\"me\"}}],"
		 "\"users\":[{\"name\":\"me\",\"user\":{\"client-certificate\":\"cert.pem\",\"client-key\":\"%s\"}}]}",
		 kp);
	put("kc.json", text);
	char p[256];
	path_of("kc.json", p, sizeof(p));
	sup_kube_cfg c;
	sbx_err e;
	assert_int_equal(sup_kube_cfg_load_file(p, NULL, &c, &e), 0);
	assert_string_equal(c.cert.p, "CERT");
	assert_string_equal(c.key.p, "KEY");
	assert_null(c.token.p);
	assert_null(c.ca.p);
	sup_kube_cfg_release(&c);
}

static void expect_refused(const char *text, int code, const char *words)
{
	put("bad.yaml", text);
	char p[256];
	path_of("bad.yaml", p, sizeof(p));
	sup_kube_cfg c;
	sbx_err e;
	sbx_err_clear(&e);
	assert_int_equal(sup_kube_cfg_load_file(p, NULL, &c, &e), code);
	if (!strstr(e.msg, words))
		fail_msg("'%s' not in '%s'", words, e.msg);
}

static void kubeconfig_refused(void **state)
{
	(void)state;
	const char *head = "current-context: x\ncontexts:\n- name: x\n  context: {cluster: k, user: u}\n"
			   "clusters:\n- name: k\n  cluster: {server: 'https://h:1'}\n";
	char t[1024];
	expect_refused("a: [1, 2\n", -EINVAL, "YAML line");
	expect_refused("- just\n- a list\n", -EINVAL, "not a mapping");
	expect_refused("clusters: []\n", -EINVAL, "no current-context");
	expect_refused("a: &x [1]\nb: *x\n", -EINVAL, "aliases");
	snprintf(t, sizeof(t), "%susers:\n- name: u\n  user:\n    exec: {command: aws}\n", head);
	expect_refused(t, -ENOTSUP, "exec and auth-provider");
	snprintf(t, sizeof(t), "%susers:\n- name: u\n  user:\n    client-certificate-data: Q0VSVA==\n", head);
	expect_refused(t, -EINVAL, "needs its key");
	snprintf(t, sizeof(t), "%susers:\n- name: u\n  user:\n    client-key-data: '%%%%'\n", head);
	expect_refused(t, -EINVAL, "not base64");
	snprintf(t, sizeof(t), "%susers:\n- name: u\n  user:\n    tokenFile: /nonexistent/tok\n", head);
	expect_refused(t, -ENOENT, "/nonexistent/tok");
	expect_refused("current-context: x\ncontexts:\n- name: x\n  context: {cluster: k}\n"
		       "clusters:\n- name: k\n  cluster: {server: 'ftp://h'}\n",
		       -EINVAL, "not an http(s) URL");
	/* nesting past the bound */
	char deep[400] = "a: ";
	for (int i = 0; i < 40; i++)
		strcat(deep, "[");
	for (int i = 0; i < 40; i++)
		strcat(deep, "]");
	strcat(deep, "\n");
	expect_refused(deep, -EINVAL, "nested deeper");
	sup_kube_cfg c;
	sbx_err e;
	assert_int_equal(sup_kube_cfg_load_file("/nonexistent/kc", NULL, &c, &e), -ENOENT);
}

static void in_cluster(void **state)
{
	(void)state;
	char sa[300];
	snprintf(sa, sizeof(sa), "%s/sa", dir);
	assert_int_equal(mkdir(sa, 0700), 0);
	put("sa/token", "sa-token\n");
	put("sa/ca.crt", "CLUSTER-CA");
	put("sa/namespace", "sbx-system");
	sup_kube_cfg c;
	sbx_err e;
	assert_int_equal(sup_kube_cfg_in_cluster("10.96.0.1", "443", sa, &c, &e), 0);
	assert_string_equal(c.server, "https://10.96.0.1:443");
	assert_string_equal(c.token.p, "sa-token");
	assert_string_equal(c.ca.p, "CLUSTER-CA");
	assert_string_equal(c.ns, "sbx-system");
	/* the kubelet rotates the token: read again */
	put("sa/token", "rotated");
	assert_int_equal(sup_kube_cfg_reload_token(&c, &e), 0);
	assert_string_equal(c.token.p, "rotated");
	sup_kube_cfg_release(&c);
	assert_int_equal(sup_kube_cfg_in_cluster("fd00::1", "6443", sa, &c, &e), 0);
	assert_string_equal(c.server, "https://[fd00::1]:6443");
	sup_kube_cfg_release(&c);
	assert_int_equal(sup_kube_cfg_in_cluster(NULL, "443", sa, &c, &e), -ENOENT);
	assert_non_null(strstr(e.msg, "not in a pod"));
	put("sa/namespace", "Bad_NS");
	assert_int_equal(sup_kube_cfg_in_cluster("h", "1", sa, &c, &e), -EINVAL);
}

static void backoff_bounds(void **state)
{
	(void)state;
	sup_kube_backoff b = { .base_ms = 250, .cap_ms = 4000 };
	unsigned ceil[] = { 250, 500, 1000, 2000, 4000, 4000, 4000 };
	for (size_t i = 0; i < sizeof(ceil) / sizeof(ceil[0]); i++) {
		sup_kube_backoff lo = b, hi = b;
		unsigned dlo = sup_kube_backoff_next(&lo, 0);
		unsigned dhi = sup_kube_backoff_next(&hi, UINT32_MAX - 1);
		unsigned d = sup_kube_backoff_next(&b, 12345);
		assert_int_equal(dlo, ceil[i] - ceil[i] / 2);
		assert_true(dhi <= ceil[i] && dhi >= ceil[i] / 2);
		assert_true(d >= ceil[i] / 2 && d <= ceil[i]);
	}
	/* many failures: never past the cap, no overflow */
	for (int i = 0; i < 1000; i++)
		assert_true(sup_kube_backoff_next(&b, (uint32_t)i * 7919u) <= 4000);
	sup_kube_backoff_reset(&b);
	assert_true(sup_kube_backoff_next(&b, 99) <= 250);
}

static void queue_bounds(void **state)
{
	(void)state;
	sup_kube_queue q;
	assert_int_equal(sup_kube_queue_init(&q, 3), 0);
	char dropped[SUP_KUBE_KEY_MAX] = "";
	assert_int_equal(sup_kube_queue_push(&q, "a", "POST", "/p", strdup("1"), dropped), SUP_KUBE_PUSH_ADDED);
	assert_int_equal(sup_kube_queue_push(&q, "b", "POST", "/p", strdup("2"), dropped), SUP_KUBE_PUSH_ADDED);
	/* a newer write of a: in a's place, its body */
	assert_int_equal(sup_kube_queue_push(&q, "a", "PATCH", "/p/a", strdup("3"), dropped),
			 SUP_KUBE_PUSH_REPLACED);
	assert_int_equal(q.n, 2);
	sup_kube_write w;
	assert_int_equal(sup_kube_queue_peek(&q, &w), 0);
	assert_string_equal(w.key, "a");
	assert_string_equal(w.body, "3");
	assert_string_equal(w.method, "PATCH");
	/* replaced while in flight: the newer write stays */
	uint64_t gen = w.gen;
	free(w.body);
	sup_kube_queue_push(&q, "a", "PATCH", "/p/a", strdup("4"), dropped);
	sup_kube_queue_done(&q, "a", gen);
	assert_int_equal(q.n, 2);
	assert_int_equal(sup_kube_queue_peek(&q, &w), 0);
	assert_string_equal(w.body, "4");
	sup_kube_queue_done(&q, w.key, w.gen);
	free(w.body);
	assert_int_equal(q.n, 1);
	/* full: the oldest goes, counted and named */
	sup_kube_queue_push(&q, "c", "POST", "/p", strdup("5"), dropped);
	sup_kube_queue_push(&q, "d", "POST", "/p", strdup("6"), dropped);
	assert_int_equal(sup_kube_queue_push(&q, "e", "POST", "/p", strdup("7"), dropped),
			 SUP_KUBE_PUSH_DROPPED);
	assert_string_equal(dropped, "b");
	assert_int_equal(q.n, 3);
	assert_int_equal(q.dropped, 1);
	for (int i = 0; i < 100; i++) {
		char k[16];
		snprintf(k, sizeof(k), "k%d", i);
		sup_kube_queue_push(&q, k, "POST", "/p", strdup("x"), NULL);
		assert_true(q.n <= 3);
	}
	assert_int_equal(q.dropped, 101);
	assert_int_equal(q.replaced, 2);
	sup_kube_queue_release(&q);
	assert_int_equal(sup_kube_queue_peek(&q, &w), -ENOENT);
}

static json_t *lease(const char *node, const char *url, const char *renew, int dur, const char *cap)
{
	json_t *l = json_pack("{s:{s:s,s:{s:s,s:s}},s:{s:s,s:i}}", "metadata", "name", "sbx-node-x",
			      "annotations", SUP_KUBE_ANN_NODE, node, SUP_KUBE_ANN_URL, url, "spec",
			      "renewTime", renew, "leaseDurationSeconds", dur);
	if (cap)
		json_object_set_new(json_object_get(json_object_get(l, "metadata"), "annotations"),
				    SUP_KUBE_ANN_CAPACITY, json_string(cap));
	return l;
}

static void directory(void **state)
{
	(void)state;
	time_t t0;
	assert_int_equal(sup_kube_parse_time("2026-12-02T01:00:00.123456Z", &t0), 0);
	assert_int_equal(sup_kube_parse_time("2026-12-02T01:00:10Z", &t0), 0);
	assert_int_equal(sup_kube_parse_time("2026-12-02T01:00:10+02:00", &t0), -EINVAL);
	struct timespec ts = { .tv_sec = t0, .tv_nsec = 5000 };
	char mt[40];
	sup_kube_micro_time(&ts, mt, sizeof(mt));
	assert_string_equal(mt, "2026-12-02T01:00:10.000005Z");

	sup_kube_capacity cap = { .nimages = 2, .leased = 3 };
	snprintf(cap.images[0].image, SUP_KUBE_IMAGE_MAX, "host");
	cap.images[0].ready = 2;
	snprintf(cap.images[1].image, SUP_KUBE_IMAGE_MAX, "alpine");
	json_t *cj = sup_kube_capacity_json(&cap);
	char *ct = json_dumps(cj, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(cj);
	assert_string_equal(ct, "{\"leased\":3,\"ready\":{\"alpine\":0,\"host\":2}}");
	sup_kube_capacity back;
	sbx_err e;
	assert_int_equal(sup_kube_capacity_parse(ct, &back, &e), 0);
	assert_int_equal(back.leased, 3);
	assert_int_equal(back.nimages, 2);
	free(ct);
	assert_int_equal(sup_kube_capacity_parse("{\"ready\":[]}", &back, &e), -EINVAL);

	sup_kube_dir d;
	sup_kube_dir_init(&d, "n1");
	const char *names[] = { "n1", "n2", "n3" };
	const char *caps[] = { "{\"ready\":{\"host\":5},\"leased\":0}",
			       "{\"ready\":{\"host\":1,\"alpine\":2},\"leased\":1}",
			       "{\"ready\":{\"host\":2},\"leased\":0}" };
	for (int i = 0; i < 3; i++) {
		char url[64];
		snprintf(url, sizeof(url), "http://127.0.0.1:%d", 7000 + i);
		json_t *l = lease(names[i], url, "2026-12-02T01:00:10.5Z", 8, caps[i]);
		sup_kube_node n;
		assert_int_equal(sup_kube_node_from_lease(l, &n, &e), 0);
		json_decref(l);
		assert_int_equal(sup_kube_dir_put(&d, &n), 0);
	}
	/* not ours: no node annotation */
	json_t *l = json_pack("{s:{s:s},s:{}}", "metadata", "name", "kube-scheduler", "spec");
	sup_kube_node n;
	assert_int_equal(sup_kube_node_from_lease(l, &n, &e), -EINVAL);
	json_decref(l);

	char out[SUP_KUBE_URL_MAX], name[SUP_KUBE_NODE_MAX];
	assert_int_equal(sup_kube_dir_find(&d, "n2", t0 + 7, name, sizeof(name), out, sizeof(out)), 0);
	assert_string_equal(out, "http://127.0.0.1:7001");
	assert_string_equal(name, "n2");
	assert_int_equal(sup_kube_dir_find(&d, "n9", t0, name, sizeof(name), out, sizeof(out)),
			 -ENOENT);
	/* ran out: renewed at t0, 8 s */
	assert_int_equal(sup_kube_dir_find(&d, "n2", t0 + 8, name, sizeof(name), out, sizeof(out)),
			 -ENOENT);
	/* the API server away from t0 to t0 + 30: the lease runs from when
	 * it could be read again, for its 8 s */
	d.sight_back = t0 + 30;
	assert_int_equal(sup_kube_dir_find(&d, "n2", t0 + 37, name, sizeof(name), out, sizeof(out)), 0);
	assert_true(sup_kube_dir_live(&d, &d.v[1], t0 + 37));
	assert_int_equal(sup_kube_dir_find(&d, "n2", t0 + 38, name, sizeof(name), out, sizeof(out)),
			 -ENOENT);
	d.sight_back = 0;
	/* a cloud's node name: found by its tag, which its ids carry */
	const char *cloud = "ip-10-0-1-23.eu-west-1.compute.internal";
	char tag[SUP_NODEID_TAG_MAX + 1];
	sup_nodeid_tag(cloud, tag);
	l = lease(cloud, "http://10.0.1.23:7070", "2026-12-02T01:00:10Z", 8, caps[2]);
	assert_int_equal(sup_kube_node_from_lease(l, &n, &e), 0);
	json_decref(l);
	assert_string_equal(n.tag, tag);
	assert_null(sup_kube_dir_clash(&d, &n));
	assert_int_equal(sup_kube_dir_put(&d, &n), 0);
	assert_int_equal(sup_kube_dir_find(&d, tag, t0, name, sizeof(name), out, sizeof(out)), 0);
	assert_string_equal(name, cloud);
	assert_string_equal(out, "http://10.0.1.23:7070");
	/* a node named as the other's tag: its ids could not be told apart;
	 * named as a clash, and lookups of the tag refused while both live */
	l = lease(tag, "http://10.0.9.9:7070", "2026-12-02T01:00:10Z", 8, caps[2]);
	sup_kube_node twin;
	assert_int_equal(sup_kube_node_from_lease(l, &twin, &e), 0);
	json_decref(l);
	assert_string_equal(twin.tag, tag);
	assert_string_equal(sup_kube_dir_clash(&d, &twin), cloud);
	assert_int_equal(sup_kube_dir_put(&d, &twin), 0);
	assert_int_equal(sup_kube_dir_find(&d, tag, t0, name, sizeof(name), out, sizeof(out)),
			 -ENOTUNIQ);
	sup_kube_dir_remove(&d, tag);
	sup_kube_dir_remove(&d, cloud);
	/* this node's own tag under another name */
	l = lease("n1", "http://10.0.9.9:7070", "2026-12-02T01:00:10Z", 8, caps[2]);
	assert_int_equal(sup_kube_node_from_lease(l, &twin, &e), 0);
	json_decref(l);
	assert_null(sup_kube_dir_clash(&d, &twin)); /* itself */
	/* a node name that is no DNS name is no node of ours */
	l = lease("Bad_Name", "http://10.0.9.9:7070", "2026-12-02T01:00:10Z", 8, caps[2]);
	assert_int_equal(sup_kube_node_from_lease(l, &twin, &e), -EINVAL);
	json_decref(l);
	/* never self (5 ready), the most ready first, each pick counted */
	assert_int_equal(sup_kube_dir_pick(&d, "host", t0, out, sizeof(out)), 0);
	assert_string_equal(out, "n3");
	assert_int_equal(sup_kube_dir_pick(&d, "host", t0, out, sizeof(out)), 0);
	assert_true(strcmp(out, "n2") == 0 || strcmp(out, "n3") == 0);
	assert_int_equal(sup_kube_dir_pick(&d, "host", t0, out, sizeof(out)), 0);
	assert_int_equal(sup_kube_dir_pick(&d, "host", t0, out, sizeof(out)), -ENOENT);
	assert_int_equal(sup_kube_dir_pick(&d, "alpine", t0 + 8, out, sizeof(out)), -ENOENT);
	assert_int_equal(sup_kube_dir_pick(&d, "alpine", t0 + 1, out, sizeof(out)), 0);
	assert_string_equal(out, "n2");
	assert_int_equal(sup_kube_dir_pick(&d, "busybox", t0, out, sizeof(out)), -ENOENT);
	sup_kube_dir_remove(&d, "n2");
	assert_int_equal(sup_kube_dir_find(&d, "n2", t0, name, sizeof(name), out, sizeof(out)),
			 -ENOENT);
	assert_int_equal(d.n, 2);
	sup_kube_dir_release(&d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(kubeconfig_yaml),    cmocka_unit_test(kubeconfig_json_cert),
		cmocka_unit_test(kubeconfig_refused), cmocka_unit_test(in_cluster),
		cmocka_unit_test(backoff_bounds),     cmocka_unit_test(queue_bounds),
		cmocka_unit_test(directory),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
