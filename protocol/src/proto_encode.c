/* Frame encoder: header patching, canonical key order per kind. */
#include <errno.h>
#include <string.h>

#include "sbx/proto.h"
#include "proto_scan.h"

static int writer_write(void *data, const char *buf, size_t len)
{
	sbx_proto_writer *w = data;
	if (w->failed)
		return -1;
	if (msgpack_sbuffer_write(&w->buf, buf, len) != 0) {
		w->failed = true;
		return -1;
	}
	return 0;
}

void sbx_proto_writer_init(sbx_proto_writer *w)
{
	msgpack_sbuffer_init(&w->buf);
	msgpack_packer_init(&w->pk, w, writer_write);
	w->frame_start = 0;
	w->failed = false;
}

void sbx_proto_writer_reset(sbx_proto_writer *w)
{
	msgpack_sbuffer_clear(&w->buf);
	w->frame_start = 0;
	w->failed = false;
}

void sbx_proto_writer_destroy(sbx_proto_writer *w)
{
	msgpack_sbuffer_destroy(&w->buf);
	msgpack_sbuffer_init(&w->buf);
	w->frame_start = 0;
	w->failed = false;
}

void sbx_proto_pack_strn(msgpack_packer *pk, const char *s, size_t len)
{
	msgpack_pack_str(pk, len);
	msgpack_pack_str_body(pk, s, len);
}

void sbx_proto_pack_str(msgpack_packer *pk, const char *s)
{
	sbx_proto_pack_strn(pk, s, strlen(s));
}

void sbx_proto_pack_key(sbx_proto_writer *w, const char *key)
{
	sbx_proto_pack_str(&w->pk, key);
}

void sbx_proto_pack_kv_str(sbx_proto_writer *w, const char *key, const char *val)
{
	sbx_proto_pack_key(w, key);
	sbx_proto_pack_str(&w->pk, val);
}

void sbx_proto_pack_kv_uint(sbx_proto_writer *w, const char *key, uint64_t val)
{
	sbx_proto_pack_key(w, key);
	msgpack_pack_uint64(&w->pk, val);
}

void sbx_proto_pack_kv_bool(sbx_proto_writer *w, const char *key, bool val)
{
	sbx_proto_pack_key(w, key);
	if (val)
		msgpack_pack_true(&w->pk);
	else
		msgpack_pack_false(&w->pk);
}

void sbx_proto_begin(sbx_proto_writer *w, sbx_proto_kind kind, uint64_t id, uint32_t extra_pairs)
{
	static const char zero[SBX_PROTO_HEADER_LEN];
	w->frame_start = w->buf.size;
	writer_write(w, zero, sizeof(zero));
	bool has_id = kind != SBX_PROTO_HELLO;
	msgpack_pack_map(&w->pk, 1 + (has_id ? 1 : 0) + extra_pairs);
	sbx_proto_pack_kv_str(w, "t", sbx_proto_kind_name(kind));
	if (has_id)
		sbx_proto_pack_kv_uint(w, "id", id);
}

int sbx_proto_finish(sbx_proto_writer *w, size_t max_frame, sbx_err *err)
{
	if (max_frame == 0 || max_frame > SBX_PROTO_HARD_MAX_FRAME)
		max_frame = SBX_PROTO_HARD_MAX_FRAME;
	if (w->failed) {
		w->buf.size = w->frame_start;
		w->failed = false;
		return sbx_err_set(err, -ENOMEM, "encode frame: out of memory");
	}
	size_t body = w->buf.size - w->frame_start - SBX_PROTO_HEADER_LEN;
	if (body > max_frame) {
		w->buf.size = w->frame_start;
		return sbx_err_set(err, -EMSGSIZE, "encode frame: body of %zu bytes exceeds max_frame %zu",
				   body, max_frame);
	}
	uint8_t *h = (uint8_t *)w->buf.data + w->frame_start;
	h[0] = (uint8_t)(body >> 24);
	h[1] = (uint8_t)(body >> 16);
	h[2] = (uint8_t)(body >> 8);
	h[3] = (uint8_t)body;
	return 0;
}

int sbx_proto_encode_hello(sbx_proto_writer *w, uint64_t max_frame, uint64_t max_streams,
			   uint64_t window, const char *const *caps, size_t ncaps,
			   const char *agent, sbx_err *err)
{
	sbx_proto_begin(w, SBX_PROTO_HELLO, 0, agent ? 6 : 5);
	sbx_proto_pack_kv_uint(w, "v", SBX_PROTO_VERSION);
	sbx_proto_pack_kv_uint(w, "max_frame", max_frame);
	sbx_proto_pack_kv_uint(w, "max_streams", max_streams);
	sbx_proto_pack_kv_uint(w, "window", window);
	sbx_proto_pack_key(w, "caps");
	msgpack_pack_array(&w->pk, ncaps);
	for (size_t i = 0; i < ncaps; i++)
		sbx_proto_pack_str(&w->pk, caps[i]);
	if (agent)
		sbx_proto_pack_kv_str(w, "agent", agent);
	return sbx_proto_finish(w, 0, err);
}

/* A DATA frame up to the payload: the map and the bin header of len bytes. */
static int data_head(sbx_proto_writer *w, uint64_t id, const char *ch, size_t len, bool eof,
		     sbx_err *err)
{
	size_t ch_len = strlen(ch);
	if (ch_len == 0 || ch_len > SBX_PROTO_MAX_CH_LEN)
		return sbx_err_set(err, -EINVAL, "encode data: channel name of %zu bytes", ch_len);
	if (len > UINT32_MAX)
		return sbx_err_set(err, -EMSGSIZE, "encode data: %zu bytes", len);
	sbx_proto_begin(w, SBX_PROTO_DATA, id, eof ? 3 : 2);
	sbx_proto_pack_key(w, "ch");
	sbx_proto_pack_strn(&w->pk, ch, ch_len);
	sbx_proto_pack_key(w, "d");
	msgpack_pack_bin(&w->pk, len);
	return 0;
}

int sbx_proto_encode_data(sbx_proto_writer *w, uint64_t id, const char *ch,
			  const void *data, size_t len, bool eof, size_t max_frame, sbx_err *err)
{
	int rc = data_head(w, id, ch, len, eof, err);
	if (rc < 0)
		return rc;
	msgpack_pack_bin_body(&w->pk, data, len);
	if (eof)
		sbx_proto_pack_kv_bool(w, "eof", true);
	return sbx_proto_finish(w, max_frame, err);
}

int sbx_proto_encode_data_head(sbx_proto_writer *w, uint64_t id, const char *ch, size_t len,
			       size_t max_frame, sbx_err *err)
{
	int rc = data_head(w, id, ch, len, false, err);
	if (rc < 0)
		return rc;
	/* finish() sizes the body from what is in the writer: count the
	 * payload the caller puts after it, then take it back out */
	w->buf.size += len;
	rc = sbx_proto_finish(w, max_frame, err);
	if (rc == 0)
		w->buf.size -= len;
	return rc;
}

int sbx_proto_encode_credit(sbx_proto_writer *w, uint64_t id, uint64_t n, sbx_err *err)
{
	sbx_proto_begin(w, SBX_PROTO_CREDIT, id, 1);
	sbx_proto_pack_kv_uint(w, "n", n);
	return sbx_proto_finish(w, 0, err);
}

int sbx_proto_encode_cancel(sbx_proto_writer *w, uint64_t id, sbx_err *err)
{
	sbx_proto_begin(w, SBX_PROTO_CANCEL, id, 0);
	return sbx_proto_finish(w, 0, err);
}

int sbx_proto_encode_err(sbx_proto_writer *w, uint64_t id, sbx_proto_code code,
			 const char *msg, size_t max_frame, sbx_err *err)
{
	size_t msg_len = msg ? strlen(msg) : 0;
	if (max_frame == 0)
		max_frame = SBX_PROTO_MIN_MAX_FRAME;
	/* a message never makes an error undeliverable: cut it to fit */
	if (msg_len > max_frame - SBX_PROTO_DATA_OVERHEAD) {
		msg_len = max_frame - SBX_PROTO_DATA_OVERHEAD;
		while (msg_len && ((uint8_t)msg[msg_len] & 0xc0) == 0x80)
			msg_len--; /* keep UTF-8 whole */
	}
	sbx_proto_begin(w, SBX_PROTO_ERR, id, msg ? 2 : 1);
	sbx_proto_pack_kv_str(w, "code", sbx_proto_code_name(code));
	if (msg) {
		sbx_proto_pack_key(w, "msg");
		sbx_proto_pack_strn(&w->pk, msg, msg_len);
	}
	return sbx_proto_finish(w, max_frame, err);
}

/* Append an already encoded map, or {} for none. */
static int pack_raw_map(sbx_proto_writer *w, const void *map, size_t len)
{
	if (!map || !len) {
		msgpack_pack_map(&w->pk, 0);
		return 0;
	}
	if (!sbx_proto_scan_is_map(map, len))
		return -EINVAL;
	writer_write(w, map, len);
	return 0;
}

static int encode_with_map(sbx_proto_writer *w, sbx_proto_kind kind, uint64_t id,
			   const char *key, const void *map, size_t len, size_t max_frame,
			   sbx_err *err)
{
	sbx_proto_begin(w, kind, id, 1);
	sbx_proto_pack_key(w, key);
	if (pack_raw_map(w, map, len) < 0) {
		w->buf.size = w->frame_start;
		return sbx_err_set(err, -EINVAL, "encode %s: \"%s\" is not one msgpack map",
				   sbx_proto_kind_name(kind), key);
	}
	return sbx_proto_finish(w, max_frame, err);
}

int sbx_proto_encode_req(sbx_proto_writer *w, uint64_t id, const char *op, const void *args,
			 size_t args_len, size_t max_frame, sbx_err *err)
{
	if (!op || !*op)
		return sbx_err_set(err, -EINVAL, "encode req: empty op");
	sbx_proto_begin(w, SBX_PROTO_REQ, id, args ? 2 : 1);
	sbx_proto_pack_kv_str(w, "op", op);
	if (args) {
		sbx_proto_pack_key(w, "a");
		if (pack_raw_map(w, args, args_len) < 0) {
			w->buf.size = w->frame_start;
			return sbx_err_set(err, -EINVAL, "encode req %s: args are not one msgpack map", op);
		}
	}
	return sbx_proto_finish(w, max_frame, err);
}

int sbx_proto_encode_event(sbx_proto_writer *w, uint64_t id, const void *map, size_t len,
			   size_t max_frame, sbx_err *err)
{
	return encode_with_map(w, SBX_PROTO_EVENT, id, "a", map, len, max_frame, err);
}

int sbx_proto_encode_ctl(sbx_proto_writer *w, uint64_t id, const void *map, size_t len,
			 size_t max_frame, sbx_err *err)
{
	return encode_with_map(w, SBX_PROTO_CTL, id, "a", map, len, max_frame, err);
}

int sbx_proto_encode_end(sbx_proto_writer *w, uint64_t id, const void *result_map, size_t len,
			 size_t max_frame, sbx_err *err)
{
	return encode_with_map(w, SBX_PROTO_END, id, "r", result_map, len, max_frame, err);
}
