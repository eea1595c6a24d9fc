/* The Kubernetes backend's pure parts and its agents' folder: pod templates
 * (the repository's own daemonset/templates/default.yaml, and what is
 * refused), the Pod made from one, the label patches of a mark, typed YAML,
 * and the inotify watch of a real folder with real unix sockets (a claimed
 * UID's socket wakes its waiter, an unclaimed one is counted foreign once,
 * after the grace), and the coalescing of Events about pods. The API
 * server side is tests/integration/
 * test_k8s_pool.py's. */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_kube_agents.h"
#include "sup_kube_cfg.h"
#include "sup_kube_events.h"
#include "sup_kube_pods.h"
#include "sup_kube_tmpl.h"
#include "sup_nodeid.h"

#ifndef TEMPLATE_FILE
#error "TEMPLATE_FILE: daemonset/templates/default.yaml"
#endif

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "re");
	assert_non_null(f);
	char *buf = calloc(1, 1 << 18);
	assert_non_null(buf);
	size_t n = fread(buf, 1, (1 << 18) - 1, f);
	assert_true(n > 0);
	fclose(f);
	return buf;
}

static void yaml_typed(void **state)
{
	(void)state;
	const char *y = "a: 0\nb: \"0\"\nc: true\nd: ~\ne: 1Gi\nf: -12\ng: 'true'\n";
	sbx_err err;
	json_t *j = sup_kube_yaml_to_json_typed(y, strlen(y), &err);
	assert_non_null(j);
	assert_true(json_is_integer(json_object_get(j, "a")));
	assert_true(json_is_string(json_object_get(j, "b")));
	assert_true(json_is_true(json_object_get(j, "c")));
	assert_true(json_is_null(json_object_get(j, "d")));
	assert_string_equal(json_string_value(json_object_get(j, "e")), "1Gi");
	assert_int_equal(json_integer_value(json_object_get(j, "f")), -12);
	assert_true(json_is_string(json_object_get(j, "g")));
	json_decref(j);
	/* the untyped reading (kubeconfigs) is as it was */
	j = sup_kube_yaml_to_json(y, strlen(y), &err);
	assert_non_null(j);
	assert_true(json_is_string(json_object_get(j, "a")));
	json_decref(j);
}

static void template_default(void **state)
{
	(void)state;
	sup_kube_tmpl t;
	sbx_err err;
	int rc = sup_kube_tmpl_load(TEMPLATE_FILE, &t, &err);
	assert_int_equal(rc, 0);
	assert_string_equal(t.name, "default");
	assert_string_equal(t.agent_mount, "/run/sandbox");
	const char *want[] = { "/workspace", "/tmp", "/home/sandbox", "/dev/shm" };
	assert_int_equal(t.npaths, 4);
	for (size_t i = 0; i < 4; i++)
		assert_string_equal(t.paths[i], want[i]);
	/* its pods' limits: cpu "1", memory 512Mi, ephemeral-storage 2Gi over
	 * the node's defaults (pids) */
	sup_resources def = { .cpu_milli = 250, .memory = 64 << 20, .pids = 99, .disk = 1ull << 30 }, lim;
	assert_int_equal(sup_kube_tmpl_limits(&t, &def, &lim, &err), 0);
	assert_int_equal(lim.cpu_milli, 1000);
	assert_int_equal(lim.memory, 512ull << 20);
	assert_int_equal(lim.disk, 2ull << 30);
	assert_int_equal(lim.pids, 99);

	char *text = sup_kube_tmpl_pod(&t, "sb-n1-0123456789ab", "sbx-sandboxes", "n1");
	assert_non_null(text);
	json_t *pod = json_loads(text, 0, NULL);
	free(text);
	assert_non_null(pod);
	json_t *meta = json_object_get(pod, "metadata"), *labels = json_object_get(meta, "labels");
	assert_string_equal(json_string_value(json_object_get(meta, "name")), "sb-n1-0123456789ab");
	assert_null(json_object_get(meta, "generateName"));
	assert_string_equal(json_string_value(json_object_get(meta, "namespace")), "sbx-sandboxes");
	assert_string_equal(json_string_value(json_object_get(labels, SUP_KUBE_L_APP)), "sbx-sandbox");
	assert_string_equal(json_string_value(json_object_get(labels, SUP_KUBE_L_NODE)), "n1");
	assert_string_equal(json_string_value(json_object_get(labels, SUP_KUBE_L_TEMPLATE)), "default");
	assert_string_equal(json_string_value(json_object_get(labels, SUP_KUBE_L_STATE)), "starting");
	json_t *spec = json_object_get(pod, "spec");
	assert_string_equal(json_string_value(json_object_get(spec, "nodeName")), "n1");
	/* numbers stay numbers: the API server refuses "0" for runAsUser */
	assert_true(json_is_integer(json_object_get(json_object_get(spec, "securityContext"), "runAsUser")));
	json_decref(pod);
	/* a cloud node's name is longer than a label value may be (63): the
	 * label is its tag, spec.nodeName the name */
	static const char longname[] = "ip-10-0-1-23.eu-west-1.compute.internal.example-cluster-with-a-long-name";
	char tag[SUP_NODEID_TAG_MAX + 1];
	sup_nodeid_tag(longname, tag);
	text = sup_kube_tmpl_pod(&t, "sb-x-0123456789ab", "sbx-sandboxes", longname);
	assert_non_null(text);
	pod = json_loads(text, 0, NULL);
	free(text);
	assert_non_null(pod);
	labels = json_object_get(json_object_get(pod, "metadata"), "labels");
	assert_string_equal(json_string_value(json_object_get(labels, SUP_KUBE_L_NODE)), tag);
	assert_true(strlen(tag) <= 63);
	assert_string_equal(json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName")), longname);
	json_decref(pod);
	sup_kube_tmpl_release(&t);
}

/* The default template with one edit: from, to (first occurrence). */
static int parse_edited(const char *from, const char *to, sbx_err *err)
{
	char *text = slurp(TEMPLATE_FILE);
	char *at = strstr(text, from);
	assert_non_null(at);
	size_t fl = strlen(from), tl = strlen(to), rest = strlen(at + fl);
	char *out = calloc(1, strlen(text) + tl + 1);
	assert_non_null(out);
	memcpy(out, text, (size_t)(at - text));
	memcpy(out + (at - text), to, tl);
	memcpy(out + (at - text) + tl, at + fl, rest);
	sup_kube_tmpl t;
	int rc = sup_kube_tmpl_parse(out, strlen(out), "x", &t, err);
	if (rc == 0)
		sup_kube_tmpl_release(&t);
	free(out);
	free(text);
	return rc;
}

static void template_refused(void **state)
{
	(void)state;
	sbx_err err;
	assert_int_equal(parse_edited("readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "readOnlyRootFilesystem"));
	assert_int_equal(parse_edited("restartPolicy: Never", "restartPolicy: Always", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "restartPolicy"));
	assert_int_equal(parse_edited("subPathExpr: $(POD_UID)", "subPathExpr: $(HOME)", &err), -EINVAL);
	assert_non_null(strstr(err.msg, "subPathExpr"));
	assert_int_equal(parse_edited("  - name: agent-socket\n    hostPath:", "  - name: agent-sock\n    hostPath:", &err),
			 -EINVAL);
	assert_int_equal(parse_edited("kind: Pod", "kind: Deployment", &err), -EINVAL);
	assert_int_equal(parse_edited("sbx.dev/template: default", "sbx.dev/template: -bad-", &err), -EINVAL);
	/* a second container */
	assert_int_equal(parse_edited("  containers:\n  - name: sandbox",
				      "  containers:\n  - name: side\n    image: x\n  - name: sandbox", &err),
			 -EINVAL);
	assert_non_null(strstr(err.msg, "one container"));
}

static void mark_patches(void **state)
{
	(void)state;
	sup_kube_mark m = { .state = "leased", .tenant = "alice", .sandbox = "sb-n1-0123456789ab",
			    .expires_at = 1800000000 };
	char *p = sup_kube_pods_mark_patch(&m);
	assert_non_null(p);
	assert_string_equal(p, "{\"metadata\":{\"annotations\":{\"sbx.dev/expires-at\":\"2027-01-15T08:00:00Z\","
			       "\"sbx.dev/sandbox-id\":\"sb-n1-0123456789ab\",\"sbx.dev/tenant\":\"alice\"},"
			       "\"labels\":{\"sbx.dev/state\":\"leased\",\"sbx.dev/tenant\":\"alice\"}}}");
	free(p);
	/* ready again: the last tenant's marks are removed (null in a merge patch) */
	m = (sup_kube_mark){ .state = "ready" };
	p = sup_kube_pods_mark_patch(&m);
	assert_string_equal(p, "{\"metadata\":{\"annotations\":{\"sbx.dev/expires-at\":null,"
			       "\"sbx.dev/sandbox-id\":null,\"sbx.dev/tenant\":null},"
			       "\"labels\":{\"sbx.dev/state\":\"ready\",\"sbx.dev/tenant\":null}}}");
	free(p);
	/* a tenant name that is no label value is an annotation only */
	m = (sup_kube_mark){ .state = "leased", .tenant = "-odd-", .sandbox = "sb-x", .expires_at = 1 };
	p = sup_kube_pods_mark_patch(&m);
	json_t *j = json_loads(p, 0, NULL);
	json_t *meta = json_object_get(j, "metadata");
	assert_true(json_is_null(json_object_get(json_object_get(meta, "labels"), SUP_KUBE_L_TENANT)));
	assert_string_equal(json_string_value(json_object_get(json_object_get(meta, "annotations"), SUP_KUBE_A_TENANT)),
			    "-odd-");
	json_decref(j);
	free(p);
}

/* A listening unix socket at dir/uid/agent.sock. */
static int listen_at(const char *dir, const char *uid)
{
	char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, uid);
	assert_int_equal(mkdir(path, 0700), 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s/agent.sock", dir, uid);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(s >= 0);
	assert_int_equal(bind(s, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(s, 4), 0);
	return s;
}

static void agents_folder(void **state)
{
	(void)state;
	char dir[] = "/tmp/sbx-agents-XXXXXX";
	assert_non_null(mkdtemp(dir));
	sbx_err err;
	sup_kube_agents *a = sup_kube_agents_start(dir, &err);
	assert_non_null(a);
	const char *ours = "0f0e0d0c-0000-4000-8000-00000000000a";
	const char *foreign = "0f0e0d0c-0000-4000-8000-00000000000b";
	/* nothing yet: the wait ends at its bound */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(sup_kube_agents_wait(a, ours, 300, &err), -ETIMEDOUT);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(ms >= 290 && ms < 2000);
	/* a socket made: the claimed one's wait ends at once */
	int s1 = listen_at(dir, ours), s2 = listen_at(dir, foreign);
	assert_int_equal(sup_kube_agents_wait(a, ours, 5000, &err), 0);
	/* a name that is no UID leads nowhere */
	assert_int_equal(sup_kube_agents_wait(a, "../etc", 10, &err), -EINVAL);
	/* the unclaimed one: counted once, after the grace */
	assert_int_equal(sup_kube_agents_foreign(a), 0);
	for (int i = 0; i < 60 && sup_kube_agents_foreign(a) == 0; i++)
		usleep(100000);
	assert_int_equal(sup_kube_agents_foreign(a), 1);
	usleep(1500000);
	assert_int_equal(sup_kube_agents_foreign(a), 1);
	sup_kube_agents_forget(a, ours);
	sup_kube_agents_free(a);
	close(s1);
	close(s2);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

static void quantities(void **state)
{
	(void)state;
	static const struct {
		const char *q;
		uint64_t milli;
	} ok[] = {
		{ "1", 1000 },	       { "500m", 500 },		    { "0.5", 500 },	     { "1.25", 1250 },
		{ "512Mi", 536870912000ull }, { "1G", 1000000000000ull }, { "2e3", 2000000 }, { "1Ki", 1024000 },
		{ "100m", 100 },       { "1P", 1000000000000000000ull },
	};
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		uint64_t m = 0;
		assert_int_equal(sup_kube_quantity_milli(ok[i].q, &m), 0);
		assert_int_equal(m, ok[i].milli);
	}
	const char *bad[] = { "", "-1", "1x", "Mi", "1.2.3", "1 Gi", "1e", "10Ei", "1E", "1e99" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint64_t m;
		assert_int_equal(sup_kube_quantity_milli(bad[i], &m), -EINVAL);
	}
	/* a template whose limit is no quantity, or under a sandbox's floor */
#define QDOC                                                                                      \
	"apiVersion: v1\nkind: Pod\nmetadata: {labels: {sbx.dev/template: q}}\n"                \
	"spec:\n  restartPolicy: Never\n  containers:\n  - name: s\n    image: i\n"              \
	"    resources: {limits: {memory: %s}}\n"                                                  \
	"    securityContext: {readOnlyRootFilesystem: true}\n"                                   \
	"    env: [{name: U, valueFrom: {fieldRef: {fieldPath: metadata.uid}}}]\n"                \
	"    volumeMounts: [{name: agent-socket, mountPath: /run/sandbox, subPathExpr: $(U)}]\n"  \
	"  volumes: [{name: agent-socket, hostPath: {path: /run/sbx/agents}}]\n"
	const char *mems[] = { "lots", "16Mi", "1Gi" };
	int want[] = { -EINVAL, -EINVAL, 0 };
	for (size_t i = 0; i < 3; i++) {
		char text[1024];
		snprintf(text, sizeof(text), QDOC, mems[i]);
		sup_kube_tmpl t;
		sbx_err err;
		assert_int_equal(sup_kube_tmpl_parse(text, strlen(text), NULL, &t, &err), 0);
		sup_resources def, lim;
		sup_resources_default(&def);
		assert_int_equal(sup_kube_tmpl_limits(&t, &def, &lim, &err), want[i]);
		if (want[i] == 0)
			assert_int_equal(lim.memory, 1ull << 30);
		else
			assert_non_null(strstr(err.msg, "resources.limits.memory"));
		sup_kube_tmpl_release(&t);
	}
}

static json_t *note(sup_kube_evs *e, const char *reason, const char *tmpl, const char *pod, long long ms,
		    time_t wall_s, char *name)
{
	char msg[64];
	snprintf(msg, sizeof(msg), "%s went", pod);
	sup_kube_pod_ev ev = { .ns = "sbx-sandboxes", .node = "n1", .pod = pod, .uid = "u-1", .tmpl = tmpl,
			       .reason = reason, .message = msg, .warning = true };
	struct timespec wall = { wall_s, 5 };
	char *body = sup_kube_evs_note(e, &ev, ms, &wall, 0x1234, name, SUP_KUBE_EV_NAME_MAX);
	assert_non_null(body);
	json_t *o = json_loads(body, 0, NULL);
	free(body);
	assert_non_null(o);
	return o;
}

static void events_coalesced(void **state)
{
	(void)state;
	static sup_kube_evs e;
	char n1[SUP_KUBE_EV_NAME_MAX], n2[SUP_KUBE_EV_NAME_MAX], n3[SUP_KUBE_EV_NAME_MAX], n4[SUP_KUBE_EV_NAME_MAX];
	json_t *a = note(&e, "FailedStart", "default", "sb-n1-000000000001", 1000, 1700000000, n1);
	assert_string_equal(json_string_value(json_object_get(a, "type")), "Warning");
	assert_string_equal(json_string_value(json_object_get(a, "message")), "sb-n1-000000000001 went");
	assert_int_equal(json_integer_value(json_object_get(a, "count")), 1);
	json_t *io = json_object_get(a, "involvedObject");
	assert_string_equal(json_string_value(json_object_get(io, "kind")), "Pod");
	assert_string_equal(json_string_value(json_object_get(io, "name")), "sb-n1-000000000001");
	assert_string_equal(json_string_value(json_object_get(json_object_get(a, "metadata"), "name")), n1);
	assert_true(strncmp(n1, "sb-n1-000000000001.", 19) == 0);
	/* another pod of the template, the same reason, within the window:
	 * the same Event, counted, the latest message */
	json_t *b = note(&e, "FailedStart", "default", "sb-n1-000000000002", 5000, 1700000004, n2);
	assert_string_equal(n1, n2);
	assert_int_equal(json_integer_value(json_object_get(b, "count")), 2);
	assert_string_equal(json_string_value(json_object_get(b, "message")),
			    "(combined from similar events): sb-n1-000000000002 went");
	assert_string_equal(json_string_value(json_object_get(json_object_get(b, "involvedObject"), "name")),
			    "sb-n1-000000000001");
	assert_string_equal(json_string_value(json_object_get(b, "firstTimestamp")),
			    json_string_value(json_object_get(a, "firstTimestamp")));
	assert_string_not_equal(json_string_value(json_object_get(b, "lastTimestamp")),
				json_string_value(json_object_get(a, "firstTimestamp")));
	assert_int_equal(e.coalesced, 1);
	/* another reason is another Event; past the window a new one */
	json_t *c = note(&e, "ResetFailed", "default", "sb-n1-000000000003", 6000, 1700000005, n3);
	assert_string_not_equal(n1, n3);
	json_t *d = note(&e, "FailedStart", "default", "sb-n1-000000000004", 1000 + SUP_KUBE_EV_WINDOW_MS, 1700000600,
			 n4);
	assert_string_not_equal(n1, n4);
	assert_int_equal(json_integer_value(json_object_get(d, "count")), 1);
	/* bounded: a storm of templates keeps SUP_KUBE_EV_SLOTS slots */
	for (int i = 0; i < 3 * SUP_KUBE_EV_SLOTS; i++) {
		char t[32];
		snprintf(t, sizeof(t), "t%d", i);
		json_decref(note(&e, "FailedStart", t, "sb-n1-000000000005", 7000 + i, 1700000006, n4));
	}
	assert_int_equal(e.n, SUP_KUBE_EV_SLOTS);
	json_decref(a);
	json_decref(b);
	json_decref(c);
	json_decref(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(yaml_typed),     cmocka_unit_test(template_default),
		cmocka_unit_test(template_refused), cmocka_unit_test(mark_patches),
		cmocka_unit_test(agents_folder),  cmocka_unit_test(events_coalesced),
		cmocka_unit_test(quantities),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
