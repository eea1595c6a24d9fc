/* The secrets routes: PUT /v1/secrets/{name} (write-only: the value is
 * never answered, logged or put into an error), GET /v1/secrets (names,
 * sizes, dates) and DELETE /v1/secrets/{name}. A tenant sets and deletes
 * its own; the admin's list shows every tenant's names. The store is lib/secret's (sup_secrets.h);
 * this family only parses and answers. It must not touch sandboxes. */
#ifndef SUP_SECROUTES_H
#define SUP_SECROUTES_H

#include "sup_http.h"
#include "sup_secrets.h"

typedef struct sup_secroutes_ctx {
	sup_secrets *store; /* NULL: this supervisor keeps no secrets (no --secrets-key) */
} sup_secroutes_ctx;

extern const sup_http_family sup_secrets_family;

/* The body of a PUT: {"value": "..."}; the value is copied into *out
 * (wiped by sup_secret_buf_free). Errors never quote the body. */
int sup_secroutes_parse_value(const char *body, size_t len, sup_secret_buf *out, sbx_err *err);

#endif
