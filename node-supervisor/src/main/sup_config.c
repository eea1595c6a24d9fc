#include "sup_config.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sup_opt.h"

/* The strings a config owns: its file's values, the lists it splits. */
struct sup_config_kept {
	struct sup_config_kept *next;
	char s[];
};

char *sup_config_keep(sup_config *c, const char *s, size_t n)
{
	struct sup_config_kept *k = malloc(sizeof(*k) + n + 1);
	if (!k)
		return NULL;
	memcpy(k->s, s, n);
	k->s[n] = '\0';
	k->next = c->kept;
	c->kept = k;
	return k->s;
}

int sup_config_defaults(sup_config *c, sbx_err *err)
{
	memset(c, 0, sizeof(*c));
	/* not an option: a create's lifetime when it names none, at most
	 * --max-timeout */
	c->default_timeout_s = 3600;
	for (size_t i = 0; i < sup_noptions; i++) {
		const sup_opt *o = &sup_options[i];
		if (o->init)
			o->init(c);
		else if (o->def && sup_opt_set(c, o, o->name, o->def, err) < 0)
			return sbx_err_wrap(err, "the default of --%s", o->name);
		if (o->given) /* a default is not given */
			*(bool *)sup_opt_at(c, o->given - 1) = false;
	}
	return 0;
}

void sup_config_release(sup_config *c)
{
	while (c->kept) {
		struct sup_config_kept *next = c->kept->next;
		free(c->kept);
		c->kept = next;
	}
	c->npools = 0;
	c->nimages = 0;
	c->nreuse_paths = 0;
}

void sup_config_usage(FILE *out, const char *prog)
{
	sup_opt_usage(out, prog);
}

void sup_config_markdown(FILE *out)
{
	sup_opt_markdown(out);
}

int sup_config_parse_listen(const char *s, char *host, size_t host_size, uint16_t *port,
			    sbx_err *err)
{
	const char *colon;
	const char *h = s;
	size_t hlen;
	if (s[0] == '[') {
		const char *close = strchr(s, ']');
		if (!close || close[1] != ':')
			return sbx_err_set(err, -EINVAL, "listen address %s: want [v6]:port", s);
		h = s + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon)
			return sbx_err_set(err, -EINVAL, "listen address %s: want host:port", s);
		hlen = (size_t)(colon - s);
	}
	if (hlen == 0 || hlen >= host_size)
		return sbx_err_set(err, -EINVAL, "listen address %s: bad host", s);
	char *end;
	errno = 0;
	unsigned long p = strtoul(colon + 1, &end, 10);
	if (colon[1] == '\0' || *end != '\0' || errno || p > 65535)
		return sbx_err_set(err, -EINVAL, "listen address %s: bad port", s);
	memcpy(host, h, hlen);
	host[hlen] = '\0';
	*port = (uint16_t)p;
	return 0;
}

int sup_config_parse_secs(const char *s, unsigned lo_ms, unsigned hi_ms, unsigned *ms,
			  sbx_err *err)
{
	char *end;
	errno = 0;
	if ((s[0] < '0' || s[0] > '9') && s[0] != '.')
		return sbx_err_set(err, -EINVAL, "%s: not a number of seconds", s);
	double v = strtod(s, &end);
	if (errno || *end != '\0' || !(v >= 0) || v * 1000.0 > (double)hi_ms + 0.5 ||
	    v * 1000.0 < (double)lo_ms - 0.5)
		return sbx_err_set(err, -EINVAL, "%s: want %.3g to %.6g seconds", s, lo_ms / 1000.0,
				   hi_ms / 1000.0);
	*ms = (unsigned)(v * 1000.0 + 0.5);
	return 0;
}

static sup_pool_spec *spec_find(sup_pool_spec *v, size_t n, const char *image, sup_isolation iso)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].isolation == iso && strcmp(v[i].image, image) == 0)
			return &v[i];
	return NULL;
}

/* Add (image, iso, size) unless the pair is there; with replace, its size
 * becomes size. -EINVAL when full. */
static int spec_put(sup_pool_spec *v, size_t *n, const char *image, sup_isolation iso,
		    unsigned size, bool replace, sbx_err *err)
{
	sup_pool_spec *have = spec_find(v, *n, image, iso);
	if (have) {
		if (replace)
			have->size = size;
		return 0;
	}
	if (*n == SUP_MAX_POOLS)
		return sbx_err_set(err, -EINVAL, "more than %d pools (images x isolations)",
				   SUP_MAX_POOLS);
	v[(*n)++] = (sup_pool_spec){ .image = image, .isolation = iso, .size = size };
	return 0;
}

int sup_config_pool_specs(const sup_config *c, const bool offered[SUP_ISO_N], sup_pool_spec *out,
			  sbx_err *err)
{
	size_t n = 0;
	for (size_t i = 0; i < c->nimages; i++)
		if (spec_put(out, &n, c->images[i], SUP_ISO_RUNC, c->image_sizes[i], true, err) < 0)
			return err->code;
	for (size_t i = 0; i < c->npools; i++) {
		const sup_pool_spec *sp = &c->pools[i];
		if (!offered[sp->isolation])
			return sbx_err_set(err, -EINVAL, "--pool %s:%s=%u: %s isolation is not offered "
					   "here", sup_isolation_names[sp->isolation], sp->image,
					   sp->size, sup_isolation_names[sp->isolation]);
		if (spec_put(out, &n, sp->image, sp->isolation, sp->size, true, err) < 0)
			return err->code;
	}
	/* Every pooled image with every offered isolation, cold if not sized. */
	for (size_t i = 0, images = n; i < images; i++)
		for (int iso = 0; iso < SUP_ISO_N; iso++)
			if (offered[iso] &&
			    spec_put(out, &n, out[i].image, (sup_isolation)iso, 0, false, err) < 0)
				return err->code;
	return (int)n;
}

bool sup_config_pools_use(const sup_config *c, sup_isolation isolation)
{
	for (size_t i = 0; i < c->npools; i++)
		if (c->pools[i].isolation == isolation)
			return true;
	return false;
}


#define OPT_BASE 256

/* getopt_long's table, built from the rows: val is OPT_BASE + the row. */
static struct option *long_options(void)
{
	struct option *lo = calloc(sup_noptions + 1, sizeof(*lo));
	size_t n = 0;
	for (size_t i = 0; lo && i < sup_noptions; i++)
		if (sup_opt_is_option(&sup_options[i]))
			lo[n++] = (struct option){ sup_options[i].name,
						   sup_options[i].type == SUP_OPT_FLAG ? no_argument
										       : required_argument,
						   NULL, (int)(OPT_BASE + i) };
	return lo;
}

/* --help, --help-markdown, --version: printed at once. */
static int act(const sup_opt *o, const char *prog)
{
	switch (o->action) {
	case SUP_ACT_HELP:
		sup_config_usage(stdout, prog);
		return 1;
	case SUP_ACT_HELP_MARKDOWN:
		sup_config_markdown(stdout);
		return 1;
	case SUP_ACT_VERSION:
		printf("sandbox-supervisor 0.1.0\n");
		return 1;
	default:
		return 0;
	}
}

/* What getopt refused: an unknown option, or one without its argument. */
static int refused(int argc, char **argv, sbx_err *err)
{
	if (optopt >= OPT_BASE && (size_t)(optopt - OPT_BASE) < sup_noptions)
		return sbx_err_set(err, -EINVAL, "--%s: missing argument",
				   sup_options[optopt - OPT_BASE].name);
	if (optopt)
		return sbx_err_set(err, -EINVAL, "option -%c: unknown or missing argument", optopt);
	return sbx_err_set(err, -EINVAL, "%s: unknown option or missing argument",
			   argv[optind - 1 < argc ? optind - 1 : argc - 1]);
}

int sup_config_args(sup_config *c, int argc, char **argv, sbx_err *err)
{
	SBX_AUTO_FREE struct option *lo = long_options();
	/* the options in their order, applied once the file is in */
	SBX_AUTO_FREE size_t *rows = calloc((size_t)argc + 1, sizeof(*rows));
	SBX_AUTO_FREE const char **vals = calloc((size_t)argc + 1, sizeof(*vals));
	SBX_AUTO_FREE bool *from_file = calloc(sup_noptions, sizeof(*from_file));
	if (!lo || !rows || !vals || !from_file)
		return sbx_err_set(err, -ENOMEM, "options");
	size_t n = 0;
	int o, rc;
	optind = 1;
	opterr = 0;
	while ((o = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (o < OPT_BASE)
			return refused(argc, argv, err);
		const sup_opt *row = &sup_options[o - OPT_BASE];
		if ((rc = act(row, argv[0])) != 0)
			return rc;
		if (row->action == SUP_ACT_CONFIG && c->config_file)
			return sbx_err_set(err, -EINVAL, "--config: one file");
		if (row->action == SUP_ACT_CONFIG) {
			c->config_file = optarg;
			continue;
		}
		rows[n] = (size_t)(o - OPT_BASE);
		vals[n++] = optarg;
	}
	if (optind < argc)
		return sbx_err_set(err, -EINVAL, "unexpected argument %s", argv[optind]);
	if (c->config_file && sup_config_load_file(c, c->config_file, from_file, err) < 0)
		return err->code;
	for (size_t i = 0; i < n; i++) {
		const sup_opt *row = &sup_options[rows[i]];
		char label[80];
		/* the command line's list replaces the file's */
		if ((row->flags & SUP_OPT_REPEAT) && from_file[rows[i]]) {
			sup_opt_reset(c, row);
			from_file[rows[i]] = false;
		}
		snprintf(label, sizeof(label), "--%s", row->name);
		if (sup_opt_set(c, row, label, vals[i], err) < 0)
			return err->code;
	}
	return 0;
}

int sup_config_finish(sup_config *c, sbx_err *err)
{
	if (c->token && c->tenants_file)
		return sbx_err_set(err, -EINVAL,
				   "--token and --tenants: the tenants file holds the tokens (as hashes)");
	if (sup_resources_check_max("--default-resources ", &c->res_default, &c->res_max, err) < 0)
		return err->code;
	if ((c->uplink_dns || c->deny_cidrs) && !c->uplink)
		return sbx_err_set(err, -EINVAL, "--uplink-dns and --deny-cidrs need --uplink");
	if (c->kubeconfig && c->kube_in_cluster)
		return sbx_err_set(err, -EINVAL, "--kubeconfig and --kube-in-cluster: one or the other");
	if ((c->kube_context || c->kube_namespace || c->advertise_url) && !c->kubeconfig &&
	    !c->kube_in_cluster)
		return sbx_err_set(err, -EINVAL,
				   "--kube-context, --kube-namespace and --advertise-url need --kubeconfig or --kube-in-cluster");
	if (c->kube_context && !c->kubeconfig)
		return sbx_err_set(err, -EINVAL, "--kube-context needs --kubeconfig");
	if ((c->kube_token_file || c->node_account) && !c->kubeconfig && !c->kube_in_cluster)
		return sbx_err_set(err, -EINVAL,
				   "--kube-token-file and --node-account need --kubeconfig or --kube-in-cluster");
	if (c->backend_kube && !c->kubeconfig && !c->kube_in_cluster)
		return sbx_err_set(err, -EINVAL, "--backend kubernetes needs --kubeconfig or --kube-in-cluster");
	if (c->backend_kube && !c->npod_templates)
		return sbx_err_set(err, -EINVAL, "--backend kubernetes needs a --pod-template");
	if (!c->backend_kube && c->npod_templates)
		return sbx_err_set(err, -EINVAL, "--pod-template needs --backend kubernetes");
	/* what a pod cannot have (API.md, "Kubernetes backend") */
	if (c->backend_kube && (c->uplink || c->npools || c->snapshot_store || c->runsc_given))
		return sbx_err_set(err, -EINVAL,
				   "--backend kubernetes: --uplink, --pool, --snapshot-store and --runsc are the "
				   "runc backend's (a pod's network and runtime are its template's)");
	if (!c->tls_cert != !c->tls_key)
		return sbx_err_set(err, -EINVAL, "--tls-cert and --tls-key: both or neither");
	if (c->tls_ca && !c->tls_cert)
		return sbx_err_set(err, -EINVAL, "--tls-ca needs --tls-cert and --tls-key (a node "
						 "proves itself to its peers with its certificate)");
	if (c->tls_cert && !c->tls_ca && (c->npeers || c->kubeconfig || c->kube_in_cluster))
		return sbx_err_set(err, -EINVAL, "--tls-cert with other nodes (--peer, a cluster) needs "
						 "--tls-ca: nodes verify each other by the cluster's CA");
	if (c->s3_endpoint && !c->snapshot_store)
		return sbx_err_set(err, -EINVAL, "--s3-endpoint needs --snapshot-store s3://...");
	if (c->default_timeout_s > c->max_timeout_s)
		c->default_timeout_s = c->max_timeout_s;
	for (size_t i = 0; i < c->nimages; i++)
		if (c->image_sizes[i] == SUP_POOL_SIZE_UNSET)
			c->image_sizes[i] = c->pool_size;
	/* What the pools keep ready, --pool entries replacing a runc pool's
	 * --pool-size; pairs added later are cold (size 0). */
	bool all[SUP_ISO_N];
	for (int i = 0; i < SUP_ISO_N; i++)
		all[i] = true;
	sup_pool_spec specs[SUP_MAX_POOLS] = { 0 };
	int n = sup_config_pool_specs(c, all, specs, err);
	if (n < 0)
		return n;
	uint64_t ready = 0;
	for (int i = 0; i < n; i++)
		ready += specs[i].size;
	if (ready > c->max_sandboxes)
		return sbx_err_set(err, -EINVAL,
				   "the pools keep %llu sandboxes ready, more than --max-sandboxes %u",
				   (unsigned long long)ready, c->max_sandboxes);
	return 0;
}

int sup_config_parse(sup_config *c, int argc, char **argv, sbx_err *err)
{
	int rc = sup_config_args(c, argc, argv, err);
	if (rc != 0)
		return rc;
	if (sup_config_finish(c, err) < 0)
		return err->code;
	if (c->print_config)
		return sup_config_write(c, stdout, false, err) < 0 ? err->code : 1;
	if (c->check_config) {
		printf("sandbox-supervisor: the options%s%s are valid\n",
		       c->config_file ? " and " : "", c->config_file ? c->config_file : "");
		return 1;
	}
	return 0;
}
