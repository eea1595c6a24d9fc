/* Frame decoder: length header, limits, structure, fields per kind. */
#include <errno.h>
#include <string.h>

#include "sbx/proto.h"
#include "proto_scan.h"

enum field {
	F_T, F_ID, F_V, F_MAX_FRAME, F_MAX_STREAMS, F_WINDOW, F_CAPS, F_AGENT,
	F_OP, F_A, F_CH, F_D, F_EOF, F_N, F_R, F_CODE, F_MSG, F_COUNT
};

static const char *const field_names[F_COUNT] = {
	[F_T] = "t", [F_ID] = "id", [F_V] = "v", [F_MAX_FRAME] = "max_frame",
	[F_MAX_STREAMS] = "max_streams", [F_WINDOW] = "window", [F_CAPS] = "caps",
	[F_AGENT] = "agent", [F_OP] = "op", [F_A] = "a", [F_CH] = "ch", [F_D] = "d",
	[F_EOF] = "eof", [F_N] = "n", [F_R] = "r", [F_CODE] = "code", [F_MSG] = "msg",
};

#define B(f) (1u << (f))
struct kind_fields {
	unsigned required, optional;
};
static const struct kind_fields kind_fields[] = {
	[SBX_PROTO_HELLO] = { B(F_V) | B(F_MAX_FRAME) | B(F_MAX_STREAMS) | B(F_WINDOW),
			      B(F_CAPS) | B(F_AGENT) },
	[SBX_PROTO_REQ] = { B(F_ID) | B(F_OP), B(F_A) },
	[SBX_PROTO_DATA] = { B(F_ID) | B(F_CH) | B(F_D), B(F_EOF) },
	[SBX_PROTO_EVENT] = { B(F_ID) | B(F_A), 0 },
	[SBX_PROTO_CREDIT] = { B(F_ID) | B(F_N), 0 },
	[SBX_PROTO_CTL] = { B(F_ID) | B(F_A), 0 },
	[SBX_PROTO_CANCEL] = { B(F_ID), 0 },
	[SBX_PROTO_END] = { B(F_ID), B(F_R) },
	[SBX_PROTO_ERR] = { B(F_ID) | B(F_CODE), B(F_MSG) },
};

static int field_of(const msgpack_object *key)
{
	if (key->type != MSGPACK_OBJECT_STR)
		return -1;
	for (int i = 0; i < F_COUNT; i++)
		if (strlen(field_names[i]) == key->via.str.size &&
		    memcmp(field_names[i], key->via.str.ptr, key->via.str.size) == 0)
			return i;
	return -1;
}

static int bad(sbx_proto_code *pc, sbx_proto_code code, sbx_err *err, int rc, const char *what,
	       const char *detail)
{
	if (pc)
		*pc = code;
	return sbx_err_set(err, rc, "frame: %s%s", what, detail);
}

/* A str's bytes; "" for an empty one so presence is pointer != NULL. */
static const char *str_ptr(const msgpack_object *o)
{
	return o->via.str.size ? o->via.str.ptr : "";
}

/* Store one field of the frame; false when v has the wrong type. */
static bool set_field(sbx_proto_frame *f, int field, const msgpack_object *v)
{
	bool is_uint = v->type == MSGPACK_OBJECT_POSITIVE_INTEGER;
	bool is_str = v->type == MSGPACK_OBJECT_STR;
	uint64_t *u = field == F_ID ? &f->id : field == F_V ? &f->version
		    : field == F_MAX_FRAME ? &f->max_frame : field == F_MAX_STREAMS ? &f->max_streams
		    : field == F_WINDOW ? &f->window : field == F_N ? &f->credit : NULL;
	if (u) {
		if (is_uint)
			*u = v->via.u64;
		return is_uint;
	}
	switch (field) {
	case F_CAPS:
		if (v->type != MSGPACK_OBJECT_ARRAY)
			return false;
		for (uint32_t i = 0; i < v->via.array.size; i++)
			if (v->via.array.ptr[i].type != MSGPACK_OBJECT_STR)
				return false;
		f->caps = *v;
		return true;
	case F_AGENT:
		if (!is_str)
			return false;
		f->agent = str_ptr(v);
		f->agent_len = v->via.str.size;
		return true;
	case F_OP:
		if (!is_str || v->via.str.size == 0)
			return false;
		f->op = v->via.str.ptr;
		f->op_len = v->via.str.size;
		return true;
	case F_A:
		/* a req may carry nil args; event and ctl need a map */
		if (v->type != MSGPACK_OBJECT_MAP &&
		    !(v->type == MSGPACK_OBJECT_NIL && f->kind == SBX_PROTO_REQ))
			return false;
		f->args = *v;
		return true;
	case F_R:
		if (v->type != MSGPACK_OBJECT_MAP && v->type != MSGPACK_OBJECT_NIL)
			return false;
		f->args = *v;
		return true;
	case F_CH:
		if (!is_str || v->via.str.size == 0)
			return false;
		f->ch = v->via.str.ptr;
		f->ch_len = v->via.str.size;
		return true;
	case F_D:
		if (v->type != MSGPACK_OBJECT_BIN)
			return false;
		f->data = (const uint8_t *)v->via.bin.ptr;
		f->data_len = v->via.bin.size;
		return true;
	case F_EOF:
		if (v->type != MSGPACK_OBJECT_BOOLEAN)
			return false;
		f->eof = v->via.boolean;
		return true;
	case F_CODE:
		if (!is_str)
			return false;
		f->code_name = str_ptr(v);
		f->code_name_len = v->via.str.size;
		f->code = sbx_proto_code_from_name(v->via.str.ptr, v->via.str.size);
		return true;
	case F_MSG:
		if (!is_str)
			return false;
		f->msg = str_ptr(v);
		f->msg_len = v->via.str.size;
		return true;
	default:
		return false;
	}
}

static int parse_fields(sbx_proto_frame *f, const msgpack_object *map, sbx_proto_code *pc,
			sbx_err *err)
{
	const msgpack_object *t = sbx_proto_map_get(map, "t");
	if (!t)
		return bad(pc, SBX_PROTO_E_BAD_FRAME, err, -EBADMSG, "missing \"t\"", "");
	if (t->type != MSGPACK_OBJECT_STR)
		return bad(pc, SBX_PROTO_E_BAD_FRAME, err, -EBADMSG, "\"t\" is not a str", "");
	f->kind = sbx_proto_kind_from_name(t->via.str.ptr, t->via.str.size);
	if (!f->kind) {
		if (pc)
			*pc = SBX_PROTO_E_UNSUPPORTED;
		return sbx_err_set(err, -EOPNOTSUPP, "frame: unknown kind \"%.*s\"",
				   (int)(t->via.str.size > 32 ? 32 : t->via.str.size), t->via.str.ptr);
	}
	f->args.type = MSGPACK_OBJECT_NIL;
	f->caps.type = MSGPACK_OBJECT_NIL;

	const struct kind_fields *kf = &kind_fields[f->kind];
	unsigned seen = 0;
	for (uint32_t i = 0; i < map->via.map.size; i++) {
		const msgpack_object_kv *kv = &map->via.map.ptr[i];
		int field = field_of(&kv->key);
		if (field < 0)
			continue; /* unknown key: a newer peer's addition */
		if (seen & B(field))
			return bad(pc, SBX_PROTO_E_BAD_FRAME, err, -EBADMSG, "duplicate key ",
				   field_names[field]);
		seen |= B(field);
		if (field == F_T || !((kf->required | kf->optional) & B(field)))
			continue; /* a known key this kind does not use */
		if (!set_field(f, field, &kv->val))
			return bad(pc, SBX_PROTO_E_BAD_FRAME, err, -EBADMSG, "wrong type or empty value for ",
				   field_names[field]);
	}
	unsigned missing = kf->required & ~seen;
	if (missing)
		return bad(pc, SBX_PROTO_E_BAD_FRAME, err, -EBADMSG, "missing ",
			   field_names[__builtin_ctz(missing)]);
	return 0;
}

/* Decode buf[0..len): with copy, the body goes into the frame's zone first
 * (its pointers outlive buf); without, they point into buf. */
static int frame_decode(const uint8_t *buf, size_t len, size_t max_frame, bool copy,
			sbx_proto_frame *out, size_t *consumed, sbx_proto_code *proto_code,
			sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	*consumed = 0;
	if (proto_code)
		*proto_code = 0;
	if (max_frame == 0)
		max_frame = SBX_PROTO_DEFAULT_MAX_FRAME;
	if (max_frame > SBX_PROTO_HARD_MAX_FRAME)
		max_frame = SBX_PROTO_HARD_MAX_FRAME;
	if (len < SBX_PROTO_HEADER_LEN)
		return 0;

	size_t body_len = (size_t)buf[0] << 24 | (size_t)buf[1] << 16 | (size_t)buf[2] << 8 | buf[3];
	if (body_len > max_frame) {
		if (proto_code)
			*proto_code = SBX_PROTO_E_TOO_LARGE;
		return sbx_err_set(err, -EMSGSIZE, "frame: body of %zu bytes exceeds max_frame %zu",
				   body_len, max_frame);
	}
	if (body_len == 0)
		return bad(proto_code, SBX_PROTO_E_BAD_FRAME, err, -EBADMSG, "empty body", "");
	if (len - SBX_PROTO_HEADER_LEN < body_len)
		return 0;
	const uint8_t *body = buf + SBX_PROTO_HEADER_LEN;

	size_t used;
	switch (sbx_proto_scan(body, body_len, &used)) {
	case SBX_SCAN_OK:
		break;
	case SBX_SCAN_TRUNCATED:
		return bad(proto_code, SBX_PROTO_E_BAD_FRAME, err, -EBADMSG, "msgpack truncated", "");
	case SBX_SCAN_TOO_DEEP:
		return bad(proto_code, SBX_PROTO_E_BAD_FRAME, err, -EBADMSG, "nesting too deep", "");
	default:
		return bad(proto_code, SBX_PROTO_E_BAD_FRAME, err, -EBADMSG, "invalid msgpack", "");
	}
	if (used != body_len)
		return bad(proto_code, SBX_PROTO_E_BAD_FRAME, err, -EBADMSG,
			   "trailing bytes after the map", "");
	if ((body[0] & 0xf0) != 0x80 && body[0] != 0xde && body[0] != 0xdf)
		return bad(proto_code, SBX_PROTO_E_BAD_FRAME, err, -EBADMSG, "body is not a map", "");

	/* msgpack-c's objects refer to the bytes they were unpacked from
	 * (str, bin); the zone holds the rest (arrays, maps). */
	msgpack_zone *zone = msgpack_zone_new(copy ? body_len + 1024 : 1024);
	char *from = zone && copy ? msgpack_zone_malloc_no_align(zone, body_len) : (char *)body;
	if (!zone || !from) {
		if (zone)
			msgpack_zone_free(zone);
		return bad(proto_code, SBX_PROTO_E_INTERNAL, err, -ENOMEM, "out of memory", "");
	}
	if (copy)
		memcpy(from, body, body_len);
	out->unpacked.zone = zone;
	size_t off = 0;
	msgpack_unpack_return ur = msgpack_unpack(from, body_len, &off, zone, &out->unpacked.data);
	if (ur != MSGPACK_UNPACK_SUCCESS) {
		sbx_proto_frame_release(out);
		return bad(proto_code, SBX_PROTO_E_BAD_FRAME, err,
			   ur == MSGPACK_UNPACK_NOMEM_ERROR ? -ENOMEM : -EBADMSG, "msgpack decode failed", "");
	}
	int rc = parse_fields(out, &out->unpacked.data, proto_code, err);
	if (rc < 0) {
		sbx_proto_frame_release(out);
		return rc;
	}
	out->body_len = body_len;
	*consumed = SBX_PROTO_HEADER_LEN + body_len;
	return 1;
}

int sbx_proto_frame_decode(const uint8_t *buf, size_t len, size_t max_frame,
			   sbx_proto_frame *out, size_t *consumed,
			   sbx_proto_code *proto_code, sbx_err *err)
{
	return frame_decode(buf, len, max_frame, true, out, consumed, proto_code, err);
}

int sbx_proto_frame_decode_in_place(const uint8_t *buf, size_t len, size_t max_frame,
				    sbx_proto_frame *out, size_t *consumed,
				    sbx_proto_code *proto_code, sbx_err *err)
{
	return frame_decode(buf, len, max_frame, false, out, consumed, proto_code, err);
}

void sbx_proto_frame_release(sbx_proto_frame *f)
{
	if (!f)
		return;
	msgpack_unpacked_destroy(&f->unpacked);
	memset(f, 0, sizeof(*f));
}
