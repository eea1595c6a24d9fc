/* envd's filesystem.Filesystem unary calls on the agent's fs.* operations:
 * Stat (fs.stat), ListDir (fs.list with depth), MakeDir (fs.mkdir: an
 * existing entry is their already_exists), Move (fs.move, replacing as
 * rename(2) does) and Remove (fs.remove, recursive). An answer's entry is
 * their EntryInfo (sup_e2b_entry): the path's lstat, and for a symlink
 * its target's type, which takes one more fs.stat that follows it. */
#include "sup_e2b_fs_int.h"

#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "sup_e2b_entry.h"
#include "sup_multipart.h"

enum { FS_STAT = 1, FS_LIST, FS_MKDIR, FS_MKDIR_PARENTS, FS_MOVE, FS_REMOVE };

#define LIST_DEPTH_MAX 32

struct e2b_fs *sup_e2b_fs_of(sup_eq *q, sbx_err *err)
{
	if (!q->fs && !(q->fs = calloc(1, sizeof(*q->fs))))
		sbx_err_set(err, -ENOMEM, "out of memory");
	return q->fs;
}

void sup_e2b_fs_release(sup_eq *q)
{
	struct e2b_fs *f = q->fs;
	if (!f)
		return;
	json_decref(f->entries);
	json_decref(f->written);
	free(f->links);
	for (size_t i = 0; f->link_rel && i < f->nlinks; i++)
		free(f->link_rel[i]);
	free(f->link_rel);
	free(f->qpath);
	sup_multipart_free(f->parser);
	if (f->out)
		evbuffer_free(f->out);
	free(f);
	q->fs = NULL;
}

const char *sup_e2b_home(const char *user, char *buf, size_t size)
{
	if (!user || strcmp(user, "sandbox") == 0 || strcmp(user, "user") == 0)
		return "/home/sandbox";
	if (strcmp(user, "root") == 0)
		return "/root";
	snprintf(buf, size, "/home/%s", user);
	return buf;
}

int sup_e2b_fs_path(sup_eq *q, const char *p, size_t n, sup_policy_access need,
		    sup_policy_match *m, sbx_err *err)
{
	char home[SUP_API_MAX_USER + 8];
	const char *h = sup_e2b_home(q->user, home, sizeof(home));
	char *full = NULL;
	if (n == 0)
		return sbx_err_set(err, -EINVAL, "an empty path");
	if (memchr(p, '\0', n))
		return sbx_err_set(err, -EINVAL, "a path with a NUL byte");
	if (n >= SUP_API_MAX_PATH)
		return sbx_err_set(err, -EINVAL, "a path of %zu bytes (at most %d)", n, SUP_API_MAX_PATH - 1);
	if (p[0] != '/') {
		/* "~", "~/x" and "x" are below the home; "~user" is not served */
		if (p[0] == '~' && n > 1 && p[1] != '/')
			return sbx_err_set(err, -EINVAL, "path %.*s: ~user is not served (~ is the home)",
					   (int)(n > 64 ? 64 : n), p);
		if (p[0] == '~') {
			p++;
			n--;
		}
		if (asprintf(&full, "%s/%.*s", h, (int)n, p) < 0)
			return sbx_err_set(err, -ENOMEM, "out of memory");
		p = full;
		n = strlen(full);
	}
	const sup_tenant *who = q->fs ? q->fs->who : NULL;
	int rc = sup_core_check_path(q->x->core, who, q->id, p, n, need, m, err);
	if (rc == -EPERM)
		sup_policy_log_denial(who ? who->name : "-", q->id, "e2b files", p, n, err);
	free(full);
	return rc;
}

/* ---- parsers ---- */

/* Their path field key of the message checked for need into m. */
static int msg_path(sup_eq *q, const char *key, sup_policy_access need, sup_policy_match *m,
		    sbx_err *err)
{
	json_t *v = sup_e2b_field(q->msg, key, NULL);
	if (!json_is_string(v))
		return sbx_err_set(err, -EINVAL, "field \"%s\": want a path", key);
	return sup_e2b_fs_path(q, json_string_value(v), json_string_length(v), need, m, err);
}

static int refuse_root(const sup_policy_match *m, const char *what, sbx_err *err)
{
	return m->is_root ? sbx_err_set(err, -EPERM, "%s %s, a policy root, is not allowed", what, m->path)
			  : 0;
}

/* Every call's message: the path (and Move's destination, ListDir's
 * depth) checked for what the call needs. */
static int parse_fs(const sup_http_in *in, void *ctx, void *state, int kind, sbx_err *err)
{
	sup_eq *q = state;
	int rc = sup_e2b_parse_rpc(in, ctx, state, err);
	struct e2b_fs *f = rc < 0 ? NULL : sup_e2b_fs_of(q, err);
	if (!f)
		return rc < 0 ? rc : err->code;
	f->who = in->who;
	f->kind = kind;
	switch (f->kind) {
	case FS_STAT:
		return msg_path(q, "path", SUP_POLICY_READ, &f->m, err);
	case FS_LIST: {
		json_t *d = sup_e2b_field(q->msg, "depth", NULL);
		json_int_t depth = json_is_integer(d) ? json_integer_value(d) : d ? -1 : 1;
		if (depth == 0)
			depth = 1;
		if (depth < 1 || depth > LIST_DEPTH_MAX)
			return sbx_err_set(err, -EINVAL, "field \"depth\": want 1..%d", LIST_DEPTH_MAX);
		f->depth = (unsigned)depth;
		return msg_path(q, "path", SUP_POLICY_READ, &f->m, err);
	}
	case FS_MKDIR:
		return msg_path(q, "path", SUP_POLICY_WRITE, &f->m, err);
	case FS_MOVE:
		rc = msg_path(q, "source", SUP_POLICY_WRITE, &f->m, err);
		if (rc == 0)
			rc = msg_path(q, "destination", SUP_POLICY_WRITE, &f->m2, err);
		if (rc == 0)
			rc = refuse_root(&f->m, "moving", err);
		return rc < 0 ? rc : refuse_root(&f->m2, "moving onto", err);
	case FS_REMOVE:
		rc = msg_path(q, "path", SUP_POLICY_WRITE, &f->m, err);
		return rc < 0 ? rc : refuse_root(&f->m, "removing", err);
	default:
		return sbx_err_set(err, -ENOENT, "no such method of filesystem.Filesystem");
	}
}

int sup_e2b_parse_stat(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	return parse_fs(in, ctx, state, FS_STAT, err);
}

int sup_e2b_parse_listdir(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	return parse_fs(in, ctx, state, FS_LIST, err);
}

int sup_e2b_parse_mkdir(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	return parse_fs(in, ctx, state, FS_MKDIR, err);
}

int sup_e2b_parse_move(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	return parse_fs(in, ctx, state, FS_MOVE, err);
}

int sup_e2b_parse_remove(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	return parse_fs(in, ctx, state, FS_REMOVE, err);
}

/* ---- the calls ---- */

enum { STEP_MAIN, STEP_LSTAT, STEP_FOLLOW, STEP_LINKS };

static void fs_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud);
static const sup_core_call_cbs fs_cbs = { .on_done = fs_done };

/* op on root/rel (and its other arguments by kind). */
static int call(sup_eq *q, const char *op, const char *root, const char *rel, bool follow,
		sbx_err *err)
{
	struct e2b_fs *f = q->fs;
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_args_str(&a, "root", root, strlen(root));
	sbx_proto_args_str(&a, "path", rel, strlen(rel));
	if (strcmp(op, SBX_OP_FS_STAT) == 0)
		sbx_proto_args_bool(&a, "follow", follow);
	if (strcmp(op, SBX_OP_FS_LIST) == 0)
		sbx_proto_args_uint(&a, "depth", f->depth);
	if (strcmp(op, SBX_OP_FS_MKDIR) == 0)
		sbx_proto_args_bool(&a, "parents", f->kind == FS_MKDIR_PARENTS);
	if (strcmp(op, SBX_OP_FS_MOVE) == 0) {
		sbx_proto_args_str(&a, "to_root", f->m2.root, strlen(f->m2.root));
		sbx_proto_args_str(&a, "to", f->m2.rel, strlen(f->m2.rel));
		sbx_proto_args_bool(&a, "overwrite", true);
	}
	if (strcmp(op, SBX_OP_FS_REMOVE) == 0)
		sbx_proto_args_bool(&a, "recursive", true);
	return sup_core_call(q->x->core, q->id, op, &a, &fs_cbs, q, &q->op, err);
}

/* The path an answer's entry is of: Move's destination, else the path. */
static const sup_policy_match *subject(const struct e2b_fs *f)
{
	return f->kind == FS_MOVE ? &f->m2 : &f->m;
}

/* {"entry": EntryInfo} of the path stat'ed (f->st; target: where its
 * symlink leads when that could be stat'ed). */
static void answer_entry(sup_eq *q, const sup_api_stat *target)
{
	struct e2b_fs *f = q->fs;
	sbx_err e;
	sbx_err_clear(&e);
	json_t *o = sup_e2b_entry_json(subject(f)->path, &f->st, target, &e);
	if (!o) {
		sup_http_fail(q->r, &e);
		return;
	}
	sup_e2b_rpc_reply(q->r, json_pack("{s:o}", "entry", o));
}

/* The next symlink of a listing whose target is looked at, or the answer. */
static void list_next(sup_eq *q)
{
	struct e2b_fs *f = q->fs;
	sbx_err e;
	sbx_err_clear(&e);
	f->step = STEP_LINKS;
	while (f->next < f->nlinks) {
		if (call(q, SBX_OP_FS_STAT, f->m.root, f->link_rel[f->next], true, &e) == 0)
			return; /* fs_done comes back here */
		sbx_err_clear(&e);
		f->next++; /* left unspecified */
	}
	json_t *o = json_pack("{s:O}", "entries", f->entries);
	if (!o) {
		sbx_err_set(&e, -ENOMEM, "out of memory");
		sup_http_fail(q->r, &e);
		return;
	}
	sup_e2b_rpc_reply(q->r, o);
}

/* fs.list's result: every entry as EntryInfo; symlinks noted for list_next. */
static int list_entries(sup_eq *q, const msgpack_object *res, sbx_err *err)
{
	struct e2b_fs *f = q->fs;
	const msgpack_object *ents = sup_api_listing_entries(res, err);
	if (!ents)
		return err->code;
	size_t n = ents->via.array.size ? ents->via.array.size : 1;
	if (!(f->entries = json_array()) || !(f->links = calloc(n, sizeof(*f->links))) ||
	    !(f->link_rel = calloc(n, sizeof(*f->link_rel))))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < ents->via.array.size; i++) {
		const msgpack_object *e = &ents->via.array.ptr[i];
		sup_api_entry ent;
		if (sup_api_entry_read(f->m.path, e, &ent, err) < 0)
			return err->code;
		json_t *o = sup_e2b_entry_json(ent.path, &ent.st, NULL, err);
		free(ent.path);
		if (!o || json_array_append_new(f->entries, o) < 0)
			return err->code ? err->code : sbx_err_set(err, -ENOMEM, "out of memory");
		if (strcmp(ent.st.type, "symlink") != 0)
			continue;
		/* its path below the root: the entry's checked path below m's */
		const char *rel;
		size_t rl;
		sbx_proto_get_str(e, "path", &rel, &rl);
		char *r = f->m.rel[0] ? sup_api_path_join(f->m.rel, rel, rl) : strndup(rel, rl);
		if (!r)
			return sbx_err_set(err, -ENOMEM, "out of memory");
		f->links[f->nlinks] = json_array_size(f->entries) - 1;
		f->link_rel[f->nlinks++] = r;
	}
	return 0;
}

static void lstat_done(sup_eq *q, int rc, const msgpack_object *res, const sbx_err *err)
{
	struct e2b_fs *f = q->fs;
	sbx_err e;
	sbx_err_clear(&e);
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	if (sup_api_stat_read(res, &f->st, &e) < 0) {
		sup_core_blame(q->x->core, q->id, &e);
		sup_http_fail(q->r, &e);
		return;
	}
	if (f->st.target) {
		size_t n = f->st.target_len < sizeof(f->target) - 1 ? f->st.target_len : sizeof(f->target) - 1;
		memcpy(f->target, f->st.target, n);
		f->target[n] = '\0';
		f->st.target = f->target;
		f->st.target_len = n;
	}
	f->step = STEP_FOLLOW;
	if (strcmp(f->st.type, "symlink") != 0 ||
	    call(q, SBX_OP_FS_STAT, subject(f)->root, subject(f)->rel, true, &e) < 0)
		answer_entry(q, NULL);
}

/* The target of a symlink (of the path, or of a listing's entry): st, or
 * NULL when it could not be stat'ed (dangling, or leading out of reach). */
static void follow_done(sup_eq *q, int rc, const msgpack_object *res)
{
	struct e2b_fs *f = q->fs;
	sup_api_stat st, link = { .type = "symlink" };
	sbx_err e;
	bool ok = rc == 0 && sup_api_stat_read(res, &st, &e) == 0;
	if (f->step == STEP_FOLLOW) {
		answer_entry(q, ok ? &st : NULL);
		return;
	}
	json_t *ent = json_array_get(f->entries, f->links[f->next++]);
	if (ok)
		json_object_set_new(ent, "type", json_string(sup_e2b_entry_type(&link, &st)));
	list_next(q);
}

static void main_done(sup_eq *q, int rc, const msgpack_object *res, const sbx_err *err)
{
	struct e2b_fs *f = q->fs;
	sbx_err e;
	sbx_err_clear(&e);
	/* MakeDir: a missing parent is made too; an entry there is theirs */
	if (f->kind == FS_MKDIR && rc == -ENOENT) {
		f->kind = FS_MKDIR_PARENTS;
		if (call(q, SBX_OP_FS_MKDIR, f->m.root, f->m.rel, false, &e) < 0)
			sup_http_fail(q->r, &e);
		return;
	}
	if (rc == -EEXIST && (f->kind == FS_MKDIR || f->kind == FS_MKDIR_PARENTS)) {
		sbx_err_set(&e, -EEXIST, "directory %s already exists", f->m.path);
		sup_http_fail(q->r, &e);
		return;
	}
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	switch (f->kind) {
	case FS_LIST:
		if (list_entries(q, res, &e) < 0) {
			if (e.code == -EPROTO)
				sup_core_blame(q->x->core, q->id, &e);
			sup_http_fail(q->r, &e);
			return;
		}
		list_next(q);
		return;
	case FS_REMOVE:
		sup_e2b_rpc_reply(q->r, NULL);
		return;
	default: /* MakeDir, Move: the entry made */
		f->step = STEP_LSTAT;
		if (call(q, SBX_OP_FS_STAT, subject(f)->root, subject(f)->rel, false, &e) < 0)
			sup_http_fail(q->r, &e);
		return;
	}
}

static void fs_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	q->op = NULL;
	switch (q->fs->step) {
	case STEP_MAIN:
		main_done(q, rc, res, err);
		return;
	case STEP_LSTAT:
		lstat_done(q, rc, res, err);
		return;
	default:
		follow_done(q, rc, res);
		return;
	}
}

int sup_e2b_act_fs(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	struct e2b_fs *f = q->fs;
	static const char *const ops[] = { [FS_STAT] = SBX_OP_FS_STAT, [FS_LIST] = SBX_OP_FS_LIST,
					   [FS_MKDIR] = SBX_OP_FS_MKDIR, [FS_MOVE] = SBX_OP_FS_MOVE,
					   [FS_REMOVE] = SBX_OP_FS_REMOVE };
	q->r = r;
	f->step = f->kind == FS_STAT ? STEP_LSTAT : STEP_MAIN;
	return call(q, ops[f->kind], f->m.root, f->m.rel, false, err);
}
