/* Their POST /files/replace ({"<path>": {"old", "new"}}, ?verbose=true for
 * the counts) on the agent's own file operations, one path after another:
 * fs.stat (a regular file within REPLACE_MAX, its mode kept), file.read
 * into memory, every occurrence of "old" replaced, file.write over it (a
 * new file renamed over the old: a failure leaves the old one whole). sbx
 * has no replace op of its own; this is the one execd call whose whole
 * file is held here, hence the bound (413 above it). Every path goes
 * through the tenant's policy first, as the other files routes' do. */
#include "sup_osbx_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "sup_policy.h"
#include "sup_query.h"

#define MAX_PATHS 64
#define REPLACE_MAX (16u << 20) /* most of one file held here */
#define STEP (256 * 1024)       /* most handed to the agent at once */

typedef struct rjob {
	char *path, *root, *rel, *old, *new_;
	size_t old_len, new_len;
} rjob;

struct osbx_replace {
	rjob jobs[MAX_PATHS];
	size_t njobs, next;
	bool verbose;
	uint64_t mode, size, got;
	bool eof_sent;
	struct evbuffer *buf; /* the file read, then the file to write */
	json_t *acc;          /* {path: {"replacedCount"}} */
};

void sup_osbx_replace_release(sup_oq *q)
{
	struct osbx_replace *f = q->rx;
	if (!f)
		return;
	for (size_t i = 0; i < f->njobs; i++) {
		free(f->jobs[i].path);
		free(f->jobs[i].root);
		free(f->jobs[i].rel);
		free(f->jobs[i].old);
		free(f->jobs[i].new_);
	}
	if (f->buf)
		evbuffer_free(f->buf);
	json_decref(f->acc);
	free(f);
	q->rx = NULL;
}

static char *dup_n(const char *s, size_t n)
{
	char *d = malloc(n + 1);
	if (d) {
		memcpy(d, s, n);
		d[n] = '\0';
	}
	return d;
}

static int add_job(const sup_http_in *in, struct osbx_replace *f, const char *path, json_t *v,
		   sbx_err *err)
{
	json_t *o = json_object_get(v, "old"), *n = json_object_get(v, "new");
	if (!json_is_object(v) || !json_is_string(o) || !json_is_string(n))
		return sbx_err_set(err, -EINVAL, "field \"%.64s\": want {\"old\", \"new\"} strings", path);
	if (json_string_length(o) == 0)
		return sbx_err_set(err, -EINVAL, "field \"%.64s.old\": must not be empty", path);
	if (json_object_size(v) != 2)
		return sbx_err_set(err, -EINVAL, "field \"%.64s\": only \"old\" and \"new\"", path);
	sup_policy_match *m = malloc(sizeof(*m));
	if (!m)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	rjob *j = &f->jobs[f->njobs++];
	int rc = sup_policy_check(sup_tenant_policy(in->who), in->who->name, path, strlen(path),
				  SUP_POLICY_WRITE, m, err);
	if (rc == 0) {
		j->path = strdup(m->path);
		j->root = strdup(m->root);
		j->rel = strdup(m->rel);
		j->old = dup_n(json_string_value(o), json_string_length(o));
		j->new_ = dup_n(json_string_value(n), json_string_length(n));
		j->old_len = json_string_length(o);
		j->new_len = json_string_length(n);
		if (!j->path || !j->root || !j->rel || !j->old || !j->new_)
			rc = sbx_err_set(err, -ENOMEM, "out of memory");
	}
	free(m);
	return rc;
}

int sup_osbx_parse_replace(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "verbose", NULL };
	sup_oq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	SUP_AUTO_QUERY sup_query qs = { 0 };
	const char *k;
	json_t *v;
	q->x = ctx;
	q->id = in->id;
	if (!in->who)
		return sbx_err_set(err, -EPERM, "no tenant: no file access");
	struct osbx_replace *f = q->rx = calloc(1, sizeof(*q->rx));
	if (!f)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int rc = sup_query_parse(in->query, keys, &qs, err);
	if (rc < 0)
		return rc;
	const char *verbose = sup_query_get(&qs, "verbose", NULL);
	f->verbose = verbose && (strcmp(verbose, "true") == 0 || strcmp(verbose, "1") == 0);
	if ((rc = sup_http_in_json(in, NULL, &j, err)) < 0)
		return rc;
	if (json_object_size(j) == 0 || json_object_size(j) > MAX_PATHS)
		return sbx_err_set(err, -EINVAL, "want {\"<path>\": {\"old\", \"new\"}} for 1..%d paths", MAX_PATHS);
	json_object_foreach(j, k, v)
		if ((rc = add_job(in, f, k, v, err)) < 0)
			return rc;
	return 0;
}

static void step(sup_oq *q);

static void fail(sup_oq *q, const sbx_err *e)
{
	if (q->op)
		sup_op_cancel(q->op);
	q->op = NULL;
	sup_http_fail(q->r, e);
}

/* The guest broke its promise (a wrong answer): the sandbox is blamed. */
static void broke(sup_oq *q, const char *what)
{
	sbx_err e;
	sbx_err_set(&e, -EPROTO, "agent: %s", what);
	sup_core_blame(q->x->core, q->id, &e);
	fail(q, &e);
}

/* Every occurrence of old in f->buf replaced by new (left to right, not
 * overlapping); the count. */
static int substitute(struct osbx_replace *f, const rjob *j, size_t *count, sbx_err *err)
{
	struct evbuffer *out = evbuffer_new();
	if (!out)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	*count = 0;
	for (;;) {
		struct evbuffer_ptr at = evbuffer_search(f->buf, j->old, j->old_len, NULL);
		size_t n = at.pos < 0 ? evbuffer_get_length(f->buf) : (size_t)at.pos;
		if (evbuffer_remove_buffer(f->buf, out, n) != (int)n ||
		    (at.pos >= 0 && (evbuffer_drain(f->buf, j->old_len) < 0 ||
				     evbuffer_add(out, j->new_, j->new_len) < 0))) {
			evbuffer_free(out);
			return sbx_err_set(err, -ENOMEM, "out of memory");
		}
		if (at.pos < 0)
			break;
		++*count;
	}
	if (evbuffer_get_length(out) > REPLACE_MAX) {
		evbuffer_free(out);
		return sbx_err_set(err, -E2BIG, "%s: over %u bytes once replaced", j->path, REPLACE_MAX);
	}
	evbuffer_free(f->buf);
	f->buf = out;
	return 0;
}

/* ---- write ---- */

static void wr_pump(void *ud)
{
	sup_oq *q = ud;
	struct osbx_replace *f = q->rx;
	sbx_err e;
	while (q->op && !f->eof_sent) {
		size_t left = evbuffer_get_length(f->buf);
		int k = left ? sup_core_call_send_from(q->op, SBX_CH_FILE, f->buf,
						       left < STEP ? left : STEP, &e)
			     : sup_core_call_send(q->op, SBX_CH_FILE, NULL, 0, true, &e);
		if (k < 0 && (k == -ENOMEM || k == -EINVAL)) {
			fail(q, &e);
			return;
		}
		if (k < 0 || (left && k == 0))
			return; /* on_done tells why, or on_writable brings us back */
		if (!left)
			f->eof_sent = true;
	}
}

static void wr_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	struct osbx_replace *f = q->rx;
	uint64_t size;
	q->op = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	if (!f->eof_sent || !sbx_proto_get_uint(res, "size", &size) || size != f->size) {
		broke(q, "file.write ended early or miscounted");
		return;
	}
	step(q);
}

static const sup_core_call_cbs wr_cbs = {
	.on_done = wr_done, .on_writable = wr_pump, .wait = SUP_AGENT_WAIT_SENDS
};

/* ---- read ---- */

static void rd_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_oq *q = ud;
	struct osbx_replace *f = q->rx;
	uint64_t size, off, len;
	if (!sbx_proto_get_uint(map, "size", &size) || !sbx_proto_get_uint(map, "offset", &off) ||
	    !sbx_proto_get_uint(map, "length", &len) || off != 0 || len > size) {
		broke(q, "file.read's first event is wrong");
		return;
	}
	if (len > REPLACE_MAX) {
		sbx_err e;
		sbx_err_set(&e, -E2BIG, "%s: %" PRIu64 " bytes, over the %u this server replaces in",
			    f->jobs[f->next - 1].path, len, REPLACE_MAX);
		fail(q, &e);
		return;
	}
	f->size = len;
	if (q->op)
		sup_op_consumed(q->op, cost);
}

static void rd_data(const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_oq *q = ud;
	struct osbx_replace *f = q->rx;
	if (n > f->size - f->got) {
		broke(q, "file.read sent more than it announced");
		return;
	}
	if (evbuffer_add(f->buf, p, n) < 0) {
		sbx_err e;
		sbx_err_set(&e, -ENOMEM, "out of memory");
		fail(q, &e);
		return;
	}
	f->got += n;
	if (q->op)
		sup_op_consumed(q->op, cost);
}

static void rd_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	struct osbx_replace *f = q->rx;
	rjob *j = &f->jobs[f->next - 1];
	sbx_err e;
	size_t count = 0;
	q->op = NULL;
	(void)res;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	if (f->got != f->size) {
		sbx_err_set(&e, -EBUSY, "%s changed while it was read: not replaced", j->path);
		sup_http_fail(q->r, &e);
		return;
	}
	if (substitute(f, j, &count, &e) < 0) {
		sup_http_fail(q->r, &e);
		return;
	}
	json_object_set_new(f->acc, j->path, json_pack("{s:I}", "replacedCount", (json_int_t)count));
	if (count == 0) { /* nothing to write: the file stays as it is */
		step(q);
		return;
	}
	f->size = evbuffer_get_length(f->buf);
	f->eof_sent = false;
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_args_str(&a, "root", j->root, strlen(j->root));
	sbx_proto_args_str(&a, "path", j->rel, strlen(j->rel));
	sbx_proto_args_uint(&a, "mode", f->mode);
	sbx_proto_args_bool(&a, "overwrite", true);
	sbx_proto_args_uint(&a, "max_bytes", f->size);
	if (sup_core_call(q->x->core, q->id, SBX_OP_FILE_WRITE, &a, &wr_cbs, q, &q->op, &e) < 0) {
		sup_http_fail(q->r, &e);
		return;
	}
	wr_pump(q);
}

static const sup_core_call_cbs rd_cbs = { .on_data = rd_data, .on_event = rd_event, .on_done = rd_done };

/* ---- stat ---- */

static void st_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	struct osbx_replace *f = q->rx;
	rjob *j = &f->jobs[f->next - 1];
	const char *type;
	size_t tl;
	uint64_t mode, size;
	sbx_err e;
	q->op = NULL;
	if (rc < 0) {
		sup_http_fail(q->r, err);
		return;
	}
	if (!sbx_proto_get_str(res, "type", &type, &tl) || !sbx_proto_get_uint(res, "mode", &mode) ||
	    !sbx_proto_get_uint(res, "size", &size) || mode > 07777) {
		broke(q, "fs.stat's keys missing or out of range");
		return;
	}
	if (tl != 4 || memcmp(type, "file", 4) != 0) {
		sbx_err_set(&e, -EINVAL, "%s: not a regular file", j->path);
		sup_http_fail(q->r, &e);
		return;
	}
	if (size > REPLACE_MAX) {
		sbx_err_set(&e, -E2BIG, "%s: %" PRIu64 " bytes, over the %u this server replaces in", j->path,
			    size, REPLACE_MAX);
		sup_http_fail(q->r, &e);
		return;
	}
	f->mode = mode & 0777;
	f->size = f->got = 0;
	if (f->buf)
		evbuffer_free(f->buf);
	f->buf = evbuffer_new();
	if (!f->buf) {
		sbx_err_set(&e, -ENOMEM, "out of memory");
		sup_http_fail(q->r, &e);
		return;
	}
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_args_str(&a, "root", j->root, strlen(j->root));
	sbx_proto_args_str(&a, "path", j->rel, strlen(j->rel));
	sbx_proto_args_uint(&a, "offset", 0);
	if (sup_core_call(q->x->core, q->id, SBX_OP_FILE_READ, &a, &rd_cbs, q, &q->op, &e) < 0)
		sup_http_fail(q->r, &e);
}

static const sup_core_call_cbs st_cbs = { .on_done = st_done };

/* The next path, or the answer once all are done. */
static void step(sup_oq *q)
{
	struct osbx_replace *f = q->rx;
	sbx_err e;
	if (f->next == f->njobs) {
		sup_http_json(q->r, 200, f->verbose ? json_incref(f->acc) : NULL);
		return;
	}
	rjob *j = &f->jobs[f->next++];
	sbx_proto_args a;
	sbx_proto_args_init(&a);
	sbx_proto_args_str(&a, "root", j->root, strlen(j->root));
	sbx_proto_args_str(&a, "path", j->rel, strlen(j->rel));
	sbx_proto_args_bool(&a, "follow", true);
	if (sup_core_call(q->x->core, q->id, SBX_OP_FS_STAT, &a, &st_cbs, q, &q->op, &e) < 0)
		sup_http_fail(q->r, &e);
}

int sup_osbx_act_replace(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	q->r = r;
	q->rx->acc = json_object();
	if (!q->rx->acc)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	step(q);
	return 0;
}
