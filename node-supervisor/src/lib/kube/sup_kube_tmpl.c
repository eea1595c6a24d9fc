/* sup_kube_tmpl: sandbox pod templates (sup_kube_tmpl.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/proto_reset.h"
#include "sup_kube_cfg.h"
#include "sup_kube_tmpl.h"
#include "sup_nodeid.h"

int sup_kube_label_ok(const char *v)
{
	size_t n = strlen(v);
	if (n == 0 || n > 63)
		return 0;
	for (size_t i = 0; i < n; i++) {
		char c = v[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.')))
			return 0;
	}
	return 1;
}

static const char *str_at(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* The volume of the pod named name, or NULL. */
static json_t *volume(json_t *spec, const char *name)
{
	size_t i;
	json_t *v;
	json_array_foreach(json_object_get(spec, "volumes"), i, v) {
		const char *n = str_at(v, "name");
		if (n && strcmp(n, name) == 0)
			return v;
	}
	return NULL;
}

/* An env of the container set from the pod's UID (downward API). */
static bool env_is_uid(json_t *ctr, const char *name, size_t len)
{
	size_t i;
	json_t *e;
	json_array_foreach(json_object_get(ctr, "env"), i, e) {
		const char *n = str_at(e, "name");
		const char *f = str_at(json_object_get(json_object_get(e, "valueFrom"), "fieldRef"), "fieldPath");
		if (n && strlen(n) == len && strncmp(n, name, len) == 0 && f && strcmp(f, "metadata.uid") == 0)
			return true;
	}
	return false;
}

/* The agent-socket mount: its mountPath, its subPathExpr the pod's UID. */
static int agent_mount(json_t *ctr, sup_kube_tmpl *t, sbx_err *err)
{
	size_t i;
	json_t *m;
	json_array_foreach(json_object_get(ctr, "volumeMounts"), i, m) {
		const char *n = str_at(m, "name");
		if (!n || strcmp(n, SUP_KUBE_TMPL_VOLUME) != 0)
			continue;
		const char *path = str_at(m, "mountPath");
		const char *sub = str_at(m, "subPathExpr");
		size_t sl = sub ? strlen(sub) : 0;
		if (!path || path[0] != '/' || strlen(path) >= sizeof(t->agent_mount))
			return sbx_err_set(err, -EINVAL, "the %s mount has no absolute mountPath",
					   SUP_KUBE_TMPL_VOLUME);
		/* "$(VAR)" with VAR the pod's UID: the folder <agent-dir>/<uid> */
		if (sl < 4 || strncmp(sub, "$(", 2) != 0 || sub[sl - 1] != ')' ||
		    !env_is_uid(ctr, sub + 2, sl - 3))
			return sbx_err_set(err, -EINVAL,
					   "the %s mount needs subPathExpr $(VAR) with env VAR from fieldRef metadata.uid",
					   SUP_KUBE_TMPL_VOLUME);
		snprintf(t->agent_mount, sizeof(t->agent_mount), "%s", path);
		return 0;
	}
	return sbx_err_set(err, -EINVAL, "the container does not mount volume %s", SUP_KUBE_TMPL_VOLUME);
}

/* Every emptyDir mount: the folders a reset empties. */
static int empty_dirs(json_t *spec, json_t *ctr, sup_kube_tmpl *t, sbx_err *err)
{
	size_t i;
	json_t *m;
	json_array_foreach(json_object_get(ctr, "volumeMounts"), i, m) {
		const char *n = str_at(m, "name");
		json_t *v = n ? volume(spec, n) : NULL;
		if (!v)
			return sbx_err_set(err, -EINVAL, "volumeMounts[%zu]: no volume %s", i, n ? n : "(unnamed)");
		if (!json_object_get(v, "emptyDir"))
			continue;
		const char *path = str_at(m, "mountPath");
		if (!path || !sbx_proto_reset_path_ok(path, strlen(path)))
			return sbx_err_set(err, -EINVAL, "volume %s: mountPath must be absolute and normalised", n);
		if (str_at(m, "subPath") || str_at(m, "subPathExpr"))
			return sbx_err_set(err, -EINVAL, "volume %s: an emptyDir is mounted whole (no subPath)", n);
		if (t->npaths == SUP_KUBE_TMPL_PATHS_MAX)
			return sbx_err_set(err, -EINVAL, "more than %d emptyDir mounts", SUP_KUBE_TMPL_PATHS_MAX);
		if (!(t->paths[t->npaths] = strdup(path)))
			return sbx_err_set(err, -ENOMEM, "out of memory");
		t->npaths++;
	}
	return 0;
}

static int check(json_t *pod, sup_kube_tmpl *t, sbx_err *err)
{
	const char *kind = str_at(pod, "kind"), *api = str_at(pod, "apiVersion");
	if (!kind || strcmp(kind, "Pod") != 0 || !api || strcmp(api, "v1") != 0)
		return sbx_err_set(err, -EINVAL, "not a v1 Pod");
	json_t *spec = json_object_get(pod, "spec");
	json_t *ctrs = json_object_get(spec, "containers");
	/* the sandbox is its one container: the host checks its agent's
	 * cgroup and mounts, and a second would be a tenant's to share */
	if (json_array_size(ctrs) != 1 || json_array_size(json_object_get(spec, "initContainers")) ||
	    json_array_size(json_object_get(spec, "ephemeralContainers")))
		return sbx_err_set(err, -EINVAL, "want exactly one container (the agent's), no init containers");
	json_t *ctr = json_array_get(ctrs, 0);
	const char *rp = str_at(spec, "restartPolicy");
	if (!rp || strcmp(rp, "Never") != 0)
		return sbx_err_set(err, -EINVAL, "restartPolicy must be Never (an agent that died is a new pod)");
	if (!json_is_true(json_object_get(json_object_get(ctr, "securityContext"), "readOnlyRootFilesystem")))
		return sbx_err_set(err, -EINVAL,
				   "the container needs securityContext.readOnlyRootFilesystem: true (a reset "
				   "empties the emptyDirs, so they must be all a tenant can write)");
	json_t *av = volume(spec, SUP_KUBE_TMPL_VOLUME);
	if (!av || !str_at(json_object_get(av, "hostPath"), "path"))
		return sbx_err_set(err, -EINVAL, "no hostPath volume %s", SUP_KUBE_TMPL_VOLUME);
	int rc = agent_mount(ctr, t, err);
	return rc ?: empty_dirs(spec, ctr, t, err);
}

int sup_kube_tmpl_parse(const char *text, size_t len, const char *fallback, sup_kube_tmpl *out,
			sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	out->pod = sup_kube_yaml_to_json_typed(text, len, err);
	if (!out->pod)
		return err->code ? err->code : -EINVAL;
	const char *name = str_at(json_object_get(json_object_get(out->pod, "metadata"), "labels"),
				  SUP_KUBE_L_TEMPLATE);
	if (!name)
		name = fallback;
	if (!name || !sup_kube_label_ok(name)) {
		/* the words first: name may point into the pod the release frees */
		sbx_err_set(err, -EINVAL, "template name \"%.80s\" is not a label value", name ? name : "");
		sup_kube_tmpl_release(out);
		return err->code;
	}
	snprintf(out->name, sizeof(out->name), "%s", name);
	int rc = check(out->pod, out, err);
	if (rc < 0) {
		sbx_err_wrap(err, "template %s", out->name);
		sup_kube_tmpl_release(out);
	}
	return rc;
}

int sup_kube_tmpl_load(const char *path, sup_kube_tmpl *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "pod template %s", path);
	SBX_AUTO_FREE char *buf = malloc(SUP_KUBE_TMPL_FILE_MAX + 1);
	if (!buf)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, buf + have, SUP_KUBE_TMPL_FILE_MAX + 1 - have);
		if (n < 0)
			return sbx_err_sys(err, -errno, "pod template %s", path);
		if (n == 0)
			break;
		have += (size_t)n;
		if (have > SUP_KUBE_TMPL_FILE_MAX)
			return sbx_err_set(err, -EFBIG, "pod template %s: over %u bytes", path,
					   SUP_KUBE_TMPL_FILE_MAX);
	}
	/* the file's name without its folder and extension */
	char fallback[SUP_KUBE_TMPL_NAME_MAX] = "";
	const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	snprintf(fallback, sizeof(fallback), "%.*s", (int)strcspn(base, "."), base);
	int rc = sup_kube_tmpl_parse(buf, have, fallback, out, err);
	return rc < 0 ? sbx_err_wrap(err, "%s", path) : 0;
}

void sup_kube_tmpl_release(sup_kube_tmpl *t)
{
	json_decref(t->pod);
	for (size_t i = 0; i < t->npaths; i++)
		free(t->paths[i]);
	memset(t, 0, sizeof(*t));
}

/* o[key], made an object if it is not one. */
static json_t *object_at(json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	if (json_is_object(v))
		return v;
	v = json_object();
	return v && json_object_set_new(o, key, v) == 0 ? v : NULL;
}

char *sup_kube_tmpl_pod(const sup_kube_tmpl *t, const char *name, const char *ns, const char *node)
{
	json_t *pod = json_deep_copy(t->pod);
	json_t *meta = pod ? object_at(pod, "metadata") : NULL;
	json_t *labels = meta ? object_at(meta, "labels") : NULL;
	json_t *spec = pod ? object_at(pod, "spec") : NULL;
	char *text = NULL;
	if (labels && spec) {
		json_object_del(meta, "generateName");
		json_object_del(pod, "status");
		int bad = json_object_set_new(meta, "name", json_string(name));
		bad |= json_object_set_new(meta, "namespace", json_string(ns));
		bad |= json_object_set_new(labels, SUP_KUBE_L_APP, json_string(SUP_KUBE_L_APP_VALUE));
		/* a label value holds 63 bytes, a node name 253: the label is
		 * the node's tag (its name when that is short) */
		char tag[SUP_NODEID_TAG_MAX + 1];
		sup_nodeid_tag(node, tag);
		bad |= json_object_set_new(labels, SUP_KUBE_L_NODE, json_string(tag));
		bad |= json_object_set_new(labels, SUP_KUBE_L_TEMPLATE, json_string(t->name));
		bad |= json_object_set_new(labels, SUP_KUBE_L_STATE, json_string("starting"));
		bad |= json_object_set_new(spec, "nodeName", json_string(node));
		if (!bad)
			text = json_dumps(pod, JSON_COMPACT);
	}
	json_decref(pod);
	return text;
}

int sup_kube_quantity_milli(const char *s, uint64_t *milli)
{
	static const struct {
		const char *sfx;
		long double mult;
	} units[] = {
		{ "", 1 },		{ "m", 1e-3 },		  { "k", 1e3 },
		{ "M", 1e6 },		{ "G", 1e9 },		  { "T", 1e12 },
		{ "P", 1e15 },		{ "E", 1e18 },		  { "Ki", 1024.0L },
		{ "Mi", 1048576.0L },	{ "Gi", 1073741824.0L },  { "Ti", 1099511627776.0L },
		{ "Pi", 1125899906842624.0L }, { "Ei", 1152921504606846976.0L },
	};
	size_t i = 0, digits = 0;
	long double v = 0, frac = 0.1L;
	for (; s[i] >= '0' && s[i] <= '9'; i++, digits++)
		v = v * 10 + (s[i] - '0');
	if (s[i] == '.')
		for (i++; s[i] >= '0' && s[i] <= '9'; i++, digits++, frac /= 10)
			v += (s[i] - '0') * frac;
	if (!digits || i > 40)
		return -EINVAL;
	const char *rest = s + i;
	long double mult = -1;
	if ((rest[0] == 'e' || rest[0] == 'E') && rest[1] >= '0' && rest[1] <= '9') {
		int e = 0;
		for (const char *q = rest + 1; *q; q++) {
			if (*q < '0' || *q > '9' || e > 100)
				return -EINVAL;
			e = e * 10 + (*q - '0');
		}
		mult = 1;
		while (e-- > 0)
			mult *= 10;
	}
	for (size_t k = 0; mult < 0 && k < sizeof(units) / sizeof(units[0]); k++)
		if (strcmp(rest, units[k].sfx) == 0)
			mult = units[k].mult;
	if (mult < 0)
		return -EINVAL;
	long double r = v * mult * 1000;
	if (r > (long double)(1ull << 62))
		return -EINVAL;
	*milli = (uint64_t)(r + 0.5L);
	return 0;
}

/* limits[key] as thousandths: 0 and *got false when absent. */
static int limit_at(json_t *limits, const char *key, uint64_t *milli, bool *got, sbx_err *err)
{
	json_t *v = json_object_get(limits, key);
	*got = v != NULL;
	*milli = 0;
	if (!v)
		return 0;
	char buf[64];
	if (json_is_string(v))
		snprintf(buf, sizeof(buf), "%s", json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
	else if (json_is_real(v))
		snprintf(buf, sizeof(buf), "%.6f", json_real_value(v));
	else
		buf[0] = 0;
	if (json_is_integer(v) && json_integer_value(v) < 0)
		buf[0] = 0;
	if (sup_kube_quantity_milli(buf, milli) < 0)
		return sbx_err_set(err, -EINVAL, "resources.limits.%s: \"%.40s\" is no quantity", key, buf);
	return 0;
}

int sup_kube_tmpl_limits(const sup_kube_tmpl *t, const sup_resources *def, sup_resources *out, sbx_err *err)
{
	*out = *def;
	json_t *ctr = json_array_get(json_object_get(json_object_get(t->pod, "spec"), "containers"), 0);
	json_t *limits = json_object_get(json_object_get(ctr, "resources"), "limits");
	/* defined on every path: the analyzer does not know rc is never > 0 */
	uint64_t cpu = 0, mem = 0, disk = 0;
	bool gc = false, gm = false, gd = false;
	int rc = limit_at(limits, "cpu", &cpu, &gc, err);
	rc = rc ?: limit_at(limits, "memory", &mem, &gm, err);
	rc = rc ?: limit_at(limits, "ephemeral-storage", &disk, &gd, err);
	if (rc < 0)
		return sbx_err_wrap(err, "template %s", t->name);
	mem /= 1000;
	disk /= 1000;
	if (gc && (cpu < SUP_RES_MIN_CPU_MILLI || cpu > SUP_RES_MAX_CPU_MILLI))
		return sbx_err_set(err, -EINVAL, "template %s: resources.limits.cpu is outside %u..%u thousandths",
				   t->name, SUP_RES_MIN_CPU_MILLI, SUP_RES_MAX_CPU_MILLI);
	if ((gm && (mem < SUP_RES_MIN_MEMORY || mem > SUP_RES_MAX_BYTES)) ||
	    (gd && (disk < SUP_RES_MIN_DISK || disk > SUP_RES_MAX_BYTES)))
		return sbx_err_set(err, -EINVAL, "template %s: resources.limits.%s is under a sandbox's floor (32M) "
				   "or beyond 1P", t->name, gm && (mem < SUP_RES_MIN_MEMORY || mem > SUP_RES_MAX_BYTES)
				   ? "memory" : "ephemeral-storage");
	if (gc)
		out->cpu_milli = (uint32_t)cpu;
	if (gm)
		out->memory = mem;
	if (gd)
		out->disk = disk;
	return 0;
}
