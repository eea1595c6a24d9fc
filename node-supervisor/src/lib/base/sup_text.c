#include "sup_text.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the well-formed sequence at p (1..4), or 0 when the bytes at p
 * do not start one; *bad_len gets the maximal invalid prefix length (>= 1)
 * so the caller can replace it with one U+FFFD (Unicode 3.9 D93b). */
static size_t utf8_seq(const uint8_t *p, size_t n, size_t *bad_len)
{
	uint8_t c = p[0];
	*bad_len = 1;
	if (c < 0x80)
		return 1;
	size_t need;
	uint8_t lo = 0x80, hi = 0xBF;
	if (c >= 0xC2 && c <= 0xDF)
		need = 1;
	else if (c >= 0xE0 && c <= 0xEF) {
		need = 2;
		if (c == 0xE0)
			lo = 0xA0;
		else if (c == 0xED)
			hi = 0x9F; /* no surrogates */
	} else if (c >= 0xF0 && c <= 0xF4) {
		need = 3;
		if (c == 0xF0)
			lo = 0x90;
		else if (c == 0xF4)
			hi = 0x8F;
	} else
		return 0;
	for (size_t i = 1; i <= need; i++) {
		if (i >= n)
			return 0; /* cut short: *bad_len already covers what matched */
		uint8_t b = p[i];
		uint8_t l = i == 1 ? lo : 0x80, h = i == 1 ? hi : 0xBF;
		if (b < l || b > h)
			return 0;
		*bad_len = i + 1;
	}
	return need + 1;
}

bool sup_utf8_valid(const uint8_t *p, size_t n)
{
	size_t i = 0, bad;
	while (i < n) {
		if (p[i] < 0x80) {
			i++;
			continue;
		}
		size_t k = utf8_seq(p + i, n - i, &bad);
		if (!k)
			return false;
		i += k;
	}
	return true;
}

char *sup_utf8_repair(const uint8_t *p, size_t n, size_t *out_len)
{
	/* Worst case: every byte becomes U+FFFD (3 bytes). */
	if (n > (SIZE_MAX - 1) / 3)
		return NULL;
	char *out = malloc(n * 3 + 1);
	if (!out)
		return NULL;
	size_t i = 0, o = 0, bad;
	while (i < n) {
		if (p[i] < 0x80) {
			out[o++] = (char)p[i++];
			continue;
		}
		size_t k = utf8_seq(p + i, n - i, &bad);
		if (k) {
			memcpy(out + o, p + i, k);
			o += k;
			i += k;
		} else {
			memcpy(out + o, "\xEF\xBF\xBD", 3);
			o += 3;
			i += bad;
		}
	}
	out[o] = '\0';
	*out_len = o;
	return out;
}

void sup_rfc3339(time_t t, char *buf, size_t size)
{
	struct tm tm;
	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

bool sup_signal_name(int sig, char *buf, size_t size)
{
	if (sig >= SIGRTMIN && sig <= SIGRTMAX) {
		if (sig == SIGRTMIN)
			snprintf(buf, size, "RTMIN");
		else
			snprintf(buf, size, "RTMIN+%d", sig - SIGRTMIN);
		return true;
	}
	const char *name = sig > 0 && sig < NSIG ? sigabbrev_np(sig) : NULL;
	if (!name) {
		snprintf(buf, size, "%d", sig);
		return false;
	}
	snprintf(buf, size, "%s", name);
	return true;
}

static int b64_val(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

uint8_t *sup_base64_decode(const char *s, size_t n, size_t *out_len, size_t *bad_at)
{
	*bad_at = SIZE_MAX;
	if (n % 4) {
		*bad_at = n;
		return NULL;
	}
	uint8_t *out = malloc(n / 4 * 3 + 1);
	if (!out)
		return NULL;
	size_t o = 0;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		bool last = i + 4 == n;
		for (int k = 0; k < 4; k++) {
			unsigned char c = (unsigned char)s[i + k];
			v[k] = b64_val(c);
			/* '=' only as the last one or two characters. */
			if (v[k] < 0 && !(c == '=' && last && k >= 2 && (k == 3 || s[i + 3] == '='))) {
				*bad_at = i + (size_t)k;
				free(out);
				return NULL;
			}
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
			     (uint32_t)(v[2] < 0 ? 0 : v[2]) << 6 | (uint32_t)(v[3] < 0 ? 0 : v[3]);
		out[o++] = (uint8_t)(w >> 16);
		if (v[2] >= 0)
			out[o++] = (uint8_t)(w >> 8);
		if (v[3] >= 0)
			out[o++] = (uint8_t)w;
	}
	*out_len = o;
	return out;
}

int sup_parse_size(const char *s, uint64_t max, uint64_t *out, sbx_err *err)
{
	char *end;
	errno = 0;
	if (s[0] < '0' || s[0] > '9')
		return sbx_err_set(err, -EINVAL, "%s: not a number", s);
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return sbx_err_set(err, -EINVAL, "%s: not a number", s);
	unsigned shift = 0;
	if (*end == 'K' || *end == 'k')
		shift = 10, end++;
	else if (*end == 'M' || *end == 'm')
		shift = 20, end++;
	else if (*end == 'G' || *end == 'g')
		shift = 30, end++;
	if (*end != '\0')
		return sbx_err_set(err, -EINVAL, "%s: trailing characters", s);
	if (shift && v > (max >> shift))
		return sbx_err_set(err, -EINVAL, "%s: larger than %llu", s, (unsigned long long)max);
	v <<= shift;
	if (v > max)
		return sbx_err_set(err, -EINVAL, "%s: larger than %llu", s, (unsigned long long)max);
	*out = v;
	return 0;
}
