#include "sup_http.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/util.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include "sup_httpin.h"
#include "sup_log.h"
#include "sup_procs.h"
#include "sup_stream.h"
#include "sup_token.h"

typedef struct rq rq;
TAILQ_HEAD(rq_list, rq);

struct sup_http {
	struct event_base *base;
	sup_core *core;
	sup_http_cfg cfg;
	struct evhttp *http;
	struct evhttp_bound_socket *sock;
	uint16_t port;
	bool stopping;
	struct rq_list waiting;
	sup_procs *procs; /* background processes (sup_procs answers those requests) */
	sup_httpin_cfg in_cfg; /* which requests stream their body (uploads) */
};

/* One request, from routing to its single reply. Whoever sends the reply
 * frees it (rq_reply), except while the core call that may answer
 * synchronously has not returned (in_call): rq_after_call frees it then. */
struct rq {
	sup_http *h;
	struct evhttp_request *req;
	char method[8];
	char path[128];
	struct timespec start;
	sup_op *op;            /* the core operation waited on */
	sup_stream *stream;    /* a streamed reply in progress */
	uint64_t streamed[2];  /* stdout, stderr bytes streamed */
	struct event *gone;    /* peer hung up while waiting */
	const sup_tenant *who; /* the token's tenant, held until the request ends */
	bool in_call;
	bool replied;
	bool linked;           /* in h->waiting */
	TAILQ_ENTRY(rq) link;
};

typedef struct route {
	enum evhttp_cmd_type method;
	const char *pattern;
	void (*handler)(rq *r, const char *id);
} route;

/* ---- replies ---- */

static const char *reason_of(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 413: return "Payload Too Large";
	case 499: return "Client Closed Request";
	case 501: return "Not Implemented";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return "Status";
	}
}

static const char *method_name(enum evhttp_cmd_type m)
{
	switch (m) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	case EVHTTP_REQ_TRACE: return "TRACE";
	case EVHTTP_REQ_CONNECT: return "CONNECT";
	case EVHTTP_REQ_PATCH: return "PATCH";
	}
	return "?";
}

static int dump_to_evbuffer(const char *buf, size_t size, void *data)
{
	return evbuffer_add(data, buf, size);
}

/* Send status with body (NULL: none); takes the reference. */
static void send_json(struct evhttp_request *req, int status, json_t *body)
{
	struct evbuffer *buf = evbuffer_new();
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	if (body && buf) {
		evhttp_add_header(oh, "Content-Type", "application/json");
		if (json_dump_callback(body, dump_to_evbuffer, buf, SUP_API_JSON_DUMP) < 0 ||
		    evbuffer_add(buf, "\n", 1) < 0) {
			evbuffer_drain(buf, evbuffer_get_length(buf));
			status = 500;
			evbuffer_add_printf(buf, "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}\n");
		}
	}
	json_decref(body);
	evhttp_send_reply(req, status, reason_of(status), buf);
	if (buf)
		evbuffer_free(buf);
}

static void rq_free(rq *r)
{
	if (r->linked)
		TAILQ_REMOVE(&r->h->waiting, r, link);
	if (r->gone)
		event_free(r->gone);
	sup_tenant_release(r->who);
	free(r);
}

static void rq_reply(rq *r, int status, json_t *body)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double ms = (double)(now.tv_sec - r->start.tv_sec) * 1e3 +
		    (double)(now.tv_nsec - r->start.tv_nsec) / 1e6;
	sup_log(status >= 500 && status != 503 ? SUP_LOG_WARN : SUP_LOG_INFO, "http %s %s %d %.3fms",
		r->method, r->path, status, ms);
	if (r->gone) {
		/* Before evhttp may close the fd under it. */
		event_free(r->gone);
		r->gone = NULL;
	}
	r->replied = true;
	send_json(r->req, status, body);
	if (!r->in_call)
		rq_free(r);
}

static void rq_error(rq *r, int status, const char *code, const char *msg)
{
	rq_reply(r, status, sup_api_render_error(code, msg));
}

static void rq_err(rq *r, const sbx_err *err)
{
	const char *code;
	int status = sup_api_status(err->code, &code);
	rq_error(r, status, code, err->msg[0] ? err->msg : code);
}

/* ---- waiting on the core ---- */

static void on_client_gone(evutil_socket_t fd, short what, void *ud)
{
	rq *r = ud;
	(void)fd;
	(void)what;
	sup_info("http %s %s: client went away, cancelling", r->method, r->path);
	if (r->op) {
		sup_op_cancel(r->op);
		r->op = NULL;
	}
	/* Nobody reads this; sending it lets evhttp find the connection dead
	 * and free it together with the request. */
	rq_error(r, 499, "cancelled", "client closed the connection");
}

/* Start of a core call that may answer through a callback. */
static void rq_before_call(rq *r)
{
	r->in_call = true;
}

/* The core call returned: answer its error, finish a synchronous answer,
 * or wait for the callback. */
static void rq_after_call(rq *r, int rc, sup_op *op, const sbx_err *err)
{
	r->in_call = false;
	if (rc < 0) {
		rq_err(r, err);
		return;
	}
	if (r->replied) {
		rq_free(r);
		return;
	}
	r->op = op;
	TAILQ_INSERT_TAIL(&r->h->waiting, r, link);
	r->linked = true;
	r->gone = sup_httpin_watch_hangup(r->h->base, r->req, on_client_gone, r);
}

/* ---- bodies ---- */

/* Contiguous body ("" when empty), or NULL with a 413 sent. */
static const char *body_of(rq *r, size_t *len)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	*len = evbuffer_get_length(in);
	if (*len > r->h->cfg.max_body) {
		char msg[128];
		snprintf(msg, sizeof(msg), "request body of %zu bytes is over the limit of %zu", *len,
			 r->h->cfg.max_body);
		rq_error(r, 413, "too_large", msg);
		return NULL;
	}
	if (*len == 0)
		return "";
	return (const char *)evbuffer_pullup(in, -1);
}

/* ---- handlers ---- */

static void h_healthz(rq *r, const char *id)
{
	(void)id;
	rq_reply(r, 200, json_pack("{s:s}", "status", "ok"));
}

static void add_view(const sup_sandbox_view *v, void *ud)
{
	json_array_append_new(ud, sup_api_render_sandbox(v));
}

static void h_list(rq *r, const char *id)
{
	(void)id;
	json_t *arr = json_array();
	if (!arr) {
		rq_error(r, 500, "internal", "out of memory");
		return;
	}
	sup_core_list(r->h->core, r->who, add_view, arr);
	rq_reply(r, 200, json_pack("{s:o}", "sandboxes", arr));
}

static void h_get(rq *r, const char *id)
{
	sup_sandbox_view v;
	sbx_err err;
	sbx_err_clear(&err);
	if (sup_core_get(r->h->core, r->who, id, &v, &err) < 0) {
		rq_err(r, &err);
		return;
	}
	rq_reply(r, 200, sup_api_render_sandbox(&v));
}

static void h_pools(rq *r, const char *id)
{
	(void)id;
	sup_core *core = r->h->core;
	json_t *arr = json_array();
	for (size_t i = 0; arr && i < sup_core_pool_count(core); i++) {
		sup_pool_stats s;
		sup_core_pool_stats(core, i, &s);
		json_array_append_new(arr, json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "image", s.image,
						     "isolation", sup_isolation_names[s.isolation],
						     "size", (json_int_t)s.size, "ready",
						     (json_int_t)s.ready, "creating",
						     (json_int_t)s.creating, "waiting",
						     (json_int_t)s.waiting));
	}
	rq_reply(r, 200, arr ? json_pack("{s:o}", "pools", arr) : NULL);
}

static void create_done(int rc, const sup_sandbox_view *v, const sbx_err *err, void *ud)
{
	rq *r = ud;
	r->op = NULL;
	if (rc < 0)
		rq_err(r, err);
	else
		rq_reply(r, 201, sup_api_render_sandbox(v));
}

static void h_create(rq *r, const char *id)
{
	(void)id;
	size_t len;
	const char *body = body_of(r, &len);
	if (!body)
		return;
	sup_create_req cr;
	sbx_err err;
	sbx_err_clear(&err);
	if (sup_api_parse_create(body, len, &r->h->cfg.limits, &cr, &err) < 0) {
		rq_err(r, &err);
		return;
	}
	sup_op *op = NULL;
	rq_before_call(r);
	int rc = sup_core_create(r->h->core, r->who, &cr, create_done, r, &op, &err);
	sup_create_req_free(&cr);
	rq_after_call(r, rc, op, &err);
}

static void delete_done(int rc, const sbx_err *err, void *ud)
{
	rq *r = ud;
	r->op = NULL;
	if (rc < 0)
		rq_err(r, err);
	else
		rq_reply(r, 204, NULL);
}

static void h_delete(rq *r, const char *id)
{
	sup_op *op = NULL;
	sbx_err err;
	sbx_err_clear(&err);
	rq_before_call(r);
	int rc = sup_core_delete(r->h->core, r->who, id, delete_done, r, &op, &err);
	rq_after_call(r, rc, op, &err);
}

static void exec_done(int rc, const sup_exec_result *res, const sbx_err *err, void *ud)
{
	rq *r = ud;
	r->op = NULL;
	if (rc == -ETIME && res) {
		/* the agent let the deadline pass: the timed-out result, 504 */
		json_t *body = sup_api_render_exec_timeout(res, err->msg);
		if (body)
			rq_reply(r, 504, body);
		else
			rq_error(r, 500, "internal", "out of memory rendering the result");
		return;
	}
	if (rc < 0) {
		rq_err(r, err);
		return;
	}
	json_t *body = sup_api_render_exec(res);
	if (!body) {
		rq_error(r, 500, "internal", "out of memory rendering the result");
		return;
	}
	rq_reply(r, 200, body);
}

/* ---- streamed exec (SSE / NDJSON) ---- */

static void rq_unwait(rq *r)
{
	if (r->gone) {
		event_free(r->gone);
		r->gone = NULL;
	}
	if (r->linked) {
		TAILQ_REMOVE(&r->h->waiting, r, link);
		r->linked = false;
	}
}

/* The streamed reply is over (status for the log only). */
static void rq_stream_finish(rq *r, int status)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double ms = (double)(now.tv_sec - r->start.tv_sec) * 1e3 +
		    (double)(now.tv_nsec - r->start.tv_nsec) / 1e6;
	sup_log(SUP_LOG_INFO, "http %s %s %d (stream, %llu+%llu bytes) %.3fms", r->method, r->path,
		status, (unsigned long long)r->streamed[0], (unsigned long long)r->streamed[1], ms);
	if (r->op) {
		sup_op_cancel(r->op);
		r->op = NULL;
	}
	sup_stream_end(r->stream);
	r->stream = NULL;
	rq_unwait(r);
	sup_tenant_release(r->who);
	free(r);
}

/* Abort a started stream with an error event. */
static void rq_stream_error(rq *r, int status, const char *code, const char *msg)
{
	sup_stream_json(r->stream, "error", sup_api_render_error(code, msg));
	rq_stream_finish(r, status);
}

static void xs_on_data(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud)
{
	rq *r = ud;
	r->streamed[ch == SUP_CH_STDOUT ? 0 : 1] += n;
	sup_stream_data(r->stream, ch == SUP_CH_STDOUT ? "stdout" : "stderr", p, n, cost);
}

static void xs_on_done(int rc, const sup_exec_status *st, const sbx_err *err, void *ud)
{
	rq *r = ud;
	r->op = NULL;
	if (rc < 0) {
		const char *code;
		int status = sup_api_status(err->code, &code);
		rq_stream_error(r, status, code, err->msg[0] ? err->msg : code);
		return;
	}
	json_t *o = sup_api_render_exit(st, r->streamed[0], r->streamed[1]);
	if (!o) {
		rq_stream_error(r, 500, "internal", "out of memory rendering the result");
		return;
	}
	sup_stream_json(r->stream, "exit", o);
	rq_stream_finish(r, 200);
}

static void xs_on_credit(size_t cost, void *ud)
{
	rq *r = ud;
	if (r->op)
		sup_op_consumed(r->op, cost);
}

static void xs_on_gone(void *ud)
{
	rq *r = ud;
	sup_info("http %s %s: client went away, cancelling the stream", r->method, r->path);
	rq_stream_finish(r, 499);
}

static const sup_core_stream_cbs xs_core_cbs = { .on_data = xs_on_data, .on_done = xs_on_done };
static const sup_stream_cbs xs_stream_cbs = { .on_credit = xs_on_credit, .on_gone = xs_on_gone };

static void exec_streamed(rq *r, const char *id, sup_stream_fmt fmt, sup_exec_spec *spec)
{
	sup_op *op = NULL;
	sbx_err err;
	sbx_err_clear(&err);
	int rc = sup_core_exec_stream(r->h->core, id, spec, &xs_core_cbs, r, &op, &err);
	if (rc < 0) {
		rq_err(r, &err);
		return;
	}
	r->op = op;
	r->stream = sup_stream_start(r->req, fmt, SUP_STREAM_HWM, &xs_stream_cbs, r);
	if (!r->stream) {
		sup_op_cancel(op);
		r->op = NULL;
		rq_error(r, 500, "internal", "out of memory starting the stream");
		return;
	}
	TAILQ_INSERT_TAIL(&r->h->waiting, r, link);
	r->linked = true;
	sup_stream_json(r->stream, "start", json_pack("{s:s}", "encoding", "base64"));
}

static void h_exec(rq *r, const char *id)
{
	size_t len;
	const char *body = body_of(r, &len);
	if (!body)
		return;
	sup_exec_spec spec;
	sbx_err err;
	sbx_err_clear(&err);
	if (sup_api_parse_exec(body, len, &spec, &err) < 0) {
		rq_err(r, &err);
		return;
	}
	sup_stream_fmt fmt = sup_stream_wanted(
		evhttp_find_header(evhttp_request_get_input_headers(r->req), "Accept"));
	if (fmt != SUP_STREAM_NONE) {
		exec_streamed(r, id, fmt, &spec);
		sup_exec_spec_free(&spec);
		return;
	}
	sup_op *op = NULL;
	rq_before_call(r);
	int rc = sup_core_exec(r->h->core, id, &spec, exec_done, r, &op, &err);
	sup_exec_spec_free(&spec);
	rq_after_call(r, rc, op, &err);
}

/* ---- files (sup_files answers and frees the request itself) ---- */

static void files_take(rq *r, const char *id, sup_files_route rt)
{
	sup_files *f = r->h->cfg.files;
	if (!f) {
		rq_error(r, 501, "not_implemented", "the file API is not configured");
		return;
	}
	struct evhttp_request *req = r->req;
	rq_free(r);
	sup_files_handle(f, rt, req, id);
}

static void h_files_get(rq *r, const char *id) { files_take(r, id, SUP_FILES_GET); }
static void h_files_delete(rq *r, const char *id) { files_take(r, id, SUP_FILES_DELETE); }
static void h_files_put(rq *r, const char *id) { files_take(r, id, SUP_FILES_PUT); }
static void h_fs_stat(rq *r, const char *id) { files_take(r, id, SUP_FILES_STAT); }
static void h_fs_list(rq *r, const char *id) { files_take(r, id, SUP_FILES_LIST); }
static void h_fs_mkdir(rq *r, const char *id) { files_take(r, id, SUP_FILES_MKDIR); }
static void h_fs_move(rq *r, const char *id) { files_take(r, id, SUP_FILES_MOVE); }
static void h_fs_chmod(rq *r, const char *id) { files_take(r, id, SUP_FILES_CHMOD); }
static void h_fs_search(rq *r, const char *id) { files_take(r, id, SUP_FILES_SEARCH); }
static void h_fs_watch(rq *r, const char *id) { files_take(r, id, SUP_FILES_WATCH); }

/* ---- background processes (sup_procs answers and frees the request) ---- */

static void procs_take(rq *r, const char *id, sup_procs_route rt)
{
	sup_procs *p = r->h->procs;
	struct evhttp_request *req = r->req;
	rq_free(r);
	sup_procs_handle(p, rt, req, id);
}

static void h_procs_start(rq *r, const char *id) { procs_take(r, id, SUP_PROCS_START); }
static void h_procs_list(rq *r, const char *id) { procs_take(r, id, SUP_PROCS_LIST); }
static void h_proc_get(rq *r, const char *id) { procs_take(r, id, SUP_PROCS_GET); }
static void h_proc_kill(rq *r, const char *id) { procs_take(r, id, SUP_PROCS_KILL); }
static void h_proc_output(rq *r, const char *id) { procs_take(r, id, SUP_PROCS_OUTPUT); }
static void h_proc_signal(rq *r, const char *id) { procs_take(r, id, SUP_PROCS_SIGNAL); }
static void h_proc_resize(rq *r, const char *id) { procs_take(r, id, SUP_PROCS_RESIZE); }
static void h_proc_stdin(rq *r, const char *id) { procs_take(r, id, SUP_PROCS_STDIN); }

/* ---- routing ---- */

/* The whole API, in one place. Everything under /v1 needs the token
 * (checked before routing, so unknown /v1 paths do not reveal themselves). */
static const route routes[] = {
	{ EVHTTP_REQ_GET, "/healthz", h_healthz },
	{ EVHTTP_REQ_GET, "/v1/sandboxes", h_list },
	{ EVHTTP_REQ_POST, "/v1/sandboxes", h_create },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{id}", h_get },
	{ EVHTTP_REQ_DELETE, "/v1/sandboxes/{id}", h_delete },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{id}/exec", h_exec },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{id}/files", h_files_get },
	{ EVHTTP_REQ_DELETE, "/v1/sandboxes/{id}/files", h_files_delete },
	{ EVHTTP_REQ_PUT, "/v1/sandboxes/{id}/files", h_files_put },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{id}/fs/stat", h_fs_stat },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{id}/fs/list", h_fs_list },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{id}/fs/mkdir", h_fs_mkdir },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{id}/fs/move", h_fs_move },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{id}/fs/chmod", h_fs_chmod },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{id}/fs/search", h_fs_search },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{id}/fs/watch", h_fs_watch },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{id}/processes", h_procs_start },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{id}/processes", h_procs_list },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{id}/processes/{pid}", h_proc_get },
	{ EVHTTP_REQ_DELETE, "/v1/sandboxes/{id}/processes/{pid}", h_proc_kill },
	{ EVHTTP_REQ_GET, "/v1/sandboxes/{id}/processes/{pid}/output", h_proc_output },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{id}/processes/{pid}/signal", h_proc_signal },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{id}/processes/{pid}/resize", h_proc_resize },
	{ EVHTTP_REQ_POST, "/v1/sandboxes/{id}/processes/{pid}/stdin", h_proc_stdin },
	{ EVHTTP_REQ_GET, "/v1/pools", h_pools },
};
#define NROUTES (sizeof(routes) / sizeof(routes[0]))

/* Match path against pattern segment by segment; "{id}" takes one segment,
 * "{pid}" any one non-empty segment (its handler reads it from the path). */
static bool path_match(const char *pattern, const char *path, char *id, size_t id_size)
{
	const char *pp = pattern, *sp = path;
	while (*pp && *sp) {
		if (strncmp(pp, "{pid}", 5) == 0) {
			size_t n = strcspn(sp, "/");
			if (n == 0)
				return false;
			pp += 5;
			sp += n;
			continue;
		}
		if (strncmp(pp, "{id}", 4) == 0) {
			size_t n = strcspn(sp, "/");
			if (n == 0 || n >= id_size)
				return false;
			memcpy(id, sp, n);
			id[n] = '\0';
			pp += 4;
			sp += n;
			continue;
		}
		if (*pp != *sp)
			return false;
		pp++;
		sp++;
	}
	return *pp == '\0' && *sp == '\0';
}

int sup_http_route(const char *method, const char *path, char *id, size_t id_size, char *allow,
		   size_t allow_size)
{
	bool path_found = false;
	if (allow_size)
		allow[0] = '\0';
	for (size_t i = 0; i < NROUTES; i++) {
		char tmp[SUP_ID_MAX + 16];
		if (!path_match(routes[i].pattern, path, tmp, sizeof(tmp)))
			continue;
		if (strcmp(method_name(routes[i].method), method) == 0) {
			snprintf(id, id_size, "%s", tmp);
			return (int)i;
		}
		if (allow_size) {
			size_t l = strlen(allow);
			snprintf(allow + l, allow_size - l, "%s%s", path_found ? ", " : "",
				 method_name(routes[i].method));
		}
		path_found = true;
	}
	return path_found ? -EPERM : -ENOENT;
}

/* sup_httpin asks this for every request head: uploads stream their body. */
static bool is_upload(const char *method, const char *path, void *ud)
{
	char id[SUP_ID_MAX + 16];
	(void)ud;
	int ri = sup_http_route(method, path, id, sizeof(id), NULL, 0);
	return ri >= 0 && routes[ri].handler == h_files_put;
}

static bool needs_auth(const char *path)
{
	return strcmp(path, "/v1") == 0 || strncmp(path, "/v1/", 4) == 0;
}

static void on_request(struct evhttp_request *req, void *arg)
{
	sup_http *h = arg;
	rq *r = calloc(1, sizeof(*r));
	if (!r) {
		evhttp_send_error(req, 500, "out of memory");
		return;
	}
	r->h = h;
	r->req = req;
	clock_gettime(CLOCK_MONOTONIC, &r->start);
	snprintf(r->method, sizeof(r->method), "%s", method_name(evhttp_request_get_command(req)));
	const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
	const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
	snprintf(r->path, sizeof(r->path), "%s", path ? path : "");
	if (!path || !*path) {
		rq_error(r, 400, "bad_request", "request has no path");
		return;
	}
	if (h->stopping) {
		rq_error(r, 503, "shutting_down", "the supervisor is shutting down");
		return;
	}
	if (needs_auth(path)) {
		const char *auth =
			evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
		const char *tok = NULL;
		size_t tok_len = 0;
		const sup_tenant *who = sup_token_bearer(auth, &tok, &tok_len)
						? sup_tenants_auth(*h->cfg.tenants, tok, tok_len)
						: NULL;
		r->who = who ? sup_tenant_hold(who) : NULL;
		if (!r->who) {
			evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
					  "Bearer realm=\"sbx\"");
			rq_error(r, 401, "unauthorized",
				 auth ? "wrong token" : "missing Authorization: Bearer <token>");
			return;
		}
	}
	char id[SUP_ID_MAX + 16], allow[64], msg[256];
	int ri = sup_http_route(r->method, path, id, sizeof(id), allow, sizeof(allow));
	if (ri == -ENOENT) {
		snprintf(msg, sizeof(msg), "no route %s %.120s", r->method, path);
		rq_error(r, 404, "not_found", msg);
		return;
	}
	if (ri == -EPERM) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", allow);
		snprintf(msg, sizeof(msg), "%s is not allowed on %.120s (allowed: %s)", r->method, path,
			 allow);
		rq_error(r, 405, "method_not_allowed", msg);
		return;
	}
	const route *rt = &routes[ri];
	if (strstr(rt->pattern, "{id}") && !sup_api_valid_id(id)) {
		snprintf(msg, sizeof(msg), "no sandbox %.64s", id);
		rq_error(r, 404, "not_found", msg);
		return;
	}
	sbx_err oerr;
	if (strstr(rt->pattern, "{id}") && sup_core_check_owner(h->core, r->who, id, &oerr) < 0) {
		rq_error(r, 404, "not_found", oerr.msg);
		return;
	}
	rt->handler(r, id); /* owns r from here */
}

sup_http *sup_http_new(struct event_base *base, sup_core *core, const sup_http_cfg *cfg,
		       sbx_err *err)
{
	sup_http *h = calloc(1, sizeof(*h));
	if (!h) {
		sbx_err_set(err, -ENOMEM, "http");
		return NULL;
	}
	h->base = base;
	h->core = core;
	h->cfg = *cfg;
	h->procs = sup_procs_new(base, core, cfg->max_body);
	if (!h->procs) {
		sbx_err_set(err, -ENOMEM, "http");
		goto fail;
	}
	TAILQ_INIT(&h->waiting);
	h->http = evhttp_new(base);
	if (!h->http) {
		sbx_err_set(err, -ENOMEM, "evhttp");
		goto fail;
	}
	/* Every method reaches the router, so a wrong one gets a JSON 405. */
	evhttp_set_allowed_methods(h->http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_HEAD |
						    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE |
						    EVHTTP_REQ_OPTIONS | EVHTTP_REQ_PATCH);
	/* Bodies up to twice our limit are read and refused by us with a JSON
	 * 413; beyond that evhttp refuses them itself (its own HTML body),
	 * draining the rest so the client still sees the status. */
	evhttp_set_max_body_size(h->http, (ev_ssize_t)(cfg->max_body * 2 + 4096));
	evhttp_set_max_headers_size(h->http, 64 * 1024);
	evhttp_set_flags(h->http, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_timeout(h->http, 60);
	evhttp_set_gencb(h->http, on_request, h);
	/* Every connection reads through sup_httpin, which keeps upload bodies
	 * out of evhttp (it would read them whole). */
	h->in_cfg.is_upload = is_upload;
	evhttp_set_bevcb(h->http, sup_httpin_bevcb, &h->in_cfg);
	h->sock = evhttp_bind_socket_with_handle(h->http, cfg->host, cfg->port);
	if (!h->sock) {
		sbx_err_sys(err, errno ? -errno : -EADDRNOTAVAIL, "listen on %s:%u", cfg->host,
			    (unsigned)cfg->port);
		goto fail;
	}
	struct sockaddr_storage ss = { 0 };
	socklen_t sl = sizeof(ss);
	evutil_socket_t fd = evhttp_bound_socket_get_fd(h->sock);
	/* evhttp listens with a backlog of 128: a burst of clients (hundreds of
	 * agents' execs at once) overflows it and sees resets. Linux lets a
	 * second listen() raise the backlog of a listening socket. */
	if (listen(fd, SOMAXCONN) < 0)
		sup_warn("listen backlog: %s", strerror(errno));
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		if (ss.ss_family == AF_INET)
			h->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
		else if (ss.ss_family == AF_INET6)
			h->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	}
	return h;
fail:
	sup_http_free(h);
	return NULL;
}

uint16_t sup_http_port(const sup_http *h)
{
	return h->port;
}

void sup_http_stop(sup_http *h)
{
	h->stopping = true;
	if (h->sock) {
		evhttp_del_accept_socket(h->http, h->sock);
		h->sock = NULL;
	}
	/* Requests still waiting: withdraw their operations and answer. */
	rq *r;
	while ((r = TAILQ_FIRST(&h->waiting)) != NULL) {
		/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the callee unlinks it first; the analyzer cannot follow sys/queue.h */
		if (r->op) {
			sup_op_cancel(r->op);
			r->op = NULL;
		}
		if (r->stream)
			rq_stream_error(r, 503, "shutting_down", "the supervisor is shutting down");
		else
			rq_error(r, 503, "shutting_down", "the supervisor is shutting down");
	}
}

void sup_http_free(sup_http *h)
{
	if (!h)
		return;
	rq *r;
	while ((r = TAILQ_FIRST(&h->waiting)) != NULL) {
		/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the callee unlinks it first; the analyzer cannot follow sys/queue.h */
		if (r->stream) {
			rq_stream_finish(r, 503);
			continue;
		}
		if (r->op)
			sup_op_cancel(r->op);
		rq_free(r); /* evhttp_free frees the request itself */
	}
	if (h->http)
		evhttp_free(h->http);
	sup_procs_free(h->procs);
	free(h);
}
