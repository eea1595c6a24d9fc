/* API token: load or create <state_dir>/token, compare a presented token
 * in constant time, and the stored form of a token (its SHA-256, as the
 * tenants file keeps it). Owns the token file format (64 lowercase hex
 * chars, mode 0600, optional trailing newline) and the hash's text form
 * ("sha256:" and 64 lowercase hex). It must not log a token. */
#ifndef SUP_TOKEN_H
#define SUP_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"

#define SUP_TOKEN_HEX_LEN 64 /* 32 random bytes */

/* Fill buf (at least 2*nbytes+1) with nbytes from getrandom as hex. */
int sup_random_hex(char *buf, size_t nbytes, sbx_err *err);

/* Read the token at path, or create it (O_EXCL, 0600) with 32 random bytes
 * when absent. *out is malloc'd. *created tells which happened. A file that
 * is readable by group/others or holds something else is an error. */
int sup_token_load_or_create(const char *path, char **out, bool *created, sbx_err *err);

/* Constant-time in the content of both; leaks only whether lengths match. */
bool sup_token_equal(const char *expected, const char *given, size_t given_len);

/* The token of an Authorization header value ("Bearer <token>", scheme
 * case-insensitive, blanks around the token dropped): true with *tok and
 * *len, false for no header or another scheme. */
bool sup_token_bearer(const char *header, const char **tok, size_t *len);

/* Check an Authorization header value ("Bearer <token>", scheme
 * case-insensitive). NULL header: false. */
bool sup_token_check_bearer(const char *expected, const char *header);

/* A token's stored form: SHA-256 of its bytes (libcrypto). A hash, not the
 * token, is what a tenants file holds, so reading the file gives no
 * access. */
#define SUP_TOKEN_HASH_LEN 32
#define SUP_TOKEN_HASH_PREFIX "sha256:"
#define SUP_TOKEN_HASH_TEXT_LEN (sizeof(SUP_TOKEN_HASH_PREFIX) - 1 + 2 * SUP_TOKEN_HASH_LEN)
int sup_token_hash(const char *token, size_t len, uint8_t out[SUP_TOKEN_HASH_LEN], sbx_err *err);
/* "sha256:<64 hex>" of token into out (SUP_TOKEN_HASH_TEXT_LEN + 1 bytes). */
int sup_token_hash_text(const char *token, size_t len, char *out, sbx_err *err);
/* The text form back into bytes: 0, or -EINVAL for anything else (upper
 * case hex included: one spelling per hash). */
int sup_token_hash_parse(const char *text, size_t len, uint8_t out[SUP_TOKEN_HASH_LEN]);
/* Constant time in the bytes compared. */
bool sup_token_hash_equal(const uint8_t a[SUP_TOKEN_HASH_LEN], const uint8_t b[SUP_TOKEN_HASH_LEN]);

#endif
