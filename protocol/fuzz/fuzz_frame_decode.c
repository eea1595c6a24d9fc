/* libFuzzer target: the frame decoder on arbitrary bytes.
 *
 * Decodes frame after frame; every decoded frame must re-encode canonically
 * and that encoding must survive decode + encode unchanged. Errors must come
 * with a protocol code and a message. Anything else aborts. */
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"

#define FUZZ_MAX_FRAME 65536

static void touch_args(const sbx_proto_frame *f)
{
	const char *s;
	size_t len;
	uint64_t u;
	int64_t i;
	bool b;
	const uint8_t *p;
	sbx_proto_get_str(&f->args, "cmd", &s, &len);
	sbx_proto_get_uint(&f->args, "timeout_ms", &u);
	sbx_proto_get_int(&f->args, "exit_code", &i);
	sbx_proto_get_bool(&f->args, "stdin", &b);
	sbx_proto_get_bin(&f->args, "d", &p, &len);
	free(sbx_proto_strdup(sbx_proto_map_get(&f->args, "cwd")));
}

static void roundtrip(const sbx_proto_frame *f)
{
	sbx_proto_writer w1, w2;
	sbx_proto_writer_init(&w1);
	sbx_proto_writer_init(&w2);
	sbx_err err;
	if (sbx_proto_encode_frame(&w1, f, 0, &err) != 0)
		abort();
	sbx_proto_frame g;
	size_t used;
	if (sbx_proto_frame_decode((const uint8_t *)w1.buf.data, w1.buf.size, SBX_PROTO_HARD_MAX_FRAME,
				   &g, &used, NULL, &err) != 1 || used != w1.buf.size || g.kind != f->kind)
		abort();
	if (sbx_proto_encode_frame(&w2, &g, 0, &err) != 0)
		abort();
	if (w1.buf.size != w2.buf.size || memcmp(w1.buf.data, w2.buf.data, w1.buf.size) != 0)
		abort();
	sbx_proto_frame_release(&g);
	sbx_proto_writer_destroy(&w1);
	sbx_proto_writer_destroy(&w2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;
	while (off < size) {
		sbx_proto_frame f;
		size_t used;
		sbx_proto_code pc;
		sbx_err err;
		sbx_err_clear(&err);
		int rc = sbx_proto_frame_decode(data + off, size - off, FUZZ_MAX_FRAME, &f, &used, &pc, &err);
		if (rc < 0 && (pc == 0 || err.code != rc || !err.msg[0]))
			abort();
		if (rc <= 0)
			break;
		if (used < SBX_PROTO_HEADER_LEN + 1 || used > size - off)
			abort();
		touch_args(&f);
		roundtrip(&f);
		sbx_proto_frame_release(&f);
		off += used;
	}
	return 0;
}
