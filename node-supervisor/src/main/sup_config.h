/* Supervisor settings: the sup_config struct, read from the command line
 * and a config file (--config FILE, YAML) through one table of options
 * (sup_options.c, the engine sup_opt.h), and checked across options. It
 * reads the config file and nothing else: main opens what the values name
 * (files, sockets, the network). */
#ifndef SUP_CONFIG_H
#define SUP_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sbx/err.h"
#include "sup_nodeid.h"
#include "sup_resources.h"
#include "sup_types.h"

#define SUP_MAX_IMAGES 16
/* Pools: every (image, isolation) pair of SUP_MAX_IMAGES images. */
#define SUP_MAX_POOLS (SUP_MAX_IMAGES * SUP_ISO_N)
#define SUP_POOL_SIZE_UNSET 0xffffffffu
#define SUP_MAX_PEERS 64
#define SUP_MAX_E2B_TEMPLATES 64

typedef struct sup_config {
	char listen_host[256];     /* "127.0.0.1", "::1" */
	uint16_t listen_port;      /* 0: any free port (printed at start) */
	const char *state_dir;
	unsigned pool_size;        /* ready sandboxes kept per image without its own size (runc) */
	unsigned pool_max;         /* --pool-max: pools size themselves up to it; 0: they do not */
	unsigned pool_window_s;    /* --pool-window: the demand they follow */
	const char *images[SUP_MAX_IMAGES]; /* "host", an absolute rootfs path, a store name */
	unsigned image_sizes[SUP_MAX_IMAGES]; /* --pool-images NAME=N, else pool_size */
	size_t nimages;
	sup_pool_spec pools[SUP_MAX_POOLS]; /* --pool ISOLATION:IMAGE=N (image owned) */
	size_t npools;
	bool pool_reuse;           /* --pool-reuse: released runc sandboxes reset, not remade */
	const char *reuse_paths[16]; /* --reuse-paths: the folders a reset empties */
	size_t nreuse_paths;
	const char *imports[SUP_MAX_IMAGES]; /* --import-image [NAME=]PATH, in order */
	size_t nimports;
	const char *removes[SUP_MAX_IMAGES]; /* --remove-image NAME, after the imports */
	size_t nremoves;
	uint64_t image_max_layer;  /* file data of one layer */
	uint64_t image_max_import; /* bytes of one imported archive */
	bool image_allow_setid;    /* keep setuid/setgid bits of image files */
	const char *skopeo;        /* pulls: skopeo's binary */
	const char *image_pull_dir; /* pulls may name oci:/oci-archive: paths below it; NULL: none */
	unsigned image_pull_timeout_ms; /* a pull's deadline */
	const char *runtime;       /* runc isolation's runtime */
	const char *runsc;         /* gvisor isolation's runtime */
	bool runsc_given;          /* --runsc: gvisor must be offered */
	const char *runsc_root;    /* NULL: <state_dir>/runsc */
	const char *runsc_platform;
	const char *agent_path;    /* NULL: look next to the binary */
	const char *token;         /* NULL: <state_dir>/token */
	const char *policy_file;   /* NULL: the built-in file access policy */
	const char *tenants_file;  /* --tenants: who may call, with what; NULL: the token alone */
	char metrics_host[256];    /* --metrics-listen: /metrics without a token, node-local */
	uint16_t metrics_port;
	bool metrics_listen;
	/* TLS on both listeners and between nodes (sup_tls.h); NULL: plain HTTP */
	const char *tls_cert;      /* --tls-cert FILE: PEM, the certificate then its chain */
	const char *tls_key;       /* --tls-key FILE: PEM private key */
	const char *tls_ca;        /* --tls-ca FILE: the cluster's CA; peers verified by it */
	size_t max_body;           /* request body bytes accepted */
	uint64_t max_upload;       /* bytes per PUT /files; 0: no limit */
	size_t max_output;         /* captured bytes per stream of an exec */
	size_t max_output_total;   /* captured bytes of all execs in flight */
	unsigned max_execs;        /* execs in flight per sandbox */
	bool allow_root;           /* execs may ask for "user":"root" */
	unsigned max_sandboxes;    /* alive at once, pooled ones included */
	unsigned workers;          /* threads running the runtime */
	unsigned acquire_timeout_ms; /* a create waiting for an empty pool */
	unsigned ready_timeout_ms;   /* runtime start until the agent socket accepts */
	unsigned default_timeout_s;  /* sandbox lifetime when a create gives none */
	unsigned max_timeout_s;      /* upper bound of a sandbox lifetime */
	unsigned max_conns;          /* HTTP connections held at once */
	unsigned tenant_max_requests; /* one tenant's requests in flight; 0: the default */
	unsigned head_timeout_s;     /* a request head's first byte to its end */
	unsigned body_timeout_s;     /* a buffered body whole; a streamed one between bytes */
	unsigned idle_timeout_s;     /* a keep-alive connection between requests */
	unsigned drain_timeout_s;    /* requests in flight at a stop */
	bool destroy_on_exit;        /* SIGTERM destroys every sandbox, as SIGINT */
	unsigned mcp_idle_ms;        /* an unused MCP session ends */
	const char *mcp_origins;     /* Origins allowed on MCP routes (comma-separated) */
	sup_agent_opts agent;        /* distrust of the guest: deadlines, limits */
	sup_resources res_default;   /* a sandbox's limits when a create names none */
	sup_resources res_max;       /* the most a create may ask for */
	const char *uplink;          /* egress: "IFACE" or "netns:NAME"/path; NULL: loopback only */
	const char *uplink_dns;      /* the upstream resolver; NULL: the uplink's resolv.conf */
	const char *secrets_key;     /* --secrets-key: the secrets' key file; NULL: no secrets */
	unsigned ports_answer_ms;    /* --ports-answer-timeout: a proxied answer's head is due */
	const char *ports_domain;    /* --ports-domain: {port}-{id}.D routes to a port; NULL: none */
	const char *deny_cidrs;      /* always refused, whatever a policy says */
	const char *snapshot_store;  /* --snapshot-store s3://bucket[/prefix]; NULL: the state folder */
	const char *s3_endpoint;     /* --s3-endpoint URL (path-style); NULL: AWS_ENDPOINT_URL*, else AWS */
	char node_name[SUP_NODE_NAME_MAX + 1]; /* --node-name (its tag in ids); default: the host name's */
	unsigned snapshot_orphan_age_s;   /* --snapshot-orphan-age: an archive without a manifest this old goes */
	unsigned snapshot_sweep_every_s;  /* --snapshot-sweep-every: the orphan sweep's period (0: at start only) */
	const char *peers[SUP_MAX_PEERS]; /* --peer NAME=URL: the static node directory */
	const char *e2b_templates[SUP_MAX_E2B_TEMPLATES]; /* --e2b-template NAME=IMAGE */
	size_t ne2b_templates;
	size_t npeers;
	const char *cluster_key_file; /* --cluster-key-file: node-to-node credential; NULL: none */
	/* Kubernetes (sup_kube): this node's Lease, Events, the node directory */
	const char *kubeconfig;      /* --kubeconfig FILE */
	const char *kube_context;    /* --kube-context NAME; NULL: the file's current one */
	bool kube_in_cluster;        /* --kube-in-cluster: the pod's service account */
	const char *kube_namespace;  /* NULL: the pod's (in-cluster), else sbx-system */
	const char *advertise_url;   /* NULL: http://<--listen> unless it is a wildcard */
	unsigned lease_s;            /* --lease-duration */
	unsigned kube_queue;         /* --kube-queue: Events held while the server is away */
	/* node-to-node auth in a cluster (sup_cluster_auth) */
	const char *kube_token_file; /* --kube-token-file: the token sent to peers; NULL: the kube credentials' */
	const char *node_account;    /* --node-account: the peers' account; NULL: NS:sbx-supervisor */
	/* The pools' backend (--backend): local runc sandboxes, or pods of
	 * this node (sup_kube_pods) with a cluster flag */
	bool backend_kube;
	const char *pod_templates[SUP_MAX_IMAGES]; /* --pod-template FILE, in order */
	size_t npod_templates;
	const char *agent_dir;       /* --agent-dir: the sandbox pods' socket folder */
	const char *sandbox_namespace; /* --sandbox-namespace */
	unsigned pod_ready_ms;       /* --pod-ready-timeout: a pod until its agent listens */
	int log_level;
	bool print_example;        /* print the token and a curl example at start */
	/* the command line's own */
	const char *config_file;   /* --config FILE */
	bool check_config;         /* --check-config */
	bool print_config;         /* --print-config */
	struct sup_config_kept *kept; /* owns the strings of the file and of lists */
} sup_config;

/* Every option's default (the table's). 0, or -ENOMEM. */
int sup_config_defaults(sup_config *c, sbx_err *err);
/* The command line over c: the --config file first when it names one,
 * then the options in their order (a repeatable option given there
 * replaces the file's list). No checks across options. Returns 0, 1 when
 * --help, --help-markdown or --version printed (caller exits 0), or
 * -EINVAL with err filled. */
int sup_config_args(sup_config *c, int argc, char **argv, sbx_err *err);
/* The checks across options and the pools' sizes, once all are in. */
int sup_config_finish(sup_config *c, sbx_err *err);
/* sup_config_args, sup_config_finish, then --check-config and
 * --print-config: 0, 1 when something was printed instead of a start
 * (caller exits 0), or -EINVAL. */
int sup_config_parse(sup_config *c, int argc, char **argv, sbx_err *err);
void sup_config_release(sup_config *c);
void sup_config_usage(FILE *out, const char *prog);
/* README.md's table of options (scripts/readme-options puts it there). */
void sup_config_markdown(FILE *out);

/* The config file (YAML): a mapping of option names to values, a list for
 * a repeatable option, true/false for a switch. Applied over c; set (one
 * per row of the table) marks the rows it gave. An unknown key, a wrong
 * type or a bad value is -EINVAL naming the file, its line and the key. */
int sup_config_load_file(sup_config *c, const char *path, bool *set, sbx_err *err);
/* c as a config file that gives it back; secrets (the token) only when
 * asked. 0, or -EIO. */
int sup_config_write(const sup_config *c, FILE *out, bool secrets, sbx_err *err);
/* A copy of n bytes of s, NUL-terminated, that lives as long as c; NULL
 * when out of memory. */
char *sup_config_keep(sup_config *c, const char *s, size_t n);

/* The pools to run: runc pools of --pool-images with --pool-size, then
 * --pool entries (replacing the size of a pair given twice), then a pool of
 * size 0 (cold creates) for every other pair of a pooled image and an
 * offered isolation. offered[i]: isolation i's runtime answers. Fills out
 * (SUP_MAX_POOLS) and returns how many, or -EINVAL when a --pool names an
 * isolation that is not offered. */
int sup_config_pool_specs(const sup_config *c, const bool offered[SUP_ISO_N], sup_pool_spec *out,
			  sbx_err *err);
/* Does any --pool ask for isolation (which must then be offered)? */
bool sup_config_pools_use(const sup_config *c, sup_isolation isolation);

/* "host:port", "[v6]:port". Exposed for tests. */
int sup_config_parse_listen(const char *s, char *host, size_t host_size, uint16_t *port,
			    sbx_err *err);
/* Seconds, fractions allowed ("2", "0.25"), to ms within lo..hi ms. */
int sup_config_parse_secs(const char *s, unsigned lo_ms, unsigned hi_ms, unsigned *ms,
			  sbx_err *err);

#endif
