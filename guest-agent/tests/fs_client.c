/* fs_client: see fs_client.h. */
#include "fs_client.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "test_util.h"

#define FC_MAX_FRAME (4u << 20)
#define FC_TIMEOUT_MS 60000

void fc_result_init(fc_result *r)
{
	memset(r, 0, sizeof(*r));
	msgpack_sbuffer_init(&r->result);
	msgpack_sbuffer_init(&r->event);
}

void fc_result_free(fc_result *r)
{
	msgpack_sbuffer_destroy(&r->result);
	msgpack_sbuffer_destroy(&r->event);
}

static int send_all(fc *c, const void *p, size_t len)
{
	const char *s = p;

	while (len > 0) {
		ssize_t n = send(c->fd, s, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		s += n;
		len -= (size_t)n;
	}
	return 0;
}

static int send_writer(fc *c, sbx_proto_writer *w)
{
	int ret = send_all(c, w->buf.data, w->buf.size);

	sbx_proto_writer_reset(w);
	return ret;
}

/* Next frame from the socket, waiting at most timeout_ms for each read. */
static int next_frame_in(fc *c, sbx_proto_frame *f, int timeout_ms)
{
	for (;;) {
		size_t used = 0;
		sbx_proto_code pc;
		sbx_err err = { 0 };
		int ret = sbx_proto_frame_decode(c->buf + c->off, c->len - c->off, FC_MAX_FRAME, f,
						 &used, &pc, &err);

		if (ret < 0) {
			fprintf(stderr, "fc: decode: %s\n", err.msg);
			return ret;
		}
		if (ret == 1) {
			c->off += used;
			if (c->off == c->len)
				c->off = c->len = 0;
			return 0;
		}
		if (c->len == c->cap) { /* a partial frame at the end: to the front */
			if (c->off == 0)
				return -EMSGSIZE;
			memmove(c->buf, c->buf + c->off, c->len - c->off);
			c->len -= c->off;
			c->off = 0;
		}
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		if (poll(&p, 1, timeout_ms) == 0)
			return -ETIMEDOUT;
		ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		c->len += (size_t)n;
	}
}

static int next_frame(fc *c, sbx_proto_frame *f)
{
	return next_frame_in(c, f, FC_TIMEOUT_MS);
}

int fc_connect(fc *c, const char *sock)
{
	return fc_connect_window(c, sock, 0);
}

int fc_connect_window(fc *c, const char *sock, uint32_t window)
{
	sbx_proto_writer w;
	sbx_proto_frame f;
	sbx_err err = { 0 };
	int ret;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->next_id = 1;
	c->cap = FC_MAX_FRAME + 64;
	c->buf = malloc(c->cap);
	c->fd = test_unix_connect(sock);
	if (!c->buf || c->fd < 0) {
		fc_close(c);
		return -EIO;
	}
	sbx_proto_writer_init(&w);
	ret = sbx_proto_encode_hello(&w, FC_MAX_FRAME, 64, window ? window : SBX_PROTO_DEFAULT_WINDOW, NULL, 0,
				     "fs-test", &err);
	if (ret >= 0)
		ret = send_writer(c, &w);
	sbx_proto_writer_destroy(&w);
	if (ret >= 0)
		ret = next_frame(c, &f);
	if (ret < 0) {
		fc_close(c);
		return ret;
	}
	c->window = f.window;
	c->max_frame = f.max_frame;
	ret = f.kind == SBX_PROTO_HELLO ? 0 : -EPROTO;
	sbx_proto_frame_release(&f);
	return ret;
}

void fc_close(fc *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->buf);
	c->buf = NULL;
}

int fc_request(fc *c, const char *op, const msgpack_sbuffer *args, uint64_t *id)
{
	sbx_proto_writer w;
	sbx_err err = { 0 };
	int ret;

	*id = c->next_id;
	c->next_id += 2;
	sbx_proto_writer_init(&w);
	ret = sbx_proto_encode_req(&w, *id, op, args ? args->data : NULL, args ? args->size : 0,
				   0, &err);
	if (ret >= 0)
		ret = send_writer(c, &w);
	sbx_proto_writer_destroy(&w);
	return ret;
}

static int credit(fc *c, uint64_t id, size_t n)
{
	sbx_proto_writer w;
	sbx_err err = { 0 };
	int ret;

	sbx_proto_writer_init(&w);
	ret = sbx_proto_encode_credit(&w, id, n, &err);
	if (ret >= 0)
		ret = send_writer(c, &w);
	sbx_proto_writer_destroy(&w);
	return ret;
}

/* One frame of stream id into r: 1 when final, 0 when more may come;
 * *got_credit adds CREDIT. */
static int take(fc *c, uint64_t id, const sbx_proto_frame *f, fc_data_fn on_data, void *ud,
		fc_result *r, uint64_t *got_credit)
{
	msgpack_packer pk;

	if (f->id != id)
		return 0;
	switch (f->kind) {
	case SBX_PROTO_DATA:
		r->data_first |= r->nevents == 0;
		r->data_bytes += f->data_len;
		r->data_eof |= f->eof;
		if (on_data && f->data_len && on_data(f->data, f->data_len, ud) < 0)
			return -ECANCELED;
		return f->data_len ? credit(c, id, f->body_len) : 0;
	case SBX_PROTO_EVENT:
		if (r->nevents++ == 0) {
			msgpack_packer_init(&pk, &r->event, msgpack_sbuffer_write);
			msgpack_pack_object(&pk, f->args);
		}
		return credit(c, id, f->body_len);
	case SBX_PROTO_CREDIT:
		if (got_credit)
			*got_credit += f->credit;
		return 0;
	case SBX_PROTO_END:
		msgpack_packer_init(&pk, &r->result, msgpack_sbuffer_write);
		msgpack_pack_object(&pk, f->args);
		return 1;
	case SBX_PROTO_ERR:
		r->failed = true;
		snprintf(r->code, sizeof(r->code), "%.*s", (int)f->code_name_len, f->code_name);
		snprintf(r->msg, sizeof(r->msg), "%.*s", (int)f->msg_len, f->msg ? f->msg : "");
		return 1;
	default:
		return 0;
	}
}

int fc_finish(fc *c, uint64_t id, fc_data_fn on_data, void *ud, fc_result *r)
{
	for (;;) {
		sbx_proto_frame f;
		int ret = next_frame(c, &f);

		if (ret < 0)
			return ret;
		ret = take(c, id, &f, on_data, ud, r, NULL);
		sbx_proto_frame_release(&f);
		if (ret != 0)
			return ret < 0 ? ret : 0;
	}
}

int fc_finish_all(fc *c, size_t n, const uint64_t *ids, fc_data_fn on_data, void *const *ud,
		  fc_result *r)
{
	size_t left = n;

	while (left > 0) {
		sbx_proto_frame f;
		int ret = next_frame(c, &f);

		if (ret < 0)
			return ret;
		for (size_t i = 0; i < n; i++) {
			if (ids[i] != f.id)
				continue;
			ret = take(c, ids[i], &f, on_data, ud[i], &r[i], NULL);
			if (ret == 1)
				left--;
			break;
		}
		sbx_proto_frame_release(&f);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int fc_next_event(fc *c, uint64_t id, int timeout_ms, msgpack_sbuffer *ev, fc_result *r)
{
	for (;;) {
		sbx_proto_frame f;
		msgpack_packer pk;
		int ret = next_frame_in(c, &f, timeout_ms);

		if (ret == -ETIMEDOUT)
			return 0;
		if (ret < 0)
			return ret;
		if (f.id == id && f.kind == SBX_PROTO_EVENT) {
			msgpack_packer_init(&pk, ev, msgpack_sbuffer_write);
			msgpack_pack_object(&pk, f.args);
			ret = credit(c, id, f.body_len);
			sbx_proto_frame_release(&f);
			return ret < 0 ? ret : 1;
		}
		ret = take(c, id, &f, NULL, NULL, r, NULL);
		sbx_proto_frame_release(&f);
		if (ret != 0)
			return ret < 0 ? ret : 2;
	}
}

int fc_cancel(fc *c, uint64_t id)
{
	sbx_proto_writer w;
	sbx_err err = { 0 };
	int ret;

	sbx_proto_writer_init(&w);
	ret = sbx_proto_encode_cancel(&w, id, &err);
	if (ret >= 0)
		ret = send_writer(c, &w);
	sbx_proto_writer_destroy(&w);
	return ret;
}

int fc_call(fc *c, const char *op, const msgpack_sbuffer *args, fc_result *r)
{
	uint64_t id;
	int ret = fc_request(c, op, args, &id);

	return ret < 0 ? ret : fc_finish(c, id, NULL, NULL, r);
}

int fc_upload(fc *c, uint64_t id, fc_source_fn next, void *ud, uint64_t cut, fc_result *r)
{
	uint64_t avail = c->window, sent = 0;
	size_t chunk_cap = c->max_frame - SBX_PROTO_DATA_OVERHEAD;
	char *chunk;
	sbx_proto_writer w;
	sbx_err err = { 0 };
	int ret = 0;
	bool end = false;

	/* A quarter window per frame keeps frames in flight while the agent
	 * writes the previous ones and returns their credit. */
	if (chunk_cap > c->window / 4)
		chunk_cap = c->window / 4;
	chunk = malloc(chunk_cap);
	if (!chunk)
		return -ENOMEM;
	sbx_proto_writer_init(&w);
	while (!end) {
		/* Wait for credit (and notice an early ERR). */
		while (avail < chunk_cap + SBX_PROTO_DATA_OVERHEAD) {
			sbx_proto_frame f;
			ret = next_frame(c, &f);
			if (ret < 0)
				goto out;
			ret = take(c, id, &f, NULL, NULL, r, &avail);
			sbx_proto_frame_release(&f);
			if (ret != 0) { /* ERR (or END) before we finished */
				ret = ret < 0 ? ret : 0;
				goto out;
			}
		}
		size_t room = avail - SBX_PROTO_DATA_OVERHEAD;
		size_t n = next(chunk, room < chunk_cap ? room : chunk_cap, ud);
		if (n == 0)
			end = true;
		if (cut && sent + n >= cut) {
			shutdown(c->fd, SHUT_RDWR);
			ret = 1;
			goto out;
		}
		ret = sbx_proto_encode_data(&w, id, SBX_CH_FILE, chunk, n, end, 0, &err);
		if (ret < 0)
			goto out;
		if (n)
			avail -= w.buf.size - SBX_PROTO_HEADER_LEN;
		sent += n;
		ret = send_writer(c, &w);
		if (ret < 0)
			goto out;
	}
	ret = fc_finish(c, id, NULL, NULL, r);
out:
	sbx_proto_writer_destroy(&w);
	free(chunk);
	return ret;
}

void fc_args_begin(msgpack_sbuffer *b, msgpack_packer *pk, size_t pairs, const char *root,
		   const char *path, size_t path_len)
{
	msgpack_sbuffer_init(b);
	msgpack_packer_init(pk, b, msgpack_sbuffer_write);
	msgpack_pack_map(pk, pairs);
	sbx_proto_pack_str(pk, "root");
	sbx_proto_pack_str(pk, root);
	sbx_proto_pack_str(pk, "path");
	sbx_proto_pack_strn(pk, path, path_len);
}

static bool lookup(const msgpack_sbuffer *map, const char *key, msgpack_unpacked *u,
		   const msgpack_object **o)
{
	msgpack_unpacked_init(u);
	if (msgpack_unpack_next(u, map->data, map->size, NULL) != MSGPACK_UNPACK_SUCCESS)
		return false;
	*o = sbx_proto_map_get(&u->data, key);
	return *o != NULL;
}

bool fc_get_uint(const msgpack_sbuffer *map, const char *key, uint64_t *v)
{
	msgpack_unpacked u;
	const msgpack_object *o = NULL;
	bool ok = lookup(map, key, &u, &o) && o->type == MSGPACK_OBJECT_POSITIVE_INTEGER;

	if (ok)
		*v = o->via.u64;
	msgpack_unpacked_destroy(&u);
	return ok;
}

bool fc_get_bool(const msgpack_sbuffer *map, const char *key, bool *v)
{
	msgpack_unpacked u;
	const msgpack_object *o = NULL;
	bool ok = lookup(map, key, &u, &o) && o->type == MSGPACK_OBJECT_BOOLEAN;

	if (ok)
		*v = o->via.boolean;
	msgpack_unpacked_destroy(&u);
	return ok;
}

bool fc_get_str(const msgpack_sbuffer *map, const char *key, char *buf, size_t cap)
{
	msgpack_unpacked u;
	const msgpack_object *o = NULL;
	bool ok = lookup(map, key, &u, &o) && o->type == MSGPACK_OBJECT_STR &&
		  o->via.str.size < cap;

	if (ok) {
		memcpy(buf, o->via.str.ptr, o->via.str.size);
		buf[o->via.str.size] = '\0';
	}
	msgpack_unpacked_destroy(&u);
	return ok;
}
