#include "sup_config.h"

#include "sbx/proto_reset.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sup_img_store.h"
#include "sup_log.h"
#include "sup_text.h"

void sup_config_defaults(sup_config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->listen_host, sizeof(c->listen_host), "127.0.0.1");
	c->listen_port = 7070;
	sup_nodeid_default(c->node_name);
	c->state_dir = "/var/lib/sbx";
	c->pool_size = 4;
	c->images[0] = "host";
	c->image_sizes[0] = SUP_POOL_SIZE_UNSET;
	c->nimages = 1;
	/* what a sandbox user can write in a fresh sandbox; anything else
	 * written shows in the host's check and the sandbox is replaced */
	static const char *const reuse_paths[] = { "/workspace", "/tmp", "/var/tmp", "/home/sandbox",
						   "/dev/shm", "/dev/mqueue" };
	for (size_t i = 0; i < sizeof(reuse_paths) / sizeof(reuse_paths[0]); i++)
		c->reuse_paths[c->nreuse_paths++] = reuse_paths[i];
	c->image_max_layer = 8ull << 30;
	c->image_max_import = 16ull << 30;
	c->skopeo = "skopeo";
	c->image_pull_timeout_ms = 600000;
	c->runtime = "runc";
	c->runsc = "runsc";
	c->runsc_platform = "ptrace";
	c->max_body = 1u << 20;
	c->max_output = 16u << 20;
	c->max_output_total = 1u << 30;
	c->max_execs = 64;
	c->max_sandboxes = 64;
	c->workers = 2;
	c->acquire_timeout_ms = 60000;
	c->ready_timeout_ms = 10000;
	c->default_timeout_s = 3600;
	c->max_timeout_s = 7 * 24 * 3600;
	c->max_conns = 16384;
	c->head_timeout_s = 10;
	c->body_timeout_s = 60;
	c->snapshot_orphan_age_s = 3600;
	c->snapshot_sweep_every_s = 900;
	c->idle_timeout_s = 60;
	c->drain_timeout_s = 10;
	c->mcp_idle_ms = 600000;
	c->ports_answer_ms = 60000;
	c->agent_dir = "/run/sbx/agents";
	c->sandbox_namespace = "sbx-sandboxes";
	c->pod_ready_ms = 60000;
	c->agent = (sup_agent_opts){
		.grace_ms = 2000,
		.idle_ms = 30000,
		.ping_after_ms = 10000,
		.ping_timeout_ms = 5000,
		.frame_ms = 5000,
		/* at least what legit work needs: the agent serves 1024 streams
		 * and --max-execs goes up to 1000 */
		.max_streams = 1024,
		.max_waiting = 1000,
		.max_queued = 8u << 20,
	};
	c->log_level = SUP_LOG_INFO;
	c->lease_s = 40;
	c->kube_queue = 256;
	sup_resources_default(&c->res_default);
	/* The ceiling: the machine's CPUs and memory; the disk images are
	 * sparse files of this size (see sup_disk.h). */
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	c->res_max.cpu_milli = (uint32_t)(cpus > 0 && cpus < 4096 ? cpus : 1) * 1000u;
	c->res_max.memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 1ull << 30;
	c->res_max.pids = 32768;
	c->res_max.disk = 50ull << 30;
}

void sup_config_release(sup_config *c)
{
	free(c->images_buf);
	c->images_buf = NULL;
	free(c->reuse_paths_buf);
	c->reuse_paths_buf = NULL;
	for (size_t i = 0; i < c->npools; i++)
		free((char *)c->pools[i].image);
	c->npools = 0;
}

void sup_config_usage(const char *prog)
{
	printf("Usage: %s [options]\n"
	       "       %s hash-token [TOKEN]   the SHA-256 form a --tenants file keeps a token in\n"
	       "                         (the token as the argument, or one line on stdin)\n"
	       "  --listen HOST:PORT     HTTP address (default 127.0.0.1:7070; port 0: any)\n"
	       "  --state-dir DIR        state folder (default /var/lib/sbx)\n"
	       "  --pool-size N          ready runc sandboxes kept per image without its own size (default 4)\n"
	       "  --pool-images LIST     comma-separated images of runc pools, each NAME or NAME=N (its\n"
	       "                         own size): host, /path/to/rootfs or an image of the store\n"
	       "                         (default host)\n"
	       "  --pool ISO:IMAGE=N     N ready sandboxes of IMAGE with isolation ISO (runc or\n"
	       "                         gvisor), e.g. gvisor:host=2 (repeatable; other pairs: 0)\n"
	       "  --pool-reuse           a released runc sandbox its pool needs is reset (processes\n"
	       "                         killed, --reuse-paths emptied) and checked from the host,\n"
	       "                         then pooled again instead of destroyed and made anew\n"
	       "  --reuse-paths LIST     comma-separated folders a reset empties (default /workspace,\n"
	       "                         /tmp,/var/tmp,/home/sandbox,/dev/shm,/dev/mqueue)\n"
	       "  --import-image [NAME=]PATH  import an OCI layout folder, oci-archive or docker save\n"
	       "                         tarball into the image store at start (repeatable)\n"
	       "  --remove-image NAME    delete an image of the store at start (after the imports);\n"
	       "                         layers no image uses are removed at every start\n"
	       "  --image-max-layer SIZE file data of one image layer (default 8G)\n"
	       "  --image-max-import SIZE bytes of one imported archive (default 16G)\n"
	       "  --image-allow-setid    keep setuid/setgid bits of image files (default: dropped)\n"
	       "  --skopeo BIN           skopeo, for POST /v1/images {\"ref\"} (default skopeo)\n"
	       "  --image-pull-dir DIR   pulls may name oci: and oci-archive: paths below DIR\n"
	       "                         (default: none, registries only)\n"
	       "  --image-pull-timeout SEC  a pull's deadline (default 600)\n"
	       "  --runtime BIN          OCI runtime of runc isolation (default runc)\n"
	       "  --runsc BIN            gVisor's runtime, gvisor isolation (default runsc; offered\n"
	       "                         when it answers, required when given or pooled)\n"
	       "  --runsc-root DIR       runsc's state folder (default <state-dir>/runsc)\n"
	       "  --runsc-platform NAME  ptrace or kvm (default ptrace)\n"
	       "  --agent PATH           sandbox-agent binary (default: beside this binary)\n"
	       "  --token T              API token (default: <state-dir>/token, made at first start)\n"
	       "  --max-body SIZE        largest request body (default 1M)\n"
	       "  --max-upload SIZE      largest upload, PUT /files (default: no limit)\n"
	       "  --policy FILE          file access policy, JSON (default: /workspace, /tmp,\n"
	       "                         /home/sandbox read-write)\n"
	       "  --tenants FILE         tenants, their token hashes, quotas and settings, JSON\n"
	       "                         (reread on SIGHUP; default: the token is the one tenant)\n"
	       "  --metrics-listen HOST:PORT  also serve GET /metrics there, without a token\n"
	       "                         (for a scraper on this node)\n"
	       "  --max-output SIZE      captured bytes per stream of an exec (default 16M)\n"
	       "  --max-output-total SIZE  captured bytes of all running execs together (default 1G)\n"
	       "  --max-execs N          commands running at once per sandbox (default 64)\n"
	       "  --allow-root           let execs run as root (\"user\":\"root\"; default: refused, 403)\n"
	       "  --max-sandboxes N      sandboxes alive at once, pooled ones included (default 64)\n"
	       "  --workers N            threads running the runtime (default 2)\n"
	       "  --acquire-timeout SEC  how long a create waits for a sandbox (default 60)\n"
	       "  --ready-timeout SEC    runtime start until the agent answers (default 10)\n"
	       "  --max-timeout SEC      largest sandbox lifetime (default 604800)\n"
	       "  --max-connections N    HTTP connections held at once (default 16384)\n"
	       "  --head-timeout SEC     to send a request head (default 10)\n"
	       "  --body-timeout SEC     to send a request body read whole; between bytes of\n"
	       "                         a streamed one (default 60)\n"
	       "  --idle-timeout SEC     keep-alive between requests; a client not reading (default 60)\n"
	       "  --drain-timeout SEC    requests in flight at a stop may run this long (default 10)\n"
	       "  --destroy-on-exit      SIGTERM destroys every sandbox, as SIGINT does (default:\n"
	       "                         SIGTERM leaves them to the next start, a node upgrade)\n"
	       "  --agent-grace SEC      an exec's timeout plus this, and the agent must have\n"
	       "                         ended it (default 2; fractions allowed)\n"
	       "  --mcp-idle-timeout SEC  an MCP session unused this long ends, its server's\n"
	       "                         processes killed (default 600; fractions allowed)\n"
	       "  --mcp-allow-origin LIST  Origins (comma-separated) a browser may reach MCP\n"
	       "                         sessions from (default none: requests with Origin refused)\n"
	       "  --agent-idle-timeout SEC  a call waiting for the agent's answer fails after\n"
	       "                         this long without a frame (default 30)\n"
	       "  --agent-ping-interval SEC  ping an agent connection quiet this long (default 10)\n"
	       "  --agent-ping-timeout SEC  no answer to the ping within this: sandbox failed\n"
	       "                         (default 5)\n"
	       "  --agent-frame-timeout SEC  a frame from the agent must be whole this long after\n"
	       "                         its first byte (default 5)\n"
	       "  --agent-max-streams N  streams open to one agent (default 1024)\n"
	       "  --agent-max-waiting N  requests waiting on one agent (default 1000)\n"
	       "  --agent-max-queued SIZE  bytes queued towards one agent (default 8M)\n"
	       "  --default-resources cpus=C,memory=SIZE,pids=N,disk=SIZE\n"
	       "                         limits of a sandbox whose create names none (default\n"
	       "                         cpus=1,memory=1G,pids=1024,disk=10G; keys left out keep theirs)\n"
	       "  --max-resources cpus=C,memory=SIZE,pids=N,disk=SIZE\n"
	       "                         the most a create may ask for (default: this machine's CPUs\n"
	       "                         and memory, pids=32768, disk=50G)\n"
	       "  --uplink IFACE|netns:NAME  egress by policy: the interface (or network\n"
	       "                         namespace, also an absolute path) sandboxes' traffic\n"
	       "                         leaves through; without it sandboxes are loopback only\n"
	       "  --uplink-dns ADDR[:PORT]  the resolver allowed names are sent to (default: the\n"
	       "                         first nameserver of /etc/netns/NAME/resolv.conf or\n"
	       "                         /etc/resolv.conf)\n"
	       "  --deny-cidrs LIST      comma-separated networks no policy can reach (beside\n"
	       "                         the node, other sandboxes, link-local and metadata)\n"
	       "  --ports-domain D       a request whose Host is {port}-{id}.D is proxied to that\n"
	       "                         port of that sandbox, from its root\n"
	       "  --ports-answer-timeout SEC  a proxied request whose server inside sends no\n"
	       "                         answer's head this long is answered 504 (default 60)\n"
	       "  --snapshot-store s3://BUCKET[/PREFIX]  the S3 store snapshots are kept in (used\n"
	       "                         by snapshots; credentials from AWS_ACCESS_KEY_ID,\n"
	       "                         AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, region from\n"
	       "                         AWS_REGION); the bucket is checked at start\n"
	       "  --s3-endpoint URL      the store's endpoint, addressed path-style (default\n"
	       "                         AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS)\n"
	       "  --node-name NAME       this node's name, a DNS-1123 subdomain (its Kubernetes\n"
	       "                         name); every sandbox id it makes carries its tag: the\n"
	       "                         name itself if 1-20 of [a-z0-9-], else a short hash of it\n"
	       "                         (default: the host name up to its first '.')\n"
	       "  --snapshot-orphan-age SEC  the store's archives no manifest names are removed\n"
	       "                         once this old (default 3600)\n"
	       "  --snapshot-sweep-every SEC  how often the store is swept for them, beside the\n"
	       "                         sweep at start (default 900; 0: at start only)\n"
	       "  --peer NAME=URL        another node's supervisor (http://HOST:PORT), requests\n"
	       "                         for its sandboxes relayed there (repeatable)\n"
	       "  --cluster-key-file PATH  the cluster's node-to-node key (a Secret's file):\n"
	       "                         sent with relayed requests, asked of the ones received\n"
	       "  --kubeconfig FILE      join the cluster of this kubeconfig (its current context):\n"
	       "                         this node's Lease sbx-node-NAME renewed as a heartbeat with\n"
	       "                         its URL and capacity, sandbox Events, the other nodes read\n"
	       "                         back from their Leases\n"
	       "  --kube-context NAME    the kubeconfig's context to use (default: its current one)\n"
	       "  --kube-in-cluster      the same with the pod's service account (in a DaemonSet)\n"
	       "  --kube-namespace NS    the Leases' and Events' namespace (default: the pod's\n"
	       "                         in-cluster, else sbx-system)\n"
	       "  --advertise-url URL    this supervisor's API for the other nodes (default\n"
	       "                         http://<--listen>; required when listening on 0.0.0.0)\n"
	       "  --lease-duration SEC   the Lease's duration, renewed every quarter of it (default 40)\n"
	       "  --kube-queue N         Events held while the API server is away; the oldest is\n"
	       "                         dropped (and counted) beyond (default 256)\n"
	       "  --kube-token-file FILE the service-account token this node sends with the requests\n"
	       "                         it relays (default: the kubeconfig user's, or the pod's)\n"
	       "  --node-account USER    the one account a relayed request's token must review as\n"
	       "                         (TokenReview; default system:serviceaccount:NS:sbx-supervisor,\n"
	       "                         NS the Leases' namespace)\n"
	       "  --backend NAME         runc (default): sandboxes are local runc containers;\n"
	       "                         kubernetes: sandboxes are pods of this node made from\n"
	       "                         --pod-template files (needs --kubeconfig or\n"
	       "                         --kube-in-cluster; a pool per template, its size from\n"
	       "                         --pool-images NAME=N or --pool-size)\n"
	       "  --pod-template FILE    a sandbox pod template (YAML or JSON, a Pod; its name the\n"
	       "                         label sbx.dev/template or the file's name) (repeatable)\n"
	       "  --agent-dir DIR        where the pods' agents put their sockets, DIR/<pod UID>/\n"
	       "                         agent.sock (default /run/sbx/agents)\n"
	       "  --sandbox-namespace NS the sandbox pods' namespace (default sbx-sandboxes)\n"
	       "  --pod-ready-timeout SEC  a pod created until its agent listens (default 60)\n"
	       "  --log-level LEVEL      debug, info, warn, error (default info)\n"
	       "  --print-example        print the token and a working curl example at start\n"
	       "  --help, --version\n",
	       prog, prog);
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

static int parse_ms(const char *name, const char *s, unsigned lo_ms, unsigned hi_ms, unsigned *ms,
		    sbx_err *err)
{
	if (sup_config_parse_secs(s, lo_ms, hi_ms, ms, err) < 0)
		return sbx_err_wrap(err, "--%s", name);
	return 0;
}

static int parse_uint(const char *name, const char *s, uint64_t lo, uint64_t hi, unsigned *out,
		      sbx_err *err)
{
	uint64_t v = 0;
	if (sup_parse_size(s, hi, &v, err) < 0)
		return sbx_err_wrap(err, "--%s", name);
	if (v < lo)
		return sbx_err_set(err, -EINVAL, "--%s %s: at least %llu", name, s,
				   (unsigned long long)lo);
	*out = (unsigned)v;
	return 0;
}

static int parse_images(sup_config *c, const char *list, sbx_err *err)
{
	free(c->images_buf);
	c->images_buf = strdup(list);
	if (!c->images_buf)
		return sbx_err_sys(err, -ENOMEM, "--pool-images");
	c->nimages = 0;
	char *save = NULL;
	for (char *tok = strtok_r(c->images_buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		/* NAME=N: its own pool size (a ref holds no '=') */
		unsigned size = SUP_POOL_SIZE_UNSET;
		char *eq = strrchr(tok, '=');
		if (eq) {
			*eq = '\0';
			if (parse_uint("pool-images", eq + 1, 0, 256, &size, err) < 0)
				return err->code;
		}
		if (strcmp(tok, "host") != 0 && tok[0] != '/' && !sup_img_store_is_name(tok))
			return sbx_err_set(err, -EINVAL,
					   "--pool-images: %.200s is neither host, an absolute path nor an image name",
					   tok);
		for (size_t i = 0; i < c->nimages; i++)
			if (strcmp(c->images[i], tok) == 0)
				return sbx_err_set(err, -EINVAL, "--pool-images: %s twice", tok);
		if (c->nimages == SUP_MAX_IMAGES)
			return sbx_err_set(err, -EINVAL, "--pool-images: more than %d images",
					   SUP_MAX_IMAGES);
		c->image_sizes[c->nimages] = size;
		c->images[c->nimages++] = tok;
	}
	if (c->nimages == 0)
		return sbx_err_set(err, -EINVAL, "--pool-images: empty");
	return 0;
}

/* --reuse-paths /a,/b: reset's folders (sbx_proto_reset_path_ok) */
static int parse_reuse_paths(sup_config *c, const char *arg, sbx_err *err)
{
	free(c->reuse_paths_buf);
	c->nreuse_paths = 0;
	if (!(c->reuse_paths_buf = strdup(arg)))
		return sbx_err_sys(err, -ENOMEM, "--reuse-paths");
	char *save = NULL;
	for (char *tok = strtok_r(c->reuse_paths_buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!sbx_proto_reset_path_ok(tok, strlen(tok)))
			return sbx_err_set(err, -EINVAL,
					   "--reuse-paths: %.200s is not an absolute, normalised folder other than /",
					   tok);
		if (c->nreuse_paths == sizeof(c->reuse_paths) / sizeof(c->reuse_paths[0]))
			return sbx_err_set(err, -EINVAL, "--reuse-paths: more than %zu folders",
					   sizeof(c->reuse_paths) / sizeof(c->reuse_paths[0]));
		c->reuse_paths[c->nreuse_paths++] = tok;
	}
	if (c->nreuse_paths == 0)
		return sbx_err_set(err, -EINVAL, "--reuse-paths: empty");
	return 0;
}

/* --pool ISOLATION:IMAGE=N */
static int parse_pool(sup_config *c, const char *arg, sbx_err *err)
{
	const char *colon = strchr(arg, ':');
	const char *eq = strrchr(arg, '=');
	sup_pool_spec sp = { 0 };
	if (!colon || !eq || eq < colon)
		return sbx_err_set(err, -EINVAL, "--pool %s: want ISOLATION:IMAGE=N, e.g. gvisor:host=2",
				   arg);
	if (sup_isolation_parse(arg, (size_t)(colon - arg), &sp.isolation) < 0)
		return sbx_err_set(err, -EINVAL, "--pool %s: isolation %.*s: want runc or gvisor", arg,
				   (int)(colon - arg), arg);
	size_t ilen = (size_t)(eq - colon - 1);
	char name[SUP_IMG_REF_MAX + 1];
	snprintf(name, sizeof(name), "%.*s", (int)(ilen < sizeof(name) ? ilen : sizeof(name) - 1), colon + 1);
	if (strcmp(name, "host") != 0 && colon[1] != '/' && (ilen >= sizeof(name) || !sup_img_store_is_name(name)))
		return sbx_err_set(err, -EINVAL, "--pool %s: the image is neither host, an absolute "
				   "path nor an image name", arg);
	unsigned size = 0;
	if (parse_uint("pool", eq + 1, 0, 256, &size, err) < 0)
		return err->code;
	sp.size = size;
	for (size_t i = 0; i < c->npools; i++)
		if (c->pools[i].isolation == sp.isolation && strlen(c->pools[i].image) == ilen &&
		    strncmp(c->pools[i].image, colon + 1, ilen) == 0)
			return sbx_err_set(err, -EINVAL, "--pool %s: that pool is given twice", arg);
	if (c->npools == SUP_MAX_POOLS)
		return sbx_err_set(err, -EINVAL, "--pool: more than %d pools", SUP_MAX_POOLS);
	sp.image = strndup(colon + 1, ilen);
	if (!sp.image)
		return sbx_err_set(err, -ENOMEM, "--pool");
	c->pools[c->npools++] = sp;
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

enum {
	OPT_LISTEN = 256, OPT_STATE_DIR, OPT_POOL_SIZE, OPT_POOL_IMAGES, OPT_RUNTIME, OPT_AGENT,
	OPT_TOKEN, OPT_MAX_BODY, OPT_MAX_OUTPUT, OPT_MAX_OUTPUT_TOTAL, OPT_MAX_EXECS, OPT_ALLOW_ROOT, OPT_MAX_SANDBOXES, OPT_WORKERS,
	OPT_ACQUIRE_TIMEOUT, OPT_READY_TIMEOUT, OPT_MAX_TIMEOUT, OPT_LOG_LEVEL, OPT_PRINT_EXAMPLE, OPT_HELP,
	OPT_VERSION, OPT_POLICY, OPT_MAX_UPLOAD, OPT_MAX_CONNS, OPT_HEAD_TIMEOUT, OPT_BODY_TIMEOUT,
	OPT_IDLE_TIMEOUT, OPT_DRAIN_TIMEOUT, OPT_DESTROY_ON_EXIT, OPT_AGENT_GRACE, OPT_AGENT_IDLE, OPT_AGENT_PING,
	OPT_AGENT_PING_TIMEOUT, OPT_AGENT_FRAME, OPT_AGENT_MAX_STREAMS, OPT_AGENT_MAX_WAITING,
	OPT_AGENT_MAX_QUEUED, OPT_POOL, OPT_RUNSC, OPT_RUNSC_ROOT, OPT_RUNSC_PLATFORM,
	OPT_DEFAULT_RESOURCES, OPT_MAX_RESOURCES, OPT_TENANTS, OPT_METRICS_LISTEN,
	OPT_UPLINK, OPT_UPLINK_DNS, OPT_DENY_CIDRS, OPT_IMPORT_IMAGE,
	OPT_IMAGE_MAX_LAYER, OPT_IMAGE_MAX_IMPORT, OPT_IMAGE_ALLOW_SETID, OPT_REMOVE_IMAGE,
	OPT_SKOPEO, OPT_IMAGE_PULL_DIR, OPT_IMAGE_PULL_TIMEOUT,
	OPT_MCP_IDLE, OPT_MCP_ORIGIN, OPT_PORTS_DOMAIN, OPT_PORTS_ANSWER, OPT_SNAPSHOT_STORE, OPT_S3_ENDPOINT,
	OPT_NODE_NAME, OPT_PEER, OPT_CLUSTER_KEY_FILE,
	OPT_POOL_REUSE, OPT_REUSE_PATHS,
	OPT_KUBECONFIG, OPT_KUBE_CONTEXT, OPT_KUBE_IN_CLUSTER, OPT_KUBE_NAMESPACE,
	OPT_ADVERTISE_URL, OPT_LEASE_DURATION, OPT_KUBE_QUEUE,
	/* node-to-node auth in a cluster (nodeauth) */
	OPT_KUBE_TOKEN_FILE, OPT_NODE_ACCOUNT,
	OPT_BACKEND, OPT_POD_TEMPLATE, OPT_AGENT_DIR, OPT_SANDBOX_NAMESPACE, OPT_POD_READY_TIMEOUT,
	OPT_SNAPSHOT_ORPHAN_AGE, OPT_SNAPSHOT_SWEEP_EVERY,
};

int sup_config_parse(sup_config *c, int argc, char **argv, sbx_err *err)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, OPT_LISTEN },
		{ "state-dir", required_argument, NULL, OPT_STATE_DIR },
		{ "pool-size", required_argument, NULL, OPT_POOL_SIZE },
		{ "pool-images", required_argument, NULL, OPT_POOL_IMAGES },
		{ "pool", required_argument, NULL, OPT_POOL },
		{ "pool-reuse", no_argument, NULL, OPT_POOL_REUSE },
		{ "reuse-paths", required_argument, NULL, OPT_REUSE_PATHS },
		{ "import-image", required_argument, NULL, OPT_IMPORT_IMAGE },
		{ "image-max-layer", required_argument, NULL, OPT_IMAGE_MAX_LAYER },
		{ "image-max-import", required_argument, NULL, OPT_IMAGE_MAX_IMPORT },
		{ "image-allow-setid", no_argument, NULL, OPT_IMAGE_ALLOW_SETID },
		{ "remove-image", required_argument, NULL, OPT_REMOVE_IMAGE },
		{ "skopeo", required_argument, NULL, OPT_SKOPEO },
		{ "image-pull-dir", required_argument, NULL, OPT_IMAGE_PULL_DIR },
		{ "image-pull-timeout", required_argument, NULL, OPT_IMAGE_PULL_TIMEOUT },
		{ "runtime", required_argument, NULL, OPT_RUNTIME },
		{ "runsc", required_argument, NULL, OPT_RUNSC },
		{ "runsc-root", required_argument, NULL, OPT_RUNSC_ROOT },
		{ "runsc-platform", required_argument, NULL, OPT_RUNSC_PLATFORM },
		{ "agent", required_argument, NULL, OPT_AGENT },
		{ "token", required_argument, NULL, OPT_TOKEN },
		{ "max-body", required_argument, NULL, OPT_MAX_BODY },
		{ "max-upload", required_argument, NULL, OPT_MAX_UPLOAD },
		{ "policy", required_argument, NULL, OPT_POLICY },
		{ "tenants", required_argument, NULL, OPT_TENANTS },
		{ "metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN },
		{ "max-output", required_argument, NULL, OPT_MAX_OUTPUT },
		{ "max-output-total", required_argument, NULL, OPT_MAX_OUTPUT_TOTAL },
		{ "max-execs", required_argument, NULL, OPT_MAX_EXECS },
		{ "allow-root", no_argument, NULL, OPT_ALLOW_ROOT },
		{ "max-sandboxes", required_argument, NULL, OPT_MAX_SANDBOXES },
		{ "workers", required_argument, NULL, OPT_WORKERS },
		{ "acquire-timeout", required_argument, NULL, OPT_ACQUIRE_TIMEOUT },
		{ "ready-timeout", required_argument, NULL, OPT_READY_TIMEOUT },
		{ "max-timeout", required_argument, NULL, OPT_MAX_TIMEOUT },
		{ "max-connections", required_argument, NULL, OPT_MAX_CONNS },
		{ "head-timeout", required_argument, NULL, OPT_HEAD_TIMEOUT },
		{ "body-timeout", required_argument, NULL, OPT_BODY_TIMEOUT },
		{ "idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT },
		{ "drain-timeout", required_argument, NULL, OPT_DRAIN_TIMEOUT },
		{ "destroy-on-exit", no_argument, NULL, OPT_DESTROY_ON_EXIT },
		{ "agent-grace", required_argument, NULL, OPT_AGENT_GRACE },
		{ "agent-idle-timeout", required_argument, NULL, OPT_AGENT_IDLE },
		{ "mcp-idle-timeout", required_argument, NULL, OPT_MCP_IDLE },
		{ "mcp-allow-origin", required_argument, NULL, OPT_MCP_ORIGIN },
		{ "agent-ping-interval", required_argument, NULL, OPT_AGENT_PING },
		{ "agent-ping-timeout", required_argument, NULL, OPT_AGENT_PING_TIMEOUT },
		{ "agent-frame-timeout", required_argument, NULL, OPT_AGENT_FRAME },
		{ "agent-max-streams", required_argument, NULL, OPT_AGENT_MAX_STREAMS },
		{ "agent-max-waiting", required_argument, NULL, OPT_AGENT_MAX_WAITING },
		{ "agent-max-queued", required_argument, NULL, OPT_AGENT_MAX_QUEUED },
		{ "default-resources", required_argument, NULL, OPT_DEFAULT_RESOURCES },
		{ "max-resources", required_argument, NULL, OPT_MAX_RESOURCES },
		{ "uplink", required_argument, NULL, OPT_UPLINK },
		{ "uplink-dns", required_argument, NULL, OPT_UPLINK_DNS },
		{ "deny-cidrs", required_argument, NULL, OPT_DENY_CIDRS },
		{ "ports-domain", required_argument, NULL, OPT_PORTS_DOMAIN },
		{ "ports-answer-timeout", required_argument, NULL, OPT_PORTS_ANSWER },
		{ "snapshot-store", required_argument, NULL, OPT_SNAPSHOT_STORE },
		{ "s3-endpoint", required_argument, NULL, OPT_S3_ENDPOINT },
		{ "snapshot-orphan-age", required_argument, NULL, OPT_SNAPSHOT_ORPHAN_AGE },
		{ "snapshot-sweep-every", required_argument, NULL, OPT_SNAPSHOT_SWEEP_EVERY },
		{ "node-name", required_argument, NULL, OPT_NODE_NAME },
		{ "peer", required_argument, NULL, OPT_PEER },
		{ "cluster-key-file", required_argument, NULL, OPT_CLUSTER_KEY_FILE },
		{ "kubeconfig", required_argument, NULL, OPT_KUBECONFIG },
		{ "kube-context", required_argument, NULL, OPT_KUBE_CONTEXT },
		{ "kube-in-cluster", no_argument, NULL, OPT_KUBE_IN_CLUSTER },
		{ "kube-namespace", required_argument, NULL, OPT_KUBE_NAMESPACE },
		{ "advertise-url", required_argument, NULL, OPT_ADVERTISE_URL },
		{ "lease-duration", required_argument, NULL, OPT_LEASE_DURATION },
		{ "kube-queue", required_argument, NULL, OPT_KUBE_QUEUE },
		/* node-to-node auth in a cluster */
		{ "kube-token-file", required_argument, NULL, OPT_KUBE_TOKEN_FILE },
		{ "node-account", required_argument, NULL, OPT_NODE_ACCOUNT },
		{ "backend", required_argument, NULL, OPT_BACKEND },
		{ "pod-template", required_argument, NULL, OPT_POD_TEMPLATE },
		{ "agent-dir", required_argument, NULL, OPT_AGENT_DIR },
		{ "sandbox-namespace", required_argument, NULL, OPT_SANDBOX_NAMESPACE },
		{ "pod-ready-timeout", required_argument, NULL, OPT_POD_READY_TIMEOUT },
		{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
		{ "print-example", no_argument, NULL, OPT_PRINT_EXAMPLE },
		{ "help", no_argument, NULL, OPT_HELP },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ NULL, 0, NULL, 0 },
	};
	int o;
	unsigned u = 0;
	uint64_t sz = 0;
	optind = 1;
	opterr = 0;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case OPT_LISTEN:
			if (sup_config_parse_listen(optarg, c->listen_host, sizeof(c->listen_host),
						    &c->listen_port, err) < 0)
				return err->code;
			break;
		case OPT_STATE_DIR:
			if (optarg[0] != '/')
				return sbx_err_set(err, -EINVAL, "--state-dir must be absolute");
			c->state_dir = optarg;
			break;
		case OPT_POOL_SIZE:
			if (parse_uint("pool-size", optarg, 0, 256, &c->pool_size, err) < 0)
				return err->code;
			break;
		case OPT_POOL_IMAGES:
			if (parse_images(c, optarg, err) < 0)
				return err->code;
			break;
		case OPT_POOL:
			if (parse_pool(c, optarg, err) < 0)
				return err->code;
			break;
		case OPT_POOL_REUSE:
			c->pool_reuse = true;
			break;
		case OPT_REUSE_PATHS:
			if (parse_reuse_paths(c, optarg, err) < 0)
				return err->code;
			break;
		case OPT_IMPORT_IMAGE:
			if (c->nimports == SUP_MAX_IMAGES)
				return sbx_err_set(err, -EINVAL, "--import-image: more than %d", SUP_MAX_IMAGES);
			if (!strchr(optarg, '/'))
				return sbx_err_set(err, -EINVAL, "--import-image %.200s: want [NAME=]PATH", optarg);
			c->imports[c->nimports++] = optarg;
			break;
		case OPT_REMOVE_IMAGE:
			if (c->nremoves == SUP_MAX_IMAGES)
				return sbx_err_set(err, -EINVAL, "--remove-image: more than %d", SUP_MAX_IMAGES);
			if (!sup_img_store_is_name(optarg))
				return sbx_err_set(err, -EINVAL, "--remove-image %.200s: not an image name", optarg);
			c->removes[c->nremoves++] = optarg;
			break;
		case OPT_IMAGE_MAX_LAYER:
			if (sup_parse_size(optarg, 1ull << 50, &c->image_max_layer, err) < 0)
				return sbx_err_wrap(err, "--image-max-layer");
			break;
		case OPT_IMAGE_MAX_IMPORT:
			if (sup_parse_size(optarg, 1ull << 50, &c->image_max_import, err) < 0)
				return sbx_err_wrap(err, "--image-max-import");
			break;
		case OPT_IMAGE_ALLOW_SETID:
			c->image_allow_setid = true;
			break;
		case OPT_SKOPEO:
			c->skopeo = optarg;
			break;
		case OPT_IMAGE_PULL_DIR:
			if (optarg[0] != '/')
				return sbx_err_set(err, -EINVAL, "--image-pull-dir: want an absolute path");
			c->image_pull_dir = optarg;
			break;
		case OPT_IMAGE_PULL_TIMEOUT:
			if (sup_config_parse_secs(optarg, 100, 86400000, &c->image_pull_timeout_ms, err) < 0)
				return sbx_err_wrap(err, "--image-pull-timeout");
			break;
		case OPT_RUNTIME:
			c->runtime = optarg;
			break;
		case OPT_RUNSC:
			c->runsc = optarg;
			c->runsc_given = true;
			break;
		case OPT_RUNSC_ROOT:
			if (optarg[0] != '/')
				return sbx_err_set(err, -EINVAL, "--runsc-root must be absolute");
			c->runsc_root = optarg;
			break;
		case OPT_RUNSC_PLATFORM:
			if (strcmp(optarg, "ptrace") != 0 && strcmp(optarg, "kvm") != 0)
				return sbx_err_set(err, -EINVAL, "--runsc-platform %s: ptrace or kvm", optarg);
			c->runsc_platform = optarg;
			break;
		case OPT_AGENT:
			c->agent_path = optarg;
			break;
		case OPT_TOKEN:
			if (strlen(optarg) < 16 || strlen(optarg) > 256)
				return sbx_err_set(err, -EINVAL, "--token: 16 to 256 characters");
			c->token = optarg;
			break;
		case OPT_POLICY:
			c->policy_file = optarg;
			break;
		case OPT_TENANTS:
			c->tenants_file = optarg;
			break;
		case OPT_METRICS_LISTEN:
			if (sup_config_parse_listen(optarg, c->metrics_host, sizeof(c->metrics_host),
						    &c->metrics_port, err) < 0)
				return sbx_err_wrap(err, "--metrics-listen");
			c->metrics_listen = true;
			break;
		case OPT_MAX_BODY:
			if (sup_parse_size(optarg, 1ull << 30, &sz, err) < 0)
				return sbx_err_wrap(err, "--max-body");
			if (sz < 1024)
				return sbx_err_set(err, -EINVAL, "--max-body: at least 1024");
			c->max_body = (size_t)sz;
			break;
		case OPT_MAX_UPLOAD:
			if (sup_parse_size(optarg, UINT64_MAX / 2, &sz, err) < 0)
				return sbx_err_wrap(err, "--max-upload");
			c->max_upload = sz;
			break;
		case OPT_MAX_OUTPUT:
			if (sup_parse_size(optarg, 1ull << 30, &sz, err) < 0)
				return sbx_err_wrap(err, "--max-output");
			c->max_output = (size_t)sz;
			break;
		case OPT_MAX_OUTPUT_TOTAL:
			if (sup_parse_size(optarg, 64ull << 30, &sz, err) < 0)
				return sbx_err_wrap(err, "--max-output-total");
			c->max_output_total = (size_t)sz;
			break;
		case OPT_MAX_EXECS:
			if (parse_uint("max-execs", optarg, 1, 1000, &c->max_execs, err) < 0)
				return err->code;
			break;
		case OPT_DESTROY_ON_EXIT:
			c->destroy_on_exit = true;
			break;
		case OPT_ALLOW_ROOT:
			c->allow_root = true;
			break;
		case OPT_MAX_SANDBOXES:
			if (parse_uint("max-sandboxes", optarg, 1, 65536, &c->max_sandboxes, err) < 0)
				return err->code;
			break;
		case OPT_WORKERS:
			if (parse_uint("workers", optarg, 1, 64, &c->workers, err) < 0)
				return err->code;
			break;
		case OPT_ACQUIRE_TIMEOUT:
			if (parse_uint("acquire-timeout", optarg, 1, 3600, &u, err) < 0)
				return err->code;
			c->acquire_timeout_ms = u * 1000;
			break;
		case OPT_READY_TIMEOUT:
			if (parse_uint("ready-timeout", optarg, 1, 600, &u, err) < 0)
				return err->code;
			c->ready_timeout_ms = u * 1000;
			break;
		case OPT_MAX_TIMEOUT:
			if (parse_uint("max-timeout", optarg, 1, 366u * 24 * 3600, &c->max_timeout_s, err) < 0)
				return err->code;
			break;
		case OPT_MAX_CONNS:
			if (parse_uint("max-connections", optarg, 1, 1000000, &c->max_conns, err) < 0)
				return err->code;
			break;
		case OPT_HEAD_TIMEOUT:
			if (parse_uint("head-timeout", optarg, 1, 3600, &c->head_timeout_s, err) < 0)
				return err->code;
			break;
		case OPT_BODY_TIMEOUT:
			if (parse_uint("body-timeout", optarg, 1, 3600, &c->body_timeout_s, err) < 0)
				return err->code;
			break;
		case OPT_IDLE_TIMEOUT:
			if (parse_uint("idle-timeout", optarg, 1, 86400, &c->idle_timeout_s, err) < 0)
				return err->code;
			break;
		case OPT_DRAIN_TIMEOUT:
			if (parse_uint("drain-timeout", optarg, 0, 3600, &c->drain_timeout_s, err) < 0)
				return err->code;
			break;
		case OPT_AGENT_GRACE:
			if (parse_ms("agent-grace", optarg, 0, 3600000, &c->agent.grace_ms, err) < 0)
				return err->code;
			break;
		case OPT_MCP_IDLE:
			if (parse_ms("mcp-idle-timeout", optarg, 100, 86400000, &c->mcp_idle_ms, err) < 0)
				return -EINVAL;
			break;
		case OPT_MCP_ORIGIN:
			c->mcp_origins = optarg;
			break;
		case OPT_AGENT_IDLE:
			if (parse_ms("agent-idle-timeout", optarg, 10, 86400000, &c->agent.idle_ms, err) < 0)
				return err->code;
			break;
		case OPT_AGENT_PING:
			if (parse_ms("agent-ping-interval", optarg, 10, 86400000, &c->agent.ping_after_ms, err) < 0)
				return err->code;
			break;
		case OPT_AGENT_PING_TIMEOUT:
			if (parse_ms("agent-ping-timeout", optarg, 10, 3600000, &c->agent.ping_timeout_ms,
				     err) < 0)
				return err->code;
			break;
		case OPT_AGENT_FRAME:
			if (parse_ms("agent-frame-timeout", optarg, 10, 3600000, &c->agent.frame_ms, err) < 0)
				return err->code;
			break;
		case OPT_AGENT_MAX_STREAMS:
			if (parse_uint("agent-max-streams", optarg, 1, 65536, &c->agent.max_streams, err) < 0)
				return err->code;
			break;
		case OPT_AGENT_MAX_WAITING:
			if (parse_uint("agent-max-waiting", optarg, 1, 65536, &c->agent.max_waiting, err) < 0)
				return err->code;
			break;
		case OPT_AGENT_MAX_QUEUED:
			if (sup_parse_size(optarg, 1ull << 30, &sz, err) < 0)
				return sbx_err_wrap(err, "--agent-max-queued");
			if (sz < 65536)
				return sbx_err_set(err, -EINVAL, "--agent-max-queued: at least 64K");
			c->agent.max_queued = (size_t)sz;
			break;
		case OPT_DEFAULT_RESOURCES:
			if (sup_resources_parse_spec("--default-resources", optarg, &c->res_default, err) < 0)
				return err->code;
			break;
		case OPT_MAX_RESOURCES:
			if (sup_resources_parse_spec("--max-resources", optarg, &c->res_max, err) < 0)
				return err->code;
			break;
		case OPT_UPLINK:
			c->uplink = optarg;
			break;
		case OPT_UPLINK_DNS:
			c->uplink_dns = optarg;
			break;
		case OPT_DENY_CIDRS:
			c->deny_cidrs = optarg;
			break;
		case OPT_PORTS_DOMAIN:
			/* Lower-case host name characters: Host is matched against it. */
			if (!optarg[0] || optarg[0] == '.' || strlen(optarg) > 200 ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789-.") != strlen(optarg))
				return sbx_err_set(err, -EINVAL, "--ports-domain: want a lower-case domain (sbx.example.com)");
			c->ports_domain = optarg;
			break;
		case OPT_PORTS_ANSWER:
			if (parse_ms("ports-answer-timeout", optarg, 100, 86400000, &c->ports_answer_ms,
				     err) < 0)
				return -EINVAL;
			break;
		/* The whole URL and the endpoint are checked where the store is
		 * opened at start (sup_s3_open): this file stays off the network's
		 * modules. */
		case OPT_SNAPSHOT_STORE:
			if (strncmp(optarg, "s3://", 5) != 0 || !optarg[5] || optarg[5] == '/')
				return sbx_err_set(err, -EINVAL, "--snapshot-store %s: want s3://bucket[/prefix]", optarg);
			c->snapshot_store = optarg;
			break;
		case OPT_S3_ENDPOINT:
			if (strncmp(optarg, "http://", 7) != 0 && strncmp(optarg, "https://", 8) != 0)
				return sbx_err_set(err, -EINVAL, "--s3-endpoint %s: want an http:// or https:// URL", optarg);
			c->s3_endpoint = optarg;
			break;
		case OPT_SNAPSHOT_ORPHAN_AGE:
			if (parse_uint("snapshot-orphan-age", optarg, 1, 30u * 86400, &c->snapshot_orphan_age_s, err) < 0)
				return err->code;
			break;
		case OPT_SNAPSHOT_SWEEP_EVERY:
			if (parse_uint("snapshot-sweep-every", optarg, 0, 86400, &c->snapshot_sweep_every_s, err) < 0)
				return err->code;
			break;
		case OPT_NODE_NAME:
			if (sup_nodeid_name_check(optarg, err) < 0)
				return sbx_err_wrap(err, "--node-name");
			snprintf(c->node_name, sizeof(c->node_name), "%s", optarg);
			break;
		/* The URL is checked where the directory is made (sup_dir_static). */
		case OPT_PEER: {
			const char *eq = strchr(optarg, '=');
			char name[SUP_NODE_NAME_MAX + 2];
			if (!eq || (size_t)(eq - optarg) >= sizeof(name))
				return sbx_err_set(err, -EINVAL, "--peer %.64s: want NAME=http://HOST:PORT", optarg);
			snprintf(name, sizeof(name), "%.*s", (int)(eq - optarg), optarg);
			if (sup_nodeid_name_check(name, err) < 0)
				return sbx_err_wrap(err, "--peer");
			if (c->npeers == SUP_MAX_PEERS)
				return sbx_err_set(err, -EINVAL, "--peer: at most %d", SUP_MAX_PEERS);
			c->peers[c->npeers++] = optarg;
			break;
		}
		case OPT_CLUSTER_KEY_FILE:
			c->cluster_key_file = optarg;
			break;
		case OPT_KUBECONFIG:
			c->kubeconfig = optarg;
			break;
		case OPT_KUBE_CONTEXT:
			c->kube_context = optarg;
			break;
		case OPT_KUBE_IN_CLUSTER:
			c->kube_in_cluster = true;
			break;
		case OPT_KUBE_NAMESPACE:
			if (!optarg[0] || strlen(optarg) > 63 || optarg[0] == '-' ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(optarg))
				return sbx_err_set(err, -EINVAL, "--kube-namespace %s: want a DNS label", optarg);
			c->kube_namespace = optarg;
			break;
		case OPT_ADVERTISE_URL:
			if ((strncmp(optarg, "http://", 7) != 0 && strncmp(optarg, "https://", 8) != 0) ||
			    strlen(optarg) > 200)
				return sbx_err_set(err, -EINVAL, "--advertise-url %s: want an http:// or https:// URL", optarg);
			c->advertise_url = optarg;
			break;
		case OPT_LEASE_DURATION:
			if (parse_uint("lease-duration", optarg, 4, 3600, &c->lease_s, err) < 0)
				return -EINVAL;
			break;
		case OPT_KUBE_QUEUE:
			if (parse_uint("kube-queue", optarg, 1, 65536, &c->kube_queue, err) < 0)
				return -EINVAL;
			break;
		/* node-to-node auth in a cluster */
		case OPT_KUBE_TOKEN_FILE:
			c->kube_token_file = optarg;
			break;
		case OPT_NODE_ACCOUNT:
			if (strncmp(optarg, "system:serviceaccount:", 22) != 0 || strlen(optarg) > 255 ||
			    !strchr(optarg + 22, ':'))
				return sbx_err_set(err, -EINVAL,
						   "--node-account %.64s: want system:serviceaccount:NS:NAME",
						   optarg);
			c->node_account = optarg;
			break;
		case OPT_BACKEND:
			if (strcmp(optarg, "runc") != 0 && strcmp(optarg, "kubernetes") != 0)
				return sbx_err_set(err, -EINVAL, "--backend %s: runc or kubernetes", optarg);
			c->backend_kube = strcmp(optarg, "kubernetes") == 0;
			break;
		case OPT_POD_TEMPLATE:
			if (c->npod_templates == SUP_MAX_IMAGES)
				return sbx_err_set(err, -EINVAL, "--pod-template: at most %d", SUP_MAX_IMAGES);
			c->pod_templates[c->npod_templates++] = optarg;
			break;
		case OPT_AGENT_DIR:
			if (optarg[0] != '/' || strlen(optarg) > 60)
				return sbx_err_set(err, -EINVAL,
						   "--agent-dir: an absolute path of at most 60 bytes (a socket path "
						   "below it must fit in 108)");
			c->agent_dir = optarg;
			break;
		case OPT_SANDBOX_NAMESPACE:
			if (!optarg[0] || strlen(optarg) > 63 || optarg[0] == '-' ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(optarg))
				return sbx_err_set(err, -EINVAL, "--sandbox-namespace %s: want a DNS label", optarg);
			c->sandbox_namespace = optarg;
			break;
		case OPT_POD_READY_TIMEOUT:
			if (parse_ms("pod-ready-timeout", optarg, 100, 3600000, &c->pod_ready_ms, err) < 0)
				return -EINVAL;
			break;
		case OPT_LOG_LEVEL: {
			sup_log_level l;
			if (sup_log_level_parse(optarg, &l) < 0)
				return sbx_err_set(err, -EINVAL, "--log-level %s: debug, info, warn or error", optarg);
			c->log_level = (int)l;
			break;
		}
		case OPT_PRINT_EXAMPLE:
			c->print_example = true;
			break;
		case OPT_HELP:
			sup_config_usage(argv[0]);
			return 1;
		case OPT_VERSION:
			printf("sandbox-supervisor 0.1.0\n");
			return 1;
		default:
			if (optopt)
				return sbx_err_set(err, -EINVAL, "option -%c: unknown or missing argument", optopt);
			return sbx_err_set(err, -EINVAL, "%s: unknown option or missing argument",
					   argv[optind - 1]);
		}
	}
	if (optind < argc)
		return sbx_err_set(err, -EINVAL, "unexpected argument %s", argv[optind]);
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
