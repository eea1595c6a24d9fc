/* sup_httpin's framing: where heads end, what they say, their rewrite for
 * uploads, and the chunked decoder, with hostile input. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sup_httpin_parse.h"

/* Head end of s fed in pieces of `step` bytes: > 0 its length, 0 more
 * needed, -EINVAL. */
static long head_end(const char *s, size_t len, size_t step)
{
	sup_httpin_headscan sc = { 0 };
	for (size_t off = 0; off < len; off += step) {
		size_t n = len - off < step ? len - off : step, e = 0;
		int r = sup_httpin_headscan_feed(&sc, (const uint8_t *)s + off, n, &e);
		if (r < 0)
			return r;
		if (r > 0)
			return (long)(off + e);
	}
	return 0;
}

#define HE(s, step) head_end(s, sizeof(s) - 1, step)

static void test_headscan(void **state)
{
	(void)state;
	for (size_t step = 1; step < 8; step++) {
		assert_int_equal(HE("GET / HTTP/1.1\r\nHost: x\r\n\r\nBODY", step), 27);
		assert_int_equal(HE("GET / HTTP/1.1\r\nHost: x\r\n", step), 0);
		assert_int_equal(HE("GET / HTTP/1.1\nHost: x\r\n\r\n", step), -EINVAL);  /* bare LF */
		assert_int_equal(HE("GET / HTTP/1.1\r\nHost: x\r\n\n", step), -EINVAL);
		assert_int_equal(HE("GET / HTTP/1.1\rHost: x\r\n\r\n", step), -EINVAL);  /* bare CR */
		assert_int_equal(HE("GET / HTTP/1.1\r\nA: \x01\r\n\r\n", step), -EINVAL); /* control */
		assert_int_equal(HE("GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", step), -EINVAL); /* fold */
		assert_int_equal(HE("GET / HTTP/1.1\r\nA: b\x80\r\n\r\n", step), 25);     /* obs-text */
	}
	/* The 64 KiB bound, fed whole or in pieces. */
	size_t big = SUP_HTTPIN_HEAD_MAX + 100;
	char *s = malloc(big);
	assert_non_null(s);
	memcpy(s, "GET / HTTP/1.1\r\nX: ", 19);
	memset(s + 19, 'a', big - 19);
	assert_int_equal(head_end(s, big, big), -E2BIG);
	assert_int_equal(head_end(s, big, 1000), -E2BIG);
	assert_int_equal(head_end(s, SUP_HTTPIN_HEAD_MAX - 10, 1000), 0);
	free(s);
}

#define PH(s, h) sup_httpin_parse_head(s, sizeof(s) - 1, h)

static void test_parse_head(void **state)
{
	(void)state;
	sup_httpin_head h;
	assert_int_equal(PH("PUT /v1/sandboxes/a/files?path=/x HTTP/1.1\r\nContent-Length: 12\r\n"
			    "expect:  100-Continue \r\n\r\n", &h), 0);
	assert_int_equal(h.method_len, 3);
	assert_memory_equal(h.method, "PUT", 3);
	assert_int_equal(h.target_len, strlen("/v1/sandboxes/a/files?path=/x"));
	assert_int_equal(h.minor, 1);
	assert_true(h.has_cl);
	assert_int_equal(h.cl, 12);
	assert_true(h.expect_continue);
	assert_null(h.bad);

	assert_int_equal(PH("PUT / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", &h), 0);
	assert_true(h.te_chunked);
	assert_null(h.bad);

	/* Framing that may not be trusted. */
	assert_int_equal(PH("PUT / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", &h), 0);
	assert_non_null(h.bad);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n", &h), 0);
	assert_non_null(h.bad);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", &h), 0);
	assert_non_null(h.bad);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nContent-Length: +1\r\n\r\n", &h), 0);
	assert_non_null(h.bad);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nContent-Length: 1, 1\r\n\r\n", &h), 0);
	assert_non_null(h.bad);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", &h), 0);
	assert_non_null(h.bad);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nContent-Length: \r\n\r\n", &h), 0);
	assert_non_null(h.bad);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", &h), 0);
	assert_non_null(h.bad);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", &h), 0);
	assert_non_null(h.bad);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n", &h), 0);
	assert_non_null(h.bad);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nContent-Length: 999999999999999999\r\n\r\n", &h), 0);
	assert_null(h.bad);
	assert_int_equal(h.cl, 999999999999999999ull);

	/* Malformed. */
	assert_int_equal(PH("PUT  / HTTP/1.1\r\n\r\n", &h), -EINVAL);
	assert_int_equal(PH("PUT / HTTP/2.0\r\n\r\n", &h), -EINVAL);
	assert_int_equal(PH("PUT / HTTP/1.1 \r\n\r\n", &h), -EINVAL);
	assert_int_equal(PH("P(T / HTTP/1.1\r\n\r\n", &h), -EINVAL);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nContent-Length : 5\r\n\r\n", &h), -EINVAL);
	assert_int_equal(PH("PUT / HTTP/1.1\r\nNoColon\r\n\r\n", &h), -EINVAL);
	assert_int_equal(PH("\r\n\r\n", &h), -EINVAL);
	assert_int_equal(PH("PUT / HTTP/1.1\r\n", &h), -EINVAL);
}

/* Decode s fed in pieces of step bytes; the data goes to out. Returns
 * SUP_HTTPIN_END, SUP_HTTPIN_MORE or -EBADMSG; *rest the bytes after the end. */
static int decode(const char *s, size_t len, size_t step, char *out, size_t *outlen, size_t *rest)
{
	sup_httpin_chunked d;
	sup_httpin_chunked_init(&d);
	size_t off = 0;
	*outlen = 0;
	while (off < len) {
		size_t avail = len - off < step ? len - off : step, used = 0;
		const char *why = NULL;
		int r = sup_httpin_chunked_frame(&d, (const uint8_t *)s + off, avail, &used, &why);
		off += used;
		if (r < 0) {
			assert_non_null(why);
			return r;
		}
		if (r == SUP_HTTPIN_END) {
			*rest = len - off;
			return r;
		}
		if (r == SUP_HTTPIN_DATA) {
			size_t k = avail - used;
			if (k > d.left)
				k = (size_t)d.left;
			if (k == 0)
				continue;
			memcpy(out + *outlen, s + off, k);
			*outlen += k;
			off += k;
			sup_httpin_chunked_took(&d, k);
		}
	}
	return SUP_HTTPIN_MORE;
}

#define DEC(s, step) decode(s, sizeof(s) - 1, step, out, &ol, &rest)

static void test_chunked(void **state)
{
	(void)state;
	char out[256];
	size_t ol, rest;
	for (size_t step = 1; step < 9; step++) {
		assert_int_equal(DEC("5\r\nhello\r\n1;ext=\"x\"\r\n!\r\n0\r\n\r\nNEXT", step), SUP_HTTPIN_END);
		assert_int_equal(ol, 6);
		assert_memory_equal(out, "hello!", 6);
		assert_int_equal(rest, 4);
		assert_int_equal(DEC("A\r\n0123456789\r\n00\r\nTrailer: x\r\n\r\n", step), SUP_HTTPIN_END);
		assert_int_equal(ol, 10);
		assert_int_equal(DEC("0\r\n\r\n", step), SUP_HTTPIN_END);
		assert_int_equal(ol, 0);
		assert_int_equal(DEC("5\r\nhel", step), SUP_HTTPIN_MORE);
		assert_int_equal(DEC("5 ;x\r\nhello\r\n0\r\n\r\n", step), SUP_HTTPIN_END);
		/* Hostile. */
		assert_int_equal(DEC("x\r\n", step), -EBADMSG);              /* not hex */
		assert_int_equal(DEC("\r\n", step), -EBADMSG);               /* no size */
		assert_int_equal(DEC("-5\r\n", step), -EBADMSG);
		assert_int_equal(DEC("0x5\r\n", step), -EBADMSG);
		assert_int_equal(DEC("5 6\r\n", step), -EBADMSG);
		assert_int_equal(DEC("5\nhello\r\n", step), -EBADMSG);       /* LF alone */
		assert_int_equal(DEC("5\rhello\r\n", step), -EBADMSG);       /* CR alone */
		assert_int_equal(DEC("5\r\nhelloX\r\n", step), -EBADMSG);    /* longer than its size */
		assert_int_equal(DEC("5\r\nhello\n0\r\n\r\n", step), -EBADMSG);
		assert_int_equal(DEC("1000000000000000\r\n", step), -EBADMSG); /* 16 digits: 2^60 */
		assert_int_equal(DEC("ffffffffffffffffffff\r\n", step), -EBADMSG);
		assert_int_equal(DEC("0\r\nTrailer: x\n\r\n", step), -EBADMSG);
		assert_int_equal(DEC("0\r\nX: \x01\r\n\r\n", step), -EBADMSG);
	}
	/* 15 digits with leading zeros is fine; the value stays below 2^60. */
	assert_int_equal(DEC("0000000000000000000fffffffffffffff\r\n", 3), SUP_HTTPIN_MORE);
	/* Bounded lines and trailers. */
	size_t big = SUP_HTTPIN_TRAILER_MAX + 64;
	char *s = malloc(big + 16);
	assert_non_null(s);
	memcpy(s, "1;", 2);
	memset(s + 2, 'e', big - 2);
	memcpy(s + big, "\r\n", 2);
	char *o = malloc(big + 16);
	assert_non_null(o);
	assert_int_equal(decode(s, big + 2, 100, o, &ol, &rest), -EBADMSG);
	memcpy(s, "0\r\nX:", 5);
	memset(s + 5, 'v', big - 5);
	assert_int_equal(decode(s, big + 2, 100, o, &ol, &rest), -EBADMSG);
	free(s);
	free(o);
}

#define PR(s, h) sup_httpin_parse_response(s, sizeof(s) - 1, h)

static void test_parse_response(void **state)
{
	(void)state;
	sup_httpin_head *h = malloc(sizeof(*h));
	assert_non_null(h);
	assert_int_equal(PR("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A: b\r\n\r\n", h), 0);
	assert_int_equal(h->status, 200);
	assert_int_equal(h->minor, 1);
	assert_true(h->has_cl);
	assert_int_equal(h->cl, 5);
	assert_int_equal(h->nhdrs, 2);
	assert_null(h->bad);
	assert_int_equal(PR("HTTP/1.0 204\r\n\r\n", h), 0); /* no reason phrase */
	assert_int_equal(h->status, 204);
	assert_int_equal(h->minor, 0);
	assert_int_equal(PR("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n"
			    "Upgrade: websocket\r\n\r\n", h), 0);
	assert_true(h->conn_upgrade);
	assert_int_equal(PR("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", h), 0);
	assert_true(h->te_chunked);
	/* Framing a response must not have either. */
	assert_int_equal(PR("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", h), 0);
	assert_non_null(h->bad);
	assert_int_equal(PR("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", h), 0);
	assert_non_null(h->bad);
	/* Malformed status lines. */
	assert_int_equal(PR("HTTP/1.1 20 OK\r\n\r\n", h), -EINVAL);
	assert_int_equal(PR("HTTP/1.1 2000 OK\r\n\r\n", h), -EINVAL);
	assert_int_equal(PR("HTTP/2.0 200 OK\r\n\r\n", h), -EINVAL);
	assert_int_equal(PR("HTTP/1.1 099 x\r\n\r\n", h), -EINVAL);
	assert_int_equal(PR("HTTP/1.1 abc OK\r\n\r\n", h), -EINVAL);
	assert_int_equal(PR("GET / HTTP/1.1\r\n\r\n", h), -EINVAL); /* a request is not an answer */
	assert_int_equal(PR("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", h), -EINVAL);
	/* ... and a response line is not a request. */
	assert_int_equal(sup_httpin_parse_head("HTTP/1.1 200 OK\r\n\r\n", 19, h), -EINVAL);
	free(h);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_headscan),
		cmocka_unit_test(test_parse_head),
		cmocka_unit_test(test_chunked),
		cmocka_unit_test(test_parse_response),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
