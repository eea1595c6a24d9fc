/* PUT /files: an upload streamed into the agent's file.write. The body is
 * taken from the connection only as fast as the agent takes it (its credit
 * comes back once the bytes are in the file), moved from the socket's
 * buffer into the agent's frames without a copy; so a 4 GiB upload holds no
 * more than the edge's body high-water mark and one protocol window here.
 * Whatever ends the upload early (client gone, bad chunked framing, the
 * quota) cancels file.write: the agent drops its temporary file and the old
 * file stays as it was. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "sup_files_int.h"

/* Largest piece handed to the agent at once (its window is 256 KiB). */
#define PUT_STEP (256 * 1024)

int sup_files_parse_put(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "path", "mode", "parents", "overwrite", NULL };
	sup_fq *q = state;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	sup_fq_init(q, in, ctx, "write", SBX_OP_FILE_WRITE);
	int rc = sup_fq_query(q, in, keys, SUP_POLICY_WRITE, &qs, err);
	int parents = rc < 0 ? rc : sup_query_flag(&qs, "parents", false, err);
	int ow = parents < 0 ? parents : sup_query_flag(&qs, "overwrite", true, err);
	if (ow < 0)
		return ow;
	q->overwrite = ow;
	if (q->m.dir || q->m.is_root)
		return sbx_err_set(err, -EINVAL, "the path names a folder");
	uint64_t mode = 0644, max = q->f->max_upload;
	const char *ms = sup_query_get(&qs, "mode", NULL);
	if (ms && sup_api_parse_mode(ms, &mode) < 0)
		return sbx_err_set(err, -EINVAL, "query parameter \"mode\": want octal 0..0777 (e.g. 0644)");
	if (max && in->body_expect != UINT64_MAX && in->body_expect > max)
		return sbx_err_set(err, -E2BIG, "upload of %" PRIu64 " bytes over the limit of %" PRIu64 " bytes",
				   in->body_expect, max);
	sbx_proto_args_uint(&q->args, "mode", mode);
	sbx_proto_args_bool(&q->args, "parents", parents);
	sbx_proto_args_bool(&q->args, "overwrite", ow);
	if (max)
		sbx_proto_args_uint(&q->args, "max_bytes", max);
	return 0;
}

static void put_fail(sup_fq *q, const sbx_err *e)
{
	if (q->op) {
		sup_op_cancel(q->op);
		q->op = NULL;
	}
	sup_http_fail(q->r, e);
}

/* Hand the agent what it has room for; on_ready and on_writable call back. */
static void pump(void *ud)
{
	sup_fq *q = ud;
	while (q->op && !q->put_eof) {
		struct evbuffer *buf = NULL;
		sbx_err e;
		sbx_err_clear(&e);
		int n = sup_http_body(q->r, PUT_STEP, &buf, &e);
		if (n == -EAGAIN)
			return;
		if (n == -ENODATA)
			sup_http_note(q->r, "client went away after %" PRIu64 " bytes", q->put_got);
		if (n < 0) {
			put_fail(q, &e);
			return;
		}
		if (n == 0) {
			if (sup_core_call_send(q->op, SBX_CH_FILE, NULL, 0, true, &e) < 0)
				return; /* the stream is gone: on_done says why */
			q->put_eof = true;
			return;
		}
		uint64_t max = q->f->max_upload;
		if (max && (uint64_t)n > max - q->put_got) {
			sbx_err_set(&e, -E2BIG, "upload over the limit of %" PRIu64 " bytes", max);
			put_fail(q, &e);
			return;
		}
		int k = sup_core_call_send_from(q->op, SBX_CH_FILE, buf, (size_t)n, &e);
		if (k == -ENOMEM || k == -EINVAL) { /* the stream lives on: end it here */
			put_fail(q, &e);
			return;
		}
		if (k <= 0)
			return; /* 0: on_writable brings us back; < 0: on_done tells */
		sup_http_body_took(q->r, (size_t)k);
		q->put_got += (uint64_t)k;
	}
}

static void on_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_fq *q = ud;
	uint64_t size = 0;
	sbx_err e;
	q->op = NULL;
	if (rc == 0 && (!q->put_eof || !sbx_proto_get_uint(result, "size", &size) || size != q->put_got)) {
		rc = sbx_err_set(&e, -EPROTO, "agent: file.write ended early or miscounted");
		sup_core_blame(q->f->core, q->id, &e);
	} else if (rc < 0)
		e = *err;
	if (rc < 0) {
		sup_http_fail(q->r, &e);
		return;
	}
	json_t *body = json_object();
	if (body) {
		sup_http_set_bytes(body, "path", q->m.path, strlen(q->m.path));
		json_object_set_new(body, "size", json_integer((json_int_t)size));
	}
	/* Only overwrite=0 proves the file is new; file.write does not say. */
	sup_http_json(q->r, q->overwrite ? 200 : 201, body);
}

static const sup_core_call_cbs put_cbs = {
	.on_done = on_done,
	.on_writable = pump,
	.wait = SUP_AGENT_WAIT_SENDS, /* a slow client is not the agent's fault */
};

int sup_files_act_put(sup_http_req *r, void *state, sbx_err *err)
{
	sup_fq *q = state;
	q->r = r;
	int rc = sup_fq_call(q, &put_cbs, err);
	if (rc == 0)
		sup_http_body_start(r, pump, q); /* "100 Continue" only now */
	return rc;
}
