#include "sup_b64.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define SUP_B64_SSSE3 1
#endif

static const char b64_tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Two output characters per 12 input bits: this halves the lookups of the
 * scalar loop. Each entry holds the two characters in memory order. */
static uint16_t b64_pairs[4096];
static pthread_once_t b64_once = PTHREAD_ONCE_INIT;

static void b64_pairs_init(void)
{
	for (int i = 0; i < 4096; i++) {
		char two[2] = { b64_tbl[i >> 6], b64_tbl[i & 63] };
		memcpy(&b64_pairs[i], two, 2);
	}
}

/* Encodes p[i..n) into out + o; returns the new o. */
static size_t encode_tail(const uint8_t *p, size_t n, size_t i, char *out, size_t o)
{
	pthread_once(&b64_once, b64_pairs_init);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* 6 bytes to 8 characters per step: one 8-byte load (2 bytes read
	 * ahead, hence i + 8 <= n) and one 8-byte store. */
	for (; i + 8 <= n; i += 6) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		w = __builtin_bswap64(w);
		uint64_t r = (uint64_t)b64_pairs[(w >> 52) & 4095] |
			     (uint64_t)b64_pairs[(w >> 40) & 4095] << 16 |
			     (uint64_t)b64_pairs[(w >> 28) & 4095] << 32 |
			     (uint64_t)b64_pairs[(w >> 16) & 4095] << 48;
		memcpy(out + o, &r, 8);
		o += 8;
	}
#endif
	for (; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
		memcpy(out + o, &b64_pairs[v >> 12], 2);
		memcpy(out + o + 2, &b64_pairs[v & 4095], 2);
		o += 4;
	}
	if (i < n) {
		uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
		out[o++] = b64_tbl[v >> 18];
		out[o++] = b64_tbl[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64_tbl[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	return o;
}

size_t sup_base64_encode_scalar(const uint8_t *p, size_t n, char *out)
{
	return encode_tail(p, n, 0, out, 0);
}

#ifdef SUP_B64_SSSE3
/* 12 bytes to 16 characters per step (W. Mula's method): a byte shuffle
 * puts each 3-byte group in a 32-bit lane as [b1 b0 b2 b1], two 16-bit
 * multiplies move the four 6-bit fields to the four bytes, and a 16-entry
 * shuffle table adds each field's offset to its ASCII range. About 4x the
 * scalar loop. A load reads 4 bytes ahead, hence i + 16 <= n. */
__attribute__((target("ssse3"))) static size_t encode_ssse3(const uint8_t *p, size_t n, char *out)
{
	const __m128i shuf = _mm_set_epi8(10, 11, 9, 10, 7, 8, 6, 7, 4, 5, 3, 4, 1, 2, 0, 1);
	const __m128i mask_ac = _mm_set1_epi32(0x0fc0fc00), mul_ac = _mm_set1_epi32(0x04000040);
	const __m128i mask_bd = _mm_set1_epi32(0x003f03f0), mul_bd = _mm_set1_epi32(0x01000010);
	/* 'A'-0, 'a'-26, '0'-52 (x10), '+'-62, '/'-63 */
	const __m128i offs = _mm_setr_epi8(65, 71, -4, -4, -4, -4, -4, -4, -4, -4, -4, -4, -19, -16, 0, 0);
	const __m128i c51 = _mm_set1_epi8(51), c25 = _mm_set1_epi8(25);
	size_t i = 0, o = 0;

	for (; i + 16 <= n; i += 12, o += 16) {
		__m128i in = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)(p + i)), shuf);
		__m128i ac = _mm_mulhi_epu16(_mm_and_si128(in, mask_ac), mul_ac);
		__m128i bd = _mm_mullo_epi16(_mm_and_si128(in, mask_bd), mul_bd);
		__m128i v = _mm_or_si128(ac, bd);
		/* 0..25 -> 0, 26..51 -> 1, 52..63 -> 2..13 */
		__m128i idx = _mm_sub_epi8(_mm_subs_epu8(v, c51), _mm_cmpgt_epi8(v, c25));
		_mm_storeu_si128((__m128i *)(void *)(out + o), _mm_add_epi8(v, _mm_shuffle_epi8(offs, idx)));
	}
	return encode_tail(p, n, i, out, o);
}
#endif

size_t sup_base64_encode_into(const uint8_t *p, size_t n, char *out)
{
#ifdef SUP_B64_SSSE3
	if (n >= 16 && __builtin_cpu_supports("ssse3"))
		return encode_ssse3(p, n, out);
#endif
	return encode_tail(p, n, 0, out, 0);
}

char *sup_base64_encode(const uint8_t *p, size_t n, size_t *out_len)
{
	if (n > (SIZE_MAX - 4) / 4 * 3)
		return NULL;
	char *out = malloc(SUP_BASE64_LEN(n) + 1);
	if (!out)
		return NULL;
	size_t o = sup_base64_encode_into(p, n, out);
	out[o] = '\0';
	*out_len = o;
	return out;
}
