#include "sup_urlsign.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

int sup_urlsign_init(sup_urlsign *s, sbx_err *err)
{
	if (getrandom(s->secret, sizeof(s->secret), 0) != (ssize_t)sizeof(s->secret))
		return sbx_err_sys(err, -errno, "the URL signing secret");
	return 0;
}

int sup_urlsign_sign(const sup_urlsign *s, const char *id, uint16_t port, uint64_t exp,
		     char hex[SUP_URLSIGN_HEX + 1])
{
	char msg[96];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	int ml = snprintf(msg, sizeof(msg), "%s\n%u\n%llu", id, (unsigned)port,
			  (unsigned long long)exp);
	if (ml < 0 || (size_t)ml >= sizeof(msg) ||
	    !HMAC(EVP_sha256(), s->secret, sizeof(s->secret), (const unsigned char *)msg,
		  (size_t)ml, md, &n) || n != SUP_URLSIGN_HEX / 2)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

int sup_urlsign_check(const sup_urlsign *s, const char *id, uint16_t port, uint64_t exp,
		      const char *sig, size_t len, sbx_err *err)
{
	char want[SUP_URLSIGN_HEX + 1];
	if (len != SUP_URLSIGN_HEX || sup_urlsign_sign(s, id, port, exp, want) < 0 ||
	    CRYPTO_memcmp(want, sig, SUP_URLSIGN_HEX) != 0)
		return sbx_err_set(err, -EPERM, "the signed URL is not one of this port's");
	if ((uint64_t)time(NULL) > exp)
		return sbx_err_set(err, -EPERM, "the signed URL expired");
	return 0;
}

int sup_urlsign_path(const sup_urlsign *s, const char *id, uint16_t port, uint64_t exp,
		     char buf[SUP_URLSIGN_PATH_MAX], sbx_err *err)
{
	char sig[SUP_URLSIGN_HEX + 1];
	if (sup_urlsign_sign(s, id, port, exp, sig) < 0)
		return sbx_err_set(err, -EINVAL, "cannot sign for sandbox %.48s", id);
	int n = snprintf(buf, SUP_URLSIGN_PATH_MAX, SUP_URLSIGN_PREFIX "%s/%u/%llu/%s", id,
			 (unsigned)port, (unsigned long long)exp, sig);
	if (n < 0 || n >= SUP_URLSIGN_PATH_MAX)
		return sbx_err_set(err, -EINVAL, "cannot sign for sandbox %.48s", id);
	return 0;
}

/* A segment of decimal digits, one spelling (no leading zero), at most
 * max digits: its value, *p past it. */
static bool number(const char **p, size_t max, uint64_t *out)
{
	size_t d = strspn(*p, "0123456789");
	if (d == 0 || d > max || (d > 1 && **p == '0'))
		return false;
	*out = strtoull(*p, NULL, 10);
	*p += d;
	return true;
}

bool sup_urlsign_parse_path(const char *path, char id[48], uint16_t *port, uint64_t *exp,
			    char sig[SUP_URLSIGN_HEX + 1], const char **rest)
{
	const char *p = path;
	uint64_t v = 0;
	if (strncmp(p, SUP_URLSIGN_PREFIX, sizeof(SUP_URLSIGN_PREFIX) - 1) != 0)
		return false;
	p += sizeof(SUP_URLSIGN_PREFIX) - 1;
	size_t il = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789-");
	if (il == 0 || il > 40 || p[il] != '/')
		return false;
	memcpy(id, p, il);
	id[il] = '\0';
	p += il + 1;
	if (!number(&p, 5, &v) || v < 1 || v > 65535 || *p++ != '/')
		return false;
	*port = (uint16_t)v;
	/* 19 digits: no uint64 overflow, far past any expiry */
	if (!number(&p, 19, exp) || *p++ != '/')
		return false;
	if (strspn(p, "0123456789abcdef") != SUP_URLSIGN_HEX ||
	    (p[SUP_URLSIGN_HEX] != '\0' && p[SUP_URLSIGN_HEX] != '/'))
		return false;
	memcpy(sig, p, SUP_URLSIGN_HEX);
	sig[SUP_URLSIGN_HEX] = '\0';
	*rest = p + SUP_URLSIGN_HEX;
	return true;
}
