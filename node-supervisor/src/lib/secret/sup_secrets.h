/* The node's secrets: each tenant's, by name, write-only to the API.
 * Values are sealed with the node's key (sup_secret.h) before they reach
 * the catalog, and opened only for a use of them by the supervisor itself
 * (a sandbox's env, the egress gateway's headers): no call here gives a
 * value to a caller that would answer it.
 *
 * Owns the rules of a tenant's set (names, size bound, count bound) and the
 * key in memory. It must not log a value or put one into an error
 * message, and must not know sandboxes or HTTP. Loop thread only (the
 * catalog's). */
#ifndef SUP_SECRETS_H
#define SUP_SECRETS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_secret.h"

struct sup_catalog;
typedef struct sup_secrets sup_secrets;

/* What the API shows of a secret: never its value. */
typedef struct sup_secret_info {
	char tenant[128];
	char name[SUP_SECRET_NAME_MAX + 1];
	uint64_t size;
	int64_t created_at, updated_at;
} sup_secret_info;

/* With the key of key_file (made at first start, sup_secret_key_load)
 * over cat, which outlives it. */
int sup_secrets_open(const char *key_file, struct sup_catalog *cat, sup_secrets **out,
		     sbx_err *err);
void sup_secrets_free(sup_secrets *s);

/* Set tenant's secret name to v[0..n): a bad name -EINVAL, a value over
 * SUP_SECRET_VALUE_MAX -E2BIG, a new one past SUP_SECRETS_PER_TENANT
 * -EDQUOT. *out: the secret as it is now; *created: it was new. */
int sup_secrets_put(sup_secrets *s, const char *tenant, const char *name, const uint8_t *v,
		    size_t n, sup_secret_info *out, bool *created, sbx_err *err);
/* -ENOENT when there is none. */
int sup_secrets_delete(sup_secrets *s, const char *tenant, const char *name, sbx_err *err);
/* tenant's secrets (NULL: every tenant's), by tenant and name. */
int sup_secrets_list(sup_secrets *s, const char *tenant,
		     void (*fn)(const sup_secret_info *i, void *ud), void *ud, sbx_err *err);
/* Whether tenant has a secret name: 0, or -ENOENT naming it. */
int sup_secrets_check(sup_secrets *s, const char *tenant, const char *name, sbx_err *err);
/* The value, for the supervisor's own use of it: *out is wiped by
 * sup_secret_buf_free. -ENOENT when there is none, -EBADMSG when it does
 * not open with this node's key. */
int sup_secrets_reveal(sup_secrets *s, const char *tenant, const char *name, sup_secret_buf *out,
		       sbx_err *err);

#endif
