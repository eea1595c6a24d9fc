/* envd's plain /files routes. GET /files?path=&username= streams the file
 * (file.read) as application/octet-stream. POST /files takes their SDK's
 * multipart/form-data body (a part per file, each named by its filename,
 * or by ?path=), parsed as it comes (edge/api's sup_multipart): each part
 * goes to its own file.write (folders above it made, an old file
 * replaced), one after the other, and the answer lists what was written,
 * [{"name","type":"file","path"}]. A body of another type is one file at
 * ?path= (envd's octet-stream upload; Content-Encoding is not served). The
 * body is read only while less than STEP of it waits for the agent's
 * credit, so a file of any size streams through bounded memory. */
#include "sup_e2b_fs_int.h"

#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sbx/proto.h"
#include "sup_multipart.h"
#include "sup_query.h"

#define STEP (256 * 1024)   /* most handed to the agent at once, and held */
#define FILES_MAX 1024      /* parts of one upload */

static void credit(size_t cost, void *ud)
{
	sup_eq *q = ud;
	if (q->op)
		sup_op_consumed(q->op, cost);
}

/* The query (path, username) of either route; the path checked for need
 * when given (required: it must be). */
static int files_query(const sup_http_in *in, void *ctx, sup_eq *q, sup_policy_access need,
		       bool required, sbx_err *err)
{
	static const char *const keys[] = { "path", "username", NULL };
	SUP_AUTO_QUERY sup_query qs = { 0 };
	size_t pl, ul;
	sup_e2b_q_init(q, in, ctx);
	struct e2b_fs *f = sup_e2b_fs_of(q, err);
	if (!f)
		return err->code;
	f->who = in->who;
	int rc = sup_query_parse(in->query, keys, &qs, err);
	if (rc < 0)
		return rc;
	const char *user = sup_query_get(&qs, "username", &ul);
	if (user && ul) {
		if (ul > SUP_API_MAX_USER || memchr(user, '\0', ul))
			return sbx_err_set(err, -EINVAL, "query parameter \"username\": at most %d bytes, no NUL",
					   SUP_API_MAX_USER);
		memcpy(q->user_buf, user, ul);
		q->user_buf[ul] = '\0';
		q->user = q->user_buf;
	}
	const char *p = sup_query_get(&qs, "path", &pl);
	if (!p)
		return required ? sbx_err_set(err, -EINVAL, "query parameter \"path\" is required") : 0;
	if (!(f->qpath = strndup(p, pl)))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	f->qpath_len = pl;
	return sup_e2b_fs_path(q, p, pl, need, &f->m, err);
}

/* ---- GET /files ---- */

int sup_e2b_parse_files_get(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	return files_query(in, ctx, state, SUP_POLICY_READ, true, err);
}

static void dl_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_eq *q = ud;
	struct e2b_fs *f = q->fs;
	uint64_t size, off, len;
	sbx_err e;
	if (f->started || !sbx_proto_get_uint(map, "size", &size) || !sbx_proto_get_uint(map, "offset", &off) ||
	    !sbx_proto_get_uint(map, "length", &len) || off != 0 || len != size) {
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
	f->started = true;
	f->len = len;
	sup_http_header(q->r, "Content-Type", "application/octet-stream");
	sup_http_start(q->r, 200, len);
	if (q->op)
		sup_op_consumed(q->op, cost);
}

static void dl_data(const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_eq *q = ud;
	struct e2b_fs *f = q->fs;
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
	sup_eq *q = ud;
	struct e2b_fs *f = q->fs;
	(void)res;
	q->op = NULL;
	if (!f->started)
		sup_http_fail(q->r, err);
	else if (rc < 0 || f->got != f->len)
		sup_http_cut(q->r, "the file ended early or the read failed");
	else
		sup_http_end(q->r);
}

static const sup_core_call_cbs dl_cbs = { .on_data = dl_data, .on_event = dl_event, .on_done = dl_done };

int sup_e2b_act_files_get(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	struct e2b_fs *f = q->fs;
	q->r = r;
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_args_str(&a, "root", f->m.root, strlen(f->m.root));
	sbx_proto_args_str(&a, "path", f->m.rel, strlen(f->m.rel));
	sup_http_on_credit(r, credit, q);
	return sup_core_call(q->x->core, q->id, SBX_OP_FILE_READ, &a, &dl_cbs, q, &q->op, err);
}

/* ---- POST /files ---- */

static void up_pump(void *ud);

/* Answered (an error): the file.write goes, the rest of the body is
 * read and dropped. */
static void up_fail(sup_eq *q, const sbx_err *e)
{
	struct e2b_fs *f = q->fs;
	if (q->op)
		sup_op_cancel(q->op);
	q->op = NULL;
	f->dropping = true;
	evbuffer_drain(f->out, evbuffer_get_length(f->out));
	sup_http_fail(q->r, e);
}

static void wr_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_eq *q = ud;
	struct e2b_fs *f = q->fs;
	uint64_t size = 0;
	sbx_err e;
	sbx_err_clear(&e);
	q->op = NULL;
	if (f->dropping)
		return;
	if (rc == 0 && (!f->eof_sent || !sbx_proto_get_uint(res, "size", &size) || size != f->sent)) {
		sbx_err_set(&e, -EPROTO, "agent: file.write ended early or miscounted");
		sup_core_blame(q->x->core, q->id, &e);
	} else if (rc < 0) {
		e = *err;
	}
	/* theirs: the name, "file", the path */
	const char *path = f->m.path, *name = strrchr(path, '/');
	json_t *o = e.code ? NULL : json_pack("{s:s}", "type", "file");
	if (!e.code && (!o || sup_api_set_bytes(o, "name", name + 1, strlen(name + 1)) < 0 ||
			sup_api_set_bytes(o, "path", path, strlen(path)) < 0 ||
			json_array_append_new(f->written, o) < 0))
		sbx_err_set(&e, -ENOMEM, "out of memory");
	if (e.code) {
		json_decref(o);
		up_fail(q, &e);
		return;
	}
	f->part_open = f->file_ended = f->eof_sent = false;
	f->sent = 0;
	if (f->octet) {
		f->dropping = true;
		sup_http_json(q->r, 200, json_incref(f->written));
		return;
	}
	up_pump(q); /* the parse goes on after the part */
}

static const sup_core_call_cbs wr_cbs = { .on_done = wr_done, .on_writable = up_pump,
					  .wait = SUP_AGENT_WAIT_SENDS };

/* file.write of f->m (folders above it made, an old file replaced). */
static int write_start(sup_eq *q, sbx_err *err)
{
	struct e2b_fs *f = q->fs;
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_args_str(&a, "root", f->m.root, strlen(f->m.root));
	sbx_proto_args_str(&a, "path", f->m.rel, strlen(f->m.rel));
	sbx_proto_args_uint(&a, "mode", 0644);
	sbx_proto_args_bool(&a, "parents", true);
	sbx_proto_args_bool(&a, "overwrite", true);
	f->part_open = true;
	return sup_core_call(q->x->core, q->id, SBX_OP_FILE_WRITE, &a, &wr_cbs, q, &q->op, err);
}

/* A part named "file" is a file at its filename (or ?path=); another
 * part is read and dropped, as envd does. */
static int mp_part(const sup_multipart_part *p, void *ud, sbx_err *err)
{
	sup_eq *q = ud;
	struct e2b_fs *f = q->fs;
	if (!p->name || strcmp(p->name, "file") != 0) {
		f->part_open = false;
		return 0;
	}
	if (!f->qpath && (!p->filename || !*p->filename))
		return sbx_err_set(err, -EINVAL, "multipart: part %u has no filename and no ?path= was given",
				   p->index);
	int rc = f->qpath ? 0 : sup_e2b_fs_path(q, p->filename, strlen(p->filename), SUP_POLICY_WRITE, &f->m, err);
	if (rc == 0 && f->m.is_root)
		rc = sbx_err_set(err, -EINVAL, "path %s is a folder (a policy root)", f->m.path);
	return rc < 0 ? rc : write_start(q, err);
}

static int mp_data(const uint8_t *p, size_t n, void *ud, sbx_err *err)
{
	sup_eq *q = ud;
	struct e2b_fs *f = q->fs;
	if (!f->part_open)
		return 0;
	return evbuffer_add(f->out, p, n) < 0 ? sbx_err_set(err, -ENOMEM, "out of memory") : 0;
}

static int mp_end(void *ud, sbx_err *err)
{
	sup_eq *q = ud;
	struct e2b_fs *f = q->fs;
	(void)err;
	if (!f->part_open)
		return 0;
	f->file_ended = true;
	return SUP_MULTIPART_PAUSE; /* the next part after this file's write */
}

static const sup_multipart_cbs mp_cbs = { .on_part = mp_part, .on_data = mp_data, .on_part_end = mp_end };

int sup_e2b_parse_files_post(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_eq *q = state;
	int rc = files_query(in, ctx, q, SUP_POLICY_WRITE, false, err);
	struct e2b_fs *f = q->fs;
	if (rc < 0)
		return rc;
	const char *ct = sup_http_in_header(in, "Content-Type");
	const char *ce = sup_http_in_header(in, "Content-Encoding");
	if (!(f->out = evbuffer_new()) || !(f->written = json_array()))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	if (ct && strncasecmp(ct, "multipart/", 10) == 0) {
		f->parser = sup_multipart_new(ct, FILES_MAX, &mp_cbs, q, err);
		return f->parser ? 0 : err->code;
	}
	f->octet = true;
	if (ce && strcasecmp(ce, "identity") != 0)
		return sbx_err_set(err, -EINVAL, "Content-Encoding %.32s is not served: send the bytes as they are", ce);
	if (!f->qpath)
		return sbx_err_set(err, -EINVAL, "query parameter \"path\" is required for a body that is not multipart");
	return f->m.is_root ? sbx_err_set(err, -EINVAL, "path %s is a folder (a policy root)", f->m.path) : 0;
}

/* Up to max bytes of the body: into the parse (multipart), or into
 * f->out (a plain body). The bytes taken (0: none now, or the body's end:
 * f->body_done), or -1 when the upload failed and was answered. */
static int up_read(sup_eq *q, size_t max, sbx_err *e)
{
	struct e2b_fs *f = q->fs;
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
		if (f->octet)
			f->file_ended = true;
		return 0;
	}
	size_t used = 0;
	if (f->dropping) {
		used = (size_t)n;
	} else if (f->octet) {
		evbuffer_remove_buffer(buf, f->out, (size_t)n);
		sup_http_body_took(q->r, (size_t)n);
		return n;
	}
	while (used < (size_t)n && !f->file_ended) {
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
			break; /* paused at a file's end */
	}
	evbuffer_drain(buf, used);
	sup_http_body_took(q->r, used);
	return (int)used;
}

/* The multipart body ended with no write in flight: the answer. */
static void up_body_end(sup_eq *q)
{
	struct e2b_fs *f = q->fs;
	sbx_err e;
	sbx_err_clear(&e);
	if (sup_multipart_finish(f->parser, &e) < 0) {
		up_fail(q, &e);
		return;
	}
	if (json_array_size(f->written) == 0) {
		sbx_err_set(&e, -EINVAL, "multipart: no part named \"file\"");
		up_fail(q, &e);
		return;
	}
	f->dropping = true;
	sup_http_json(q->r, 200, json_incref(f->written));
}

/* Moves the upload on as far as it can: the file's bytes to the agent
 * within its credit, its end once its part (or the body) ended, and more
 * of the body while less than STEP waits. Comes back from the body
 * (sup_http_body_start), from the agent (on_writable) and after a file's
 * write (the next part). */
static void up_pump(void *ud)
{
	sup_eq *q = ud;
	struct e2b_fs *f = q->fs;
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
				return; /* wr_done answers */
			f->sent += (uint64_t)k;
			held -= (size_t)k;
		}
		if (f->file_ended && !f->dropping) {
			if (!held && !f->eof_sent && q->op) {
				if (sup_core_call_send(q->op, SBX_CH_FILE, NULL, 0, true, &e) < 0)
					return;
				f->eof_sent = true;
			}
			return; /* wr_done goes on */
		}
		if (f->body_done) {
			if (!f->dropping)
				up_body_end(q); /* inside a part: refused, its write cancelled */
			return;
		}
		if (held >= STEP)
			return; /* on_writable brings us back */
		int n = up_read(q, STEP - held, &e);
		if (n < 0 || (n == 0 && k == 0 && !f->body_done))
			return;
	}
}

int sup_e2b_act_files_post(sup_http_req *r, void *state, sbx_err *err)
{
	sup_eq *q = state;
	struct e2b_fs *f = q->fs;
	q->r = r;
	if (f->octet && write_start(q, err) < 0)
		return err->code;
	sup_http_body_start(r, up_pump, q);
	return 0;
}
