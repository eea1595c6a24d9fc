/* The route families and the HTTP edge wired over what the earlier
 * phases made (sup_main_int.h): each family's context, the relay, the edge's
 * hooks and mounts. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto_conn.h"
#include "sup_cluster_auth.h"
#include "sup_contexts.h"
#include "sup_files.h"
#include "sup_images.h"
#include "sup_kubemode.h"
#include "sup_dir_static.h"
#include "sup_e2b.h"
#include "sup_main_int.h"
#include "sup_mcp.h"
#include "sup_nodes.h"
#include "sup_openapi.h"
#include "sup_osbx.h"
#include "sup_ports.h"
#include "sup_procs.h"
#include "sup_sandboxes.h"
#include "sup_scrape.h"
#include "sup_secret.h"
#include "sup_secroutes.h"
#include "sup_snapshots.h"
#include "sup_start.h"
#include "sup_urlsign.h"
#include "sup_volroutes.h"

/* The route families' contexts and the edge's mounts of them. */
typedef struct sup_families {
	sup_sandboxes_ctx sandboxes;
	sup_snapshots_ctx snapshots;
	sup_files_ctx files;
	sup_procs_ctx procs;
	sup_mcp_ctx mcp;   /* its sessions end at the drain */
	sup_osbx_ctx osbx; /* what it kept is freed at the drain */
	sup_e2b_ctx e2b;
	sup_images_ctx images;
	sup_volroutes_ctx volroutes;
	sup_secroutes_ctx secroutes;
	sup_contexts_ctx contexts; /* its engine's contexts end at the drain */
	sup_nodes_ctx nodes;
	sup_ports_ctx ports;
	sup_urlsign urlsign; /* one signer: the port proxy honours what OpenSandbox's endpoints mint */
	sup_scrape_ctx scrape, scrape_open;
	sup_http_mount relay_mount;
	sup_http_mount mounts[19];
	sup_http_mount metrics_mounts[1];
	char pull_dir[PATH_MAX];
} sup_families;

/* The edge asks the core whether the caller may name a sandbox. */
static int check_owner(void *ud, const struct sup_tenant *who, const char *id, sbx_err *err)
{
	return sup_core_check_owner(ud, who, id, err);
}

/* What one tenant may have in flight: --tenant-max-requests, or a quarter
 * of the connections when there are tenants to share them (one tenant
 * alone starves nobody). */
static unsigned tenant_share(const sup_config *cfg)
{
	if (cfg->tenant_max_requests)
		return cfg->tenant_max_requests;
	if (!cfg->tenants_file)
		return 0;
	return cfg->max_conns / 4 ? cfg->max_conns / 4 : 1;
}

/* Phase: the relay: the cluster key, the directory of the other nodes (the
 * static one of --peer; the Leases' one is wired once the cluster runs). */
static int phase_relay(sup_main *m, sbx_err *err)
{
	const sup_config *cfg = &m->cfg;
	char *key = NULL;
	sup_directory dir = { 0 };
	if (cfg->cluster_key_file &&
	    sup_relay_secret_load("--cluster-key-file", cfg->cluster_key_file, &key, err) < 0)
		return err->code;
	if (cfg->npeers) {
		m->directory = sup_dir_static_new(m->base, cfg->node_name, cfg->peers, cfg->npeers, key,
						  m->tls, err);
		if (!m->directory) {
			free(key);
			return err->code;
		}
		dir = (sup_directory){ &sup_dir_static_ops, m->directory };
	}
	if (sup_relay_init(&m->relay, m->base, m->core, cfg->node_name, key, dir, err) < 0)
		return err->code;
	m->relay.tls = m->tls; /* https:// peers dialled, relayed requests' certificates judged */
	/* in a cluster: peers' service-account tokens reviewed, ours sent */
	if (m->cluster && sup_cluster_auth_wire(cfg, m->cluster, &m->relay, m->base, err) < 0)
		return err->code;
	return 0;
}

/* The E2B layer's context: its templates, and the key its access tokens
 * are signed with, kept in the state folder so tokens outlive a restart. */
static int phase_e2b(sup_main *m, sup_families *f, sbx_err *err)
{
	const sup_config *cfg = &m->cfg;
	char key[PATH_MAX];
	bool made;
	f->e2b = (sup_e2b_ctx){ .core = m->core, .contexts = f->contexts.engine,
				.limits = f->sandboxes.limits,
				.node = cfg->node_name, .aliases = cfg->e2b_templates,
				.naliases = cfg->ne2b_templates, .tenants = &m->tenants };
	if ((size_t)snprintf(key, sizeof(key), "%s/e2b-access.key", cfg->state_dir) >= sizeof(key))
		return sbx_err_set(err, -ENAMETOOLONG, "--state-dir: too long");
	_Static_assert(sizeof(f->e2b.access_key) == SUP_SECRET_KEY_LEN, "one key length");
	if (sup_secret_key_load(key, f->e2b.access_key, &made, err) < 0)
		return sbx_err_wrap(err, "the E2B layer's access key");
	return sup_e2b_ctx_open(&f->e2b, m->catalog, err);
}

/* The edge's gate: E2B's addressing first (it names who by an access
 * token), then the port proxy's. */
static int edge_gate(void *ud, const sup_http_in *in, char **path, const struct sup_tenant **who,
		     sbx_err *err)
{
	sup_families *f = ud;
	int rc = sup_e2b_gate(&f->e2b, in, path, who, err);
	if (rc != 0 || *path || *who)
		return rc;
	return sup_ports_gate(&f->ports, in, path, who, err);
}

/* Phase: the route families' contexts (the relay's among them). */
int sup_main_families(sup_main *m, sbx_err *err)
{
	const sup_config *cfg = &m->cfg;
	sup_families *f = m->fam = calloc(1, sizeof(*m->fam));
	if (!f)
		return sbx_err_set(err, -ENOMEM, "route families");
	f->snapshots = (sup_snapshots_ctx){ .snaps = m->snaps, .core = m->core };
	f->sandboxes = (sup_sandboxes_ctx){
		.core = m->core,
		.limits = { .default_timeout_s = cfg->default_timeout_s,
			    .max_timeout_s = cfg->max_timeout_s,
			    .res_default = cfg->res_default,
			    .res_max = cfg->res_max },
	};
	if (phase_relay(m, err) < 0)
		return err->code;
	f->sandboxes.elsewhere = sup_relay_create_elsewhere;
	f->sandboxes.elsewhere_free = sup_relay_handle_free;
	f->sandboxes.elsewhere_ud = &m->relay;
	f->sandboxes.list_elsewhere = sup_relay_list_elsewhere;
	f->sandboxes.list_free = sup_relay_list_free;
	f->relay_mount = (sup_http_mount){ &sup_relay_family, &m->relay };
	f->osbx.core = m->core;
	f->osbx.snaps = m->snaps;
	f->osbx.limits = f->sandboxes.limits;
	if (sup_osbx_ctx_open(&f->osbx, m->catalog, err) < 0)
		return err->code;
	f->files = (sup_files_ctx){ .core = m->core, .max_upload = cfg->max_upload };
	if (cfg->image_pull_dir && !realpath(cfg->image_pull_dir, f->pull_dir))
		return sbx_err_sys(err, -errno, "--image-pull-dir %s", cfg->image_pull_dir);
	m->image_worker = sup_workers_new(m->base, 1, err);
	if (!m->image_worker)
		return err->code;
	f->images = (sup_images_ctx){ .core = m->core,
				      .store = m->store,
				      .worker = m->image_worker,
				      .max_import = cfg->image_max_import,
				      .skopeo = cfg->skopeo,
				      .pull_dir = cfg->image_pull_dir ? f->pull_dir : NULL,
				      .pull_timeout_ms = cfg->image_pull_timeout_ms };
	f->procs = (sup_procs_ctx){ .core = m->core };
	f->volroutes = (sup_volroutes_ctx){ .core = m->core };
	f->secroutes = (sup_secroutes_ctx){ .store = m->secrets };
	f->contexts.engine = sup_ctx_engine_new(m->base, m->core, cfg->max_output);
	if (!f->contexts.engine)
		return sbx_err_set(err, -ENOMEM, "code contexts");
	if (phase_e2b(m, f, err) < 0)
		return err->code;
	f->nodes = (sup_nodes_ctx){ .kube = &m->kube };
	f->mcp = (sup_mcp_ctx){ .core = m->core, .idle_ms = cfg->mcp_idle_ms,
				.origins = cfg->mcp_origins, .limits = f->sandboxes.limits,
				.snaps = m->snaps, .max_upload = cfg->max_upload,
				.contexts = f->contexts.engine };
	if (sup_mcp_api_check(err) < 0)
		return err->code;
	if (sup_urlsign_init(&f->urlsign, err) < 0)
		return err->code;
	f->osbx.sign = &f->urlsign;
	sup_ports_init(&f->ports, m->core, cfg->ports_domain, &f->urlsign);
	f->ports.answer_ms = cfg->ports_answer_ms;
	m->requests = sup_scrape_requests_new();
	if (!m->requests)
		return sbx_err_set(err, -ENOMEM, "metrics");
	f->scrape = (sup_scrape_ctx){ .core = m->core, .tenants = &m->tenants,
				      .requests = m->requests, .store = m->store,
				      .snaps = m->snaps };
	f->scrape_open = f->scrape;
	f->scrape_open.open = true;
	return 0;
}

/* Phase: the HTTP edge (and --metrics-listen's) over the families. */
int sup_main_edge(sup_main *m, sbx_err *err)
{
	sup_config *cfg = &m->cfg;
	sup_families *f = m->fam;
	/* the first row only with --backend kubernetes: its refusals come
	 * before the routes they refuse */
	const sup_http_mount mounts[] = {
		{ &sup_kubemode_family, NULL },
		{ &sup_sandboxes_family, &f->sandboxes },
		{ &sup_files_family, &f->files },
		{ &sup_procs_family, &f->procs },
		{ &sup_mcp_family, &f->mcp },
		{ &sup_mcp_api_family, &f->mcp },
		{ &sup_ports_family, &f->ports },
		{ &sup_scrape_family, &f->scrape },
		{ &sup_images_family, &f->images },
		{ &sup_volumes_family, &f->volroutes },
		{ &sup_secrets_family, &f->secroutes },
		{ &sup_contexts_family, &f->contexts },
		{ &sup_snapshots_family, &f->snapshots },
		{ &sup_nodes_family, &f->nodes },
		{ &sup_openapi_family, NULL },
		{ &sup_osbx_family, &f->osbx },
		{ &sup_e2b_family, &f->e2b },
		{ &sup_e2b_envd_family, &f->e2b },
		{ &sup_relay_door_family, &m->relay },
	};
	_Static_assert(sizeof(mounts) == sizeof(f->mounts), "one row of mounts per family");
	memcpy(f->mounts, mounts, sizeof(mounts));
	f->metrics_mounts[0] = (sup_http_mount){ &sup_scrape_family, &f->scrape_open };
	sup_start_fit_fd_limit(cfg);
	m->drain_s = cfg->drain_timeout_s;
	m->destroy_on_exit = cfg->destroy_on_exit;
	size_t nmounts = sizeof(f->mounts) / sizeof(f->mounts[0]);
	/* their clients read errors in their own shapes */
	static const sup_http_error_shape error_shapes[] = {
		{ "/opensandbox/", sup_http_error_flat },
		{ "/e2b/", sup_e2b_error },
	};
	sup_http_cfg hcfg = {
		.host = cfg->listen_host,
		.port = cfg->listen_port,
		.tls = m->tls, /* --metrics-listen's too: its copy below keeps it */
		.auth = sup_tenants_hook_auth,
		.release = sup_tenant_release,
		.auth_ud = &m->tenants,
		.check_id = check_owner,
		.check_ud = m->core,
		.gate = edge_gate,
		.gate_ud = f,
		.relay = sup_relay_admit,
		.relay_ud = &m->relay,
		.relay_mount = &f->relay_mount,
		.on_answered = sup_scrape_count,
		.answered_ud = m->requests,
		.error_shapes = error_shapes,
		.nerror_shapes = sizeof(error_shapes) / sizeof(error_shapes[0]),
		.max_body = cfg->max_body,
		.credit_window = SUP_AGENT_RECV_WINDOW,
		.max_conns = cfg->max_conns,
		.max_per_who = tenant_share(cfg),
		.head_timeout_s = cfg->head_timeout_s,
		.body_timeout_s = cfg->body_timeout_s,
		.idle_timeout_s = cfg->idle_timeout_s,
		.mounts = cfg->backend_kube ? f->mounts : f->mounts + 1,
		.nmounts = nmounts - (cfg->backend_kube ? 0 : 1),
	};
	if (cfg->metrics_listen) {
		sup_http_cfg mcfg = hcfg;
		mcfg.host = cfg->metrics_host;
		mcfg.port = cfg->metrics_port;
		mcfg.auth = NULL;
		mcfg.check_id = NULL;
		mcfg.gate = NULL;
		mcfg.relay = NULL;
		mcfg.max_conns = 64;
		mcfg.max_per_who = 0;
		mcfg.mounts = f->metrics_mounts;
		mcfg.nmounts = 1;
		m->metrics = sup_http_new(m->base, &mcfg, err);
		if (!m->metrics)
			return sbx_err_wrap(err, "--metrics-listen");
	}
	m->http = sup_http_new(m->base, &hcfg, err);
	return m->http ? 0 : err->code;
}

void sup_main_families_free(sup_main *m)
{
	if (!m->fam)
		return;
	sup_mcp_ctx_release(&m->fam->mcp);
	sup_osbx_ctx_release(&m->fam->osbx);
	sup_e2b_ctx_release(&m->fam->e2b);
	sup_ctx_engine_free(m->fam->contexts.engine);
	free(m->fam);
	m->fam = NULL;
}
