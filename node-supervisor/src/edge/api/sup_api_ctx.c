/* The contexts' request bodies (sup_ctx.h): pure, strict. */
#include "sup_ctx.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/json_auto.h"

static const char *const lang_names[SUP_CTX_NLANG] = { "python", "javascript", "bash" };

int sup_ctx_lang_of(const char *s)
{
	for (int i = 0; i < SUP_CTX_NLANG; i++)
		if (strcmp(s, lang_names[i]) == 0)
			return i;
	return -1;
}

const char *sup_ctx_lang_name(sup_ctx_lang l)
{
	return (unsigned)l < SUP_CTX_NLANG ? lang_names[l] : "?";
}

bool sup_ctx_id_ok(const char *s)
{
	size_t n = strlen(s);

	if (sup_ctx_lang_of(s) >= 0)
		return true;
	if (n <= 4 || n >= SUP_CTX_ID_MAX || strncmp(s, "ctx-", 4) != 0)
		return false;
	return strspn(s + 4, "0123456789abcdef") == n - 4;
}

void sup_ctx_spec_free(sup_ctx_spec *s)
{
	free(s->cwd);
	json_decref(s->env);
	memset(s, 0, sizeof(*s));
}

void sup_ctx_cell_free(sup_ctx_cell *c)
{
	free(c->code);
	memset(c, 0, sizeof(*c));
}

static bool only_keys(json_t *o, const char *const *keys, const char *const *skip, const char **bad)
{
	const char *k;
	json_t *v;

	json_object_foreach (o, k, v) {
		bool ok = false;
		for (size_t i = 0; keys[i] && !ok; i++)
			ok = strcmp(k, keys[i]) == 0;
		for (size_t i = 0; skip && skip[i] && !ok; i++)
			ok = strcmp(k, skip[i]) == 0;
		if (!ok) {
			*bad = k;
			return false;
		}
	}
	return true;
}

static int load(const char *body, size_t len, json_t **out, sbx_err *err)
{
	json_error_t jerr;

	*out = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!*out)
		return sbx_err_set(err, -EINVAL, "body: not JSON (%s)", jerr.text);
	if (!json_is_object(*out))
		return sbx_err_set(err, -EINVAL, "body: not a JSON object");
	return 0;
}

/* env: names as a shell takes them, values without NUL. */
static int parse_env(json_t *v, json_t **out, sbx_err *err)
{
	const char *k;
	json_t *x;

	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL, "env: not an object of strings");
	if (json_object_size(v) > SUP_CTX_ENV_MAX)
		return sbx_err_set(err, -EINVAL, "env: more than %d variables", SUP_CTX_ENV_MAX);
	json_object_foreach (v, k, x) {
		size_t n = strlen(k);
		if (n == 0 || n > 255 || strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != n ||
		    (k[0] >= '0' && k[0] <= '9'))
			return sbx_err_set(err, -EINVAL, "env: \"%.64s\" is not a variable's name", k);
		if (!json_is_string(x) || strlen(json_string_value(x)) != json_string_length(x) ||
		    json_string_length(x) > 65536)
			return sbx_err_set(err, -EINVAL, "env.%.64s: not a string without NUL (64 KiB at most)", k);
	}
	*out = json_incref(v);
	return 0;
}

int sup_ctx_parse_spec(const char *body, size_t len, sup_ctx_spec *out, sbx_err *err)
{
	static const char *const keys[] = { "language", "cwd", "env", NULL };
	SBX_AUTO_JSON json_t *o = NULL;
	const char *bad = NULL;
	json_t *v;
	int rc, l;

	memset(out, 0, sizeof(*out));
	if (len == 0) {
		out->lang = SUP_CTX_PYTHON;
		return 0;
	}
	if ((rc = load(body, len, &o, err)) < 0)
		return rc;
	if (!only_keys(o, keys, NULL, &bad))
		return sbx_err_set(err, -EINVAL, "unknown field \"%.64s\"", bad);
	v = json_object_get(o, "language");
	if (v && (!json_is_string(v) || (l = sup_ctx_lang_of(json_string_value(v))) < 0))
		return sbx_err_set(err, -EINVAL, "language: one of \"python\", \"javascript\", \"bash\"");
	out->lang = v ? (sup_ctx_lang)l : SUP_CTX_PYTHON;
	v = json_object_get(o, "cwd");
	if (v && !json_is_null(v)) {
		const char *s = json_is_string(v) ? json_string_value(v) : NULL;
		if (!s || s[0] != '/' || strlen(s) != json_string_length(v) || strlen(s) >= SUP_CTX_CWD_MAX)
			return sbx_err_set(err, -EINVAL, "cwd: an absolute path");
		out->cwd = strdup(s);
		if (!out->cwd)
			return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	v = json_object_get(o, "env");
	if (v && !json_is_null(v) && (rc = parse_env(v, &out->env, err)) < 0) {
		sup_ctx_spec_free(out);
		return rc;
	}
	return 0;
}

int sup_ctx_parse_cell_obj(json_t *o, const char *const *skip, sup_ctx_cell *out, sbx_err *err)
{
	static const char *const keys[] = { "code", "timeout", NULL };
	const char *bad = NULL;
	json_t *v;

	memset(out, 0, sizeof(*out));
	if (!only_keys(o, keys, skip, &bad))
		return sbx_err_set(err, -EINVAL, "unknown field \"%.64s\"", bad);
	v = json_object_get(o, "code");
	if (!json_is_string(v))
		return sbx_err_set(err, -EINVAL, "code: required, a string");
	if (json_string_length(v) > SUP_CTX_CODE_MAX || strlen(json_string_value(v)) != json_string_length(v))
		return sbx_err_set(err, -EINVAL, "code: a string without NUL, at most %u bytes", SUP_CTX_CODE_MAX);
	out->timeout_ms = SUP_CTX_DEFAULT_TIMEOUT_MS;
	v = json_object_get(o, "timeout");
	if (v && !json_is_null(v)) {
		double t = json_is_number(v) ? json_number_value(v) : -1;
		if (!(t > 0) || t * 1000 > SUP_CTX_MAX_TIMEOUT_MS || !isfinite(t))
			return sbx_err_set(err, -EINVAL, "timeout: seconds, > 0 and at most %u", SUP_CTX_MAX_TIMEOUT_MS / 1000);
		out->timeout_ms = (uint64_t)ceil(t * 1000);
	}
	out->code = strdup(json_string_value(json_object_get(o, "code")));
	return out->code ? 0 : sbx_err_set(err, -ENOMEM, "out of memory");
}

int sup_ctx_parse_cell(const char *body, size_t len, sup_ctx_cell *out, sbx_err *err)
{
	SBX_AUTO_JSON json_t *o = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = load(body, len, &o, err)) < 0)
		return rc;
	return sup_ctx_parse_cell_obj(o, NULL, out, err);
}
