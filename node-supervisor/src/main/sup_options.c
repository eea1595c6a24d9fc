/* The supervisor's options: one row each (sup_opt.h). The command line,
 * the config file, --help and the README's table all read this table; an
 * option is added here, once, and used where its field is read. */
#include <errno.h>
#include <string.h>

#include "sup_img_store.h"
#include "sup_options_custom.h"

#define F SUP_OPT_FIELD
#define GROUP(title) { .type = SUP_OPT_GROUP, .help = (title) }

/* Checks of string values, each naming label as every error does. */

static int abs_path(const char *label, const char *v, sbx_err *err)
{
	if (v[0] != '/')
		return sbx_err_set(err, -EINVAL, "%s %.200s: want an absolute path", label, v);
	return 0;
}

/* The token itself never goes into a message. */
static int token_len(const char *label, const char *v, sbx_err *err)
{
	if (strlen(v) < 16 || strlen(v) > 256)
		return sbx_err_set(err, -EINVAL, "%s: 16 to 256 characters", label);
	return 0;
}

static int import_ref(const char *label, const char *v, sbx_err *err)
{
	if (!strchr(v, '/'))
		return sbx_err_set(err, -EINVAL, "%s %.200s: want [NAME=]PATH", label, v);
	return 0;
}

static int image_name(const char *label, const char *v, sbx_err *err)
{
	if (!sup_img_store_is_name(v))
		return sbx_err_set(err, -EINVAL, "%s %.200s: not an image name", label, v);
	return 0;
}

static int http_url(const char *label, const char *v, sbx_err *err)
{
	if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
		return sbx_err_set(err, -EINVAL, "%s %.200s: want an http:// or https:// URL", label, v);
	return 0;
}

static int advertise_url(const char *label, const char *v, sbx_err *err)
{
	if (strlen(v) > 200)
		return sbx_err_set(err, -EINVAL, "%s %.64s...: at most 200 bytes", label, v);
	return http_url(label, v, err);
}

/* Lower-case host name characters: Host is matched against it. */
static int ports_domain(const char *label, const char *v, sbx_err *err)
{
	if (!v[0] || v[0] == '.' || strlen(v) > 200 ||
	    strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-.") != strlen(v))
		return sbx_err_set(err, -EINVAL, "%s: want a lower-case domain (sbx.example.com)", label);
	return 0;
}

/* The whole URL and the endpoint are checked where the store is opened at
 * start (sup_s3_open): the options stay off the network's modules. */
static int s3_url(const char *label, const char *v, sbx_err *err)
{
	if (strncmp(v, "s3://", 5) != 0 || !v[5] || v[5] == '/')
		return sbx_err_set(err, -EINVAL, "%s %.200s: want s3://bucket[/prefix]", label, v);
	return 0;
}

/* NAME=URL; the URL is checked where the directory is made (sup_dir_static). */
static int peer(const char *label, const char *v, sbx_err *err)
{
	const char *eq = strchr(v, '=');
	char name[SUP_NODE_NAME_MAX + 2];
	if (!eq || (size_t)(eq - v) >= sizeof(name))
		return sbx_err_set(err, -EINVAL, "%s %.64s: want NAME=http://HOST:PORT", label, v);
	snprintf(name, sizeof(name), "%.*s", (int)(eq - v), v);
	if (sup_nodeid_name_check(name, err) < 0)
		return sbx_err_wrap(err, "%s", label);
	return 0;
}

/* NAME=IMAGE: an E2B template's name (no '=') and an image (may be empty:
 * sbx's default image). */
static int e2b_template(const char *label, const char *v, sbx_err *err)
{
	const char *eq = strchr(v, '=');
	if (!eq || eq == v || eq - v > 255 || strlen(eq + 1) > 255)
		return sbx_err_set(err, -EINVAL, "%s %.64s: want NAME=IMAGE", label, v);
	return 0;
}

static int dns_label(const char *label, const char *v, sbx_err *err)
{
	if (!v[0] || strlen(v) > 63 || v[0] == '-' ||
	    strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(v))
		return sbx_err_set(err, -EINVAL, "%s %.200s: want a DNS label", label, v);
	return 0;
}

static int node_account(const char *label, const char *v, sbx_err *err)
{
	if (strncmp(v, "system:serviceaccount:", 22) != 0 || strlen(v) > 255 || !strchr(v + 22, ':'))
		return sbx_err_set(err, -EINVAL, "%s %.64s: want system:serviceaccount:NS:NAME", label, v);
	return 0;
}

/* A socket path below it must fit in 108 bytes. */
static int agent_dir(const char *label, const char *v, sbx_err *err)
{
	if (v[0] != '/' || strlen(v) > 60)
		return sbx_err_set(err, -EINVAL, "%s: an absolute path of at most 60 bytes (a socket "
				   "path below it must fit in 108)", label);
	return 0;
}

/* In sup_log_level's order. */
static const char *const log_levels[] = { "debug", "info", "warn", "error", NULL };
static const char *const backends[] = { "runc", "kubernetes", NULL };
static const char *const platforms[] = { "ptrace", "kvm", NULL };

const sup_opt sup_options[] = {
	GROUP("The API"),
	{ "listen", SUP_OPT_CUSTOM, "HOST:PORT", F(listen_host), .off2 = offsetof(sup_config, listen_port),
	  .def = "127.0.0.1:7070", .parse = sup_optc_listen_parse, .show = sup_optc_listen_show,
	  .help = "HTTP address; [v6]:PORT for IPv6, port 0: any (printed at start)", .example = "[::1]:0" },
	{ "state-dir", SUP_OPT_STR, "DIR", F(state_dir), .def = "/var/lib/sbx", .check = abs_path,
	  .help = "state folder: the catalog, bundles, images, disks", .example = "/srv/sbx" },
	{ "token", SUP_OPT_STR, "T", F(token), .check = token_len, .flags = SUP_OPT_SECRET,
	  .def_doc = "<state-dir>/token, made at first start",
	  .help = "API token, 16 to 256 characters", .example = "0123456789abcdef0123" },
	{ "tenants", SUP_OPT_STR, "FILE", F(tenants_file), .def_doc = "none, the token is the one tenant",
	  .help = "tenants, their token hashes, quotas and settings, JSON (reread on SIGHUP)",
	  .example = "/etc/sbx/tenants.json" },
	{ "policy", SUP_OPT_STR, "FILE", F(policy_file),
	  .def_doc = "/workspace, /tmp, /home/sandbox read-write",
	  .help = "file access policy, JSON", .example = "/etc/sbx/policy.json" },
	{ "metrics-listen", SUP_OPT_CUSTOM, "HOST:PORT", F(metrics_host),
	  .off2 = offsetof(sup_config, metrics_port), SUP_OPT_GIVEN(metrics_listen),
	  .parse = sup_optc_listen_parse, .show = sup_optc_listen_show,
	  .help = "also serve GET /metrics there, without a token (for a scraper on this node)",
	  .example = "127.0.0.1:9090" },
	/* the files are read where TLS is made (sup_tls_new), and again on SIGHUP */
	{ "tls-cert", SUP_OPT_STR, "FILE", F(tls_cert), .def_doc = "none: plain HTTP",
	  .help = "serve HTTPS (TLS 1.2/1.3) on --listen and --metrics-listen with this PEM "
		  "certificate (then its chain); reread on SIGHUP", .example = "/etc/sbx/tls/tls.crt" },
	{ "tls-key", SUP_OPT_STR, "FILE", F(tls_key),
	  .help = "its PEM private key (with --tls-cert)", .example = "/etc/sbx/tls/tls.key" },
	{ "max-connections", SUP_OPT_UINT, NULL, F(max_conns), .lo = 1, .hi = 1000000, .def = "16384",
	  .help = "HTTP connections held at once (lowered to what the fd limit leaves)" },
	{ "tenant-max-requests", SUP_OPT_UINT, NULL, F(tenant_max_requests), .hi = 1000000,
	  .def_doc = "a quarter of --max-connections with --tenants, no bound without",
	  .help = "requests one tenant may have in flight at once, streams and WebSockets included "
		  "(past it: 429)" },
	{ "max-body", SUP_OPT_SIZE, NULL, F(max_body), .lo = 1024, .hi = 1ull << 30, .def = "1M",
	  .help = "largest request body" },
	{ "max-upload", SUP_OPT_SIZE, NULL, F(max_upload), .hi = UINT64_MAX / 2, .def_doc = "no limit",
	  .help = "largest upload, PUT /files" },
	{ "head-timeout", SUP_OPT_UINT, "SEC", F(head_timeout_s), .lo = 1, .hi = 3600, .def = "10",
	  .help = "to send a request head" },
	{ "body-timeout", SUP_OPT_UINT, "SEC", F(body_timeout_s), .lo = 1, .hi = 3600, .def = "60",
	  .help = "to send a request body read whole; between bytes of a streamed one" },
	{ "idle-timeout", SUP_OPT_UINT, "SEC", F(idle_timeout_s), .lo = 1, .hi = 86400, .def = "60",
	  .help = "keep-alive between requests; a client not reading" },
	{ "drain-timeout", SUP_OPT_UINT, "SEC", F(drain_timeout_s), .hi = 3600, .def = "10",
	  .help = "requests in flight at a stop may run this long" },
	{ "destroy-on-exit", SUP_OPT_FLAG, NULL, F(destroy_on_exit),
	  .help = "SIGTERM destroys every sandbox, as SIGINT does (otherwise SIGTERM leaves them "
		  "to the next start: a node upgrade)" },
	{ "print-example", SUP_OPT_FLAG, NULL, F(print_example),
	  .help = "print the token and a working curl example at start" },
	{ "log-level", SUP_OPT_ENUM, "LEVEL", F(log_level), .choices = log_levels, .def = "info",
	  .help = "debug, info, warn or error" },

	GROUP("Pools and sandboxes"),
	{ "pool-size", SUP_OPT_UINT, NULL, F(pool_size), .hi = 256, .def = "4",
	  .help = "ready runc sandboxes kept per image without its own size" },
	{ "pool-max", SUP_OPT_UINT, NULL, F(pool_max), .hi = 4096, .def_doc = "0: pools keep their sizes",
	  .help = "pools size themselves: a pool of size > 0 keeps as many ready as its demand asks, "
		  "up to N, and its size once quiet" },
	{ "pool-window", SUP_OPT_UINT, "SEC", F(pool_window_s), .lo = 5, .hi = 3600, .def = "300",
	  .help = "the demand a self-sizing pool follows: its acquires over the last SEC seconds" },
	{ "pool-images", SUP_OPT_CUSTOM, "LIST", F(images), .def = "host",
	  .parse = sup_optc_images_parse, .show = sup_optc_images_show,
	  .help = "comma-separated images of runc pools, each NAME or NAME=N (its own size): host, "
		  "/path/to/rootfs or an image of the store",
	  .example = "host,/srv/rootfs,python:3.11-slim=5" },
	{ "pool", SUP_OPT_CUSTOM, "ISO:IMAGE=N", F(pools), .flags = SUP_OPT_REPEAT,
	  .parse = sup_optc_pool_parse, .show = sup_optc_pool_show, .reset = sup_optc_pool_reset,
	  .help = "N ready sandboxes of IMAGE with isolation ISO (runc or gvisor), e.g. "
		  "gvisor:host=2 (other pairs: 0)",
	  .example = "gvisor:host=2" },
	{ "pool-reuse", SUP_OPT_FLAG, NULL, F(pool_reuse),
	  .help = "a released runc sandbox its pool needs is reset (processes killed, --reuse-paths "
		  "emptied) and checked from the host, then pooled again instead of destroyed and "
		  "made anew" },
	{ "reuse-paths", SUP_OPT_CUSTOM, "LIST", F(reuse_paths),
	  .def = "/workspace,/tmp,/var/tmp,/home/sandbox,/dev/shm,/dev/mqueue",
	  .parse = sup_optc_reuse_parse, .show = sup_optc_reuse_show,
	  .help = "comma-separated folders a reset empties: what a sandbox user can write in a "
		  "fresh sandbox", .example = "/workspace,/home/u" },
	{ "max-sandboxes", SUP_OPT_UINT, NULL, F(max_sandboxes), .lo = 1, .hi = 65536, .def = "64",
	  .help = "sandboxes alive at once, pooled ones included" },
	{ "workers", SUP_OPT_UINT, NULL, F(workers), .lo = 1, .hi = 64, .def = "2",
	  .help = "threads running the runtime" },
	{ "acquire-timeout", SUP_OPT_UINT, "SEC", F(acquire_timeout_ms), .lo = 1, .hi = 3600,
	  .scale = 1000, .def = "60", .help = "how long a create waits for a sandbox" },
	{ "ready-timeout", SUP_OPT_UINT, "SEC", F(ready_timeout_ms), .lo = 1, .hi = 600, .scale = 1000,
	  .def = "10", .help = "runtime start until the agent answers" },
	{ "max-timeout", SUP_OPT_UINT, "SEC", F(max_timeout_s), .lo = 1, .hi = 366u * 24 * 3600,
	  .def = "604800", .help = "largest sandbox lifetime" },
	{ "default-resources", SUP_OPT_CUSTOM, "cpus=C,memory=SIZE,pids=N,disk=SIZE", F(res_default),
	  .def = "cpus=1,memory=1G,pids=1024,disk=10G", .parse = sup_optc_res_parse,
	  .show = sup_optc_res_show,
	  .help = "limits of a sandbox whose create names none; keys left out keep theirs",
	  .example = "cpus=0.5,memory=256M" },
	{ "max-resources", SUP_OPT_CUSTOM, "cpus=C,memory=SIZE,pids=N,disk=SIZE", F(res_max),
	  .def_doc = "this machine's CPUs and memory, pids=32768, disk=50G",
	  .parse = sup_optc_res_parse, .show = sup_optc_res_show, .init = sup_optc_res_max_init,
	  .help = "the most a create may ask for", .example = "cpus=1,memory=2G,pids=2048,disk=40G" },

	GROUP("Images"),
	{ "import-image", SUP_OPT_STRS, "[NAME=]PATH", F(imports), .off2 = offsetof(sup_config, nimports),
	  .cap = SUP_MAX_IMAGES, .flags = SUP_OPT_REPEAT, .check = import_ref,
	  .help = "import an OCI layout folder, oci-archive or docker save tarball into the image "
		  "store at start", .example = "py=/srv/py.tar" },
	{ "remove-image", SUP_OPT_STRS, "NAME", F(removes), .off2 = offsetof(sup_config, nremoves),
	  .cap = SUP_MAX_IMAGES, .flags = SUP_OPT_REPEAT, .check = image_name,
	  .help = "delete an image of the store at start (after the imports); layers no image uses "
		  "are removed at every start", .example = "old:1" },
	{ "image-max-layer", SUP_OPT_SIZE, NULL, F(image_max_layer), .hi = 1ull << 50, .def = "8G",
	  .help = "file data of one image layer" },
	{ "image-max-import", SUP_OPT_SIZE, NULL, F(image_max_import), .hi = 1ull << 50, .def = "16G",
	  .help = "bytes of one imported archive" },
	{ "image-allow-setid", SUP_OPT_FLAG, NULL, F(image_allow_setid),
	  .help = "keep setuid/setgid bits of image files (otherwise dropped)" },
	{ "skopeo", SUP_OPT_STR, "BIN", F(skopeo), .def = "skopeo",
	  .help = "skopeo, for POST /v1/images {\"ref\"}", .example = "/usr/bin/skopeo" },
	{ "image-pull-dir", SUP_OPT_STR, "DIR", F(image_pull_dir), .check = abs_path,
	  .def_doc = "none, registries only",
	  .help = "pulls may name oci: and oci-archive: paths below DIR", .example = "/srv/pulls" },
	{ "image-pull-timeout", SUP_OPT_SECS, NULL, F(image_pull_timeout_ms), .lo = 100,
	  .hi = 86400000, .def = "600", .help = "a pull's deadline" },

	GROUP("Runtimes"),
	{ "runtime", SUP_OPT_STR, "BIN", F(runtime), .def = "runc",
	  .help = "OCI runtime of runc isolation", .example = "crun" },
	{ "runsc", SUP_OPT_STR, "BIN", F(runsc), SUP_OPT_GIVEN(runsc_given), .def = "runsc",
	  .help = "gVisor's runtime, gvisor isolation: offered when it answers, required when "
		  "given or pooled", .example = "/opt/runsc" },
	{ "runsc-root", SUP_OPT_STR, "DIR", F(runsc_root), .check = abs_path,
	  .def_doc = "<state-dir>/runsc", .help = "runsc's state folder", .example = "/run/rs" },
	{ "runsc-platform", SUP_OPT_STR, "NAME", F(runsc_platform), .choices = platforms,
	  .def = "ptrace", .help = "ptrace or kvm", .example = "kvm" },
	{ "agent", SUP_OPT_STR, "PATH", F(agent_path), .def_doc = "beside this binary",
	  .help = "sandbox-agent binary", .example = "/usr/lib/sbx/sandbox-agent" },
	{ "allow-root", SUP_OPT_FLAG, NULL, F(allow_root),
	  .help = "let execs run as root (\"user\":\"root\"; otherwise refused, 403)" },

	GROUP("Commands"),
	{ "max-output", SUP_OPT_SIZE, NULL, F(max_output), .hi = 1ull << 30, .def = "16M",
	  .help = "captured bytes per stream of an exec" },
	{ "max-output-total", SUP_OPT_SIZE, NULL, F(max_output_total), .hi = 64ull << 30, .def = "1G",
	  .help = "captured bytes of all running execs together" },
	{ "max-execs", SUP_OPT_UINT, NULL, F(max_execs), .lo = 1, .hi = 1000, .def = "64",
	  .help = "commands running at once per sandbox" },

	GROUP("The agent connection"),
	{ "agent-grace", SUP_OPT_SECS, NULL, F(agent.grace_ms), .hi = 3600000, .def = "2",
	  .help = "an exec's timeout plus this, and the agent must have ended it" },
	{ "agent-idle-timeout", SUP_OPT_SECS, NULL, F(agent.idle_ms), .lo = 10, .hi = 86400000,
	  .def = "30", .help = "a call waiting for the agent's answer fails after this long "
			       "without a frame" },
	{ "agent-ping-interval", SUP_OPT_SECS, NULL, F(agent.ping_after_ms), .lo = 10,
	  .hi = 86400000, .def = "10", .help = "ping an agent connection quiet this long" },
	{ "agent-ping-timeout", SUP_OPT_SECS, NULL, F(agent.ping_timeout_ms), .lo = 10,
	  .hi = 3600000, .def = "5", .help = "no answer to the ping within this: sandbox failed" },
	{ "agent-frame-timeout", SUP_OPT_SECS, NULL, F(agent.frame_ms), .lo = 10, .hi = 3600000,
	  .def = "5", .help = "a frame from the agent must be whole this long after its first byte" },
	/* at least what legit work needs: the agent serves 1024 streams and
	 * --max-execs goes up to 1000 */
	{ "agent-max-streams", SUP_OPT_UINT, NULL, F(agent.max_streams), .lo = 1, .hi = 65536,
	  .def = "1024", .help = "streams open to one agent" },
	{ "agent-max-waiting", SUP_OPT_UINT, NULL, F(agent.max_waiting), .lo = 1, .hi = 65536,
	  .def = "1000", .help = "requests waiting on one agent" },
	{ "agent-max-queued", SUP_OPT_SIZE, NULL, F(agent.max_queued), .lo = 64u << 10,
	  .hi = 1ull << 30, .def = "8M", .help = "bytes queued towards one agent" },

	GROUP("MCP"),
	{ "mcp-idle-timeout", SUP_OPT_SECS, NULL, F(mcp_idle_ms), .lo = 100, .hi = 86400000,
	  .def = "600", .help = "an MCP session unused this long ends, its server's processes killed" },
	{ "mcp-allow-origin", SUP_OPT_STR, "LIST", F(mcp_origins),
	  .def_doc = "none: requests with Origin refused",
	  .help = "Origins (comma-separated) a browser may reach MCP sessions from",
	  .example = "http://a.test,http://b.test" },

	{ "e2b-template", SUP_OPT_STRS, "NAME=IMAGE", F(e2b_templates),
	  .off2 = offsetof(sup_config, ne2b_templates), .cap = SUP_MAX_E2B_TEMPLATES,
	  .flags = SUP_OPT_REPEAT, .check = e2b_template,
	  .def_doc = "base: the default image; any other name is an image's own",
	  .help = "an E2B template's name as an image of this node (the E2B layer, /e2b)",
	  .example = "code-interpreter-v1=sbx/code-interpreter" },

	GROUP("Network"),
	{ "uplink", SUP_OPT_STR, "IFACE|netns:NAME", F(uplink), .def_doc = "loopback only",
	  .help = "egress by policy: the interface (or network namespace, also an absolute path) "
		  "sandboxes' traffic leaves through", .example = "netns:sbx-up" },
	{ "uplink-dns", SUP_OPT_STR, "ADDR[:PORT]", F(uplink_dns),
	  .def_doc = "the first nameserver of /etc/netns/NAME/resolv.conf or /etc/resolv.conf",
	  .help = "the resolver allowed names are sent to", .example = "10.0.0.53" },
	{ "deny-cidrs", SUP_OPT_STR, "LIST", F(deny_cidrs),
	  .help = "comma-separated networks no policy can reach (beside the node, other sandboxes, "
		  "link-local and metadata)", .example = "10.0.0.0/8,192.168.0.0/16" },
	{ "ports-domain", SUP_OPT_STR, "D", F(ports_domain), .check = ports_domain,
	  .help = "a request whose Host is {port}-{id}.D is proxied to that port of that sandbox, "
		  "from its root", .example = "sbx.example.com" },
	{ "ports-answer-timeout", SUP_OPT_SECS, NULL, F(ports_answer_ms), .lo = 100, .hi = 86400000,
	  .def = "60", .help = "a proxied request whose server inside sends no answer's head this "
			       "long is answered 504" },

	GROUP("Secrets"),
	{ "secrets-key", SUP_OPT_STR, "FILE", F(secrets_key), .check = abs_path,
	  .def_doc = "none: no secrets kept",
	  .help = "the key tenants' secrets are sealed with at rest (AES-256-GCM), made at first "
		  "start (mode 0600); must be outside --state-dir", .example = "/etc/sbx/secrets.key" },

	GROUP("Snapshots"),
	{ "snapshot-store", SUP_OPT_STR, "s3://BUCKET[/PREFIX]", F(snapshot_store), .check = s3_url,
	  .def_doc = "the state folder",
	  .help = "the S3 store snapshots are kept in (credentials from AWS_ACCESS_KEY_ID, "
		  "AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN, region from AWS_REGION); the bucket "
		  "is checked at start", .example = "s3://snaps/node-1" },
	{ "s3-endpoint", SUP_OPT_STR, "URL", F(s3_endpoint), .check = http_url,
	  .def_doc = "AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else AWS",
	  .help = "the store's endpoint, addressed path-style", .example = "http://127.0.0.1:9000" },
	{ "snapshot-orphan-age", SUP_OPT_UINT, "SEC", F(snapshot_orphan_age_s), .lo = 1,
	  .hi = 30u * 86400, .def = "3600",
	  .help = "the store's archives no manifest names are removed once this old" },
	{ "snapshot-sweep-every", SUP_OPT_UINT, "SEC", F(snapshot_sweep_every_s), .hi = 86400,
	  .def = "900", .help = "how often the store is swept for them, beside the sweep at start "
				"(0: at start only)" },

	GROUP("Nodes and the cluster"),
	{ "node-name", SUP_OPT_CUSTOM, "NAME", F(node_name), .parse = sup_optc_node_parse,
	  .show = sup_optc_node_show, .init = sup_optc_node_init,
	  .def_doc = "the host name up to its first '.'",
	  .help = "this node's name, a DNS-1123 subdomain (its Kubernetes name); every sandbox id "
		  "it makes carries its tag: the name itself if 1-20 of [a-z0-9-], else a short "
		  "hash of it", .example = "node-a" },
	{ "peer", SUP_OPT_STRS, "NAME=URL", F(peers), .off2 = offsetof(sup_config, npeers),
	  .cap = SUP_MAX_PEERS, .flags = SUP_OPT_REPEAT, .check = peer,
	  .help = "another node's supervisor (http://HOST:PORT, https:// with --tls-ca), requests "
		  "for its sandboxes relayed there", .example = "n2=http://10.0.0.2:7070" },
	{ "tls-ca", SUP_OPT_STR, "FILE", F(tls_ca),
	  .help = "the cluster's CA (PEM): nodes relay to each other over HTTPS, each verifying "
		  "the other's certificate by it (with --tls-cert)", .example = "/etc/sbx/tls/ca.crt" },
	{ "cluster-key-file", SUP_OPT_STR, "PATH", F(cluster_key_file),
	  .help = "the cluster's node-to-node key (a Secret's file): sent with relayed requests, "
		  "asked of the ones received", .example = "/run/sbx/key" },
	{ "kubeconfig", SUP_OPT_STR, "FILE", F(kubeconfig),
	  .help = "join the cluster of this kubeconfig: this node's Lease sbx-node-NAME renewed "
		  "as a heartbeat with its URL and capacity, sandbox Events, the other nodes read "
		  "back from their Leases", .example = "/etc/sbx/kubeconfig" },
	{ "kube-context", SUP_OPT_STR, "NAME", F(kube_context), .def_doc = "its current one",
	  .help = "the kubeconfig's context to use", .example = "prod" },
	{ "kube-in-cluster", SUP_OPT_FLAG, NULL, F(kube_in_cluster),
	  .help = "the same with the pod's service account (in a DaemonSet)" },
	{ "kube-namespace", SUP_OPT_STR, "NS", F(kube_namespace), .check = dns_label,
	  .def_doc = "the pod's in-cluster, else sbx-system",
	  .help = "the Leases' and Events' namespace", .example = "sbx" },
	{ "advertise-url", SUP_OPT_STR, "URL", F(advertise_url), .check = advertise_url,
	  .def_doc = "http://<--listen> (https:// with --tls-cert)",
	  .help = "this supervisor's API for the other nodes (required when listening on 0.0.0.0)",
	  .example = "http://10.0.0.5:7070" },
	{ "lease-duration", SUP_OPT_UINT, "SEC", F(lease_s), .lo = 4, .hi = 3600, .def = "40",
	  .help = "the Lease's duration, renewed every quarter of it" },
	{ "kube-queue", SUP_OPT_UINT, NULL, F(kube_queue), .lo = 1, .hi = 65536, .def = "256",
	  .help = "Events held while the API server is away; the oldest is dropped (and counted) "
		  "beyond" },
	{ "kube-token-file", SUP_OPT_STR, "FILE", F(kube_token_file),
	  .def_doc = "the kubeconfig user's, or the pod's",
	  .help = "the service-account token this node sends with the requests it relays",
	  .example = "/run/sbx/token" },
	{ "node-account", SUP_OPT_STR, "USER", F(node_account), .check = node_account,
	  .def_doc = "system:serviceaccount:NS:sbx-supervisor, NS the Leases' namespace",
	  .help = "the one account a relayed request's token must review as (TokenReview)",
	  .example = "system:serviceaccount:sbx:sup" },

	GROUP("The Kubernetes backend"),
	{ "backend", SUP_OPT_ENUM, "NAME", F(backend_kube), .choices = backends, .def = "runc",
	  .help = "runc: sandboxes are local runc containers; kubernetes: sandboxes are pods of "
		  "this node made from --pod-template files (needs --kubeconfig or "
		  "--kube-in-cluster; a pool per template, its size from --pool-images NAME=N or "
		  "--pool-size)" },
	{ "pod-template", SUP_OPT_STRS, "FILE", F(pod_templates),
	  .off2 = offsetof(sup_config, npod_templates), .cap = SUP_MAX_IMAGES, .flags = SUP_OPT_REPEAT,
	  .help = "a sandbox pod template (YAML or JSON, a Pod; its name the label "
		  "sbx.dev/template or the file's name)", .example = "/etc/sbx/templates/default.yaml" },
	{ "agent-dir", SUP_OPT_STR, "DIR", F(agent_dir), .check = agent_dir, .def = "/run/sbx/agents",
	  .help = "where the pods' agents put their sockets, DIR/<pod UID>/agent.sock",
	  .example = "/run/sbx/a" },
	{ "sandbox-namespace", SUP_OPT_STR, "NS", F(sandbox_namespace), .check = dns_label,
	  .def = "sbx-sandboxes", .help = "the sandbox pods' namespace", .example = "sandboxes" },
	{ "pod-ready-timeout", SUP_OPT_SECS, NULL, F(pod_ready_ms), .lo = 100, .hi = 3600000,
	  .def = "60", .help = "a pod created until its agent listens" },

	GROUP("The command line's own"),
	{ "config", SUP_OPT_STR, "FILE", F(config_file), .flags = SUP_OPT_CLI, .action = SUP_ACT_CONFIG,
	  .help = "read the options from this YAML file first (every option above is a key)" },
	{ "check-config", SUP_OPT_FLAG, NULL, F(check_config), .flags = SUP_OPT_CLI,
	  .help = "check the options (and the --config file) as a start would, print the result "
		  "and exit: 0 when they are valid, 2 when not" },
	{ "print-config", SUP_OPT_FLAG, NULL, F(print_config), .flags = SUP_OPT_CLI,
	  .help = "print the options in force as a --config file and exit" },
	{ "help", SUP_OPT_FLAG, NULL, .flags = SUP_OPT_CLI, .action = SUP_ACT_HELP,
	  .help = "this list" },
	{ "help-markdown", SUP_OPT_FLAG, NULL, .flags = SUP_OPT_CLI, .action = SUP_ACT_HELP_MARKDOWN,
	  .help = "this list as README.md's table" },
	{ "version", SUP_OPT_FLAG, NULL, .flags = SUP_OPT_CLI, .action = SUP_ACT_VERSION,
	  .help = "print the version" },
};

const size_t sup_noptions = sizeof(sup_options) / sizeof(sup_options[0]);
