/* The base64 encoder (sup_b64): golden vectors made with Python's base64,
 * then the vector and scalar loops against a bit-by-bit reference for every
 * length and alignment the vector loop's steps and tail can meet. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sup_b64.h"
#include "sup_text.h"

/* /usr/bin/python3 -c 'import base64; print(base64.b64encode(b))' */
static const char all_bytes_b64[] =
	"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1"
	"Njc4OTo7PD0+P0BBQkNERUZHSElKS0xNTk9QUVJTVFVWV1hZWltcXV5fYGFiY2RlZmdoaWpr"
	"bG1ub3BxcnN0dXZ3eHl6e3x9fn+AgYKDhIWGh4iJiouMjY6PkJGSk5SVlpeYmZqbnJ2en6Ch"
	"oqOkpaanqKmqq6ytrq+wsbKztLW2t7i5uru8vb6/wMHCw8TFxsfIycrLzM3Oz9DR0tPU1dbX"
	"2Nna29zd3t/g4eLj5OXm5+jp6uvs7e7v8PHy8/T19vf4+fr7/P3+/w==";

static uint8_t pattern(size_t i)
{
	return (uint8_t)((i * 37 + 11) * (i + 3));
}

/* Six bits at a time, the definition itself. */
static size_t reference(const uint8_t *p, size_t n, char *out)
{
	static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;
	for (size_t i = 0; i < n; i += 3) {
		size_t k = n - i < 3 ? n - i : 3;
		uint32_t v = 0;
		for (size_t j = 0; j < 3; j++)
			v = v << 8 | (j < k ? p[i + j] : 0);
		for (size_t j = 0; j < 4; j++)
			out[o++] = j <= k ? t[(v >> (18 - 6 * j)) & 63] : '=';
	}
	return o;
}

static void check_encoders(const uint8_t *p, size_t n)
{
	size_t len = SUP_BASE64_LEN(n);
	char *want = malloc(len + 1), *got = malloc(len + 1);
	assert_non_null(want);
	assert_non_null(got);
	assert_int_equal(reference(p, n, want), len);
	/* a guard byte: nothing is written past the encoded length */
	got[len] = '#';
	assert_int_equal(sup_base64_encode_into(p, n, got), len);
	assert_memory_equal(got, want, len);
	assert_int_equal(got[len], '#');
	assert_int_equal(sup_base64_encode_scalar(p, n, got), len);
	assert_memory_equal(got, want, len);
	assert_int_equal(got[len], '#');
	free(want);
	free(got);
}

static void test_golden(void **state)
{
	(void)state;
	static const struct {
		size_t n;
		const char *out;
	} v[] = {
		{ 0, "" },
		{ 1, "IQ==" },
		{ 2, "IcA=" },
		{ 3, "IcCp" },
		{ 4, "IcCp3A==" },
		{ 8, "IcCp3FkgMYw=" },
		{ 12, "IcCp3FkgMYwxIFnc" },
		{ 15, "IcCp3FkgMYwxIFncqcAh" },
		{ 16, "IcCp3FkgMYwxIFncqcAhzA==" },
		{ 17, "IcCp3FkgMYwxIFncqcAhzME=" },
		{ 18, "IcCp3FkgMYwxIFncqcAhzMEA" },
		{ 27, "IcCp3FkgMYwxIFncqcAhzMEAiVx54JGM0WA5" },
		{ 28, "IcCp3FkgMYwxIFncqcAhzMEAiVx54JGM0WA5XA==" },
		{ 29, "IcCp3FkgMYwxIFncqcAhzMEAiVx54JGM0WA5XMk=" },
		{ 31, "IcCp3FkgMYwxIFncqcAhzMEAiVx54JGM0WA5XMmAgQ==" },
		{ 40, "IcCp3FkgMYwxIFncqcAhzMEAiVx54JGM0WA5XMmAgcxhQGncmaDxjA==" },
		{ 64, "IcCp3FkgMYwxIFncqcAhzMEAiVx54JGM0WA5XMmAgcxhQGncmaDxjHGgGdzpQOHMAYBJXLlgUYwR4PlcCQBBzA==" },
		{ 100, "IcCp3FkgMYwxIFncqcAhzMEAiVx54JGM0WA5XMmAgcxhQGncmaDxjHGgGdzpQOHMAYBJXLlgUYwR4PlcCQBBzKHAK"
		       "dzZILGMsSDZ3CnAocxBAAlc+eARjFFguVxJgAHM4UDp3A==" },
	};
	uint8_t in[100];
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = pattern(i);
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t len;
		char *o = sup_base64_encode(in, v[i].n, &len);
		assert_non_null(o);
		assert_string_equal(o, v[i].out);
		assert_int_equal(len, strlen(v[i].out));
		free(o);
	}
	/* every byte value, so every one of the 64 characters */
	uint8_t all[256];
	for (size_t i = 0; i < sizeof(all); i++)
		all[i] = (uint8_t)i;
	size_t len;
	char *o = sup_base64_encode(all, sizeof(all), &len);
	assert_non_null(o);
	assert_string_equal(o, all_bytes_b64);
	free(o);
}

/* Each length up to a few vector steps, from each alignment, on patterned,
 * all-zero and all-ones bytes; then decoded back. */
static void test_against_reference(void **state)
{
	(void)state;
	enum { MAX = 200, ALIGN = 16 };
	uint8_t *buf = malloc(MAX + ALIGN);
	assert_non_null(buf);
	for (int fill = 0; fill < 3; fill++) {
		for (size_t i = 0; i < MAX + ALIGN; i++)
			buf[i] = fill == 0 ? pattern(i) : fill == 1 ? 0 : 0xff;
		for (size_t a = 0; a < ALIGN; a++)
			for (size_t n = 0; n <= MAX; n++)
				check_encoders(buf + a, n);
	}
	free(buf);

	/* a large buffer, as a streamed frame is, round trip */
	size_t n = (256u << 10) + 7;
	uint8_t *big = malloc(n);
	assert_non_null(big);
	uint32_t x = 2463534242u;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		big[i] = (uint8_t)x;
	}
	check_encoders(big, n);
	size_t len, dlen, bad;
	char *o = sup_base64_encode(big, n, &len);
	assert_non_null(o);
	uint8_t *d = sup_base64_decode(o, len, &dlen, &bad);
	assert_non_null(d);
	assert_int_equal(dlen, n);
	assert_memory_equal(d, big, n);
	free(d);
	free(o);
	free(big);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden),
		cmocka_unit_test(test_against_reference),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
