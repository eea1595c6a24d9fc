/* sup_sha256: see sup_sha256.h. */
#include "sup_sha256.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <openssl/evp.h>

static EVP_MD *sha256_md;

static void fetch_sha256(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
}

static const EVP_MD *md(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, fetch_sha256);
	return sha256_md ? sha256_md : EVP_sha256();
}

int sup_sha256_init(sup_sha256 *s, sbx_err *err)
{
	s->failed = false;
	s->ctx = EVP_MD_CTX_new();
	if (!s->ctx)
		return sbx_err_set(err, -ENOMEM, "sha256: out of memory");
	if (EVP_DigestInit_ex(s->ctx, md(), NULL) != 1) {
		sup_sha256_free(s);
		return sbx_err_set(err, -EIO, "sha256: libcrypto failed to start a digest");
	}
	return 0;
}

void sup_sha256_update(sup_sha256 *s, const void *data, size_t len)
{
	if (!s->failed && len && EVP_DigestUpdate(s->ctx, data, len) != 1)
		s->failed = true;
}

int sup_sha256_final(sup_sha256 *s, uint8_t out[SUP_SHA256_LEN], sbx_err *err)
{
	unsigned int n = 0;
	bool ok = !s->failed && EVP_DigestFinal_ex(s->ctx, out, &n) == 1 && n == SUP_SHA256_LEN;
	sup_sha256_free(s);
	return ok ? 0 : sbx_err_set(err, -EIO, "sha256: libcrypto failed");
}

int sup_sha256_final_hex(sup_sha256 *s, char hex[SUP_SHA256_HEX_LEN + 1], sbx_err *err)
{
	static const char digits[] = "0123456789abcdef";
	uint8_t d[SUP_SHA256_LEN] = { 0 }; /* the analyzer cannot see libcrypto fill it */
	int r = sup_sha256_final(s, d, err);
	if (r < 0)
		return r;
	for (size_t i = 0; i < sizeof(d); i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[SUP_SHA256_HEX_LEN] = '\0';
	return 0;
}

void sup_sha256_free(sup_sha256 *s)
{
	EVP_MD_CTX_free(s->ctx);
	s->ctx = NULL;
}

int sup_sha256_digest(const void *data, size_t len, uint8_t out[SUP_SHA256_LEN], sbx_err *err)
{
	unsigned int n = 0;
	if (EVP_Digest(data, len, out, &n, md(), NULL) != 1 || n != SUP_SHA256_LEN)
		return sbx_err_set(err, -EIO, "sha256: libcrypto failed");
	return 0;
}
