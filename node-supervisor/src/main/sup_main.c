/* sandbox-supervisor: wires settings, token, runtime backend, catalog,
 * workers, pools, core and HTTP together, takes back what an earlier run
 * of the state folder left live (sup_restore), and runs the event loop
 * until a signal: SIGTERM (and SIGUSR2) stop serving and exit 0 leaving
 * every sandbox running for the next start, as a DaemonSet's rolling
 * update or a node upgrade needs; SIGINT (and SIGTERM with
 * --destroy-on-exit) destroys every sandbox it made, then exits 0.
 *
 * main() is its phases in order, each a function: the options, the state
 * folder and who may call, the runtimes, the stores, the core and its
 * pools, the route families and the edge (sup_main_edge.c), the signals,
 * the run, and the drain that frees everything in the reverse of its
 * making. */
#include <errno.h>
#include <locale.h>
#include <event2/event.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/proto_conn.h"
#include "sup_disk.h"
#include "sup_log.h"
#include "sup_dir_static.h"
#include "sup_main_int.h"
#include "sup_start.h"
#include "sup_token.h"

#define SHUTDOWN_GRACE_S 120
/* entries of one layer: a tar bomb of empty files stops here */
#define IMAGE_MAX_ENTRIES 1000000


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
	sup_error("shutdown took longer than %d s; exiting with sandboxes left (the next start adopts what the catalog holds and runc confirms, and removes the rest)",
		  SHUTDOWN_GRACE_S);
	event_base_loopbreak(m->base);
}

static void on_signal(evutil_socket_t sig, short what, void *ud)
{
	sup_main *m = ud;
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

static void on_hup(evutil_socket_t sig, short what, void *ud)
{
	sup_main *m = ud;
	if (m->tenants_file)
		sup_tenants_reload(m->tenants_file, &m->node, &m->tenants);
	else
		sup_info("SIGHUP: no --tenants file to reload");
	sbx_err e;
	if (m->tls && sup_tls_reload(m->tls, &e) < 0)
		sup_error("SIGHUP: TLS not reloaded, the certificate in force stays: %s", e.msg);
	else if (m->tls)
		sup_info("SIGHUP: TLS reloaded (new connections): %s", sup_tls_describe(m->tls));
}

/* Phase: the options (the table's defaults, the --config file, the command
 * line). 0 to run, 1 when something was printed instead (exit 0), <0. */
static int phase_config(sup_main *m, int argc, char **argv, sbx_err *err)
{
	if (sup_config_defaults(&m->cfg, err) < 0)
		return err->code;
	int rc = sup_config_parse(&m->cfg, argc, argv, err);
	if (rc != 0)
		return rc;
	sup_log_set_level((sup_log_level)m->cfg.log_level);
	/* A client that hangs up must cost us an EPIPE, not the process. */
	signal(SIGPIPE, SIG_IGN);
	sbx_proto_tune_allocator();
	return 0;
}

/* Phase: the state folder, the agent, who may call (the tenants or the
 * token), the node's TLS, the snapshot store and the cluster answer. */
static int phase_state(sup_main *m, sbx_err *err)
{
	const sup_config *cfg = &m->cfg;
	sup_nodeid_tag(cfg->node_name, m->node_tag);
	if (cfg->policy_file ? sup_policy_load_file(cfg->policy_file, &m->policy, err) < 0
			     : sup_policy_new_default(&m->policy, err) < 0)
		return sbx_err_wrap(err, "file access policy");
	if (sup_start_mkdir_p(cfg->state_dir, 0711, err) < 0)
		return err->code;
	if (cfg->agent_path)
		snprintf(m->agent, sizeof(m->agent), "%s", cfg->agent_path);
	else if (sup_start_find_agent(m->agent, sizeof(m->agent), err) < 0)
		return err->code;
	if (access(m->agent, X_OK) < 0)
		return sbx_err_sys(err, -errno, "agent %s", m->agent);
	snprintf(m->token_path, sizeof(m->token_path), "%s/token", cfg->state_dir);
	m->node = (sup_tenants_node){ .policy = m->policy,
				      .allow_root = cfg->allow_root,
				      .max_timeout_s = cfg->max_timeout_s,
				      .res_default = cfg->res_default,
				      .res_max = cfg->res_max,
				      .isolations = sup_isolation_names,
				      .nisolations = SUP_ISO_N };
	m->tenants_file = cfg->tenants_file;
	if (cfg->tenants_file) {
		if (sup_tenants_load_file(cfg->tenants_file, &m->node, &m->tenants, err) < 0)
			return err->code;
		sup_info("tenants: %zu from %s", sup_tenants_count(m->tenants), cfg->tenants_file);
	} else if (cfg->token) {
		m->token = strdup(cfg->token);
		if (!m->token)
			return sbx_err_set(err, -ENOMEM, "token");
	} else {
		bool created;
		if (sup_token_load_or_create(m->token_path, &m->token, &created, err) < 0)
			return err->code;
		sup_info("API token %s %s", created ? "created in" : "read from", m->token_path);
	}
	if (m->token && sup_tenants_single(m->token, &m->node, &m->tenants, err) < 0)
		return err->code;
	/* certificate files that do not load stop the start, with the reason */
	if (cfg->tls_cert) {
		m->tls = sup_tls_new(&(sup_tls_files){ cfg->tls_cert, cfg->tls_key, cfg->tls_ca }, err);
		if (!m->tls)
			return err->code;
		sup_info("tls: %s%s", sup_tls_describe(m->tls),
			 cfg->tls_ca ? "; peers verified by --tls-ca" : "");
	}
	if (sup_start_check_snapshot_store(cfg, err) < 0)
		return err->code;
	/* a kubeconfig that cannot be read fails the start, before any sandbox */
	if (sup_cluster_new(cfg, &m->cluster, err) < 0)
		return sbx_err_wrap(err, "kubernetes");
	return 0;
}

/* Phase: the host's limits, the pods' backend, egress, runc and gVisor,
 * and what an earlier run left (sup_restore_prepare). */
static int phase_runtimes(sup_main *m, sbx_err *err)
{
	sup_config *cfg = &m->cfg;
	/* Every sandbox is made with the default limits; acquire gives it its
	 * request's (sup_pools_acquire). */
	char disk_how[256];
	if (sup_cgroup_detect("/sys/fs/cgroup", &m->cgroups, err) < 0 ||
	    sup_disk_probe(cfg->state_dir, disk_how, sizeof(disk_how), err) < 0)
		return sbx_err_wrap(err, "sandbox limits");
	sup_info("limits: cgroup v%d%s; disk: %s", (int)m->cgroups.mode,
		 m->cgroups.swap ? ", swap held to the memory figure" : ", swap not accounted (not held)",
		 disk_how);
	if (cfg->backend_kube &&
	    sup_cluster_pods_start(m->cluster, cfg, &m->cgroups, &m->pods, m->specs, &m->npods,
				   err) < 0)
		return err->code;
	m->ncfg = (sup_net_cfg){
		.uplink = cfg->uplink,
		.dns = cfg->uplink_dns,
		.deny_cidrs = cfg->deny_cidrs,
		.max_slots = cfg->max_sandboxes,
		.min_ttl = 30,
		.max_ttl = 3600,
	};
	if (cfg->uplink && sup_net_check_cfg(&m->ncfg, err) < 0)
		return err->code;
	m->rcfg = (sup_runc_cfg){
		.runtimes = { [SUP_ISO_RUNC] = { .binary = cfg->runtime } },
		.state_dir = cfg->state_dir,
		.agent_path = m->agent,
		.ready_timeout_ms = cfg->ready_timeout_ms,
		.cgroup = &m->cgroups,
		.res = &cfg->res_default,
		.disk_ceiling = cfg->res_max.disk,
		.protect_agent = sup_runc_can_protect_agent(),
		.resolv_conf = cfg->uplink ? SUP_NET_RESOLV_CONF : NULL,
	};
	if (sup_start_offer_gvisor(cfg, m->runsc_root, sizeof(m->runsc_root),
				   &m->rcfg.runtimes[SUP_ISO_GVISOR], err) < 0)
		return err->code;
	if (!m->rcfg.protect_agent)
		sup_warn("no CAP_SYS_RESOURCE: agents keep an OOM score adjustment of 0 (not -1000); "
			 "their commands get +1000, so the OOM killer takes a command first");
	if (sup_runc_init(&m->rcfg, err) < 0)
		return sbx_err_wrap(err, "runtime backend");
	if (sup_restore_prepare(&m->rcfg, cfg->backend_kube ? &m->pods : NULL, &m->catalog,
				&m->restore, err) < 0)
		return err->code;
	if (cfg->backend_kube) {
		/* this node's pods an earlier run left and the catalog does not
		 * take back */
		const char **keep;
		size_t nkeep;
		if (sup_restore_names(m->restore, &keep, &nkeep) < 0)
			return sbx_err_set(err, -ENOMEM, "out of memory");
		sup_cluster_pods_sweep(m->cluster, keep, nkeep);
		free(keep);
	}
	return 0;
}

/* Phase: the image store (imports and removals at start). */
static int phase_stores(sup_main *m, sbx_err *err)
{
	const sup_config *cfg = &m->cfg;
	if (!realpath(cfg->state_dir, m->state_real))
		return sbx_err_sys(err, -errno, "state folder %s", cfg->state_dir);
	sup_img_store_cfg scfg = {
		.state_dir = m->state_real,
		.limits = { .max_layer_bytes = cfg->image_max_layer, .max_entries = IMAGE_MAX_ENTRIES,
			    .allow_setid = cfg->image_allow_setid },
		.max_import_bytes = cfg->image_max_import,
	};
	if (sup_img_store_open(&scfg, &m->store, err) < 0 ||
	    sup_start_images(m->store, cfg, err) < 0)
		return err->code;
	m->rcfg.store = m->store;
	return 0;
}

/* The secrets' store, its key outside the state folder: a copy of the
 * folder (a backup, a disk image) must not carry what opens its secrets. */
static int open_secrets(sup_main *m, sbx_err *err)
{
	const char *key = m->cfg.secrets_key;
	if (!key)
		return 0;
	char dir[PATH_MAX], real[PATH_MAX];
	const char *slash = strrchr(key, '/');
	snprintf(dir, sizeof(dir), "%.*s", slash == key ? 1 : (int)(slash - key), key);
	if (!realpath(dir, real))
		return sbx_err_sys(err, -errno, "--secrets-key %s: its folder", key);
	size_t n = strlen(m->state_real);
	if (strncmp(real, m->state_real, n) == 0 && (real[n] == '/' || real[n] == '\0'))
		return sbx_err_set(err, -EINVAL,
				   "--secrets-key %s: inside --state-dir %s (keep the key apart from "
				   "what it seals)", key, m->cfg.state_dir);
	return sup_secrets_open(key, m->catalog, &m->secrets, err);
}

/* Phase: the event loop, egress, the workers, the volumes and the core. */
static int phase_core(sup_main *m, sbx_err *err)
{
	sup_config *cfg = &m->cfg;
	m->base = event_base_new();
	if (!m->base)
		return sbx_err_set(err, -ENOMEM, "event base");
	if (cfg->uplink) {
		if (sup_runc_state_tag(&m->rcfg, m->net_tag, err) < 0)
			return err->code;
		m->ncfg.tag = m->net_tag;
		m->net = sup_net_new(m->base, &m->ncfg, err);
		if (!m->net)
			return err->code;
	}
	if (cfg->backend_kube) {
		/* a make holds its worker while its pod starts (seconds): one
		 * each for a whole pool's refill, two left for destroys and
		 * checks */
		unsigned want = 2;
		for (size_t i = 0; i < m->npods; i++)
			want += m->specs[i].size;
		want = want > 64 ? 64 : want;
		if (cfg->workers < want) {
			sup_info("workers: %u (a pod's make waits for its agent on one)", want);
			cfg->workers = want;
		}
	}
	m->workers = sup_workers_new(m->base, cfg->workers, err);
	if (!m->workers)
		return err->code;
	/* before the core takes its sandboxes back: their volumes first */
	if (sup_volumes_open(m->state_real, m->catalog, m->workers, &m->volumes, err) < 0 ||
	    open_secrets(m, err) < 0)
		return err->code;
	sup_core_cfg ccfg = {
		.max_output = cfg->max_output,
		.max_output_total = cfg->max_output_total,
		.max_execs = cfg->max_execs,
		.net = m->net,
		.catalog = m->catalog,
		.volumes = m->volumes,
		.secrets = m->secrets,
		.on_life = sup_cluster_on_life,
		.life_ud = m->cluster,
		.backend = cfg->backend_kube ? m->pods.name : NULL,
	};
	m->core = sup_core_new(m->base, NULL, &ccfg, err);
	return m->core ? 0 : err->code;
}

/* Phase: the pools, the sandboxes an earlier run left taken back, the
 * snapshot store and its sweeps. */
static int phase_pools(sup_main *m, sbx_err *err)
{
	const sup_config *cfg = &m->cfg;
	for (int i = 0; i < SUP_ISO_N; i++)
		m->offered[i] = m->rcfg.runtimes[i].binary != NULL;
	/* the pods' pools are their templates' (sup_cluster_pods_start) */
	m->nspecs = cfg->backend_kube ? (int)m->npods
				      : sup_config_pool_specs(cfg, m->offered, m->specs, err);
	if (m->nspecs < 0)
		return m->nspecs;
	sup_pools_cfg pcfg = {
		.runc = &m->rcfg,
		.store = m->store,
		.specs = m->specs,
		.nspecs = (size_t)m->nspecs,
		.max_sandboxes = cfg->max_sandboxes,
		.acquire_timeout_ms = cfg->acquire_timeout_ms,
		.handshake_timeout_ms = cfg->ready_timeout_ms,
		.agent = cfg->agent,
		.net = m->net,
		.catalog = m->catalog,
		.node = m->node_tag,
		.reuse = cfg->pool_reuse,
		.reset_paths = cfg->reuse_paths,
		.nreset_paths = cfg->nreuse_paths,
		.pool_max = cfg->pool_max,
		.pool_window_s = cfg->pool_window_s,
	};
	if (cfg->backend_kube) {
		/* a pod is reset, never remade for nothing; its image is its
		 * template's, not the store's */
		pcfg.backend = &m->pods;
		pcfg.reuse = true;
		pcfg.store = NULL;
	}
	sup_pools_hooks hooks = sup_core_pool_hooks(m->core);
	m->pools = sup_pools_new(m->base, m->workers, &pcfg, &hooks, err);
	if (!m->pools)
		return err->code;
	sup_core_set_pools(m->core, m->pools);
	sup_restore_adopt(m->restore, &m->rcfg, m->core);
	m->restore = NULL;
	sup_volumes_restored(m->volumes);
	if (sup_snap_store_open(m->state_real, cfg->snapshot_store, cfg->s3_endpoint, &m->snapstore,
				err) < 0)
		return err->code;
	sup_snaps_cfg sncfg = { .core = m->core, .runc = &m->rcfg, .workers = m->workers,
				.catalog = m->catalog, .store = &m->snapstore,
				.orphan_age_s = cfg->snapshot_orphan_age_s,
				.orphan_every_s = cfg->snapshot_sweep_every_s };
	m->snaps = sup_snaps_new(m->base, &sncfg, err);
	if (!m->snaps)
		return err->code;
	sup_core_set_snaps(m->core, m->snaps);
	/* fork layers an earlier run left that no adopted sandbox stacks */
	sup_snaps_sweep(m->snaps);
	return 0;
}

/* Phase: SIGTERM, SIGINT and SIGUSR2 stop; SIGHUP rereads the tenants and
 * the TLS files. */
static int phase_signals(sup_main *m, sbx_err *err)
{
	m->sig_term = evsignal_new(m->base, SIGTERM, on_signal, m);
	m->sig_int = evsignal_new(m->base, SIGINT, on_signal, m);
	m->sig_usr2 = evsignal_new(m->base, SIGUSR2, on_signal, m);
	m->sig_hup = evsignal_new(m->base, SIGHUP, on_hup, m);
	m->grace = evtimer_new(m->base, on_grace_over, m);
	if (!m->sig_term || !m->sig_int || !m->sig_usr2 || !m->sig_hup || !m->grace ||
	    evsignal_add(m->sig_term, NULL) < 0 || evsignal_add(m->sig_int, NULL) < 0 ||
	    evsignal_add(m->sig_usr2, NULL) < 0 || evsignal_add(m->sig_hup, NULL) < 0)
		return sbx_err_set(err, -ENOMEM, "signal events");
	return 0;
}

/* What a start prints (stdout, read by scripts and tests) and logs. */
static void announce(const sup_main *m)
{
	const sup_config *cfg = &m->cfg;
	const char *h = cfg->listen_host;
	bool v6 = strchr(h, ':') != NULL;
	const char *scheme = m->tls ? "https" : "http";
	printf("sandbox-supervisor: listening on %s://%s%s%s:%u\n", scheme, v6 ? "[" : "", h,
	       v6 ? "]" : "", (unsigned)sup_http_port(m->http));
	if (m->metrics) {
		const char *mh = cfg->metrics_host;
		bool mv6 = strchr(mh, ':') != NULL;
		printf("sandbox-supervisor: metrics on %s://%s%s%s:%u/metrics\n", scheme, mv6 ? "[" : "",
		       mh, mv6 ? "]" : "", (unsigned)sup_http_port(m->metrics));
	}
	if (cfg->tenants_file)
		printf("sandbox-supervisor: %zu tenants from %s\n", sup_tenants_count(m->tenants),
		       cfg->tenants_file);
	else if (cfg->token)
		printf("sandbox-supervisor: token given by --token\n");
	else
		printf("sandbox-supervisor: token in %s\n", m->token_path);
	if (cfg->print_example && m->token) {
		char url[300];
		snprintf(url, sizeof(url), "%s://%s%s%s:%u", scheme, v6 ? "[" : "", h, v6 ? "]" : "",
			 (unsigned)sup_http_port(m->http));
		printf("\nAPI token: %s\n\nTry it (in another shell):\n"
		       "  TOKEN=%s\n"
		       "  ID=$(curl -s -H \"Authorization: Bearer $TOKEN\" -d '{\"image\":\"host\"}' %s/v1/sandboxes"
		       " | sed 's/.*\"id\":\"\\([^\"]*\\)\".*/\\1/')\n"
		       "  curl -s -H \"Authorization: Bearer $TOKEN\" -d '{\"argv\":[\"echo\",\"hi\"]}' %s/v1/sandboxes/$ID/exec\n"
		       "  curl -s -H \"Authorization: Bearer $TOKEN\" -X DELETE %s/v1/sandboxes/$ID\n\n",
		       m->token, m->token, url, url, url);
	}
	fflush(stdout);
	for (int i = 0; i < m->nspecs; i++)
		sup_info("pool %s (%s): %u ready", m->specs[i].image,
			 sup_isolation_names[m->specs[i].isolation], m->specs[i].size);
	sup_info("node %s (ids sb-%s-...); %zu peer(s)%s", cfg->node_name, m->node_tag, cfg->npeers,
		 m->relay.key ? ", cluster key loaded" : "");
	if (cfg->config_file)
		sup_info("options from %s and the command line", cfg->config_file);
	if (cfg->backend_kube)
		sup_info("backend: kubernetes (pods in %s, agents' folder %s)", cfg->sandbox_namespace,
			 cfg->agent_dir);
	sup_info("runtimes: runc %s, gvisor %s; agent %s, state %s", cfg->runtime,
		 m->offered[SUP_ISO_GVISOR] ? cfg->runsc : "not offered", m->agent, cfg->state_dir);
}

/* Phase: the pools fill, the cluster hears of this node, the loop runs
 * until a signal's stop is over. Returns the exit status. */
static int phase_run(sup_main *m, sbx_err *err)
{
	sup_pools_start(m->pools);
	/* the API listens: its URL goes into this node's Lease */
	if (m->cluster) {
		if (sup_cluster_start(m->cluster, m->base, m->core, sup_http_port(m->http), err) < 0)
			return err->code;
		m->kube = sup_cluster_kube(m->cluster);
		/* the relay's directory: the nodes' Leases (a --peer list given
		 * stands); without a node credential nothing is relayed */
		if (!m->directory && (m->relay.key || m->relay.node_token))
			m->relay.dir = (sup_directory){ &sup_kube_directory_ops, m->kube }; /* the Leases */
	}
	announce(m);
	event_base_dispatch(m->base);
	if (!m->stopping) {
		sup_error("event loop ended unexpectedly");
		return 1;
	}
	return m->drained ? 0 : 1;
}

static void free_event(struct event *ev)
{
	if (ev)
		event_free(ev);
}

/* Phase: everything freed, in the reverse of its making. */
static void phase_drain(sup_main *m)
{
	if (m->http)
		sup_http_free(m->http);
	if (m->metrics)
		sup_http_free(m->metrics);
	sup_main_families_free(m);
	/* after the edge: no relayed request is left */
	sup_dir_static_free(m->directory);
	sup_relay_release(&m->relay);
	/* connections still open hold their own references to the contexts */
	sup_tls_free(m->tls);
	free_event(m->sig_term);
	free_event(m->sig_int);
	free_event(m->sig_usr2);
	free_event(m->sig_hup);
	free_event(m->grace);
	/* Workers first: a job still running (grace ran out) must finish
	 * before the pools it points into go away. */
	sup_workers_free(m->workers);
	sup_snaps_free(m->snaps);
	sup_snap_store_close(&m->snapstore);
	/* an import or pull the edge's end cancelled: its job ends and frees
	 * itself (a pull's skopeo is killed within 0.1 s) */
	sup_workers_finish(m->image_worker);
	sup_workers_free(m->image_worker);
	sup_pools_free(m->pools);
	sup_restore_free(m->restore);
	/* after the pools: a volume no sandbox holds any more is unmounted */
	sup_volumes_free(m->volumes);
	sup_secrets_free(m->secrets);
	sup_catalog_close(m->catalog);
	sup_img_store_free(m->store);
	sup_core_free(m->core);
	/* after the core, whose hook tells it; its threads end within a second */
	sup_cluster_free(m->cluster);
	/* after the pools: their sandboxes' slots are put back (or, when the
	 * grace ran out, their links go with the router) */
	sup_net_free(m->net);
	sup_tenants_unref(m->tenants);
	sup_ctab_free(m->requests);
	sup_policy_free(m->policy);
	if (m->base)
		event_base_free(m->base);
	sup_config_release(&m->cfg);
	free(m->token);
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "hash-token") == 0)
		return sup_start_hash_token(argc, argv);
	/* Names in image layers and snapshots are UTF-8 (a pax header's
	 * path): in the C locale libarchive cannot convert them and refuses
	 * the layer. glibc builds C.UTF-8 in, so the image FROM scratch has it. */
	setlocale(LC_CTYPE, "C.UTF-8");
	sup_main *m = calloc(1, sizeof(*m));
	if (!m) {
		fprintf(stderr, "sandbox-supervisor: out of memory\n");
		return 1;
	}
	sbx_err err;
	sbx_err_clear(&err);
	int rc = phase_config(m, argc, argv, &err);
	if (rc != 0) {
		if (rc < 0)
			fprintf(stderr, "sandbox-supervisor: %s (try --help)\n", err.msg);
		sup_config_release(&m->cfg);
		free(m);
		return rc < 0 ? 2 : 0;
	}
	int exit_code = 1;
	if (phase_state(m, &err) < 0 || phase_runtimes(m, &err) < 0 || phase_stores(m, &err) < 0 ||
	    phase_core(m, &err) < 0 || phase_pools(m, &err) < 0 || sup_main_families(m, &err) < 0 ||
	    sup_main_edge(m, &err) < 0 || phase_signals(m, &err) < 0 ||
	    (exit_code = phase_run(m, &err)) < 0) {
		exit_code = 1;
		sup_error("%s", err.msg);
		fprintf(stderr, "sandbox-supervisor: %s\n", err.msg);
	}
	phase_drain(m);
	free(m);
	return exit_code;
}
