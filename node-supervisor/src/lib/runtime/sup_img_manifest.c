/* sup_img_manifest: see sup_img_manifest.h. */
#include "sup_img_manifest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sbx/json_auto.h"

#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define REF_ANNOTATION "org.opencontainers.image.ref.name"

static const char *const layer_types[] = {
	"application/vnd.oci.image.layer.v1.tar",
	"application/vnd.oci.image.layer.v1.tar+gzip",
	"application/vnd.oci.image.layer.v1.tar+zstd",
	"application/vnd.docker.image.rootfs.diff.tar.gzip",
	"application/vnd.docker.image.rootfs.diff.tar",
};

static int load(const char *what, const char *text, size_t len, json_t **out, sbx_err *err)
{
	if (len > SUP_IMG_DOC_MAX)
		return sbx_err_set(err, -EFBIG, "%s: larger than %u bytes", what, SUP_IMG_DOC_MAX);
	json_error_t je;
	*out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!*out)
		return sbx_err_set(err, -EINVAL, "%s: not JSON: %s (line %d)", what, je.text, je.line);
	return 0;
}

/* A document whose list (key's value, or the whole document for NULL) has
 * at least one entry. */
static int load_list(const char *what, const char *text, size_t len, const char *key, json_t **doc,
		     json_t **list, sbx_err *err)
{
	int r = load(what, text, len, doc, err);
	if (r < 0)
		return r;
	*list = key ? json_object_get(*doc, key) : *doc;
	if (!json_is_array(*list) || json_array_size(*list) == 0)
		return sbx_err_set(err, -EINVAL, "%s: no %s", what, key ? key : "images");
	return 0;
}

bool sup_img_ref_ok(const char *ref)
{
	size_t n = strlen(ref);
	if (n == 0 || n > SUP_IMG_REF_MAX || strcmp(ref, "host") == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = ref[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
		if (!alnum && (i == 0 || !strchr("._/:@+-", c)))
			return false;
	}
	/* "sha256:..." is how a digest is named, never a ref */
	return strncmp(ref, "sha256:", 7) != 0;
}

static void add_ref(sup_img_plan *p, const char *ref)
{
	if (!ref || !sup_img_ref_ok(ref) || p->nrefs == SUP_IMG_MAX_REFS)
		return;
	snprintf(p->refs[p->nrefs++], SUP_IMG_REF_MAX + 1, "%s", ref);
}

/* {"mediaType","digest","size"} into d, the blob's path from its digest. */
static int descriptor(const char *what, json_t *j, sup_img_desc *d, sbx_err *err)
{
	const char *digest = json_string_value(json_object_get(j, "digest"));
	json_t *size = json_object_get(j, "size");
	int r = sup_img_digest_parse(what, digest, d->hex, err);
	if (r < 0)
		return r;
	if (size && (!json_is_integer(size) || json_integer_value(size) < 0))
		return sbx_err_set(err, -EINVAL, "%s: size is not a count of bytes", what);
	d->size = size ? json_integer_value(size) : -1;
	snprintf(d->path, sizeof(d->path), "blobs/sha256/%s", d->hex);
	return 0;
}

int sup_img_parse_index(const char *json, size_t len, sup_img_plan *plans, size_t cap,
			size_t *n, sbx_err *err)
{
	*n = 0;
	SBX_AUTO_JSON json_t *j = NULL;
	json_t *ms;
	int r = load_list("index.json", json, len, "manifests", &j, &ms, err);
	if (r < 0)
		return r;
	size_t i;
	json_t *m;
	for (i = 0; i < json_array_size(ms) && (m = json_array_get(ms, i)); i++) {
		const char *mt = json_string_value(json_object_get(m, "mediaType"));
		bool index = mt && (strcmp(mt, MT_OCI_INDEX) == 0 || strcmp(mt, MT_DOCKER_LIST) == 0);
		if (!mt || (!index && strcmp(mt, MT_OCI_MANIFEST) != 0 && strcmp(mt, MT_DOCKER_MANIFEST) != 0))
			return sbx_err_set(err, -ENOTSUP, "index.json: manifest %zu: media type '%.100s' not supported",
					   i, mt ? mt : "(none)");
		if (*n == cap)
			return sbx_err_set(err, -E2BIG, "index.json: more than %zu images", cap);
		sup_img_plan *p = &plans[(*n)++];
		memset(p, 0, sizeof(*p));
		r = descriptor("index.json: manifest", m, &p->manifest, err);
		if (r < 0)
			return r;
		/* a nested index is read in place of the manifest: mark it */
		if (index)
			p->manifest.size = -2;
		add_ref(p, json_string_value(json_object_get(json_object_get(m, "annotations"), REF_ANNOTATION)));
	}
	return 0;
}

int sup_img_parse_platforms(const char *json, size_t len, sup_img_plan *plan, sbx_err *err)
{
	SBX_AUTO_JSON json_t *j = NULL;
	int r = load("image index", json, len, &j, err);
	if (r < 0)
		return r;
#if defined(__x86_64__)
	const char *arch = "amd64";
#elif defined(__aarch64__)
	const char *arch = "arm64";
#else
#error "name this platform's OCI architecture"
#endif
	size_t i;
	json_t *m;
	json_t *ms = json_object_get(j, "manifests");
	for (i = 0; i < json_array_size(ms) && (m = json_array_get(ms, i)); i++) {
		json_t *pf = json_object_get(m, "platform");
		const char *os = json_string_value(json_object_get(pf, "os"));
		const char *a = json_string_value(json_object_get(pf, "architecture"));
		const char *mt = json_string_value(json_object_get(m, "mediaType"));
		if (os && a && mt && strcmp(os, "linux") == 0 && strcmp(a, arch) == 0 &&
		    (strcmp(mt, MT_OCI_MANIFEST) == 0 || strcmp(mt, MT_DOCKER_MANIFEST) == 0))
			return descriptor("image index: manifest", m, &plan->manifest, err);
	}
	return sbx_err_set(err, -ENOENT, "image index: no manifest for linux/%s", arch);
}

int sup_img_parse_manifest(const char *json, size_t len, sup_img_plan *plan, sbx_err *err)
{
	SBX_AUTO_JSON json_t *j = NULL;
	int r = load("manifest", json, len, &j, err);
	if (r < 0)
		return r;
	r = descriptor("manifest: config", json_object_get(j, "config"), &plan->config, err);
	if (r < 0)
		return r;
	json_t *ls = json_object_get(j, "layers");
	if (!json_is_array(ls))
		return sbx_err_set(err, -EINVAL, "manifest: no layers");
	if (json_array_size(ls) > SUP_IMG_MAX_LAYERS)
		return sbx_err_set(err, -E2BIG, "manifest: %zu layers, at most %d", json_array_size(ls),
				   SUP_IMG_MAX_LAYERS);
	plan->nlayers = 0;
	size_t i;
	json_t *l;
	for (i = 0; i < json_array_size(ls) && (l = json_array_get(ls, i)); i++) {
		const char *mt = json_string_value(json_object_get(l, "mediaType"));
		bool known = false;
		for (size_t k = 0; mt && k < sizeof(layer_types) / sizeof(layer_types[0]); k++)
			known |= strcmp(mt, layer_types[k]) == 0;
		if (!known)
			return sbx_err_set(err, -ENOTSUP, "manifest: layer %zu: media type '%.100s' not supported",
					   i, mt ? mt : "(none)");
		r = descriptor("manifest: layer", l, &plan->layers[plan->nlayers++], err);
		if (r < 0)
			return r;
	}
	return 0;
}

void sup_img_config_release(sup_img_config *c)
{
	for (size_t i = 0; i < c->nenv; i++)
		free(c->env[i]);
	free(c->env);
	free(c->workdir);
	free(c->user);
	free(c->entry0);
	free(c->service);
	memset(c, 0, sizeof(*c));
}

static int opt_string(json_t *cfg, const char *key, char **out, sbx_err *err)
{
	json_t *v = json_object_get(cfg, key);
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_string(v))
		return sbx_err_set(err, -EINVAL, "config: %s is not a string", key);
	if (json_string_length(v) == 0)
		return 0;
	if (json_string_length(v) > 4096 || strlen(json_string_value(v)) != json_string_length(v))
		return sbx_err_set(err, -EINVAL, "config: %s too long or holds NUL", key);
	*out = strdup(json_string_value(v));
	return *out ? 0 : sbx_err_set(err, -ENOMEM, "config");
}

/* Labels' dev.sbx.service: an absolute path of printable bytes, no
 * "..", at most SUP_IMG_SERVICE_MAX; another label of any shape is not
 * ours to judge. */
static int service_label(json_t *cfg, sup_img_config *out, sbx_err *err)
{
	json_t *labels = json_object_get(cfg, "Labels");
	json_t *v = json_is_object(labels) ? json_object_get(labels, SUP_IMG_SERVICE_LABEL) : NULL;
	if (!v)
		return 0;
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	bool ok = s && n > 1 && n <= SUP_IMG_SERVICE_MAX && s[0] == '/' && strlen(s) == n &&
		  !strstr(s, "/../") && strcmp(s + n - 3, "/..") != 0;
	for (size_t i = 0; ok && i < n; i++)
		ok = (unsigned char)s[i] > 0x20 && (unsigned char)s[i] < 0x7f;
	if (!ok)
		return sbx_err_set(err, -EINVAL, "config: label %s is not an absolute path (at most %d "
				   "printable bytes, no spaces)", SUP_IMG_SERVICE_LABEL, SUP_IMG_SERVICE_MAX);
	out->service = strdup(s);
	return out->service ? 0 : sbx_err_set(err, -ENOMEM, "config");
}

static int parse_config(json_t *j, sup_img_config *out, sbx_err *err)
{
	json_t *rootfs = json_object_get(j, "rootfs");
	json_t *ids = json_object_get(rootfs, "diff_ids");
	if (!json_is_array(ids) || json_array_size(ids) > SUP_IMG_MAX_LAYERS)
		return sbx_err_set(err, -EINVAL, "config: rootfs.diff_ids missing or over %d", SUP_IMG_MAX_LAYERS);
	size_t i;
	json_t *v;
	for (i = 0; i < json_array_size(ids) && (v = json_array_get(ids, i)); i++) {
		int r = sup_img_digest_parse("config: diff_id", json_string_value(v), out->diff_ids[i], err);
		if (r < 0)
			return r;
		out->ndiff++;
	}
	json_t *cfg = json_object_get(j, "config");
	if (!cfg || json_is_null(cfg))
		return 0;
	if (!json_is_object(cfg))
		return sbx_err_set(err, -EINVAL, "config: config is not an object");
	json_t *env = json_object_get(cfg, "Env");
	if (env && !json_is_null(env)) {
		if (!json_is_array(env) || json_array_size(env) > SUP_IMG_MAX_ENV)
			return sbx_err_set(err, -EINVAL, "config: Env is not a list of at most %d", SUP_IMG_MAX_ENV);
		out->env = calloc(json_array_size(env) + 1, sizeof(char *));
		if (!out->env)
			return sbx_err_set(err, -ENOMEM, "config");
		for (i = 0; i < json_array_size(env) && (v = json_array_get(env, i)); i++) {
			const char *s = json_string_value(v);
			const char *eq = s ? strchr(s, '=') : NULL;
			if (!s || !eq || eq == s || strlen(s) != json_string_length(v) || strlen(s) > 32768)
				return sbx_err_set(err, -EINVAL, "config: Env[%zu] is not KEY=VALUE", i);
			if (!(out->env[out->nenv++] = strdup(s)))
				return sbx_err_set(err, -ENOMEM, "config");
		}
	}
	int r = opt_string(cfg, "WorkingDir", &out->workdir, err);
	r = r ?: opt_string(cfg, "User", &out->user, err);
	if (r < 0)
		return r;
	if (out->workdir && out->workdir[0] != '/')
		return sbx_err_set(err, -EINVAL, "config: WorkingDir '%.200s' is not absolute", out->workdir);
	json_t *ep = json_object_get(cfg, "Entrypoint");
	if (json_is_array(ep) && json_array_size(ep) > 0 && json_is_string(json_array_get(ep, 0)))
		out->entry0 = strdup(json_string_value(json_array_get(ep, 0)));
	return service_label(cfg, out, err);
}

int sup_img_parse_config(const char *json, size_t len, sup_img_config *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	SBX_AUTO_JSON json_t *j = NULL;
	int r = load("config", json, len, &j, err);
	if (r == 0)
		r = parse_config(j, out, err);
	if (r < 0)
		sup_img_config_release(out);
	return r;
}

/* A path inside a docker save archive: [A-Za-z0-9._/-], relative, no "..". */
static int docker_path(const char *what, const char *s, sup_img_desc *d, sbx_err *err)
{
	if (!s || !s[0] || s[0] == '/' || strlen(s) >= sizeof(d->path) || strstr(s, ".."))
		return sbx_err_set(err, -EINVAL, "manifest.json: %s '%.100s' is not a path in the archive",
				   what, s ? s : "(none)");
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      strchr("._/-", *p)))
			return sbx_err_set(err, -EINVAL, "manifest.json: %s '%.100s' is not a path in the archive",
					   what, s);
	memset(d, 0, sizeof(*d));
	d->size = -1;
	snprintf(d->path, sizeof(d->path), "%s", s);
	return 0;
}

int sup_img_parse_docker(const char *json, size_t len, sup_img_plan *plans, size_t cap,
			 size_t *n, sbx_err *err)
{
	*n = 0;
	SBX_AUTO_JSON json_t *j = NULL;
	json_t *list;
	int r = load_list("manifest.json", json, len, NULL, &j, &list, err);
	if (r < 0)
		return r;
	size_t i;
	json_t *m;
	for (i = 0; i < json_array_size(list) && (m = json_array_get(list, i)); i++) {
		if (*n == cap)
			return sbx_err_set(err, -E2BIG, "manifest.json: more than %zu images", cap);
		sup_img_plan *p = &plans[(*n)++];
		memset(p, 0, sizeof(*p));
		r = docker_path("Config", json_string_value(json_object_get(m, "Config")), &p->config, err);
		if (r < 0)
			return r;
		json_t *ls = json_object_get(m, "Layers");
		if (!json_is_array(ls) || json_array_size(ls) > SUP_IMG_MAX_LAYERS)
			return sbx_err_set(err, -EINVAL, "manifest.json: Layers missing or over %d", SUP_IMG_MAX_LAYERS);
		size_t k;
		json_t *l;
		for (k = 0; k < json_array_size(ls) && (l = json_array_get(ls, k)); k++) {
			r = docker_path("layer", json_string_value(l), &p->layers[p->nlayers++], err);
			if (r < 0)
				return r;
		}
		json_t *tags = json_object_get(m, "RepoTags");
		json_t *t;
		for (k = 0; k < json_array_size(tags) && (t = json_array_get(tags, k)); k++)
			add_ref(p, json_string_value(t));
	}
	return 0;
}
