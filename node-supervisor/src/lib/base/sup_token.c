#include "sup_token.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_sha256.h"

int sup_random_hex(char *buf, size_t nbytes, sbx_err *err)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[64];
	if (nbytes > sizeof(raw))
		return sbx_err_set(err, -EINVAL, "random: %zu bytes is too many", nbytes);
	size_t got = 0;
	while (got < nbytes) {
		ssize_t n = getrandom(raw + got, nbytes - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return sbx_err_sys(err, -errno, "getrandom");
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < nbytes; i++) {
		buf[2 * i] = hex[raw[i] >> 4];
		buf[2 * i + 1] = hex[raw[i] & 15];
	}
	buf[2 * nbytes] = '\0';
	return 0;
}

static bool is_token_text(const char *s, size_t len)
{
	if (len != SUP_TOKEN_HEX_LEN)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

static int read_token(int fd, const char *path, char **out, sbx_err *err)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return sbx_err_sys(err, -errno, "stat %s", path);
	if (!S_ISREG(st.st_mode))
		return sbx_err_set(err, -EINVAL, "%s is not a regular file", path);
	if (st.st_mode & 077)
		return sbx_err_set(err, -EPERM, "%s is readable by others (mode %o): chmod 600 it",
				   path, (unsigned)(st.st_mode & 0777));
	char buf[SUP_TOKEN_HEX_LEN + 2];
	size_t len = 0;
	for (;;) {
		ssize_t n = read(fd, buf + len, sizeof(buf) - len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return sbx_err_sys(err, -errno, "read %s", path);
		}
		if (n == 0)
			break;
		len += (size_t)n;
		if (len == sizeof(buf))
			return sbx_err_set(err, -EINVAL, "%s: longer than a token", path);
	}
	if (len > 0 && buf[len - 1] == '\n')
		len--;
	if (!is_token_text(buf, len))
		return sbx_err_set(err, -EINVAL, "%s: not a token (want %d hex characters)", path,
				   SUP_TOKEN_HEX_LEN);
	*out = strndup(buf, len);
	if (!*out)
		return sbx_err_sys(err, -ENOMEM, "token");
	return 0;
}

int sup_token_load_or_create(const char *path, char **out, bool *created, sbx_err *err)
{
	*created = false;
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0)
		return read_token(fd, path, out, err);
	if (errno != ENOENT)
		return sbx_err_sys(err, -errno, "open %s", path);

	char tok[SUP_TOKEN_HEX_LEN + 2];
	if (sup_random_hex(tok, SUP_TOKEN_HEX_LEN / 2, err) < 0)
		return sbx_err_wrap(err, "make token");
	/* Write to a temporary name and link it in, so a crash never leaves a
	 * half-written token and two starting supervisors agree on one. */
	char tmp[4096];
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= sizeof(tmp))
		return sbx_err_set(err, -ENAMETOOLONG, "token path %s", path);
	SBX_AUTO_CLOSE int tfd = mkostemp(tmp, O_CLOEXEC);
	if (tfd < 0)
		return sbx_err_sys(err, -errno, "create %s", tmp);
	int rc = 0;
	size_t len = SUP_TOKEN_HEX_LEN;
	tok[len++] = '\n';
	if (fchmod(tfd, 0600) < 0)
		rc = sbx_err_sys(err, -errno, "chmod %s", tmp);
	else if (write(tfd, tok, len) != (ssize_t)len)
		rc = sbx_err_sys(err, errno ? -errno : -EIO, "write %s", tmp);
	else if (fsync(tfd) < 0)
		rc = sbx_err_sys(err, -errno, "fsync %s", tmp);
	else if (link(tmp, path) < 0) {
		if (errno == EEXIST) {
			/* Another start won the race: use its token. */
			unlink(tmp);
			SBX_AUTO_CLOSE int rfd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
			if (rfd < 0)
				return sbx_err_sys(err, -errno, "open %s", path);
			return read_token(rfd, path, out, err);
		}
		rc = sbx_err_sys(err, -errno, "link %s", path);
	}
	unlink(tmp);
	if (rc < 0)
		return rc;
	*out = strndup(tok, SUP_TOKEN_HEX_LEN);
	if (!*out)
		return sbx_err_sys(err, -ENOMEM, "token");
	*created = true;
	return 0;
}

bool sup_token_equal(const char *expected, const char *given, size_t given_len)
{
	size_t elen = strlen(expected);
	volatile unsigned char diff = (unsigned char)(elen != given_len);
	/* Always walk the expected token's length so timing depends on it only. */
	for (size_t i = 0; i < elen; i++) {
		unsigned char g = i < given_len ? (unsigned char)given[i] : 0;
		diff |= (unsigned char)((unsigned char)expected[i] ^ g);
	}
	return diff == 0;
}

bool sup_token_bearer(const char *header, const char **tok, size_t *len)
{
	if (!header || strncasecmp(header, "Bearer ", 7) != 0)
		return false;
	const char *t = header + 7;
	while (*t == ' ')
		t++;
	size_t n = strlen(t);
	while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t'))
		n--;
	*tok = t;
	*len = n;
	return true;
}

bool sup_token_check_bearer(const char *expected, const char *header)
{
	const char *t;
	size_t len;
	return sup_token_bearer(header, &t, &len) && sup_token_equal(expected, t, len);
}

_Static_assert(SUP_TOKEN_HASH_LEN == SUP_SHA256_LEN, "a token's hash is its SHA-256");

int sup_token_hash(const char *token, size_t len, uint8_t out[SUP_TOKEN_HASH_LEN], sbx_err *err)
{
	return sup_sha256_digest(token, len, out, err);
}

static const char hexdig[] = "0123456789abcdef";

int sup_token_hash_text(const char *token, size_t len, char *out, sbx_err *err)
{
	uint8_t h[SUP_TOKEN_HASH_LEN];
	int rc = sup_token_hash(token, len, h, err);
	if (rc < 0)
		return rc;
	size_t o = sizeof(SUP_TOKEN_HASH_PREFIX) - 1;
	memcpy(out, SUP_TOKEN_HASH_PREFIX, o);
	for (size_t i = 0; i < SUP_TOKEN_HASH_LEN; i++) {
		out[o++] = hexdig[h[i] >> 4];
		out[o++] = hexdig[h[i] & 15];
	}
	out[o] = '\0';
	return 0;
}

static int hexval(char c)
{
	const char *p = c ? strchr(hexdig, c) : NULL;
	return p ? (int)(p - hexdig) : -1;
}

int sup_token_hash_parse(const char *text, size_t len, uint8_t out[SUP_TOKEN_HASH_LEN])
{
	size_t pl = sizeof(SUP_TOKEN_HASH_PREFIX) - 1;
	if (len != SUP_TOKEN_HASH_TEXT_LEN || memcmp(text, SUP_TOKEN_HASH_PREFIX, pl) != 0)
		return -EINVAL;
	for (size_t i = 0; i < SUP_TOKEN_HASH_LEN; i++) {
		int hi = hexval(text[pl + 2 * i]), lo = hexval(text[pl + 2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		out[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}

bool sup_token_hash_equal(const uint8_t a[SUP_TOKEN_HASH_LEN], const uint8_t b[SUP_TOKEN_HASH_LEN])
{
	return CRYPTO_memcmp(a, b, SUP_TOKEN_HASH_LEN) == 0;
}
