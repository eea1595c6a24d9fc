/* The JSON of a sandbox's secrets: a create's "secrets" and
 * "secret_files", and a view's
 * (sup_api.h). Names only: no value passes here. The secret's name rules
 * are sup_secret's. */
#include "sup_api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_secret.h"

/* A variable a shell can name: [A-Za-z_][A-Za-z0-9_]*. */
static bool env_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > SUP_SECRET_ENV_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			  (i > 0 && c >= '0' && c <= '9');
		if (!ok)
			return false;
	}
	return true;
}

/* A file's name in SUP_SECRET_FILES_DIR: [A-Za-z0-9._-], not . or .. */
static bool file_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > SUP_SECRET_FILE_MAX || strlen(s) != len || strcmp(s, ".") == 0 ||
	    strcmp(s, "..") == 0)
		return false;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") == len;
}

/* An object of keys (variables or files) to secret names, added to out:
 * field names it in errors; files puts each key under
 * SUP_SECRET_FILES_DIR. */
static int parse_binds(json_t *v, const char *field, bool files, sup_secret_binds *out,
		       sbx_err *err)
{
	if (!json_is_object(v))
		return sbx_err_set(err, -EINVAL, "field \"%s\": want an object of %s to secret names",
				   field, files ? "file names" : "variable names");
	size_t n = json_object_size(v);
	if (n > SUP_SECRET_BINDS_MAX - out->n)
		return sbx_err_set(err, -EINVAL, "field \"%s\": more than %d secrets in all", field,
				   SUP_SECRET_BINDS_MAX);
	if (n == 0)
		return 0;
	sup_secret_bind *grown = realloc(out->v, (out->n + n) * sizeof(*grown));
	if (!grown)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	out->v = grown;
	const char *key;
	size_t klen;
	json_t *val;
	json_object_keylen_foreach(v, key, klen, val)
	{
		if (files && !file_name_ok(key, klen))
			return sbx_err_set(err, -EINVAL,
					   "field \"%s\": file \"%.64s\": want 1..%d of A-Z a-z 0-9 . _ -, "
					   "not . or ..",
					   field, key, SUP_SECRET_FILE_MAX);
		if (!files && !env_name_ok(key, klen))
			return sbx_err_set(err, -EINVAL,
					   "field \"%s\": variable \"%.64s\": want 1..%d of A-Z a-z "
					   "0-9 _, not starting with a digit",
					   field, key, SUP_SECRET_ENV_MAX);
		const char *name = json_string_value(val);
		if (!name || !sup_secret_name_ok(name, json_string_length(val)))
			return sbx_err_set(err, -EINVAL,
					   "field \"%s\": %.64s: want a secret's name (1..%d of "
					   "A-Z a-z 0-9 _ . -)",
					   field, key, SUP_SECRET_NAME_MAX);
		sup_secret_bind *b = &out->v[out->n++];
		_Static_assert(sizeof(b->name) > SUP_SECRET_NAME_MAX, "a binding holds a secret's name");
		_Static_assert(sizeof(b->env) > sizeof(SUP_SECRET_FILES_DIR) + SUP_SECRET_FILE_MAX,
			       "a binding holds a file's path");
		snprintf(b->name, sizeof(b->name), "%s", name);
		snprintf(b->env, sizeof(b->env), "%s%.*s", files ? SUP_SECRET_FILES_DIR "/" : "",
			 (int)klen, key);
	}
	return 0;
}

int sup_api_parse_secret_binds(json_t *v, sup_secret_binds *out, sbx_err *err)
{
	return parse_binds(v, "secrets", false, out, err);
}

int sup_api_parse_secret_files(json_t *v, sup_secret_binds *out, sbx_err *err)
{
	return parse_binds(v, "secret_files", true, out, err);
}

json_t *sup_api_render_secret_binds(const sup_secret_binds *b)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < b->n; i++)
		if (json_array_append_new(a, json_pack("{s:s, s:s}", "name", b->v[i].name,
						       b->v[i].env[0] == '/' ? "file" : "env",
						       b->v[i].env)) < 0) {
			json_decref(a);
			return NULL;
		}
	return a;
}
