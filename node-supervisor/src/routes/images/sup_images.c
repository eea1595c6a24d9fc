/* The images family: parsers, the answers, and the routes' rows; the
 * uploads, pulls and GC runs are sup_images_load.c's. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sup_api.h"
#include "sup_images_int.h"
#include "sup_log.h"
#include "sup_query.h"
#include "sup_tenants.h"
#include "sup_text.h"

/* ---- who may ---- */

static int need_admin(const sup_http_in *in, const char *what, sbx_err *err)
{
	if (in->who && in->who->admin)
		return 0;
	return sbx_err_set(err, -EPERM, "%s is the admin tenant's: images and pools are the node's",
			   what);
}

/* Does who see im: the admin all; another tenant those it may use, by
 * one of its refs or its digest. */
static bool may_see(const sup_tenant *who, const sup_image *im)
{
	if (!who || who->admin || sup_tenant_may_image(who, im->digest))
		return true;
	for (size_t i = 0; i < im->nrefs; i++)
		if (sup_tenant_may_image(who, im->refs[i]))
			return true;
	return false;
}

/* ---- parse ---- */

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	c = (char)(c | 0x20);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The {ref} segment: percent-decoded once, strictly ('%' with two hex
 * digits; '+' is itself, as anywhere in a path), then a store name. */
static int parse_name(const char *seg, bool store_only, sup_imq *q, sbx_err *err)
{
	size_t o = 0;
	for (const char *p = seg; *p; p++) {
		int c = (unsigned char)*p;
		if (c == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);
			if (lo < 0)
				return sbx_err_set(err, -EINVAL, "image name \"%.200s\": a '%%' not followed "
						   "by two hex digits", seg);
			c = hi * 16 + lo;
			p += 2;
		}
		if (c == 0 || o + 1 >= sizeof(q->name))
			return sbx_err_set(err, -EINVAL, "image name \"%.200s\": too long or a NUL", seg);
		q->name[o++] = (char)c;
	}
	q->name[o] = '\0';
	bool ok = sup_img_store_is_name(q->name) ||
		  (!store_only && (strcmp(q->name, "host") == 0 || q->name[0] == '/'));
	if (!ok)
		return sbx_err_set(err, -EINVAL, "image name \"%.200s\": want a ref (%%2F for each '/') "
				   "or sha256:<hex>%s", q->name, store_only ? "" : ", host or a rootfs folder");
	q->named = true;
	return 0;
}

static int parse_get(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_imq *q = state;
	q->x = ctx;
	return parse_name(in->pid, true, q, err);
}

static int parse_delete(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_imq *q = state;
	q->x = ctx;
	return need_admin(in, "deleting an image", err) ?: parse_name(in->pid, true, q, err);
}

/* The body's kind by its Content-Type: JSON is a pull, an archive an
 * upload (?name= the name of an archive of one image). */
static int parse_post(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const archives[] = { "application/x-tar", "application/tar",
						"application/octet-stream", "application/gzip",
						"application/x-gzip", "application/zstd", NULL };
	static const char *const keys[] = { "name", NULL };
	sup_imq *q = state;
	q->x = ctx;
	int r = need_admin(in, "importing an image", err);
	if (r < 0)
		return r;
	const char *ct = sup_http_in_header(in, "Content-Type");
	size_t n = ct ? strcspn(ct, "; \t") : 0;
	if (ct && n == 16 && strncasecmp(ct, "application/json", n) == 0)
		q->kind = SUP_IM_PULL;
	for (size_t i = 0; ct && !q->kind && archives[i]; i++)
		if (strlen(archives[i]) == n && strncasecmp(ct, archives[i], n) == 0)
			q->kind = SUP_IM_UPLOAD;
	if (!q->kind)
		return sbx_err_set(err, -EPROTONOSUPPORT, "Content-Type %.100s: want application/x-tar "
				   "(an oci-archive or docker save tarball, maybe gzip'd or zstd'd: also "
				   "application/gzip, application/zstd, application/octet-stream) or "
				   "application/json ({\"ref\"} to pull)", ct ? ct : "missing");
	SUP_AUTO_QUERY sup_query qs = { 0 };
	r = sup_query_parse(in->query, q->kind == SUP_IM_UPLOAD ? keys : (const char *const[]){ NULL },
			    &qs, err);
	if (r < 0)
		return r;
	const char *name = sup_query_get(&qs, "name", NULL);
	if (name && !sup_img_ref_ok(name))
		return sbx_err_set(err, -EINVAL, "query parameter \"name\": want 1-255 of "
				   "[A-Za-z0-9._/:@+-], not host or sha256:");
	if (name) {
		snprintf(q->name, sizeof(q->name), "%s", name);
		q->named = true;
	}
	uint64_t max = q->kind == SUP_IM_UPLOAD ? q->x->max_import : SUP_IMAGES_PULL_BODY_MAX;
	if (in->body_expect != UINT64_MAX && in->body_expect > max)
		return sbx_err_set(err, -E2BIG, "body of %" PRIu64 " bytes over the limit of %" PRIu64
				   " bytes%s", in->body_expect, max,
				   q->kind == SUP_IM_UPLOAD ? " (--image-max-import)" : "");
	if (in->body_expect == 0)
		return sbx_err_set(err, -EINVAL, "an empty body: want %s",
				   q->kind == SUP_IM_UPLOAD ? "the archive" : "{\"ref\": ...}");
	return 0;
}

static int parse_pool(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "size", "isolation", NULL };
	sup_imq *q = state;
	q->x = ctx;
	int r = need_admin(in, "sizing a pool", err);
	r = r ?: parse_name(in->pid, false, q, err);
	SBX_AUTO_JSON json_t *j = NULL;
	r = r ?: sup_http_in_json(in, keys, &j, err);
	if (r < 0)
		return r;
	json_t *size = json_object_get(j, "size");
	if (!json_is_integer(size) || json_integer_value(size) < 0 || json_integer_value(size) > 256)
		return sbx_err_set(err, -EINVAL, "field \"size\": required, an integer 0..256");
	q->size = (unsigned)json_integer_value(size);
	q->isolation = SUP_ISO_RUNC;
	json_t *iso = json_object_get(j, "isolation");
	if (iso && (!json_is_string(iso) || sup_isolation_parse(json_string_value(iso), json_string_length(iso), &q->isolation) < 0))
		return sbx_err_set(err, -EINVAL, "field \"isolation\": want one of runc, gvisor");
	return 0;
}

/* ---- answers ---- */

static json_t *render_image(const sup_image *im)
{
	json_t *refs = json_array(), *layers = json_array(), *env = json_array();
	for (size_t i = 0; refs && i < im->nrefs; i++)
		json_array_append_new(refs, json_string(im->refs[i]));
	for (size_t i = 0; layers && i < im->nlayers; i++)
		json_array_append_new(layers, json_sprintf("sha256:%s", im->layers[i]));
	for (size_t i = 0; env && i < im->nenv; i++)
		json_array_append_new(env, json_string(im->env[i]));
	char at[32];
	sup_rfc3339(im->imported_at, at, sizeof(at));
	return json_pack("{s:s, s:o, s:o, s:I, s:o, s:s?, s:s?, s:b, s:s, s:I}", "digest", im->digest,
			 "refs", refs, "layers", layers, "size", (json_int_t)im->size, "env", env,
			 "workdir", im->workdir, "user", im->user, "agent_bundled", im->agent_bundled,
			 "imported_at", at, "in_use", (json_int_t)im->pins);
}

static json_t *render_store(sup_img_store *s)
{
	uint64_t bytes = 0;
	unsigned layers = sup_img_store_layers(s, &bytes);
	return json_pack("{s:I, s:I, s:I}", "images", (json_int_t)sup_img_store_count(s), "layers",
			 (json_int_t)layers, "bytes", (json_int_t)bytes);
}

void sup_images_answer(sup_imq *q, sup_im_job *j)
{
	if (j->rc < 0) {
		sup_http_fail(q->r, &j->err);
		return;
	}
	if (j->kind == SUP_IM_GC) {
		json_t *gc = json_pack("{s:I, s:I}", "layers", (json_int_t)j->layers, "bytes",
				       (json_int_t)j->freed);
		sup_http_json(q->r, 200, json_pack("{s:s, s:s, s:o, s:o}", "deleted", q->name, "digest",
						   q->deleted, "gc", gc, "store", render_store(q->x->store)));
		return;
	}
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < j->out.n; i++) {
		sup_image im;
		sbx_err e;
		if (sup_img_store_get(q->x->store, j->out.digests[i], &im, &e) == 0) {
			json_array_append_new(arr, render_image(&im));
			sup_image_release(&im);
		}
	}
	sup_http_json(q->r, 201, json_pack("{s:o, s:{s:I, s:I}, s:I}", "images", arr, "layers",
					   "unpacked", (json_int_t)j->out.layers_new, "shared",
					   (json_int_t)j->out.layers_shared, "duration_ms",
					   (json_int_t)j->ms));
}

static int act_list(sup_http_req *r, void *state, sbx_err *err)
{
	sup_images_ctx *x = sup_http_ctx(r);
	const sup_tenant *who = sup_http_input(r)->who;
	(void)state;
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < sup_img_store_count(x->store); i++) {
		sup_image im;
		if (sup_img_store_at(x->store, i, &im) < 0)
			break; /* deleted meanwhile: the list ends there */
		if (may_see(who, &im))
			json_array_append_new(arr, render_image(&im));
		sup_image_release(&im);
	}
	if (!arr)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_http_json(r, 200, json_pack("{s:o, s:o}", "images", arr, "store", render_store(x->store)));
	return 0;
}

static int act_get(sup_http_req *r, void *state, sbx_err *err)
{
	sup_imq *q = state;
	sup_image im;
	int rc = sup_img_store_get(q->x->store, q->name, &im, err);
	if (rc < 0)
		return rc;
	if (!may_see(sup_http_input(r)->who, &im)) {
		sup_image_release(&im);
		return sbx_err_set(err, -ENOENT, "no image %.255s", q->name);
	}
	sup_http_json(r, 200, render_image(&im));
	sup_image_release(&im);
	return 0;
}

/* The record goes now (a small unlink); the layers it leaves unused go
 * with the GC on the worker, and the answer says what that freed. */
static int act_delete(sup_http_req *r, void *state, sbx_err *err)
{
	sup_imq *q = state;
	q->r = r;
	sup_image im;
	int rc = sup_img_store_get(q->x->store, q->name, &im, err);
	if (rc < 0)
		return rc;
	snprintf(q->deleted, sizeof(q->deleted), "%s", im.digest);
	sup_image_release(&im);
	rc = sup_img_store_delete(q->x->store, q->name, err);
	if (rc < 0)
		return rc;
	sup_info("image %s deleted (%s)", q->name, q->deleted);
	return sup_images_start_gc(q, err);
}

static int act_pool(sup_http_req *r, void *state, sbx_err *err)
{
	sup_imq *q = state;
	sup_pool_stats s;
	int rc = sup_core_pool_set_size(q->x->core, q->name, q->isolation, q->size, &s, err);
	if (rc < 0)
		return rc;
	sup_http_json(r, 200, sup_api_render_pool(&s));
	return 0;
}

static void im_release(void *state)
{
	sup_images_load_release(state);
}

static const sup_http_route routes[] = {
	{ "POST", "/v1/images", "POST images", SUP_BODY_STREAMED, 0, parse_post, sup_images_act_post },
	{ "GET", "/v1/images", "GET images", SUP_BODY_NONE, 0, NULL, act_list },
	{ "GET", "/v1/images/{ref}", "GET image", SUP_BODY_NONE, 0, parse_get, act_get },
	{ "DELETE", "/v1/images/{ref}", "DELETE image", SUP_BODY_NONE, 0, parse_delete, act_delete },
	{ "PUT", "/v1/pools/{ref}", "PUT pool", SUP_BODY_BUFFERED, 0, parse_pool, act_pool },
};

const sup_http_family sup_images_family = {
	.name = "images",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(sup_imq),
	.release = im_release,
};
