/* GET /fs/watch: the agent's fs.watch as an SSE (or NDJSON) stream. The
 * reply starts only with the agent's first event (ready), so a denial, a
 * missing folder or a file is still a plain JSON error. Each event's cost
 * goes back to the agent only once the connection's output is below the
 * watermark (sup_stream_json_cost): a client that stops reading stops the
 * agent reading inotify, and the loss comes later as "overflow", never as
 * memory here. Paths from the agent are checked (relative, no "."/".."
 * parts, no NUL) and given out absolute: the watched folder joined with
 * them, so a client can pass them to GET /files as they are. */
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_files_int.h"
#include "sup_log.h"
#include "sup_stream.h"

/* Idle proxies commonly cut a stream after 30-60 s of silence. */
#define WATCH_KEEPALIVE_S 15

/* A path below the watched folder as an honest agent sends it: "" or names
 * joined by single slashes, none of them "." or "..". */
static bool rel_ok(const char *p, size_t n)
{
	if (n >= PATH_MAX || (n && memchr(p, '\0', n)))
		return false;
	for (size_t i = 0; i < n;) {
		size_t s = i;
		while (i < n && p[i] != '/')
			i++;
		size_t l = i - s;
		if (l == 0 || l > NAME_MAX || (p[s] == '.' && (l == 1 || (l == 2 && p[s + 1] == '.'))))
			return false;
		if (i < n && ++i == n)
			return false; /* a trailing slash */
	}
	return true;
}

/* o[key] = the watched folder joined with the agent's path at key in map
 * (nil: null when nil_ok). -1 when missing or malformed. */
static int set_path(const sup_fq *q, json_t *o, const char *key, const msgpack_object *map,
		    bool nil_ok)
{
	const msgpack_object *v = sbx_proto_map_get(map, key);
	if (v && v->type == MSGPACK_OBJECT_NIL && nil_ok)
		return json_object_set_new(o, key, json_null());
	if (!v || v->type != MSGPACK_OBJECT_STR || !rel_ok(v->via.str.ptr, v->via.str.size))
		return -1;
	SBX_AUTO_FREE char *full = sup_api_path_join(q->m.path, v->via.str.ptr, v->via.str.size);
	return full ? sup_http_set_bytes(o, key, full, strlen(full)) : -1;
}

/* The agent's event as {"type","path","dir"[,"from","to"]}; NULL with err
 * when it is malformed. *type is one of ours (static). */
static json_t *render(const sup_fq *q, const msgpack_object *map, const char **type, sbx_err *err)
{
	static const char *const types[] = { "ready", "create", "modify", "delete", "move",
					     "overflow" };
	const char *t;
	size_t tl;
	*type = NULL;
	if (!map || map->type != MSGPACK_OBJECT_MAP || !sbx_proto_get_str(map, "type", &t, &tl)) {
		sbx_err_set(err, -EPROTO, "agent: fs.watch event without a type");
		return NULL;
	}
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strlen(types[i]) == tl && memcmp(types[i], t, tl) == 0)
			*type = types[i];
	if (!*type) {
		sbx_err_set(err, -EPROTO, "agent: fs.watch event of an unknown type");
		return NULL;
	}
	json_t *o = json_pack("{s:s}", "type", *type);
	bool dir = true;
	int rc = o ? 0 : -1;
	if (rc == 0 && strcmp(*type, "overflow") == 0) /* about the whole folder */
		rc = sup_http_set_bytes(o, "path", q->m.path, strlen(q->m.path));
	else if (rc == 0 && (set_path(q, o, "path", map, false) < 0 ||
			     !sbx_proto_get_bool(map, "dir", &dir)))
		rc = -1;
	if (rc == 0)
		rc = json_object_set_new(o, "dir", json_boolean(dir));
	if (rc == 0 && strcmp(*type, "move") == 0 &&
	    (set_path(q, o, "from", map, false) < 0 || set_path(q, o, "to", map, true) < 0))
		rc = -1;
	if (rc < 0) {
		json_decref(o);
		sbx_err_set(err, -EPROTO, "agent: fs.watch %s event with a bad path, from, to or dir",
			    *type);
		return NULL;
	}
	return o;
}

static void on_credit(size_t cost, void *ud)
{
	sup_fq *q = ud;
	if (q->op)
		sup_op_consumed(q->op, cost);
}

/* The last event, then the end of the reply. */
static void end_with(sup_fq *q, json_t *o)
{
	if (q->op) {
		sup_op_cancel(q->op);
		q->op = NULL;
	}
	sup_stream_json(q->stream, "end", o);
	sup_stream_end(q->stream);
	q->stream = NULL;
}

/* {"reason":"error","error":{code,message}}. */
static json_t *end_error(const char *code, const char *msg)
{
	json_t *o = sup_http_error_json(code, msg);
	if (o)
		json_object_set_new(o, "reason", json_string("error"));
	return o;
}

static void on_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_fq *q = ud;
	sbx_err e;
	sbx_err_clear(&e);
	const char *type;
	json_t *o = render(q, map, &type, &e);
	if (!q->stream) {
		if (o && strcmp(type, "ready") != 0)
			sbx_err_set(&e, -EPROTO, "agent: fs.watch did not start with ready");
		if (o && !e.code && !(q->stream = sup_stream_start(q->r, q->fmt, on_credit, q)))
			sbx_err_set(&e, -ENOMEM, "out of memory");
		if (e.code) {
			json_decref(o);
			sup_op_cancel(q->op);
			q->op = NULL;
			sup_core_blame(q->f->core, q->id, &e);
			sup_http_fail(q->r, &e);
			return;
		}
		if (sup_stream_keepalive(q->stream, WATCH_KEEPALIVE_S) < 0)
			sup_warn("http GET fs/watch sandbox %s: no keepalive (out of memory)", q->id);
	}
	if (!o) {
		sup_core_blame(q->f->core, q->id, &e);
		end_with(q, end_error("agent_error", e.msg));
		return;
	}
	sup_stream_json_cost(q->stream, type, o, cost);
}

static void on_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_fq *q = ud;
	const char *r, *code;
	size_t rl;
	sbx_err e;
	q->op = NULL;
	if (!q->stream) {
		if (rc == 0) {
			sbx_err_set(&e, -EPROTO, "agent: fs.watch ended before it was ready");
			sup_core_blame(q->f->core, q->id, &e);
		}
		sup_http_fail(q->r, rc < 0 ? err : &e);
		return;
	}
	if (rc < 0) {
		sup_http_status("files", err->code, &code);
		end_with(q, end_error(code, err->msg[0] ? err->msg : code));
		return;
	}
	if (!result || result->type != MSGPACK_OBJECT_MAP ||
	    !sbx_proto_get_str(result, "reason", &r, &rl) || rl != 7 || memcmp(r, "deleted", 7) != 0) {
		sbx_err_set(&e, -EPROTO, "agent: fs.watch ended without a known reason");
		sup_core_blame(q->f->core, q->id, &e);
		end_with(q, end_error("agent_error", e.msg));
		return;
	}
	json_t *o = json_pack("{s:s}", "reason", "deleted");
	if (o)
		sup_http_set_bytes(o, "path", q->m.path, strlen(q->m.path));
	end_with(q, o);
}

static const sup_core_call_cbs watch_cbs = {
	.on_event = on_event,
	.on_done = on_done,
	.wait = SUP_AGENT_WAIT_QUIET, /* a folder may not change for hours */
};

int sup_files_parse_watch(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "path", "recursive", NULL };
	sup_fq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	sup_fq_init(q, in, ctx, "watch", SBX_OP_FS_WATCH);
	sup_stream_fmt fmt = sup_stream_wanted(sup_http_in_header(in, "Accept"));
	q->fmt = fmt == SUP_STREAM_NONE ? SUP_STREAM_SSE : fmt;
	int rc = sup_fq_query(q, in, keys, SUP_POLICY_READ, &qs, err);
	int rec = rc < 0 ? rc : sup_query_flag(&qs, "recursive", false, err);
	if (rec < 0)
		return rec;
	sbx_proto_args_bool(&q->args, "recursive", rec);
	return 0;
}

/* The reply starts with the agent's "ready": until then errors are plain
 * JSON answers. */
int sup_files_act_watch(sup_http_req *r, void *state, sbx_err *err)
{
	sup_fq *q = state;
	q->r = r;
	return sup_fq_call(q, &watch_cbs, err);
}
