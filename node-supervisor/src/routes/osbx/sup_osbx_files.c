/* OpenSandbox's execd files and directories on the agent's file and fs
 * operations, every path through the tenant's policy first (sbx's rules
 * kept: a path outside it is 403 forbidden). A request naming several
 * paths runs its operations one after another and stops at the first
 * error. Downloads (file.read, Range honoured) and uploads (multipart: a
 * "metadata" part, then the "file" part streamed into file.write) move
 * bytes only as fast as the other side takes them: bounded memory
 * whatever the size; they are sup_osbx_xfer.c. */
#include "sup_osbx_int.h"
#include "sup_osbx_files_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sbx/proto.h"
#include "sup_multipart.h"
#include "sup_policy.h"
#include "sup_query.h"
#include "sup_text.h"

static void job_free(job *j)
{
	free(j->path);
	free(j->root);
	free(j->rel);
	free(j->root2);
	free(j->rel2);
	memset(j, 0, sizeof(*j));
}

void sup_osbx_files_release(sup_oq *q)
{
	struct osbx_files *f = q->fx;
	if (!f)
		return;
	for (size_t i = 0; i < f->njobs; i++)
		job_free(&f->jobs[i]);
	job_free(&f->up);
	free(f->pattern);
	json_decref(f->acc);
	sup_multipart_free(f->parser);
	if (f->meta)
		evbuffer_free(f->meta);
	if (f->out)
		evbuffer_free(f->out);
	free(f);
	q->fx = NULL;
}

int sup_osbx_mode(json_int_t v, uint64_t *out)
{
	uint64_t m = 0, mul = 1;
	if (v < 0 || v > 7777)
		return -EINVAL;
	for (json_int_t d = v; d; d /= 10, mul *= 8) {
		if (d % 10 > 7)
			return -EINVAL;
		m += (uint64_t)(d % 10) * mul;
	}
	*out = m;
	return 0;
}

int sup_osbx_range(const char *h, uint64_t *off, uint64_t *len)
{
	char *end;
	if (strncmp(h, "bytes=", 6) != 0 || h[6] < '0' || h[6] > '9')
		return -EINVAL;
	uint64_t a = strtoull(h + 6, &end, 10);
	if (*end != '-')
		return -EINVAL;
	if (!end[1]) {
		*off = a;
		*len = UINT64_MAX;
		return 0;
	}
	if (end[1] < '0' || end[1] > '9')
		return -EINVAL;
	uint64_t b = strtoull(end + 1, &end, 10);
	if (*end || b < a || b == UINT64_MAX)
		return -EINVAL;
	*off = a;
	*len = b - a + 1;
	return 0;
}

struct osbx_files *sup_osbx_fx_of(sup_oq *q, const sup_http_in *in, void *ctx, sbx_err *err)
{
	q->x = ctx;
	q->id = in->id;
	q->fx = calloc(1, sizeof(*q->fx));
	if (!q->fx)
		sbx_err_set(err, -ENOMEM, "out of memory");
	return q->fx;
}

/* p[0..n) through who's policy into j (the shown path, root and rel). */
int sup_osbx_check_path(const sup_http_in *in, const char *p, size_t n, sup_policy_access need, job *j,
		 bool is_target, sbx_err *err)
{
	sup_policy_match *m = malloc(sizeof(*m));
	if (!m)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	if (!in->who) {
		free(m);
		return sbx_err_set(err, -EPERM, "no tenant: no file access");
	}
	int rc = sup_policy_check(sup_tenant_policy(in->who), in->who->name, p, n, need, m, err);
	if (rc == 0 && need == SUP_POLICY_WRITE && m->is_root && !is_target && n)
		rc = sbx_err_set(err, -EPERM, "%s is a policy root: not removed, moved or replaced", m->path);
	if (rc == 0) {
		if (is_target) {
			j->root2 = strdup(m->root);
			j->rel2 = strdup(m->rel);
		} else {
			j->path = strdup(m->path);
			j->root = strdup(m->root);
			j->rel = strdup(m->rel);
		}
		if (is_target ? !j->root2 || !j->rel2 : !j->path || !j->root || !j->rel)
			rc = sbx_err_set(err, -ENOMEM, "out of memory");
	}
	free(m);
	return rc;
}

/* Every "path" of the query (repeated), each checked. */
int sup_osbx_query_paths(const sup_http_in *in, struct osbx_files *f, sup_policy_access need,
		       sbx_err *err)
{
	const char *p = in->query ? in->query : "";
	int rc = 0;
	while (*p && rc == 0) {
		size_t n = strcspn(p, "&"), dl;
		const char *eq = memchr(p, '=', n);
		size_t kl = eq ? (size_t)(eq - p) : n;
		char *val = eq ? sup_query_decode(eq + 1, n - kl - 1, &dl) : NULL;
		char *end;
		if (!eq || !val) {
			rc = sbx_err_set(err, eq ? -ENOMEM : -EINVAL, "a query parameter without a value");
		} else if (kl == 4 && memcmp(p, "path", 4) == 0) {
			if (f->njobs == MAX_PATHS)
				rc = sbx_err_set(err, -EINVAL, "at most %d paths", MAX_PATHS);
			else
				rc = sup_osbx_check_path(in, val, dl, need, &f->jobs[f->njobs++], false, err);
		} else if (kl == 5 && memcmp(p, "depth", 5) == 0 && f->kind == F_LIST) {
			unsigned long d = strtoul(val, &end, 10);
			if (!*val || *end || d < 1 || d > 32)
				rc = sbx_err_set(err, -EINVAL, "query parameter \"depth\": want 1..32");
			f->depth = (unsigned)d;
		} else if (kl == 7 && memcmp(p, "pattern", 7) == 0 && f->kind == F_SEARCH) {
			free(f->pattern);
			f->pattern = val;
			val = NULL;
		} else {
			rc = sbx_err_set(err, -EINVAL, "unknown query parameter \"%.*s\"", (int)(kl > 32 ? 32 : kl), p);
		}
		free(val);
		p += n + (p[n] == '&');
	}
	if (rc == 0 && f->njobs == 0)
		rc = sbx_err_set(err, -EINVAL, "query parameter \"path\" is required");
	return rc;
}

/* {"<path>": {"mode", "owner", "group"}} (directories, permissions). sbx
 * changes no owner: a file belongs to the sandbox user. */
static int body_perms(const sup_http_in *in, struct osbx_files *f, sbx_err *err)
{
	SBX_AUTO_JSON json_t *j = NULL;
	const char *k;
	json_t *v;
	int rc = sup_http_in_json(in, NULL, &j, err);
	if (rc < 0)
		return rc;
	if (json_object_size(j) == 0 || json_object_size(j) > MAX_PATHS)
		return sbx_err_set(err, -EINVAL, "want 1..%d paths", MAX_PATHS);
	json_object_foreach(j, k, v) {
		job *jb = &f->jobs[f->njobs++];
		json_t *mode = json_object_get(v, "mode");
		const char *own[] = { json_string_value(json_object_get(v, "owner")),
				      json_string_value(json_object_get(v, "group")) };
		if (!json_is_object(v))
			return sbx_err_set(err, -EINVAL, "field \"%.64s\": want {\"mode\"}", k);
		jb->mode = f->kind == F_MKDIR ? 0755 : 0;
		if (mode && (!json_is_integer(mode) || sup_osbx_mode(json_integer_value(mode), &jb->mode) < 0))
			return sbx_err_set(err, -EINVAL, "field \"%.64s.mode\": want octal digits (755)", k);
		if (f->kind == F_CHMOD && !mode)
			return sbx_err_set(err, -EINVAL, "field \"%.64s.mode\": required", k);
		for (int i = 0; i < 2; i++)
			if (own[i] && *own[i] && strcmp(own[i], "sandbox") != 0 && strcmp(own[i], "1000") != 0)
				return sbx_err_set(err, -EPERM,
						   "%.64s: owner and group stay the sandbox user's (sbx changes no owner)", k);
		if ((rc = sup_osbx_check_path(in, k, strlen(k), SUP_POLICY_WRITE, jb, false, err)) < 0)
			return rc;
	}
	return 0;
}

/* [{"src", "dest"}] */
static int body_moves(const sup_http_in *in, struct osbx_files *f, sbx_err *err)
{
	json_error_t je;
	json_t *a = json_loadb(in->body, in->body_len, JSON_REJECT_DUPLICATES, &je);
	size_t i;
	json_t *v;
	int rc = 0;
	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > MAX_PATHS)
		rc = sbx_err_set(err, -EINVAL, "want an array of 1..%d {\"src\",\"dest\"}", MAX_PATHS);
	json_array_foreach(a, i, v) {
		if (rc < 0)
			break;
		json_t *s = json_object_get(v, "src"), *d = json_object_get(v, "dest");
		job *jb = &f->jobs[f->njobs++];
		if (!json_is_string(s) || !json_is_string(d))
			rc = sbx_err_set(err, -EINVAL, "[%zu]: want {\"src\",\"dest\"} strings", i);
		else if ((rc = sup_osbx_check_path(in, json_string_value(s), json_string_length(s), SUP_POLICY_WRITE, jb, false, err)) == 0)
			rc = sup_osbx_check_path(in, json_string_value(d), json_string_length(d), SUP_POLICY_WRITE, jb, true, err);
	}
	json_decref(a);
	return rc;
}

int sup_osbx_parse_fs(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_oq *q = state;
	struct osbx_files *f = sup_osbx_fx_of(q, in, ctx, err);
	if (!f)
		return err->code;
	/* one parser for the rows: told apart by method and path */
	const char *path = in->path;
	const char *tail = strstr(path, "/opensandbox/execd/");
	tail = tail ? strchr(tail + 19, '/') : NULL;
	tail = tail ? tail : "";
	bool get = strcmp(in->method, "GET") == 0 || strcmp(in->method, "HEAD") == 0;
	bool del = strcmp(in->method, "DELETE") == 0;
	if (strcmp(tail, "/files/info") == 0 && get)
		f->kind = F_INFO;
	else if (strcmp(tail, "/files") == 0 && del)
		f->kind = F_RMFILE;
	else if (strcmp(tail, "/directories") == 0 && del)
		f->kind = F_RMDIR;
	else if (strcmp(tail, "/directories") == 0)
		f->kind = F_MKDIR;
	else if (strcmp(tail, "/files/permissions") == 0)
		f->kind = F_CHMOD;
	else if (strcmp(tail, "/files/mv") == 0)
		f->kind = F_MOVE;
	else if (strcmp(tail, "/directories/list") == 0)
		f->kind = F_LIST;
	else if (strcmp(tail, "/files/search") == 0)
		f->kind = F_SEARCH;
	else
		return sbx_err_set(err, -ENOENT, "no route %.64s", tail);
	f->depth = 1;
	switch (f->kind) {
	case F_INFO:
	case F_LIST:
	case F_SEARCH: {
		int rc = sup_osbx_query_paths(in, f, SUP_POLICY_READ, err);
		if (rc == 0 && f->kind != F_INFO && f->njobs != 1)
			rc = sbx_err_set(err, -EINVAL, "one \"path\" (a folder)");
		if (rc == 0 && f->kind == F_SEARCH && (!f->pattern || !*f->pattern))
			f->pattern = (free(f->pattern), strdup("*"));
		return rc == 0 && f->kind == F_SEARCH && !f->pattern ? sbx_err_set(err, -ENOMEM, "out of memory") : rc;
	}
	case F_RMFILE:
	case F_RMDIR:
		return sup_osbx_query_paths(in, f, SUP_POLICY_WRITE, err);
	case F_MOVE:
		return body_moves(in, f, err);
	default:
		return body_perms(in, f, err);
	}
}

static void fs_step(sup_oq *q);

static void fs_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	struct osbx_files *f = q->fx;
	job *jb = &f->jobs[f->next - 1];
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	json_t *o = NULL;
	if (f->kind == F_INFO)
		o = sup_osbx_info_json(jb->path, res, &e);
	else if (f->kind == F_LIST || f->kind == F_SEARCH)
		o = sup_osbx_entries_json(jb->path, res, &e);
	if (e.code) {
		sup_core_blame(q->x->core, q->id, &e);
		sup_http_fail(q->r, &e);
		return;
	}
	if (f->kind == F_INFO)
		json_object_set_new(f->acc, jb->path, o);
	else if (o) {
		json_decref(f->acc);
		f->acc = o;
	}
	fs_step(q);
}

static const sup_core_call_cbs fs_cbs = { .on_done = fs_done };

static void fs_step(sup_oq *q)
{
	struct osbx_files *f = q->fx;
	sbx_err e;
	sbx_err_clear(&e);
	if (f->next == f->njobs) {
		sup_http_json(q->r, 200, f->kind == F_INFO || f->kind == F_LIST || f->kind == F_SEARCH
						 ? json_incref(f->acc) : NULL);
		return;
	}
	job *jb = &f->jobs[f->next++];
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_args_str(&a, "root", jb->root, strlen(jb->root));
	sbx_proto_args_str(&a, "path", jb->rel, strlen(jb->rel));
	const char *op = NULL;
	switch (f->kind) {
	case F_INFO:
		op = SBX_OP_FS_STAT;
		sbx_proto_args_bool(&a, "follow", true);
		break;
	case F_RMFILE:
	case F_RMDIR:
		op = SBX_OP_FS_REMOVE;
		sbx_proto_args_bool(&a, "recursive", f->kind == F_RMDIR);
		break;
	case F_MKDIR:
		op = SBX_OP_FS_MKDIR;
		sbx_proto_args_bool(&a, "parents", true);
		sbx_proto_args_uint(&a, "mode", jb->mode);
		break;
	case F_CHMOD:
		op = SBX_OP_FS_CHMOD;
		sbx_proto_args_uint(&a, "mode", jb->mode);
		break;
	case F_MOVE:
		op = SBX_OP_FS_MOVE;
		sbx_proto_args_str(&a, "to", jb->rel2, strlen(jb->rel2));
		sbx_proto_args_str(&a, "to_root", jb->root2, strlen(jb->root2));
		sbx_proto_args_bool(&a, "overwrite", true);
		break;
	case F_LIST:
		op = SBX_OP_FS_LIST;
		sbx_proto_args_uint(&a, "depth", f->depth);
		break;
	default:
		op = SBX_OP_FS_SEARCH;
		sbx_proto_args_str(&a, "glob", f->pattern, strlen(f->pattern));
		break;
	}
	if (sup_core_call(q->x->core, q->id, op, &a, &fs_cbs, q, &q->op, &e) < 0)
		sup_http_fail(q->r, &e);
}

int sup_osbx_act_fs(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	q->r = r;
	q->fx->acc = json_object();
	if (!q->fx->acc)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	fs_step(q);
	return 0;
}
