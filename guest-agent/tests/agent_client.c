#include "agent_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "test_util.h"

static tc_stream *find(tc_client *c, uint64_t id)
{
	for (size_t i = 0; i < c->nstreams; i++)
		if (c->streams[i]->id == id)
			return c->streams[i];
	return NULL;
}

/* Geometric growth: a copy per frame would make 40 MB quadratic. */
static void append(char **buf, size_t *len, size_t *cap, const void *p, size_t n)
{
	if (*len + n > TC_OUT_MAX)
		n = TC_OUT_MAX - *len;
	if (*len + n + 1 > *cap) {
		size_t nc = *cap ? *cap : 4096;
		while (nc < *len + n + 1)
			nc *= 2;
		char *nb = realloc(*buf, nc);
		if (!nb)
			abort();
		*buf = nb;
		*cap = nc;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
	(*buf)[*len] = '\0';
}

static void copy_str(char *dst, size_t cap, const char *p, size_t n)
{
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, p ? p : "", p ? n : 0);
	dst[p ? n : 0] = '\0';
}

static void on_end(tc_stream *s, const sbx_proto_frame *f)
{
	const msgpack_object *r = &f->args, *o;

	s->done = true;
	if (r->type != MSGPACK_OBJECT_MAP)
		return;
	o = sbx_proto_map_get(r, "exit_code");
	if (o && (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER || o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)) {
		s->exited = true;
		s->exit_code = o->via.i64;
	}
	o = sbx_proto_map_get(r, "signal");
	if (o && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		s->signaled = true;
		s->signal = o->via.i64;
	}
	sbx_proto_get_bool(r, "timed_out", &s->timed_out);
	sbx_proto_get_uint(r, "duration_us", &s->duration_us);
	o = sbx_proto_map_get(r, "rusage");
	if (o && o->type == MSGPACK_OBJECT_MAP) {
		s->has_rusage = sbx_proto_get_uint(o, "max_rss_kb", &s->max_rss_kb) &&
				sbx_proto_get_uint(o, "user_ms", &s->user_ms) &&
				sbx_proto_get_uint(o, "sys_ms", &s->sys_ms);
	}
}

static void keep_map(msgpack_sbuffer *buf, const msgpack_object *o)
{
	msgpack_packer pk;

	msgpack_sbuffer_init(buf);
	msgpack_packer_init(&pk, buf, msgpack_sbuffer_write);
	msgpack_pack_object(&pk, *o);
}

static void on_frame(sbx_proto_conn *conn, const sbx_proto_frame *f, void *ud)
{
	tc_client *c = ud;
	tc_stream *s = find(c, f->id);

	if (!s)
		return;
	switch (f->kind) {
	case SBX_PROTO_DATA:
		if (f->ch_len == 6 && memcmp(f->ch, "stdout", 6) == 0)
			append(&s->out, &s->out_len, &s->out_cap, f->data, f->data_len);
		else
			append(&s->err, &s->err_len, &s->err_cap, f->data, f->data_len);
		if (f->data_len && s->norder < sizeof(s->order) - 1)
			s->order[s->norder++] = f->ch[0] == 's' && f->ch_len > 3 && f->ch[3] == 'o' ? 'o' : 'e';
		if (s->hold_credit)
			s->held += f->body_len;
		else
			sbx_proto_conn_consumed(conn, f->id, f->body_len);
		break;
	case SBX_PROTO_EVENT:
		if (s->nevents < TC_MAX_EVENTS)
			keep_map(&s->events[s->nevents++], &f->args);
		if (s->hold_credit)
			s->held += f->body_len;
		else
			sbx_proto_conn_consumed(conn, f->id, f->body_len);
		break;
	case SBX_PROTO_END:
		on_end(s, f);
		msgpack_sbuffer_destroy(&s->result);
		keep_map(&s->result, &f->args);
		break;
	case SBX_PROTO_ERR:
		s->done = s->failed = true;
		copy_str(s->code, sizeof(s->code), f->code_name, f->code_name_len);
		copy_str(s->msg, sizeof(s->msg), f->msg, f->msg_len);
		break;
	default:
		break;
	}
}

static void on_ready(sbx_proto_conn *conn, void *ud)
{
	((tc_client *)ud)->ready = true;
}

static void on_close(sbx_proto_conn *conn, const sbx_err *why, void *ud)
{
	((tc_client *)ud)->closed = true;
}

int tc_connect(tc_client *c, struct event_base *base, const char *path)
{
	static const sbx_proto_conn_cbs cbs = { .on_ready = on_ready, .on_frame = on_frame, .on_close = on_close };
	sbx_proto_conn_opts opts = { .is_client = true, .agent = "agent-test" };
	sbx_err err = { 0 };
	int fd;

	memset(c, 0, sizeof(*c));
	c->base = base;
	fd = test_unix_connect(path);
	if (fd < 0)
		return -errno;
	c->conn = sbx_proto_conn_new(base, fd, &opts, &cbs, c, &err);
	if (!c->conn) {
		fprintf(stderr, "tc_connect: %s\n", err.msg);
		return err.code;
	}
	return 0;
}

static void stream_free(tc_stream *s)
{
	free(s->out);
	free(s->err);
	msgpack_sbuffer_destroy(&s->result);
	for (size_t e = 0; e < s->nevents; e++)
		msgpack_sbuffer_destroy(&s->events[e]);
	free(s);
}

void tc_forget(tc_client *c, tc_stream *s)
{
	for (size_t i = 0; i < c->nstreams; i++) {
		if (c->streams[i] == s) {
			c->streams[i] = c->streams[--c->nstreams];
			stream_free(s);
			return;
		}
	}
}

void tc_close(tc_client *c)
{
	for (size_t i = 0; i < c->nstreams; i++)
		stream_free(c->streams[i]);
	c->nstreams = 0;
	if (c->conn) {
		sbx_proto_conn_free(c->conn);
		/* libevent finalizes (closes) the socket from the loop. */
		event_base_loop(c->base, EVLOOP_NONBLOCK);
	}
	c->conn = NULL;
}

tc_stream *tc_request(tc_client *c, const char *op, const void *args, size_t len)
{
	sbx_err err = { 0 };
	tc_stream *s;

	if (c->nstreams == TC_MAX_STREAMS)
		return NULL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	if (sbx_proto_conn_request(c->conn, op, args, len, &s->id, &err) < 0) {
		fprintf(stderr, "tc_request %s: %s\n", op, err.msg);
		free(s);
		return NULL;
	}
	c->streams[c->nstreams++] = s;
	return s;
}

static void pack_str(msgpack_packer *pk, const char *s)
{
	msgpack_pack_str_with_body(pk, s, strlen(s));
}

void tc_pack_exec_args(msgpack_packer *pk, const tc_exec_opts *o)
{
	uint32_t n = 1 + (o->env != NULL) + (o->cwd != NULL) + (o->timeout_ms != 0) + o->stdin_pipe +
		     (o->user != NULL) + o->allow_root + (o->rlimits != NULL) + o->pty + (o->tag != NULL) +
		     (o->buffer != 0);

	msgpack_pack_map(pk, n);
	if (o->argv) {
		size_t argc = 0;
		while (o->argv[argc])
			argc++;
		pack_str(pk, "argv");
		msgpack_pack_array(pk, argc);
		for (size_t i = 0; i < argc; i++)
			pack_str(pk, o->argv[i]);
	} else {
		pack_str(pk, "cmd");
		pack_str(pk, o->cmd);
	}
	if (o->env) {
		size_t ne = 0;
		while (o->env[ne])
			ne++;
		pack_str(pk, "env");
		msgpack_pack_map(pk, ne);
		for (size_t i = 0; i < ne; i++) {
			const char *eq = strchr(o->env[i], '=');
			msgpack_pack_str_with_body(pk, o->env[i], (size_t)(eq - o->env[i]));
			pack_str(pk, eq + 1);
		}
	}
	if (o->cwd) {
		pack_str(pk, "cwd");
		pack_str(pk, o->cwd);
	}
	if (o->timeout_ms) {
		pack_str(pk, "timeout_ms");
		msgpack_pack_uint64(pk, o->timeout_ms);
	}
	if (o->stdin_pipe) {
		pack_str(pk, "stdin");
		msgpack_pack_true(pk);
	}
	if (o->user) {
		pack_str(pk, "user");
		pack_str(pk, o->user);
	}
	if (o->allow_root) {
		pack_str(pk, "allow_root");
		msgpack_pack_true(pk);
	}
	if (o->rlimits) {
		size_t nr = 0;
		while (o->rlimits[nr])
			nr++;
		pack_str(pk, "rlimits");
		msgpack_pack_map(pk, nr);
		for (size_t i = 0; i < nr; i++) {
			const char *eq = strchr(o->rlimits[i], '=');
			msgpack_pack_str_with_body(pk, o->rlimits[i], (size_t)(eq - o->rlimits[i]));
			if (strcmp(eq + 1, "unlimited") == 0)
				pack_str(pk, "unlimited");
			else
				msgpack_pack_uint64(pk, strtoull(eq + 1, NULL, 10));
		}
	}
	if (o->pty) {
		pack_str(pk, "pty");
		msgpack_pack_map(pk, (o->cols != 0) + (o->rows != 0));
		if (o->cols) {
			pack_str(pk, "cols");
			msgpack_pack_uint16(pk, o->cols);
		}
		if (o->rows) {
			pack_str(pk, "rows");
			msgpack_pack_uint16(pk, o->rows);
		}
	}
	if (o->tag) {
		pack_str(pk, "tag");
		pack_str(pk, o->tag);
	}
	if (o->buffer) {
		pack_str(pk, "buffer");
		msgpack_pack_uint64(pk, o->buffer);
	}
}

static tc_stream *request_exec(tc_client *c, const char *op, const tc_exec_opts *o)
{
	msgpack_sbuffer buf;
	msgpack_packer pk;
	tc_stream *s;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	tc_pack_exec_args(&pk, o);
	s = tc_request(c, op, buf.data, buf.size);
	msgpack_sbuffer_destroy(&buf);
	return s;
}

tc_stream *tc_exec(tc_client *c, const tc_exec_opts *o)
{
	return request_exec(c, "exec", o);
}

tc_stream *tc_proc_start(tc_client *c, const tc_exec_opts *o)
{
	return request_exec(c, "proc.start", o);
}

int tc_resize(tc_client *c, tc_stream *s, unsigned cols, unsigned rows)
{
	msgpack_sbuffer buf;
	msgpack_packer pk;
	sbx_err err = { 0 };
	int ret;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	pack_str(&pk, "resize");
	msgpack_pack_map(&pk, 2);
	pack_str(&pk, "cols");
	msgpack_pack_unsigned_int(&pk, cols);
	pack_str(&pk, "rows");
	msgpack_pack_unsigned_int(&pk, rows);
	ret = sbx_proto_conn_send_ctl(c->conn, s->id, buf.data, buf.size, &err);
	msgpack_sbuffer_destroy(&buf);
	return ret;
}

static bool unpack(const msgpack_sbuffer *b, msgpack_unpacked *out)
{
	size_t off = 0;

	msgpack_unpacked_init(out);
	if (!b->data || msgpack_unpack_next(out, b->data, b->size, &off) != MSGPACK_UNPACK_SUCCESS) {
		msgpack_unpacked_destroy(out);
		return false;
	}
	return true;
}

bool tc_result_unpack(const tc_stream *s, msgpack_unpacked *out)
{
	return unpack(&s->result, out);
}

bool tc_event_unpack(const tc_stream *s, size_t i, msgpack_unpacked *out)
{
	return i < s->nevents && unpack(&s->events[i], out);
}

bool tc_result_uint(const tc_stream *s, const char *key, uint64_t *v)
{
	msgpack_unpacked u;
	bool ok;

	if (!tc_result_unpack(s, &u))
		return false;
	ok = sbx_proto_get_uint(&u.data, key, v);
	msgpack_unpacked_destroy(&u);
	return ok;
}

bool tc_result_str(const tc_stream *s, const char *key, char *buf, size_t len)
{
	msgpack_unpacked u;
	const char *p;
	size_t n;
	bool ok;

	if (!tc_result_unpack(s, &u))
		return false;
	ok = sbx_proto_get_str(&u.data, key, &p, &n);
	if (ok)
		copy_str(buf, len, p, n);
	msgpack_unpacked_destroy(&u);
	return ok;
}

void tc_run(struct event_base *base, unsigned ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

static bool all_done(tc_client *c)
{
	for (size_t i = 0; i < c->nstreams; i++)
		if (!c->streams[i]->done)
			return false;
	return true;
}

bool tc_wait(tc_client *c, tc_stream *s, unsigned ms)
{
	uint64_t deadline = test_now_ms() + ms;

	while (!(s ? s->done : all_done(c)) && !c->closed && test_now_ms() < deadline)
		tc_run(c->base, 5);
	return s ? s->done : all_done(c);
}

int tc_send_stdin(tc_client *c, tc_stream *s, const void *data, size_t len, bool eof, unsigned ms)
{
	return tc_send_data(c, s, "stdin", data, len, eof, ms);
}

int tc_send_data(tc_client *c, tc_stream *s, const char *ch, const void *data, size_t len, bool eof,
		 unsigned ms)
{
	uint64_t deadline = test_now_ms() + ms;
	const char *p = data;
	sbx_err err = { 0 };

	while (len > 0) {
		size_t room = sbx_proto_conn_data_room(c->conn, s->id);
		if (room == 0) {
			if (test_now_ms() >= deadline || s->done || c->closed)
				return -ETIMEDOUT;
			tc_run(c->base, 2);
			continue;
		}
		size_t n = len < room ? len : room;
		int ret = sbx_proto_conn_send_data(c->conn, s->id, ch, p, n, false, &err);
		if (ret < 0)
			return ret;
		p += n;
		len -= n;
	}
	if (eof)
		return sbx_proto_conn_send_data(c->conn, s->id, ch, NULL, 0, true, &err);
	return 0;
}

int tc_signal(tc_client *c, tc_stream *s, int sig)
{
	msgpack_sbuffer buf;
	msgpack_packer pk;
	sbx_err err = { 0 };
	int ret;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	pack_str(&pk, "signal");
	msgpack_pack_int(&pk, sig);
	ret = sbx_proto_conn_send_ctl(c->conn, s->id, buf.data, buf.size, &err);
	msgpack_sbuffer_destroy(&buf);
	return ret;
}

int tc_cancel(tc_client *c, tc_stream *s)
{
	sbx_err err = { 0 };

	return sbx_proto_conn_cancel(c->conn, s->id, &err);
}

void tc_release(tc_client *c, tc_stream *s)
{
	s->hold_credit = false;
	sbx_proto_conn_consumed(c->conn, s->id, s->held);
	s->held = 0;
}
