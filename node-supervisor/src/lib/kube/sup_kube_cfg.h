/* Where the Kubernetes API server is and who we are to it: read from a
 * kubeconfig file (its current context's cluster and user) or from the
 * in-cluster service account (KUBERNETES_SERVICE_HOST/PORT and the files
 * the kubelet mounts). Owns the parsed settings and the credential bytes
 * (CA, client certificate and key, token), read at load so that a bad file
 * is a start error. It must not talk to the network (sup_kube_http does)
 * and must not log. */
#ifndef SUP_KUBE_CFG_H
#define SUP_KUBE_CFG_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/err.h"

#define SUP_KUBE_SERVER_MAX 512
#define SUP_KUBE_NS_MAX 64              /* a namespace is a DNS label: 63 */
#define SUP_KUBE_FILE_MAX (1u << 20)    /* a kubeconfig, a CA bundle, a key, a token */
/* The folder the kubelet mounts a pod's service-account credentials into. */
#define SUP_KUBE_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

typedef struct sup_kube_blob {
	char *p; /* NUL-terminated; NULL: not given */
	size_t len;
} sup_kube_blob;

typedef struct sup_kube_cfg {
	char server[SUP_KUBE_SERVER_MAX]; /* "https://host:port", no trailing slash */
	sup_kube_blob ca;    /* PEM bundle; absent: the system's CAs */
	sup_kube_blob cert;  /* client certificate (PEM); with key */
	sup_kube_blob key;
	sup_kube_blob token; /* bearer token, trailing whitespace cut */
	/* In-cluster tokens are rotated by the kubelet: read again from here
	 * (sup_kube_cfg_reload_token); "" for a kubeconfig's inline token. */
	char token_file[4096];
	bool insecure;       /* insecure-skip-tls-verify: no server check */
	char ns[SUP_KUBE_NS_MAX]; /* the context's (or the pod's) namespace; "" none */
	char origin[300];    /* "kubeconfig F, context C" or "in-cluster": for messages */
} sup_kube_cfg;

/* The current context (or context if not NULL) of the kubeconfig at path
 * (YAML or JSON). Relative file names in it are relative to its folder.
 * -EINVAL naming the field that is missing or malformed; -errno for a file
 * that cannot be read. */
int sup_kube_cfg_load_file(const char *path, const char *context, sup_kube_cfg *out, sbx_err *err);

/* In-cluster: the server from host and port (the caller passes
 * $KUBERNETES_SERVICE_HOST/_PORT), token, ca.crt and namespace from
 * sa_dir (SUP_KUBE_SA_DIR). -ENOENT when host or port is unset (not in a
 * pod). */
int sup_kube_cfg_in_cluster(const char *host, const char *port, const char *sa_dir,
			    sup_kube_cfg *out, sbx_err *err);

/* Read token_file again (the kubelet rotates it); a no-op without one. */
int sup_kube_cfg_reload_token(sup_kube_cfg *c, sbx_err *err);

void sup_kube_cfg_release(sup_kube_cfg *c);

/* Exposed for tests: a YAML document (no aliases, bounded depth) as JSON
 * (mappings as objects, sequences as arrays, every scalar a string). */
struct json_t;
struct json_t *sup_kube_yaml_to_json(const char *text, size_t len, sbx_err *err);
/* The same with plain (unquoted) scalars typed as YAML 1.2's core schema
 * has them (null, true/false, integers): what a Pod manifest needs
 * (runAsUser: 0 is a number to the API server). */
struct json_t *sup_kube_yaml_to_json_typed(const char *text, size_t len, sbx_err *err);

#endif
