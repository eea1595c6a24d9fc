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

static const char *reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 400: return "Bad Request";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 416: return "Range Not Satisfiable";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 507: return "Insufficient Storage";
	default: return "Status";
	}
}

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

void sup_fq_log(const sup_fq *q, int status, const char *extra)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double ms = (double)(now.tv_sec - q->start.tv_sec) * 1e3 +
		    (double)(now.tv_nsec - q->start.tv_nsec) / 1e6;
	sup_log(status >= 500 && status != 503 ? SUP_LOG_WARN : SUP_LOG_INFO,
		"http %s sandbox %s %d%s %.3fms", route_name(q->rt), q->id, status, extra, ms);
}

void sup_fq_free(sup_fq *q)
{
	if (q->in)
		sup_httpin_stop(q->in); /* an upload answered early: drop the rest */
	if (q->chunk)
		evbuffer_free(q->chunk);
	free(q);
}

static int dump_cb(const char *b, size_t size, void *data)
{
	return evbuffer_add(data, b, size);
}

void sup_fq_reply(sup_fq *q, int status, json_t *body)
{
	sup_fq_log(q, status, "");
	struct evbuffer *buf = evbuffer_new();
	if (body && buf) {
		evhttp_add_header(evhttp_request_get_output_headers(q->req), "Content-Type",
				  "application/json");
		if (json_dump_callback(body, dump_cb, buf, JSON_COMPACT) < 0 ||
		    evbuffer_add(buf, "\n", 1) < 0) {
			evbuffer_drain(buf, evbuffer_get_length(buf));
			status = 500;
			evbuffer_add_printf(buf, "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}\n");
		}
	}
	json_decref(body);
	evhttp_send_reply(q->req, status, reason(status), buf);
	if (buf)
		evbuffer_free(buf);
	sup_fq_free(q);
}

int sup_files_set_bytes(json_t *o, const char *key, const char *p, size_t n)
{
	if (sup_utf8_valid((const uint8_t *)p, n))
		return json_object_set_new(o, key, json_stringn(p, n));
	size_t tl, bl;
	SBX_AUTO_FREE char *t = sup_utf8_repair((const uint8_t *)p, n, &tl);
	SBX_AUTO_FREE char *b = sup_base64_encode((const uint8_t *)p, n, &bl);
	if (!t || !b)
		return -1;
	char k2[40];
	snprintf(k2, sizeof(k2), "%s_b64", key);
	if (json_object_set_new(o, key, json_stringn(t, tl)) < 0)
		return -1;
	return json_object_set_new(o, k2, json_stringn(b, bl));
}

void sup_fq_error(sup_fq *q, int status, const char *code, const char *msg, const char *path,
		  size_t len)
{
	size_t ml;
	SBX_AUTO_FREE char *m = sup_utf8_repair((const uint8_t *)msg, strlen(msg), &ml);
	json_t *e = json_object();
	if (e) {
		json_object_set_new(e, "code", json_string(code));
		json_object_set_new(e, "message", m ? json_stringn(m, ml) : json_string(code));
		if (path)
			sup_files_set_bytes(e, "path", path, len);
	}
	sup_fq_reply(q, status, e ? json_pack("{s:o}", "error", e) : NULL);
}

int sup_files_status(int neg_errno, const char **code)
{
	switch (neg_errno) {
	case -ENOENT:
		*code = "not_found";
		return 404;
	case -EEXIST:
		*code = "exists";
		return 409;
	case -EACCES:
	case -EPERM:
		*code = "permission_denied";
		return 403;
	case -EINVAL:
	case -ENAMETOOLONG:
		*code = "bad_request";
		return 400;
	case -E2BIG:
		*code = "too_large";
		return 413;
	case -ENOSPC:
		*code = "no_space";
		return 507;
	default:
		return sup_api_status(neg_errno, code);
	}
}

void sup_fq_fail(sup_fq *q, const sbx_err *err, const char *path)
{
	const char *code;
	int status = sup_files_status(err->code, &code);
	sup_fq_error(q, status, code, err->msg[0] ? err->msg : code, path, path ? strlen(path) : 0);
}

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
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(q->req);
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
			sup_fq_error(q, 400, "bad_request", msg, NULL, 0);
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
		sup_policy_log_denial(SUP_FILES_TENANT, q->id, q->opname, p, len, &err);
		sup_fq_error(q, 403, "forbidden", err.msg, p, len);
	} else {
		sup_fq_error(q, 400, "bad_request", err.msg, p, len);
	}
	return rc;
}

/* The path query parameter, checked: 0, or the reply sent. */
static int query_path(sup_fq *q, sup_policy_access need, sup_policy_match *m)
{
	SBX_AUTO_FREE char *p = NULL;
	size_t len = 0;
	int rc = sup_files_query(q->req, "path", &p, &len);
	if (rc == -ENOENT) {
		sup_fq_error(q, 400, "bad_request", "query parameter \"path\" is required", NULL, 0);
		return rc;
	}
	if (rc < 0) {
		sup_fq_error(q, 400, "bad_request", "query parameter \"path\" given twice or bad", NULL,
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
	int rc = sup_files_query(q->req, key, &v, &len);
	if (rc == -ENOENT)
		return def;
	if (rc == 0 && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0))
		return 1;
	if (rc == 0 && (strcmp(v, "0") == 0 || strcmp(v, "false") == 0))
		return 0;
	char msg[96];
	snprintf(msg, sizeof(msg), "query parameter \"%s\": want 0 or 1 (once)", key);
	sup_fq_error(q, 400, "bad_request", msg, NULL, 0);
	return -1;
}

/* ---- agent arguments ---- */

void sup_fargs_begin(sup_fargs *a, size_t n, const sup_policy_match *m)
{
	msgpack_sbuffer_init(&a->sb);
	msgpack_packer_init(&a->pk, &a->sb, msgpack_sbuffer_write);
	msgpack_pack_map(&a->pk, n + 2);
	sbx_proto_pack_str(&a->pk, "root");
	sbx_proto_pack_str(&a->pk, m->root);
	sbx_proto_pack_str(&a->pk, "path");
	sbx_proto_pack_str(&a->pk, m->rel);
}

void sup_fargs_uint(sup_fargs *a, const char *k, uint64_t v)
{
	sbx_proto_pack_str(&a->pk, k);
	msgpack_pack_uint64(&a->pk, v);
}

void sup_fargs_bool(sup_fargs *a, const char *k, bool v)
{
	sbx_proto_pack_str(&a->pk, k);
	if (v)
		msgpack_pack_true(&a->pk);
	else
		msgpack_pack_false(&a->pk);
}

static void fargs_str(sup_fargs *a, const char *k, const char *v, size_t n)
{
	sbx_proto_pack_str(&a->pk, k);
	sbx_proto_pack_strn(&a->pk, v, n);
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
		sup_files_set_bytes(o, "target", tg, tgl);
	return 0;
}

static json_t *path_obj(const char *path)
{
	json_t *o = json_object();
	if (o)
		sup_files_set_bytes(o, "path", path, strlen(path));
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
		if (!full || sup_files_set_bytes(je, "path", full, strlen(full)) < 0 ||
		    sup_files_set_bytes(je, "name", name, nl) < 0 ||
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
	q->op = NULL;
	if (rc < 0) {
		sup_fq_fail(q, err, q->m.path);
		return;
	}
	sbx_err e;
	sbx_err_clear(&e);
	json_t *body = NULL;
	switch (q->rt) {
	case SUP_FILES_STAT:
		body = path_obj(q->m.path);
		if (body && sup_files_stat_json(result, body, &e) < 0) {
			json_decref(body);
			sup_warn("sandbox %s: %s", q->id, e.msg);
			sup_fq_error(q, 502, "agent_error", e.msg, q->m.path, strlen(q->m.path));
			return;
		}
		break;
	case SUP_FILES_LIST:
	case SUP_FILES_SEARCH:
		body = render_entries(q, result, &e);
		if (!body) {
			sup_warn("sandbox %s: %s", q->id, e.msg);
			sup_fq_error(q, 502, "agent_error", e.msg, q->m.path, strlen(q->m.path));
			return;
		}
		break;
	case SUP_FILES_DELETE:
		sup_fq_reply(q, 204, NULL);
		return;
	case SUP_FILES_MOVE:
		body = json_object();
		if (body) {
			sup_files_set_bytes(body, "from", q->m.path, strlen(q->m.path));
			sup_files_set_bytes(body, "to", q->m2.path, strlen(q->m2.path));
		}
		break;
	default:
		body = path_obj(q->m.path);
		break;
	}
	sup_fq_reply(q, 200, body);
}

static const sup_core_call_cbs simple_cbs = { .on_done = simple_done };

/* Start opname with a (destroyed here) on q's sandbox. */
int sup_fq_call(sup_fq *q, const char *opname, sup_fargs *a, const sup_core_call_cbs *cbs)
{
	sbx_err err;
	sbx_err_clear(&err);
	int rc = sup_core_call(q->f->core, q->id, opname, a->sb.data, a->sb.size, cbs, q, &q->op,
			       &err);
	msgpack_sbuffer_destroy(&a->sb);
	if (rc < 0)
		sup_fq_fail(q, &err, q->m.path);
	return rc;
}

/* ---- JSON bodies ---- */

static void json_decref_p(json_t **j)
{
	json_decref(*j);
}
#define AUTO_JSON __attribute__((cleanup(json_decref_p)))

/* The body as an object with only the allowed keys: NULL with the reply sent. */
static json_t *body_obj(sup_fq *q, const char *const *allowed)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(q->req);
	size_t len = evbuffer_get_length(in);
	if (len > SUP_FILES_MAX_BODY) {
		sup_fq_error(q, 413, "too_large", "request body over 64 KiB", NULL, 0);
		return NULL;
	}
	json_error_t je;
	json_t *j = json_loadb(len ? (const char *)evbuffer_pullup(in, -1) : "", len,
			       JSON_REJECT_DUPLICATES, &je);
	char msg[256];
	if (!j || !json_is_object(j)) {
		snprintf(msg, sizeof(msg), "body must be a JSON object%s%s", j ? "" : ": ",
			 j ? "" : je.text);
		json_decref(j);
		sup_fq_error(q, 400, "bad_request", msg, NULL, 0);
		return NULL;
	}
	const char *key;
	json_t *v;
	json_object_foreach(j, key, v)
	{
		bool ok = false;
		for (size_t i = 0; allowed[i]; i++)
			ok |= strcmp(allowed[i], key) == 0;
		if (!ok) {
			snprintf(msg, sizeof(msg), "unknown field \"%.64s\"", key);
			json_decref(j);
			sup_fq_error(q, 400, "bad_request", msg, NULL, 0);
			return NULL;
		}
	}
	return j;
}

/* A path field, checked: 0, or the reply sent. */
static int body_path(sup_fq *q, json_t *j, const char *key, sup_policy_access need,
		     sup_policy_match *m)
{
	json_t *v = json_object_get(j, key);
	char msg[96];
	if (!json_is_string(v)) {
		snprintf(msg, sizeof(msg), "field \"%s\": want a string (an absolute path)", key);
		sup_fq_error(q, 400, "bad_request", msg, NULL, 0);
		return -EINVAL;
	}
	return check_path(q, json_string_value(v), json_string_length(v), need, m);
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
	sup_fq_error(q, 400, "bad_request", msg, NULL, 0);
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
	sup_fq_error(q, 400, "bad_request", msg, NULL, 0);
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
	sup_policy_log_denial(SUP_FILES_TENANT, q->id, q->opname, m->path, strlen(m->path), &e);
	sup_fq_error(q, 403, "forbidden", msg, m->path, strlen(m->path));
}

static void r_stat(sup_fq *q)
{
	if (!query_keys_ok(q, q_path) || query_path(q, SUP_POLICY_READ, &q->m) < 0)
		return;
	sup_fargs a;
	sup_fargs_begin(&a, 0, &q->m);
	sup_fq_call(q, "fs.stat", &a, &simple_cbs);
}

static void r_list(sup_fq *q)
{
	if (!query_keys_ok(q, q_list) || query_path(q, SUP_POLICY_READ, &q->m) < 0)
		return;
	SBX_AUTO_FREE char *d = NULL;
	size_t dl = 0;
	uint64_t depth = 1;
	int rc = sup_files_query(q->req, "depth", &d, &dl);
	if (rc == 0) {
		char *end;
		unsigned long v = strtoul(d, &end, 10);
		if (!*d || *end || v < 1 || v > 32) {
			sup_fq_error(q, 400, "bad_request", "query parameter \"depth\": want 1..32", NULL, 0);
			return;
		}
		depth = v;
	} else if (rc != -ENOENT) {
		sup_fq_error(q, 400, "bad_request", "query parameter \"depth\" given twice", NULL, 0);
		return;
	}
	sup_fargs a;
	sup_fargs_begin(&a, 1, &q->m);
	sup_fargs_uint(&a, "depth", depth);
	sup_fq_call(q, "fs.list", &a, &simple_cbs);
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
	sup_fargs a;
	sup_fargs_begin(&a, 1, &q->m);
	sup_fargs_bool(&a, "recursive", rec);
	sup_fq_call(q, "fs.remove", &a, &simple_cbs);
}

static void r_mkdir(sup_fq *q)
{
	static const char *const keys[] = { "path", "parents", "mode", NULL };
	AUTO_JSON json_t *j = body_obj(q, keys);
	if (!j || body_path(q, j, "path", SUP_POLICY_WRITE, &q->m) < 0)
		return;
	int parents = body_bool(q, j, "parents", false);
	if (parents < 0)
		return;
	int64_t mode = body_int(q, j, "mode", 0, 01777, 0755);
	if (mode < 0)
		return;
	sup_fargs a;
	sup_fargs_begin(&a, 2, &q->m);
	sup_fargs_bool(&a, "parents", parents);
	sup_fargs_uint(&a, "mode", (uint64_t)mode);
	sup_fq_call(q, "fs.mkdir", &a, &simple_cbs);
}

static void r_chmod(sup_fq *q)
{
	static const char *const keys[] = { "path", "mode", NULL };
	AUTO_JSON json_t *j = body_obj(q, keys);
	if (!j || body_path(q, j, "path", SUP_POLICY_WRITE, &q->m) < 0)
		return;
	if (!json_object_get(j, "mode")) {
		sup_fq_error(q, 400, "bad_request", "field \"mode\" is required", NULL, 0);
		return;
	}
	int64_t mode = body_int(q, j, "mode", 0, 01777, 0);
	if (mode < 0)
		return;
	sup_fargs a;
	sup_fargs_begin(&a, 1, &q->m);
	sup_fargs_uint(&a, "mode", (uint64_t)mode);
	sup_fq_call(q, "fs.chmod", &a, &simple_cbs);
}

static void r_move(sup_fq *q)
{
	static const char *const keys[] = { "from", "to", "overwrite", NULL };
	AUTO_JSON json_t *j = body_obj(q, keys);
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
	sup_fargs a;
	sup_fargs_begin(&a, 3, &q->m);
	fargs_str(&a, "to", q->m2.rel, strlen(q->m2.rel));
	fargs_str(&a, "to_root", q->m2.root, strlen(q->m2.root));
	sup_fargs_bool(&a, "overwrite", ow);
	sup_fq_call(q, "fs.move", &a, &simple_cbs);
}

static void r_search(sup_fq *q)
{
	static const char *const keys[] = { "path", "glob", "max", NULL };
	AUTO_JSON json_t *j = body_obj(q, keys);
	if (!j || body_path(q, j, "path", SUP_POLICY_READ, &q->m) < 0)
		return;
	json_t *g = json_object_get(j, "glob");
	if (!json_is_string(g) || json_string_length(g) == 0 || json_string_length(g) > 4095 ||
	    strlen(json_string_value(g)) != json_string_length(g)) {
		sup_fq_error(q, 400, "bad_request",
			     "field \"glob\": want a non-empty string without NUL (fnmatch pattern)",
			     q->m.path, strlen(q->m.path));
		return;
	}
	int64_t max = body_int(q, j, "max", 1, 100000, 1000);
	if (max < 0)
		return;
	sup_fargs a;
	sup_fargs_begin(&a, 2, &q->m);
	fargs_str(&a, "glob", json_string_value(g), json_string_length(g));
	sup_fargs_uint(&a, "max", (uint64_t)max);
	sup_fq_call(q, "fs.search", &a, &simple_cbs);
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
	q->in = sup_httpin_upload_of(q->req);
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
	q->req = req;
	q->rt = rt;
	clock_gettime(CLOCK_MONOTONIC, &q->start);
	snprintf(q->id, sizeof(q->id), "%s", id);
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
		sup_fq_error(q, 404, "not_found", "no such route", NULL, 0);
		break;
	}
}
