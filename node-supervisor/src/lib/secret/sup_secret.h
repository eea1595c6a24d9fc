/* A secret's rules and its sealing: what a name may be, how large a value
 * may grow, and the authenticated encryption (AES-256-GCM, libcrypto's
 * EVP) that keeps a value at rest. The node's key lives in a file of its
 * own, outside the state folder (sup_secret_key_load): a copy of the
 * catalog without it is ciphertext. A sealed value is bound to its tenant
 * and name (both are the cipher's associated data), so a row moved to
 * another tenant or name no longer opens.
 *
 * Owns the sealed form (version byte, nonce, tag, ciphertext) and the key
 * file's use. It must not store anything, log a value, or put one into an
 * error message: errors name the tenant and the secret, never the bytes. */
#ifndef SUP_SECRET_H
#define SUP_SECRET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"

#define SUP_SECRET_NAME_MAX 64      /* [A-Za-z0-9_.-], starting with a letter or digit */
#define SUP_SECRET_VALUE_MAX 16384  /* bytes of a value: keys, tokens, a PEM key */
#define SUP_SECRETS_PER_TENANT 256  /* secrets one tenant keeps */
#define SUP_SECRET_KEY_LEN 32       /* AES-256 */
/* Sealed: version (1) + nonce (12) + tag (16) + the value's bytes. */
#define SUP_SECRET_SEAL_OVERHEAD (1 + 12 + 16)

bool sup_secret_name_ok(const char *name, size_t len);

/* A value in memory, p[len] a NUL (p holds len + 1 bytes): wiped when
 * freed (OPENSSL_clear_free). */
typedef struct sup_secret_buf {
	uint8_t *p;
	size_t len;
} sup_secret_buf;

void sup_secret_buf_free(sup_secret_buf *b);

/* The node's key from path, made (O_EXCL, mode 0600, 32 random bytes as
 * hex) when there is none; a file readable by group or others, or holding
 * anything else, is refused. *made tells a new key. */
int sup_secret_key_load(const char *path, uint8_t key[SUP_SECRET_KEY_LEN], bool *made,
			sbx_err *err);

/* Seal value v[0..n) of tenant's secret name into *out (malloc'd, n +
 * SUP_SECRET_SEAL_OVERHEAD bytes) with a fresh random nonce. */
int sup_secret_seal(const uint8_t key[SUP_SECRET_KEY_LEN], const char *tenant, const char *name,
		    const uint8_t *v, size_t n, uint8_t **out, size_t *out_len, sbx_err *err);
/* Open what sup_secret_seal made for the same tenant and name. -EBADMSG
 * when it does not authenticate (another key, another tenant or name, a
 * changed byte), -EPROTO for a version this build does not read. */
int sup_secret_open(const uint8_t key[SUP_SECRET_KEY_LEN], const char *tenant, const char *name,
		    const uint8_t *sealed, size_t len, sup_secret_buf *out, sbx_err *err);

#endif
