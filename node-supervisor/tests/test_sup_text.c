/* UTF-8 validation/repair, base64, RFC 3339, signal names and sizes (sup_text). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sup_text.h"

#define U(s) (const uint8_t *)(s), sizeof(s) - 1

static void test_utf8_valid(void **state)
{
	(void)state;
	assert_true(sup_utf8_valid(U("")));
	assert_true(sup_utf8_valid(U("hello\n")));
	assert_true(sup_utf8_valid(U("\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"))); /* é € 😀 */
	assert_true(sup_utf8_valid(U("a\0b")));
	assert_false(sup_utf8_valid(U("\xC0\xAF")));         /* overlong */
	assert_false(sup_utf8_valid(U("\xE0\x80\xAF")));     /* overlong */
	assert_false(sup_utf8_valid(U("\xED\xA0\x80")));     /* surrogate */
	assert_false(sup_utf8_valid(U("\xF4\x90\x80\x80"))); /* > U+10FFFF */
	assert_false(sup_utf8_valid(U("\xE2\x82")));         /* cut short */
	assert_false(sup_utf8_valid(U("\x80")));
	assert_false(sup_utf8_valid(U("\xFF")));
}

static void repair_eq(const uint8_t *in, size_t n, const char *want)
{
	size_t len;
	char *out = sup_utf8_repair(in, n, &len);
	assert_non_null(out);
	assert_int_equal(len, strlen(want));
	assert_memory_equal(out, want, len);
	assert_true(sup_utf8_valid((const uint8_t *)out, len));
	free(out);
}

static void test_utf8_repair(void **state)
{
	(void)state;
	repair_eq(U("ok"), "ok");
	repair_eq(U("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
	/* A truncated sequence is one replacement, then the next byte stands. */
	repair_eq(U("\xE2\x82" "A"), "\xEF\xBF\xBD" "A");
	repair_eq(U("\xE2\x82"), "\xEF\xBF\xBD");
	/* Each byte of an invalid lead/continuation run is its own U+FFFD. */
	repair_eq(U("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
	repair_eq(U("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
	repair_eq(U("\xF0\x9F\x98\x80"), "\xF0\x9F\x98\x80");
}

static void test_base64(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} v[] = { { "", "" }, { "f", "Zg==" }, { "fo", "Zm8=" }, { "foo", "Zm9v" },
		  { "foob", "Zm9vYg==" }, { "fooba", "Zm9vYmE=" }, { "foobar", "Zm9vYmFy" } };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t len;
		char *o = sup_base64_encode((const uint8_t *)v[i].in, strlen(v[i].in), &len);
		assert_string_equal(o, v[i].out);
		assert_int_equal(len, strlen(v[i].out));
		free(o);
	}
	size_t len;
	char *o = sup_base64_encode((const uint8_t *)"\xff\xfe\x00", 3, &len);
	assert_string_equal(o, "//4A");
	free(o);
	/* long enough for the 6-byte steps, and every tail after them */
	const char *fox = "The quick brown fox jumps over the lazy dog";
	o = sup_base64_encode((const uint8_t *)fox, strlen(fox), &len);
	assert_string_equal(o, "VGhlIHF1aWNrIGJyb3duIGZveCBqdW1wcyBvdmVyIHRoZSBsYXp5IGRvZw==");
	free(o);
	uint8_t in[300];
	uint32_t x = 2463534242u;
	for (size_t i = 0; i < sizeof(in); i++) {
		x ^= x << 13, x ^= x >> 17, x ^= x << 5;
		in[i] = (uint8_t)x;
	}
	for (size_t n = 0; n <= sizeof(in); n++) {
		size_t dlen, bad;
		o = sup_base64_encode(in + sizeof(in) - n, n, &len);
		assert_int_equal(len, (n + 2) / 3 * 4);
		uint8_t *d = sup_base64_decode(o, len, &dlen, &bad);
		assert_non_null(d);
		assert_int_equal(dlen, n);
		assert_memory_equal(d, in + sizeof(in) - n, n);
		free(d);
		free(o);
	}
}

static void test_base64_decode(void **state)
{
	(void)state;
	static const struct {
		const char *in, *out;
	} v[] = { { "", "" }, { "Zg==", "f" }, { "Zm8=", "fo" }, { "Zm9v", "foo" },
		  { "Zm9vYg==", "foob" }, { "Zm9vYmE=", "fooba" }, { "Zm9vYmFy", "foobar" } };
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		size_t len, bad;
		uint8_t *o = sup_base64_decode(v[i].in, strlen(v[i].in), &len, &bad);
		assert_non_null(o);
		assert_int_equal(len, strlen(v[i].out));
		assert_memory_equal(o, v[i].out, len);
		free(o);
	}
	static const struct {
		const char *in;
		size_t bad;
	} b[] = { { "Zg=", 3 }, { "Z===", 1 }, { "Zg=A", 2 }, { "Zg==Zg==", 2 }, { "Zm9\n", 3 },
		  { "Zm 9", 2 }, { "Zm-9", 2 }, { "=Zm9", 0 } };
	for (size_t i = 0; i < sizeof(b) / sizeof(b[0]); i++) {
		size_t len, bad;
		uint8_t *o = sup_base64_decode(b[i].in, strlen(b[i].in), &len, &bad);
		if (o)
			fail_msg("accepted %s", b[i].in);
		assert_int_equal(bad, b[i].bad);
	}
	uint8_t all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (uint8_t)i;
	size_t elen, dlen, bad;
	char *enc = sup_base64_encode(all, sizeof(all), &elen);
	uint8_t *dec = sup_base64_decode(enc, elen, &dlen, &bad);
	assert_int_equal(dlen, sizeof(all));
	assert_memory_equal(dec, all, sizeof(all));
	free(enc);
	free(dec);
}

static void test_rfc3339(void **state)
{
	(void)state;
	char buf[32];
	sup_rfc3339(0, buf, sizeof(buf));
	assert_string_equal(buf, "1970-01-01T00:00:00Z");
	sup_rfc3339(1796037366, buf, sizeof(buf));
	assert_string_equal(buf, "2026-11-30T11:16:06Z");
}

static void test_parse_size(void **state)
{
	(void)state;
	uint64_t v;
	sbx_err e;
	assert_int_equal(sup_parse_size("0", 100, &v, &e), 0);
	assert_int_equal(v, 0);
	assert_int_equal(sup_parse_size("2G", 1ull << 40, &v, &e), 0);
	assert_int_equal(v, 2ull << 30);
	assert_int_equal(sup_parse_size("512m", 1ull << 40, &v, &e), 0);
	assert_int_equal(v, 512ull << 20);
	assert_int_equal(sup_parse_size("2G", 1ull << 30, &v, &e), -EINVAL);
	assert_int_equal(sup_parse_size("", 100, &v, &e), -EINVAL);
	assert_int_equal(sup_parse_size("-1", 100, &v, &e), -EINVAL);
	assert_int_equal(sup_parse_size("1T", 1ull << 50, &v, &e), -EINVAL);
}

static void test_signal_names(void **state)
{
	(void)state;
	char buf[32];
	assert_true(sup_signal_name(SIGKILL, buf, sizeof(buf)));
	assert_string_equal(buf, "KILL");
	assert_true(sup_signal_name(SIGTERM, buf, sizeof(buf)));
	assert_string_equal(buf, "TERM");
	assert_true(sup_signal_name(SIGSEGV, buf, sizeof(buf)));
	assert_string_equal(buf, "SEGV");
	assert_true(sup_signal_name(SIGRTMIN + 2, buf, sizeof(buf)));
	assert_string_equal(buf, "RTMIN+2");
	assert_false(sup_signal_name(0, buf, sizeof(buf)));
	assert_false(sup_signal_name(200, buf, sizeof(buf)));
	assert_string_equal(buf, "200");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8_valid),   cmocka_unit_test(test_utf8_repair),
		cmocka_unit_test(test_base64),       cmocka_unit_test(test_rfc3339),
		cmocka_unit_test(test_signal_names), cmocka_unit_test(test_base64_decode),
		cmocka_unit_test(test_parse_size),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
