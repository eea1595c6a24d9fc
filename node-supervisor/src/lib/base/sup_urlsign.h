/* Signed URLs for a sandbox's port: what lets a browser, or a client with
 * no credential header, reach one port of one sandbox until a time. A
 * signature is an HMAC-SHA256 of the sandbox id, the port and the expiry
 * (Unix seconds), keyed by a secret drawn at start: it dies with the
 * supervisor. Owns the secret, the signature and the path form that
 * carries one ("/v1/signed/{id}/{port}/{exp}/{sig}", for clients that
 * append their own path to a URL, as OpenSandbox's do to an endpoint).
 * Where a signature is honoured (the port proxy's gate) and who may mint
 * one is its users' business; the secret never leaves this struct. */
#ifndef SUP_URLSIGN_H
#define SUP_URLSIGN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"

typedef struct sup_urlsign {
	unsigned char secret[32];
} sup_urlsign;

/* A signature: HMAC-SHA256 in lowercase hex. */
#define SUP_URLSIGN_HEX 64
/* The longest a signed URL lives (7 days). */
#define SUP_URLSIGN_MAX_S 604800
/* The path form's prefix; what follows {sig} is the port's own path. */
#define SUP_URLSIGN_PREFIX "/v1/signed/"
/* The longest path form (the prefix, a 40-char id, port, expiry, sig). */
#define SUP_URLSIGN_PATH_MAX 160

/* Draw the secret (getrandom). */
int sup_urlsign_init(sup_urlsign *s, sbx_err *err);
/* The signature of id, port and exp: 0, or -EINVAL (an id too long). */
int sup_urlsign_sign(const sup_urlsign *s, const char *id, uint16_t port, uint64_t exp,
		     char hex[SUP_URLSIGN_HEX + 1]);
/* Whether sig (len bytes) signs id, port and exp, compared in constant
 * time, and exp is not past: 0, or -EPERM saying which. */
int sup_urlsign_check(const sup_urlsign *s, const char *id, uint16_t port, uint64_t exp,
		      const char *sig, size_t len, sbx_err *err);
/* The path form for id, port and exp into buf (SUP_URLSIGN_PATH_MAX):
 * 0, or -EINVAL. */
int sup_urlsign_path(const sup_urlsign *s, const char *id, uint16_t port, uint64_t exp,
		     char buf[SUP_URLSIGN_PATH_MAX], sbx_err *err);
/* Whether path has the path form's shape: its id ([a-z0-9-], 1..40),
 * port (1..65535), exp, sig (not checked here) and *rest, the port's own
 * path after it ("" or "/..."). */
bool sup_urlsign_parse_path(const char *path, char id[48], uint16_t *port, uint64_t *exp,
			    char sig[SUP_URLSIGN_HEX + 1], const char **rest);

#endif
