/* What the fuzz targets of the agent's answers share: the input (a
 * selector byte, then the result map of an END frame, {"t": "end", "id":
 * 1, "r": <bytes>}) decoded as frames from the agent are
 * (sbx_proto_frame_decode) and handed to the target's check, and the
 * check of a listing's entry. Only for the fuzz targets (one translation
 * unit each: static). */
#ifndef FUZZ_AGENT_FRAME_H
#define FUZZ_AGENT_FRAME_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "sup_path.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

/* check(r, sel) on the END frame's result r when the input decodes as
 * one; what LLVMFuzzerTestOneInput returns. */
static int fuzz_agent_answer(const uint8_t *in, size_t insize,
			     void (*check)(const msgpack_object *r, uint8_t sel))
{
	if (insize < 1 || insize > 65536)
		return 0;
	const uint8_t *data = in + 1;
	size_t size = insize - 1;
	msgpack_sbuffer sb;
	msgpack_packer pk;
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_sbuffer_write(&sb, "\0\0\0\0", 4);
	msgpack_pack_map(&pk, 3);
	sbx_proto_pack_str(&pk, "t");
	sbx_proto_pack_str(&pk, "end");
	sbx_proto_pack_str(&pk, "id");
	msgpack_pack_uint64(&pk, 1);
	sbx_proto_pack_str(&pk, "r");
	msgpack_sbuffer_write(&sb, (const char *)data, size);
	uint32_t body = (uint32_t)(sb.size - 4);
	for (int i = 0; i < 4; i++)
		sb.data[i] = (char)(body >> (24 - 8 * i));
	size_t used;
	sbx_err e = { 0 };
	sbx_proto_frame f;
	int rc = sbx_proto_frame_decode((const uint8_t *)sb.data, sb.size, 1u << 20, &f, &used, NULL, &e);
	msgpack_sbuffer_destroy(&sb);
	if (rc == 1) {
		check(&f.args, in[0]);
		sbx_proto_frame_release(&f);
	}
	return 0;
}

/* An entry's path p (a listing of base, as rendered): strictly below
 * base, and in normal form (a client may send it back as it is). */
static void fuzz_check_below(const char *p, const char *base)
{
	size_t pl = strlen(p), bl = strlen(base);
	char norm[PATH_MAX];
	sbx_err e = { 0 };
	CHECK(sup_path_is_under(p, pl, base, bl) && pl > bl);
	int n = sup_path_normalize(p, pl, norm, sizeof(norm), NULL, &e);
	CHECK(n == (int)pl && strcmp(norm, p) == 0);
}

#endif
