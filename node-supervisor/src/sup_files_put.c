/* PUT /files: an upload streamed into the agent's file.write. The body is
 * taken from the connection (sup_httpin) only as fast as the agent takes
 * it (its credit comes back once the bytes are in the file), so a 4 GiB
 * upload holds no more than the socket's high-water mark and one protocol
 * window here. A body evhttp read whole itself (a connection sup_httpin
 * left to evhttp) goes the same way from memory, within --max-body.
 * Whatever ends the upload early (client gone, bad chunked framing, the
 * quota) cancels file.write: the agent drops its temporary file and the old
 * file stays as it was. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "sup_files_int.h"
#include "sup_httpin.h"
#include "sup_log.h"

/* Largest piece handed to the agent at once (its window is 256 KiB). */
#define PUT_STEP (256 * 1024)

void sup_files_set_limits(sup_files *f, uint64_t max_upload, size_t max_body)
{
	f->max_upload = max_upload;
	f->max_body = max_body;
}

static void on_close(struct evhttp_connection *evcon, void *arg);

/* Let go of the connection before answering (or after it went). */
static void put_detach(sup_fq *q)
{
	if (q->in) {
		sup_httpin_stop(q->in);
		q->in = NULL;
	}
	if (q->evcon) {
		evhttp_connection_set_closecb(q->evcon, NULL, NULL);
		q->evcon = NULL;
	}
}

static void put_error(sup_fq *q, int status, const char *code, const char *msg)
{
	if (q->r.op) {
		sup_op_cancel(q->r.op);
		q->r.op = NULL;
	}
	put_detach(q);
	sup_req_error_at(&q->r, status, code, msg, q->m.path, strlen(q->m.path));
}

static void on_close(struct evhttp_connection *evcon, void *arg)
{
	sup_fq *q = arg;
	sup_info("http PUT files sandbox %s: client went away after %" PRIu64 " bytes, cancelling",
		 q->r.id, q->put_got);
	if (q->r.op) {
		sup_op_cancel(q->r.op);
		q->r.op = NULL;
	}
	/* The connection's bufferevent is still alive during this call. */
	if (q->in) {
		sup_httpin_stop(q->in);
		q->in = NULL;
	}
	q->evcon = NULL;
	sup_req_log(&q->r, 499, " (client went away)");
	/* Detached from the connection, the request is ours: replying frees it.
	 * Still attached, the connection frees it right after this. */
	if (evhttp_request_get_connection(q->r.req) != evcon)
		evhttp_send_reply(q->r.req, 499, "Client Closed Request", NULL);
	sup_req_free(&q->r);
}

/* ---- the body, from the connection or from memory ---- */

/* Body bytes at the front of *buf (see sup_httpin_body), which the
 * agent's frames take over without a copy. */
static int body_avail(sup_fq *q, size_t max, struct evbuffer **buf, sbx_err *err)
{
	if (q->in)
		return sup_httpin_body(q->in, max, buf, err);
	*buf = evhttp_request_get_input_buffer(q->r.req);
	size_t n = evbuffer_get_length(*buf);
	return (int)(n < max ? n : max);
}

/* Hand the agent what it has room for; on_ready and on_writable call back. */
static void pump(sup_fq *q)
{
	while (q->r.op && !q->put_eof) {
		struct evbuffer *buf = NULL;
		sbx_err e;
		sbx_err_clear(&e);
		int n = body_avail(q, PUT_STEP, &buf, &e);
		if (n == -EAGAIN)
			return;
		if (n == -ECONNRESET)
			sup_info("http PUT files sandbox %s: client went away after %" PRIu64
				 " bytes, cancelling", q->r.id, q->put_got);
		if (n < 0) {
			bool client = n == -EBADMSG || n == -ECONNRESET;
			put_error(q, client ? 400 : 500, client ? "bad_request" : "internal", e.msg);
			return;
		}
		if (n == 0) {
			if (sup_core_call_send(q->r.op, SBX_CH_FILE, NULL, 0, true, &e) < 0)
				return; /* the stream is gone: on_done says why */
			q->put_eof = true;
			if (q->in)
				sup_httpin_stop(q->in);
			return;
		}
		if (q->f->max_upload && (uint64_t)n > q->f->max_upload - q->put_got) {
			char msg[128];
			snprintf(msg, sizeof(msg), "upload over the limit of %" PRIu64 " bytes",
				 q->f->max_upload);
			put_error(q, 413, "too_large", msg);
			return;
		}
		int k = sup_core_call_send_from(q->r.op, SBX_CH_FILE, buf, (size_t)n, &e);
		if (k == -ENOMEM || k == -EINVAL) { /* the stream lives on: end it here */
			put_error(q, 500, "internal", e.msg);
			return;
		}
		if (k <= 0)
			return; /* 0: on_writable brings us back; < 0: on_done tells */
		if (q->in)
			sup_httpin_took(q->in, (size_t)k);
		q->put_got += (uint64_t)k;
	}
}

static void on_ready(void *ud)
{
	pump(ud);
}

static void on_writable(void *ud)
{
	pump(ud);
}

static void on_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_fq *q = ud;
	q->r.op = NULL;
	put_detach(q);
	if (rc < 0) {
		sup_req_fail(&q->r, err, q->m.path);
		return;
	}
	uint64_t size = 0;
	if (!q->put_eof || !sbx_proto_get_uint(result, "size", &size) || size != q->put_got) {
		sup_warn("http PUT files sandbox %s: file.write ended before the body or with a wrong size",
			 q->r.id);
		sup_req_blame(&q->r, "agent: file.write ended early or miscounted");
		sup_req_error_at(&q->r, 502, "agent_error", "agent: file.write ended early or miscounted",
			     q->m.path, strlen(q->m.path));
		return;
	}
	json_t *body = json_object();
	if (body) {
		sup_req_set_bytes(body, "path", q->m.path, strlen(q->m.path));
		json_object_set_new(body, "size", json_integer((json_int_t)size));
	}
	/* Only overwrite=0 proves the file is new; file.write does not say. */
	sup_req_reply(&q->r, q->put_overwrite ? 200 : 201, body);
}

static const sup_core_call_cbs put_cbs = {
	.on_done = on_done,
	.on_writable = on_writable,
	.wait = SUP_AGENT_WAIT_SENDS, /* a slow client is not the agent's fault */
};

/* "0644", "644": octal, no setuid, setgid or sticky bit. */
static int parse_mode(const char *s, uint64_t *mode)
{
	size_t n = strlen(s);
	if (n == 0 || n > 4)
		return -EINVAL;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '7')
			return -EINVAL;
		v = v * 8 + (uint64_t)(s[i] - '0');
	}
	if (v > 0777)
		return -EINVAL;
	*mode = v;
	return 0;
}

void sup_files_put(sup_fq *q)
{
	char msg[160];
	uint64_t length;
	if (q->in) {
		const char *why = sup_httpin_refused(q->in);
		if (why) {
			snprintf(msg, sizeof(msg), "upload framing refused: %s", why);
			put_error(q, 400, "bad_request", msg);
			return;
		}
		length = sup_httpin_length(q->in);
	} else {
		/* evhttp read this body itself (the connection is not framed by
		 * sup_httpin): only what --max-body allows is taken from memory. */
		length = evbuffer_get_length(evhttp_request_get_input_buffer(q->r.req));
		if (length > q->f->max_body) {
			snprintf(msg, sizeof(msg),
				 "body of %" PRIu64 " bytes read whole is over --max-body; send uploads on a new connection",
				 length);
			put_error(q, 413, "too_large", msg);
			return;
		}
	}
	if (q->m.dir || q->m.is_root) {
		put_error(q, 400, "bad_request", "the path names a folder");
		return;
	}
	uint64_t mode = 0644;
	char *ms = NULL;
	size_t ml = 0;
	int rc = sup_files_query(q->r.req, "mode", &ms, &ml);
	if ((rc == 0 && parse_mode(ms, &mode) < 0) || (rc < 0 && rc != -ENOENT)) {
		free(ms);
		put_error(q, 400, "bad_request",
			  "query parameter \"mode\": want octal 0..0777 (e.g. 0644), once");
		return;
	}
	free(ms);
	if (q->f->max_upload && length != UINT64_MAX && length > q->f->max_upload) {
		snprintf(msg, sizeof(msg), "upload of %" PRIu64 " bytes over the limit of %" PRIu64
			 " bytes", length, q->f->max_upload);
		put_error(q, 413, "too_large", msg);
		return;
	}
	sup_req_args a;
	sup_fargs_begin(&a, q->f->max_upload ? 4 : 3, &q->m);
	sup_req_args_uint(&a, "mode", mode);
	sup_req_args_bool(&a, "parents", q->put_parents);
	sup_req_args_bool(&a, "overwrite", q->put_overwrite);
	if (q->f->max_upload)
		sup_req_args_uint(&a, "max_bytes", q->f->max_upload);
	if (sup_req_call(&q->r, "file.write", &a, &put_cbs, q->m.path) < 0)
		return;
	q->evcon = evhttp_request_get_connection(q->r.req);
	if (q->evcon)
		evhttp_connection_set_closecb(q->evcon, on_close, q);
	if (q->in) {
		sup_httpin_start(q->in, on_ready, q);
		sup_httpin_send_continue(q->in);
	}
	pump(q);
}
