/* envd's WatchDir on the agent's fs.watch: a Connect server stream that
 * starts with {"start":{}} once the agent's watches are set (its "ready"),
 * then one {"filesystem":{"name","type"}} per change, name relative to the
 * watched folder as envd gives it, and {"keepalive":{}} while quiet. The
 * agent's events map onto fsnotify's as envd reports them: create CREATE,
 * modify WRITE, delete REMOVE, a move RENAME for the name it left and
 * CREATE for the one it took (when that is still in the watched tree).
 * What inotify's attribute changes would give (CHMOD) the agent does not
 * report. An overflow (events lost) ends the stream with
 * resource_exhausted, so the client knows to list again: their stream has
 * no event for a loss. Each event's cost goes back to the agent once the
 * client has read it (the stream's credit), so a client that stops reading
 * stops the agent, never grows memory here. */
#include "sup_e2b_fs_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "sup_path.h"

#define KEEPALIVE "{\"keepalive\":{}}"

int sup_e2b_parse_watch(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_eq *q = state;
	sup_e2b_parse_rpc_stream(in, ctx, state, err);
	if (q->early)
		return 0;
	struct e2b_fs *f = sup_e2b_fs_of(q, err);
	json_t *path = sup_e2b_field(q->msg, "path", NULL);
	json_t *rec = sup_e2b_field(q->msg, "recursive", NULL);
	int rc = 0;
	if (!f) {
		q->early = -ENOMEM;
		q->early_err = *err;
		return 0;
	}
	if (rec && !json_is_boolean(rec))
		rc = sbx_err_set(err, -EINVAL, "field \"recursive\": want true or false");
	if (rc == 0 && !json_is_string(path))
		rc = sbx_err_set(err, -EINVAL, "field \"path\": want a path");
	if (rc == 0) {
		f->who = in->who;
		f->recursive = json_is_true(rec);
		rc = sup_e2b_fs_path(q, json_string_value(path), json_string_length(path), SUP_POLICY_READ,
				     &f->m, err);
	}
	if (rc < 0) {
		q->early = rc;
		q->early_err = *err;
	}
	return 0;
}

/* The agent's path at key, checked (a name below the folder): NULL when
 * it is missing, nil or malformed. */
static json_t *name_of(const msgpack_object *map, const char *key)
{
	const char *p;
	size_t n;
	if (!sbx_proto_get_str(map, key, &p, &n) || n == 0 || !sup_path_rel_ok(p, n))
		return NULL;
	return json_stringn(p, n); /* NULL too when not UTF-8: theirs is a proto string */
}

static int send_event(sup_eq *q, json_t *name, const char *type, size_t cost)
{
	json_t *o = name ? json_pack("{s:{s:o, s:s}}", "filesystem", "name", name, "type", type) : NULL;
	if (!o)
		return -1;
	sup_stream_json_cost(q->s, "", o, cost);
	return 0;
}

/* Stop the watch and end the stream (rc < 0: with err). */
static void watch_end(sup_eq *q, int rc, const sbx_err *err)
{
	if (q->op)
		sup_op_cancel(q->op);
	q->op = NULL;
	sup_e2b_rpc_end(q, rc, err);
}

static void on_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_eq *q = ud;
	const char *t;
	size_t tl;
	sbx_err e;
	sbx_err_clear(&e);
	if (!map || map->type != MSGPACK_OBJECT_MAP || !sbx_proto_get_str(map, "type", &t, &tl)) {
		sbx_err_set(&e, -EPROTO, "agent: fs.watch event without a type");
		sup_core_blame(q->x->core, q->id, &e);
		watch_end(q, e.code, &e);
		return;
	}
#define IS(s) (tl == strlen(s) && memcmp(t, s, tl) == 0)
	if (!q->s) {
		if (!IS("ready")) {
			sbx_err_set(&e, -EPROTO, "agent: fs.watch did not start with ready");
			sup_core_blame(q->x->core, q->id, &e);
			watch_end(q, e.code, &e);
			return;
		}
		if (!sup_e2b_rpc_stream(q, KEEPALIVE)) {
			sbx_err_set(&e, -ENOMEM, "out of memory");
			watch_end(q, e.code, &e);
			return;
		}
		sup_stream_json_cost(q->s, "", json_pack("{s:{}}", "start"), cost);
		return;
	}
	int rc = 0;
	if (IS("ready")) {
		sup_op_consumed(q->op, cost);
	} else if (IS("create")) {
		rc = send_event(q, name_of(map, "path"), "EVENT_TYPE_CREATE", cost);
	} else if (IS("modify")) {
		rc = send_event(q, name_of(map, "path"), "EVENT_TYPE_WRITE", cost);
	} else if (IS("delete")) {
		rc = send_event(q, name_of(map, "path"), "EVENT_TYPE_REMOVE", cost);
	} else if (IS("move")) {
		const msgpack_object *to = sbx_proto_map_get(map, "to");
		rc = send_event(q, name_of(map, "from"), "EVENT_TYPE_RENAME", cost);
		if (rc == 0 && to && to->type != MSGPACK_OBJECT_NIL)
			rc = send_event(q, name_of(map, "to"), "EVENT_TYPE_CREATE", 0);
	} else if (IS("overflow")) {
		sbx_err_set(&e, -ENOSPC, "events were lost (the watch fell behind or hit its limit of "
					 "folders): list %s again", q->fs->m.path);
		watch_end(q, e.code, &e);
		return;
	} else {
		rc = -1;
	}
#undef IS
	if (rc < 0) {
		sbx_err_set(&e, -EPROTO, "agent: fs.watch event with a bad type or path");
		sup_core_blame(q->x->core, q->id, &e);
		watch_end(q, e.code, &e);
	}
}

static void on_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	(void)res;
	q->op = NULL;
	/* the folder went away (rc 0, "deleted"), or the watch failed */
	sup_e2b_rpc_end(q, rc, err);
}

static const sup_core_call_cbs watch_cbs = { .on_event = on_event, .on_done = on_done,
					     .wait = SUP_AGENT_WAIT_QUIET };

int sup_e2b_act_watch(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	q->r = r;
	if (q->early) {
		sup_e2b_rpc_end(q, q->early, &q->early_err);
		return 0;
	}
	struct e2b_fs *f = q->fs;
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_args_str(&a, "root", f->m.root, strlen(f->m.root));
	sbx_proto_args_str(&a, "path", f->m.rel, strlen(f->m.rel));
	sbx_proto_args_bool(&a, "recursive", f->recursive);
	int rc = sup_core_call(q->x->core, q->id, SBX_OP_FS_WATCH, &a, &watch_cbs, q, &q->op, err);
	if (rc < 0)
		sup_e2b_rpc_end(q, rc, err);
	return 0;
}
