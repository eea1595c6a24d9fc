/* A snapshot's manifest (sup_snap_manifest) under libFuzzer: an object
 * store shared by nodes holds it, so its bytes are not trusted. Input: the
 * manifest. Checks, besides the sanitizers: a refusal is -EBADE with a
 * message; what parses names the snapshot asked for, has strings that end
 * within their fields and at most SUP_VOL_MAX_MOUNTS volumes, and renders
 * back into a manifest that parses to the same row. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sup_snap_manifest.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

#define ID "snap-0123456789abcdef"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size > SUP_SNAP_MANIFEST_MAX)
		return 0;
	static sup_catalog_snap row, again;
	sbx_err e = { 0 };
	int rc = sup_snap_manifest_parse((const char *)data, size, ID, &row, &e);
	if (rc < 0) {
		CHECK(rc == -EBADE && e.msg[0]);
		return 0;
	}
	CHECK(strcmp(row.id, ID) == 0 && row.location[0] == '\0' && row.nvols <= SUP_VOL_MAX_MOUNTS);
	CHECK(memchr(row.name, '\0', sizeof(row.name)) && memchr(row.tenant, '\0', sizeof(row.tenant)) &&
	      memchr(row.source, '\0', sizeof(row.source)) && memchr(row.image, '\0', sizeof(row.image)) &&
	      memchr(row.digest, '\0', sizeof(row.digest)) && memchr(row.sha256, '\0', sizeof(row.sha256)));
	char *out = NULL;
	size_t len = 0;
	CHECK(sup_snap_manifest_render(&row, &out, &len, &e) == 0);
	CHECK(sup_snap_manifest_parse(out, len, ID, &again, &e) == 0);
	CHECK(memcmp(&row, &again, sizeof(row)) == 0);
	free(out);
	return 0;
}
