/* Base64 encoding (standard alphabet, padded) of guest bytes for JSON and
 * streamed replies. Owns the encoder only: decoding stays in sup_text.
 * Streamed output goes through here at the rate of the stream (about 1 GiB
 * per second), so on x86-64 CPUs with SSSE3 a vector loop does the bulk;
 * the scalar loop gives the same bytes everywhere else. Pure functions, no
 * allocation in sup_base64_encode_into, which runs per streamed frame. */
#ifndef SUP_B64_H
#define SUP_B64_H

#include <stddef.h>
#include <stdint.h>

/* The encoded length of n bytes. */
#define SUP_BASE64_LEN(n) (((n) + 2) / 3 * 4)

/* Standard base64 with padding; malloc'd, NUL-terminated; NULL on failure. */
char *sup_base64_encode(const uint8_t *p, size_t n, size_t *out_len);
/* The same into out, which has room for SUP_BASE64_LEN(n) bytes (no NUL);
 * returns the length written. */
size_t sup_base64_encode_into(const uint8_t *p, size_t n, char *out);
/* The portable loop alone (tests compare it with the vector loop). */
size_t sup_base64_encode_scalar(const uint8_t *p, size_t n, char *out);

#endif
