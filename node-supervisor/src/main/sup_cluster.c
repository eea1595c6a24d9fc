/* sup_cluster: the core and the kube module wired together (sup_cluster.h). */
#include <ctype.h>
#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sup_cluster.h"
#include "sup_kube_pods.h"
#include "sup_kube_tmpl.h"
#include "sup_log.h"
#include "sup_sandbox.h"

#define DEFAULT_NAMESPACE "sbx-system"

struct sup_cluster {
	sup_kube_cfg kcfg;
	char node[SUP_KUBE_NODE_MAX];
	char ns[SUP_KUBE_NS_MAX];
	char url[SUP_KUBE_URL_MAX];
	const char *listen_host;
	bool tls;                 /* the URL a Lease publishes is https:// */
	unsigned lease_s, queue;
	sup_kube *kube;
	sup_core *core;
	struct event *tick;
	/* --backend kubernetes */
	sup_kube_tmpl tmpls[SUP_MAX_IMAGES];
	sup_resources limits[SUP_MAX_IMAGES]; /* each template's pods' */
	size_t ntmpls;
	sup_kube_pods *pods;
};

int sup_cluster_new(const sup_config *cfg, sup_cluster **out, sbx_err *err)
{
	*out = NULL;
	if (!cfg->kubeconfig && !cfg->kube_in_cluster)
		return 0;
	sup_cluster *cl = calloc(1, sizeof(*cl));
	if (!cl)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int rc = cfg->kubeconfig
			 ? sup_kube_cfg_load_file(cfg->kubeconfig, cfg->kube_context, &cl->kcfg, err)
			 : sup_kube_cfg_in_cluster(getenv("KUBERNETES_SERVICE_HOST"),
						   getenv("KUBERNETES_SERVICE_PORT"), SUP_KUBE_SA_DIR,
						   &cl->kcfg, err);
	if (rc < 0) {
		free(cl);
		return rc;
	}
	if (cfg->node_name[0]) {
		snprintf(cl->node, sizeof(cl->node), "%s", cfg->node_name);
	} else if (gethostname(cl->node, sizeof(cl->node) - 1) < 0) {
		sup_cluster_free(cl);
		return sbx_err_sys(err, -errno, "host name (give --node-name)");
	}
	for (char *p = cl->node; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	snprintf(cl->ns, sizeof(cl->ns), "%s",
		 cfg->kube_namespace ? cfg->kube_namespace
		 : cfg->kube_in_cluster && cl->kcfg.ns[0] ? cl->kcfg.ns : DEFAULT_NAMESPACE);
	if (cfg->advertise_url)
		snprintf(cl->url, sizeof(cl->url), "%s", cfg->advertise_url);
	else if (!strcmp(cfg->listen_host, "0.0.0.0") || !strcmp(cfg->listen_host, "::")) {
		sup_cluster_free(cl);
		return sbx_err_set(err, -EINVAL,
				   "--advertise-url: the other nodes cannot reach %s (give this node's address, http://10.0.0.5:7070)",
				   cfg->listen_host);
	}
	cl->listen_host = cfg->listen_host;
	cl->tls = cfg->tls_cert != NULL;
	cl->lease_s = cfg->lease_s;
	cl->queue = cfg->kube_queue;
	*out = cl;
	return 0;
}

void sup_cluster_on_life(void *ud, sup_core_life what, const char *id, const char *image,
			 const char *tenant)
{
	sup_cluster *cl = ud;
	if (!cl || !cl->kube)
		return;
	switch (what) {
	case SUP_LIFE_CREATED:
		sup_kube_event(cl->kube, SUP_KUBE_NORMAL, "SandboxCreated",
			       "sandbox %s created on node %s (image %s, tenant %s)", id, cl->node, image,
			       tenant);
		break;
	case SUP_LIFE_EXPIRED:
		sup_kube_event(cl->kube, SUP_KUBE_NORMAL, "SandboxExpired",
			       "sandbox %s on node %s reached its timeout and is destroyed", id, cl->node);
		break;
	case SUP_LIFE_DELETED:
		sup_kube_event(cl->kube, SUP_KUBE_NORMAL, "SandboxDeleted",
			       "sandbox %s on node %s deleted (tenant %s)", id, cl->node, tenant);
		break;
	case SUP_LIFE_OOM:
		sup_kube_event(cl->kube, SUP_KUBE_WARNING, "SandboxOOM",
			       "a command of sandbox %s on node %s was killed for memory", id, cl->node);
		break;
	}
}

/* Ready sandboxes per image (every isolation's pool together), and how
 * many are handed out: for this node's Lease. */
static void on_tick(evutil_socket_t fd, short what, void *ud)
{
	sup_cluster *cl = ud;
	(void)fd;
	(void)what;
	sup_kube_capacity c;
	memset(&c, 0, sizeof(c));
	c.leased = (unsigned)sup_core_listed_count(cl->core);
	size_t n = sup_core_pool_count(cl->core);
	for (size_t i = 0; i < n; i++) {
		sup_pool_stats st;
		sup_core_pool_stats(cl->core, i, &st);
		size_t k = 0;
		while (k < c.nimages && strcmp(c.images[k].image, st.image) != 0)
			k++;
		if (k == c.nimages) {
			if (k == SUP_KUBE_CAP_IMAGES || strlen(st.image) >= SUP_KUBE_IMAGE_MAX)
				continue;
			snprintf(c.images[k].image, SUP_KUBE_IMAGE_MAX, "%s", st.image);
			c.nimages++;
		}
		c.images[k].ready += st.ready;
	}
	sup_kube_set_capacity(cl->kube, &c);
}

int sup_cluster_start(sup_cluster *cl, struct event_base *base, sup_core *core, uint16_t port,
		      sbx_err *err)
{
	if (!cl->url[0]) {
		bool v6 = strchr(cl->listen_host, ':') != NULL;
		snprintf(cl->url, sizeof(cl->url), "%s://%s%s%s:%u", cl->tls ? "https" : "http",
			 v6 ? "[" : "", cl->listen_host,
			 v6 ? "]" : "", (unsigned)port);
	}
	cl->core = core;
	sup_kube_opts o = { .cfg = &cl->kcfg,
			    .ns = cl->ns,
			    .node = cl->node,
			    .url = cl->url,
			    .lease_s = cl->lease_s,
			    .queue_max = cl->queue };
	cl->kube = sup_kube_start(&o, err);
	if (!cl->kube)
		return sbx_err_wrap(err, "kubernetes (%s)", cl->kcfg.origin);
	/* the first capacity before the first renewal */
	on_tick(-1, 0, cl);
	cl->tick = event_new(base, -1, EV_PERSIST, on_tick, cl);
	struct timeval tv = { 1, 0 };
	if (!cl->tick || event_add(cl->tick, &tv) < 0)
		return sbx_err_set(err, -ENOMEM, "cluster timer");
	return 0;
}

/* ---- the pools' seam, for the pods (sup_pool.h: sup_pool_backend) ---- */

static int be_make(void *ud, const char *id, const char *image, sup_runc_box *box, int *fd, sbx_err *err)
{
	return sup_kube_pods_make(ud, id, image, box, fd, err);
}

static int be_unmake(void *ud, const sup_runc_box *box, sbx_err *err)
{
	return sup_kube_pods_unmake(ud, box, err);
}

static int be_adopt(void *ud, const char *id, const char *name, sup_runc_box *box, int *fd, sbx_err *err)
{
	return sup_kube_pods_adopt(ud, id, name, box, fd, err);
}

static int be_check(void *ud, const char *image, const sup_runc_box *box, sbx_err *err)
{
	return sup_kube_pods_check(ud, image, box, err);
}

static size_t be_reset_paths(void *ud, const char *image, const char *const **paths)
{
	return sup_kube_pods_reset_paths(ud, image, paths);
}

static void be_doubt(void *ud, const char *image, const sup_runc_box *box, const char *reason, const char *why)
{
	sup_kube_pods_doubt(ud, image, box, reason, why);
}

static void be_stop(void *ud)
{
	sup_kube_pods_stop_makes(ud);
}

static void be_mark(void *ud, const sup_sandbox *sb, const char *state)
{
	sup_kube_mark m = { .state = state };
	if (strcmp(state, "leased") == 0) {
		m.tenant = sb->tenant;
		m.sandbox = sb->id;
		m.expires_at = sb->expires_at;
	}
	sup_kube_pods_mark(ud, sb->box.container_id, &m);
}

int sup_cluster_pods_start(sup_cluster *cl, const sup_config *cfg, const sup_cgroup_host *cgroup,
			   sup_pool_backend *be, sup_pool_spec *specs, size_t *nspecs, sbx_err *err)
{
	*nspecs = 0;
	for (size_t i = 0; i < cfg->npod_templates; i++) {
		if (sup_kube_tmpl_load(cfg->pod_templates[i], &cl->tmpls[i], err) < 0)
			return sbx_err_wrap(err, "--pod-template");
		cl->ntmpls++;
		for (size_t k = 0; k < i; k++)
			if (strcmp(cl->tmpls[k].name, cl->tmpls[i].name) == 0)
				return sbx_err_set(err, -EINVAL, "--pod-template: two templates named %s",
						   cl->tmpls[i].name);
		if (sup_kube_tmpl_limits(&cl->tmpls[i], &cfg->res_default, &cl->limits[i], err) < 0)
			return sbx_err_wrap(err, "--pod-template");
		unsigned size = cfg->pool_size;
		for (size_t k = 0; k < cfg->nimages; k++)
			if (strcmp(cfg->images[k], cl->tmpls[i].name) == 0)
				size = cfg->image_sizes[k];
		specs[(*nspecs)++] = (sup_pool_spec){ .image = cl->tmpls[i].name, .isolation = SUP_ISO_RUNC,
						      .size = size, .res = &cl->limits[i] };
	}
	sup_kube_pods_opts o = { .cfg = &cl->kcfg,
				 .ns = cfg->sandbox_namespace,
				 .node = cl->node,
				 .agent_dir = cfg->agent_dir,
				 .tmpls = cl->tmpls,
				 .ntmpls = cl->ntmpls,
				 .ready_timeout_ms = cfg->pod_ready_ms,
				 .cgroup = cgroup,
				 .queue_max = cfg->kube_queue ? cfg->kube_queue * 4 : 0 };
	cl->pods = sup_kube_pods_start(&o, err);
	if (!cl->pods)
		return sbx_err_wrap(err, "kubernetes backend");
	*be = (sup_pool_backend){ .make = be_make,
				  .unmake = be_unmake,
				  .adopt = be_adopt,
				  .check = be_check,
				  .reset_paths = be_reset_paths,
				  .mark = be_mark,
				  .doubt = be_doubt,
				  .stop = be_stop,
				  .name = "kubernetes",
				  .ud = cl->pods };
	return 0;
}

void sup_cluster_pods_sweep(sup_cluster *cl, const char *const *keep, size_t nkeep)
{
	unsigned swept;
	sbx_err e;
	if (sup_kube_pods_sweep(cl->pods, keep, nkeep, &swept, &e) < 0)
		sup_warn("kube: %s (left for the next start)", e.msg);
	else if (swept || nkeep)
		sup_info("kube: %zu pod(s) of an earlier run taken back, %u deleted", nkeep, swept);
}

sup_kube *sup_cluster_kube(const sup_cluster *cl)
{
	return cl ? cl->kube : NULL;
}

const sup_kube_cfg *sup_cluster_kube_cfg(const sup_cluster *cl)
{
	return &cl->kcfg;
}

const char *sup_cluster_namespace(const sup_cluster *cl)
{
	return cl->ns;
}

void sup_cluster_free(sup_cluster *cl)
{
	if (!cl)
		return;
	if (cl->tick)
		event_free(cl->tick);
	sup_kube_pods_free(cl->pods);
	for (size_t i = 0; i < cl->ntmpls; i++)
		sup_kube_tmpl_release(&cl->tmpls[i]);
	sup_kube_free(cl->kube);
	sup_kube_cfg_release(&cl->kcfg);
	free(cl);
}
