#include "sup_procs.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_agent.h"
#include "sup_api.h"
#include "sup_log.h"
#include "sup_stream.h"
#include "sup_text.h"

/* Largest JSON body of a request here but the start (whose exec body may be
 * as big as the HTTP layer allows). */
#define PQ_MAX_SMALL_BODY (4 * 1024)
#define PQ_MAX_TAG 256
#define PQ_MAX_ARGV 4096
/* A held-back credit is retried this often while the reader is behind. */
#define PQ_RETRY_MS 10

struct sup_procs {
	struct event_base *base;
	sup_core *core;
	size_t max_body; /* largest stdin body */
};

typedef struct pq {
	sup_procs *p;
	struct evhttp_request *req;
	sup_procs_route rt;
	char id[SUP_ID_MAX + 16];
	long pid;
	sup_op *op;
	struct event *gone; /* the client hanging up while we wait */
	struct timespec start;
	/* output */
	sup_stream *s;
	struct event *retry; /* credit held back until the reader catches up */
	size_t owed;
	uint64_t off;        /* absolute offset of the next byte expected */
	bool follow;
	/* stdin: the request body, sent within the agent's credit */
	const uint8_t *in;
	size_t in_len, in_off;
	bool in_done;        /* all of it (and the final eof frame) went */
} pq;

sup_procs *sup_procs_new(struct event_base *base, sup_core *core, size_t max_body)
{
	sup_procs *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->base = base;
	p->core = core;
	p->max_body = max_body;
	return p;
}

void sup_procs_free(sup_procs *p)
{
	free(p);
}

/* ---- replies ---- */

static const char *route_name(sup_procs_route rt)
{
	switch (rt) {
	case SUP_PROCS_START: return "POST processes";
	case SUP_PROCS_LIST: return "GET processes";
	case SUP_PROCS_GET: return "GET process";
	case SUP_PROCS_KILL: return "DELETE process";
	case SUP_PROCS_OUTPUT: return "GET process output";
	case SUP_PROCS_SIGNAL: return "POST process signal";
	case SUP_PROCS_RESIZE: return "POST process resize";
	case SUP_PROCS_STDIN: return "POST process stdin";
	}
	return "?";
}

static void pq_log(const pq *q, int status)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double ms = (double)(now.tv_sec - q->start.tv_sec) * 1e3 +
		    (double)(now.tv_nsec - q->start.tv_nsec) / 1e6;
	sup_log(status >= 500 && status != 503 ? SUP_LOG_WARN : SUP_LOG_INFO,
		"http %s sandbox %s pid %ld %d %.3fms", route_name(q->rt), q->id, q->pid, status, ms);
}

static void pq_free(pq *q)
{
	if (q->gone)
		event_free(q->gone);
	if (q->retry)
		event_free(q->retry);
	free(q);
}

static int dump_cb(const char *b, size_t size, void *data)
{
	return evbuffer_add(data, b, size);
}

/* Reply status with body (reference taken; NULL: none) and free q. */
static void pq_reply(pq *q, int status, json_t *body)
{
	pq_log(q, status);
	if (q->gone) {
		/* Before evhttp may close the fd under it. */
		event_free(q->gone);
		q->gone = NULL;
	}
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
	evhttp_send_reply(q->req, status, NULL, buf);
	if (buf)
		evbuffer_free(buf);
	pq_free(q);
}

static void pq_error(pq *q, int status, const char *code, const char *msg)
{
	pq_reply(q, status, sup_api_render_error(code, msg));
}

/* Status and code of an agent's or the core's error. */
static int pq_status(int neg_errno, const char **code)
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
		*code = "bad_request";
		return 400;
	case -ENOSPC:
		*code = "no_space";
		return 507;
	default:
		return sup_api_status(neg_errno, code);
	}
}

static void pq_fail(pq *q, const sbx_err *err)
{
	const char *code;
	int status = pq_status(err->code, &code);
	pq_error(q, status, code, err->msg[0] ? err->msg : code);
}

/* ---- the agent's process description, checked ---- */

static bool mp_nil(const msgpack_object *o)
{
	return !o || o->type == MSGPACK_OBJECT_NIL;
}

/* An unsigned integer at key (at most max): 0, or -EPROTO. */
static int mp_uint(const msgpack_object *map, const char *key, uint64_t max, uint64_t *out,
		   sbx_err *err)
{
	const msgpack_object *o = sbx_proto_map_get(map, key);
	if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
		return sbx_err_set(err, -EPROTO, "process: \"%s\" missing or out of range", key);
	*out = o->via.u64;
	return 0;
}

static int mp_bool(const msgpack_object *map, const char *key, bool *out, sbx_err *err)
{
	if (!sbx_proto_get_bool(map, key, out))
		return sbx_err_set(err, -EPROTO, "process: \"%s\" missing or not a bool", key);
	return 0;
}

static int set_text(json_t *o, const char *key, const char *p, size_t n)
{
	size_t tl;
	SBX_AUTO_FREE char *t = sup_utf8_repair((const uint8_t *)p, n, &tl);
	if (!t)
		return -1;
	return json_object_set_new(o, key, json_stringn(t, tl));
}

static int desc_exit(const msgpack_object *m, json_t *o, sbx_err *err)
{
	uint64_t ended = 0, dur = 0;
	bool to = false;
	int rc = mp_uint(m, "ended_ms", UINT64_MAX / 2, &ended, err);
	if (rc == 0)
		rc = mp_uint(m, "duration_us", UINT64_MAX / 2, &dur, err);
	if (rc == 0)
		rc = mp_bool(m, "timed_out", &to, err);
	if (rc < 0)
		return rc;
	const msgpack_object *code = sbx_proto_map_get(m, "exit_code");
	const msgpack_object *sig = sbx_proto_map_get(m, "signal");
	bool has_code = !mp_nil(code), has_sig = !mp_nil(sig);
	if (has_code == has_sig ||
	    (has_code && (code->type != MSGPACK_OBJECT_POSITIVE_INTEGER || code->via.u64 > 255)) ||
	    (has_sig && (sig->type != MSGPACK_OBJECT_POSITIVE_INTEGER || sig->via.u64 < 1 ||
			 sig->via.u64 > 64)))
		return sbx_err_set(err, -EPROTO, "process: want exactly one of exit_code (0..255) and signal (1..64)");
	char name[32];
	if (has_sig)
		sup_signal_name((int)sig->via.u64, name, sizeof(name));
	if (json_object_set_new(o, "exit_code",
				has_code ? json_integer((json_int_t)code->via.u64) : json_null()) < 0 ||
	    json_object_set_new(o, "signal", has_sig ? json_string(name) : json_null()) < 0 ||
	    json_object_set_new(o, "ended_ms", json_integer((json_int_t)ended)) < 0 ||
	    json_object_set_new(o, "duration_ms", json_real((double)dur / 1000.0)) < 0 ||
	    json_object_set_new(o, "timed_out", json_boolean(to)) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

static int desc_full(const msgpack_object *m, json_t *o, sbx_err *err)
{
	bool pty = false, in = false;
	int rc = mp_bool(m, "pty", &pty, err);
	if (rc == 0)
		rc = mp_bool(m, "stdin", &in, err);
	if (rc < 0)
		return rc;
	const msgpack_object *out = sbx_proto_map_get(m, "output");
	uint64_t start = 0, end = 0, buffer = 0;
	if (!out || out->type != MSGPACK_OBJECT_MAP)
		return sbx_err_set(err, -EPROTO, "process: \"output\" missing");
	rc = mp_uint(out, "start", UINT64_MAX / 2, &start, err);
	if (rc == 0)
		rc = mp_uint(out, "end", UINT64_MAX / 2, &end, err);
	if (rc == 0)
		rc = mp_uint(out, "buffer", UINT32_MAX, &buffer, err);
	if (rc < 0)
		return rc;
	if (start > end)
		return sbx_err_set(err, -EPROTO, "process: output start after its end");
	const msgpack_object *argv = sbx_proto_map_get(m, "argv");
	if (!argv || argv->type != MSGPACK_OBJECT_ARRAY || argv->via.array.size > PQ_MAX_ARGV)
		return sbx_err_set(err, -EPROTO, "process: \"argv\" missing or too long");
	json_t *a = json_array();
	if (!a || json_object_set_new(o, "argv", a) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	for (uint32_t i = 0; i < argv->via.array.size; i++) {
		const msgpack_object *s = &argv->via.array.ptr[i];
		if (s->type != MSGPACK_OBJECT_STR)
			return sbx_err_set(err, -EPROTO, "process: argv[%u] is not a string", i);
		size_t tl;
		SBX_AUTO_FREE char *t = sup_utf8_repair((const uint8_t *)s->via.str.ptr,
							s->via.str.size, &tl);
		if (!t || json_array_append_new(a, json_stringn(t, tl)) < 0)
			return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	if (json_object_set_new(o, "pty", json_boolean(pty)) < 0 ||
	    json_object_set_new(o, "stdin", json_boolean(in)) < 0 ||
	    json_object_set_new(o, "output",
				json_pack("{s:I,s:I,s:I}", "start", (json_int_t)start, "end",
					  (json_int_t)end, "buffer", (json_int_t)buffer)) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

/* A process description from the agent as JSON; full adds what proc.get
 * tells. NULL with err when it breaks the protocol. want_pid > 0: the
 * description must be of that process. */
static json_t *desc_json(const msgpack_object *m, bool full, long want_pid, sbx_err *err)
{
	if (!m || m->type != MSGPACK_OBJECT_MAP) {
		sbx_err_set(err, -EPROTO, "process: not a map");
		return NULL;
	}
	uint64_t pid = 0, started = 0;
	if (mp_uint(m, "pid", INT_MAX, &pid, err) < 0 ||
	    mp_uint(m, "started_ms", UINT64_MAX / 2, &started, err) < 0)
		return NULL;
	if (pid == 0 || (want_pid > 0 && pid != (uint64_t)want_pid)) {
		sbx_err_set(err, -EPROTO, "process: pid %llu is not the one asked for",
			    (unsigned long long)pid);
		return NULL;
	}
	const msgpack_object *st = sbx_proto_map_get(m, "state");
	bool exited;
	if (st && st->type == MSGPACK_OBJECT_STR && st->via.str.size == 7 &&
	    memcmp(st->via.str.ptr, "running", 7) == 0)
		exited = false;
	else if (st && st->type == MSGPACK_OBJECT_STR && st->via.str.size == 6 &&
		 memcmp(st->via.str.ptr, "exited", 6) == 0)
		exited = true;
	else {
		sbx_err_set(err, -EPROTO, "process: \"state\" is neither running nor exited");
		return NULL;
	}
	const msgpack_object *tag = sbx_proto_map_get(m, "tag");
	if (!mp_nil(tag) && (tag->type != MSGPACK_OBJECT_STR || tag->via.str.size > PQ_MAX_TAG)) {
		sbx_err_set(err, -EPROTO, "process: \"tag\" is not a string of at most %d bytes",
			    PQ_MAX_TAG);
		return NULL;
	}
	json_t *o = json_pack("{s:I,s:s,s:I}", "pid", (json_int_t)pid, "state",
			      exited ? "exited" : "running", "started_ms", (json_int_t)started);
	int rc = o ? 0 : -1;
	if (rc == 0)
		rc = mp_nil(tag) ? json_object_set_new(o, "tag", json_null())
				 : set_text(o, "tag", tag->via.str.ptr, tag->via.str.size);
	if (rc < 0) {
		json_decref(o);
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	if ((exited && desc_exit(m, o, err) < 0) || (full && desc_full(m, o, err) < 0)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* ---- agent calls ---- */

typedef struct pargs {
	msgpack_sbuffer sb;
	msgpack_packer pk;
} pargs;

static void pargs_begin(pargs *a, size_t n)
{
	msgpack_sbuffer_init(&a->sb);
	msgpack_packer_init(&a->pk, &a->sb, msgpack_sbuffer_write);
	msgpack_pack_map(&a->pk, n);
}

static void pargs_uint(pargs *a, const char *k, uint64_t v)
{
	sbx_proto_pack_str(&a->pk, k);
	msgpack_pack_uint64(&a->pk, v);
}

static void on_client_gone(evutil_socket_t fd, short what, void *ud)
{
	pq *q = ud;
	(void)fd;
	(void)what;
	sup_info("http %s sandbox %s: client went away, cancelling", route_name(q->rt), q->id);
	if (q->op) {
		sup_op_cancel(q->op);
		q->op = NULL;
	}
	/* Nobody reads this; sending it lets evhttp find the connection dead
	 * and free it together with the request. */
	pq_error(q, 499, "cancelled", "client closed the connection");
}

/* Notice the client hanging up while the agent works. */
static void watch_gone(pq *q)
{
	if (!(event_base_get_features(q->p->base) & EV_FEATURE_EARLY_CLOSE))
		return;
	struct evhttp_connection *evcon = evhttp_request_get_connection(q->req);
	struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
	evutil_socket_t fd = bev ? bufferevent_getfd(bev) : -1;
	if (fd < 0)
		return;
	q->gone = event_new(q->p->base, fd, EV_CLOSED, on_client_gone, q);
	if (q->gone)
		event_add(q->gone, NULL);
}

/* Start opname with a (destroyed here) on q's sandbox; an immediate
 * failure is answered (q freed) and returned. */
static int pq_call(pq *q, const char *opname, pargs *a, const sup_core_call_cbs *cbs)
{
	sbx_err err;
	sbx_err_clear(&err);
	int rc = sup_core_call(q->p->core, q->id, opname, a->sb.data, a->sb.size, cbs, q, &q->op,
			       &err);
	msgpack_sbuffer_destroy(&a->sb);
	if (rc < 0) {
		pq_fail(q, &err);
		return rc;
	}
	if (!q->gone)
		watch_gone(q);
	return 0;
}

static void agent_broke(pq *q, const sbx_err *e)
{
	sup_warn("sandbox %s: %s", q->id, e->msg);
	pq_error(q, 502, "agent_error", e->msg);
}

/* start, get, kill: the answer is a description. */
static void desc_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	pq *q = ud;
	q->op = NULL;
	if (rc < 0) {
		pq_fail(q, err);
		return;
	}
	sbx_err e;
	sbx_err_clear(&e);
	json_t *o = desc_json(result, q->rt == SUP_PROCS_GET, q->rt == SUP_PROCS_START ? 0 : q->pid,
			      &e);
	if (!o) {
		agent_broke(q, &e);
		return;
	}
	if (q->rt == SUP_PROCS_KILL) {
		json_t *st = json_object_get(o, "state");
		bool exited = st && strcmp(json_string_value(st), "exited") == 0;
		json_decref(o);
		pq_reply(q, exited ? 204 : 202, NULL);
		return;
	}
	if (q->rt == SUP_PROCS_START)
		q->pid = (long)json_integer_value(json_object_get(o, "pid"));
	pq_reply(q, q->rt == SUP_PROCS_START ? 201 : 200, o);
}

static const sup_core_call_cbs desc_cbs = { .on_done = desc_done };

static void list_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	pq *q = ud;
	q->op = NULL;
	if (rc < 0) {
		pq_fail(q, err);
		return;
	}
	sbx_err e;
	sbx_err_clear(&e);
	const msgpack_object *arr = result ? sbx_proto_map_get(result, "processes") : NULL;
	if (!arr || arr->type != MSGPACK_OBJECT_ARRAY || arr->via.array.size > 4096) {
		sbx_err_set(&e, -EPROTO, "proc.list: \"processes\" missing or too long");
		agent_broke(q, &e);
		return;
	}
	json_t *a = json_array();
	json_t *body = a ? json_pack("{s:o}", "processes", a) : NULL;
	if (!body) {
		pq_error(q, 500, "internal", "out of memory");
		return;
	}
	for (uint32_t i = 0; i < arr->via.array.size; i++) {
		json_t *o = desc_json(&arr->via.array.ptr[i], false, 0, &e);
		if (!o) {
			json_decref(body);
			agent_broke(q, &e);
			return;
		}
		json_array_append_new(a, o);
	}
	pq_reply(q, 200, body);
}

static const sup_core_call_cbs list_cbs = { .on_done = list_done };

/* signal, resize: {} on success. */
static void empty_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	pq *q = ud;
	(void)result;
	q->op = NULL;
	if (rc < 0) {
		pq_fail(q, err);
		return;
	}
	pq_reply(q, 200, json_object());
}

static const sup_core_call_cbs empty_cbs = { .on_done = empty_done };

/* ---- request parsing ---- */

static void json_decref_p(json_t **j)
{
	json_decref(*j);
}
#define AUTO_JSON __attribute__((cleanup(json_decref_p)))

/* The body as a JSON object with only allowed keys: NULL with the reply sent. */
static json_t *small_body(pq *q, const char *const *allowed)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(q->req);
	size_t len = evbuffer_get_length(in);
	if (len > PQ_MAX_SMALL_BODY) {
		pq_error(q, 413, "too_large", "request body over 4 KiB");
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
		pq_error(q, 400, "bad_request", msg);
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
			pq_error(q, 400, "bad_request", msg);
			return NULL;
		}
	}
	return j;
}

int sup_procs_parse_signal(const char *s)
{
	if (!s || !*s)
		return -EINVAL;
	if (s[0] >= '0' && s[0] <= '9') {
		char *end;
		errno = 0;
		long v = strtol(s, &end, 10);
		if (errno || *end || v < 1 || v > 64 || (v > 31 && v < 34))
			return -EINVAL;
		return (int)v;
	}
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (int sig = 1; sig <= 64; sig++) {
		char name[32];
		if (sig > 31 && sig < 34)
			continue;
		if (sup_signal_name(sig, name, sizeof(name)) && strcasecmp(name, s) == 0)
			return sig;
	}
	return -EINVAL;
}

/* The {pid} segment of the request path: 0 with q->pid set, or the reply
 * sent. */
static int path_pid(pq *q)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(q->req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	const char *p = path ? strstr(path, "/processes/") : NULL;
	if (!p) {
		pq_error(q, 400, "bad_request", "no pid in the path");
		return -EINVAL;
	}
	p += strlen("/processes/");
	size_t n = strcspn(p, "/");
	char msg[128];
	bool digits = n > 0 && n <= 10;
	for (size_t i = 0; digits && i < n; i++)
		digits = p[i] >= '0' && p[i] <= '9';
	if (!digits) {
		snprintf(msg, sizeof(msg), "pid \"%.*s\": want a positive integer",
			 (int)(n > 32 ? 32 : n), p);
		pq_error(q, 400, "bad_request", msg);
		return -EINVAL;
	}
	long v = strtol(p, NULL, 10);
	if (v < 1 || v > INT_MAX) {
		snprintf(msg, sizeof(msg), "no background process %.*s", (int)n, p);
		pq_error(q, 404, "not_found", msg);
		return -ENOENT;
	}
	q->pid = v;
	return 0;
}

/* Query string: only the allowed keys, each at most once. NULL: none. On
 * error the reply is sent and -EINVAL returned. */
static int parse_query(pq *q, struct evkeyvalq *kv, const char *const *allowed)
{
	TAILQ_INIT(kv);
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(q->req);
	const char *qs = uri ? evhttp_uri_get_query(uri) : NULL;
	if (!qs)
		return 0;
	char msg[160];
	if (evhttp_parse_query_str(qs, kv) < 0) {
		pq_error(q, 400, "bad_request", "malformed query string");
		return -EINVAL;
	}
	struct evkeyval *e;
	TAILQ_FOREACH(e, kv, next)
	{
		bool ok = false;
		for (size_t i = 0; allowed[i]; i++)
			ok |= strcmp(allowed[i], e->key) == 0;
		int seen = 0;
		struct evkeyval *f;
		TAILQ_FOREACH(f, kv, next)
			seen += strcmp(f->key, e->key) == 0;
		if (!ok || seen > 1) {
			snprintf(msg, sizeof(msg), "query parameter \"%.64s\" is %s", e->key,
				 ok ? "given twice" : "unknown");
			evhttp_clear_headers(kv);
			pq_error(q, 400, "bad_request", msg);
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- routes ---- */

/* Pull the background-only fields out of the exec body; 0 or the reply sent. */
static int start_extras(pq *q, json_t *j, pargs *extra, size_t *nextra, bool *has_stdin)
{
	json_t *tag = json_object_get(j, "tag");
	json_t *buf = json_object_get(j, "buffer");
	json_t *in = json_object_get(j, "stdin");
	*nextra = 0;
	if (json_object_get(j, "max_output") || json_object_get(j, "stdin_b64")) {
		pq_error(q, 400, "bad_request",
			 "max_output and stdin_b64 do not apply to background processes (see buffer; stdin: true and POST .../stdin)");
		return -EINVAL;
	}
	if (in && !json_is_boolean(in)) {
		pq_error(q, 400, "bad_request",
			 "field \"stdin\": want true (then write with POST .../stdin) or false");
		return -EINVAL;
	}
	*has_stdin = in && json_is_true(in);
	if (tag && !json_is_null(tag) &&
	    (!json_is_string(tag) || json_string_length(tag) > PQ_MAX_TAG)) {
		pq_error(q, 400, "bad_request", "field \"tag\": want a string of at most 256 bytes");
		return -EINVAL;
	}
	if (buf && (!json_is_integer(buf) || json_integer_value(buf) < 4096 ||
		    json_integer_value(buf) > 67108864)) {
		pq_error(q, 400, "bad_request", "field \"buffer\": want 4096..67108864 (bytes)");
		return -EINVAL;
	}
	msgpack_sbuffer_init(&extra->sb);
	msgpack_packer_init(&extra->pk, &extra->sb, msgpack_sbuffer_write);
	if (tag && json_is_string(tag)) {
		sbx_proto_pack_str(&extra->pk, "tag");
		sbx_proto_pack_strn(&extra->pk, json_string_value(tag), json_string_length(tag));
		++*nextra;
	}
	if (buf) {
		pargs_uint(extra, "buffer", (uint64_t)json_integer_value(buf));
		++*nextra;
	}
	json_object_del(j, "tag");
	json_object_del(j, "buffer");
	json_object_del(j, "stdin");
	return 0;
}

/* The exec args (enc) with the extra pairs appended, into a. */
static int join_args(const msgpack_sbuffer *enc, const pargs *extra, size_t nextra, pargs *a)
{
	msgpack_unpacked u;
	msgpack_unpacked_init(&u);
	size_t off = 0;
	if (msgpack_unpack_next(&u, enc->data, enc->size, &off) != MSGPACK_UNPACK_SUCCESS ||
	    u.data.type != MSGPACK_OBJECT_MAP) {
		msgpack_unpacked_destroy(&u);
		return -EINVAL;
	}
	const msgpack_object_map *m = &u.data.via.map;
	pargs_begin(a, m->size + nextra);
	for (uint32_t i = 0; i < m->size; i++) {
		msgpack_pack_object(&a->pk, m->ptr[i].key);
		msgpack_pack_object(&a->pk, m->ptr[i].val);
	}
	msgpack_unpacked_destroy(&u);
	if (extra->sb.size)
		msgpack_sbuffer_write(&a->sb, extra->sb.data, extra->sb.size);
	return 0;
}

static void r_start(pq *q)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(q->req);
	size_t len = evbuffer_get_length(in);
	json_error_t je;
	AUTO_JSON json_t *j = json_loadb(len ? (const char *)evbuffer_pullup(in, -1) : "", len,
					 JSON_REJECT_DUPLICATES, &je);
	char msg[256];
	if (!j || !json_is_object(j)) {
		snprintf(msg, sizeof(msg), "body must be a JSON object with \"argv\" or \"cmd\"%s%s",
			 j ? "" : ": ", j ? "" : je.text);
		pq_error(q, 400, "bad_request", msg);
		return;
	}
	pargs extra;
	size_t nextra;
	bool has_stdin = false;
	if (start_extras(q, j, &extra, &nextra, &has_stdin) < 0)
		return;
	SBX_AUTO_FREE char *rest = json_dumps(j, JSON_COMPACT);
	sup_exec_spec spec;
	sbx_err err;
	sbx_err_clear(&err);
	if (!rest) {
		msgpack_sbuffer_destroy(&extra.sb);
		pq_error(q, 500, "internal", "out of memory");
		return;
	}
	if (sup_api_parse_exec(rest, strlen(rest), &spec, &err) < 0) {
		msgpack_sbuffer_destroy(&extra.sb);
		pq_fail(q, &err);
		return;
	}
	spec.has_stdin = has_stdin;
	msgpack_sbuffer enc;
	msgpack_sbuffer_init(&enc);
	int rc = sup_agent_encode_exec_args(&spec, NULL, &enc, &err);
	sup_exec_spec_free(&spec);
	pargs a;
	memset(&a, 0, sizeof(a));
	if (rc == 0 && join_args(&enc, &extra, nextra, &a) < 0)
		rc = sbx_err_set(&err, -ENOMEM, "encoding the arguments");
	msgpack_sbuffer_destroy(&enc);
	msgpack_sbuffer_destroy(&extra.sb);
	if (rc < 0) {
		pq_fail(q, &err);
		return;
	}
	pq_call(q, "proc.start", &a, &desc_cbs);
}

static void r_list(pq *q)
{
	static const char *const allowed[] = { "tag", NULL };
	struct evkeyvalq kv;
	if (parse_query(q, &kv, allowed) < 0)
		return;
	const char *tag = evhttp_find_header(&kv, "tag");
	pargs a;
	if (tag && strlen(tag) > PQ_MAX_TAG) {
		evhttp_clear_headers(&kv);
		pq_error(q, 400, "bad_request", "tag: at most 256 bytes");
		return;
	}
	pargs_begin(&a, tag ? 1 : 0);
	if (tag) {
		sbx_proto_pack_str(&a.pk, "tag");
		sbx_proto_pack_str(&a.pk, tag);
	}
	evhttp_clear_headers(&kv);
	pq_call(q, "proc.list", &a, &list_cbs);
}

static void r_pid_only(pq *q, const char *opname)
{
	pargs a;
	pargs_begin(&a, 1);
	pargs_uint(&a, "pid", (uint64_t)q->pid);
	pq_call(q, opname, &a, &desc_cbs);
}

static void r_signal(pq *q)
{
	static const char *const allowed[] = { "signal", NULL };
	AUTO_JSON json_t *j = small_body(q, allowed);
	if (!j)
		return;
	json_t *v = json_object_get(j, "signal");
	int sig = -EINVAL;
	char num[24];
	if (json_is_string(v))
		sig = sup_procs_parse_signal(json_string_value(v));
	else if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) <= 64) {
		snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
		sig = sup_procs_parse_signal(num);
	}
	if (sig < 0) {
		pq_error(q, 400, "bad_request",
			 "field \"signal\": want a signal name (\"TERM\", \"SIGINT\", \"RTMIN+1\") or number (1..31, 34..64)");
		return;
	}
	pargs a;
	pargs_begin(&a, 2);
	pargs_uint(&a, "pid", (uint64_t)q->pid);
	pargs_uint(&a, "signal", (uint64_t)sig);
	pq_call(q, "proc.signal", &a, &empty_cbs);
}

static void r_resize(pq *q)
{
	static const char *const allowed[] = { "cols", "rows", NULL };
	AUTO_JSON json_t *j = small_body(q, allowed);
	if (!j)
		return;
	json_t *c = json_object_get(j, "cols"), *r = json_object_get(j, "rows");
	if (!json_is_integer(c) || !json_is_integer(r) || json_integer_value(c) < 1 ||
	    json_integer_value(c) > 65535 || json_integer_value(r) < 1 ||
	    json_integer_value(r) > 65535) {
		pq_error(q, 400, "bad_request", "want {\"cols\": 1..65535, \"rows\": 1..65535}");
		return;
	}
	pargs a;
	pargs_begin(&a, 3);
	pargs_uint(&a, "pid", (uint64_t)q->pid);
	pargs_uint(&a, "cols", (uint64_t)json_integer_value(c));
	pargs_uint(&a, "rows", (uint64_t)json_integer_value(r));
	pq_call(q, "proc.resize", &a, &empty_cbs);
}

/* ---- stdin: the body goes to the process within the agent's credit ---- */

static void in_pump(pq *q)
{
	while (!q->in_done && q->op) {
		sbx_err e;
		sbx_err_clear(&e);
		size_t left = q->in_len - q->in_off;
		int n = sup_core_call_send(q->op, SBX_CH_STDIN, q->in + q->in_off, left, true, &e);
		if (n < 0 || (size_t)n == left) {
			/* Done, or the stream is gone: its END or ERR tells. */
			q->in_done = true;
			return;
		}
		if (n == 0)
			return; /* on_writable brings us back */
		q->in_off += (size_t)n;
	}
}

static void in_writable(void *ud)
{
	in_pump(ud);
}

static void in_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	pq *q = ud;
	q->op = NULL;
	if (rc < 0) {
		pq_fail(q, err);
		return;
	}
	uint64_t w = 0;
	sbx_err e;
	sbx_err_clear(&e);
	if (mp_uint(result, "written", q->in_len, &w, &e) < 0) {
		agent_broke(q, &e);
		return;
	}
	pq_reply(q, 200, json_pack("{s:I}", "written", (json_int_t)w));
}

static const sup_core_call_cbs in_cbs = { .on_done = in_done, .on_writable = in_writable };

static void r_stdin(pq *q)
{
	static const char *const allowed[] = { "eof", NULL };
	struct evkeyvalq kv;
	if (parse_query(q, &kv, allowed) < 0)
		return;
	const char *eof = evhttp_find_header(&kv, "eof");
	bool close_in = eof && (strcmp(eof, "1") == 0 || strcmp(eof, "true") == 0);
	bool bad = eof && !close_in && strcmp(eof, "0") != 0 && strcmp(eof, "false") != 0;
	evhttp_clear_headers(&kv);
	if (bad) {
		pq_error(q, 400, "bad_request", "want eof=0|1");
		return;
	}
	struct evbuffer *body = evhttp_request_get_input_buffer(q->req);
	q->in_len = evbuffer_get_length(body);
	if (q->in_len > q->p->max_body) {
		char msg[128];
		snprintf(msg, sizeof(msg), "request body of %zu bytes is over the limit of %zu",
			 q->in_len, q->p->max_body);
		pq_error(q, 413, "too_large", msg);
		return;
	}
	/* The body stays in the request's buffer until the reply. */
	q->in = q->in_len ? evbuffer_pullup(body, -1) : (const uint8_t *)"";
	if (!q->in) {
		pq_error(q, 500, "internal", "out of memory");
		return;
	}
	pargs a;
	pargs_begin(&a, 2);
	pargs_uint(&a, "pid", (uint64_t)q->pid);
	sbx_proto_pack_str(&a.pk, "eof");
	if (close_in)
		msgpack_pack_true(&a.pk);
	else
		msgpack_pack_false(&a.pk);
	if (pq_call(q, "proc.stdin", &a, &in_cbs) == 0)
		in_pump(q);
}

/* ---- output: proc.get (pid and offset checked), then proc.output as SSE ---- */

static void out_finish(pq *q)
{
	if (q->op) {
		sup_op_cancel(q->op);
		q->op = NULL;
	}
	pq_log(q, 200);
	sup_stream_end(q->s);
	q->s = NULL;
	pq_free(q);
}

static void out_error(pq *q, const char *code, const char *msg)
{
	sup_stream_json(q->s, "error", sup_api_render_error(code, msg));
	out_finish(q);
}

/* Give the agent's credit back while the reader keeps up; else retry. */
static void out_settle(pq *q)
{
	if (!q->owed || !q->op)
		return;
	if (sup_stream_backlog(q->s) < SUP_STREAM_HWM) {
		size_t c = q->owed;
		q->owed = 0;
		sup_op_consumed(q->op, c);
		return;
	}
	struct timeval tv = { 0, PQ_RETRY_MS * 1000 };
	evtimer_add(q->retry, &tv);
}

static void out_retry(evutil_socket_t fd, short what, void *ud)
{
	(void)fd;
	(void)what;
	out_settle(ud);
}

static void out_data(const uint8_t *p, size_t n, size_t cost, void *ud)
{
	pq *q = ud;
	q->owed += cost;
	if (n) {
		size_t bl;
		SBX_AUTO_FREE char *b = sup_base64_encode(p, n, &bl);
		json_t *o = b ? json_pack("{s:I,s:s%}", "offset", (json_int_t)q->off, "data", b, bl)
			      : NULL;
		if (!o) {
			out_error(q, "internal", "out of memory");
			return;
		}
		sup_stream_json(q->s, "output", o);
		q->off += n;
	}
	out_settle(q);
}

static void out_event(const msgpack_object *map, size_t cost, void *ud)
{
	pq *q = ud;
	q->owed += cost;
	const msgpack_object *g = sbx_proto_map_get(map, "gap");
	if (g) {
		uint64_t from = 0, to = 0;
		sbx_err e;
		sbx_err_clear(&e);
		if (mp_uint(g, "from", UINT64_MAX / 2, &from, &e) < 0 ||
		    mp_uint(g, "to", UINT64_MAX / 2, &to, &e) < 0 || from != q->off || to <= from) {
			sup_warn("sandbox %s: proc.output: a gap that does not follow the data", q->id);
			out_error(q, "agent_error", "the agent reported an inconsistent gap");
			return;
		}
		sup_stream_json(q->s, "gap", json_pack("{s:I,s:I}", "from", (json_int_t)from, "to",
						       (json_int_t)to));
		q->off = to;
	}
	out_settle(q);
}

static void out_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	pq *q = ud;
	q->op = NULL;
	q->owed = 0;
	if (rc < 0) {
		const char *code;
		pq_status(err->code, &code);
		out_error(q, code, err->msg[0] ? err->msg : code);
		return;
	}
	sbx_err e;
	sbx_err_clear(&e);
	uint64_t next = 0;
	json_t *o = NULL;
	if (mp_uint(result, "next_offset", UINT64_MAX / 2, &next, &e) == 0 && next != q->off)
		sbx_err_set(&e, -EPROTO, "proc.output: next_offset %llu but the data ended at %llu",
			    (unsigned long long)next, (unsigned long long)q->off);
	else if (e.code == 0)
		o = desc_json(result, false, q->pid, &e);
	if (!o) {
		sup_warn("sandbox %s: %s", q->id, e.msg);
		out_error(q, "agent_error", e.msg);
		return;
	}
	json_object_set_new(o, "next_offset", json_integer((json_int_t)next));
	sup_stream_json(q->s, "end", o);
	out_finish(q);
}

static const sup_core_call_cbs out_cbs = {
	.on_data = out_data, .on_event = out_event, .on_done = out_done
};

static void out_gone(void *ud)
{
	pq *q = ud;
	sup_info("http %s sandbox %s pid %ld: client went away at offset %llu", route_name(q->rt),
		 q->id, q->pid, (unsigned long long)q->off);
	out_finish(q);
}

static void out_credit(size_t cost, void *ud)
{
	(void)cost;
	(void)ud; /* only JSON events, which carry no cost of sup_stream's */
}

static const sup_stream_cbs out_stream_cbs = { .on_credit = out_credit, .on_gone = out_gone };

static void out_checked(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	pq *q = ud;
	q->op = NULL;
	if (rc < 0) {
		pq_fail(q, err);
		return;
	}
	sbx_err e;
	sbx_err_clear(&e);
	json_t *d = desc_json(result, true, q->pid, &e);
	if (!d) {
		agent_broke(q, &e);
		return;
	}
	json_int_t end = json_integer_value(json_object_get(json_object_get(d, "output"), "end"));
	json_decref(d);
	if (q->off > (uint64_t)end) {
		char msg[128];
		snprintf(msg, sizeof(msg), "offset %llu is beyond the end of the output (%lld)",
			 (unsigned long long)q->off, (long long)end);
		pq_error(q, 400, "bad_request", msg);
		return;
	}
	if (q->gone) {
		event_free(q->gone);
		q->gone = NULL;
	}
	q->retry = evtimer_new(q->p->base, out_retry, q);
	const char *accept = evhttp_find_header(evhttp_request_get_input_headers(q->req), "Accept");
	sup_stream_fmt fmt = sup_stream_wanted(accept);
	if (!q->retry) {
		pq_error(q, 500, "internal", "out of memory");
		return;
	}
	q->s = sup_stream_start(q->req, fmt == SUP_STREAM_NONE ? SUP_STREAM_SSE : fmt,
				SUP_STREAM_HWM, &out_stream_cbs, q);
	if (!q->s) {
		pq_error(q, 500, "internal", "out of memory");
		return;
	}
	pargs a;
	pargs_begin(&a, 3);
	pargs_uint(&a, "pid", (uint64_t)q->pid);
	pargs_uint(&a, "offset", q->off);
	sbx_proto_pack_str(&a.pk, "follow");
	if (q->follow)
		msgpack_pack_true(&a.pk);
	else
		msgpack_pack_false(&a.pk);
	rc = sup_core_call(q->p->core, q->id, "proc.output", a.sb.data, a.sb.size, &out_cbs, q,
			   &q->op, &e);
	msgpack_sbuffer_destroy(&a.sb);
	if (rc < 0) {
		const char *code;
		pq_status(e.code, &code);
		out_error(q, code, e.msg[0] ? e.msg : code);
	}
}

static const sup_core_call_cbs out_check_cbs = { .on_done = out_checked };

static void r_output(pq *q)
{
	static const char *const allowed[] = { "offset", "follow", NULL };
	struct evkeyvalq kv;
	if (parse_query(q, &kv, allowed) < 0)
		return;
	const char *off = evhttp_find_header(&kv, "offset");
	const char *fol = evhttp_find_header(&kv, "follow");
	bool ok = true;
	if (off) {
		char *end;
		errno = 0;
		unsigned long long v = strtoull(off, &end, 10);
		ok = off[0] >= '0' && off[0] <= '9' && !*end && !errno && v <= UINT64_MAX / 2;
		q->off = v;
	}
	if (ok && fol) {
		if (strcmp(fol, "1") == 0 || strcmp(fol, "true") == 0)
			q->follow = true;
		else if (strcmp(fol, "0") == 0 || strcmp(fol, "false") == 0)
			q->follow = false;
		else
			ok = false;
	}
	evhttp_clear_headers(&kv);
	if (!ok) {
		pq_error(q, 400, "bad_request",
			 "want offset=<bytes> (a non-negative integer) and follow=0|1");
		return;
	}
	pargs a;
	pargs_begin(&a, 1);
	pargs_uint(&a, "pid", (uint64_t)q->pid);
	pq_call(q, "proc.get", &a, &out_check_cbs);
}

void sup_procs_handle(sup_procs *p, sup_procs_route rt, struct evhttp_request *req,
		      const char *id)
{
	pq *q = calloc(1, sizeof(*q));
	if (!q) {
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	q->p = p;
	q->req = req;
	q->rt = rt;
	clock_gettime(CLOCK_MONOTONIC, &q->start);
	snprintf(q->id, sizeof(q->id), "%s", id);
	if (rt != SUP_PROCS_START && rt != SUP_PROCS_LIST && path_pid(q) < 0)
		return;
	switch (rt) {
	case SUP_PROCS_START: r_start(q); break;
	case SUP_PROCS_LIST: r_list(q); break;
	case SUP_PROCS_GET: r_pid_only(q, "proc.get"); break;
	case SUP_PROCS_KILL: r_pid_only(q, "proc.kill"); break;
	case SUP_PROCS_OUTPUT: r_output(q); break;
	case SUP_PROCS_SIGNAL: r_signal(q); break;
	case SUP_PROCS_RESIZE: r_resize(q); break;
	case SUP_PROCS_STDIN: r_stdin(q); break;
	default: pq_error(q, 404, "not_found", "no such route"); break;
	}
}
