/* Text helpers for rendering guest bytes and times into JSON: UTF-8
 * validation and repair, base64 decoding (sup_b64 encodes), RFC 3339,
 * signal names; and sizes as the flags and requests write them ("512M").
 * Pure functions, no I/O, every output bounded by its input. */
#ifndef SUP_TEXT_H
#define SUP_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "sbx/err.h"
#include "sup_b64.h" /* the encoder */

/* True if p[0..n) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). */
bool sup_utf8_valid(const uint8_t *p, size_t n);

/* Copy p[0..n) replacing each maximal invalid subsequence with U+FFFD.
 * Returns a malloc'd buffer (NUL-terminated; may contain NUL bytes inside)
 * and its length in *out_len; NULL on allocation failure. */
char *sup_utf8_repair(const uint8_t *p, size_t n, size_t *out_len);

/* Strict standard base64 (padding required, no whitespace). malloc'd
 * bytes, or NULL: *bad_at is the offset of the first bad character (n for
 * a bad length), SIZE_MAX when out of memory. */
uint8_t *sup_base64_decode(const char *s, size_t n, size_t *out_len, size_t *bad_at);

/* "2026-11-30T11:16:06Z" (UTC, second precision). buf >= 21 bytes. */
void sup_rfc3339(time_t t, char *buf, size_t size);

/* "KILL", "TERM", "RTMIN+3"... into buf; false for a number that is not a
 * signal on this system (buf then holds the number as text). */
bool sup_signal_name(int sig, char *buf, size_t size);

/* Decimal with optional K/M/G suffix (powers of 1024), at most max:
 * 0, or -EINVAL naming s. */
int sup_parse_size(const char *s, uint64_t max, uint64_t *out, sbx_err *err);

#endif
