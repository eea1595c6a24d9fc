/* GET /files: a download streamed from the agent's file.read, with Range,
 * ETag and Last-Modified. The agent's credit for each chunk goes back only
 * once the connection's output buffer is under SUP_STREAM_HWM (at once, or
 * from evhttp's drain callback), so a slow client stops the agent reading
 * the file instead of growing our memory (sup_stream's rule, without its
 * SSE framing). Whatever the agent sends is checked against what it
 * promised: a byte more, or fewer than Content-Length, cuts the connection
 * so the client can never take a short or long body for the file. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sbx/proto.h"
#include "sup_files_int.h"
#include "sup_httpin.h"
#include "sup_log.h"
#include "sup_stream.h"

/* Range: bytes=a-b | bytes=a- | bytes=-n (one range). 0 none, 1 set,
 * 2 a suffix of *len bytes (the offset needs the size first), -1 malformed
 * or not a single range. */
static int parse_range(const char *h, uint64_t *off, uint64_t *len)
{
	if (!h)
		return 0;
	if (strncmp(h, "bytes=", 6) != 0)
		return -1;
	const char *p = h + 6;
	char *end;
	errno = 0;
	if (*p == '-' && p[1] >= '0' && p[1] <= '9') {
		unsigned long long n = strtoull(p + 1, &end, 10);
		if (errno || *end != '\0' || n == 0)
			return -1;
		*off = 0;
		*len = n;
		return 2;
	}
	if (*p < '0' || *p > '9')
		return -1;
	unsigned long long a = strtoull(p, &end, 10);
	if (errno || *end != '-')
		return -1;
	p = end + 1;
	if (*p == '\0') {
		*off = a;
		*len = UINT64_MAX;
		return 1;
	}
	if (*p < '0' || *p > '9')
		return -1;
	unsigned long long b = strtoull(p, &end, 10);
	if (errno || *end != '\0' || b < a)
		return -1;
	*off = a;
	*len = b - a + 1;
	return 1;
}

static struct evbuffer *conn_output(const sup_fq *q)
{
	struct bufferevent *bev = q->evcon ? evhttp_connection_get_bufferevent(q->evcon) : NULL;
	return bev ? bufferevent_get_output(bev) : NULL;
}

static void give_back(sup_fq *q)
{
	size_t c = q->owed;
	q->owed = 0;
	if (c && q->r.op)
		sup_op_consumed(q->r.op, c);
}

static void on_drained(struct evhttp_connection *evcon, void *arg)
{
	(void)evcon;
	give_back(arg);
}

/* The client hung up mid-download. */
static void on_close(struct evhttp_connection *evcon, void *arg)
{
	sup_fq *q = arg;
	sup_info("http GET files sandbox %s: client went away after %" PRIu64 " bytes", q->r.id,
		 q->sent);
	/* Still attached: the connection frees the request right after this.
	 * Detached: it is ours to finish (which frees it). */
	if (evhttp_request_get_connection(q->r.req) != evcon)
		evhttp_send_reply_end(q->r.req);
	if (q->r.op)
		sup_op_cancel(q->r.op);
	sup_req_free(&q->r);
}

/* Cut a started download: the client sees fewer bytes than promised. */
static void abort_download(sup_fq *q, const char *why)
{
	sup_warn("http GET files sandbox %s: %s after %" PRIu64 " of %" PRIu64
		 " bytes; closing the connection",
		 q->r.id, why, q->sent, q->length);
	if (q->r.op) {
		sup_op_cancel(q->r.op);
		q->r.op = NULL;
	}
	if (q->evcon) {
		evhttp_connection_set_closecb(q->evcon, NULL, NULL);
		evhttp_connection_free(q->evcon); /* frees the request too */
	} else {
		evhttp_send_reply_end(q->r.req);
	}
	sup_req_free(&q->r);
}

static void agent_broke(sup_fq *q, const char *why)
{
	sup_req_blame(&q->r, why);
	if (q->started) {
		abort_download(q, why);
		return;
	}
	if (q->r.op) {
		sup_op_cancel(q->r.op);
		q->r.op = NULL;
	}
	sup_warn("http GET files sandbox %s: %s", q->r.id, why);
	sup_req_error_at(&q->r, 502, "agent_error", why, q->m.path, strlen(q->m.path));
}

static void on_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_fq *q = ud;
	if (q->started) {
		agent_broke(q, "agent: a second event on file.read");
		return;
	}
	json_t *st = json_object();
	sbx_err e;
	sbx_err_clear(&e);
	uint64_t size = 0, mt = 0, ino = 0, off = 0, len = 0;
	int rc = st ? sup_files_stat_json(map, st, &e) : sbx_err_set(&e, -ENOMEM, "out of memory");
	const char *type = st ? json_string_value(json_object_get(st, "type")) : NULL;
	if (rc == 0 && (!type || strcmp(type, "file") != 0))
		rc = sbx_err_set(&e, -EPROTO, "agent: file.read opened something not a file");
	json_decref(st);
	if (rc == 0 &&
	    (!sbx_proto_get_uint(map, "size", &size) || !sbx_proto_get_uint(map, "mtime_ns", &mt) ||
	     !sbx_proto_get_uint(map, "ino", &ino) || !sbx_proto_get_uint(map, "offset", &off) ||
	     !sbx_proto_get_uint(map, "length", &len)))
		rc = sbx_err_set(&e, -EPROTO, "agent: file.read event without offset/length");
	/* What we asked for, given the size the agent reports; a start past
	 * the end is sent as length 0 (the agent may clamp the offset). */
	uint64_t expect = q->want_off >= size ? 0 : size - q->want_off;
	if (q->want_len < expect)
		expect = q->want_len;
	if (rc == 0 && (len != expect || (expect && off != q->want_off)))
		rc = sbx_err_set(&e, -EPROTO, "agent: file.read range is not the one asked for");
	off = q->want_off;
	if (rc < 0) {
		agent_broke(q, e.msg);
		return;
	}
	sup_op_consumed(q->r.op, cost);
	struct evkeyvalq *oh = evhttp_request_get_output_headers(q->r.req);
	char b[128];
	if (q->ranged && (off >= size)) {
		sup_op_cancel(q->r.op);
		q->r.op = NULL;
		snprintf(b, sizeof(b), "bytes */%" PRIu64, size);
		evhttp_add_header(oh, "Content-Range", b);
		sup_req_error_at(&q->r, 416, "range_not_satisfiable", "the range starts at or past the end",
			     q->m.path, strlen(q->m.path));
		return;
	}
	q->length = len;
	q->started = true;
	evhttp_add_header(oh, "Content-Type", "application/octet-stream");
	evhttp_add_header(oh, "Accept-Ranges", "bytes");
	snprintf(b, sizeof(b), "%" PRIu64, len);
	evhttp_add_header(oh, "Content-Length", b);
	snprintf(b, sizeof(b), "\"%" PRIx64 "-%" PRIx64 "-%" PRIx64 "\"", ino, size, mt);
	evhttp_add_header(oh, "ETag", b);
	time_t secs = (time_t)(mt / 1000000000ull);
	struct tm tm;
	if (gmtime_r(&secs, &tm) && strftime(b, sizeof(b), "%a, %d %b %Y %H:%M:%S GMT", &tm))
		evhttp_add_header(oh, "Last-Modified", b);
	int status = 200;
	if (q->ranged) {
		status = 206;
		snprintf(b, sizeof(b), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off,
			 off + len - 1, size);
		evhttp_add_header(oh, "Content-Range", b);
	}
	q->evcon = evhttp_request_get_connection(q->r.req);
	if (q->evcon)
		evhttp_connection_set_closecb(q->evcon, on_close, q);
	evhttp_send_reply_start(q->r.req, status, status == 206 ? "Partial Content" : "OK");
	sup_req_log(&q->r, status, " (stream start)");
}

static void on_data(const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_fq *q = ud;
	if (!q->started || n > q->length - q->sent) {
		agent_broke(q, "agent: file.read sent bytes beyond what it announced");
		return;
	}
	q->sent += n;
	q->owed += cost;
	if (evbuffer_add(q->chunk, p, n) < 0) {
		abort_download(q, "out of memory");
		return;
	}
	evhttp_send_reply_chunk_with_cb(q->r.req, q->chunk, on_drained, q);
	struct evbuffer *out = conn_output(q);
	if (!out || evbuffer_get_length(out) < SUP_STREAM_HWM)
		give_back(q);
}

static void on_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_fq *q = ud;
	q->r.op = NULL;
	if (rc < 0 && !q->started) {
		sup_req_fail(&q->r, err, q->m.path);
		return;
	}
	if (rc < 0) {
		abort_download(q, err->msg);
		return;
	}
	uint64_t bytes = 0;
	if (!q->started || !sbx_proto_get_uint(result, "bytes", &bytes) || bytes != q->sent ||
	    q->sent != q->length) {
		agent_broke(q, "agent: file.read ended short (the file shrank?) or its count is wrong");
		return;
	}
	if (q->evcon)
		evhttp_connection_set_closecb(q->evcon, NULL, NULL);
	sup_httpin_reply_end(q->r.req);
	char extra[64];
	snprintf(extra, sizeof(extra), " (stream end, %" PRIu64 " bytes)", q->sent);
	sup_req_log(&q->r, q->ranged ? 206 : 200, extra);
	sup_req_free(&q->r);
}

static void start_read(sup_fq *q);
static void start_suffix(sup_fq *q);

static const sup_core_call_cbs get_cbs = {
	.on_data = on_data,
	.on_event = on_event,
	.on_done = on_done,
};

void sup_files_get(sup_fq *q)
{
	if (q->m.dir) {
		sup_req_error_at(&q->r, 400, "bad_request", "the path names a folder", q->m.path,
			     strlen(q->m.path));
		return;
	}
	const char *rh = evhttp_find_header(evhttp_request_get_input_headers(q->r.req), "Range");
	q->want_off = 0;
	q->want_len = UINT64_MAX;
	int r = parse_range(rh, &q->want_off, &q->want_len);
	if (r < 0) {
		sup_req_error_at(&q->r, 416, "range_not_satisfiable",
			     "Range: want one range bytes=FIRST-LAST or bytes=FIRST-", q->m.path,
			     strlen(q->m.path));
		return;
	}
	q->ranged = r > 0;
	q->chunk = evbuffer_new();
	if (!q->chunk) {
		sup_req_error_at(&q->r, 500, "internal", "out of memory", NULL, 0);
		return;
	}
	if (r == 2) {
		start_suffix(q);
		return;
	}
	start_read(q);
}

/* The size for a suffix range came back: read the last want_len bytes. */
static void suffix_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_fq *q = ud;
	q->r.op = NULL;
	uint64_t size;
	if (rc < 0) {
		sup_req_fail(&q->r, err, q->m.path);
		return;
	}
	if (!sbx_proto_get_uint(result, "size", &size)) {
		agent_broke(q, "agent: fs.stat without a size");
		return;
	}
	if (size == 0) {
		evhttp_add_header(evhttp_request_get_output_headers(q->r.req), "Content-Range",
				  "bytes */0");
		sup_req_error_at(&q->r, 416, "range_not_satisfiable", "the file is empty", q->m.path,
			     strlen(q->m.path));
		return;
	}
	if (q->want_len > size)
		q->want_len = size;
	q->want_off = size - q->want_len;
	start_read(q);
}

static const sup_core_call_cbs suffix_cbs = { .on_done = suffix_done };

static void start_suffix(sup_fq *q)
{
	sup_req_args a;
	sup_fargs_begin(&a, 1, &q->m);
	sup_req_args_bool(&a, "follow", true);
	sup_req_call(&q->r, "fs.stat", &a, &suffix_cbs, q->m.path);
}

static void start_read(sup_fq *q)
{
	sup_req_args a;
	sup_fargs_begin(&a, q->want_len == UINT64_MAX ? 1 : 2, &q->m);
	sup_req_args_uint(&a, "offset", q->want_off);
	if (q->want_len != UINT64_MAX)
		sup_req_args_uint(&a, "length", q->want_len);
	sup_req_call(&q->r, "file.read", &a, &get_cbs, q->m.path);
}
