/* Command-line parsing and validation (sup_config). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "sup_config.h"

static int parse(sup_config *c, sbx_err *e, int argc, const char **argv)
{
	sbx_err_clear(e);
	assert_int_equal(sup_config_defaults(c, e), 0);
	return sup_config_parse(c, argc, (char **)argv, e);
}

static void assert_agent_opts(const sup_agent_opts *got, const sup_agent_opts *want)
{
	assert_int_equal(got->grace_ms, want->grace_ms);
	assert_int_equal(got->idle_ms, want->idle_ms);
	assert_int_equal(got->ping_after_ms, want->ping_after_ms);
	assert_int_equal(got->ping_timeout_ms, want->ping_timeout_ms);
	assert_int_equal(got->frame_ms, want->frame_ms);
	assert_int_equal(got->max_streams, want->max_streams);
	assert_int_equal(got->max_waiting, want->max_waiting);
	assert_int_equal(got->max_queued, want->max_queued);
}

static void test_defaults(void **state)
{
	(void)state;
	sup_config c;
	sbx_err e;
	const char *argv[] = { "sup", NULL };
	assert_int_equal(parse(&c, &e, 1, argv), 0);
	assert_string_equal(c.listen_host, "127.0.0.1");
	assert_int_equal(c.listen_port, 7070);
	assert_string_equal(c.state_dir, "/var/lib/sbx");
	assert_int_equal(c.pool_size, 4);
	assert_int_equal(c.nimages, 1);
	assert_string_equal(c.images[0], "host");
	assert_string_equal(c.runtime, "runc");
	assert_null(c.token);
	assert_int_equal(c.max_body, 1 << 20);
	assert_int_equal(c.max_output, 16 << 20);
	/* pulls: the PATH's skopeo, registries only, 10 minutes */
	assert_string_equal(c.skopeo, "skopeo");
	assert_null(c.image_pull_dir);
	assert_int_equal(c.image_pull_timeout_ms, 600000);
	/* the deadlines and limits API.md documents */
	assert_agent_opts(&c.agent, &(sup_agent_opts){ 2000, 30000, 10000, 5000, 5000, 1024, 1000,
						       8 << 20 });
	sup_config_release(&c);
}

/* The snapshot store's flags: kept as given (the start opens and checks
 * the store); a malformed one, or an endpoint without a store, refused. */
static void test_snapshot_store_flags(void **state)
{
	(void)state;
	sup_config c;
	sbx_err e;
	const char *none[] = { "sup", NULL };
	const char *argv[] = { "sup", "--snapshot-store", "s3://snaps/node-1", "--s3-endpoint", "http://127.0.0.1:9000",
			       NULL };
	assert_int_equal(parse(&c, &e, 1, none), 0);
	assert_null(c.snapshot_store);
	assert_null(c.s3_endpoint);
	assert_int_equal(c.snapshot_orphan_age_s, 3600);
	assert_int_equal(c.snapshot_sweep_every_s, 900);
	sup_config_release(&c);
	/* the orphan sweep's age and period */
	const char *sweep[] = { "sup", "--snapshot-orphan-age", "5", "--snapshot-sweep-every", "0", NULL };
	assert_int_equal(parse(&c, &e, 5, sweep), 0);
	assert_int_equal(c.snapshot_orphan_age_s, 5);
	assert_int_equal(c.snapshot_sweep_every_s, 0);
	sup_config_release(&c);
	const char *young[] = { "sup", "--snapshot-orphan-age", "0", NULL };
	assert_int_equal(parse(&c, &e, 3, young), -EINVAL);
	sup_config_release(&c);
	assert_int_equal(parse(&c, &e, 5, argv), 0);
	assert_string_equal(c.snapshot_store, "s3://snaps/node-1");
	assert_string_equal(c.s3_endpoint, "http://127.0.0.1:9000");
	sup_config_release(&c);
	const char *bad[][3] = { { "sup", "--snapshot-store", "/var/lib/snaps" },
				 { "sup", "--snapshot-store", "s3://" },
				 { "sup", "--s3-endpoint", "ftp://h" },
				 { "sup", "--s3-endpoint", "http://127.0.0.1:9000" } };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *a[] = { bad[i][0], bad[i][1], bad[i][2], NULL };
		assert_int_equal(parse(&c, &e, 3, a), -EINVAL);
		assert_non_null(strstr(e.msg, i < 2 ? "--snapshot-store" : "--s3-endpoint"));
		sup_config_release(&c);
	}
}

/* The relay's flags: a node name (the host name's by default), peers as
 * NAME=URL, the cluster key's file. */
static void test_relay_flags(void **state)
{
	(void)state;
	sup_config c;
	sbx_err e;
	const char *none[] = { "sup", NULL };
	const char *argv[] = { "sup", "--node-name", "n1", "--peer", "n2=http://10.0.0.2:7070", "--peer",
			       "n3=http://[::1]:7071", "--cluster-key-file", "/run/key", NULL };
	assert_int_equal(parse(&c, &e, 1, none), 0);
	assert_int_equal(sup_nodeid_name_check(c.node_name, &e), 0);
	assert_int_equal(c.npeers, 0);
	assert_null(c.cluster_key_file);
	sup_config_release(&c);
	assert_int_equal(parse(&c, &e, 9, argv), 0);
	assert_string_equal(c.node_name, "n1");
	assert_int_equal(c.npeers, 2);
	assert_string_equal(c.peers[1], "n3=http://[::1]:7071");
	assert_string_equal(c.cluster_key_file, "/run/key");
	sup_config_release(&c);
	/* a cloud's node names, for this node and its peers */
	const char *cloud[] = { "sup", "--node-name", "ip-10-0-1-23.eu-west-1.compute.internal",
				"--peer", "ip-10-0-1-24.eu-west-1.compute.internal=http://10.0.1.24:7070",
				NULL };
	assert_int_equal(parse(&c, &e, 5, cloud), 0);
	assert_string_equal(c.node_name, "ip-10-0-1-23.eu-west-1.compute.internal");
	sup_config_release(&c);
	const char *bad[][3] = { { "sup", "--node-name", "N1" },
				 { "sup", "--node-name", "a.name.ending.in.a.dot." },
				 { "sup", "--peer", "n2" },
				 { "sup", "--peer", "N2=http://h:1" } };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *a[] = { bad[i][0], bad[i][1], bad[i][2], NULL };
		assert_int_equal(parse(&c, &e, 3, a), -EINVAL);
		assert_non_null(strstr(e.msg, i < 2 ? "--node-name" : "--peer"));
		sup_config_release(&c);
	}
}

/* The TLS flags: kept as given (the files are read where TLS is made);
 * half of a pair, a CA without a certificate, or other nodes without a
 * CA to verify them by, refused with the flags named. */
static void test_tls_flags(void **state)
{
	(void)state;
	sup_config c;
	sbx_err e;
	const char *none[] = { "sup", NULL };
	assert_int_equal(parse(&c, &e, 1, none), 0);
	assert_null(c.tls_cert);
	assert_null(c.tls_key);
	assert_null(c.tls_ca);
	sup_config_release(&c);
	const char *ok[] = { "sup", "--tls-cert", "/tls/tls.crt", "--tls-key", "/tls/tls.key",
			     "--tls-ca", "/tls/ca.crt", "--peer", "n2=https://10.0.0.2:7070", NULL };
	assert_int_equal(parse(&c, &e, 9, ok), 0);
	assert_string_equal(c.tls_cert, "/tls/tls.crt");
	assert_string_equal(c.tls_key, "/tls/tls.key");
	assert_string_equal(c.tls_ca, "/tls/ca.crt");
	sup_config_release(&c);
	/* one node alone needs no CA */
	const char *alone[] = { "sup", "--tls-cert", "/c", "--tls-key", "/k", NULL };
	assert_int_equal(parse(&c, &e, 5, alone), 0);
	sup_config_release(&c);
	struct {
		int argc;
		const char *argv[8];
		const char *says;
	} bad[] = {
		{ 3, { "sup", "--tls-cert", "/c" }, "both or neither" },
		{ 3, { "sup", "--tls-key", "/k" }, "both or neither" },
		{ 3, { "sup", "--tls-ca", "/ca" }, "--tls-ca needs --tls-cert" },
		{ 7, { "sup", "--tls-cert", "/c", "--tls-key", "/k", "--peer", "n2=https://h:1" },
		  "needs --tls-ca" },
		{ 6, { "sup", "--tls-cert", "/c", "--tls-key", "/k", "--kube-in-cluster" },
		  "needs --tls-ca" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(&c, &e, bad[i].argc, bad[i].argv), -EINVAL);
		assert_non_null(strstr(e.msg, bad[i].says));
		sup_config_release(&c);
	}
}

/* The Kubernetes flags, and the node name they share with the relay. */
static void test_kube_flags(void **state)
{
	(void)state;
	sup_config c;
	sbx_err e;
	const char *argv[] = { "sup", "--kubeconfig", "/etc/sbx/kc", "--kube-context", "prod",
			       "--node-name", "node-a", "--kube-namespace", "sbx",
			       "--advertise-url", "http://10.0.0.5:7070", "--lease-duration", "8",
			       "--kube-queue", "16", NULL };
	assert_int_equal(parse(&c, &e, 15, argv), 0);
	assert_string_equal(c.kubeconfig, "/etc/sbx/kc");
	assert_string_equal(c.kube_context, "prod");
	assert_string_equal(c.node_name, "node-a");
	assert_string_equal(c.kube_namespace, "sbx");
	assert_string_equal(c.advertise_url, "http://10.0.0.5:7070");
	assert_int_equal(c.lease_s, 8);
	assert_int_equal(c.kube_queue, 16);
	assert_false(c.kube_in_cluster);
	sup_config_release(&c);
	const char *in[] = { "sup", "--kube-in-cluster", NULL };
	assert_int_equal(parse(&c, &e, 2, in), 0);
	assert_true(c.kube_in_cluster);
	assert_int_equal(c.lease_s, 40);
	assert_int_equal(c.kube_queue, 256);
	assert_true(c.node_name[0] != '\0'); /* the host name's */
	assert_null(c.kube_token_file);
	assert_null(c.node_account);
	sup_config_release(&c);
	const char *auth[] = { "sup", "--kube-in-cluster", "--kube-token-file", "/run/sa/token",
			       "--node-account", "system:serviceaccount:sbx-system:sbx-supervisor",
			       NULL };
	assert_int_equal(parse(&c, &e, 6, auth), 0);
	assert_string_equal(c.kube_token_file, "/run/sa/token");
	assert_string_equal(c.node_account, "system:serviceaccount:sbx-system:sbx-supervisor");
	sup_config_release(&c);
	const char *bad[][5] = {
		{ "sup", "--kubeconfig", "kc", "--kube-in-cluster", "one or the other" },
		{ "sup", "--node-name", "Node_A", "", "--node-name" },
		{ "sup", "--kube-namespace", "x", "", "need --kubeconfig" },
		{ "sup", "--kube-in-cluster", "--kube-context", "c", "needs --kubeconfig" },
		{ "sup", "--kube-in-cluster", "--lease-duration", "2", "lease-duration" },
		{ "sup", "--kube-in-cluster", "--kube-queue", "0", "kube-queue" },
		{ "sup", "--kube-in-cluster", "--advertise-url", "10.0.0.5:7070", "--advertise-url" },
		{ "sup", "--kube-in-cluster", "--kube-namespace", "Sbx", "--kube-namespace" },
		{ "sup", "--kube-token-file", "/t", "", "need --kubeconfig" },
		{ "sup", "--kube-in-cluster", "--node-account", "sbx-supervisor", "--node-account" },
		{ "sup", "--kube-in-cluster", "--node-account", "system:serviceaccount:ns",
		  "--node-account" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *a[5] = { bad[i][0], bad[i][1], bad[i][2], bad[i][3], NULL };
		int n = bad[i][3][0] ? 4 : 3;
		a[n] = NULL;
		assert_int_equal(parse(&c, &e, n, a), -EINVAL);
		if (!strstr(e.msg, bad[i][4]))
			fail_msg("%zu: '%s' not in '%s'", i, bad[i][4], e.msg);
		sup_config_release(&c);
	}
}

/* MCP sessions: ten minutes idle by default, no browser Origin allowed. */
static void test_mcp_flags(void **state)
{
	(void)state;
	sup_config c;
	sbx_err e;
	const char *none[] = { "sup", NULL };
	const char *argv[] = { "sup", "--mcp-idle-timeout", "2.5", "--mcp-allow-origin", "http://a.test,http://b.test",
			       NULL };
	const char *bad[] = { "sup", "--mcp-idle-timeout", "0", NULL };
	assert_int_equal(parse(&c, &e, 1, none), 0);
	assert_int_equal(c.mcp_idle_ms, 600000);
	assert_null(c.mcp_origins);
	sup_config_release(&c);
	assert_int_equal(parse(&c, &e, 5, argv), 0);
	assert_int_equal(c.mcp_idle_ms, 2500);
	assert_string_equal(c.mcp_origins, "http://a.test,http://b.test");
	sup_config_release(&c);
	assert_int_equal(parse(&c, &e, 3, bad), -EINVAL);
	assert_non_null(strstr(e.msg, "mcp-idle-timeout"));
	sup_config_release(&c);
}

static void test_all_flags(void **state)
{
	(void)state;
	sup_config c;
	sbx_err e;
	const char *argv[] = { "sup", "--listen", "[::1]:0", "--state-dir", "/tmp/x", "--pool-size",
			       "2", "--pool-images", "host,/srv/rootfs,python:3.11-slim=5", "--runtime", "crun",
			       "--import-image", "py=/srv/py.tar", "--import-image", "/srv/layout",
			       "--remove-image", "old:1", "--image-max-layer", "1G", "--image-allow-setid",
			       "--skopeo", "/usr/bin/skopeo", "--image-pull-dir", "/srv/pulls",
			       "--image-pull-timeout", "2.5",
			       "--agent", "/a", "--token", "0123456789abcdef0123", "--max-body",
			       "64K", "--max-output", "1M", "--max-output-total", "2M", "--max-execs", "5", "--workers", "3", "--acquire-timeout",
			       "5", "--print-example", "--agent-grace", "0.5", "--agent-idle-timeout", "2",
			       "--agent-ping-interval", "1.25", "--agent-ping-timeout", "3",
			       "--agent-frame-timeout", ".2", "--agent-max-streams", "9",
			       "--agent-max-waiting", "7", "--agent-max-queued", "1M", NULL };
	assert_int_equal(parse(&c, &e, (int)(sizeof(argv) / sizeof(argv[0])) - 1, argv), 0);
	assert_string_equal(c.listen_host, "::1");
	assert_int_equal(c.listen_port, 0);
	assert_string_equal(c.state_dir, "/tmp/x");
	assert_int_equal(c.pool_size, 2);
	assert_int_equal(c.nimages, 3);
	assert_string_equal(c.images[1], "/srv/rootfs");
	assert_string_equal(c.images[2], "python:3.11-slim");
	/* NAME=N its own size, the others --pool-size's (given after them) */
	assert_int_equal(c.image_sizes[0], 2);
	assert_int_equal(c.image_sizes[1], 2);
	assert_int_equal(c.image_sizes[2], 5);
	assert_int_equal(c.nimports, 2);
	assert_string_equal(c.imports[0], "py=/srv/py.tar");
	assert_int_equal(c.nremoves, 1);
	assert_int_equal(c.image_max_layer, 1ull << 30);
	assert_true(c.image_allow_setid);
	assert_string_equal(c.skopeo, "/usr/bin/skopeo");
	assert_string_equal(c.image_pull_dir, "/srv/pulls");
	assert_int_equal(c.image_pull_timeout_ms, 2500);
	assert_string_equal(c.runtime, "crun");
	assert_string_equal(c.agent_path, "/a");
	assert_int_equal(c.max_body, 64 * 1024);
	assert_int_equal(c.max_output, 1 << 20);
	assert_int_equal(c.max_output_total, 2 << 20);
	assert_int_equal(c.max_execs, 5);
	assert_int_equal(c.workers, 3);
	assert_int_equal(c.acquire_timeout_ms, 5000);
	assert_true(c.print_example);
	assert_agent_opts(&c.agent, &(sup_agent_opts){ 500, 2000, 1250, 3000, 200, 9, 7, 1 << 20 });
	sup_config_release(&c);
}

static void test_reuse(void **state)
{
	(void)state;
	sup_config c;
	sbx_err e;
	const char *none[] = { "sup", NULL };
	const char *argv[] = { "sup", "--pool-reuse", "--reuse-paths", "/workspace,/home/u", NULL };
	assert_int_equal(parse(&c, &e, 1, none), 0);
	assert_false(c.pool_reuse);
	assert_int_equal(c.nreuse_paths, 6); /* the defaults, used once reuse is asked for */
	assert_string_equal(c.reuse_paths[4], "/dev/shm");
	sup_config_release(&c);
	assert_int_equal(parse(&c, &e, 4, argv), 0);
	assert_true(c.pool_reuse);
	assert_int_equal(c.nreuse_paths, 2);
	assert_string_equal(c.reuse_paths[1], "/home/u");
	sup_config_release(&c);
}

static void test_bad_flags(void **state)
{
	(void)state;
	static const char *const bad[][3] = {
		{ "--listen", "127.0.0.1" },        { "--listen", "127.0.0.1:70000" },
		{ "--listen", ":80" },              { "--listen", "[::1]80" },
		{ "--state-dir", "relative" },      { "--pool-size", "-1" },
		{ "--pool-size", "x" },             { "--pool-images", "../rootfs" },
		{ "--pool-images", "host=x" },      { "--pool-images", "host=300" },
		{ "--pool-images", "sha256:12" },   { "--import-image", "nopath" },
		{ "--remove-image", "host" },       { "--pool-images", "a=60,b=10" },
		{ "--pool-images", "host,host" },   { "--pool-images", "," },
		{ "--token", "short" },             { "--max-body", "10" },
		{ "--max-body", "5Q" },             { "--workers", "0" },
		{ "--log-level", "loud" },          { "--bogus", "1" },
		{ "--pool-size", "99999999999999999999" }, { "--max-execs", "0" },
		{ "--agent-grace", "-1" },          { "--agent-idle-timeout", "0" },
		{ "--agent-ping-interval", "1s" },  { "--agent-ping-timeout", "nan" },
		{ "--agent-frame-timeout", "" },    { "--agent-max-streams", "0" },
		{ "--agent-max-waiting", "x" },     { "--agent-max-queued", "1K" },
		{ "--agent-idle-timeout", "1e9" },
		{ "--pool", "gvisor" },             { "--pool", "gvisor:host" },
		{ "--pool", "kata:host=1" },        { "--pool", "gvisor:../ubuntu=1" },
		{ "--pool", "gvisor:host=x" },      { "--pool", "gvisor:host=257" },
		{ "--pool", "host=2" },             { "--pool", ":host=2" },
		{ "--runsc-platform", "kvm2" },
		{ "--runsc-root", "relative" },
		{ "--image-pull-dir", "relative" }, { "--image-pull-timeout", "0" },
		{ "--reuse-paths", "" },            { "--reuse-paths", "/" },
		{ "--reuse-paths", "tmp" },         { "--reuse-paths", "/tmp/../etc" },
		{ "--reuse-paths", "/tmp,,/x/" },
		{ "--reuse-paths", "/a,/b,/c,/d,/e,/f,/g,/h,/i,/j,/k,/l,/m,/n,/o,/p,/q" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		sup_config c;
		sbx_err e;
		const char *argv[] = { "sup", bad[i][0], bad[i][1], NULL };
		int rc = parse(&c, &e, 3, argv);
		if (rc != -EINVAL)
			fail_msg("accepted %s %s", bad[i][0], bad[i][1]);
		assert_true(e.msg[0] != '\0');
		sup_config_release(&c);
	}
	/* Pool larger than the sandbox limit. */
	sup_config c;
	sbx_err e;
	const char *argv[] = { "sup", "--pool-size", "10", "--max-sandboxes", "5", NULL };
	assert_int_equal(parse(&c, &e, 5, argv), -EINVAL);
	sup_config_release(&c);
	const char *argv2[] = { "sup", "stray", NULL };
	assert_int_equal(parse(&c, &e, 2, argv2), -EINVAL);
	sup_config_release(&c);
}

/* --pool ISOLATION:IMAGE=N beside --pool-size/--pool-images, and the pools
 * that come of them with the isolations offered. */
static void test_pools(void **state)
{
	(void)state;
	sup_config c;
	sbx_err e;
	const char *argv[] = { "sup", "--pool-size", "3", "--pool-images", "host,/srv/a",
			       "--pool", "gvisor:host=2", "--pool", "runc:/srv/a=1",
			       "--pool", "gvisor:/srv/b=0", "--runsc", "/opt/runsc",
			       "--runsc-platform", "kvm", "--runsc-root", "/run/rs", NULL };
	assert_int_equal(parse(&c, &e, (int)(sizeof(argv) / sizeof(argv[0])) - 1, argv), 0);
	assert_int_equal(c.npools, 3);
	assert_true(c.runsc_given);
	assert_string_equal(c.runsc, "/opt/runsc");
	assert_string_equal(c.runsc_platform, "kvm");
	assert_string_equal(c.runsc_root, "/run/rs");
	assert_true(sup_config_pools_use(&c, SUP_ISO_GVISOR));

	bool both[SUP_ISO_N] = { true, true };
	sup_pool_spec sp[SUP_MAX_POOLS];
	int n = sup_config_pool_specs(&c, both, sp, &e);
	/* runc host 3, runc /srv/a 1 (--pool over --pool-size), gvisor host 2,
	 * gvisor /srv/b 0, then cold ones: gvisor /srv/a, runc /srv/b */
	assert_int_equal(n, 6);
	static const struct {
		const char *image;
		sup_isolation iso;
		unsigned size;
	} want[] = { { "host", SUP_ISO_RUNC, 3 },     { "/srv/a", SUP_ISO_RUNC, 1 },
		     { "host", SUP_ISO_GVISOR, 2 },   { "/srv/b", SUP_ISO_GVISOR, 0 },
		     { "/srv/a", SUP_ISO_GVISOR, 0 }, { "/srv/b", SUP_ISO_RUNC, 0 } };
	for (int i = 0; i < n; i++) {
		assert_string_equal(sp[i].image, want[i].image);
		assert_int_equal(sp[i].isolation, want[i].iso);
		assert_int_equal(sp[i].size, want[i].size);
	}
	/* gVisor not offered: a --pool asking for it is an error... */
	bool runc_only[SUP_ISO_N] = { true, false };
	assert_int_equal(sup_config_pool_specs(&c, runc_only, sp, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "gvisor isolation is not offered"));
	sup_config_release(&c);
	/* ...and without one, the node serves runc only */
	const char *plain[] = { "sup", NULL };
	assert_int_equal(parse(&c, &e, 1, plain), 0);
	assert_false(c.runsc_given);
	assert_false(sup_config_pools_use(&c, SUP_ISO_GVISOR));
	assert_int_equal(sup_config_pool_specs(&c, runc_only, sp, &e), 1);
	assert_int_equal(sup_config_pool_specs(&c, both, sp, &e), 2);
	assert_int_equal(sp[1].isolation, SUP_ISO_GVISOR);
	assert_int_equal(sp[1].size, 0);
	sup_config_release(&c);

	/* The pair twice; ready sandboxes beyond --max-sandboxes. */
	const char *twice[] = { "sup", "--pool", "gvisor:host=1", "--pool", "gvisor:host=2", NULL };
	assert_int_equal(parse(&c, &e, 5, twice), -EINVAL);
	assert_non_null(strstr(e.msg, "twice"));
	sup_config_release(&c);
	const char *many[] = { "sup", "--pool-size", "4", "--pool", "gvisor:host=3",
			       "--max-sandboxes", "6", NULL };
	assert_int_equal(parse(&c, &e, 7, many), -EINVAL);
	assert_non_null(strstr(e.msg, "7 sandboxes ready"));
	sup_config_release(&c);
}

/* --default-resources / --max-resources (their syntax is sup_resources'). */
static void test_resources(void **state)
{
	(void)state;
	sup_config c;
	sbx_err e;
	const char *argv0[] = { "sup", NULL };
	assert_int_equal(parse(&c, &e, 1, argv0), 0);
	/* not unlimited: the built-in defaults, under a ceiling of the machine's */
	assert_int_equal(c.res_default.cpu_milli, 1000);
	assert_int_equal(c.res_default.memory, 1u << 30);
	assert_int_equal(c.res_default.pids, 1024);
	assert_int_equal(c.res_default.disk, 10ull << 30);
	assert_true(c.res_max.cpu_milli >= 1000);
	assert_true(c.res_max.memory > 0 && c.res_max.pids > 0 && c.res_max.disk >= 10ull << 30);
	sup_config_release(&c);
	const char *argv[] = { "sup", "--default-resources", "cpus=0.5,memory=256M",
			       "--max-resources", "cpus=1,memory=1G,pids=2048,disk=4G",
			       "--default-resources", "pids=64,disk=1G", NULL };
	assert_int_equal(parse(&c, &e, 7, argv), 0);
	assert_int_equal(c.res_default.cpu_milli, 500);
	assert_int_equal(c.res_default.memory, 256u << 20);
	assert_int_equal(c.res_default.pids, 64);
	assert_int_equal(c.res_default.disk, 1u << 30);
	assert_int_equal(c.res_max.pids, 2048);
	assert_int_equal(c.res_max.disk, 4ull << 30);
	sup_config_release(&c);
	/* a default over the ceiling names the field */
	const char *argv2[] = { "sup", "--max-resources", "memory=512M", NULL };
	assert_int_equal(parse(&c, &e, 3, argv2), -EINVAL);
	assert_string_equal(e.msg, "--default-resources memory: 1G is over this supervisor's ceiling of 512M");
	sup_config_release(&c);
	const char *argv3[] = { "sup", "--default-resources", "cpus=1,swap=0", NULL };
	assert_int_equal(parse(&c, &e, 3, argv3), -EINVAL);
	assert_non_null(strstr(e.msg, "'swap=0'"));
	sup_config_release(&c);
}

static void test_secs(void **state)
{
	(void)state;
	sbx_err e;
	unsigned ms;
	assert_int_equal(sup_config_parse_secs("2", 0, 10000, &ms, &e), 0);
	assert_int_equal(ms, 2000);
	assert_int_equal(sup_config_parse_secs("0.0015", 0, 10000, &ms, &e), 0);
	assert_int_equal(ms, 2);
	assert_int_equal(sup_config_parse_secs("10.001", 0, 10000, &ms, &e), -EINVAL);
	assert_int_equal(sup_config_parse_secs("0.001", 10, 10000, &ms, &e), -EINVAL);
	assert_int_equal(sup_config_parse_secs("inf", 0, 10000, &ms, &e), -EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_all_flags),
		cmocka_unit_test(test_mcp_flags),
		cmocka_unit_test(test_relay_flags),
		cmocka_unit_test(test_tls_flags),
		cmocka_unit_test(test_snapshot_store_flags),
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_kube_flags),
		cmocka_unit_test(test_bad_flags),
		cmocka_unit_test(test_pools),
		cmocka_unit_test(test_resources),
		cmocka_unit_test(test_secs),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
