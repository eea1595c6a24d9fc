/* GET /files: a download streamed from the agent's file.read, with Range,
 * ETag and Last-Modified. Each chunk's cost goes back to the agent only
 * once the client has read (sup_http_charge), so a slow client stops the
 * agent reading the file instead of growing our memory. Whatever the agent
 * sends is checked against what it promised: a byte more, or fewer than
 * Content-Length, cuts the connection so the client can never take a short
 * or long body for the file. */
#include <errno.h>
#include <event2/buffer.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sbx/proto.h"
#include "sup_files_int.h"
#include "sup_log.h"

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

int sup_files_parse_get(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "path", NULL };
	sup_fq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	sup_fq_init(q, in, ctx, "read", SBX_OP_FILE_READ);
	int rc = sup_fq_query(q, in, keys, SUP_POLICY_READ, &qs, err);
	if (rc < 0)
		return rc;
	if (q->m.dir)
		return sbx_err_set(err, -EINVAL, "the path names a folder");
	q->want_off = 0;
	q->want_len = UINT64_MAX;
	int r = parse_range(sup_http_in_header(in, "Range"), &q->want_off, &q->want_len);
	if (r < 0)
		return sbx_err_set(err, -ERANGE, "Range: want one range bytes=FIRST-LAST or bytes=FIRST-");
	q->ranged = r > 0;
	q->suffix = r == 2;
	return 0;
}

/* A download the agent broke (-EPROTO: the sandbox is blamed) or we could
 * not go on with (-ENOMEM): an error before the reply started, a cut after
 * it, so the client sees it short. */
static void agent_broke(sup_fq *q, int code, const char *why)
{
	sbx_err e;
	sbx_err_set(&e, code, "%s", why);
	sup_core_blame(q->f->core, q->id, &e);
	if (q->op) {
		sup_op_cancel(q->op);
		q->op = NULL;
	}
	sup_warn("http GET files sandbox %s: %s", q->id, why);
	if (q->started) {
		sup_http_cut(q->r, why);
		return;
	}
	sup_http_fail(q->r, &e);
}

static void on_credit(size_t cost, void *ud)
{
	sup_fq *q = ud;
	if (q->op)
		sup_op_consumed(q->op, cost);
}

/* The first event: what was opened, and the range the agent will send. */
static void on_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_fq *q = ud;
	if (q->started) {
		agent_broke(q, -EPROTO, "agent: a second event on file.read");
		return;
	}
	json_t *st = json_object();
	sbx_err e;
	sbx_err_clear(&e);
	uint64_t size = 0, mt = 0, ino = 0, off = 0, len = 0;
	int rc = st ? sup_api_stat_json(map, st, &e) : sbx_err_set(&e, -ENOMEM, "out of memory");
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
		agent_broke(q, e.code, e.msg);
		return;
	}
	sup_op_consumed(q->op, cost);
	char b[128];
	if (q->ranged && off >= size) {
		sup_op_cancel(q->op);
		q->op = NULL;
		snprintf(b, sizeof(b), "bytes */%" PRIu64, size);
		sup_http_header(q->r, "Content-Range", b);
		sbx_err_set(&e, -ERANGE, "the range starts at or past the end");
		sup_http_fail(q->r, &e);
		return;
	}
	q->length = len;
	q->started = true;
	sup_http_header(q->r, "Content-Type", "application/octet-stream");
	sup_http_header(q->r, "Accept-Ranges", "bytes");
	snprintf(b, sizeof(b), "\"%" PRIx64 "-%" PRIx64 "-%" PRIx64 "\"", ino, size, mt);
	sup_http_header(q->r, "ETag", b);
	time_t secs = (time_t)(mt / 1000000000ull);
	struct tm tm;
	if (gmtime_r(&secs, &tm) && strftime(b, sizeof(b), "%a, %d %b %Y %H:%M:%S GMT", &tm))
		sup_http_header(q->r, "Last-Modified", b);
	if (q->ranged) {
		snprintf(b, sizeof(b), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1,
			 size);
		sup_http_header(q->r, "Content-Range", b);
	}
	sup_http_on_credit(q->r, on_credit, q);
	sup_http_start(q->r, q->ranged ? 206 : 200, len);
}

static void on_data(const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_fq *q = ud;
	if (!q->started || n > q->length - q->sent) {
		agent_broke(q, -EPROTO, "agent: file.read sent bytes beyond what it announced");
		return;
	}
	q->sent += n;
	/* by reference to the agent's frame where it can be: no copy here */
	if (sup_core_call_add_data(q->op, p, n, q->chunk) < 0) {
		agent_broke(q, -ENOMEM, "out of memory");
		return;
	}
	sup_http_write(q->r, q->chunk);
	sup_http_charge(q->r, cost);
}

static void on_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_fq *q = ud;
	uint64_t bytes = 0;
	q->op = NULL;
	if (rc < 0 && !q->started)
		sup_http_fail(q->r, err);
	else if (rc < 0)
		sup_http_cut(q->r, err->msg);
	else if (!q->started || !sbx_proto_get_uint(result, "bytes", &bytes) || bytes != q->sent ||
		 q->sent != q->length)
		agent_broke(q, -EPROTO, "agent: file.read ended short (the file shrank?) or its count is wrong");
	else
		sup_http_end(q->r);
}

static const sup_core_call_cbs read_cbs = {
	.on_data = on_data,
	.on_event = on_event,
	.on_done = on_done,
};

static int start_read(sup_fq *q, sbx_err *err)
{
	q->aop = SBX_OP_FILE_READ;
	sbx_proto_args_destroy(&q->args); /* a fresh map */
	sbx_proto_args_str(&q->args, "root", q->m.root, strlen(q->m.root));
	sbx_proto_args_str(&q->args, "path", q->m.rel, strlen(q->m.rel));
	sbx_proto_args_uint(&q->args, "offset", q->want_off);
	if (q->want_len != UINT64_MAX)
		sbx_proto_args_uint(&q->args, "length", q->want_len);
	return sup_fq_call(q, &read_cbs, err);
}

/* The size for a suffix range came back: read the last want_len bytes. */
static void suffix_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_fq *q = ud;
	uint64_t size;
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	if (rc == 0 && !sbx_proto_get_uint(result, "size", &size)) {
		rc = sbx_err_set(&e, -EPROTO, "agent: fs.stat without a size");
		sup_core_blame(q->f->core, q->id, &e);
	} else if (rc == 0 && size == 0) {
		sup_http_header(q->r, "Content-Range", "bytes */0");
		rc = sbx_err_set(&e, -ERANGE, "the file is empty");
	} else if (rc == 0) {
		q->want_len = q->want_len > size ? size : q->want_len;
		q->want_off = size - q->want_len;
		rc = start_read(q, &e);
	} else {
		e = *err;
	}
	if (rc < 0)
		sup_http_fail(q->r, &e);
}

static const sup_core_call_cbs suffix_cbs = { .on_done = suffix_done };

int sup_files_act_get(sup_http_req *r, void *state, sbx_err *err)
{
	sup_fq *q = state;
	q->r = r;
	q->chunk = evbuffer_new();
	if (!q->chunk)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	if (!q->suffix)
		return start_read(q, err);
	/* The size first (fs.stat, following a symlink as file.read does). */
	q->aop = SBX_OP_FS_STAT;
	sbx_proto_args_bool(&q->args, "follow", true);
	return sup_fq_call(q, &suffix_cbs, err);
}
