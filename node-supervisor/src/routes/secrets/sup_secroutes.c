#include "sup_secroutes.h"

#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "sbx/json_auto.h"
#include "sup_tenants.h"
#include "sup_text.h"

typedef struct sec_req {
	char tenant[SUP_TENANT_NAME_MAX + 1];
	char name[SUP_SECRET_NAME_MAX + 1];
	sup_secret_buf value; /* PUT: wiped at release */
} sec_req;

static void sec_release(void *state)
{
	sec_req *q = state;
	sup_secret_buf_free(&q->value);
}

static sup_secrets *store_of(void *ctx)
{
	return ((sup_secroutes_ctx *)ctx)->store;
}

static int no_store(sbx_err *err)
{
	return sbx_err_set(err, -ENOSYS,
			   "this supervisor keeps no secrets (start it with --secrets-key FILE)");
}

int sup_secroutes_parse_value(const char *body, size_t len, sup_secret_buf *out, sbx_err *err)
{
	out->p = NULL;
	out->len = 0;
	json_error_t je;
	/* jansson's message may quote the text near the fault: only the place
	 * goes into ours */
	SBX_AUTO_JSON json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
	if (!j)
		return sbx_err_set(err, -EINVAL, "malformed JSON at line %d column %d", je.line,
				   je.column);
	if (!json_is_object(j))
		return sbx_err_set(err, -EINVAL, "body must be a JSON object {\"value\": \"...\"}");
	const char *key;
	json_t *v;
	json_object_foreach(j, key, v)
	{
		if (strcmp(key, "value") != 0)
			return sbx_err_set(err, -EINVAL, "unknown field \"%.64s\" (only \"value\")", key);
	}
	v = json_object_get(j, "value");
	if (!v)
		return sbx_err_set(err, -EINVAL, "field \"value\" is required");
	if (!json_is_string(v))
		return sbx_err_set(err, -EINVAL, "field \"value\": want a string");
	const char *s = json_string_value(v);
	size_t n = json_string_length(v);
	if (n == 0)
		return sbx_err_set(err, -EINVAL, "field \"value\": must not be empty");
	if (memchr(s, 0, n))
		return sbx_err_set(err, -EINVAL, "field \"value\": contains a NUL byte");
	if (n > SUP_SECRET_VALUE_MAX)
		return sbx_err_set(err, -E2BIG, "field \"value\": %zu bytes, over the bound of %d", n,
				   SUP_SECRET_VALUE_MAX);
	out->p = OPENSSL_malloc(n + 1);
	if (!out->p)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	memcpy(out->p, s, n + 1);
	out->len = n;
	/* the parsed copy goes with j; wipe it first */
	OPENSSL_cleanse((char *)s, n);
	return 0;
}

static int parse_name(const sup_http_in *in, void *ctx, sec_req *q, sbx_err *err)
{
	if (!store_of(ctx))
		return no_store(err);
	if (!sup_secret_name_ok(in->pid, strlen(in->pid)))
		return sbx_err_set(err, -EINVAL,
				   "secret name %.80s: want 1..%d of A-Z a-z 0-9 _ . -, starting with "
				   "a letter or digit",
				   in->pid, SUP_SECRET_NAME_MAX);
	snprintf(q->name, sizeof(q->name), "%s", in->pid);
	if (!in->who)
		return sbx_err_set(err, -EPERM, "no tenant");
	snprintf(q->tenant, sizeof(q->tenant), "%s", in->who->name);
	return 0;
}

static int parse_put(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sec_req *q = state;
	int rc = parse_name(in, ctx, q, err);
	return rc ?: sup_secroutes_parse_value(in->body, in->body_len, &q->value, err);
}

static int parse_delete(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	return parse_name(in, ctx, state, err);
}

static json_t *render(const sup_secret_info *i, bool with_tenant)
{
	char created[32], updated[32];
	sup_rfc3339((time_t)i->created_at, created, sizeof(created));
	sup_rfc3339((time_t)i->updated_at, updated, sizeof(updated));
	json_t *o = json_pack("{s:s, s:I, s:s, s:s}", "name", i->name, "size", (json_int_t)i->size,
			      "created_at", created, "updated_at", updated);
	if (o && with_tenant)
		json_object_set_new(o, "tenant", json_string(i->tenant));
	return o;
}

static sup_secrets *req_store(sup_http_req *r)
{
	return store_of(sup_http_ctx(r));
}

static int act_put(sup_http_req *r, void *state, sbx_err *err)
{
	sec_req *q = state;
	sup_secret_info i;
	bool created;
	int rc = sup_secrets_put(req_store(r), q->tenant, q->name, q->value.p, q->value.len, &i,
				 &created, err);
	sup_secret_buf_free(&q->value);
	if (rc < 0)
		return rc;
	sup_http_json(r, created ? 201 : 200, render(&i, false));
	return 0;
}

static int act_delete(sup_http_req *r, void *state, sbx_err *err)
{
	sec_req *q = state;
	int rc = sup_secrets_delete(req_store(r), q->tenant, q->name, err);
	if (rc == 0)
		sup_http_json(r, 204, NULL);
	return rc;
}

typedef struct list_acc {
	json_t *arr;
	bool with_tenant;
} list_acc;

static void add_info(const sup_secret_info *i, void *ud)
{
	list_acc *a = ud;
	json_array_append_new(a->arr, render(i, a->with_tenant));
}

static int act_list(sup_http_req *r, void *state, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(r);
	(void)state;
	if (!in->who)
		return sbx_err_set(err, -EPERM, "no tenant");
	if (!req_store(r))
		return no_store(err);
	list_acc a = { json_array(), in->who->admin };
	if (!a.arr)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	if (sup_secrets_list(req_store(r), in->who->admin ? NULL : in->who->name, add_info, &a,
			     err) < 0) {
		json_decref(a.arr);
		return err->code;
	}
	sup_http_json(r, 200, json_pack("{s:o}", "secrets", a.arr));
	return 0;
}

/* A value's JSON text is at most 6 bytes per byte (\u00XX) plus its frame. */
#define PUT_BODY_MAX (6 * SUP_SECRET_VALUE_MAX + 1024)

static const sup_http_route routes[] = {
	{ "PUT", "/v1/secrets/{name}", "PUT secret", SUP_BODY_BUFFERED, PUT_BODY_MAX, parse_put,
	  act_put },
	{ "GET", "/v1/secrets", "GET secrets", SUP_BODY_NONE, 0, NULL, act_list },
	{ "DELETE", "/v1/secrets/{name}", "DELETE secret", SUP_BODY_NONE, 0, parse_delete,
	  act_delete },
};

const sup_http_family sup_secrets_family = {
	.name = "secrets",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(sec_req),
	.release = sec_release,
};
