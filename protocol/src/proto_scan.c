/* Structural pre-check of msgpack bytes (see proto_scan.h). */
#include "proto_scan.h"

static uint64_t be(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

/* Shape of the object whose type byte is b: *lsize length bytes follow the
 * type byte; the count they (or the type byte) give, plus *fixed, is either a
 * payload size (children_mul 0) or a number of children (1 per array
 * element, 2 per map pair). Returns 0 for the reserved byte 0xc1. */
static unsigned head(uint8_t b, unsigned *lsize, uint64_t *fixed, uint64_t *children_mul)
{
	*lsize = 0;
	*fixed = 0;
	*children_mul = 0;
	if (b <= 0x7f || b >= 0xe0 || b == 0xc0 || b == 0xc2 || b == 0xc3)
		return 1;
	if ((b & 0xf0) == 0x80) { /* fixmap */
		*fixed = b & 0x0f;
		*children_mul = 2;
		return 1;
	}
	if ((b & 0xf0) == 0x90) { /* fixarray */
		*fixed = b & 0x0f;
		*children_mul = 1;
		return 1;
	}
	if ((b & 0xe0) == 0xa0) { /* fixstr: payload length in the type byte */
		*fixed = b & 0x1f;
		return 1;
	}
	switch (b) {
	case 0xc4: case 0xd9: *lsize = 1; return 1;                 /* bin8 str8 */
	case 0xc5: case 0xda: *lsize = 2; return 1;                 /* bin16 str16 */
	case 0xc6: case 0xdb: *lsize = 4; return 1;                 /* bin32 str32 */
	case 0xc7: *lsize = 1; *fixed = 1; return 1;                /* ext8: +type */
	case 0xc8: *lsize = 2; *fixed = 1; return 1;
	case 0xc9: *lsize = 4; *fixed = 1; return 1;
	case 0xca: case 0xce: case 0xd2: *fixed = 4; return 1;
	case 0xcb: case 0xcf: case 0xd3: *fixed = 8; return 1;
	case 0xcc: case 0xd0: *fixed = 1; return 1;
	case 0xcd: case 0xd1: *fixed = 2; return 1;
	case 0xd4: *fixed = 2; return 1;                            /* fixext */
	case 0xd5: *fixed = 3; return 1;
	case 0xd6: *fixed = 5; return 1;
	case 0xd7: *fixed = 9; return 1;
	case 0xd8: *fixed = 17; return 1;
	case 0xdc: *lsize = 2; *children_mul = 1; return 1;         /* array16 */
	case 0xdd: *lsize = 4; *children_mul = 1; return 1;
	case 0xde: *lsize = 2; *children_mul = 2; return 1;         /* map16 */
	case 0xdf: *lsize = 4; *children_mul = 2; return 1;
	default: return 0;                                          /* 0xc1 */
	}
}

enum sbx_proto_scan_result sbx_proto_scan(const uint8_t *buf, size_t len, size_t *consumed)
{
	uint64_t left[SBX_PROTO_MAX_DEPTH]; /* objects still owed per open container */
	unsigned depth = 0;
	size_t off = 0;

	*consumed = 0;
	for (;;) {
		if (off >= len)
			return SBX_SCAN_TRUNCATED;
		uint8_t b = buf[off++];
		unsigned lsize;
		uint64_t fixed, mul;
		if (!head(b, &lsize, &fixed, &mul))
			return SBX_SCAN_INVALID;
		uint64_t n = fixed;
		if (lsize) {
			if (len - off < lsize)
				return SBX_SCAN_TRUNCATED;
			n = be(buf + off, lsize) + fixed;
			off += lsize;
		}
		if (mul) {
			/* like msgpack-c, an empty container counts towards depth too */
			if (depth == SBX_PROTO_MAX_DEPTH)
				return SBX_SCAN_TOO_DEEP;
			if (n) {
				left[depth++] = n * mul;
				continue;
			}
		} else {
			if (len - off < n)
				return SBX_SCAN_TRUNCATED;
			off += (size_t)n;
		}
		/* one object complete: pop every container it completes */
		while (depth && --left[depth - 1] == 0)
			depth--;
		if (!depth) {
			*consumed = off;
			return SBX_SCAN_OK;
		}
	}
}

int sbx_proto_scan_is_map(const void *buf, size_t len)
{
	size_t used;
	const uint8_t *p = buf;
	if (!buf || !len)
		return 0;
	if ((p[0] & 0xf0) != 0x80 && p[0] != 0xde && p[0] != 0xdf)
		return 0;
	return sbx_proto_scan(p, len, &used) == SBX_SCAN_OK && used == len;
}
