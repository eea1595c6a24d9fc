#include "sup_files.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_files_int.h"
#include "sup_httpin.h"
#include "sup_log.h"
#include "sup_path.h"
#include "sup_text.h"

sup_files *sup_files_new(sup_core *core, const sup_policy *policy)
{
	sup_files *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->core = core;
	f->policy = policy;
	return f;
}

void sup_files_free(sup_files *f)
{
	free(f);
}

/* ---- replies ---- */

static const char *route_name(sup_files_route rt)
{
	switch (rt) {
	case SUP_FILES_GET: return "GET files";
	case SUP_FILES_DELETE: return "DELETE files";
	case SUP_FILES_STAT: return "GET fs/stat";
	case SUP_FILES_LIST: return "GET fs/list";
	case SUP_FILES_MKDIR: return "POST fs/mkdir";
	case SUP_FILES_MOVE: return "POST fs/move";
	case SUP_FILES_CHMOD: return "POST fs/chmod";
	case SUP_FILES_SEARCH: return "POST fs/search";
	case SUP_FILES_PUT: return "PUT files";
	case SUP_FILES_WATCH: return "GET fs/watch";
	}
	return "?";
}

static void fq_release(void *owner)
{
	sup_fq *q = owner;
	if (q->in)
		sup_httpin_stop(q->in); /* an upload answered early: drop the rest */
	if (q->chunk)
		evbuffer_free(q->chunk);
	free(q);
}

/* What files answer unlike the shared table. */
static const sup_req_errmap fq_errmap[] = {
	{ -ENAMETOOLONG, 400, "bad_request" },
	{ 0, 0, NULL },
};

static const sup_req_kind fq_kind = {
	.errmap = fq_errmap,
	.reasons = true,
	.release = fq_release,
};

/* ---- requests ---- */

int sup_files_query(struct evhttp_request *req, const char *key, char **out, size_t *len)
{
	*out = NULL;
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *qs = uri ? evhttp_uri_get_query(uri) : NULL;
	size_t kl = strlen(key);
	while (qs && *qs) {
		size_t seg = strcspn(qs, "&");
		if (seg > kl && strncmp(qs, key, kl) == 0 && qs[kl] == '=') {
			if (*out) {
				free(*out);
				*out = NULL;
				return -EINVAL;
			}
			SBX_AUTO_FREE char *raw = strndup(qs + kl + 1, seg - kl - 1);
			if (!raw)
				return -ENOMEM;
			*out = evhttp_uridecode(raw, 1, len);
			if (!*out)
				return -ENOMEM;
		} else if (seg == kl && strncmp(qs, key, kl) == 0) {
			free(*out);
			*out = NULL;
			return -EINVAL;
		}
		qs += seg;
		if (*qs == '&')
			qs++;
	}
	return *out ? 0 : -ENOENT;
}

/* Only the keys in allowed (NULL-terminated) may appear in the query. */
static bool query_keys_ok(sup_fq *q, const char *const *allowed)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(q->r.req);
	const char *qs = uri ? evhttp_uri_get_query(uri) : NULL;
	while (qs && *qs) {
		size_t seg = strcspn(qs, "&");
		size_t kl = strcspn(qs, "=&");
		bool ok = false;
		for (size_t i = 0; allowed[i]; i++)
			ok |= strlen(allowed[i]) == kl && strncmp(allowed[i], qs, kl) == 0;
		if (!ok) {
			char msg[160];
			snprintf(msg, sizeof(msg), "unknown query parameter \"%.*s\"",
				 (int)(kl > 40 ? 40 : kl), qs);
			sup_req_error_at(&q->r, 400, "bad_request", msg, NULL, 0);
			return false;
		}
		qs += seg;
		if (*qs == '&')
			qs++;
	}
	return true;
}

/* The policy on p[0..len): 0 with m filled, or the reply sent (q freed). */
static int check_path(sup_fq *q, const char *p, size_t len, sup_policy_access need,
		      sup_policy_match *m)
{
	sbx_err err;
	sbx_err_clear(&err);
	int rc = sup_policy_check(q->f->policy, SUP_FILES_TENANT, p, len, need, m, &err);
	if (rc == 0)
		return 0;
	if (rc == -EACCES) {
		sup_policy_log_denial(SUP_FILES_TENANT, q->r.id, q->opname, p, len, &err);
		sup_req_error_at(&q->r, 403, "forbidden", err.msg, p, len);
	} else {
		sup_req_error_at(&q->r, 400, "bad_request", err.msg, p, len);
	}
	return rc;
}

/* The path query parameter, checked: 0, or the reply sent. */
static int query_path(sup_fq *q, sup_policy_access need, sup_policy_match *m)
{
	SBX_AUTO_FREE char *p = NULL;
	size_t len = 0;
	int rc = sup_files_query(q->r.req, "path", &p, &len);
	if (rc == -ENOENT) {
		sup_req_error_at(&q->r, 400, "bad_request", "query parameter \"path\" is required", NULL, 0);
		return rc;
	}
	if (rc < 0) {
		sup_req_error_at(&q->r, 400, "bad_request", "query parameter \"path\" given twice or bad", NULL,
			     0);
		return rc;
	}
	return check_path(q, p, len, need, m);
}

/* A 0/1/true/false flag from the query; default when absent. -1: reply sent. */
static int query_flag(sup_fq *q, const char *key, bool def)
{
	SBX_AUTO_FREE char *v = NULL;
	size_t len = 0;
	int rc = sup_files_query(q->r.req, key, &v, &len);
	if (rc == -ENOENT)
		return def;
	if (rc == 0 && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0))
		return 1;
	if (rc == 0 && (strcmp(v, "0") == 0 || strcmp(v, "false") == 0))
		return 0;
	char msg[96];
	snprintf(msg, sizeof(msg), "query parameter \"%s\": want 0 or 1 (once)", key);
	sup_req_error_at(&q->r, 400, "bad_request", msg, NULL, 0);
	return -1;
}

/* ---- agent arguments ---- */

void sup_fargs_begin(sup_req_args *a, size_t n, const sup_policy_match *m)
{
	sup_req_args_begin(a, n + 2);
	sup_req_args_str(a, "root", m->root, strlen(m->root));
	sup_req_args_str(a, "path", m->rel, strlen(m->rel));
}

/* ---- results ---- */

static const char *const stat_types[] = { "file",   "dir",  "symlink", "fifo",
					  "socket", "char", "block",   "other" };

int sup_files_stat_json(const msgpack_object *map, json_t *o, sbx_err *err)
{
	const char *t;
	size_t tl;
	if (!map || map->type != MSGPACK_OBJECT_MAP || !sbx_proto_get_str(map, "type", &t, &tl))
		return sbx_err_set(err, -EPROTO, "agent: stat without a type");
	const char *type = NULL;
	for (size_t i = 0; i < sizeof(stat_types) / sizeof(stat_types[0]); i++)
		if (strlen(stat_types[i]) == tl && memcmp(stat_types[i], t, tl) == 0)
			type = stat_types[i];
	if (!type)
		return sbx_err_set(err, -EPROTO, "agent: stat with an unknown type");
	static const char *const keys[] = { "size", "mode", "mtime_ns", "uid", "gid", "nlink", "ino" };
	uint64_t v[7];
	for (size_t i = 0; i < 7; i++)
		if (!sbx_proto_get_uint(map, keys[i], &v[i]) || v[i] > (1ull << 62))
			return sbx_err_set(err, -EPROTO, "agent: stat key %s missing or not a uint",
					   keys[i]);
	if (v[1] > 07777)
		return sbx_err_set(err, -EPROTO, "agent: stat mode out of range");
	json_object_set_new(o, "type", json_string(type));
	for (size_t i = 0; i < 7; i++)
		json_object_set_new(o, keys[i], json_integer((json_int_t)v[i]));
	char ts[40];
	sup_rfc3339((time_t)(v[2] / 1000000000ull), ts, sizeof(ts));
	json_object_set_new(o, "mtime", json_string(ts));
	const char *tg;
	size_t tgl;
	if (sbx_proto_get_str(map, "target", &tg, &tgl) && tgl <= 4096)
		sup_req_set_bytes(o, "target", tg, tgl);
	return 0;
}

static json_t *path_obj(const char *path)
{
	json_t *o = json_object();
	if (o)
		sup_req_set_bytes(o, "path", path, strlen(path));
	return o;
}

char *sup_files_join(const char *base, const char *rel, size_t rl)
{
	char *out = NULL;
	const char *sep = strcmp(base, "/") != 0 && rl ? "/" : "";
	if (asprintf(&out, "%s%s%.*s", base, sep, (int)rl, rel) < 0)
		return NULL;
	return out;
}

/* fs.list / fs.search result -> {"path","entries":[...],"count","truncated"}. */
static json_t *render_entries(const sup_fq *q, const msgpack_object *r, sbx_err *err)
{
	const msgpack_object *ents = sbx_proto_map_get(r, "entries");
	bool trunc = false;
	if (!ents || ents->type != MSGPACK_OBJECT_ARRAY) {
		sbx_err_set(err, -EPROTO, "agent: listing without entries");
		return NULL;
	}
	sbx_proto_get_bool(r, "truncated", &trunc);
	json_t *arr = json_array();
	json_t *o = path_obj(q->m.path);
	if (!arr || !o) {
		json_decref(arr);
		json_decref(o);
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	json_object_set_new(o, "entries", arr);
	for (uint32_t i = 0; i < ents->via.array.size; i++) {
		const msgpack_object *e = &ents->via.array.ptr[i];
		const char *rel, *name;
		size_t rl, nl;
		json_t *je = json_object();
		if (!je || e->type != MSGPACK_OBJECT_MAP || !sbx_proto_get_str(e, "path", &rel, &rl) ||
		    !sbx_proto_get_str(e, "name", &name, &nl) || rl == 0 || rl >= 4096 ||
		    memchr(rel, '\0', rl) || memchr(name, '\0', nl) || memchr(name, '/', nl) ||
		    rel[0] == '/') {
			json_decref(je);
			json_decref(o);
			sbx_err_set(err, -EPROTO, "agent: a listing entry without a valid path or name");
			return NULL;
		}
		SBX_AUTO_FREE char *full = sup_files_join(q->m.path, rel, rl);
		if (!full || sup_req_set_bytes(je, "path", full, strlen(full)) < 0 ||
		    sup_req_set_bytes(je, "name", name, nl) < 0 ||
		    sup_files_stat_json(e, je, err) < 0 || json_array_append_new(arr, je) < 0) {
			if (!err->code)
				sbx_err_set(err, -ENOMEM, "out of memory");
			json_decref(o);
			return NULL;
		}
	}
	json_object_set_new(o, "count", json_integer((json_int_t)json_array_size(arr)));
	json_object_set_new(o, "truncated", json_boolean(trunc));
	return o;
}

static void simple_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_fq *q = ud;
	if (!sup_req_settled(&q->r, rc, err, q->m.path))
		return;
	sbx_err e;
	sbx_err_clear(&e);
	json_t *body = NULL;
	switch (q->rt) {
	case SUP_FILES_STAT:
		body = path_obj(q->m.path);
		if (body && sup_files_stat_json(result, body, &e) < 0) {
			json_decref(body);
			sup_req_broke(&q->r, &e, q->m.path);
			return;
		}
		break;
	case SUP_FILES_LIST:
	case SUP_FILES_SEARCH:
		body = render_entries(q, result, &e);
		if (!body) {
			sup_req_broke(&q->r, &e, q->m.path);
			return;
		}
		break;
	case SUP_FILES_DELETE:
		sup_req_reply(&q->r, 204, NULL);
		return;
	case SUP_FILES_MOVE:
		body = json_object();
		if (body) {
			sup_req_set_bytes(body, "from", q->m.path, strlen(q->m.path));
			sup_req_set_bytes(body, "to", q->m2.path, strlen(q->m2.path));
		}
		break;
	default:
		body = path_obj(q->m.path);
		break;
	}
	sup_req_reply(&q->r, 200, body);
}

static const sup_core_call_cbs simple_cbs = { .on_done = simple_done };

/* Start opname with a (destroyed here), answered by simple_done. */
static void simple_call(sup_fq *q, const char *opname, sup_req_args *a)
{
	sup_req_call(&q->r, opname, a, &simple_cbs, q->m.path);
}

/* ---- JSON bodies ---- */

/* A path field, checked: 0, or the reply sent. */
static int body_path(sup_fq *q, json_t *j, const char *key, sup_policy_access need,
		     sup_policy_match *m)
{
	json_t *v = json_object_get(j, key);
	char msg[96];
	if (!json_is_string(v)) {
		snprintf(msg, sizeof(msg), "field \"%s\": want a string (an absolute path)", key);
		sup_req_error_at(&q->r, 400, "bad_request", msg, NULL, 0);
		return -EINVAL;
	}
	return check_path(q, json_string_value(v), json_string_length(v), need, m);
}

/* The body (only keys) with its "path" checked for need into q->m: NULL
 * with the reply sent. */
static json_t *body_at(sup_fq *q, const char *const *keys, sup_policy_access need)
{
	json_t *j = sup_req_body_obj(&q->r, SUP_FILES_MAX_BODY, keys);
	if (j && body_path(q, j, "path", need, &q->m) < 0) {
		json_decref(j);
		return NULL;
	}
	return j;
}

/* Optional bool field: 0/1, def when absent, -1 with the reply sent. */
static int body_bool(sup_fq *q, json_t *j, const char *key, bool def)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v))
		return def;
	if (json_is_boolean(v))
		return json_is_true(v);
	char msg[96];
	snprintf(msg, sizeof(msg), "field \"%s\": want true or false", key);
	sup_req_error_at(&q->r, 400, "bad_request", msg, NULL, 0);
	return -1;
}

/* Optional integer field in lo..hi: the value, def when absent, -1 with the
 * reply sent. */
static int64_t body_int(sup_fq *q, json_t *j, const char *key, int64_t lo, int64_t hi,
			int64_t def)
{
	json_t *v = json_object_get(j, key);
	if (!v || json_is_null(v))
		return def;
	if (json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi)
		return json_integer_value(v);
	char msg[128];
	snprintf(msg, sizeof(msg), "field \"%s\": want an integer %lld..%lld%s", key, (long long)lo,
		 (long long)hi, strcmp(key, "mode") == 0 ? " (e.g. 493 for 0755)" : "");
	sup_req_error_at(&q->r, 400, "bad_request", msg, NULL, 0);
	return -1;
}

/* ---- routes ---- */

static const char *const q_path[] = { "path", NULL };
static const char *const q_list[] = { "path", "depth", NULL };
static const char *const q_delete[] = { "path", "recursive", NULL };

static void refuse_root(sup_fq *q, const sup_policy_match *m, const char *what)
{
	char msg[160];
	snprintf(msg, sizeof(msg), "%s a policy root is not allowed", what);
	sbx_err e;
	sbx_err_set(&e, -EACCES, "%s", msg);
	sup_policy_log_denial(SUP_FILES_TENANT, q->r.id, q->opname, m->path, strlen(m->path), &e);
	sup_req_error_at(&q->r, 403, "forbidden", msg, m->path, strlen(m->path));
}

static void r_stat(sup_fq *q)
{
	if (!query_keys_ok(q, q_path) || query_path(q, SUP_POLICY_READ, &q->m) < 0)
		return;
	sup_req_args a;
	sup_fargs_begin(&a, 0, &q->m);
	simple_call(q, "fs.stat", &a);
}

static void r_list(sup_fq *q)
{
	if (!query_keys_ok(q, q_list) || query_path(q, SUP_POLICY_READ, &q->m) < 0)
		return;
	SBX_AUTO_FREE char *d = NULL;
	size_t dl = 0;
	uint64_t depth = 1;
	int rc = sup_files_query(q->r.req, "depth", &d, &dl);
	if (rc == 0) {
		char *end;
		unsigned long v = strtoul(d, &end, 10);
		if (!*d || *end || v < 1 || v > 32) {
			sup_req_error_at(&q->r, 400, "bad_request", "query parameter \"depth\": want 1..32", NULL, 0);
			return;
		}
		depth = v;
	} else if (rc != -ENOENT) {
		sup_req_error_at(&q->r, 400, "bad_request", "query parameter \"depth\" given twice", NULL, 0);
		return;
	}
	sup_req_args a;
	sup_fargs_begin(&a, 1, &q->m);
	sup_req_args_uint(&a, "depth", depth);
	simple_call(q, "fs.list", &a);
}

static void r_delete(sup_fq *q)
{
	if (!query_keys_ok(q, q_delete) || query_path(q, SUP_POLICY_WRITE, &q->m) < 0)
		return;
	int rec = query_flag(q, "recursive", false);
	if (rec < 0)
		return;
	if (q->m.is_root) {
		refuse_root(q, &q->m, "deleting");
		return;
	}
	sup_req_args a;
	sup_fargs_begin(&a, 1, &q->m);
	sup_req_args_bool(&a, "recursive", rec);
	simple_call(q, "fs.remove", &a);
}

static void r_mkdir(sup_fq *q)
{
	static const char *const keys[] = { "path", "parents", "mode", NULL };
	SUP_REQ_AUTO_JSON json_t *j = body_at(q, keys, SUP_POLICY_WRITE);
	if (!j)
		return;
	int parents = body_bool(q, j, "parents", false);
	if (parents < 0)
		return;
	int64_t mode = body_int(q, j, "mode", 0, 01777, 0755);
	if (mode < 0)
		return;
	sup_req_args a;
	sup_fargs_begin(&a, 2, &q->m);
	sup_req_args_bool(&a, "parents", parents);
	sup_req_args_uint(&a, "mode", (uint64_t)mode);
	simple_call(q, "fs.mkdir", &a);
}

static void r_chmod(sup_fq *q)
{
	static const char *const keys[] = { "path", "mode", NULL };
	SUP_REQ_AUTO_JSON json_t *j = body_at(q, keys, SUP_POLICY_WRITE);
	if (!j)
		return;
	if (!json_object_get(j, "mode")) {
		sup_req_error_at(&q->r, 400, "bad_request", "field \"mode\" is required", NULL, 0);
		return;
	}
	int64_t mode = body_int(q, j, "mode", 0, 01777, 0);
	if (mode < 0)
		return;
	sup_req_args a;
	sup_fargs_begin(&a, 1, &q->m);
	sup_req_args_uint(&a, "mode", (uint64_t)mode);
	simple_call(q, "fs.chmod", &a);
}

static void r_move(sup_fq *q)
{
	static const char *const keys[] = { "from", "to", "overwrite", NULL };
	SUP_REQ_AUTO_JSON json_t *j = sup_req_body_obj(&q->r, SUP_FILES_MAX_BODY, keys);
	if (!j || body_path(q, j, "from", SUP_POLICY_WRITE, &q->m) < 0 ||
	    body_path(q, j, "to", SUP_POLICY_WRITE, &q->m2) < 0)
		return;
	int ow = body_bool(q, j, "overwrite", false);
	if (ow < 0)
		return;
	if (q->m.is_root || q->m2.is_root) {
		refuse_root(q, q->m.is_root ? &q->m : &q->m2, "moving from or onto");
		return;
	}
	sup_req_args a;
	sup_fargs_begin(&a, 3, &q->m);
	sup_req_args_str(&a, "to", q->m2.rel, strlen(q->m2.rel));
	sup_req_args_str(&a, "to_root", q->m2.root, strlen(q->m2.root));
	sup_req_args_bool(&a, "overwrite", ow);
	simple_call(q, "fs.move", &a);
}

static void r_search(sup_fq *q)
{
	static const char *const keys[] = { "path", "glob", "max", NULL };
	SUP_REQ_AUTO_JSON json_t *j = body_at(q, keys, SUP_POLICY_READ);
	if (!j)
		return;
	json_t *g = json_object_get(j, "glob");
	if (!json_is_string(g) || json_string_length(g) == 0 || json_string_length(g) > 4095 ||
	    strlen(json_string_value(g)) != json_string_length(g)) {
		sup_req_error_at(&q->r, 400, "bad_request",
			     "field \"glob\": want a non-empty string without NUL (fnmatch pattern)",
			     q->m.path, strlen(q->m.path));
		return;
	}
	int64_t max = body_int(q, j, "max", 1, 100000, 1000);
	if (max < 0)
		return;
	sup_req_args a;
	sup_fargs_begin(&a, 2, &q->m);
	sup_req_args_str(&a, "glob", json_string_value(g), json_string_length(g));
	sup_req_args_uint(&a, "max", (uint64_t)max);
	simple_call(q, "fs.search", &a);
}

static void r_watch(sup_fq *q)
{
	static const char *const keys[] = { "path", "recursive", NULL };
	if (!query_keys_ok(q, keys) || query_path(q, SUP_POLICY_READ, &q->m) < 0)
		return;
	int rec = query_flag(q, "recursive", false);
	if (rec >= 0)
		sup_files_watch(q, rec);
}

static void r_put(sup_fq *q)
{
	static const char *const keys[] = { "path", "mode", "parents", "overwrite", NULL };
	q->in = sup_httpin_upload_of(q->r.req);
	if (!query_keys_ok(q, keys) || query_path(q, SUP_POLICY_WRITE, &q->m) < 0)
		return;
	int parents = query_flag(q, "parents", false);
	int ow = parents < 0 ? -1 : query_flag(q, "overwrite", true);
	if (ow < 0)
		return;
	q->put_parents = parents;
	q->put_overwrite = ow;
	sup_files_put(q);
}

static void r_get(sup_fq *q)
{
	if (!query_keys_ok(q, q_path) || query_path(q, SUP_POLICY_READ, &q->m) < 0)
		return;
	sup_files_get(q);
}

void sup_files_handle(sup_files *f, sup_files_route rt, struct evhttp_request *req,
		      const char *id)
{
	sup_fq *q = calloc(1, sizeof(*q));
	if (!q) {
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	q->f = f;
	q->rt = rt;
	sup_req_init(&q->r, &fq_kind, q, f->core, NULL, req, route_name(rt), id);
	switch (rt) {
	case SUP_FILES_GET:
		q->opname = "read";
		r_get(q);
		break;
	case SUP_FILES_PUT:
		q->opname = "write";
		r_put(q);
		break;
	case SUP_FILES_DELETE:
		q->opname = "remove";
		r_delete(q);
		break;
	case SUP_FILES_STAT:
		q->opname = "stat";
		r_stat(q);
		break;
	case SUP_FILES_LIST:
		q->opname = "list";
		r_list(q);
		break;
	case SUP_FILES_MKDIR:
		q->opname = "mkdir";
		r_mkdir(q);
		break;
	case SUP_FILES_MOVE:
		q->opname = "move";
		r_move(q);
		break;
	case SUP_FILES_CHMOD:
		q->opname = "chmod";
		r_chmod(q);
		break;
	case SUP_FILES_SEARCH:
		q->opname = "search";
		r_search(q);
		break;
	case SUP_FILES_WATCH:
		q->opname = "watch";
		r_watch(q);
		break;
	default:
		sup_req_error_at(&q->r, 404, "not_found", "no such route", NULL, 0);
		break;
	}
}
