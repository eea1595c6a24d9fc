/* sup_httpin's framing under libFuzzer. Input: one byte choosing a piece
 * size, then bytes taken as a request head followed by a chunked body.
 * Checks, besides the sanitizers: the head scan and the chunked decoder
 * answer the same fed whole or in pieces (so where a TCP read splits the
 * bytes never matters); a head that parses keeps its parts inside it and
 * refuses conflicting framing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sup_httpin_parse.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

static int scan(const uint8_t *d, size_t n, size_t step, size_t *end)
{
	sup_httpin_headscan s = { 0 };
	for (size_t off = 0; off < n; off += step) {
		size_t k = n - off < step ? n - off : step, e = 0;
		int r = sup_httpin_headscan_feed(&s, d + off, k, &e);
		if (r > 0)
			*end = off + e;
		if (r != 0)
			return r;
	}
	return 0;
}

/* Decoded data goes to out (n bytes room); returns the last answer. */
static int decode(const uint8_t *d, size_t n, size_t step, uint8_t *out, size_t *outlen,
		  size_t *used_all)
{
	sup_httpin_chunked c;
	sup_httpin_chunked_init(&c);
	size_t off = 0;
	int r = SUP_HTTPIN_MORE;
	*outlen = 0;
	while (off < n) {
		size_t avail = n - off < step ? n - off : step, used = 0;
		const char *why = NULL;
		r = sup_httpin_chunked_frame(&c, d + off, avail, &used, &why);
		off += used;
		if (r < 0) {
			CHECK(why != NULL);
			break;
		}
		if (r == SUP_HTTPIN_END)
			break;
		if (r == SUP_HTTPIN_DATA) {
			size_t k = avail - used;
			if (k > c.left)
				k = (size_t)c.left;
			memcpy(out + *outlen, d + off, k);
			*outlen += k;
			off += k;
			sup_httpin_chunked_took(&c, k);
			if (k)
				r = SUP_HTTPIN_MORE;
		}
	}
	*used_all = off;
	return r;
}

/* A head that parses: its parts lie inside it, its headers are as many as
 * counted and each well-formed; framing refused is refused for a reason. */
static void check_head(const uint8_t *d, size_t len)
{
	sup_httpin_head h;
	const char *b = (const char *)d, *e = b + len;
	if (sup_httpin_parse_head(b, len, &h) < 0)
		return;
	CHECK(h.method_len > 0 && h.target_len > 0 && h.method == b);
	CHECK(h.target > b && h.target + h.target_len < e);
	CHECK(h.nhdrs <= SUP_HTTPIN_MAX_HEADERS);
	for (size_t i = 0; i < h.nhdrs; i++) {
		CHECK(h.hdrs[i].name > b && h.hdrs[i].name_len > 0);
		CHECK(h.hdrs[i].value + h.hdrs[i].value_len < e);
		CHECK(!memchr(h.hdrs[i].value, '\r', h.hdrs[i].value_len));
	}
	if (h.has_cl && h.has_te)
		CHECK(h.bad != NULL);
	if (h.has_te && !h.te_chunked)
		CHECK(h.bad != NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	size_t step = (size_t)(data[0] % 16) + 1;
	const uint8_t *d = data + 1;
	size_t n = size - 1, ea = 0, eb = 0;
	int ra = scan(d, n, n ? n : 1, &ea);
	int rb = scan(d, n, step, &eb);
	CHECK(ra == rb && ea == eb);
	size_t body = 0;
	if (ra > 0) {
		check_head(d, ea);
		body = ea;
	}
	uint8_t *o1 = malloc(n + 1), *o2 = malloc(n + 1);
	CHECK(o1 && o2);
	size_t l1, l2, u1, u2;
	int r1 = decode(d + body, n - body, n - body ? n - body : 1, o1, &l1, &u1);
	int r2 = decode(d + body, n - body, step, o2, &l2, &u2);
	CHECK(r1 == r2 && l1 == l2 && memcmp(o1, o2, l1) == 0);
	if (r1 == SUP_HTTPIN_END || r1 < 0)
		CHECK(u1 == u2);
	free(o1);
	free(o2);
	return 0;
}
