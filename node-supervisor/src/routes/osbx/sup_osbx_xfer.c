/* OpenSandbox's file downloads (file.read, Range honoured) and uploads
 * (multipart, parsed by edge/api's sup_multipart as the body comes: the
 * "metadata" part, then the "file" part streamed into file.write), each
 * path through the tenant's policy first. Bytes move only as fast as the
 * other side takes them: the body is read only while less than STEP of
 * the file waits for the agent's credit. */
#include "sup_osbx_int.h"
#include "sup_osbx_files_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sbx/proto.h"
#include "sup_multipart.h"
#include "sup_policy.h"
#include "sup_query.h"
#include "sup_text.h"

/* ---- download: file.read, Range honoured ---- */

int sup_osbx_parse_download(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_oq *q = state;
	struct osbx_files *f = sup_osbx_fx_of(q, in, ctx, err);
	if (!f)
		return err->code;
	f->kind = F_INFO;
	int rc = sup_osbx_query_paths(in, f, SUP_POLICY_READ, err);
	if (rc == 0 && f->njobs != 1)
		rc = sbx_err_set(err, -EINVAL, "one \"path\"");
	if (rc < 0)
		return rc;
	f->len = UINT64_MAX;
	const char *range = sup_http_in_header(in, "Range");
	if (range) {
		if (sup_osbx_range(range, &f->off, &f->len) < 0)
			return sbx_err_set(err, -EINVAL, "Range: want bytes=FIRST-[LAST] (one range)");
		f->ranged = true;
	}
	return 0;
}

static void dl_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_oq *q = ud;
	struct osbx_files *f = q->fx;
	uint64_t size, off, len;
	sbx_err e;
	if (f->started || !sbx_proto_get_uint(map, "size", &size) ||
	    !sbx_proto_get_uint(map, "offset", &off) || !sbx_proto_get_uint(map, "length", &len) ||
	    off != f->off || len > size) {
		sbx_err_set(&e, -EPROTO, "agent: file.read's first event is wrong");
		sup_core_blame(q->x->core, q->id, &e);
		if (q->op)
			sup_op_cancel(q->op);
		q->op = NULL;
		if (f->started)
			sup_http_cut(q->r, "agent broke the protocol");
		else
			sup_http_fail(q->r, &e);
		return;
	}
	if (f->ranged && off >= size && size > 0) {
		char cr[48];
		snprintf(cr, sizeof(cr), "bytes */%" PRIu64, size);
		sup_http_header(q->r, "Content-Range", cr);
		sbx_err_set(&e, -ERANGE, "range starts at %" PRIu64 ", past the end (%" PRIu64 ")", off, size);
		if (q->op)
			sup_op_cancel(q->op);
		q->op = NULL;
		sup_http_fail(q->r, &e);
		return;
	}
	f->started = true;
	f->len = len;
	sup_http_header(q->r, "Content-Type", "application/octet-stream");
	sup_http_header(q->r, "Accept-Ranges", "bytes");
	if (f->ranged) {
		char cr[80];
		snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off,
			 len ? off + len - 1 : off, size);
		sup_http_header(q->r, "Content-Range", cr);
	}
	sup_http_start(q->r, f->ranged ? 206 : 200, len);
	if (q->op)
		sup_op_consumed(q->op, cost);
}

static void dl_data(const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_oq *q = ud;
	struct osbx_files *f = q->fx;
	struct evbuffer *b = evbuffer_new();
	if (!f->started || n > f->len - f->got || !b || evbuffer_add(b, p, n) < 0) {
		if (b)
			evbuffer_free(b);
		if (q->op)
			sup_op_cancel(q->op);
		q->op = NULL;
		sup_http_cut(q->r, "file.read sent more than it announced");
		return;
	}
	f->got += n;
	sup_http_write(q->r, b);
	evbuffer_free(b);
	sup_http_charge(q->r, cost);
}

static void dl_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	struct osbx_files *f = q->fx;
	q->op = NULL;
	if (!f->started) {
		sup_http_fail(q->r, err);
		return;
	}
	if (rc < 0 || f->got != f->len)
		sup_http_cut(q->r, "the file ended early or the read failed");
	else
		sup_http_end(q->r);
}

static const sup_core_call_cbs dl_cbs = { .on_data = dl_data, .on_event = dl_event, .on_done = dl_done };

int sup_osbx_act_download(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	struct osbx_files *f = q->fx;
	job *jb = &f->jobs[0];
	q->r = r;
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_args_str(&a, "root", jb->root, strlen(jb->root));
	sbx_proto_args_str(&a, "path", jb->rel, strlen(jb->rel));
	sbx_proto_args_uint(&a, "offset", f->off);
	if (f->len != UINT64_MAX)
		sbx_proto_args_uint(&a, "length", f->len);
	sup_http_on_credit(r, sup_osbx_credit, q);
	return sup_core_call(q->x->core, q->id, SBX_OP_FILE_READ, &a, &dl_cbs, q, &q->op, err);
}

/* ---- upload: multipart, the "metadata" part then the "file" part ---- */

/* The parse runs as the body comes (sup_multipart): the metadata part is
 * gathered (at most MP_META_MAX) and starts file.write at its end; the
 * file part's bytes are held in f->out only until the agent's credit
 * takes them, and the body is read only while little is held (STEP). At
 * the file part's end the parse stops: the rest of the body is dropped. */
static int up_part(const sup_multipart_part *p, void *ud, sbx_err *err)
{
	sup_oq *q = ud;
	struct osbx_files *f = q->fx;
	bool meta = p->name && strcmp(p->name, "metadata") == 0;
	bool file = p->name && strcmp(p->name, "file") == 0;
	if (!meta && !file)
		return sbx_err_set(err, -EINVAL, "multipart: a part that is neither \"metadata\" nor \"file\"");
	if (meta && f->meta_done)
		return sbx_err_set(err, -EINVAL, "multipart: a second \"metadata\" part");
	if (file && !f->meta_done)
		return sbx_err_set(err, -EINVAL, "multipart: the \"file\" part before the \"metadata\" part");
	f->part = meta ? MP_META : MP_FILE;
	/* file.write already answered (on_done): nothing more to parse */
	return file && !q->op ? SUP_MULTIPART_PAUSE : 0;
}

static int up_data(const uint8_t *p, size_t n, void *ud, sbx_err *err)
{
	sup_oq *q = ud;
	struct osbx_files *f = q->fx;
	struct evbuffer *to = f->part == MP_META ? f->meta : f->out;
	if (f->part == MP_META && evbuffer_get_length(f->meta) + n > MP_META_MAX)
		return sbx_err_set(err, -EINVAL, "multipart: the metadata part is over 64 KiB");
	return evbuffer_add(to, p, n) < 0 ? sbx_err_set(err, -ENOMEM, "out of memory") : 0;
}

static int up_meta(sup_oq *q, sbx_err *err);

static int up_part_end(void *ud, sbx_err *err)
{
	sup_oq *q = ud;
	struct osbx_files *f = q->fx;
	if (f->part == MP_META) {
		f->meta_done = true;
		return up_meta(q, err);
	}
	f->file_ended = true;
	return SUP_MULTIPART_PAUSE;
}

static const sup_multipart_cbs up_mp = { .on_part = up_part, .on_data = up_data, .on_part_end = up_part_end };

int sup_osbx_parse_upload(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_oq *q = state;
	struct osbx_files *f = sup_osbx_fx_of(q, in, ctx, err);
	if (!f)
		return err->code;
	if (in->query && *in->query)
		return sbx_err_set(err, -EINVAL, "no query parameters: the path is in the metadata part");
	/* two parts are all it reads: the parse stops after the file's */
	f->parser = sup_multipart_new(sup_http_in_header(in, "Content-Type"), 2, &up_mp, q, err);
	if (!f->parser)
		return err->code;
	if (!(f->out = evbuffer_new()) || !(f->meta = evbuffer_new()))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

static void up_fail(sup_oq *q, const sbx_err *e)
{
	if (q->op)
		sup_op_cancel(q->op);
	q->op = NULL;
	q->fx->dropping = true;
	evbuffer_drain(q->fx->out, evbuffer_get_length(q->fx->out));
	sup_http_fail(q->r, e);
}

static void up_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	struct osbx_files *f = q->fx;
	uint64_t size = 0;
	sbx_err e;
	q->op = NULL;
	f->dropping = true;
	if (rc == 0 && (!f->eof_sent || !sbx_proto_get_uint(res, "size", &size) || size != f->got)) {
		rc = sbx_err_set(&e, -EPROTO, "agent: file.write ended early or miscounted");
		sup_core_blame(q->x->core, q->id, &e);
	} else if (rc < 0) {
		e = *err;
	}
	if (rc < 0)
		sup_http_fail(q->r, &e);
	else
		sup_http_json(q->r, 200, NULL);
}

static void up_pump(void *ud);
static const sup_core_call_cbs up_cbs = {
	.on_done = up_done, .on_writable = up_pump, .wait = SUP_AGENT_WAIT_SENDS
};

/* The metadata part (whole, in f->meta): the path checked, mode and owner
 * as for directories; file.write starts. */
static int up_meta(sup_oq *q, sbx_err *err)
{
	struct osbx_files *f = q->fx;
	size_t n = evbuffer_get_length(f->meta);
	const char *text = (const char *)evbuffer_pullup(f->meta, -1);
	json_error_t je;
	json_t *j = text || n == 0 ? json_loadb(text ? text : "", n, JSON_REJECT_DUPLICATES, &je) : NULL;
	const char *path = json_string_value(json_object_get(j, "path"));
	json_t *mode = json_object_get(j, "mode");
	const char *own[] = { json_string_value(json_object_get(j, "owner")),
			      json_string_value(json_object_get(j, "group")) };
	int rc = 0;
	f->up.mode = 0644;
	if (!json_is_object(j) || !path)
		rc = sbx_err_set(err, -EINVAL, "the metadata part: want {\"path\", \"mode\"}");
	else if (mode && !json_is_null(mode) &&
		 (!json_is_integer(mode) || sup_osbx_mode(json_integer_value(mode), &f->up.mode) < 0 ||
		  f->up.mode > 0777))
		rc = sbx_err_set(err, -EINVAL, "metadata \"mode\": want octal digits (644)");
	for (int i = 0; rc == 0 && i < 2; i++)
		if (own[i] && *own[i] && strcmp(own[i], "sandbox") != 0 && strcmp(own[i], "1000") != 0)
			rc = sbx_err_set(err, -EPERM, "owner and group stay the sandbox user's (sbx changes no owner)");
	if (rc == 0)
		rc = sup_osbx_check_path(sup_http_input(q->r), path, json_string_length(json_object_get(j, "path")),
			   SUP_POLICY_WRITE, &f->up, false, err);
	json_decref(j);
	if (rc < 0)
		return rc;
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_args_str(&a, "root", f->up.root, strlen(f->up.root));
	sbx_proto_args_str(&a, "path", f->up.rel, strlen(f->up.rel));
	sbx_proto_args_uint(&a, "mode", f->up.mode);
	sbx_proto_args_bool(&a, "parents", true);
	sbx_proto_args_bool(&a, "overwrite", true);
	return sup_core_call(q->x->core, q->id, SBX_OP_FILE_WRITE, &a, &up_cbs, q, &q->op, err);
}

/* The body ended where no answer is on its way. */
static void up_body_end(sup_oq *q)
{
	struct osbx_files *f = q->fx;
	sbx_err e;
	sbx_err_clear(&e);
	if (f->dropping || f->file_ended)
		return; /* answered, or on_done answers */
	if (sup_multipart_finish(f->parser, &e) == 0 || f->part != MP_FILE)
		sbx_err_set(&e, -EINVAL, "multipart: the body ended before the \"file\" part");
	else
		sbx_err_set(&e, -EINVAL, "multipart: the body ended inside the \"file\" part");
	up_fail(q, &e);
}

/* Up to max bytes of the body into the parse, read from the connection's
 * buffer in place (after an answer or the file's end: dropped). The bytes
 * taken (0: none now, or the body's end: f->body_done), or -1 when the
 * upload failed and was answered. */
static int up_read(sup_oq *q, size_t max, sbx_err *e)
{
	struct osbx_files *f = q->fx;
	struct evbuffer *buf = NULL;
	int n = sup_http_body(q->r, max, &buf, e);
	if (n == -EAGAIN)
		return 0;
	if (n < 0) {
		if (!f->dropping)
			up_fail(q, e);
		return -1;
	}
	if (n == 0) {
		f->body_done = true;
		return 0;
	}
	size_t used = 0;
	while (used < (size_t)n && !f->dropping && !f->file_ended) {
		struct evbuffer_ptr at;
		struct evbuffer_iovec v;
		if (evbuffer_ptr_set(buf, &at, used, EVBUFFER_PTR_SET) < 0 ||
		    evbuffer_peek(buf, (ev_ssize_t)((size_t)n - used), &at, &v, 1) < 1)
			break;
		size_t len = v.iov_len < (size_t)n - used ? v.iov_len : (size_t)n - used;
		ssize_t k = sup_multipart_feed(f->parser, v.iov_base, len, e);
		if (k < 0) {
			up_fail(q, e);
			return -1;
		}
		used += (size_t)k;
		if ((size_t)k < len)
			break; /* paused */
	}
	if (f->dropping || f->file_ended)
		used = (size_t)n;
	evbuffer_drain(buf, used);
	sup_http_body_took(q->r, used);
	return (int)used;
}

/* Moves the upload on as far as it can: the file's bytes to the agent
 * within its credit, its end once the part ended, and more of the body
 * into the parse while less than STEP waits. Comes back from the body
 * (sup_http_body_start) and from the agent (on_writable). */
static void up_pump(void *ud)
{
	sup_oq *q = ud;
	struct osbx_files *f = q->fx;
	sbx_err e;
	sbx_err_clear(&e);
	for (;;) {
		size_t held = f->dropping ? 0 : evbuffer_get_length(f->out);
		int k = 0;
		if (held && q->op) {
			k = sup_core_call_send_from(q->op, SBX_CH_FILE, f->out, held < STEP ? held : STEP, &e);
			if (k == -ENOMEM || k == -EINVAL) {
				up_fail(q, &e);
				return;
			}
			if (k < 0)
				return; /* on_done answers */
			f->got += (uint64_t)k;
			held -= (size_t)k;
		}
		if (f->file_ended && !f->eof_sent && !held && !f->dropping) {
			if (!q->op || sup_core_call_send(q->op, SBX_CH_FILE, NULL, 0, true, &e) < 0)
				return;
			f->eof_sent = true;
		}
		if (f->body_done) {
			up_body_end(q);
			return;
		}
		if (held >= STEP)
			return; /* on_writable brings us back */
		int n = up_read(q, STEP - held, &e);
		if (n < 0 || (n == 0 && k == 0 && !f->body_done))
			return;
	}
}

int sup_osbx_act_upload(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	q->r = r;
	sup_http_body_start(r, up_pump, q);
	return 0;
}
