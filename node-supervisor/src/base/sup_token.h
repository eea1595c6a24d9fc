/* API token: load or create <state_dir>/token, and compare a presented
 * token in constant time. Owns the token file format (64 lowercase hex
 * chars, mode 0600, optional trailing newline). It must not log the token. */
#ifndef SUP_TOKEN_H
#define SUP_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

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

/* Check an Authorization header value ("Bearer <token>", scheme
 * case-insensitive). NULL header: false. */
bool sup_token_check_bearer(const char *expected, const char *header);

#endif
