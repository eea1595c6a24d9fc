#include "sup_secrets.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sup_catalog.h"
#include "sup_log.h"

struct sup_secrets {
	struct sup_catalog *cat;
	uint8_t key[SUP_SECRET_KEY_LEN];
};

int sup_secrets_open(const char *key_file, struct sup_catalog *cat, sup_secrets **out,
		     sbx_err *err)
{
	*out = NULL;
	sup_secrets *s = calloc(1, sizeof(*s));
	if (!s)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	bool made = false;
	int rc = sup_secret_key_load(key_file, s->key, &made, err);
	if (rc < 0) {
		free(s);
		return rc;
	}
	if (made)
		sup_info("secrets: a new key in %s (keep it: the secrets sealed with it open "
			 "with it alone)", key_file);
	s->cat = cat;
	*out = s;
	return 0;
}

void sup_secrets_free(sup_secrets *s)
{
	if (!s)
		return;
	OPENSSL_cleanse(s->key, sizeof(s->key));
	free(s);
}

static int check_name(const char *name, sbx_err *err)
{
	if (!sup_secret_name_ok(name, strlen(name)))
		return sbx_err_set(err, -EINVAL,
				   "secret name %.80s: want 1..%d of A-Z a-z 0-9 _ . -, starting "
				   "with a letter or digit",
				   name, SUP_SECRET_NAME_MAX);
	return 0;
}

static int count_one(const sup_catalog_secret *cs, void *ud, sbx_err *err)
{
	(void)cs;
	(void)err;
	(*(unsigned *)ud)++;
	return 0;
}

int sup_secrets_put(sup_secrets *s, const char *tenant, const char *name, const uint8_t *v,
		    size_t n, sup_secret_info *out, bool *created, sbx_err *err)
{
	int rc = check_name(name, err);
	if (rc < 0)
		return rc;
	if (n > SUP_SECRET_VALUE_MAX)
		return sbx_err_set(err, -E2BIG, "secret %s: %zu bytes, over the bound of %d", name, n,
				   SUP_SECRET_VALUE_MAX);
	unsigned have = 0;
	if (sup_catalog_secret_each(s->cat, tenant, count_one, &have, err) < 0)
		return err->code;
	if (have >= SUP_SECRETS_PER_TENANT && sup_secrets_check(s, tenant, name, err) == -ENOENT)
		return sbx_err_set(err, -EDQUOT, "secrets: tenant %s keeps %u already (at most %d)",
				   tenant, have, SUP_SECRETS_PER_TENANT);
	sup_catalog_secret cs = { .size = n, .updated_at = time(NULL) };
	snprintf(cs.tenant, sizeof(cs.tenant), "%s", tenant);
	snprintf(cs.name, sizeof(cs.name), "%s", name);
	rc = sup_secret_seal(s->key, tenant, name, v, n, &cs.sealed, &cs.sealed_len, err);
	if (rc < 0)
		return rc;
	rc = sup_catalog_secret_put(s->cat, &cs, created, err);
	free(cs.sealed);
	if (rc < 0) {
		sup_error("secrets: %s", err->msg);
		return sbx_err_set(err, -EIO, "secret %s: not kept (the catalog failed)", name);
	}
	sup_catalog_secret now;
	rc = sup_catalog_secret_get(s->cat, tenant, name, &now, err);
	if (rc < 0)
		return rc;
	free(now.sealed);
	*out = (sup_secret_info){ .size = now.size, .created_at = now.created_at,
				  .updated_at = now.updated_at };
	snprintf(out->tenant, sizeof(out->tenant), "%s", tenant);
	snprintf(out->name, sizeof(out->name), "%s", name);
	return 0;
}

int sup_secrets_delete(sup_secrets *s, const char *tenant, const char *name, sbx_err *err)
{
	int rc = check_name(name, err);
	return rc ?: sup_catalog_secret_remove(s->cat, tenant, name, err);
}

typedef struct list_walk {
	void (*fn)(const sup_secret_info *i, void *ud);
	void *ud;
} list_walk;

static int list_one(const sup_catalog_secret *cs, void *ud, sbx_err *err)
{
	list_walk *w = ud;
	(void)err;
	sup_secret_info i = { .size = cs->size, .created_at = cs->created_at,
			      .updated_at = cs->updated_at };
	snprintf(i.tenant, sizeof(i.tenant), "%s", cs->tenant);
	snprintf(i.name, sizeof(i.name), "%.*s", SUP_SECRET_NAME_MAX, cs->name);
	w->fn(&i, w->ud);
	return 0;
}

int sup_secrets_list(sup_secrets *s, const char *tenant,
		     void (*fn)(const sup_secret_info *i, void *ud), void *ud, sbx_err *err)
{
	list_walk w = { fn, ud };
	return sup_catalog_secret_each(s->cat, tenant, list_one, &w, err);
}

int sup_secrets_check(sup_secrets *s, const char *tenant, const char *name, sbx_err *err)
{
	int rc = check_name(name, err);
	if (rc < 0)
		return rc;
	sup_catalog_secret cs;
	rc = sup_catalog_secret_get(s->cat, tenant, name, &cs, err);
	free(cs.sealed);
	return rc;
}

int sup_secrets_reveal(sup_secrets *s, const char *tenant, const char *name, sup_secret_buf *out,
		       sbx_err *err)
{
	out->p = NULL;
	out->len = 0;
	int rc = check_name(name, err);
	if (rc < 0)
		return rc;
	sup_catalog_secret cs;
	rc = sup_catalog_secret_get(s->cat, tenant, name, &cs, err);
	if (rc == 0)
		rc = sup_secret_open(s->key, tenant, name, cs.sealed, cs.sealed_len, out, err);
	free(cs.sealed);
	return rc;
}
