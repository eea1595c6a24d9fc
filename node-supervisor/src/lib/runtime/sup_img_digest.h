/* Content digests of image blobs and layers: the "sha256:<64 lowercase
 * hex>" form OCI and Docker write (the hashing itself is sup_sha256's,
 * libcrypto). Owns the digest string rules only; it must not read files
 * or decide what a digest names. */
#ifndef SUP_IMG_DIGEST_H
#define SUP_IMG_DIGEST_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/err.h"

#define SUP_IMG_HEX_LEN 64
#define SUP_IMG_DIGEST_LEN (7 + SUP_IMG_HEX_LEN) /* "sha256:" + hex */

/* Is s exactly 64 lowercase hex digits? */
bool sup_img_is_hex(const char *s);
/* Take "sha256:<hex>" (what: for the message) into hex. Other algorithms
 * are -ENOTSUP, anything else -EINVAL. */
int sup_img_digest_parse(const char *what, const char *s, char hex[SUP_IMG_HEX_LEN + 1],
			 sbx_err *err);

#endif
