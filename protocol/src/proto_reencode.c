/* Canonical re-encoding of a decoded frame (golden tests, fuzzing, relays). */
#include <errno.h>

#include "sbx/proto.h"

static void pack_map_or_empty(sbx_proto_writer *w, const msgpack_object *o)
{
	if (o->type == MSGPACK_OBJECT_MAP)
		msgpack_pack_object(&w->pk, *o);
	else
		msgpack_pack_map(&w->pk, 0);
}

int sbx_proto_encode_frame(sbx_proto_writer *w, const sbx_proto_frame *f, size_t max_frame,
			   sbx_err *err)
{
	switch (f->kind) {
	case SBX_PROTO_HELLO:
		sbx_proto_begin(w, f->kind, 0, f->agent ? 6 : 5);
		sbx_proto_pack_kv_uint(w, "v", f->version);
		sbx_proto_pack_kv_uint(w, "max_frame", f->max_frame);
		sbx_proto_pack_kv_uint(w, "max_streams", f->max_streams);
		sbx_proto_pack_kv_uint(w, "window", f->window);
		sbx_proto_pack_key(w, "caps");
		if (f->caps.type == MSGPACK_OBJECT_ARRAY)
			msgpack_pack_object(&w->pk, f->caps);
		else
			msgpack_pack_array(&w->pk, 0);
		if (f->agent) {
			sbx_proto_pack_key(w, "agent");
			sbx_proto_pack_strn(&w->pk, f->agent, f->agent_len);
		}
		break;
	case SBX_PROTO_REQ:
		sbx_proto_begin(w, f->kind, f->id, f->args.type == MSGPACK_OBJECT_MAP ? 2 : 1);
		sbx_proto_pack_key(w, "op");
		sbx_proto_pack_strn(&w->pk, f->op, f->op_len);
		if (f->args.type == MSGPACK_OBJECT_MAP) {
			sbx_proto_pack_key(w, "a");
			msgpack_pack_object(&w->pk, f->args);
		}
		break;
	case SBX_PROTO_DATA:
		sbx_proto_begin(w, f->kind, f->id, f->eof ? 3 : 2);
		sbx_proto_pack_key(w, "ch");
		sbx_proto_pack_strn(&w->pk, f->ch, f->ch_len);
		sbx_proto_pack_key(w, "d");
		msgpack_pack_bin(&w->pk, f->data_len);
		msgpack_pack_bin_body(&w->pk, f->data, f->data_len);
		if (f->eof)
			sbx_proto_pack_kv_bool(w, "eof", true);
		break;
	case SBX_PROTO_EVENT:
	case SBX_PROTO_CTL:
	case SBX_PROTO_END:
		sbx_proto_begin(w, f->kind, f->id, 1);
		sbx_proto_pack_key(w, f->kind == SBX_PROTO_END ? "r" : "a");
		pack_map_or_empty(w, &f->args);
		break;
	case SBX_PROTO_CREDIT:
		sbx_proto_begin(w, f->kind, f->id, 1);
		sbx_proto_pack_kv_uint(w, "n", f->credit);
		break;
	case SBX_PROTO_CANCEL:
		sbx_proto_begin(w, f->kind, f->id, 0);
		break;
	case SBX_PROTO_ERR:
		sbx_proto_begin(w, f->kind, f->id, f->msg ? 2 : 1);
		sbx_proto_pack_key(w, "code");
		sbx_proto_pack_strn(&w->pk, f->code_name, f->code_name_len);
		if (f->msg) {
			sbx_proto_pack_key(w, "msg");
			sbx_proto_pack_strn(&w->pk, f->msg, f->msg_len);
		}
		break;
	default:
		return sbx_err_set(err, -EINVAL, "encode frame: unknown kind %d", (int)f->kind);
	}
	return sbx_proto_finish(w, max_frame, err);
}
