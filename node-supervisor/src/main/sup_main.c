/* sandbox-supervisor: wires settings, token, runtime backend, catalog,
 * workers, pools, core and HTTP together, takes back what an earlier run
 * of the state folder left live (sup_restore), and runs the event loop
 * until a signal: SIGTERM (and SIGUSR2) stop serving and exit 0 leaving
 * every sandbox running for the next start, as a DaemonSet's rolling
 * update or a node upgrade needs; SIGINT (and SIGTERM with
 * --destroy-on-exit) destroys every sandbox it made, then exits 0. */
#include <errno.h>
#include <event2/event.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/proto_conn.h"
#include "sup_cgroup.h"
#include "sup_cluster.h"
#include "sup_config.h"
#include "sup_core.h"
#include "sup_disk.h"
#include "sup_files.h"
#include "sup_http.h"
#include "sup_images.h"
#include "sup_kubemode.h"
#include "sup_img_import.h"
#include "sup_img_store.h"
#include "sup_log.h"
#include "sup_net.h"
#include "sup_nodes.h"
#include "sup_openapi.h"
#include "sup_policy.h"
#include "sup_pool.h"
#include "sup_relay.h"
#include "sup_cluster_auth.h"
#include "sup_mcp.h"
#include "sup_procs.h"
#include "sup_restore.h"
#include "sup_s3.h"
#include "sup_ports.h"
#include "sup_runc.h"
#include "sup_osbx.h"
#include "sup_sandboxes.h"
#include "sup_snap_store.h"
#include "sup_snapshots.h"
#include "sup_scrape.h"
#include "sup_tenants.h"
#include "sup_token.h"
#include "sup_urlsign.h"
#include "sup_volroutes.h"
#include "sup_volumes.h"
#include "sup_workers.h"

#define SHUTDOWN_GRACE_S 120
/* entries of one layer: a tar bomb of empty files stops here */
#define IMAGE_MAX_ENTRIES 1000000

/* The relay's directory in a cluster: the nodes' Leases (sup_kube). */
static const sup_directory_ops kube_directory = { sup_kube_nodes_find, sup_kube_nodes_pick,
						   sup_kube_nodes_each };

/* --import-image [NAME=]PATH and --remove-image NAME at start, then the GC
 * of layers no image uses (the routes import and delete at run time). */
static int images_at_start(sup_img_store *store, const sup_config *cfg, sbx_err *err)
{
	for (size_t i = 0; i < cfg->nimports; i++) {
		const char *arg = cfg->imports[i], *eq = strchr(arg, '=');
		char name[SUP_IMG_REF_MAX + 1] = "";
		const char *path = arg;
		if (eq && !memchr(arg, '/', (size_t)(eq - arg))) {
			snprintf(name, sizeof(name), "%.*s", (int)(eq - arg), arg);
			path = eq + 1;
		}
		sup_img_imported out;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		if (sup_img_import_path(store, path, name[0] ? name : NULL, &out, err) < 0)
			return sbx_err_wrap(err, "--import-image");
		clock_gettime(CLOCK_MONOTONIC, &t1);
		for (size_t k = 0; k < out.n; k++)
			sup_info("image %s imported from %s (%u layer(s) unpacked, %u shared) in %ld ms",
				 out.digests[k], path, out.layers_new, out.layers_shared,
				 (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
	}
	for (size_t i = 0; i < cfg->nremoves; i++) {
		if (sup_img_store_delete(store, cfg->removes[i], err) < 0)
			return sbx_err_wrap(err, "--remove-image");
		sup_info("image %s removed", cfg->removes[i]);
	}
	uint64_t freed;
	unsigned layers;
	if (sup_img_store_gc(store, &freed, &layers, err) < 0)
		return sbx_err_wrap(err, "image GC");
	if (layers)
		sup_info("image GC: %u layer(s) no image uses removed (%llu bytes)", layers,
			 (unsigned long long)freed);
	sup_info("image store: %zu image(s), %llu bytes of layers", sup_img_store_count(store),
		 (unsigned long long)sup_img_store_usage(store));
	return 0;
}

typedef struct sup_main {
	struct event_base *base;
	sup_http *http;
	sup_http *metrics;         /* --metrics-listen: /metrics without a token */
	sup_ctab *requests;        /* answered requests by route and status */
	sup_core *core;
	sup_snaps *snaps;          /* its fork-layer sweeps stop with the HTTP edge */
	unsigned drain_s;
	sup_net *net;
	bool stopping;
	bool handover;             /* leave the sandboxes to the next start */
	bool destroy_on_exit;      /* --destroy-on-exit: SIGTERM destroys too */
	const char *tenants_file;
	sup_tenants_node node;     /* what tenants leave to the supervisor */
	sup_tenants *tenants;      /* the set in force; swapped on SIGHUP */
	struct event *sig_hup;
	bool drained;
	struct event *sig_term, *sig_int, *sig_usr2, *grace;
} sup_main;

static int mkdir_p(const char *path, mode_t mode, sbx_err *err)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
		return sbx_err_set(err, -ENAMETOOLONG, "%s", path);
	for (char *p = buf + 1;; p++) {
		if (*p == '/' || *p == '\0') {
			char c = *p;
			*p = '\0';
			if (mkdir(buf, mode) < 0 && errno != EEXIST)
				return sbx_err_sys(err, -errno, "mkdir %s", buf);
			*p = c;
			if (c == '\0')
				break;
		}
	}
	return 0;
}

/* Default agent: beside this binary (installed), or in the build tree. */
static int find_agent(char *out, size_t size, sbx_err *err)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return sbx_err_sys(err, -errno, "readlink /proc/self/exe");
	exe[n] = '\0';
	const char *dir = dirname(exe);
	const char *cands[] = { "/sandbox-agent", "/../guest-agent/sandbox-agent" };
	for (size_t i = 0; i < sizeof(cands) / sizeof(cands[0]); i++) {
		char p[PATH_MAX + 64];
		snprintf(p, sizeof(p), "%s%s", dir, cands[i]);
		char real[PATH_MAX];
		if (realpath(p, real) && access(real, X_OK) == 0) {
			snprintf(out, size, "%s", real);
			return 0;
		}
	}
	return sbx_err_set(err, -ENOENT,
			   "no sandbox-agent beside %s or in ../guest-agent: pass --agent PATH", dir);
}

/* gVisor's runtime: offered when runsc answers; required (its failure is
 * the supervisor's) when --runsc was given or a --pool asks for it. */
/* The snapshot store answers and these credentials may use its bucket: a
 * wrong bucket, endpoint or key fails the start, not the first snapshot.
 * Blocking (a listing of one key, one retry), before the loop runs. */
static int check_snapshot_store(const sup_config *cfg, sbx_err *err)
{
	if (!cfg->snapshot_store)
		return 0;
	sup_s3_opts o = { .endpoint = cfg->s3_endpoint, .connect_timeout_ms = 3000, .retries = 1 };
	sup_s3 *s = NULL;
	int rc = sup_s3_open(cfg->snapshot_store, &o, &s, err);
	if (rc == 0)
		rc = sup_s3_check(s, err);
	sup_s3_close(s);
	if (rc < 0)
		return sbx_err_wrap(err, "--snapshot-store %s", cfg->snapshot_store);
	sup_info("snapshot store %s: the bucket answers", cfg->snapshot_store);
	return 0;
}

static int offer_gvisor(const sup_config *cfg, char *root, size_t cap, sup_runtime *out,
			sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	if (snprintf(root, cap, "%s/runsc", cfg->state_dir) >= (int)cap)
		return sbx_err_set(err, -ENAMETOOLONG, "runsc root: state folder too long");
	sup_runtime rt = {
		.binary = cfg->runsc,
		.root = cfg->runsc_root ? cfg->runsc_root : root,
		.platform = cfg->runsc_platform,
		/* loopback only, as runc's empty network namespace; gVisor's
		 * netstack ("sandbox") wants a network namespace made for it,
		 * which is the networking issue's */
		.network = "none",
	};
	bool required = cfg->runsc_given || sup_config_pools_use(cfg, SUP_ISO_GVISOR);
	sbx_err why;
	if (sup_runc_runtime_check(&rt, &why) < 0) {
		if (required) {
			*err = why;
			return sbx_err_wrap(err, "gvisor isolation");
		}
		sup_info("gvisor isolation not offered: %s", why.msg);
		return 0;
	}
	*out = rt;
	return 0;
}

static void on_drained(void *ud)
{
	sup_main *m = ud;
	m->drained = true;
	sup_info(m->handover ? "every sandbox is left to the next start; exiting"
			     : "every sandbox is destroyed; exiting");
	event_base_loopbreak(m->base);
}

/* The requests in flight are over (their commands may have resolved names
 * until now): the resolver stops, then every sandbox goes. */
static void on_http_drained(void *ud)
{
	sup_main *m = ud;
	sup_net_stop(m->net);
	sup_snaps_stop(m->snaps);
	if (m->handover)
		sup_core_handover(m->core, on_drained, m);
	else
		sup_core_shutdown(m->core, on_drained, m);
}

static void on_grace_over(evutil_socket_t fd, short what, void *ud)
{
	sup_main *m = ud;
	(void)fd;
	(void)what;
	sup_error("shutdown took longer than %d s; exiting with sandboxes left (the next start adopts what the catalog holds and runc confirms, and removes the rest)",
		  SHUTDOWN_GRACE_S);
	event_base_loopbreak(m->base);
}

static void on_signal(evutil_socket_t sig, short what, void *ud)
{
	sup_main *m = ud;
	(void)what;
	if (m->stopping) {
		sup_warn("signal %d: already shutting down, waiting for the sandboxes to go", (int)sig);
		return;
	}
	m->stopping = true;
	/* SIGTERM is what an orchestrator sends on every rolling update: the
	 * sandboxes outlive it unless the operator asked otherwise */
	m->handover = sig == SIGUSR2 || (sig == SIGTERM && !m->destroy_on_exit);
	sup_info("signal %d: shutting down: requests in flight get %u s, then every sandbox is %s",
		 (int)sig, m->drain_s, m->handover ? "left to the next start" : "destroyed");
	struct timeval tv = { SHUTDOWN_GRACE_S, 0 };
	evtimer_add(m->grace, &tv);
	if (m->metrics)
		sup_http_stop(m->metrics, 0, NULL, NULL);
	sup_http_stop(m->http, m->drain_s, on_http_drained, m);
}

/* The edge asks the core whether the caller may name a sandbox. */
static int check_owner(void *ud, const struct sup_tenant *who, const char *id, sbx_err *err)
{
	return sup_core_check_owner(ud, who, id, err);
}

/* Every connection can hold an fd: the soft limit goes up to the hard one,
 * and --max-connections down to what fits beside the sandboxes' fds. */
static void fit_fd_limit(sup_config *cfg)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	rlim_t room = rl.rlim_cur > 1024 ? rl.rlim_cur - 512 : rl.rlim_cur / 2;
	if (cfg->max_conns > room) {
		sup_warn("--max-connections %u is over what the fd limit %llu leaves; using %llu",
			 cfg->max_conns, (unsigned long long)rl.rlim_cur, (unsigned long long)room);
		cfg->max_conns = (unsigned)room;
	}
}

static void on_hup(evutil_socket_t sig, short what, void *ud)
{
	sup_main *m = ud;
	(void)sig;
	(void)what;
	if (m->tenants_file)
		sup_tenants_reload(m->tenants_file, &m->node, &m->tenants);
	else
		sup_info("SIGHUP: no --tenants file to reload");
}

/* sandbox-supervisor hash-token [TOKEN]: the form a tenants file keeps a
 * token in. Without an argument the token is read from stdin (so it stays
 * out of the shell's history and the process list). */
static int hash_token(int argc, char **argv)
{
	char line[1024];
	const char *t = argc > 2 ? argv[2] : NULL;
	if (argc > 3) {
		fprintf(stderr, "usage: sandbox-supervisor hash-token [TOKEN] (or the token on stdin)\n");
		return 2;
	}
	if (!t) {
		if (!fgets(line, sizeof(line), stdin)) {
			fprintf(stderr, "sandbox-supervisor hash-token: no token on stdin\n");
			return 2;
		}
		line[strcspn(line, "\r\n")] = '\0';
		t = line;
	}
	char out[SUP_TOKEN_HASH_TEXT_LEN + 1];
	sbx_err err;
	if (!t[0] || sup_token_hash_text(t, strlen(t), out, &err) < 0) {
		fprintf(stderr, "sandbox-supervisor hash-token: %s\n", t[0] ? err.msg : "empty token");
		return 2;
	}
	printf("%s\n", out);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "hash-token") == 0)
		return hash_token(argc, argv);
	sup_config cfg;
	sbx_err err;
	sbx_err_clear(&err);
	int rc = sup_config_defaults(&cfg, &err);
	if (rc == 0)
		rc = sup_config_parse(&cfg, argc, argv, &err);
	if (rc == 1)
		return 0;
	if (rc < 0) {
		fprintf(stderr, "sandbox-supervisor: %s (try --help)\n", err.msg);
		return 2;
	}
	sup_log_set_level((sup_log_level)cfg.log_level);
	/* A client that hangs up must cost us an EPIPE, not the process. */
	signal(SIGPIPE, SIG_IGN);
	sbx_proto_tune_allocator();

	int exit_code = 1;
	struct event_base *base = NULL;
	sup_workers *workers = NULL;
	sup_workers *image_worker = NULL; /* imports, pulls, GC: never the runtime's threads */
	sup_pools *pools = NULL;
	sup_img_store *store = NULL;
	sup_main m = { 0 };
	sup_mcp_ctx mcp = { 0 }; /* its sessions end at cleanup */
	sup_osbx_ctx osbx = { 0 }; /* what it kept is freed at cleanup */
	sup_policy *policy = NULL;
	sup_catalog *catalog = NULL;
	sup_volumes *volumes = NULL;
	sup_restore *restore = NULL;
	sup_snap_store snapstore = {0};
	sup_snaps *snaps = NULL;
	sup_relay relay = { 0 };
	sup_dir_static *directory = NULL;
	sup_cluster *cluster = NULL; /* --kubeconfig, --kube-in-cluster */
	sup_kube *kube = NULL;       /* its connection, once started (GET /v1/nodes) */
	char *token = NULL;
	char node_tag[SUP_NODEID_TAG_MAX + 1]; /* --node-name's, in this node's ids */
	char agent[PATH_MAX];
	char token_path[PATH_MAX];
	char runsc_root[PATH_MAX];
	sup_pool_spec specs[SUP_MAX_POOLS];
	int nspecs;
	sup_pool_backend pods = { 0 }; /* --backend kubernetes: the pools' seam */

	sup_nodeid_tag(cfg.node_name, node_tag);
	if (cfg.policy_file ? sup_policy_load_file(cfg.policy_file, &policy, &err) < 0
			    : sup_policy_new_default(&policy, &err) < 0) {
		sbx_err_wrap(&err, "file access policy");
		goto fail;
	}
	if (mkdir_p(cfg.state_dir, 0711, &err) < 0)
		goto fail;
	if (cfg.agent_path)
		snprintf(agent, sizeof(agent), "%s", cfg.agent_path);
	else if (find_agent(agent, sizeof(agent), &err) < 0)
		goto fail;
	if (access(agent, X_OK) < 0) {
		sbx_err_sys(&err, -errno, "agent %s", agent);
		goto fail;
	}
	snprintf(token_path, sizeof(token_path), "%s/token", cfg.state_dir);
	m.node = (sup_tenants_node){ .policy = policy,
				     .allow_root = cfg.allow_root,
				     .max_timeout_s = cfg.max_timeout_s,
				     .res_default = cfg.res_default,
				     .res_max = cfg.res_max,
				     .isolations = sup_isolation_names,
				     .nisolations = SUP_ISO_N };
	m.tenants_file = cfg.tenants_file;
	if (cfg.tenants_file) {
		if (sup_tenants_load_file(cfg.tenants_file, &m.node, &m.tenants, &err) < 0)
			goto fail;
		sup_info("tenants: %zu from %s", sup_tenants_count(m.tenants), cfg.tenants_file);
	} else if (cfg.token) {
		token = strdup(cfg.token);
		if (!token) {
			sbx_err_set(&err, -ENOMEM, "token");
			goto fail;
		}
	} else {
		bool created;
		if (sup_token_load_or_create(token_path, &token, &created, &err) < 0)
			goto fail;
		sup_info("API token %s %s", created ? "created in" : "read from", token_path);
	}
	if (token && sup_tenants_single(token, &m.node, &m.tenants, &err) < 0)
		goto fail;
	if (check_snapshot_store(&cfg, &err) < 0)
		goto fail;
	/* a kubeconfig that cannot be read fails the start, before any sandbox */
	if (sup_cluster_new(&cfg, &cluster, &err) < 0) {
		sbx_err_wrap(&err, "kubernetes");
		goto fail;
	}

	/* Every sandbox is made with the default limits; acquire gives it its
	 * request's (sup_pools_acquire). */
	sup_cgroup_host cgroups;
	char disk_how[256];
	if (sup_cgroup_detect("/sys/fs/cgroup", &cgroups, &err) < 0 ||
	    sup_disk_probe(cfg.state_dir, disk_how, sizeof(disk_how), &err) < 0) {
		sbx_err_wrap(&err, "sandbox limits");
		goto fail;
	}
	sup_info("limits: cgroup v%d%s; disk: %s", (int)cgroups.mode,
		 cgroups.swap ? ", swap held to the memory figure" : ", swap not accounted (not held)",
		 disk_how);
	size_t npods = 0;
	if (cfg.backend_kube &&
	    sup_cluster_pods_start(cluster, &cfg, &cgroups, &pods, specs, &npods, &err) < 0)
		goto fail;
	sup_net_cfg ncfg = {
		.uplink = cfg.uplink,
		.dns = cfg.uplink_dns,
		.deny_cidrs = cfg.deny_cidrs,
		.max_slots = cfg.max_sandboxes,
		.min_ttl = 30,
		.max_ttl = 3600,
	};
	if (cfg.uplink && sup_net_check_cfg(&ncfg, &err) < 0)
		goto fail;
	sup_runc_cfg rcfg = {
		.runtimes = { [SUP_ISO_RUNC] = { .binary = cfg.runtime } },
		.state_dir = cfg.state_dir,
		.agent_path = agent,
		.ready_timeout_ms = cfg.ready_timeout_ms,
		.cgroup = &cgroups,
		.res = &cfg.res_default,
		.disk_ceiling = cfg.res_max.disk,
		.protect_agent = sup_runc_can_protect_agent(),
		.resolv_conf = cfg.uplink ? SUP_NET_RESOLV_CONF : NULL,
	};
	if (offer_gvisor(&cfg, runsc_root, sizeof(runsc_root), &rcfg.runtimes[SUP_ISO_GVISOR],
			 &err) < 0)
		goto fail;
	if (!rcfg.protect_agent)
		sup_warn("no CAP_SYS_RESOURCE: agents keep an OOM score adjustment of 0 (not -1000); "
			 "their commands get +1000, so the OOM killer takes a command first");
	if (sup_runc_init(&rcfg, &err) < 0) {
		sbx_err_wrap(&err, "runtime backend");
		goto fail;
	}
	if (sup_restore_prepare(&rcfg, cfg.backend_kube ? &pods : NULL, &catalog, &restore, &err) < 0)
		goto fail;
	if (cfg.backend_kube) {
		/* this node's pods an earlier run left and the catalog does not
		 * take back */
		const char **keep;
		size_t nkeep;
		if (sup_restore_names(restore, &keep, &nkeep) < 0) {
			sbx_err_set(&err, -ENOMEM, "out of memory");
			goto fail;
		}
		sup_cluster_pods_sweep(cluster, keep, nkeep);
		free(keep);
	}
	char state_real[PATH_MAX];
	if (!realpath(cfg.state_dir, state_real)) {
		sbx_err_sys(&err, -errno, "state folder %s", cfg.state_dir);
		goto fail;
	}
	sup_img_store_cfg scfg = {
		.state_dir = state_real,
		.limits = { .max_layer_bytes = cfg.image_max_layer, .max_entries = IMAGE_MAX_ENTRIES,
			    .allow_setid = cfg.image_allow_setid },
		.max_import_bytes = cfg.image_max_import,
	};
	if (sup_img_store_open(&scfg, &store, &err) < 0 || images_at_start(store, &cfg, &err) < 0)
		goto fail;
	rcfg.store = store;

	base = event_base_new();
	if (!base) {
		sbx_err_set(&err, -ENOMEM, "event base");
		goto fail;
	}
	m.base = base;
	char tag[9];
	if (cfg.uplink) {
		if (sup_runc_state_tag(&rcfg, tag, &err) < 0)
			goto fail;
		ncfg.tag = tag;
		m.net = sup_net_new(base, &ncfg, &err);
		if (!m.net)
			goto fail;
	}
	if (cfg.backend_kube) {
		/* a make holds its worker while its pod starts (seconds): one
		 * each for a whole pool's refill, two left for destroys and
		 * checks */
		unsigned want = 2;
		for (size_t i = 0; i < npods; i++)
			want += specs[i].size;
		want = want > 64 ? 64 : want;
		if (cfg.workers < want) {
			sup_info("workers: %u (a pod's make waits for its agent on one)", want);
			cfg.workers = want;
		}
	}
	workers = sup_workers_new(base, cfg.workers, &err);
	if (!workers)
		goto fail;
	/* before the core takes its sandboxes back: their volumes first */
	if (sup_volumes_open(state_real, catalog, workers, &volumes, &err) < 0)
		goto fail;
	sup_core_cfg ccfg = {
		.max_output = cfg.max_output,
		.max_output_total = cfg.max_output_total,
		.max_execs = cfg.max_execs,
		.net = m.net,
		.catalog = catalog,
		.volumes = volumes,
		.on_life = sup_cluster_on_life,
		.life_ud = cluster,
		.backend = cfg.backend_kube ? pods.name : NULL,
	};
	m.core = sup_core_new(base, NULL, &ccfg, &err);
	if (!m.core)
		goto fail;
	bool offered[SUP_ISO_N];
	for (int i = 0; i < SUP_ISO_N; i++)
		offered[i] = rcfg.runtimes[i].binary != NULL;
	/* the pods' pools are their templates' (sup_cluster_pods_start) */
	nspecs = cfg.backend_kube ? (int)npods : sup_config_pool_specs(&cfg, offered, specs, &err);
	if (nspecs < 0)
		goto fail;
	sup_pools_cfg pcfg = {
		.runc = &rcfg,
		.store = store,
		.specs = specs,
		.nspecs = (size_t)nspecs,
		.max_sandboxes = cfg.max_sandboxes,
		.acquire_timeout_ms = cfg.acquire_timeout_ms,
		.handshake_timeout_ms = cfg.ready_timeout_ms,
		.agent = cfg.agent,
		.net = m.net,
		.catalog = catalog,
		.node = node_tag,
		.reuse = cfg.pool_reuse,
		.reset_paths = cfg.reuse_paths,
		.nreset_paths = cfg.nreuse_paths,
	};
	if (cfg.backend_kube) {
		/* a pod is reset, never remade for nothing; its image is its
		 * template's, not the store's */
		pcfg.backend = &pods;
		pcfg.reuse = true;
		pcfg.store = NULL;
	}
	sup_pools_hooks hooks = sup_core_pool_hooks(m.core);
	pools = sup_pools_new(base, workers, &pcfg, &hooks, &err);
	if (!pools)
		goto fail;
	sup_core_set_pools(m.core, pools);
	sup_restore_adopt(restore, &rcfg, m.core);
	restore = NULL;
	sup_volumes_restored(volumes);
	if (sup_snap_store_open(state_real, cfg.snapshot_store, cfg.s3_endpoint, &snapstore, &err) < 0)
		goto fail;
	sup_snaps_cfg sncfg = { .core = m.core, .runc = &rcfg, .workers = workers,
				.catalog = catalog, .store = &snapstore,
				.orphan_age_s = cfg.snapshot_orphan_age_s,
				.orphan_every_s = cfg.snapshot_sweep_every_s };
	snaps = sup_snaps_new(base, &sncfg, &err);
	if (!snaps)
		goto fail;
	sup_core_set_snaps(m.core, snaps);
	m.snaps = snaps;
	/* fork layers an earlier run left that no adopted sandbox stacks */
	sup_snaps_sweep(snaps);
	sup_snapshots_ctx snapshots = { .snaps = snaps, .core = m.core };
	sup_sandboxes_ctx sandboxes = {
		.core = m.core,
		.limits = { .default_timeout_s = cfg.default_timeout_s,
			    .max_timeout_s = cfg.max_timeout_s,
			    .res_default = cfg.res_default,
			    .res_max = cfg.res_max },
	};
	/* The relay: the cluster key, the directory of the other nodes (the
	 * static one of --peer; the lead wires the Leases' one for Kubernetes). */
	{
		char *key = NULL;
		sup_directory dir = { 0 };
		if (cfg.cluster_key_file &&
		    sup_relay_secret_load("--cluster-key-file", cfg.cluster_key_file, &key, &err) < 0)
			goto fail;
		if (cfg.npeers) {
			directory = sup_dir_static_new(base, cfg.node_name, cfg.peers, cfg.npeers, key,
						       &err);
			if (!directory) {
				free(key);
				goto fail;
			}
			dir = (sup_directory){ &sup_dir_static_ops, directory };
		}
		if (sup_relay_init(&relay, base, m.core, cfg.node_name, key, dir, &err) < 0)
			goto fail;
		/* in a cluster: peers' service-account tokens reviewed, ours sent */
		if (cluster && sup_cluster_auth_wire(&cfg, cluster, &relay, base, &err) < 0)
			goto fail;
	}
	sandboxes.elsewhere = sup_relay_create_elsewhere;
	sandboxes.elsewhere_free = sup_relay_handle_free;
	sandboxes.elsewhere_ud = &relay;
	sandboxes.list_elsewhere = sup_relay_list_elsewhere;
	sandboxes.list_free = sup_relay_list_free;
	const sup_http_mount relay_mount = { &sup_relay_family, &relay };
	osbx.core = m.core;
	osbx.snaps = snaps;
	osbx.limits = sandboxes.limits;
	if (sup_osbx_ctx_open(&osbx, catalog, &err) < 0)
		goto fail;
	sup_files_ctx files = { .core = m.core, .max_upload = cfg.max_upload };
	char pull_dir[PATH_MAX];
	if (cfg.image_pull_dir && !realpath(cfg.image_pull_dir, pull_dir)) {
		sbx_err_sys(&err, -errno, "--image-pull-dir %s", cfg.image_pull_dir);
		goto fail;
	}
	image_worker = sup_workers_new(base, 1, &err);
	if (!image_worker)
		goto fail;
	sup_images_ctx images = { .core = m.core,
				  .store = store,
				  .worker = image_worker,
				  .max_import = cfg.image_max_import,
				  .skopeo = cfg.skopeo,
				  .pull_dir = cfg.image_pull_dir ? pull_dir : NULL,
				  .pull_timeout_ms = cfg.image_pull_timeout_ms };
	sup_procs_ctx procs = { .core = m.core };
	sup_volroutes_ctx volroutes = { .core = m.core };
	sup_nodes_ctx nodes = { .kube = &kube };
	mcp = (sup_mcp_ctx){ .core = m.core, .idle_ms = cfg.mcp_idle_ms, .origins = cfg.mcp_origins,
			     .limits = sandboxes.limits, .snaps = snaps, .max_upload = cfg.max_upload };
	if (sup_mcp_api_check(&err) < 0)
		goto fail;
	/* one signer: the port proxy honours what OpenSandbox's endpoints mint */
	sup_urlsign urlsign;
	if (sup_urlsign_init(&urlsign, &err) < 0)
		goto fail;
	osbx.sign = &urlsign;
	sup_ports_ctx ports;
	sup_ports_init(&ports, m.core, cfg.ports_domain, &urlsign);
	ports.answer_ms = cfg.ports_answer_ms;
	m.requests = sup_scrape_requests_new();
	if (!m.requests) {
		sbx_err_set(&err, -ENOMEM, "metrics");
		goto fail;
	}
	sup_scrape_ctx scrape = { .core = m.core, .tenants = &m.tenants, .requests = m.requests,
				  .store = store, .snaps = snaps };
	sup_scrape_ctx scrape_open = scrape;
	scrape_open.open = true;
	/* the first row only with --backend kubernetes: its refusals come
	 * before the routes they refuse */
	const sup_http_mount mounts[] = {
		{ &sup_kubemode_family, NULL },
		{ &sup_sandboxes_family, &sandboxes },
		{ &sup_files_family, &files },
		{ &sup_procs_family, &procs },
		{ &sup_mcp_family, &mcp },
		{ &sup_mcp_api_family, &mcp },
		{ &sup_ports_family, &ports },
		{ &sup_scrape_family, &scrape },
		{ &sup_images_family, &images },
		{ &sup_volumes_family, &volroutes },
		{ &sup_snapshots_family, &snapshots },
		{ &sup_nodes_family, &nodes },
		{ &sup_openapi_family, NULL },
		{ &sup_osbx_family, &osbx },
		{ &sup_relay_door_family, &relay },
	};
	const sup_http_mount metrics_mounts[] = { { &sup_scrape_family, &scrape_open } };
	fit_fd_limit(&cfg);
	m.drain_s = cfg.drain_timeout_s;
	m.destroy_on_exit = cfg.destroy_on_exit;
	sup_http_cfg hcfg = {
		.host = cfg.listen_host,
		.port = cfg.listen_port,
		.auth = sup_tenants_hook_auth,
		.release = sup_tenant_release,
		.auth_ud = &m.tenants,
		.check_id = check_owner,
		.check_ud = m.core,
		.gate = sup_ports_gate,
		.gate_ud = &ports,
		.relay = sup_relay_admit,
		.relay_ud = &relay,
		.relay_mount = &relay_mount,
		.on_answered = sup_scrape_count,
		.answered_ud = m.requests,
		.flat_errors_under = "/opensandbox/",
		.max_body = cfg.max_body,
		.credit_window = SUP_AGENT_RECV_WINDOW,
		.max_conns = cfg.max_conns,
		.head_timeout_s = cfg.head_timeout_s,
		.body_timeout_s = cfg.body_timeout_s,
		.idle_timeout_s = cfg.idle_timeout_s,
		.mounts = cfg.backend_kube ? mounts : mounts + 1,
		.nmounts = sizeof(mounts) / sizeof(mounts[0]) - (cfg.backend_kube ? 0 : 1),
	};
	if (cfg.metrics_listen) {
		sup_http_cfg mcfg = hcfg;
		mcfg.host = cfg.metrics_host;
		mcfg.port = cfg.metrics_port;
		mcfg.auth = NULL;
		mcfg.check_id = NULL;
		mcfg.gate = NULL;
		mcfg.relay = NULL;
		mcfg.max_conns = 64;
		mcfg.mounts = metrics_mounts;
		mcfg.nmounts = 1;
		m.metrics = sup_http_new(base, &mcfg, &err);
		if (!m.metrics) {
			sbx_err_wrap(&err, "--metrics-listen");
			goto fail;
		}
	}
	m.http = sup_http_new(base, &hcfg, &err);
	if (!m.http)
		goto fail;
	m.sig_term = evsignal_new(base, SIGTERM, on_signal, &m);
	m.sig_int = evsignal_new(base, SIGINT, on_signal, &m);
	m.sig_usr2 = evsignal_new(base, SIGUSR2, on_signal, &m);
	m.sig_hup = evsignal_new(base, SIGHUP, on_hup, &m);
	m.grace = evtimer_new(base, on_grace_over, &m);
	if (!m.sig_term || !m.sig_int || !m.sig_usr2 || !m.sig_hup || !m.grace ||
	    evsignal_add(m.sig_term, NULL) < 0 || evsignal_add(m.sig_int, NULL) < 0 ||
	    evsignal_add(m.sig_usr2, NULL) < 0 ||
	    evsignal_add(m.sig_hup, NULL) < 0) {
		sbx_err_set(&err, -ENOMEM, "signal events");
		goto fail;
	}
	sup_pools_start(pools);
	/* the API listens: its URL goes into this node's Lease */
	if (cluster) {
		if (sup_cluster_start(cluster, base, m.core, sup_http_port(m.http), &err) < 0)
			goto fail;
		kube = sup_cluster_kube(cluster);
		/* the relay's directory: the nodes' Leases (a --peer list given
		 * stands); without a node credential nothing is relayed */
		if (!directory && (relay.key || relay.node_token))
			relay.dir = (sup_directory){ &kube_directory, kube };
	}

	const char *h = cfg.listen_host;
	bool v6 = strchr(h, ':') != NULL;
	printf("sandbox-supervisor: listening on http://%s%s%s:%u\n", v6 ? "[" : "", h, v6 ? "]" : "",
	       (unsigned)sup_http_port(m.http));
	if (m.metrics) {
		const char *mh = cfg.metrics_host;
		bool mv6 = strchr(mh, ':') != NULL;
		printf("sandbox-supervisor: metrics on http://%s%s%s:%u/metrics\n", mv6 ? "[" : "", mh,
		       mv6 ? "]" : "", (unsigned)sup_http_port(m.metrics));
	}
	if (cfg.tenants_file)
		printf("sandbox-supervisor: %zu tenants from %s\n", sup_tenants_count(m.tenants),
		       cfg.tenants_file);
	else if (cfg.token)
		printf("sandbox-supervisor: token given by --token\n");
	else
		printf("sandbox-supervisor: token in %s\n", token_path);
	if (cfg.print_example && token) {
		char url[300];
		snprintf(url, sizeof(url), "http://%s%s%s:%u", v6 ? "[" : "", h, v6 ? "]" : "",
			 (unsigned)sup_http_port(m.http));
		printf("\nAPI token: %s\n\nTry it (in another shell):\n"
		       "  TOKEN=%s\n"
		       "  ID=$(curl -s -H \"Authorization: Bearer $TOKEN\" -d '{\"image\":\"host\"}' %s/v1/sandboxes"
		       " | sed 's/.*\"id\":\"\\([^\"]*\\)\".*/\\1/')\n"
		       "  curl -s -H \"Authorization: Bearer $TOKEN\" -d '{\"argv\":[\"echo\",\"hi\"]}' %s/v1/sandboxes/$ID/exec\n"
		       "  curl -s -H \"Authorization: Bearer $TOKEN\" -X DELETE %s/v1/sandboxes/$ID\n\n",
		       token, token, url, url, url);
	}
	fflush(stdout);
	for (int i = 0; i < nspecs; i++)
		sup_info("pool %s (%s): %u ready", specs[i].image,
			 sup_isolation_names[specs[i].isolation], specs[i].size);
	sup_info("node %s (ids sb-%s-...); %zu peer(s)%s", cfg.node_name, node_tag, cfg.npeers,
		 relay.key ? ", cluster key loaded" : "");
	if (cfg.backend_kube)
		sup_info("backend: kubernetes (pods in %s, agents' folder %s)", cfg.sandbox_namespace, cfg.agent_dir);
	sup_info("runtimes: runc %s, gvisor %s; agent %s, state %s", cfg.runtime,
		 offered[SUP_ISO_GVISOR] ? cfg.runsc : "not offered", agent, cfg.state_dir);

	event_base_dispatch(base);
	exit_code = m.drained ? 0 : 1;
	if (!m.stopping) {
		sup_error("event loop ended unexpectedly");
		exit_code = 1;
	}
	goto cleanup;
fail:
	sup_error("%s", err.msg);
	fprintf(stderr, "sandbox-supervisor: %s\n", err.msg);
cleanup:
	if (m.http)
		sup_http_free(m.http);
	if (m.metrics)
		sup_http_free(m.metrics);
	sup_mcp_ctx_release(&mcp);
	sup_osbx_ctx_release(&osbx);
	/* after the edge: no relayed request is left */
	sup_dir_static_free(directory);
	sup_relay_release(&relay);
	if (m.sig_term)
		event_free(m.sig_term);
	if (m.sig_int)
		event_free(m.sig_int);
	if (m.sig_usr2)
		event_free(m.sig_usr2);
	if (m.sig_hup)
		event_free(m.sig_hup);
	if (m.grace)
		event_free(m.grace);
	/* Workers first: a job still running (grace ran out) must finish
	 * before the pools it points into go away. */
	sup_workers_free(workers);
	sup_snaps_free(snaps);
	sup_snap_store_close(&snapstore);
	/* an import or pull the edge's end cancelled: its job ends and frees
	 * itself (a pull's skopeo is killed within 0.1 s) */
	sup_workers_finish(image_worker);
	sup_workers_free(image_worker);
	sup_pools_free(pools);
	sup_restore_free(restore);
	/* after the pools: a volume no sandbox holds any more is unmounted */
	sup_volumes_free(volumes);
	sup_catalog_close(catalog);
	sup_img_store_free(store);
	sup_core_free(m.core);
	/* after the core, whose hook tells it; its threads end within a second */
	sup_cluster_free(cluster);
	/* after the pools: their sandboxes' slots are put back (or, when the
	 * grace ran out, their links go with the router) */
	sup_net_free(m.net);
	sup_tenants_unref(m.tenants);
	sup_ctab_free(m.requests);
	sup_policy_free(policy);
	if (base)
		event_base_free(base);
	sup_config_release(&cfg);
	free(token);
	return exit_code;
}
