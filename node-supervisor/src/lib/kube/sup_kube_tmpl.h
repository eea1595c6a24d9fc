/* Sandbox pod templates (daemonset/templates/, one per file: the
 * ConfigMap's keys as the DaemonSet mounts them): read and checked at
 * start, and the Pod a warm pool creates from one (its name, namespace,
 * node and the contract's labels set here, nothing else changed).
 *
 * Owns what the Kubernetes backend needs to know of a template: its name,
 * where its container mounts the agents' socket folder, and the emptyDir
 * mounts the agent's reset empties and the host checks. A template the
 * backend could not serve safely is a start error: one container, the
 * agent-socket hostPath mounted with subPathExpr of the pod's UID, a
 * read-only root filesystem (every writable path an emptyDir, so that a
 * reset reaches all a tenant could write), restartPolicy Never. Pure: the
 * file is read at load, no network, no logging. */
#ifndef SUP_KUBE_TMPL_H
#define SUP_KUBE_TMPL_H

#include <jansson.h>
#include <stddef.h>

#include "sbx/err.h"
#include "sup_resources.h"

#define SUP_KUBE_TMPL_NAME_MAX 64  /* a label value: 63 */
#define SUP_KUBE_TMPL_PATHS_MAX 16 /* the agent's reset takes 16 folders */
#define SUP_KUBE_TMPL_FILE_MAX (256u << 10)
#define SUP_KUBE_TMPL_VOLUME "agent-socket" /* the contract's volume name */

/* The contract's labels and annotations (SESSION6 "pod contract"). */
#define SUP_KUBE_L_APP "app.kubernetes.io/name"
#define SUP_KUBE_L_APP_VALUE "sbx-sandbox"
#define SUP_KUBE_L_NODE "sbx.dev/node"
#define SUP_KUBE_L_TEMPLATE "sbx.dev/template"
#define SUP_KUBE_L_STATE "sbx.dev/state"
#define SUP_KUBE_L_TENANT "sbx.dev/tenant"
#define SUP_KUBE_A_SANDBOX "sbx.dev/sandbox-id"
#define SUP_KUBE_A_EXPIRES "sbx.dev/expires-at"
#define SUP_KUBE_A_TENANT "sbx.dev/tenant"

typedef struct sup_kube_tmpl {
	char name[SUP_KUBE_TMPL_NAME_MAX];
	json_t *pod;              /* the Pod as read (owned) */
	char agent_mount[256];    /* the agent-socket volume's mountPath in the container */
	char *paths[SUP_KUBE_TMPL_PATHS_MAX]; /* emptyDir mountPaths, absolute, normalised */
	size_t npaths;
} sup_kube_tmpl;

/* A template from YAML or JSON text. Its name: the label sbx.dev/template,
 * else fallback (the file's name without its extension). -EINVAL naming
 * what is missing or refused. */
int sup_kube_tmpl_parse(const char *text, size_t len, const char *fallback, sup_kube_tmpl *out,
			sbx_err *err);
/* The same from a file (at most SUP_KUBE_TMPL_FILE_MAX bytes). */
int sup_kube_tmpl_load(const char *path, sup_kube_tmpl *out, sbx_err *err);
void sup_kube_tmpl_release(sup_kube_tmpl *t);

/* The Pod to create, as JSON text (malloc'd): the template with
 * metadata.name (no generateName), namespace, the labels app, node,
 * template and state "starting" added, spec.nodeName: node. NULL: out of
 * memory. */
char *sup_kube_tmpl_pod(const sup_kube_tmpl *t, const char *name, const char *ns, const char *node);

/* A Kubernetes quantity ("500m", "1.5", "512Mi", "1G", "2e3") in
 * thousandths of its unit: -EINVAL for anything else (a sign, an unknown
 * suffix, beyond 2^62). */
int sup_kube_quantity_milli(const char *s, uint64_t *milli);

/* What a pod of t may use, as its sandbox's limits: the container's
 * resources.limits (cpu, memory, ephemeral-storage as disk) over def's
 * figures (pids always def's: the kubelet's pod pids limit is the node's).
 * A limit given as a string or a number; -EINVAL naming one that is no
 * quantity or is under a sandbox's floor (sup_resources.h). */
int sup_kube_tmpl_limits(const sup_kube_tmpl *t, const sup_resources *def, sup_resources *out, sbx_err *err);

/* A label value (63 bytes of [A-Za-z0-9._-], alphanumeric at both ends). */
int sup_kube_label_ok(const char *v);

#endif
