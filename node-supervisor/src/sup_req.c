#include "sup_req.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdio.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_b64.h"
#include "sup_api.h"
#include "sup_httpin.h"
#include "sup_log.h"
#include "sup_text.h"

void sup_req_init(sup_req *r, const sup_req_kind *kind, void *owner, sup_core *core,
		  struct event_base *base, struct evhttp_request *req, const char *route,
		  const char *id)
{
	r->kind = kind;
	r->owner = owner;
	r->core = core;
	r->base = base;
	r->req = req;
	r->route = route;
	snprintf(r->id, sizeof(r->id), "%s", id);
	r->op = NULL;
	r->gone = NULL;
	clock_gettime(CLOCK_MONOTONIC, &r->start);
}

void sup_req_unwatch(sup_req *r)
{
	if (r->gone) {
		event_free(r->gone);
		r->gone = NULL;
	}
}

void sup_req_free(sup_req *r)
{
	sup_req_unwatch(r);
	r->kind->release(r->owner);
}

void sup_req_log(const sup_req *r, int status, const char *extra)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	double ms = (double)(now.tv_sec - r->start.tv_sec) * 1e3 +
		    (double)(now.tv_nsec - r->start.tv_nsec) / 1e6;
	char tag[64] = "";
	if (r->kind->log_tag)
		r->kind->log_tag(r->owner, tag, sizeof(tag));
	sup_log(status >= 500 && status != 503 ? SUP_LOG_WARN : SUP_LOG_INFO,
		"http %s sandbox %s%s %d%s %.3fms", r->route, r->id, tag, status, extra, ms);
}

/* ---- replies ---- */

int sup_req_set_bytes(json_t *o, const char *key, const char *p, size_t n)
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
	case 504: return "Gateway Timeout";
	case 507: return "Insufficient Storage";
	default: return "Status";
	}
}

static int dump_cb(const char *b, size_t size, void *data)
{
	return evbuffer_add(data, b, size);
}

void sup_req_reply(sup_req *r, int status, json_t *body)
{
	sup_req_log(r, status, "");
	/* Before evhttp may close the fd under it. */
	sup_req_unwatch(r);
	struct evbuffer *buf = evbuffer_new();
	if (body && buf) {
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Content-Type",
				  "application/json");
		if (json_dump_callback(body, dump_cb, buf, SUP_API_JSON_DUMP) < 0 ||
		    evbuffer_add(buf, "\n", 1) < 0) {
			evbuffer_drain(buf, evbuffer_get_length(buf));
			status = 500;
			evbuffer_add_printf(buf, "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}\n");
		}
	}
	json_decref(body);
	evhttp_send_reply(r->req, status, r->kind->reasons ? reason(status) : NULL, buf);
	if (buf)
		evbuffer_free(buf);
	sup_req_free(r);
}

void sup_req_error_at(sup_req *r, int status, const char *code, const char *msg,
		      const char *path, size_t len)
{
	/* Messages may quote guest or client bytes: never let that break JSON. */
	size_t ml;
	SBX_AUTO_FREE char *m = sup_utf8_repair((const uint8_t *)msg, strlen(msg), &ml);
	json_t *e = json_object();
	if (e) {
		json_object_set_new(e, "code", json_string(code));
		json_object_set_new(e, "message", m ? json_stringn(m, ml) : json_string(code));
		if (path)
			sup_req_set_bytes(e, "path", path, len);
	}
	sup_req_reply(r, status, e ? json_pack("{s:o}", "error", e) : NULL);
}

void sup_req_error(sup_req *r, int status, const char *code, const char *msg)
{
	sup_req_error_at(r, status, code, msg, NULL, 0);
}

/* What every family answers alike, before sup_api_status. */
static const sup_req_errmap shared_errmap[] = {
	{ -ENOENT, 404, "not_found" },
	{ -EEXIST, 409, "exists" },
	{ -EACCES, 403, "permission_denied" },
	{ -EPERM, 403, "permission_denied" },
	{ -EINVAL, 400, "bad_request" },
	{ -ENOSPC, 507, "no_space" },
	{ 0, 0, NULL },
};

static int errmap_find(const sup_req_errmap *t, int neg_errno, const char **code)
{
	for (; t && t->neg_errno; t++) {
		if (t->neg_errno == neg_errno) {
			*code = t->code;
			return t->status;
		}
	}
	return 0;
}

int sup_req_status(const sup_req *r, int neg_errno, const char **code)
{
	int status = errmap_find(r->kind->errmap, neg_errno, code);
	if (!status)
		status = errmap_find(shared_errmap, neg_errno, code);
	return status ? status : sup_api_status(neg_errno, code);
}

void sup_req_fail(sup_req *r, const sbx_err *err, const char *path)
{
	const char *code;
	int status = sup_req_status(r, err->code, &code);
	sup_req_error_at(r, status, code, err->msg[0] ? err->msg : code, path,
			 path ? strlen(path) : 0);
}

void sup_req_blame(const sup_req *r, const char *msg)
{
	sup_core_blame(r->core, r->id, msg);
}

void sup_req_broke(sup_req *r, const sbx_err *e, const char *path)
{
	sup_warn("sandbox %s: %s", r->id, e->msg);
	sup_req_blame(r, e->msg);
	sup_req_error_at(r, 502, "agent_error", e->msg, path, path ? strlen(path) : 0);
}

bool sup_req_settled(sup_req *r, int rc, const sbx_err *err, const char *path)
{
	r->op = NULL;
	if (rc < 0) {
		sup_req_fail(r, err, path);
		return false;
	}
	return true;
}

/* ---- agent calls ---- */

void sup_req_args_begin(sup_req_args *a, size_t n)
{
	msgpack_sbuffer_init(&a->sb);
	msgpack_packer_init(&a->pk, &a->sb, msgpack_sbuffer_write);
	msgpack_pack_map(&a->pk, n);
}

void sup_req_args_uint(sup_req_args *a, const char *k, uint64_t v)
{
	sbx_proto_pack_str(&a->pk, k);
	msgpack_pack_uint64(&a->pk, v);
}

void sup_req_args_bool(sup_req_args *a, const char *k, bool v)
{
	sbx_proto_pack_str(&a->pk, k);
	if (v)
		msgpack_pack_true(&a->pk);
	else
		msgpack_pack_false(&a->pk);
}

void sup_req_args_str(sup_req_args *a, const char *k, const char *v, size_t n)
{
	sbx_proto_pack_str(&a->pk, k);
	sbx_proto_pack_strn(&a->pk, v, n);
}

static void on_client_gone(evutil_socket_t fd, short what, void *ud)
{
	sup_req *r = ud;
	(void)fd;
	(void)what;
	sup_info("http %s sandbox %s: client went away, cancelling", r->route, r->id);
	if (r->op) {
		sup_op_cancel(r->op);
		r->op = NULL;
	}
	/* Nobody reads this; sending it lets evhttp find the connection dead
	 * and free it together with the request. */
	sup_req_error(r, 499, "cancelled", "client closed the connection");
}

/* Notice the client hanging up while the agent works. */
static void watch_gone(sup_req *r)
{
	if (!r->gone)
		r->gone = sup_httpin_watch_hangup(r->base, r->req, on_client_gone, r);
}

int sup_req_call(sup_req *r, const char *opname, sup_req_args *a, const sup_core_call_cbs *cbs,
		 const char *path)
{
	sbx_err err;
	sbx_err_clear(&err);
	int rc = sup_core_call(r->core, r->id, opname, a->sb.data, a->sb.size, cbs, r->owner,
			       &r->op, &err);
	msgpack_sbuffer_destroy(&a->sb);
	if (rc < 0) {
		sup_req_fail(r, &err, path);
		return rc;
	}
	watch_gone(r);
	return 0;
}

/* ---- request bodies ---- */

json_t *sup_req_body_obj(sup_req *r, size_t max, const char *const *allowed)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	size_t len = evbuffer_get_length(in);
	char msg[256];
	if (len > max) {
		snprintf(msg, sizeof(msg), "request body over %zu KiB", max / 1024);
		sup_req_error(r, 413, "too_large", msg);
		return NULL;
	}
	json_error_t je;
	json_t *j = json_loadb(len ? (const char *)evbuffer_pullup(in, -1) : "", len,
			       JSON_REJECT_DUPLICATES, &je);
	if (!j || !json_is_object(j)) {
		snprintf(msg, sizeof(msg), "body must be a JSON object%s%s", j ? "" : ": ",
			 j ? "" : je.text);
		json_decref(j);
		sup_req_error(r, 400, "bad_request", msg);
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
			sup_req_error(r, 400, "bad_request", msg);
			return NULL;
		}
	}
	return j;
}
