#include "sup_secret.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>

#include "sup_token.h"

#define SEAL_VERSION 1
#define NONCE_LEN 12
#define TAG_LEN 16

bool sup_secret_name_ok(const char *name, size_t len)
{
	if (len == 0 || len > SUP_SECRET_NAME_MAX)
		return false;
	for (size_t i = 0; i < len; i++) {
		char ch = name[i];
		bool alnum = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			     (ch >= '0' && ch <= '9');
		if (!alnum && (i == 0 || (ch != '_' && ch != '-' && ch != '.')))
			return false;
	}
	return true;
}

void sup_secret_buf_free(sup_secret_buf *b)
{
	if (b->p)
		OPENSSL_clear_free(b->p, b->len + 1);
	b->p = NULL;
	b->len = 0;
}

int sup_secret_key_load(const char *path, uint8_t key[SUP_SECRET_KEY_LEN], bool *made,
			sbx_err *err)
{
	char *hex = NULL;
	_Static_assert(SUP_TOKEN_HEX_LEN == 2 * SUP_SECRET_KEY_LEN, "a key is a token's length");
	/* the token file's format and checks: 64 hex characters, 0600, O_EXCL */
	int rc = sup_token_load_or_create(path, &hex, made, err);
	if (rc < 0)
		return sbx_err_wrap(err, "secrets key");
	size_t got = 0;
	int ok = OPENSSL_hexstr2buf_ex(key, SUP_SECRET_KEY_LEN, &got, hex, '\0');
	OPENSSL_cleanse(hex, strlen(hex));
	free(hex);
	if (ok != 1 || got != SUP_SECRET_KEY_LEN) {
		OPENSSL_cleanse(key, SUP_SECRET_KEY_LEN);
		return sbx_err_set(err, -EINVAL, "secrets key %s: not %d hex bytes", path,
				   SUP_SECRET_KEY_LEN);
	}
	return 0;
}

/* Tenant and name, each with its NUL, as the associated data: no two
 * (tenant, name) pairs give the same bytes. */
static int add_aad(EVP_CIPHER_CTX *x, const char *tenant, const char *name)
{
	int n;
	return EVP_CipherUpdate(x, NULL, &n, (const uint8_t *)tenant, (int)strlen(tenant) + 1) == 1 &&
			       EVP_CipherUpdate(x, NULL, &n, (const uint8_t *)name,
						(int)strlen(name) + 1) == 1
		       ? 0
		       : -1;
}

int sup_secret_seal(const uint8_t key[SUP_SECRET_KEY_LEN], const char *tenant, const char *name,
		    const uint8_t *v, size_t n, uint8_t **out, size_t *out_len, sbx_err *err)
{
	*out = NULL;
	if (n > SUP_SECRET_VALUE_MAX)
		return sbx_err_set(err, -E2BIG, "secret %s: over %d bytes", name, SUP_SECRET_VALUE_MAX);
	size_t len = SUP_SECRET_SEAL_OVERHEAD + n;
	uint8_t *s = malloc(len);
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	int rc = 0;
	if (!s || !x) {
		rc = sbx_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	s[0] = SEAL_VERSION;
	uint8_t *nonce = s + 1, *tag = s + 1 + NONCE_LEN, *ct = s + SUP_SECRET_SEAL_OVERHEAD;
	int got, fin;
	if (RAND_bytes(nonce, NONCE_LEN) != 1 ||
	    EVP_EncryptInit_ex(x, EVP_aes_256_gcm(), NULL, key, nonce) != 1 ||
	    add_aad(x, tenant, name) < 0 || EVP_EncryptUpdate(x, ct, &got, v, (int)n) != 1 ||
	    EVP_EncryptFinal_ex(x, ct + got, &fin) != 1 ||
	    EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, TAG_LEN, tag) != 1) {
		rc = sbx_err_set(err, -EIO, "secret %s: sealing failed", name);
		goto out;
	}
	*out = s;
	*out_len = len;
	s = NULL;
out:
	EVP_CIPHER_CTX_free(x);
	free(s);
	return rc;
}

int sup_secret_open(const uint8_t key[SUP_SECRET_KEY_LEN], const char *tenant, const char *name,
		    const uint8_t *sealed, size_t len, sup_secret_buf *out, sbx_err *err)
{
	out->p = NULL;
	out->len = 0;
	if (len < SUP_SECRET_SEAL_OVERHEAD || len > SUP_SECRET_SEAL_OVERHEAD + SUP_SECRET_VALUE_MAX)
		return sbx_err_set(err, -EBADMSG, "secret %s: its sealed form is cut or too long", name);
	if (sealed[0] != SEAL_VERSION)
		return sbx_err_set(err, -EPROTO, "secret %s: sealed by a newer supervisor (form %u)",
				   name, sealed[0]);
	size_t n = len - SUP_SECRET_SEAL_OVERHEAD;
	/* one byte more: an empty value still has a buffer to wipe */
	sup_secret_buf b = { OPENSSL_malloc(n + 1), n };
	EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
	int rc = 0;
	if (!b.p || !x) {
		rc = sbx_err_set(err, -ENOMEM, "out of memory");
		goto out;
	}
	const uint8_t *nonce = sealed + 1, *tag = sealed + 1 + NONCE_LEN,
		      *ct = sealed + SUP_SECRET_SEAL_OVERHEAD;
	int got, fin;
	if (EVP_DecryptInit_ex(x, EVP_aes_256_gcm(), NULL, key, nonce) != 1 ||
	    add_aad(x, tenant, name) < 0 || EVP_DecryptUpdate(x, b.p, &got, ct, (int)n) != 1 ||
	    EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_SET_TAG, TAG_LEN, (void *)tag) != 1) {
		rc = sbx_err_set(err, -EIO, "secret %s: opening failed", name);
		goto out;
	}
	if (EVP_DecryptFinal_ex(x, b.p + got, &fin) != 1) {
		rc = sbx_err_set(err, -EBADMSG,
				 "secret %s of tenant %s does not open with this node's key (sealed "
				 "with another --secrets-key, or changed)",
				 name, tenant);
		goto out;
	}
	b.p[n] = 0;
	*out = b;
	b.p = NULL;
out:
	EVP_CIPHER_CTX_free(x);
	if (b.p)
		OPENSSL_clear_free(b.p, n + 1);
	return rc;
}
