/* sup_policy: see sup_policy.h. */
#include "sup_policy.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_log.h"
#include "sup_path.h"

typedef struct policy_root {
	char *path;
	size_t len;
	sup_policy_mode mode;
} policy_root;

typedef struct policy_tenant {
	char *name;
	policy_root *roots;
	size_t nroots;
} policy_tenant;

struct sup_policy {
	policy_tenant *tenants;
	size_t ntenants;
};

/* Parsed by the same code as a file, so the default obeys the same rules. */
static const char default_json[] =
	"{\"tenants\": {\"default\": {\"paths\": ["
	"{\"root\": \"/workspace\", \"mode\": \"rw\"}, "
	"{\"root\": \"/tmp\", \"mode\": \"rw\"}, "
	"{\"root\": \"/home/sandbox\", \"mode\": \"rw\"}]}}}";

void sup_policy_free(sup_policy *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->ntenants; i++) {
		for (size_t k = 0; k < p->tenants[i].nroots; k++)
			free(p->tenants[i].roots[k].path);
		free(p->tenants[i].roots);
		free(p->tenants[i].name);
	}
	free(p->tenants);
	free(p);
}

bool sup_policy_tenant_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > SUP_POLICY_TENANT_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

/* Only the keys in allowed[] may appear: a typo ("mdoe") is an error, not a
 * silently ignored setting. */
int sup_policy_only_keys(const json_t *obj, const char *const *allowed, size_t n,
			 const char *where, sbx_err *err)
{
	const char *key;
	json_t *v;
	json_object_foreach((json_t *)obj, key, v) {
		(void)v;
		bool ok = false;
		for (size_t i = 0; i < n && !ok; i++)
			ok = strcmp(key, allowed[i]) == 0;
		if (!ok) {
			char q[SUP_PATH_QUOTE_MAX];
			return sbx_err_set(err, -EINVAL, "%s: unknown key %s", where,
					   sup_path_quote(key, strlen(key), q, sizeof(q)));
		}
	}
	return 0;
}

/* entry into out; prev[0..nprev) are the tenant's roots so far. */
static int parse_root(json_t *entry, const char *where, const policy_root *prev, size_t nprev,
		      policy_root *out, sbx_err *err)
{
	static const char *const keys[] = { "root", "mode" };
	char q[SUP_PATH_QUOTE_MAX];
	if (!json_is_object(entry))
		return sbx_err_set(err, -EINVAL, "%s: want an object {\"root\", \"mode\"}", where);
	int r = sup_policy_only_keys(entry, keys, 2, where, err);
	if (r < 0)
		return r;

	json_t *root = json_object_get(entry, "root");
	if (!json_is_string(root))
		return sbx_err_set(err, -EINVAL, "%s.root: want a string", where);
	const char *s = json_string_value(root);
	size_t len = json_string_length(root);
	char norm[PATH_MAX];
	sbx_err perr;
	int n = sup_path_normalize(s, len, norm, sizeof(norm), NULL, &perr);
	if (n < 0)
		return sbx_err_set(err, n, "%s.root: %s", where, perr.msg);
	if ((size_t)n != len || memcmp(norm, s, len) != 0)
		return sbx_err_set(err, -EINVAL, "%s.root %s: not normalised, write \"%s\"", where,
				   sup_path_quote(s, len, q, sizeof(q)), norm);
	for (size_t k = 0; k < nprev; k++)
		if (prev[k].path && strcmp(prev[k].path, norm) == 0)
			return sbx_err_set(err, -EINVAL, "%s.root: %s is already paths[%zu]", where,
					   norm, k);

	json_t *mode = json_object_get(entry, "mode");
	const char *m = json_is_string(mode) ? json_string_value(mode) : NULL;
	if (m && strcmp(m, "ro") == 0)
		out->mode = SUP_POLICY_RO;
	else if (m && strcmp(m, "rw") == 0)
		out->mode = SUP_POLICY_RW;
	else
		return sbx_err_set(err, -EINVAL, "%s.mode: want \"ro\" or \"rw\"", where);

	out->path = strndup(s, len);
	if (!out->path)
		return sbx_err_sys(err, -ENOMEM, "%s.root", where);
	out->len = len;
	return 0;
}

static int parse_paths(json_t *paths, const char *where, policy_tenant *t, sbx_err *err);

static int parse_tenant(const char *name, json_t *obj, policy_tenant *t, sbx_err *err)
{
	static const char *const keys[] = { "paths" };
	char where[128];
	char q[SUP_PATH_QUOTE_MAX];
	if (!sup_policy_tenant_name_ok(name))
		return sbx_err_set(err, -EINVAL,
				   "tenants: name %s: want 1 to %d of A-Z a-z 0-9 . _ -",
				   sup_path_quote(name, strlen(name), q, sizeof(q)),
				   SUP_POLICY_TENANT_MAX);
	snprintf(where, sizeof(where), "tenants.%s", name);
	if (!json_is_object(obj))
		return sbx_err_set(err, -EINVAL, "%s: want an object {\"paths\": [...]}", where);
	int r = sup_policy_only_keys(obj, keys, 1, where, err);
	if (r < 0)
		return r;
	t->name = strdup(name);
	if (!t->name)
		return sbx_err_sys(err, -ENOMEM, "%s", where);

	char pwhere[160];
	snprintf(pwhere, sizeof(pwhere), "%s.paths", where);
	return parse_paths(json_object_get(obj, "paths"), pwhere, t, err);
}

/* A tenant's "paths" array into t's roots; where names it ("tenants.x.paths"). */
static int parse_paths(json_t *paths, const char *where, policy_tenant *t, sbx_err *err)
{
	if (!json_is_array(paths))
		return sbx_err_set(err, -EINVAL, "%s: want an array", where);
	size_t n = json_array_size(paths);
	if (n > SUP_POLICY_MAX_ROOTS)
		return sbx_err_set(err, -EINVAL, "%s: %zu roots, at most %d", where, n,
				   SUP_POLICY_MAX_ROOTS);
	if (n == 0)
		return 0; /* a tenant without file access */
	t->roots = calloc(n, sizeof(*t->roots));
	if (!t->roots)
		return sbx_err_sys(err, -ENOMEM, "%s", where);
	for (size_t i = 0; i < n; i++) {
		char ewhere[192];
		snprintf(ewhere, sizeof(ewhere), "%s[%zu]", where, i);
		int r = parse_root(json_array_get(paths, i), ewhere, t->roots, t->nroots,
			       &t->roots[t->nroots], err);
		if (r < 0)
			return r;
		t->nroots++;
	}
	return 0;
}

static int parse_policy(json_t *doc, sup_policy *p, sbx_err *err)
{
	static const char *const keys[] = { "tenants" };
	if (!json_is_object(doc))
		return sbx_err_set(err, -EINVAL, "want an object {\"tenants\": {...}}");
	int r = sup_policy_only_keys(doc, keys, 1, "top level", err);
	if (r < 0)
		return r;
	json_t *tenants = json_object_get(doc, "tenants");
	if (!json_is_object(tenants))
		return sbx_err_set(err, -EINVAL, "tenants: want an object of tenant names");
	size_t n = json_object_size(tenants);
	if (n == 0)
		return sbx_err_set(err, -EINVAL, "tenants: empty, nobody would get file access");
	if (n > SUP_POLICY_MAX_TENANTS)
		return sbx_err_set(err, -EINVAL, "tenants: %zu, at most %d", n,
				   SUP_POLICY_MAX_TENANTS);
	p->tenants = calloc(n, sizeof(*p->tenants));
	if (!p->tenants)
		return sbx_err_sys(err, -ENOMEM, "tenants");
	const char *name;
	json_t *t;
	json_object_foreach(tenants, name, t) {
		/* Counted before parsing, so a half-parsed tenant is freed too. */
		r = parse_tenant(name, t, &p->tenants[p->ntenants++], err);
		if (r < 0)
			return r;
	}
	return 0;
}

int sup_policy_json_load(const char *text, size_t len, const char *what, const char *origin,
			 json_t **doc, sbx_err *err)
{
	json_error_t jerr;
	*doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!*doc)
		return sbx_err_set(err, -EINVAL, "%s %s: line %d column %d: %s", what, origin,
				   jerr.line, jerr.column, jerr.text);
	return 0;
}

int sup_policy_load_json(const char *text, size_t len, const char *origin, sup_policy **out,
			 sbx_err *err)
{
	*out = NULL;
	json_auto_t *doc = NULL;
	int rc = sup_policy_json_load(text, len, "policy", origin, &doc, err);
	if (rc < 0)
		return rc;
	sup_policy *p = calloc(1, sizeof(*p));
	if (!p)
		return sbx_err_sys(err, -ENOMEM, "policy %s", origin);
	int r = parse_policy(doc, p, err);
	if (r < 0) {
		sup_policy_free(p);
		return sbx_err_wrap(err, "policy %s", origin);
	}
	*out = p;
	return 0;
}

int sup_policy_new_default(sup_policy **out, sbx_err *err)
{
	return sup_policy_load_json(default_json, sizeof(default_json) - 1, "(built-in)", out,
				    err);
}

int sup_policy_read_file(const char *file, const char *what, char **out, size_t *outlen,
			 sbx_err *err)
{
	*out = NULL;
	SBX_AUTO_CLOSE int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "%s %s", what, file);
	struct stat st;
	if (fstat(fd, &st) < 0)
		return sbx_err_sys(err, -errno, "%s %s", what, file);
	if (!S_ISREG(st.st_mode))
		return sbx_err_set(err, -EINVAL, "%s %s: not a regular file", what, file);
	if (st.st_size > SUP_POLICY_FILE_MAX)
		return sbx_err_set(err, -EFBIG, "%s %s: %lld bytes, at most %d", what, file,
				   (long long)st.st_size, SUP_POLICY_FILE_MAX);
	/* One byte more than the limit, to notice a file that grew after fstat. */
	SBX_AUTO_FREE char *buf = malloc(SUP_POLICY_FILE_MAX + 1);
	if (!buf)
		return sbx_err_sys(err, -ENOMEM, "%s %s", what, file);
	size_t len = 0;
	while (len <= SUP_POLICY_FILE_MAX) {
		ssize_t n = read(fd, buf + len, SUP_POLICY_FILE_MAX + 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sbx_err_sys(err, -errno, "%s %s: read", what, file);
		if (n == 0)
			break;
		len += (size_t)n;
	}
	if (len > SUP_POLICY_FILE_MAX)
		return sbx_err_set(err, -EFBIG, "%s %s: over %d bytes", what, file,
				   SUP_POLICY_FILE_MAX);
	buf[len] = '\0';
	*out = sbx_steal_ptr(&buf);
	*outlen = len;
	return 0;
}

int sup_policy_load_file(const char *file, sup_policy **out, sbx_err *err)
{
	*out = NULL;
	SBX_AUTO_FREE char *buf = NULL;
	size_t len = 0;
	int rc = sup_policy_read_file(file, "policy", &buf, &len, err);
	return rc < 0 ? rc : sup_policy_load_json(buf, len, file, out, err);
}

int sup_policy_from_paths(const json_t *paths, const char *where, sup_policy **out, sbx_err *err)
{
	*out = NULL;
	sup_policy *p = calloc(1, sizeof(*p));
	if (!p || !(p->tenants = calloc(1, sizeof(*p->tenants))) ||
	    !(p->tenants[0].name = strdup("default"))) {
		if (p)
			free(p->tenants);
		free(p);
		return sbx_err_sys(err, -ENOMEM, "%s", where);
	}
	p->ntenants = 1;
	int rc = parse_paths((json_t *)paths, where, &p->tenants[0], err);
	if (rc < 0) {
		sup_policy_free(p);
		return rc;
	}
	*out = p;
	return 0;
}

static const policy_tenant *find_tenant(const sup_policy *p, const char *name)
{
	const policy_tenant *fallback = NULL;
	if (!name)
		name = "default";
	for (size_t i = 0; i < p->ntenants; i++) {
		if (strcmp(p->tenants[i].name, name) == 0)
			return &p->tenants[i];
		if (strcmp(p->tenants[i].name, "default") == 0)
			fallback = &p->tenants[i];
	}
	return fallback;
}

size_t sup_policy_root_count(const sup_policy *p, const char *tenant)
{
	const policy_tenant *t = find_tenant(p, tenant);
	return t ? t->nroots : 0;
}

/* "/workspace (rw), /tmp (rw)" for a denial message, cut to fit. */
static const char *list_roots(const policy_tenant *t, char *buf, size_t cap)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < t->nroots && o < cap; i++) {
		int n = snprintf(buf + o, cap - o, "%s%s (%s)", i ? ", " : "", t->roots[i].path,
				 t->roots[i].mode == SUP_POLICY_RW ? "rw" : "ro");
		if (n < 0)
			break;
		o += (size_t)n;
	}
	if (t->nroots == 0)
		snprintf(buf, cap, "none");
	return buf;
}

int sup_policy_check(const sup_policy *p, const char *tenant, const char *path, size_t len,
		     sup_policy_access need, sup_policy_match *m, sbx_err *err)
{
	char q[SUP_PATH_QUOTE_MAX];
	int n = sup_path_normalize(path, len, m->path, sizeof(m->path), &m->dir, err);
	if (n < 0)
		return n;
	size_t plen = (size_t)n;

	const policy_tenant *t = find_tenant(p, tenant);
	if (!t)
		return sbx_err_set(err, -EPERM, "path %s: tenant %s has no file access",
				   sup_path_quote(m->path, plen, q, sizeof(q)),
				   tenant ? tenant : "default");
	const policy_root *best = NULL;
	for (size_t i = 0; i < t->nroots; i++) {
		const policy_root *r = &t->roots[i];
		if ((!best || r->len > best->len) && sup_path_is_under(m->path, plen, r->path, r->len))
			best = r;
	}
	if (!best) {
		char roots[256];
		return sbx_err_set(err, -EPERM, "path %s: outside the allowed roots: %s",
				   sup_path_quote(m->path, plen, q, sizeof(q)),
				   list_roots(t, roots, sizeof(roots)));
	}
	if ((need & SUP_POLICY_WRITE) && best->mode != SUP_POLICY_RW)
		return sbx_err_set(err, -EPERM, "path %s: under read-only root %s",
				   sup_path_quote(m->path, plen, q, sizeof(q)), best->path);

	memcpy(m->root, best->path, best->len + 1);
	m->mode = best->mode;
	m->is_root = plen == best->len;
	/* Below "/" everything after the slash; below "/x" what follows "/x/". */
	size_t skip = best->len == 1 ? 1 : m->is_root ? best->len : best->len + 1;
	memcpy(m->rel, m->path + skip, plen - skip + 1);
	return 0;
}

char *sup_policy_denial_line(char *buf, size_t cap, const char *tenant, const char *sandbox,
			     const char *op, const char *path, size_t len, const sbx_err *why)
{
	char qt[SUP_POLICY_TENANT_MAX * 4 + 8], qs[96], qo[48], qp[SUP_PATH_QUOTE_MAX];
	tenant = tenant ? tenant : "default";
	sandbox = sandbox ? sandbox : "-";
	op = op ? op : "-";
	snprintf(buf, cap, "file access denied: tenant=%s sandbox=%s op=%s path=%s: %s",
		 sup_path_quote(tenant, strlen(tenant), qt, sizeof(qt)),
		 sup_path_quote(sandbox, strlen(sandbox), qs, sizeof(qs)),
		 sup_path_quote(op, strlen(op), qo, sizeof(qo)),
		 sup_path_quote(path ? path : "", path ? len : 0, qp, sizeof(qp)),
		 why && why->msg[0] ? why->msg : "denied");
	/* why->msg quotes the path it names; anything else in it is ours. */
	for (char *c = buf; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = ' ';
	return buf;
}

void sup_policy_log_denial(const char *tenant, const char *sandbox, const char *op,
			   const char *path, size_t len, const sbx_err *why)
{
	char line[1024];
	sup_warn("%s", sup_policy_denial_line(line, sizeof(line), tenant, sandbox, op, path, len,
					       why));
}
