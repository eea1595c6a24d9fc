/* The lifecycle half of the OpenSandbox layer (/opensandbox/v1) and the
 * rows of both halves. */
#include "sup_osbx.h"
#include "sup_osbx_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_agent.h"
#include "sup_log.h"
#include "sup_query.h"
#include "sup_text.h"
#include "sup_urlsign.h"

#define V1 "/opensandbox/v1"
#define EXECD "/opensandbox/execd/{id}"
/* Their SDK's ports for execd and its egress sidecar: both lead to the
 * execd prefix here. */
#define PORT_EXECD 44772
#define PORT_EGRESS 18080
#define MAX_PAGE_SIZE 1000

void sup_osbx_ctx_release(sup_osbx_ctx *x)
{
	sup_osbx_sess_free_all(x);
	sup_kept_release(&x->kept);
	json_decref(x->cpu_last);
	x->cpu_last = NULL;
}

static void oq_release(void *state)
{
	sup_oq *q = state;
	if (q->op)
		sup_op_cancel(q->op);
	q->op = NULL;
	if (q->snap_op)
		sup_snaps_op_cancel(q->snap_op);
	q->snap_op = NULL;
	sup_osbx_sess_release(q);
	sup_osbx_watch_release(q);
	sup_osbx_cmd_release(q);
	sup_osbx_files_release(q);
	sup_osbx_replace_release(q);
	sup_create_req_free(&q->create);
	json_decref(q->kept);
}

static sup_osbx_ctx *ctx_of(sup_http_req *r)
{
	return sup_http_ctx(r);
}

static const json_t *kept_of(sup_osbx_ctx *x, const char *id)
{
	return sup_kept_get(&x->kept, id);
}

/* Drop what was kept of who's sandboxes that are gone (expired, or
 * deleted through /v1), and their metrics' samples, so the tables hold no
 * more than who has. */
static void prune(sup_osbx_ctx *x, const sup_tenant *who)
{
	const char *id;
	json_t *k, *tmp;
	sbx_err e;
	sup_sandbox_view v;
	sup_kept_prune(&x->kept, x->core, who);
	json_object_foreach_safe(x->cpu_last, tmp, id, k) {
		const char *t = json_string_value(json_object_get(k, "tenant"));
		if (t && strcmp(t, who->name) == 0 && sup_core_get(x->core, who, id, &v, &e) < 0)
			json_object_del(x->cpu_last, id);
	}
}

/* ---- parsers ---- */

static int parse_create(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_oq *q = state;
	sup_osbx_ctx *x = ctx;
	return sup_osbx_parse_create(in->body, in->body_len, &x->limits, &q->create, &q->kept, err);
}

static int parse_renew(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "expiresAt", NULL };
	sup_oq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	time_t at;
	if (sup_http_in_json(in, keys, &j, err) < 0)
		return err->code;
	const char *s = json_string_value(json_object_get(j, "expiresAt"));
	if (!s || sup_osbx_parse_time(s, &at) < 0)
		return sbx_err_set(err, -EINVAL, "field \"expiresAt\": want an RFC 3339 time");
	time_t now = time(NULL);
	if (at <= now)
		return sbx_err_set(err, -EINVAL, "field \"expiresAt\": %.40s is not in the future", s);
	if ((uint64_t)(at - now) > 0xffffffffu)
		return sbx_err_set(err, -EINVAL, "field \"expiresAt\": too far ahead");
	q->timeout_s = (unsigned)(at - now);
	return 0;
}

/* ?expires=: their signed endpoint's expiry, Unix seconds (decimal, as
 * their SDKs send it), within sbx's longest signed URL life. */
static int parse_expires(const char *s, uint64_t *out, sbx_err *err)
{
	uint64_t now = (uint64_t)time(NULL);
	size_t n = strlen(s);
	if (n == 0 || n > 19 || strspn(s, "0123456789") != n)
		return sbx_err_set(err, -EINVAL, "query parameter \"expires\": want Unix seconds");
	*out = strtoull(s, NULL, 10);
	if (*out <= now || *out > now + SUP_URLSIGN_MAX_S)
		return sbx_err_set(err, -EINVAL,
				   "query parameter \"expires\": want a time after now (%llu) and at most "
				   "%d s ahead", (unsigned long long)now, SUP_URLSIGN_MAX_S);
	return 0;
}

static int parse_endpoint(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "use_server_proxy", "expires", NULL };
	sup_oq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	const char *p = in->pid;
	size_t n = strlen(p);
	int rc = sup_query_parse(in->query, keys, &qs, err);
	if (rc < 0)
		return rc;
	if (n == 0 || n > 5 || strspn(p, "0123456789") != n || atoi(p) < 1 || atoi(p) > 65535)
		return sbx_err_set(err, -EINVAL, "port \"%.16s\": want 1..65535", p);
	int port = atoi(p);
	snprintf(q->port, sizeof(q->port), "%d", port);
	const char *exp = sup_query_get(&qs, "expires", NULL);
	if (!exp)
		return 0;
	rc = sup_query_flag(&qs, "use_server_proxy", false, err);
	if (rc < 0)
		return rc;
	if (rc)
		return sbx_err_set(err, -EINVAL, "use_server_proxy cannot be combined with expires");
	/* sbx's execd routes act as the tenant (its path policy, its
	 * sessions); a signature names a sandbox and a port, no tenant */
	if (port == PORT_EXECD || port == PORT_EGRESS)
		return sbx_err_set(err, -EINVAL,
				   "port %d is execd's: sbx makes no signed endpoint for it (its calls "
				   "act as the tenant, whose token a signature does not carry); use "
				   "its endpoint with the headers given", port);
	return parse_expires(exp, &q->sign_exp, err);
}

/* ---- acts ---- */

static json_t *sandbox_json(sup_osbx_ctx *x, const sup_sandbox_view *v)
{
	return sup_osbx_sandbox_json(v, kept_of(x, v->id));
}

/* The created sandbox answered as their Sandbox, 202. */
static void created(sup_oq *q)
{
	sup_osbx_ctx *x = q->x;
	const sup_http_in *in = sup_http_input(q->r);
	sup_sandbox_view v;
	sbx_err e;
	if (sup_core_get(x->core, in->who, q->sid, &v, &e) < 0) {
		sup_http_fail(q->r, &e);
		return;
	}
	char loc[128];
	snprintf(loc, sizeof(loc), V1 "/sandboxes/%s", v.id);
	sup_http_header(q->r, "Location", loc);
	sup_http_json(q->r, 202, sandbox_json(x, &v));
}

/* An entrypoint that did not start: the sandbox goes, the error is told. */
static void entry_gone(int rc, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	q->op = NULL;
	sup_http_fail(q->r, &q->entry_err);
}

static void entry_started(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	sup_osbx_ctx *x = q->x;
	sbx_err e;
	const char *st;
	size_t sl;
	int64_t code = 0;
	q->op = NULL;
	/* exited at once with a failure (not found: 127): it did not start */
	if (rc == 0 && sbx_proto_get_str(res, "state", &st, &sl) && sl == 6 && memcmp(st, "exited", 6) == 0 &&
	    (!sbx_proto_get_int(res, "exit_code", &code) || code != 0)) {
		sbx_err_set(&q->entry_err, -EINVAL, "entrypoint: %.64s exited at once (exit code %lld)",
			    json_string_value(json_array_get(json_object_get(q->kept, "entrypoint"), 0)),
			    (long long)code);
	} else if (rc == 0) {
		created(q);
		return;
	} else {
		q->entry_err = *err;
		sbx_err_wrap(&q->entry_err, "entrypoint");
	}
	sup_kept_drop(&x->kept, q->sid);
	if (sup_core_delete(x->core, sup_http_input(q->r)->who, q->sid, entry_gone, q, &q->op, &e) < 0)
		sup_http_fail(q->r, &q->entry_err);
}

static const sup_core_call_cbs entry_cbs = { .on_done = entry_started };

/* Their entrypoint runs as a background process of the sandbox (tagged
 * "entrypoint"): sbx's agent is PID 1, so the process is not; the sandbox
 * lives by its expiry, not by the process. */
static int start_entry(sup_oq *q, json_t *entry, sbx_err *err)
{
	sup_osbx_ctx *x = q->x;
	const sup_env *env = NULL;
	json_t *j = json_pack("{s:O}", "argv", entry);
	int rc = j ? sup_api_parse_exec_obj(j, NULL, &q->spec, err) : sbx_err_set(err, -ENOMEM, "out of memory");
	json_decref(j);
	if (rc == 0)
		rc = sup_core_command_prepare(x->core, q->sid, &q->spec, &env, err);
	sbx_proto_args_init(&q->args);
	if (rc == 0)
		rc = sup_agent_encode_exec_args(&q->spec, env, &q->args, err);
	if (rc == 0) {
		sbx_proto_args_str(&q->args, "tag", "entrypoint", 10);
		rc = sup_core_call(x->core, q->sid, SBX_OP_PROC_START, &q->args, &entry_cbs, q, &q->op, err);
	}
	return rc;
}

static void create_done(int rc, const sup_sandbox_view *v, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	sup_osbx_ctx *x = q->x;
	q->op = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	snprintf(q->sid, sizeof(q->sid), "%s", v->id);
	sbx_err e;
	/* the sandbox is made: a catalog that fails here costs only the
	 * metadata's surviving a restart */
	if (q->kept && sup_kept_put(&x->kept, v->id, sup_http_input(q->r)->who->name, q->kept, &e) < 0)
		sup_warn("osbx: sandbox %s: %s", v->id, e.msg);
	json_t *entry = json_object_get(q->kept, "entrypoint");
	if (entry && !sup_osbx_entry_is_default(entry)) {
		/* entry_started answers, now or later */
		if (start_entry(q, entry, &e) < 0)
			entry_started(e.code, NULL, &e, q);
		return;
	}
	created(q);
}

static int act_create(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	q->r = r;
	q->x = ctx_of(r);
	const sup_tenant *who = sup_http_input(r)->who;
	prune(q->x, who);
	return sup_core_create(q->x->core, who, &q->create, create_done, q, &q->op, err);
}

static int act_get(sup_http_req *r, void *state, sbx_err *err)
{
	sup_osbx_ctx *x = ctx_of(r);
	const sup_http_in *in = sup_http_input(r);
	sup_sandbox_view v;
	int rc = sup_core_get(x->core, in->who, in->id, &v, err);
	if (rc == 0)
		sup_http_json(r, 200, sandbox_json(x, &v));
	return rc;
}

typedef struct list_walk {
	sup_osbx_ctx *x;
	json_t *items;
	const sup_osbx_listq *lq;
	int bad;
} list_walk;

static void list_one(const sup_sandbox_view *v, void *ud)
{
	list_walk *w = ud;
	const json_t *k = kept_of(w->x, v->id);
	bool ok = sup_osbx_listq_state(w->lq, sup_osbx_state(v->state));
	if (ok && w->lq->meta) {
		int m = sup_osbx_meta_match(w->lq->meta, k ? json_object_get(k, "metadata") : NULL);
		if (m < 0)
			w->bad = m;
		ok = m > 0;
	}
	if (ok)
		json_array_append_new(w->items, sup_osbx_sandbox_json(v, k));
}

void sup_osbx_listq_free(sup_osbx_listq *lq)
{
	for (size_t i = 0; i < lq->nstates; i++)
		free(lq->states[i]);
	lq->nstates = 0;
	free(lq->meta);
	free(lq->sandbox);
	free(lq->name);
	lq->meta = lq->sandbox = lq->name = NULL;
}

bool sup_osbx_listq_state(const sup_osbx_listq *lq, const char *state)
{
	bool ok = lq->nstates == 0;
	for (size_t i = 0; i < lq->nstates; i++)
		ok |= strcasecmp(lq->states[i], state) == 0;
	return ok;
}

/* A string parameter of the list's: the last one given counts. */
static bool take_str(const char *p, size_t kl, const char *key, char **slot, char **val)
{
	if (kl != strlen(key) || memcmp(p, key, kl) != 0)
		return false;
	free(*slot);
	*slot = *val;
	*val = NULL;
	return true;
}

/* ?state=A&state=B&page=1&pageSize=20 and the filters of the list (their
 * sandboxes: metadata; their snapshots: sandboxId, name): state repeats,
 * which sup_query refuses, so the pairs are walked here. */
int sup_osbx_listq_parse(const char *query, bool snapshots, sup_osbx_listq *lq, sbx_err *err)
{
	int rc = 0;
	const char *p = query ? query : "";
	*lq = (sup_osbx_listq){ .page = 1, .size = 20 };
	while (*p && rc == 0) {
		size_t n = strcspn(p, "&");
		const char *eq = memchr(p, '=', n);
		size_t kl = eq ? (size_t)(eq - p) : n, vl = eq ? n - kl - 1 : 0;
		size_t dl;
		char *val = eq ? sup_query_decode(eq + 1, vl, &dl) : NULL;
		char *end = NULL;
		if (!eq || !val) {
			rc = sbx_err_set(err, eq ? -ENOMEM : -EINVAL, "query parameter \"%.*s\" without a value",
					 (int)(kl > 64 ? 64 : kl), p);
		} else if (kl == 5 && memcmp(p, "state", 5) == 0) {
			if (lq->nstates == 16)
				rc = sbx_err_set(err, -EINVAL, "query: at most 16 states");
			else
				lq->states[lq->nstates++] = val, val = NULL;
		} else if (!snapshots && take_str(p, kl, "metadata", &lq->meta, &val)) {
		} else if (snapshots && take_str(p, kl, "sandboxId", &lq->sandbox, &val)) {
		} else if (snapshots && take_str(p, kl, "name", &lq->name, &val)) {
		} else if (kl == 4 && memcmp(p, "page", 4) == 0) {
			lq->page = strtoull(val, &end, 10);
			if (!*val || *end || lq->page < 1 || lq->page > 1000000)
				rc = sbx_err_set(err, -EINVAL, "query parameter \"page\": want 1 or more");
		} else if (kl == 8 && memcmp(p, "pageSize", 8) == 0) {
			lq->size = strtoull(val, &end, 10);
			if (!*val || *end || lq->size < 1 || lq->size > MAX_PAGE_SIZE)
				rc = sbx_err_set(err, -EINVAL, "query parameter \"pageSize\": want 1..%d", MAX_PAGE_SIZE);
		} else {
			rc = sbx_err_set(err, -EINVAL, "unknown query parameter \"%.*s\"", (int)(kl > 64 ? 64 : kl), p);
		}
		free(val);
		p += n + (p[n] == '&');
	}
	if (rc < 0)
		sup_osbx_listq_free(lq);
	return rc;
}

int sup_osbx_page(sup_http_req *r, json_t *all, const sup_osbx_listq *lq, sbx_err *err)
{
	uint64_t page = lq->page, size = lq->size;
	size_t total = json_array_size(all);
	size_t pages = size ? (total + size - 1) / size : 0; /* size is 1.. once parsed */
	json_t *items = json_array();
	for (size_t i = (size_t)((page - 1) * size); items && i < total && i < page * size; i++)
		json_array_append(items, json_array_get(all, i));
	json_decref(all);
	if (!items)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_http_json(r, 200,
		      json_pack("{s:o, s:{s:I, s:I, s:I, s:I, s:b}}", "items", items, "pagination", "page",
				(json_int_t)page, "pageSize", (json_int_t)size, "totalItems",
				(json_int_t)total, "totalPages", (json_int_t)pages, "hasNextPage",
				page < pages));
	return 0;
}

static int act_list(sup_http_req *r, void *state, sbx_err *err)
{
	sup_osbx_ctx *x = ctx_of(r);
	const sup_http_in *in = sup_http_input(r);
	sup_osbx_listq lq;
	int rc = sup_osbx_listq_parse(in->query, false, &lq, err);
	if (rc < 0)
		return rc;
	list_walk w = { .x = x, .lq = &lq, .items = json_array() };
	if (!w.items)
		rc = sbx_err_set(err, -ENOMEM, "out of memory");
	if (rc == 0) {
		prune(x, in->who);
		sup_core_list(x->core, in->who, list_one, &w);
		if (w.bad < 0)
			rc = sbx_err_set(err, -EINVAL, "query parameter \"metadata\": want k=v pairs joined by &");
	}
	sup_osbx_listq_free(&lq);
	if (rc < 0) {
		json_decref(w.items);
		return rc;
	}
	return sup_osbx_page(r, w.items, &lq, err);
}

static void delete_done(int rc, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	q->op = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	sup_kept_drop(&q->x->kept, q->id);
	sup_http_json(q->r, 204, NULL);
}

static int act_delete(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	const sup_http_in *in = sup_http_input(r);
	q->r = r;
	q->x = ctx_of(r);
	q->id = in->id;
	return sup_core_delete(q->x->core, in->who, in->id, delete_done, q, &q->op, err);
}

static int act_renew(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	const sup_http_in *in = sup_http_input(r);
	sup_sandbox_view v;
	char at[32];
	int rc = sup_core_set_timeout(ctx_of(r)->core, in->who, in->id, q->timeout_s, &v, err);
	if (rc < 0)
		return rc;
	sup_rfc3339(v.expires_at, at, sizeof(at));
	sup_http_json(r, 200, json_pack("{s:s}", "expiresAt", at));
	return 0;
}

/* PATCH .../metadata: a JSON merge patch of the metadata (null removes a
 * key). */
static int act_metadata(sup_http_req *r, void *state, sbx_err *err)
{
	sup_osbx_ctx *x = ctx_of(r);
	const sup_http_in *in = sup_http_input(r);
	SBX_AUTO_JSON json_t *j = NULL;
	sup_sandbox_view v;
	const char *k;
	json_t *val;
	int rc = sup_core_get(x->core, in->who, in->id, &v, err);
	if (rc == 0)
		rc = sup_http_in_json(in, NULL, &j, err);
	if (rc < 0)
		return rc;
	json_object_foreach(j, k, val)
		if (!json_is_string(val) && !json_is_null(val))
			return sbx_err_set(err, -EINVAL, "field \"%.64s\": want a string or null", k);
	json_t *kept = sup_kept_get(&x->kept, in->id);
	if (!kept) {
		SBX_AUTO_JSON json_t *fresh = json_object();
		sbx_err e;
		if (fresh && sup_kept_put(&x->kept, in->id, in->who->name, fresh, &e) < 0 && e.code != -EIO)
			return sbx_err_set(err, e.code, "%s", e.msg);
		kept = sup_kept_get(&x->kept, in->id);
	}
	json_t *meta = kept ? json_object_get(kept, "metadata") : NULL;
	if (kept && !meta) {
		meta = json_object();
		json_object_set_new(kept, "metadata", meta);
	}
	if (!meta)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	json_object_foreach(j, k, val) {
		if (json_is_null(val))
			json_object_del(meta, k);
		else
			json_object_set(meta, k, val);
	}
	rc = sup_kept_save(&x->kept, in->id, err);
	if (rc == 0)
		sup_http_json(r, 200, sandbox_json(x, &v));
	return rc;
}

/* Pause and resume: sbx's own (the cgroup freezer), answered 202 with the
 * Sandbox as it is then (their API answers 202; their SDK takes any 2xx).
 * Idempotent, as sbx's. */
static int pause_or_resume(sup_http_req *r, bool paused, sbx_err *err)
{
	sup_osbx_ctx *x = ctx_of(r);
	const sup_http_in *in = sup_http_input(r);
	sup_sandbox_view v;
	int rc = sup_core_get(x->core, in->who, in->id, &v, err);
	rc = rc ?: sup_core_pause(x->core, in->id, paused, &v, err);
	if (rc == 0)
		sup_http_json(r, 202, sandbox_json(x, &v));
	return rc;
}

static int act_pause(sup_http_req *r, void *state, sbx_err *err)
{
	(void)state;
	return pause_or_resume(r, true, err);
}

static int act_resume(sup_http_req *r, void *state, sbx_err *err)
{
	(void)state;
	return pause_or_resume(r, false, err);
}

/* A header value that may go back in a JSON answer and a Host. */
static bool plain(const char *s, size_t max)
{
	size_t n = s ? strlen(s) : 0;
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] == 0x7f || s[i] == '"' || s[i] == '\\' || s[i] == '/')
			return false;
	return true;
}

/* A signed endpoint (?expires=): the port proxy's path form, which
 * carries its proof, so a client with no credential header reaches the
 * port by appending its own path, until the expiry. */
static int signed_endpoint(sup_http_req *r, const sup_sandbox_view *v, const char *host,
			   uint16_t port, uint64_t exp, sbx_err *err)
{
	sup_osbx_ctx *x = ctx_of(r);
	char path[SUP_URLSIGN_PATH_MAX], ep[512];
	if (!x->sign)
		return sbx_err_set(err, -ENOSYS, "signed endpoints are not made on this server");
	int rc = sup_urlsign_path(x->sign, v->id, port, exp, path, err);
	if (rc < 0)
		return rc;
	/* the endpoint names the id until it expires: never another owner's */
	sup_core_id_given_out(x->core, v->id);
	snprintf(ep, sizeof(ep), "%s%s", host, path);
	sup_http_json(r, 200, json_pack("{s:s}", "endpoint", ep));
	return 0;
}

/* Port 44772 (execd) and 18080 (egress) are this supervisor's execd prefix
 * for the sandbox; any other port is the port proxy's path. Both take the
 * token the caller used, handed back in "headers"; a signed one needs
 * none. */
static int act_endpoint(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	const sup_http_in *in = sup_http_input(r);
	sup_sandbox_view v;
	if (sup_core_get(ctx_of(r)->core, in->who, in->id, &v, err) < 0)
		return err->code;
	const char *host = sup_http_in_header(in, "Host");
	if (!plain(host, 255))
		return sbx_err_set(err, -EINVAL, "the request's Host header is needed to name the endpoint");
	int port = atoi(q->port);
	if (q->sign_exp)
		return signed_endpoint(r, &v, host, (uint16_t)port, q->sign_exp, err);
	const char *key = sup_http_in_header(in, "OPEN-SANDBOX-API-KEY");
	const char *auth = sup_http_in_header(in, "Authorization");
	json_t *hdrs = key ? json_pack("{s:s}", "OPEN-SANDBOX-API-KEY", key)
			   : json_pack("{s:s}", "Authorization", auth ? auth : "");
	char ep[512];
	if (port == PORT_EXECD || port == PORT_EGRESS)
		snprintf(ep, sizeof(ep), "%s/opensandbox/execd/%s", host, in->id);
	else
		snprintf(ep, sizeof(ep), "%s/v1/sandboxes/%s/ports/%d", host, in->id, port);
	sup_http_json(r, 200, json_pack("{s:s, s:o}", "endpoint", ep, "headers", hdrs));
	return 0;
}

/* Their Metrics from sbx's own figures (the limits in force and the
 * cgroup's usage, as GET /v1/sandboxes/{id} reads them): cpu_count the CPU
 * limit, mem_total_mib the memory limit, mem_used_mib the memory charged
 * now, cpu_used_pct the CPU time used since the previous sample of this
 * sandbox (a metrics call or a watch's; its creation for the first) as a
 * share of its limit. The agent is not asked: a paused sandbox answers. */
json_t *sup_osbx_metrics_json(sup_osbx_ctx *x, const sup_tenant *who, const char *id, sbx_err *err)
{
	sup_sandbox_view v;
	if (sup_core_get(x->core, who, id, &v, err) < 0)
		return NULL;
	if (!v.has_usage || !(v.usage.known & SUP_USAGE_CPU) || !(v.usage.known & SUP_USAGE_MEMORY))
		return sbx_err_set(err, -EBUSY, "sandbox %s: its usage cannot be read now (%s)", v.id, v.state),
		       NULL;
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	uint64_t now_ms = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
	uint64_t since_ms = (uint64_t)v.created_at * 1000u, since_cpu = 0;
	if (!x->cpu_last)
		x->cpu_last = json_object();
	json_t *last = x->cpu_last ? json_object_get(x->cpu_last, v.id) : NULL;
	if (last) {
		since_cpu = (uint64_t)json_integer_value(json_object_get(last, "cpu_ns"));
		since_ms = (uint64_t)json_integer_value(json_object_get(last, "ms"));
	}
	if (x->cpu_last)
		json_object_set_new(x->cpu_last, v.id,
				    json_pack("{s:I, s:I, s:s}", "cpu_ns", (json_int_t)v.usage.cpu_ns, "ms",
					      (json_int_t)now_ms, "tenant", who->name));
	double cpus = v.resources.cpu_milli / 1000.0;
	double wall_ns = now_ms > since_ms ? (double)(now_ms - since_ms) * 1e6 : 0;
	double used = v.usage.cpu_ns > since_cpu ? (double)(v.usage.cpu_ns - since_cpu) : 0;
	double pct = wall_ns > 0 ? used / (wall_ns * cpus) * 100.0 : 0;
	json_t *o = json_pack("{s:f, s:f, s:f, s:f, s:I}", "cpu_count", cpus, "cpu_used_pct",
			      pct > 100.0 ? 100.0 : pct, "mem_total_mib", (double)v.resources.memory / 1048576.0,
			      "mem_used_mib", (double)v.usage.memory / 1048576.0, "timestamp",
			      (json_int_t)now_ms);
	if (!o)
		sbx_err_set(err, -ENOMEM, "out of memory");
	return o;
}

/* GET .../metrics */
static int act_metrics(sup_http_req *r, void *state, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(r);
	(void)state;
	json_t *o = sup_osbx_metrics_json(ctx_of(r), in->who, in->id, err);
	if (!o)
		return err->code;
	sup_http_json(r, 200, o);
	return 0;
}

/* GET .../ping: 200 while the sandbox runs. */
static int act_ping(sup_http_req *r, void *state, sbx_err *err)
{
	const sup_http_in *in = sup_http_input(r);
	sup_sandbox_view v;
	if (sup_core_get(ctx_of(r)->core, in->who, in->id, &v, err) < 0)
		return err->code;
	if (strcmp(v.state, "running") != 0)
		return sbx_err_set(err, -EBUSY, "sandbox %s is %s", v.id, v.state);
	sup_http_json(r, 200, NULL);
	return 0;
}

static const sup_http_route routes[] = {
	{ "GET", V1 "/sandboxes", "GET osbx sandboxes", SUP_BODY_NONE, 0, NULL, act_list },
	{ "POST", V1 "/sandboxes", "POST osbx sandboxes", SUP_BODY_BUFFERED, SUP_OSBX_MAX_BODY,
	  parse_create, act_create },
	{ "GET", V1 "/sandboxes/{id}", "GET osbx sandbox", SUP_BODY_NONE, 0, NULL, act_get },
	{ "DELETE", V1 "/sandboxes/{id}", "DELETE osbx sandbox", SUP_BODY_NONE, 0, NULL, act_delete },
	{ "POST", V1 "/sandboxes/{id}/renew-expiration", "POST osbx renew", SUP_BODY_BUFFERED, 4096,
	  parse_renew, act_renew },
	{ "PATCH", V1 "/sandboxes/{id}/metadata", "PATCH osbx metadata", SUP_BODY_BUFFERED,
	  SUP_OSBX_MAX_BODY, NULL, act_metadata },
	{ "POST", V1 "/sandboxes/{id}/pause", "POST osbx pause", SUP_BODY_NONE, 0, NULL, act_pause },
	{ "POST", V1 "/sandboxes/{id}/resume", "POST osbx resume", SUP_BODY_NONE, 0, NULL, act_resume },
	{ "POST", V1 "/sandboxes/{id}/snapshots", "POST osbx snapshots", SUP_BODY_BUFFERED, 4096,
	  sup_osbx_parse_snap, sup_osbx_act_snap_take },
	{ "GET", V1 "/snapshots", "GET osbx snapshots", SUP_BODY_NONE, 0, NULL, sup_osbx_act_snap_list },
	{ "GET", V1 "/snapshots/{pid}", "GET osbx snapshot", SUP_BODY_NONE, 0, NULL,
	  sup_osbx_act_snap_get },
	{ "DELETE", V1 "/snapshots/{pid}", "DELETE osbx snapshot", SUP_BODY_NONE, 0, NULL,
	  sup_osbx_act_snap_delete },
	{ "GET", V1 "/sandboxes/{id}/endpoints/{pid}", "GET osbx endpoint", SUP_BODY_NONE, 0,
	  parse_endpoint, act_endpoint },
	{ "GET", EXECD "/ping", "GET osbx ping", SUP_BODY_NONE, 0, NULL, act_ping },
	{ "GET", EXECD "/metrics", "GET osbx metrics", SUP_BODY_NONE, 0, NULL, act_metrics },
	{ "GET", EXECD "/metrics/watch", "GET osbx metrics watch", SUP_BODY_NONE, 0, NULL,
	  sup_osbx_act_watch },
	{ "POST", EXECD "/session", "POST osbx session", SUP_BODY_BUFFERED, 4096,
	  sup_osbx_parse_sess_create, sup_osbx_act_sess_create },
	{ "POST", EXECD "/session/{pid}/run", "POST osbx session run", SUP_BODY_BUFFERED,
	  SUP_OSBX_MAX_BODY, sup_osbx_parse_sess_run, sup_osbx_act_sess_run },
	{ "DELETE", EXECD "/session/{pid}", "DELETE osbx session", SUP_BODY_NONE, 0,
	  sup_osbx_parse_sess_delete, sup_osbx_act_sess_delete },
	{ "POST", EXECD "/command", "POST osbx command", SUP_BODY_BUFFERED, 0, sup_osbx_parse_cmd,
	  sup_osbx_act_cmd },
	{ "DELETE", EXECD "/command", "DELETE osbx command", SUP_BODY_NONE, 0,
	  sup_osbx_parse_interrupt, sup_osbx_act_call },
	{ "GET", EXECD "/command/status/{pid}", "GET osbx command status", SUP_BODY_NONE, 0,
	  sup_osbx_parse_status, sup_osbx_act_call },
	{ "POST", EXECD "/files/upload", "POST osbx files upload", SUP_BODY_STREAMED, 0,
	  sup_osbx_parse_upload, sup_osbx_act_upload },
	{ "GET", EXECD "/files/download", "GET osbx files download", SUP_BODY_NONE, 0,
	  sup_osbx_parse_download, sup_osbx_act_download },
	{ "GET", EXECD "/files/info", "GET osbx files info", SUP_BODY_NONE, 0, sup_osbx_parse_fs,
	  sup_osbx_act_fs },
	{ "DELETE", EXECD "/files", "DELETE osbx files", SUP_BODY_NONE, 0, sup_osbx_parse_fs,
	  sup_osbx_act_fs },
	{ "GET", EXECD "/files/search", "GET osbx files search", SUP_BODY_NONE, 0, sup_osbx_parse_fs,
	  sup_osbx_act_fs },
	{ "POST", EXECD "/files/mv", "POST osbx files mv", SUP_BODY_BUFFERED, SUP_OSBX_MAX_BODY,
	  sup_osbx_parse_fs, sup_osbx_act_fs },
	{ "POST", EXECD "/files/replace", "POST osbx files replace", SUP_BODY_BUFFERED, SUP_OSBX_MAX_BODY,
	  sup_osbx_parse_replace, sup_osbx_act_replace },
	{ "POST", EXECD "/files/permissions", "POST osbx files permissions", SUP_BODY_BUFFERED,
	  SUP_OSBX_MAX_BODY, sup_osbx_parse_fs, sup_osbx_act_fs },
	{ "POST", EXECD "/directories", "POST osbx directories", SUP_BODY_BUFFERED, SUP_OSBX_MAX_BODY,
	  sup_osbx_parse_fs, sup_osbx_act_fs },
	{ "GET", EXECD "/directories/list", "GET osbx directories list", SUP_BODY_NONE, 0,
	  sup_osbx_parse_fs, sup_osbx_act_fs },
	{ "DELETE", EXECD "/directories", "DELETE osbx directories", SUP_BODY_NONE, 0,
	  sup_osbx_parse_fs, sup_osbx_act_fs },
	{ "GET", EXECD "/command/{pid}/logs", "GET osbx command logs", SUP_BODY_NONE, 0,
	  sup_osbx_parse_logs, sup_osbx_act_call },
};

const sup_http_family sup_osbx_family = {
	.name = "opensandbox",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(sup_oq),
	.release = oq_release,
};

int sup_osbx_ctx_open(sup_osbx_ctx *x, struct sup_catalog *catalog, sbx_err *err)
{
	return sup_kept_open(&x->kept, "opensandbox", catalog, err);
}
