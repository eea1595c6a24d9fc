/* sup_tenants: see sup_tenants.h. */
#include "sup_tenants.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sup_log.h"

struct sup_tenants {
	unsigned refs; /* the loader's, plus one per hold */
	const sup_policy *node_policy;
	sup_tenant *v;
	size_t n;
};

static void tenant_free(sup_tenant *t)
{
	for (size_t i = 0; i < t->nimages; i++)
		free(t->images[i]);
	free(t->images);
	sup_policy_free(t->policy);
}

static void set_free(sup_tenants *ts)
{
	for (size_t i = 0; i < ts->n; i++)
		tenant_free(&ts->v[i]);
	free(ts->v);
	free(ts);
}

void sup_tenants_unref(sup_tenants *ts)
{
	if (ts && --ts->refs == 0)
		set_free(ts);
}

/* Every setting the node's: what a tenant that says nothing gets. */
static void tenant_init(sup_tenant *t, const char *name, const sup_tenants_node *node,
			sup_tenants *set)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->allow_root = node->allow_root;
	t->max_timeout_s = node->max_timeout_s;
	t->res_default = node->res_default;
	t->isolations = (1u << node->nisolations) - 1;
	t->set = set;
}

static int parse_tokens(const json_t *v, const char *where, sup_tenant *t, sbx_err *err)
{
	if (!json_is_array(v) || json_array_size(v) == 0)
		return sbx_err_set(err, -EINVAL, "%s: want a non-empty array of token hashes", where);
	if (json_array_size(v) > SUP_TENANT_MAX_TOKENS)
		return sbx_err_set(err, -EINVAL, "%s: %zu tokens, at most %d", where,
				   json_array_size(v), SUP_TENANT_MAX_TOKENS);
	for (size_t i = 0; i < json_array_size(v); i++) {
		const json_t *h = json_array_get(v, i);
		if (!json_is_string(h) ||
		    sup_token_hash_parse(json_string_value(h), json_string_length(h),
					 t->hashes[i]) < 0)
			return sbx_err_set(err, -EINVAL,
					   "%s[%zu]: want \"%s\" and 64 lowercase hex digits, the SHA-256 of the token (sandbox-supervisor hash-token prints it), never the token itself",
					   where, i, SUP_TOKEN_HASH_PREFIX);
		t->nhashes++;
	}
	return 0;
}

static int parse_quota(const json_t *v, const char *where, sup_quota *q, sbx_err *err)
{
	static const char *const keys[] = { "sandboxes", "cpus", "memory", "disk" };
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL, "%s: want an object of sandboxes, cpus, memory, disk",
				   where);
	int rc = sup_policy_only_keys(v, keys, 4, where, err);
	if (rc < 0)
		return rc;
	char name[256];
	const json_t *x = json_object_get(v, "sandboxes");
	if (x) {
		if (!json_is_integer(x) || json_integer_value(x) < 0 ||
		    json_integer_value(x) > 1000000)
			return sbx_err_set(err, -EINVAL, "%s.sandboxes: want a whole number 0..1000000",
					   where);
		q->sandboxes = (uint64_t)json_integer_value(x);
		q->set |= SUP_QUOTA_SANDBOXES;
	}
	static const struct {
		const char *key;
		unsigned bit;
		size_t off;
	} figs[] = {
		{ "cpus", SUP_QUOTA_CPUS, offsetof(sup_quota, cpu_milli) },
		{ "memory", SUP_QUOTA_MEMORY, offsetof(sup_quota, memory) },
		{ "disk", SUP_QUOTA_DISK, offsetof(sup_quota, disk) },
	};
	for (size_t i = 0; i < sizeof(figs) / sizeof(figs[0]); i++) {
		x = json_object_get(v, figs[i].key);
		if (!x)
			continue;
		snprintf(name, sizeof(name), "%s.%s", where, figs[i].key);
		rc = sup_resources_total_from_json(figs[i].key, x, name,
						   (uint64_t *)((char *)q + figs[i].off), err);
		if (rc < 0)
			return rc;
		q->set |= figs[i].bit;
	}
	return 0;
}

static int parse_images(const json_t *v, const char *where, sup_tenant *t, sbx_err *err)
{
	if (!json_is_array(v))
		return sbx_err_set(err, -EINVAL, "%s: want an array of image names", where);
	size_t n = json_array_size(v);
	if (n > SUP_TENANT_MAX_IMAGES)
		return sbx_err_set(err, -EINVAL, "%s: %zu images, at most %d", where, n,
				   SUP_TENANT_MAX_IMAGES);
	t->images = calloc(n ? n : 1, sizeof(*t->images));
	if (!t->images)
		return sbx_err_sys(err, -ENOMEM, "%s", where);
	for (size_t i = 0; i < n; i++) {
		const json_t *s = json_array_get(v, i);
		if (!json_is_string(s) || json_string_length(s) == 0 ||
		    json_string_length(s) > 4096 ||
		    strlen(json_string_value(s)) != json_string_length(s))
			return sbx_err_set(err, -EINVAL, "%s[%zu]: want an image name", where, i);
		t->images[i] = strdup(json_string_value(s));
		if (!t->images[i])
			return sbx_err_sys(err, -ENOMEM, "%s", where);
		t->nimages++;
	}
	return 0;
}

/* "isolation": one name (the only one) or an array of names (the first is
 * the default). */
static int parse_isolation(const json_t *v, const char *where, const sup_tenants_node *node,
			   sup_tenant *t, sbx_err *err)
{
	const json_t *one = json_is_string(v) ? v : NULL;
	size_t n = one ? 1 : json_is_array(v) ? json_array_size(v) : 0;
	if (n == 0 || n > SUP_TENANT_MAX_ISOLATIONS)
		return sbx_err_set(err, -EINVAL, "%s: want a name or a non-empty array of names",
				   where);
	t->isolations = 0;
	for (size_t i = 0; i < n; i++) {
		const json_t *s = one ? one : json_array_get(v, i);
		size_t k = node->nisolations;
		for (size_t j = 0; json_is_string(s) && j < node->nisolations; j++)
			if (strcmp(json_string_value(s), node->isolations[j]) == 0)
				k = j;
		if (k == node->nisolations)
			return sbx_err_set(err, -EINVAL, "%s: want %s%s%s", where, node->isolations[0],
					   node->nisolations > 1 ? " or " : "",
					   node->nisolations > 1 ? node->isolations[1] : "");
		if (i == 0)
			t->default_isolation = (unsigned)k;
		t->isolations |= 1u << k;
	}
	return 0;
}

static int parse_tenant(const char *name, const json_t *obj, const sup_tenants_node *node,
			sup_tenant *t, sbx_err *err)
{
	static const char *const keys[] = { "tokens",	  "quota",	"images",
					    "isolation",  "paths",	"allow_root",
					    "max_timeout", "default_resources" };
	char where[128], fw[192];
	if (!sup_policy_tenant_name_ok(name))
		return sbx_err_set(err, -EINVAL, "tenants: name \"%.64s\": want 1 to %d of A-Z a-z 0-9 . _ -",
				   name, SUP_TENANT_NAME_MAX);
	snprintf(where, sizeof(where), "tenants.%s", name);
	if (!json_is_object(obj))
		return sbx_err_set(err, -EINVAL, "%s: want an object", where);
	int rc = sup_policy_only_keys(obj, keys, sizeof(keys) / sizeof(keys[0]), where, err);
	if (rc < 0)
		return rc;
	t->admin = strcmp(name, SUP_TENANT_ADMIN) == 0;
#define FIELD(k) (snprintf(fw, sizeof(fw), "%s.%s", where, k), json_object_get(obj, k))
	const json_t *v = FIELD("tokens");
	if (!v)
		return sbx_err_set(err, -EINVAL, "%s.tokens: missing (a tenant nobody can be is a mistake)",
				   where);
	rc = parse_tokens(v, fw, t, err);
	if (rc == 0 && (v = FIELD("quota")))
		rc = parse_quota(v, fw, &t->quota, err);
	if (rc == 0 && (v = FIELD("images")))
		rc = parse_images(v, fw, t, err);
	if (rc == 0 && (v = FIELD("isolation")))
		rc = parse_isolation(v, fw, node, t, err);
	if (rc == 0 && (v = FIELD("paths")))
		rc = sup_policy_from_paths(v, fw, &t->policy, err);
	if (rc == 0 && (v = FIELD("allow_root"))) {
		if (!json_is_boolean(v))
			rc = sbx_err_set(err, -EINVAL, "%s: want true or false", fw);
		t->allow_root = json_is_true(v);
	}
	if (rc == 0 && (v = FIELD("max_timeout"))) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > (json_int_t)node->max_timeout_s)
			rc = sbx_err_set(err, -EINVAL,
					 "%s: want 1..%u seconds (at most the supervisor's --max-timeout)",
					 fw, node->max_timeout_s);
		else
			t->max_timeout_s = (unsigned)json_integer_value(v);
	}
	if (rc == 0 && (v = FIELD("default_resources"))) {
		rc = sup_resources_from_json(v, &node->res_default, &node->res_max, &t->res_default,
					     NULL, err);
		if (rc < 0)
			sbx_err_wrap(err, "%s", fw);
	}
#undef FIELD
	return rc;
}

/* No token may open two tenants (nor twice the same one, a copy-paste slip). */
static int check_unique_tokens(const sup_tenants *ts, sbx_err *err)
{
	for (size_t i = 0; i < ts->n; i++)
		for (size_t h = 0; h < ts->v[i].nhashes; h++)
			for (size_t j = i; j < ts->n; j++)
				for (size_t k = j == i ? h + 1 : 0; k < ts->v[j].nhashes; k++)
					if (memcmp(ts->v[i].hashes[h], ts->v[j].hashes[k],
						   SUP_TOKEN_HASH_LEN) == 0)
						return sbx_err_set(err, -EINVAL,
								   "tenants.%s.tokens[%zu] and tenants.%s.tokens[%zu]: the same token",
								   ts->v[i].name, h, ts->v[j].name, k);
	return 0;
}

static int parse_doc(const json_t *doc, const sup_tenants_node *node, sup_tenants *ts,
		     sbx_err *err)
{
	static const char *const keys[] = { "tenants" };
	if (!json_is_object(doc))
		return sbx_err_set(err, -EINVAL, "want an object {\"tenants\": {...}}");
	int rc = sup_policy_only_keys(doc, keys, 1, "top level", err);
	if (rc < 0)
		return rc;
	const json_t *tenants = json_object_get(doc, "tenants");
	if (!json_is_object(tenants) || json_object_size(tenants) == 0)
		return sbx_err_set(err, -EINVAL, "tenants: want a non-empty object of tenant names");
	size_t n = json_object_size(tenants);
	if (n > SUP_TENANTS_MAX)
		return sbx_err_set(err, -EINVAL, "tenants: %zu, at most %d", n, SUP_TENANTS_MAX);
	ts->v = calloc(n, sizeof(*ts->v));
	if (!ts->v)
		return sbx_err_sys(err, -ENOMEM, "tenants");
	const char *name;
	json_t *t;
	json_object_foreach((json_t *)tenants, name, t) {
		sup_tenant *nt = &ts->v[ts->n++]; /* counted first: a half-made one is freed too */
		tenant_init(nt, name, node, ts);
		rc = parse_tenant(name, t, node, nt, err);
		if (rc < 0)
			return rc;
	}
	return check_unique_tokens(ts, err);
}

int sup_tenants_load_json(const char *text, size_t len, const char *origin,
			  const sup_tenants_node *node, sup_tenants **out, sbx_err *err)
{
	*out = NULL;
	json_auto_t *doc = NULL;
	int rc = sup_policy_json_load(text, len, "tenants", origin, &doc, err);
	if (rc < 0)
		return rc;
	sup_tenants *ts = calloc(1, sizeof(*ts));
	if (!ts)
		return sbx_err_sys(err, -ENOMEM, "tenants %s", origin);
	ts->refs = 1;
	ts->node_policy = node->policy;
	rc = parse_doc(doc, node, ts, err);
	if (rc < 0) {
		set_free(ts);
		return sbx_err_wrap(err, "tenants %s", origin);
	}
	*out = ts;
	return 0;
}

int sup_tenants_load_file(const char *file, const sup_tenants_node *node, sup_tenants **out,
			  sbx_err *err)
{
	*out = NULL;
	SBX_AUTO_FREE char *buf = NULL;
	size_t len = 0;
	int rc = sup_policy_read_file(file, "tenants", &buf, &len, err);
	return rc < 0 ? rc : sup_tenants_load_json(buf, len, file, node, out, err);
}

int sup_tenants_reload(const char *file, const sup_tenants_node *node, sup_tenants **cur)
{
	sup_tenants *ts = NULL;
	sbx_err err;
	int rc = sup_tenants_load_file(file, node, &ts, &err);
	if (rc < 0 || !ts) {
		sup_error("tenants: reload refused, the %zu tenants in force stay: %s",
			  sup_tenants_count(*cur), err.msg);
		return rc;
	}
	sup_tenants_unref(*cur);
	*cur = ts;
	sup_info("tenants: reloaded %s: %zu tenants", file, ts->n);
	return 0;
}

int sup_tenants_single(const char *token, const sup_tenants_node *node, sup_tenants **out,
		       sbx_err *err)
{
	*out = NULL;
	sup_tenants *ts = calloc(1, sizeof(*ts));
	if (!ts || !(ts->v = calloc(1, sizeof(*ts->v)))) {
		free(ts);
		return sbx_err_sys(err, -ENOMEM, "tenants");
	}
	ts->refs = 1;
	ts->node_policy = node->policy;
	ts->n = 1;
	tenant_init(&ts->v[0], SUP_TENANT_SINGLE, node, ts);
	ts->v[0].admin = true;
	ts->v[0].nhashes = 1;
	int rc = sup_token_hash(token, strlen(token), ts->v[0].hashes[0], err);
	if (rc < 0) {
		set_free(ts);
		return rc;
	}
	*out = ts;
	return 0;
}

size_t sup_tenants_count(const sup_tenants *ts)
{
	return ts->n;
}

const sup_tenant *sup_tenants_at(const sup_tenants *ts, size_t i)
{
	return i < ts->n ? &ts->v[i] : NULL;
}

const sup_tenant *sup_tenants_find(const sup_tenants *ts, const char *name)
{
	for (size_t i = 0; i < ts->n; i++)
		if (strcmp(ts->v[i].name, name) == 0)
			return &ts->v[i];
	return NULL;
}

const sup_tenant *sup_tenants_auth(const sup_tenants *ts, const char *token, size_t len)
{
	uint8_t h[SUP_TOKEN_HASH_LEN];
	if (len == 0 || sup_token_hash(token, len, h, NULL) < 0)
		return NULL;
	const sup_tenant *found = NULL;
	for (size_t i = 0; i < ts->n; i++)
		for (size_t k = 0; k < ts->v[i].nhashes; k++)
			if (sup_token_hash_equal(ts->v[i].hashes[k], h))
				found = &ts->v[i];
	return found;
}

const sup_tenant *sup_tenants_hook_auth(void *ud, const char *token, size_t len)
{
	const sup_tenant *t = sup_tenants_auth(*(sup_tenants *const *)ud, token, len);
	return t ? sup_tenant_hold(t) : NULL;
}

const sup_tenant *sup_tenant_hold(const sup_tenant *t)
{
	t->set->refs++;
	return t;
}

void sup_tenant_release(const sup_tenant *t)
{
	if (t)
		sup_tenants_unref(t->set);
}

const sup_policy *sup_tenant_policy(const sup_tenant *t)
{
	return t->policy ? t->policy : t->set->node_policy;
}

bool sup_tenant_may_image(const sup_tenant *t, const char *image)
{
	if (!t->images)
		return true;
	for (size_t i = 0; i < t->nimages; i++)
		if (strcmp(t->images[i], image) == 0)
			return true;
	return false;
}

bool sup_tenant_may_isolation(const sup_tenant *t, unsigned isolation)
{
	return isolation < 32 && (t->isolations & (1u << isolation));
}

/* ---- quotas ---- */

static const struct quota_fig {
	unsigned bit;
	const char *name;
	size_t off; /* in sup_quota */
} quota_figs[] = {
	{ SUP_QUOTA_SANDBOXES, "sandboxes", offsetof(sup_quota, sandboxes) },
	{ SUP_QUOTA_CPUS, "cpus", offsetof(sup_quota, cpu_milli) },
	{ SUP_QUOTA_MEMORY, "memory", offsetof(sup_quota, memory) },
	{ SUP_QUOTA_DISK, "disk", offsetof(sup_quota, disk) },
};

void sup_quota_add(sup_quota *held, const sup_resources *r)
{
	held->sandboxes++;
	held->cpu_milli += r->cpu_milli;
	held->memory += r->memory;
	held->disk += r->disk;
}

static uint64_t fig_of(const sup_quota *q, size_t i)
{
	return *(const uint64_t *)((const char *)q + quota_figs[i].off);
}

/* A figure as the file writes it: a count, CPUs, a size. */
static void format_fig(unsigned bit, uint64_t v, char *buf, size_t size)
{
	if (bit == SUP_QUOTA_CPUS)
		sup_resources_format_cpus((uint32_t)(v > UINT32_MAX ? UINT32_MAX : v), buf, size);
	else if (bit == SUP_QUOTA_SANDBOXES)
		snprintf(buf, size, "%" PRIu64, v);
	else
		sup_resources_format_size(v, buf, size);
}

int sup_quota_check(const sup_tenant *t, const sup_quota *held, const sup_resources *want,
		    const char **figure, sbx_err *err)
{
	sup_quota ask = { 0 };
	sup_quota_add(&ask, want);
	for (size_t i = 0; i < sizeof(quota_figs) / sizeof(quota_figs[0]); i++) {
		unsigned bit = quota_figs[i].bit;
		uint64_t h = fig_of(held, i), a = fig_of(&ask, i), most = fig_of(&t->quota, i);
		if (!(t->quota.set & bit) || h + a <= most)
			continue;
		char hs[24], as[24], ms[24], os[24];
		format_fig(bit, h, hs, sizeof(hs));
		format_fig(bit, a, as, sizeof(as));
		format_fig(bit, most, ms, sizeof(ms));
		format_fig(bit, h + a - most, os, sizeof(os));
		*figure = quota_figs[i].name;
		return sbx_err_set(err, -EDQUOT,
				   "tenant %s is over its quota of %s: it holds %s, asks %s more, %s over its %s",
				   t->name, quota_figs[i].name, hs, as, os, ms);
	}
	return 0;
}
