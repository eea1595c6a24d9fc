#include "sup_core_secrets.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_log.h"
#include "sup_nsmount.h"
#include "sup_runc_image.h"
#include "sup_secrets.h"

/* A binding of a file (its "variable" is the file's path in the sandbox). */
static bool is_file(const sup_secret_bind *bd)
{
	return bd->env[0] == '/';
}

bool sup_core_secrets_files(const sup_secret_binds *b)
{
	for (size_t i = 0; i < b->n; i++)
		if (is_file(&b->v[i]))
			return true;
	return false;
}

int sup_core_secrets_check(struct sup_secrets *store, const char *tenant,
			   const sup_secret_binds *b, const sup_env *env, sbx_err *err)
{
	if (b->n == 0)
		return 0;
	if (!store)
		return sbx_err_set(err, -EINVAL,
				   "field \"secrets\": this supervisor keeps no secrets (start it with "
				   "--secrets-key FILE)");
	for (size_t i = 0; i < b->n; i++) {
		if (!is_file(&b->v[i]) && sup_env_has(env, b->v[i].env))
			return sbx_err_set(err, -EINVAL,
					   "field \"secrets[%zu]\": variable %s is in \"env\" too", i,
					   b->v[i].env);
		for (size_t k = 0; k < i; k++)
			if (strcmp(b->v[k].env, b->v[i].env) == 0)
				return sbx_err_set(err, -EINVAL,
						   "field \"secrets[%zu]\": %s named twice", i,
						   b->v[i].env);
		if (sup_secrets_check(store, tenant, b->v[i].name, err) < 0) {
			/* an unknown secret is the request's fault */
			if (err->code == -ENOENT)
				err->code = -EINVAL;
			return sbx_err_wrap(err, "field \"secrets[%zu]\"", i);
		}
	}
	return 0;
}

/* Set key to val in e (replaced when there, else added); val is taken. */
static int env_set(sup_env *e, const char *key, char *val)
{
	for (size_t i = 0; i < e->n; i++)
		if (strcmp(e->v[i].key, key) == 0) {
			explicit_bzero(e->v[i].val, strlen(e->v[i].val));
			free(e->v[i].val);
			e->v[i].val = val;
			return 0;
		}
	char *k = strdup(key);
	sup_kv *v = k ? realloc(e->v, (e->n + 1) * sizeof(*v)) : NULL;
	if (!v) {
		free(k);
		return -ENOMEM;
	}
	e->v = v;
	v[e->n].key = k;
	v[e->n].val = val;
	e->n++;
	return 0;
}

/* Secret name of sb's tenant into sb's env as var. */
static int give_one(struct sup_secrets *store, sup_sandbox *sb, const sup_secret_bind *bd,
		    sbx_err *err)
{
	sup_secret_buf v;
	int rc = sup_secrets_reveal(store, sb->tenant, bd->name, &v, err);
	if (rc < 0)
		return rc;
	/* a variable's value is a C string: the API refuses a NUL in a value */
	char *val = malloc(v.len + 1);
	if (val) {
		memcpy(val, v.p, v.len + 1);
		rc = env_set(&sb->env, bd->env, val);
		if (rc < 0) {
			explicit_bzero(val, v.len);
			free(val);
		}
	}
	sup_secret_buf_free(&v);
	if (!val || rc < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

/* The file bindings of b as files on a tmpfs of their own, bound
 * read-only at SUP_SECRET_FILES_DIR in sb's container: the values are
 * opened here, written there and wiped here; no path of the host holds
 * them (sup_nsmount_files). */
static int give_files(struct sup_secrets *store, sup_sandbox *sb, const sup_secret_binds *b,
		      sbx_err *err)
{
	sup_secret_buf bufs[SUP_SECRET_BINDS_MAX];
	sup_nsmount_file files[SUP_SECRET_BINDS_MAX];
	size_t n = 0;
	int rc = 0;
	for (size_t i = 0; i < b->n && rc == 0; i++) {
		if (!is_file(&b->v[i]))
			continue;
		rc = sup_secrets_reveal(store, sb->tenant, b->v[i].name, &bufs[n], err);
		if (rc < 0) {
			if (err->code == -ENOENT) /* deleted since the check: the request's */
				err->code = -EINVAL;
			sbx_err_wrap(err, "field \"secret_files\"");
			break;
		}
		files[n] = (sup_nsmount_file){ .name = b->v[i].env + sizeof(SUP_SECRET_FILES_DIR),
					       .data = (const char *)bufs[n].p,
					       .len = bufs[n].len };
		n++;
	}
	if (rc == 0 && n)
		rc = sup_nsmount_files(sb->box.init_pid, SUP_SECRET_FILES_DIR, files, n,
				       SUP_RUNC_SANDBOX_UID, SUP_RUNC_SANDBOX_UID, err);
	for (size_t i = 0; i < n; i++)
		sup_secret_buf_free(&bufs[i]);
	return rc;
}

int sup_core_secrets_give(struct sup_secrets *store, sup_sandbox *sb, sup_secret_binds *b,
			  sbx_err *err)
{
	if (b->n == 0)
		return 0;
	for (size_t i = 0; i < b->n; i++) {
		if (!is_file(&b->v[i]) && give_one(store, sb, &b->v[i], err) < 0) {
			/* deleted since the create was checked: still the request's */
			if (err->code == -ENOENT)
				err->code = -EINVAL;
			return sbx_err_wrap(err, "field \"secrets[%zu]\"", i);
		}
	}
	int rc = give_files(store, sb, b, err);
	if (rc < 0)
		return rc;
	sb->secrets = *b;
	memset(b, 0, sizeof(*b));
	return 0;
}

static bool is_bound(const sup_sandbox *sb, const char *key)
{
	for (size_t i = 0; i < sb->secrets.n; i++)
		if (strcmp(sb->secrets.v[i].env, key) == 0)
			return true;
	return false;
}

int sup_core_secrets_plain_env(const sup_sandbox *sb, sup_env *out)
{
	out->v = NULL;
	out->n = 0;
	if (sb->env.n == 0)
		return 0;
	out->v = calloc(sb->env.n, sizeof(*out->v));
	if (!out->v)
		return -ENOMEM;
	for (size_t i = 0; i < sb->env.n; i++) {
		if (is_bound(sb, sb->env.v[i].key))
			continue;
		sup_kv *kv = &out->v[out->n];
		kv->key = strdup(sb->env.v[i].key);
		kv->val = strdup(sb->env.v[i].val);
		out->n++;
		if (!kv->key || !kv->val) {
			sup_env_free(out);
			return -ENOMEM;
		}
	}
	return 0;
}

char *sup_core_secrets_text(const sup_secret_binds *b, bool *oom)
{
	*oom = false;
	if (b->n == 0)
		return NULL;
	size_t cap = b->n * (sizeof(b->v[0].name) + sizeof(b->v[0].env) + 2), at = 0;
	char *t = malloc(cap);
	if (!t) {
		*oom = true;
		return NULL;
	}
	for (size_t i = 0; i < b->n; i++)
		at += (size_t)snprintf(t + at, cap - at, "%s=%s\n", b->v[i].name, b->v[i].env);
	return t;
}

void sup_core_secrets_restore(struct sup_secrets *store, sup_sandbox *sb, const char *text)
{
	if (!text)
		return;
	sup_secret_binds b = { 0 };
	for (const char *p = text; *p;) {
		const char *eq = strchr(p, '='), *nl = strchr(p, '\n');
		if (!eq || !nl || eq > nl)
			break;
		sup_secret_bind bd = { 0 };
		snprintf(bd.name, sizeof(bd.name), "%.*s", (int)(eq - p), p);
		snprintf(bd.env, sizeof(bd.env), "%.*s", (int)(nl - eq - 1), eq + 1);
		p = nl + 1;
		sbx_err e;
		/* a file is still where it was put (the container's own mount):
		 * only a variable is given again */
		if (!is_file(&bd) && !store) {
			sup_warn("sandbox %s: secret %s not given again (no --secrets-key)", sb->id, bd.name);
			continue;
		}
		if (!is_file(&bd) && give_one(store, sb, &bd, &e) < 0) {
			sup_warn("sandbox %s: secret %s not given again: %s", sb->id, bd.name, e.msg);
			continue;
		}
		sup_secret_bind *v = realloc(b.v, (b.n + 1) * sizeof(*v));
		if (!v)
			break;
		b.v = v;
		b.v[b.n++] = bd;
	}
	sb->secrets = b;
}

void sup_core_secrets_env_free(sup_sandbox *sb)
{
	sup_env_free(&sb->env);
	sup_secret_binds_free(&sb->secrets);
}
