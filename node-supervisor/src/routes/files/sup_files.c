#include "sup_files.h"

#include "sup_api.h"

#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_files_int.h"
#include "sup_log.h"
#include "sup_path.h"
#include "sup_text.h"

/* ---- what every route shares ---- */

void sup_fq_init(sup_fq *q, const sup_http_in *in, void *ctx, const char *opname,
		 const char *aop)
{
	q->f = ctx;
	q->who = in->who;
	q->id = in->id;
	q->opname = opname;
	q->aop = aop;
	q->status = 200;
	sbx_proto_args_init(&q->args);
}

static void fq_release(void *state)
{
	sup_fq *q = state;
	if (q->op)
		sup_op_cancel(q->op);
	sup_stream_free(q->stream);
	if (q->chunk)
		evbuffer_free(q->chunk);
	sbx_proto_args_destroy(&q->args);
	free(q->raw);
}

/* The error's path, and the denial's log line (EPERM is the policy's). */
static const char *fq_subject(void *state, const sbx_err *err, size_t *len)
{
	sup_fq *q = state;
	if (err->code == -EPERM && q->subj)
		sup_policy_log_denial(q->who ? q->who->name : "-", q->id, q->opname, q->subj,
				      q->subj_len, err);
	*len = q->subj_len;
	return q->subj;
}

int sup_fq_check(sup_fq *q, const char *p, size_t len, sup_policy_access need,
		 sup_policy_match *m, sbx_err *err)
{
	free(q->raw);
	q->raw = malloc(len + 1);
	if (!q->raw)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	memcpy(q->raw, p, len);
	q->raw[len] = '\0';
	q->raw_len = len;
	q->subj = q->raw;
	q->subj_len = len;
	int rc = sup_core_check_path(q->f ? q->f->core : NULL, q->who, q->id, p, len, need, m, err);
	if (rc < 0)
		return rc;
	q->subj = m->path;
	q->subj_len = strlen(m->path);
	return 0;
}

static void args_path(sup_fq *q, const sup_policy_match *m)
{
	sbx_proto_args_str(&q->args, "root", m->root, strlen(m->root));
	sbx_proto_args_str(&q->args, "path", m->rel, strlen(m->rel));
}

int sup_fq_query(sup_fq *q, const sup_http_in *in, const char *const *keys,
		 sup_policy_access need, sup_query *qs, sbx_err *err)
{
	size_t len;
	int rc = sup_query_parse(in->query, keys, qs, err);
	if (rc < 0)
		return rc;
	const char *p = sup_query_get(qs, "path", &len);
	if (!p)
		return sbx_err_set(err, -EINVAL, "query parameter \"path\" is required");
	rc = sup_fq_check(q, p, len, need, &q->m, err);
	if (rc == 0)
		args_path(q, &q->m);
	return rc;
}

int sup_fq_call(sup_fq *q, const sup_core_call_cbs *cbs, sbx_err *err)
{
	return sup_core_call(q->f->core, q->id, q->aop, &q->args, cbs, q, &q->op, err);
}

/* ---- rendering the agent's answers ---- */

static json_t *path_obj(const char *key, const char *path)
{
	json_t *o = json_object();
	if (o)
		sup_http_set_bytes(o, key, path, strlen(path));
	return o;
}

static json_t *render_path(sup_fq *q, const msgpack_object *res, sbx_err *err)
{
	return path_obj("path", q->m.path);
}

static json_t *render_move(sup_fq *q, const msgpack_object *res, sbx_err *err)
{
	json_t *o = path_obj("from", q->m.path);
	if (o)
		sup_http_set_bytes(o, "to", q->m2.path, strlen(q->m2.path));
	return o;
}

static json_t *render_stat(sup_fq *q, const msgpack_object *res, sbx_err *err)
{
	json_t *o = path_obj("path", q->m.path);
	if (o && sup_api_stat_json(res, o, err) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* fs.list / fs.search -> {"path","entries":[...],"count","truncated"}. */
static json_t *render_entries(sup_fq *q, const msgpack_object *res, sbx_err *err)
{
	return sup_api_render_listing(q->m.path, res, err);
}

/* ---- parsers: request -> checked paths and the agent's arguments ---- */

static const char *const k_path[] = { "path", NULL };

static int parse_stat(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_fq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	sup_fq_init(q, in, ctx, "stat", SBX_OP_FS_STAT);
	q->render = render_stat;
	return sup_fq_query(q, in, k_path, SUP_POLICY_READ, &qs, err);
}

static int parse_list(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "path", "depth", NULL };
	sup_fq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	uint64_t depth;
	sup_fq_init(q, in, ctx, "list", SBX_OP_FS_LIST);
	q->render = render_entries;
	int rc = sup_fq_query(q, in, keys, SUP_POLICY_READ, &qs, err);
	if (rc == 0)
		rc = sup_query_uint(&qs, "depth", 1, 32, 1, &depth, err);
	if (rc == 0)
		sbx_proto_args_uint(&q->args, "depth", depth);
	return rc;
}

static int refuse_root(const sup_policy_match *m, const char *what, sbx_err *err)
{
	return m->is_root ? sbx_err_set(err, -EPERM, "%s a policy root is not allowed", what) : 0;
}

static int parse_delete(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "path", "recursive", NULL };
	sup_fq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	sup_fq_init(q, in, ctx, "remove", SBX_OP_FS_REMOVE);
	q->status = 204;
	int rc = sup_fq_query(q, in, keys, SUP_POLICY_WRITE, &qs, err);
	int rec = rc < 0 ? rc : sup_query_flag(&qs, "recursive", false, err);
	if (rec < 0)
		return rec;
	sbx_proto_args_bool(&q->args, "recursive", rec);
	return refuse_root(&q->m, "deleting", err);
}

/* A path field checked into m. */
static int body_path(sup_fq *q, json_t *j, const char *key, sup_policy_access need,
		     sup_policy_match *m, sbx_err *err)
{
	json_t *v = json_object_get(j, key);
	if (!json_is_string(v))
		return sbx_err_set(err, -EINVAL, "field \"%s\": want a string (an absolute path)", key);
	return sup_fq_check(q, json_string_value(v), json_string_length(v), need, m, err);
}

/* An optional bool field into the arguments (def when absent). */
static int body_bool(sup_fq *q, json_t *j, const char *key, bool def, sbx_err *err)
{
	json_t *v = json_object_get(j, key);
	if (v && !json_is_null(v) && !json_is_boolean(v))
		return sbx_err_set(err, -EINVAL, "field \"%s\": want true or false", key);
	sbx_proto_args_bool(&q->args, key, v && !json_is_null(v) ? json_is_true(v) : def);
	return 0;
}

/* An optional integer field in lo..hi into the arguments (def when absent). */
static int body_int(sup_fq *q, json_t *j, const char *key, int64_t lo, int64_t hi, int64_t def,
		    sbx_err *err)
{
	json_t *v = json_object_get(j, key);
	if (v && !json_is_null(v) &&
	    (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi))
		return sbx_err_set(err, -EINVAL, "field \"%s\": want an integer %lld..%lld%s", key,
				   (long long)lo, (long long)hi,
				   strcmp(key, "mode") == 0 ? " (e.g. 493 for 0755)" : "");
	sbx_proto_args_uint(&q->args, key, (uint64_t)(v && !json_is_null(v) ? json_integer_value(v) : def));
	return 0;
}

/* The body (only keys) with its "path" checked for need into q->m. */
static int body_at(sup_fq *q, const sup_http_in *in, const char *const *keys,
		   sup_policy_access need, json_t **j, sbx_err *err)
{
	int rc = sup_http_in_json(in, keys, j, err);
	if (rc == 0)
		rc = body_path(q, *j, "path", need, &q->m, err);
	if (rc == 0)
		args_path(q, &q->m);
	return rc;
}

static int parse_mkdir(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "path", "parents", "mode", NULL };
	sup_fq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	sup_fq_init(q, in, ctx, "mkdir", SBX_OP_FS_MKDIR);
	q->render = render_path;
	int rc = body_at(q, in, keys, SUP_POLICY_WRITE, &j, err);
	if (rc == 0)
		rc = body_bool(q, j, "parents", false, err);
	return rc < 0 ? rc : body_int(q, j, "mode", 0, 01777, 0755, err);
}

static int parse_chmod(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "path", "mode", NULL };
	sup_fq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	sup_fq_init(q, in, ctx, "chmod", SBX_OP_FS_CHMOD);
	q->render = render_path;
	int rc = body_at(q, in, keys, SUP_POLICY_WRITE, &j, err);
	if (rc == 0 && !json_object_get(j, "mode"))
		rc = sbx_err_set(err, -EINVAL, "field \"mode\" is required");
	return rc < 0 ? rc : body_int(q, j, "mode", 0, 01777, 0, err);
}

static int parse_move(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "from", "to", "overwrite", NULL };
	sup_fq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	sup_fq_init(q, in, ctx, "move", SBX_OP_FS_MOVE);
	q->render = render_move;
	int rc = sup_http_in_json(in, keys, &j, err);
	if (rc == 0)
		rc = body_path(q, j, "from", SUP_POLICY_WRITE, &q->m, err);
	if (rc == 0)
		rc = body_path(q, j, "to", SUP_POLICY_WRITE, &q->m2, err);
	if (rc < 0)
		return rc;
	args_path(q, &q->m);
	sbx_proto_args_str(&q->args, "to", q->m2.rel, strlen(q->m2.rel));
	sbx_proto_args_str(&q->args, "to_root", q->m2.root, strlen(q->m2.root));
	q->subj = q->m.path;
	q->subj_len = strlen(q->m.path);
	rc = body_bool(q, j, "overwrite", false, err);
	const sup_policy_match *root = q->m.is_root ? &q->m : q->m2.is_root ? &q->m2 : NULL;
	if (rc < 0 || !root)
		return rc;
	q->subj = root->path;
	q->subj_len = strlen(root->path);
	return refuse_root(root, "moving from or onto", err);
}

static int parse_search(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "path", "glob", "max", NULL };
	sup_fq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	sup_fq_init(q, in, ctx, "search", SBX_OP_FS_SEARCH);
	q->render = render_entries;
	int rc = body_at(q, in, keys, SUP_POLICY_READ, &j, err);
	if (rc < 0)
		return rc;
	json_t *g = json_object_get(j, "glob");
	if (!json_is_string(g) || json_string_length(g) == 0 || json_string_length(g) > 4095 ||
	    strlen(json_string_value(g)) != json_string_length(g))
		return sbx_err_set(err, -EINVAL,
				   "field \"glob\": want a non-empty string without NUL (fnmatch pattern)");
	sbx_proto_args_str(&q->args, "glob", json_string_value(g), json_string_length(g));
	return body_int(q, j, "max", 1, 100000, 1000, err);
}

/* ---- acts ---- */

static void simple_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_fq *q = ud;
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	json_t *body = rc == 0 && q->render ? q->render(q, res, &e) : NULL;
	if (rc == 0 && q->render && !body && !e.code)
		sbx_err_set(&e, -ENOMEM, "out of memory");
	sup_core_blame(q->f->core, q->id, &e);
	if (rc < 0 || e.code)
		sup_http_fail(q->r, rc < 0 ? err : &e);
	else
		sup_http_json(q->r, q->status, body);
}

static const sup_core_call_cbs simple_cbs = { .on_done = simple_done };

static int act_simple(sup_http_req *r, void *state, sbx_err *err)
{
	sup_fq *q = state;
	q->r = r;
	return sup_fq_call(q, &simple_cbs, err);
}

#define FILES "/v1/sandboxes/{id}/files"
#define FS "/v1/sandboxes/{id}/fs/"

static const sup_http_route routes[] = {
	{ "GET", FILES, "GET files", SUP_BODY_NONE, 0, sup_files_parse_get, sup_files_act_get },
	{ "PUT", FILES, "PUT files", SUP_BODY_STREAMED, 0, sup_files_parse_put, sup_files_act_put },
	{ "DELETE", FILES, "DELETE files", SUP_BODY_NONE, 0, parse_delete, act_simple },
	{ "GET", FS "stat", "GET fs/stat", SUP_BODY_NONE, 0, parse_stat, act_simple },
	{ "GET", FS "list", "GET fs/list", SUP_BODY_NONE, 0, parse_list, act_simple },
	{ "POST", FS "mkdir", "POST fs/mkdir", SUP_BODY_BUFFERED, SUP_FILES_MAX_BODY, parse_mkdir, act_simple },
	{ "POST", FS "move", "POST fs/move", SUP_BODY_BUFFERED, SUP_FILES_MAX_BODY, parse_move, act_simple },
	{ "POST", FS "chmod", "POST fs/chmod", SUP_BODY_BUFFERED, SUP_FILES_MAX_BODY, parse_chmod, act_simple },
	{ "POST", FS "search", "POST fs/search", SUP_BODY_BUFFERED, SUP_FILES_MAX_BODY, parse_search, act_simple },
	{ "GET", FS "watch", "GET fs/watch", SUP_BODY_NONE, 0, sup_files_parse_watch, sup_files_act_watch },
};

const sup_http_family sup_files_family = {
	.name = "files",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = sizeof(sup_fq),
	.release = fq_release,
	.subject = fq_subject,
};
