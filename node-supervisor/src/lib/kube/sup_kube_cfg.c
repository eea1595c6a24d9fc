/* sup_kube_cfg: a kubeconfig's current context, or the pod's service
 * account, into the settings the client needs (sup_kube_cfg.h). YAML is
 * read with libyaml into a jansson tree, so that a kubeconfig written by
 * kubectl (YAML) and one written as JSON read the same. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "sbx/cleanup.h"
#include "sup_kube_cfg.h"
#include "sup_text.h"

#define YAML_DEPTH_MAX 32

/* The whole file, NUL-terminated, at most SUP_KUBE_FILE_MAX bytes. */
static int read_file(const char *path, sup_kube_blob *out, sbx_err *err)
{
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "%s", path);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return sbx_err_sys(err, -errno, "%s", path);
	if (!S_ISREG(st.st_mode) || st.st_size > (off_t)SUP_KUBE_FILE_MAX)
		return sbx_err_set(err, -EINVAL, "%s: not a regular file of at most %u bytes", path,
				   SUP_KUBE_FILE_MAX);
	char *p = malloc((size_t)st.st_size + 1);
	if (!p)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	size_t n = 0;
	while (n < (size_t)st.st_size) {
		ssize_t r = read(fd, p + n, (size_t)st.st_size - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			int e = r < 0 ? -errno : -EIO;
			free(p);
			return sbx_err_sys(err, e, "read %s", path);
		}
		n += (size_t)r;
	}
	p[n] = '\0';
	out->p = p;
	out->len = n;
	return 0;
}

static void blob_free(sup_kube_blob *b)
{
	if (b->p)
		explicit_bzero(b->p, b->len);
	free(b->p);
	b->p = NULL;
	b->len = 0;
}

/* ---- YAML -> JSON ---- */

static json_t *yaml_node(yaml_parser_t *ps, yaml_event_t *ev, int depth, bool typed, sbx_err *err);

/* The children of a mapping or sequence until its end event. */
static json_t *yaml_children(yaml_parser_t *ps, bool mapping, int depth, bool typed, sbx_err *err)
{
	json_t *j = mapping ? json_object() : json_array();
	if (!j) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	for (;;) {
		yaml_event_t ev;
		if (!yaml_parser_parse(ps, &ev)) {
			sbx_err_set(err, -EINVAL, "YAML line %zu: %s", ps->problem_mark.line + 1,
				    ps->problem ? ps->problem : "malformed");
			json_decref(j);
			return NULL;
		}
		if (ev.type == YAML_MAPPING_END_EVENT || ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return j;
		}
		if (!mapping) {
			json_t *v = yaml_node(ps, &ev, depth + 1, typed, err);
			if (!v || json_array_append_new(j, v) < 0) {
				json_decref(j);
				return NULL;
			}
			continue;
		}
		if (ev.type != YAML_SCALAR_EVENT) {
			sbx_err_set(err, -EINVAL, "YAML line %zu: a mapping key that is not a scalar",
				    ev.start_mark.line + 1);
			yaml_event_delete(&ev);
			json_decref(j);
			return NULL;
		}
		SBX_AUTO_FREE char *key = strndup((const char *)ev.data.scalar.value, ev.data.scalar.length);
		yaml_event_delete(&ev);
		if (!key || !yaml_parser_parse(ps, &ev)) {
			if (key)
				sbx_err_set(err, -EINVAL, "YAML line %zu: %s", ps->problem_mark.line + 1,
					    ps->problem ? ps->problem : "malformed");
			else
				sbx_err_set(err, -ENOMEM, "out of memory");
			json_decref(j);
			return NULL;
		}
		json_t *v = yaml_node(ps, &ev, depth + 1, typed, err);
		if (!v || json_object_set_new(j, key, v) < 0) {
			json_decref(j);
			return NULL;
		}
	}
}

/* A plain (unquoted) scalar as YAML 1.2's core schema types it: null,
 * true/false, a decimal integer; anything else stays a string. */
static json_t *plain_scalar(const char *s, size_t n)
{
	if (n == 0 || (n == 1 && s[0] == '~') || (n == 4 && memcmp(s, "null", 4) == 0))
		return json_null();
	if (n == 4 && memcmp(s, "true", 4) == 0)
		return json_true();
	if (n == 5 && memcmp(s, "false", 5) == 0)
		return json_false();
	size_t i = s[0] == '-' || s[0] == '+' ? 1 : 0;
	if (i < n && n - i <= 18 && strspn(s + i, "0123456789") == n - i) {
		char buf[24];
		memcpy(buf, s, n);
		buf[n] = '\0';
		return json_integer(strtoll(buf, NULL, 10));
	}
	return json_stringn(s, n);
}

/* One node starting at ev (consumed). Aliases are refused: a kubeconfig
 * needs none, and they are how a small file expands without bound. */
static json_t *yaml_node(yaml_parser_t *ps, yaml_event_t *ev, int depth, bool typed, sbx_err *err)
{
	size_t line = ev->start_mark.line + 1;
	if (depth > YAML_DEPTH_MAX) {
		yaml_event_delete(ev);
		sbx_err_set(err, -EINVAL, "YAML line %zu: nested deeper than %d", line, YAML_DEPTH_MAX);
		return NULL;
	}
	json_t *j = NULL;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		if (typed && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
			j = plain_scalar((const char *)ev->data.scalar.value, ev->data.scalar.length);
		else
			j = json_stringn((const char *)ev->data.scalar.value, ev->data.scalar.length);
		if (!j)
			sbx_err_set(err, -EINVAL, "YAML line %zu: a scalar that is not UTF-8", line);
		break;
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT: {
		bool mapping = ev->type == YAML_MAPPING_START_EVENT;
		yaml_event_delete(ev);
		return yaml_children(ps, mapping, depth, typed, err);
	}
	case YAML_ALIAS_EVENT:
		sbx_err_set(err, -EINVAL, "YAML line %zu: aliases are not accepted", line);
		break;
	default:
		sbx_err_set(err, -EINVAL, "YAML line %zu: unexpected event", line);
		break;
	}
	yaml_event_delete(ev);
	return j;
}

static json_t *yaml_to_json(const char *text, size_t len, bool typed, sbx_err *err)
{
	yaml_parser_t ps;
	if (!yaml_parser_initialize(&ps)) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
	json_t *root = NULL;
	for (;;) {
		yaml_event_t ev;
		if (!yaml_parser_parse(&ps, &ev)) {
			sbx_err_set(err, -EINVAL, "YAML line %zu: %s", ps.problem_mark.line + 1,
				    ps.problem ? ps.problem : "malformed");
			break;
		}
		yaml_event_type_t t = ev.type;
		if (t == YAML_STREAM_END_EVENT || (t == YAML_DOCUMENT_END_EVENT && root)) {
			yaml_event_delete(&ev);
			if (!root)
				sbx_err_set(err, -EINVAL, "empty document");
			yaml_parser_delete(&ps);
			return root;
		}
		if (t == YAML_STREAM_START_EVENT || t == YAML_DOCUMENT_START_EVENT ||
		    t == YAML_DOCUMENT_END_EVENT) {
			yaml_event_delete(&ev);
			continue;
		}
		root = yaml_node(&ps, &ev, 0, typed, err);
		if (!root)
			break;
	}
	json_decref(root);
	yaml_parser_delete(&ps);
	return NULL;
}

json_t *sup_kube_yaml_to_json(const char *text, size_t len, sbx_err *err)
{
	return yaml_to_json(text, len, false, err);
}

json_t *sup_kube_yaml_to_json_typed(const char *text, size_t len, sbx_err *err)
{
	return yaml_to_json(text, len, true, err);
}

/* ---- kubeconfig ---- */

/* The entry of list (clusters, users, contexts) named name: its inner
 * object (key: "cluster", "user", "context"). */
static json_t *named(json_t *root, const char *list, const char *key, const char *name,
		     sbx_err *err)
{
	json_t *a = json_object_get(root, list);
	size_t i;
	json_t *e;
	json_array_foreach(a, i, e) {
		const char *n = json_string_value(json_object_get(e, "name"));
		if (n && strcmp(n, name) == 0) {
			json_t *in = json_object_get(e, key);
			if (!json_is_object(in)) {
				sbx_err_set(err, -EINVAL, "%s '%s' has no %s", list, name, key);
				return NULL;
			}
			return in;
		}
	}
	sbx_err_set(err, -EINVAL, "no %s named '%s'", key, name);
	return NULL;
}

static const char *str_of(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s && s[0] ? s : NULL;
}

/* field-data (base64) or field (a file, relative to dir); neither: b stays empty. */
static int credential(json_t *o, const char *field, const char *dir, sup_kube_blob *b, sbx_err *err)
{
	char data_key[64];
	snprintf(data_key, sizeof(data_key), "%s-data", field);
	const char *data = str_of(o, data_key), *file = str_of(o, field);
	if (data) {
		size_t bad, n;
		uint8_t *p = sup_base64_decode(data, strlen(data), &n, &bad);
		if (!p)
			return bad == SIZE_MAX ? sbx_err_set(err, -ENOMEM, "out of memory")
					       : sbx_err_set(err, -EINVAL, "%s: not base64 (at %zu)",
							     data_key, bad);
		char *z = realloc(p, n + 1);
		if (!z) {
			free(p);
			return sbx_err_set(err, -ENOMEM, "out of memory");
		}
		z[n] = '\0';
		b->p = z;
		b->len = n;
		return 0;
	}
	if (!file)
		return 0;
	char path[PATH_MAX];
	if (snprintf(path, sizeof(path), "%s%s%s", file[0] == '/' ? "" : dir,
		     file[0] == '/' ? "" : "/", file) >= (int)sizeof(path))
		return sbx_err_set(err, -ENAMETOOLONG, "%s: path too long", field);
	if (read_file(path, b, err) < 0)
		return sbx_err_wrap(err, "%s", field);
	return 0;
}

static void cut_space(sup_kube_blob *b)
{
	while (b->len && (b->p[b->len - 1] == '\n' || b->p[b->len - 1] == '\r' ||
			  b->p[b->len - 1] == ' ' || b->p[b->len - 1] == '\t'))
		b->p[--b->len] = '\0';
}

static int set_server(sup_kube_cfg *c, const char *server, sbx_err *err)
{
	if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0)
		return sbx_err_set(err, -EINVAL, "server '%.200s' is not an http(s) URL", server);
	size_t n = strlen(server);
	while (n && server[n - 1] == '/')
		n--;
	if (n >= sizeof(c->server))
		return sbx_err_set(err, -EINVAL, "server URL too long");
	memcpy(c->server, server, n);
	c->server[n] = '\0';
	return 0;
}

static int set_ns(sup_kube_cfg *c, const char *ns, size_t n, sbx_err *err)
{
	if (n >= sizeof(c->ns))
		return sbx_err_set(err, -EINVAL, "namespace too long");
	for (size_t i = 0; i < n; i++)
		if (!((ns[i] >= 'a' && ns[i] <= 'z') || (ns[i] >= '0' && ns[i] <= '9') || ns[i] == '-'))
			return sbx_err_set(err, -EINVAL, "namespace '%.*s' is not a DNS label",
					   (int)n, ns);
	memcpy(c->ns, ns, n);
	c->ns[n] = '\0';
	return 0;
}

static int from_tree(json_t *root, const char *dir, const char *want, sup_kube_cfg *c, sbx_err *err)
{
	const char *ctx_name = want ? want : str_of(root, "current-context");
	if (!ctx_name)
		return sbx_err_set(err, -EINVAL, "no current-context (and none asked for)");
	snprintf(c->origin + strlen(c->origin), sizeof(c->origin) - strlen(c->origin),
		 ", context %.60s", ctx_name);
	json_t *ctx = named(root, "contexts", "context", ctx_name, err);
	if (!ctx)
		return err->code;
	const char *cl_name = str_of(ctx, "cluster"), *user_name = str_of(ctx, "user");
	if (!cl_name)
		return sbx_err_set(err, -EINVAL, "context '%s' names no cluster", ctx_name);
	json_t *cl = named(root, "clusters", "cluster", cl_name, err);
	if (!cl)
		return err->code;
	const char *server = str_of(cl, "server");
	if (!server)
		return sbx_err_set(err, -EINVAL, "cluster '%s' has no server", cl_name);
	if (set_server(c, server, err) < 0)
		return sbx_err_wrap(err, "cluster '%s'", cl_name);
	const char *ns = str_of(ctx, "namespace");
	if (ns && set_ns(c, ns, strlen(ns), err) < 0)
		return sbx_err_wrap(err, "context '%s'", ctx_name);
	const char *insecure = str_of(cl, "insecure-skip-tls-verify");
	c->insecure = insecure && strcmp(insecure, "true") == 0;
	if (credential(cl, "certificate-authority", dir, &c->ca, err) < 0)
		return sbx_err_wrap(err, "cluster '%s'", cl_name);
	if (!user_name)
		return 0; /* anonymous */
	json_t *u = named(root, "users", "user", user_name, err);
	if (!u)
		return err->code;
	if (json_object_get(u, "exec") || json_object_get(u, "auth-provider"))
		return sbx_err_set(err, -ENOTSUP,
				   "user '%s': exec and auth-provider credentials are not supported (give a token, tokenFile or a client certificate)",
				   user_name);
	if (credential(u, "client-certificate", dir, &c->cert, err) < 0 ||
	    credential(u, "client-key", dir, &c->key, err) < 0)
		return sbx_err_wrap(err, "user '%s'", user_name);
	if (!c->cert.p != !c->key.p)
		return sbx_err_set(err, -EINVAL, "user '%s': a client certificate needs its key and the key its certificate",
				   user_name);
	const char *token = str_of(u, "token"), *token_file = str_of(u, "tokenFile");
	if (token) {
		c->token.p = strdup(token);
		if (!c->token.p)
			return sbx_err_set(err, -ENOMEM, "out of memory");
		c->token.len = strlen(token);
	} else if (token_file) {
		if (snprintf(c->token_file, sizeof(c->token_file), "%s%s%s",
			     token_file[0] == '/' ? "" : dir, token_file[0] == '/' ? "" : "/",
			     token_file) >= (int)sizeof(c->token_file))
			return sbx_err_set(err, -ENAMETOOLONG, "user '%s': tokenFile too long", user_name);
		if (sup_kube_cfg_reload_token(c, err) < 0)
			return sbx_err_wrap(err, "user '%s'", user_name);
	}
	return 0;
}

int sup_kube_cfg_load_file(const char *path, const char *context, sup_kube_cfg *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->origin, sizeof(out->origin), "kubeconfig %.200s", path);
	sup_kube_blob text = { 0 };
	if (read_file(path, &text, err) < 0)
		return sbx_err_wrap(err, "kubeconfig");
	json_t *root = sup_kube_yaml_to_json(text.p, text.len, err);
	blob_free(&text);
	if (!root)
		return sbx_err_wrap(err, "kubeconfig %s", path);
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	int rc = json_is_object(root) ? from_tree(root, dir, context, out, err)
				       : sbx_err_set(err, -EINVAL, "not a mapping");
	json_decref(root);
	if (rc < 0) {
		sup_kube_cfg_release(out);
		return sbx_err_wrap(err, "kubeconfig %s", path);
	}
	return 0;
}

int sup_kube_cfg_in_cluster(const char *host, const char *port, const char *sa_dir,
			    sup_kube_cfg *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	snprintf(out->origin, sizeof(out->origin), "in-cluster service account");
	if (!host || !host[0] || !port || !port[0])
		return sbx_err_set(err, -ENOENT,
				   "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set: not in a pod (give --kubeconfig)");
	char server[SUP_KUBE_SERVER_MAX];
	bool v6 = strchr(host, ':') != NULL;
	snprintf(server, sizeof(server), "https://%s%s%s:%s", v6 ? "[" : "", host, v6 ? "]" : "", port);
	char path[PATH_MAX];
	sup_kube_blob ns = { 0 };
	int rc = set_server(out, server, err);
	if (rc == 0) {
		snprintf(out->token_file, sizeof(out->token_file), "%s/token", sa_dir);
		rc = sup_kube_cfg_reload_token(out, err);
	}
	if (rc == 0) {
		snprintf(path, sizeof(path), "%s/ca.crt", sa_dir);
		rc = read_file(path, &out->ca, err);
	}
	if (rc == 0) {
		snprintf(path, sizeof(path), "%s/namespace", sa_dir);
		rc = read_file(path, &ns, err);
	}
	if (rc == 0 && ns.p) {
		cut_space(&ns);
		rc = set_ns(out, ns.p, ns.len, err);
	}
	blob_free(&ns);
	if (rc < 0) {
		sup_kube_cfg_release(out);
		return sbx_err_wrap(err, "in-cluster config");
	}
	return 0;
}

int sup_kube_cfg_reload_token(sup_kube_cfg *c, sbx_err *err)
{
	if (!c->token_file[0])
		return 0;
	sup_kube_blob b = { 0 };
	if (read_file(c->token_file, &b, err) < 0)
		return sbx_err_wrap(err, "token");
	cut_space(&b);
	if (!b.len) {
		blob_free(&b);
		return sbx_err_set(err, -EINVAL, "token file %s is empty", c->token_file);
	}
	blob_free(&c->token);
	c->token = b;
	return 0;
}

void sup_kube_cfg_release(sup_kube_cfg *c)
{
	blob_free(&c->ca);
	blob_free(&c->cert);
	blob_free(&c->key);
	blob_free(&c->token);
}
