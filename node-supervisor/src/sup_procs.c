#include "sup_procs.h"
#include "sup_procs_int.h"

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

const char *sup_procs_route_name(sup_procs_route rt)
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

static void pq_log_tag(const void *owner, char *buf, size_t size)
{
	const sup_pq *q = owner;
	snprintf(buf, size, " pid %ld", q->pid);
}

static void pq_release(void *owner)
{
	sup_pq *q = owner;
	if (q->retry)
		event_free(q->retry);
	free(q);
}

/* E2BIG is sup_api_status's too_large; ENAMETOOLONG stays its 500 here. */
static const sup_req_kind pq_kind = {
	.errmap = NULL,
	.reasons = false,
	.log_tag = pq_log_tag,
	.release = pq_release,
};

/* start, get, kill: the answer is a description. */
static void desc_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	if (!sup_req_settled(&q->r, rc, err, NULL))
		return;
	sbx_err e;
	sbx_err_clear(&e);
	json_t *o = sup_procs_desc_json(result, q->rt == SUP_PROCS_GET, q->rt == SUP_PROCS_START ? 0 : q->pid,
			      &e);
	if (!o) {
		sup_req_broke(&q->r, &e, NULL);
		return;
	}
	if (q->rt == SUP_PROCS_KILL) {
		json_t *st = json_object_get(o, "state");
		bool exited = st && strcmp(json_string_value(st), "exited") == 0;
		json_decref(o);
		sup_req_reply(&q->r, exited ? 204 : 202, NULL);
		return;
	}
	if (q->rt == SUP_PROCS_START)
		q->pid = (long)json_integer_value(json_object_get(o, "pid"));
	sup_req_reply(&q->r, q->rt == SUP_PROCS_START ? 201 : 200, o);
}

static const sup_core_call_cbs desc_cbs = { .on_done = desc_done };

static void list_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	if (!sup_req_settled(&q->r, rc, err, NULL))
		return;
	sbx_err e;
	sbx_err_clear(&e);
	const msgpack_object *arr = result ? sbx_proto_map_get(result, "processes") : NULL;
	if (!arr || arr->type != MSGPACK_OBJECT_ARRAY || arr->via.array.size > 4096) {
		sbx_err_set(&e, -EPROTO, "proc.list: \"processes\" missing or too long");
		sup_req_broke(&q->r, &e, NULL);
		return;
	}
	json_t *a = json_array();
	json_t *body = a ? json_pack("{s:o}", "processes", a) : NULL;
	if (!body) {
		sup_req_error(&q->r, 500, "internal", "out of memory");
		return;
	}
	for (uint32_t i = 0; i < arr->via.array.size; i++) {
		json_t *o = sup_procs_desc_json(&arr->via.array.ptr[i], false, 0, &e);
		if (!o) {
			json_decref(body);
			sup_req_broke(&q->r, &e, NULL);
			return;
		}
		json_array_append_new(a, o);
	}
	sup_req_reply(&q->r, 200, body);
}

static const sup_core_call_cbs list_cbs = { .on_done = list_done };

/* signal, resize: {} on success. */
static void empty_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pq *q = ud;
	(void)result;
	if (!sup_req_settled(&q->r, rc, err, NULL))
		return;
	sup_req_reply(&q->r, 200, json_object());
}

static const sup_core_call_cbs empty_cbs = { .on_done = empty_done };

/* ---- request parsing ---- */

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
static int path_pid(sup_pq *q)
{
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(q->r.req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	const char *p = path ? strstr(path, "/processes/") : NULL;
	if (!p) {
		sup_req_error(&q->r, 400, "bad_request", "no pid in the path");
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
		sup_req_error(&q->r, 400, "bad_request", msg);
		return -EINVAL;
	}
	long v = strtol(p, NULL, 10);
	if (v < 1 || v > INT_MAX) {
		snprintf(msg, sizeof(msg), "no background process %.*s", (int)n, p);
		sup_req_error(&q->r, 404, "not_found", msg);
		return -ENOENT;
	}
	q->pid = v;
	return 0;
}

/* Query string: only the allowed keys, each at most once. NULL: none. On
 * error the reply is sent and -EINVAL returned. */
int sup_pq_query(sup_pq *q, struct evkeyvalq *kv, const char *const *allowed)
{
	TAILQ_INIT(kv);
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(q->r.req);
	const char *qs = uri ? evhttp_uri_get_query(uri) : NULL;
	if (!qs)
		return 0;
	char msg[160];
	if (evhttp_parse_query_str(qs, kv) < 0) {
		sup_req_error(&q->r, 400, "bad_request", "malformed query string");
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
			sup_req_error(&q->r, 400, "bad_request", msg);
			return -EINVAL;
		}
	}
	return 0;
}

/* ---- routes ---- */

/* Pull the background-only fields out of the exec body; 0 or the reply sent. */
static int start_extras(sup_pq *q, json_t *j, sup_req_args *extra, size_t *nextra, bool *has_stdin)
{
	json_t *tag = json_object_get(j, "tag");
	json_t *buf = json_object_get(j, "buffer");
	json_t *in = json_object_get(j, "stdin");
	*nextra = 0;
	if (json_object_get(j, "max_output") || json_object_get(j, "stdin_b64")) {
		sup_req_error(&q->r, 400, "bad_request",
			 "max_output and stdin_b64 do not apply to background processes (see buffer; stdin: true and POST .../stdin)");
		return -EINVAL;
	}
	if (in && !json_is_boolean(in)) {
		sup_req_error(&q->r, 400, "bad_request",
			 "field \"stdin\": want true (then write with POST .../stdin) or false");
		return -EINVAL;
	}
	*has_stdin = in && json_is_true(in);
	if (tag && !json_is_null(tag) &&
	    (!json_is_string(tag) || json_string_length(tag) > PQ_MAX_TAG)) {
		sup_req_error(&q->r, 400, "bad_request", "field \"tag\": want a string of at most 256 bytes");
		return -EINVAL;
	}
	if (buf && (!json_is_integer(buf) || json_integer_value(buf) < 4096 ||
		    json_integer_value(buf) > 67108864)) {
		sup_req_error(&q->r, 400, "bad_request", "field \"buffer\": want 4096..67108864 (bytes)");
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
		sup_req_args_uint(extra, "buffer", (uint64_t)json_integer_value(buf));
		++*nextra;
	}
	json_object_del(j, "tag");
	json_object_del(j, "buffer");
	json_object_del(j, "stdin");
	return 0;
}

/* The exec args (enc) with the extra pairs appended, into a. */
static int join_args(const msgpack_sbuffer *enc, const sup_req_args *extra, size_t nextra, sup_req_args *a)
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
	sup_req_args_begin(a, m->size + nextra);
	for (uint32_t i = 0; i < m->size; i++) {
		msgpack_pack_object(&a->pk, m->ptr[i].key);
		msgpack_pack_object(&a->pk, m->ptr[i].val);
	}
	msgpack_unpacked_destroy(&u);
	if (extra->sb.size)
		msgpack_sbuffer_write(&a->sb, extra->sb.data, extra->sb.size);
	return 0;
}

static void r_start(sup_pq *q)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(q->r.req);
	size_t len = evbuffer_get_length(in);
	json_error_t je;
	SUP_REQ_AUTO_JSON json_t *j = json_loadb(len ? (const char *)evbuffer_pullup(in, -1) : "", len,
					 JSON_REJECT_DUPLICATES, &je);
	char msg[256];
	if (!j || !json_is_object(j)) {
		snprintf(msg, sizeof(msg), "body must be a JSON object with \"argv\" or \"cmd\"%s%s",
			 j ? "" : ": ", j ? "" : je.text);
		sup_req_error(&q->r, 400, "bad_request", msg);
		return;
	}
	sup_req_args extra;
	size_t nextra;
	bool has_stdin = false;
	if (start_extras(q, j, &extra, &nextra, &has_stdin) < 0)
		return;
	SBX_AUTO_FREE char *rest = json_dumps(j, SUP_API_JSON_DUMP);
	sup_exec_spec spec;
	sbx_err err;
	sbx_err_clear(&err);
	if (!rest) {
		msgpack_sbuffer_destroy(&extra.sb);
		sup_req_error(&q->r, 500, "internal", "out of memory");
		return;
	}
	if (sup_api_parse_exec(rest, strlen(rest), &spec, &err) < 0) {
		msgpack_sbuffer_destroy(&extra.sb);
		sup_req_fail(&q->r, &err, NULL);
		return;
	}
	spec.has_stdin = has_stdin;
	const sup_env *env = NULL;
	if (sup_core_command_prepare(q->p->core, q->r.id, &spec, &env, &err) < 0) {
		/* Answered as exec answers it (root: 403 forbidden). */
		const char *code;
		int status = sup_api_status(err.code, &code);
		sup_exec_spec_free(&spec);
		msgpack_sbuffer_destroy(&extra.sb);
		sup_req_error(&q->r, status, code, err.msg);
		return;
	}
	msgpack_sbuffer enc;
	msgpack_sbuffer_init(&enc);
	int rc = sup_agent_encode_exec_args(&spec, env, &enc, &err);
	sup_exec_spec_free(&spec);
	sup_req_args a;
	memset(&a, 0, sizeof(a));
	if (rc == 0 && join_args(&enc, &extra, nextra, &a) < 0)
		rc = sbx_err_set(&err, -ENOMEM, "encoding the arguments");
	msgpack_sbuffer_destroy(&enc);
	msgpack_sbuffer_destroy(&extra.sb);
	if (rc < 0) {
		sup_req_fail(&q->r, &err, NULL);
		return;
	}
	sup_req_call(&q->r, "proc.start", &a, &desc_cbs, NULL);
}

static void r_list(sup_pq *q)
{
	static const char *const allowed[] = { "tag", NULL };
	struct evkeyvalq kv;
	if (sup_pq_query(q, &kv, allowed) < 0)
		return;
	const char *tag = evhttp_find_header(&kv, "tag");
	sup_req_args a;
	if (tag && strlen(tag) > PQ_MAX_TAG) {
		evhttp_clear_headers(&kv);
		sup_req_error(&q->r, 400, "bad_request", "tag: at most 256 bytes");
		return;
	}
	sup_req_args_begin(&a, tag ? 1 : 0);
	if (tag) {
		sup_req_args_str(&a, "tag", tag, strlen(tag));
	}
	evhttp_clear_headers(&kv);
	sup_req_call(&q->r, "proc.list", &a, &list_cbs, NULL);
}

static void r_pid_only(sup_pq *q, const char *opname)
{
	sup_req_args a;
	sup_req_args_begin(&a, 1);
	sup_req_args_uint(&a, "pid", (uint64_t)q->pid);
	sup_req_call(&q->r, opname, &a, &desc_cbs, NULL);
}

static void r_signal(sup_pq *q)
{
	static const char *const allowed[] = { "signal", NULL };
	SUP_REQ_AUTO_JSON json_t *j = sup_req_body_obj(&q->r, PQ_MAX_SMALL_BODY, allowed);
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
		sup_req_error(&q->r, 400, "bad_request",
			 "field \"signal\": want a signal name (\"TERM\", \"SIGINT\", \"RTMIN+1\") or number (1..31, 34..64)");
		return;
	}
	sup_req_args a;
	sup_req_args_begin(&a, 2);
	sup_req_args_uint(&a, "pid", (uint64_t)q->pid);
	sup_req_args_uint(&a, "signal", (uint64_t)sig);
	sup_req_call(&q->r, "proc.signal", &a, &empty_cbs, NULL);
}

static void r_resize(sup_pq *q)
{
	static const char *const allowed[] = { "cols", "rows", NULL };
	SUP_REQ_AUTO_JSON json_t *j = sup_req_body_obj(&q->r, PQ_MAX_SMALL_BODY, allowed);
	if (!j)
		return;
	json_t *c = json_object_get(j, "cols"), *r = json_object_get(j, "rows");
	if (!json_is_integer(c) || !json_is_integer(r) || json_integer_value(c) < 1 ||
	    json_integer_value(c) > 65535 || json_integer_value(r) < 1 ||
	    json_integer_value(r) > 65535) {
		sup_req_error(&q->r, 400, "bad_request", "want {\"cols\": 1..65535, \"rows\": 1..65535}");
		return;
	}
	sup_req_args a;
	sup_req_args_begin(&a, 3);
	sup_req_args_uint(&a, "pid", (uint64_t)q->pid);
	sup_req_args_uint(&a, "cols", (uint64_t)json_integer_value(c));
	sup_req_args_uint(&a, "rows", (uint64_t)json_integer_value(r));
	sup_req_call(&q->r, "proc.resize", &a, &empty_cbs, NULL);
}

/* ---- stdin: the body goes to the process within the agent's credit ---- */

static void in_pump(sup_pq *q)
{
	while (!q->in_done && q->r.op) {
		sbx_err e;
		sbx_err_clear(&e);
		size_t left = q->in_len - q->in_off;
		int n = sup_core_call_send(q->r.op, SBX_CH_STDIN, q->in + q->in_off, left, true, &e);
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
	sup_pq *q = ud;
	if (!sup_req_settled(&q->r, rc, err, NULL))
		return;
	uint64_t w = 0;
	sbx_err e;
	sbx_err_clear(&e);
	if (sup_procs_mp_uint(result, "written", q->in_len, &w, &e) < 0) {
		sup_req_broke(&q->r, &e, NULL);
		return;
	}
	sup_req_reply(&q->r, 200, json_pack("{s:I}", "written", (json_int_t)w));
}

/* The agent gives credit back as the process reads: a process that reads
 * none of it for the idle deadline ends the request (504). */
static const sup_core_call_cbs in_cbs = {
	.on_done = in_done, .on_writable = in_writable, .wait = SUP_AGENT_WAIT_SENDS
};

static void r_stdin(sup_pq *q)
{
	static const char *const allowed[] = { "eof", NULL };
	struct evkeyvalq kv;
	if (sup_pq_query(q, &kv, allowed) < 0)
		return;
	const char *eof = evhttp_find_header(&kv, "eof");
	bool close_in = eof && (strcmp(eof, "1") == 0 || strcmp(eof, "true") == 0);
	bool bad = eof && !close_in && strcmp(eof, "0") != 0 && strcmp(eof, "false") != 0;
	evhttp_clear_headers(&kv);
	if (bad) {
		sup_req_error(&q->r, 400, "bad_request", "want eof=0|1");
		return;
	}
	struct evbuffer *body = evhttp_request_get_input_buffer(q->r.req);
	q->in_len = evbuffer_get_length(body);
	if (q->in_len > q->p->max_body) {
		char msg[128];
		snprintf(msg, sizeof(msg), "request body of %zu bytes is over the limit of %zu",
			 q->in_len, q->p->max_body);
		sup_req_error(&q->r, 413, "too_large", msg);
		return;
	}
	/* The body stays in the request's buffer until the reply. */
	q->in = q->in_len ? evbuffer_pullup(body, -1) : (const uint8_t *)"";
	if (!q->in) {
		sup_req_error(&q->r, 500, "internal", "out of memory");
		return;
	}
	sup_req_args a;
	sup_req_args_begin(&a, 2);
	sup_req_args_uint(&a, "pid", (uint64_t)q->pid);
	sup_req_args_bool(&a, "eof", close_in);
	if (sup_req_call(&q->r, "proc.stdin", &a, &in_cbs, NULL) == 0)
		in_pump(q);
}

void sup_procs_handle(sup_procs *p, sup_procs_route rt, struct evhttp_request *req,
		      const char *id)
{
	sup_pq *q = calloc(1, sizeof(*q));
	if (!q) {
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	q->p = p;
	q->rt = rt;
	sup_req_init(&q->r, &pq_kind, q, p->core, p->base, req, sup_procs_route_name(rt), id);
	if (rt != SUP_PROCS_START && rt != SUP_PROCS_LIST && path_pid(q) < 0)
		return;
	switch (rt) {
	case SUP_PROCS_START: r_start(q); break;
	case SUP_PROCS_LIST: r_list(q); break;
	case SUP_PROCS_GET: r_pid_only(q, "proc.get"); break;
	case SUP_PROCS_KILL: r_pid_only(q, "proc.kill"); break;
	case SUP_PROCS_OUTPUT: sup_procs_output(q); break;
	case SUP_PROCS_SIGNAL: r_signal(q); break;
	case SUP_PROCS_RESIZE: r_resize(q); break;
	case SUP_PROCS_STDIN: r_stdin(q); break;
	default: sup_req_error(&q->r, 404, "not_found", "no such route"); break;
	}
}
