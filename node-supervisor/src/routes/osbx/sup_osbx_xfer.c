/* OpenSandbox's file downloads (file.read, Range honoured) and uploads
 * (multipart: the "metadata" part, then the "file" part streamed into
 * file.write), each path through the tenant's policy first. Bytes move
 * only as fast as the other side takes them: the body held here is
 * bounded (MP_HOLD), the agent handed STEP at most at once. */
#include "sup_osbx_int.h"
#include "sup_osbx_files_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sbx/proto.h"
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

/* The boundary of a multipart/form-data Content-Type into f->delim. */
static int boundary(const char *ct, struct osbx_files *f, sbx_err *err)
{
	const char *b = ct ? strstr(ct, "boundary=") : NULL;
	if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0 || !b)
		return sbx_err_set(err, -EINVAL, "want Content-Type: multipart/form-data; boundary=...");
	b += 9;
	bool quoted = *b == '"';
	b += quoted;
	size_t n = strcspn(b, quoted ? "\"" : "; \t");
	if (n == 0 || n > 70)
		return sbx_err_set(err, -EINVAL, "multipart boundary: 1..70 characters");
	f->dlen = (size_t)snprintf(f->delim, sizeof(f->delim), "\r\n--%.*s", (int)n, b);
	return 0;
}

int sup_osbx_parse_upload(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_oq *q = state;
	struct osbx_files *f = sup_osbx_fx_of(q, in, ctx, err);
	if (!f)
		return err->code;
	if (in->query && *in->query)
		return sbx_err_set(err, -EINVAL, "no query parameters: the path is in the metadata part");
	int rc = boundary(sup_http_in_header(in, "Content-Type"), f, err);
	if (rc == 0 && !(f->mp = evbuffer_new()))
		rc = sbx_err_set(err, -ENOMEM, "out of memory");
	return rc;
}

static void up_fail(sup_oq *q, const sbx_err *e)
{
	if (q->op)
		sup_op_cancel(q->op);
	q->op = NULL;
	q->fx->mst = MP_TAIL;
	sup_http_fail(q->r, e);
}

static void up_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	struct osbx_files *f = q->fx;
	uint64_t size = 0;
	sbx_err e;
	q->op = NULL;
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

/* The metadata part (whole, in mp up to the delimiter): the path checked,
 * mode and owner as for directories; file.write starts. */
static int up_meta(sup_oq *q, size_t n, sbx_err *err)
{
	struct osbx_files *f = q->fx;
	char *text = malloc(n + 1);
	if (!text)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	evbuffer_remove(f->mp, text, n);
	json_error_t je;
	json_t *j = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
	free(text);
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

/* One step of the parse on what mp holds: 1 progress, 0 wait (more body,
 * or the agent's credit), < 0 an error (err). */
static int up_parse(sup_oq *q, sbx_err *err)
{
	struct osbx_files *f = q->fx;
	size_t have = evbuffer_get_length(f->mp);
	struct evbuffer_ptr at;
	switch (f->mst) {
	case MP_START: /* the first delimiter has no CRLF before it */
		at = evbuffer_search(f->mp, f->delim + 2, f->dlen - 2, NULL);
		if (at.pos < 0)
			return have > MP_HEAD_MAX ? sbx_err_set(err, -EINVAL, "multipart: no boundary") : 0;
		evbuffer_drain(f->mp, (size_t)at.pos + f->dlen - 2);
		f->mst = MP_HEAD;
		return 1;
	case MP_HEAD: {
		at = evbuffer_search(f->mp, "\r\n\r\n", 4, NULL);
		if (at.pos < 0)
			return have > MP_HEAD_MAX ? sbx_err_set(err, -EINVAL, "multipart: a part's head is too long") : 0;
		size_t n = (size_t)at.pos + 4;
		char *h = malloc(n + 1);
		if (!h)
			return sbx_err_set(err, -ENOMEM, "out of memory");
		evbuffer_remove(f->mp, h, n);
		h[n] = '\0';
		if (strncmp(h, "--", 2) == 0) { /* the closing delimiter */
			free(h);
			f->mst = MP_TAIL;
			return 1;
		}
		bool meta = strstr(h, "name=\"metadata\"") != NULL, file = strstr(h, "name=\"file\"") != NULL;
		free(h);
		if (!meta && !file)
			return sbx_err_set(err, -EINVAL, "multipart: a part that is neither \"metadata\" nor \"file\"");
		if (file && !q->op)
			return sbx_err_set(err, -EINVAL, "multipart: the \"file\" part before the \"metadata\" part");
		if (meta && (q->op || f->eof_sent))
			return sbx_err_set(err, -EINVAL, "multipart: a second \"metadata\" part");
		f->mst = meta ? MP_META : MP_FILE;
		return 1;
	}
	case MP_META:
		at = evbuffer_search(f->mp, f->delim, f->dlen, NULL);
		if (at.pos < 0)
			return have > MP_META_MAX ? sbx_err_set(err, -EINVAL, "multipart: the metadata part is over 64 KiB") : 0;
		int rc = up_meta(q, (size_t)at.pos, err);
		if (rc < 0)
			return rc;
		evbuffer_drain(f->mp, f->dlen);
		f->mst = MP_HEAD;
		return 1;
	case MP_FILE: {
		if (!q->op)
			return 0; /* on_done answers */
		at = evbuffer_search(f->mp, f->delim, f->dlen, NULL);
		size_t n = at.pos >= 0 ? (size_t)at.pos : have > f->dlen ? have - f->dlen : 0;
		if (n == 0 && at.pos < 0)
			return 0;
		if (n > 0) {
			int k = sup_core_call_send_from(q->op, SBX_CH_FILE, f->mp, n < STEP ? n : STEP, err);
			if (k < 0)
				return k == -ENOMEM || k == -EINVAL ? k : 0;
			if (k == 0)
				return 0; /* on_writable brings us back */
			f->got += (uint64_t)k;
			if ((size_t)k < n || at.pos < 0)
				return 1;
		}
		/* the part's end */
		evbuffer_drain(f->mp, f->dlen);
		if (sup_core_call_send(q->op, SBX_CH_FILE, NULL, 0, true, err) < 0)
			return 0;
		f->eof_sent = true;
		f->mst = MP_TAIL;
		return 1;
	}
	default: /* after the file: the rest of the body is read and dropped */
		evbuffer_drain(f->mp, have);
		return 0;
	}
}

static void up_pump(void *ud)
{
	sup_oq *q = ud;
	struct osbx_files *f = q->fx;
	for (;;) {
		sbx_err e;
		sbx_err_clear(&e);
		/* take more body while little is held */
		while (!f->body_done && evbuffer_get_length(f->mp) < MP_HOLD) {
			struct evbuffer *buf = NULL;
			int n = sup_http_body(q->r, MP_HOLD - evbuffer_get_length(f->mp), &buf, &e);
			if (n == -EAGAIN)
				break;
			if (n < 0) {
				up_fail(q, &e);
				return;
			}
			if (n == 0) {
				f->body_done = true;
				break;
			}
			evbuffer_remove_buffer(buf, f->mp, (size_t)n);
			sup_http_body_took(q->r, (size_t)n);
		}
		int rc = up_parse(q, &e);
		if (rc < 0) {
			up_fail(q, &e);
			return;
		}
		if (rc == 0) {
			if (f->body_done && !f->eof_sent && f->mst != MP_TAIL && q->op == NULL &&
			    f->mst != MP_FILE) {
				sbx_err_set(&e, -EINVAL, "multipart: the body ended before the \"file\" part");
				up_fail(q, &e);
			} else if (f->body_done && f->mst == MP_FILE && q->op &&
				   evbuffer_search(f->mp, f->delim, f->dlen, NULL).pos < 0 &&
				   evbuffer_get_length(f->mp) <= f->dlen) {
				sbx_err_set(&e, -EINVAL, "multipart: the body ended inside the \"file\" part");
				up_fail(q, &e);
			}
			return;
		}
	}
}

int sup_osbx_act_upload(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	q->r = r;
	sup_http_body_start(r, up_pump, q);
	return 0;
}
