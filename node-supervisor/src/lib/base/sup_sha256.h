/* SHA-256 from libcrypto's EVP, the supervisor's one crypto library: over
 * a stream (image blobs and layers, snapshot archives) and at once (token
 * hashes). The algorithm is fetched from the provider once per process:
 * EVP_sha256() makes libcrypto 3 fetch it again for every digest (a lookup
 * under locks). Owns hashing only; it must not read files or decide what a
 * digest names. */
#ifndef SUP_SHA256_H
#define SUP_SHA256_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"

#define SUP_SHA256_LEN 32
#define SUP_SHA256_HEX_LEN (2 * SUP_SHA256_LEN)

/* A digest under way. Zeroed (or after sup_sha256_free) it holds nothing,
 * so a caller may declare it with SUP_AUTO_SHA256 before init. */
typedef struct sup_sha256 {
	struct evp_md_ctx_st *ctx;
	bool failed; /* an update failed: final reports it */
} sup_sha256;

/* Start a digest: 0, or -ENOMEM / -EIO with err. */
int sup_sha256_init(sup_sha256 *s, sbx_err *err);
/* Hash len more bytes. A failure is kept for sup_sha256_final, so a
 * reader's callback need not check each call. */
void sup_sha256_update(sup_sha256 *s, const void *data, size_t len);
/* The digest of what was hashed, as bytes or lowercase hex; the context is
 * released either way (init again to reuse it). */
int sup_sha256_final(sup_sha256 *s, uint8_t out[SUP_SHA256_LEN], sbx_err *err);
int sup_sha256_final_hex(sup_sha256 *s, char hex[SUP_SHA256_HEX_LEN + 1], sbx_err *err);
/* Release; safe on a zeroed or released one. */
void sup_sha256_free(sup_sha256 *s);
#define SUP_AUTO_SHA256 __attribute__((cleanup(sup_sha256_free)))

/* The digest of one buffer. */
int sup_sha256_digest(const void *data, size_t len, uint8_t out[SUP_SHA256_LEN], sbx_err *err);

#endif
