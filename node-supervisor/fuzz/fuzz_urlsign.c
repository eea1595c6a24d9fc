/* The signed port URL's path form (sup_urlsign) under libFuzzer: a
 * client's path parsed as the port proxy's gate parses it. Input: the
 * path. Checks, besides the sanitizers: what parses has an id of
 * [a-z0-9-]{1,40}, a port of 1..65535, a signature of 64 lowercase hex
 * digits and a rest that is the path's tail ("" or "/..."); the path form
 * made for the same id, port and expiry parses back to them; the check
 * takes a signature only when it is the one made for them, and the one
 * made for them only while it has not expired. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sup_urlsign.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static sup_urlsign key;
	static int ready;
	sbx_err e;
	if (!ready) {
		CHECK(sup_urlsign_init(&key, &e) == 0);
		ready = 1;
	}
	if (size > 4096)
		return 0;
	char *path = malloc(size + 1);
	CHECK(path);
	memcpy(path, data, size);
	path[size] = '\0';
	char id[48], sig[SUP_URLSIGN_HEX + 1];
	uint16_t port;
	uint64_t exp;
	const char *rest;
	if (!sup_urlsign_parse_path(path, id, &port, &exp, sig, &rest)) {
		free(path);
		return 0;
	}
	size_t il = strlen(id);
	CHECK(il >= 1 && il <= 40 && strspn(id, "abcdefghijklmnopqrstuvwxyz0123456789-") == il);
	CHECK(port >= 1 && strlen(sig) == SUP_URLSIGN_HEX &&
	      strspn(sig, "0123456789abcdef") == SUP_URLSIGN_HEX);
	CHECK(rest >= path && rest <= path + strlen(path) && (rest[0] == '\0' || rest[0] == '/'));

	char want[SUP_URLSIGN_HEX + 1], canon[SUP_URLSIGN_PATH_MAX];
	CHECK(sup_urlsign_sign(&key, id, port, exp, want) == 0);
	int rc = sup_urlsign_check(&key, id, port, exp, sig, strlen(sig), &e);
	CHECK(rc == 0 || rc == -EPERM);
	if (rc == 0)
		CHECK(strcmp(sig, want) == 0);
	if (sup_urlsign_path(&key, id, port, exp, canon, &e) == 0) {
		char id2[48], sig2[SUP_URLSIGN_HEX + 1];
		uint16_t port2;
		uint64_t exp2;
		CHECK(sup_urlsign_parse_path(canon, id2, &port2, &exp2, sig2, &rest));
		CHECK(strcmp(id, id2) == 0 && port == port2 && exp == exp2 && *rest == '\0');
		CHECK(strcmp(sig2, want) == 0);
		rc = sup_urlsign_check(&key, id2, port2, exp2, sig2, strlen(sig2), &e);
		CHECK(rc == 0 ? exp2 >= (uint64_t)time(NULL) : exp2 <= (uint64_t)time(NULL) + 1);
	}
	free(path);
	return 0;
}
