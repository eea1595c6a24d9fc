/* sup_img_digest: see sup_img_digest.h. */
#include "sup_img_digest.h"

#include <errno.h>
#include <string.h>

#include "sup_sha256.h"

_Static_assert(SUP_IMG_HEX_LEN == SUP_SHA256_HEX_LEN, "image digests are sha256");

bool sup_img_is_hex(const char *s)
{
	size_t i = 0;
	for (; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')) || i == SUP_IMG_HEX_LEN)
			return false;
	return i == SUP_IMG_HEX_LEN;
}

int sup_img_digest_parse(const char *what, const char *s, char hex[SUP_IMG_HEX_LEN + 1],
			 sbx_err *err)
{
	const char *colon = s ? strchr(s, ':') : NULL;
	if (!colon)
		return sbx_err_set(err, -EINVAL, "%s: '%.80s' is not a digest", what, s ? s : "(none)");
	if ((size_t)(colon - s) != 6 || strncmp(s, "sha256", 6) != 0)
		return sbx_err_set(err, -ENOTSUP, "%s: digest algorithm of '%.80s' not supported (sha256 only)",
				   what, s);
	if (!sup_img_is_hex(colon + 1))
		return sbx_err_set(err, -EINVAL, "%s: '%.80s' is not a sha256 digest", what, s);
	memcpy(hex, colon + 1, SUP_IMG_HEX_LEN + 1);
	return 0;
}
