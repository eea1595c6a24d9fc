/* E2B's addressing and credentials. Their SDKs send every envd call to one
 * URL (E2B_SANDBOX_URL) naming the sandbox in E2b-Sandbox-Id and the port
 * in E2b-Sandbox-Port: routed here to /e2b/sandboxes/{id}/envd/..., so
 * the edge's checks (the sandbox is the caller's), the relay (a sandbox
 * on another node) and the routes see the id in the path as for any other
 * route. Their envd credential is the sandbox's envdAccessToken, sent as
 * X-Access-Token: an HMAC-SHA256 of the tenant and the sandbox by this
 * node's key, so it speaks for one sandbox of one tenant, and the edge
 * still checks that the sandbox is that tenant's. */
#include "sup_e2b_int.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_tenants.h"

#define ENVD_PREFIX "/e2b/envd"
#define SANDBOXES "/e2b/sandboxes/"

int sup_e2b_token(const sup_e2b_ctx *x, const char *tenant, const char *id,
		  char out[SUP_E2B_TOKEN_MAX + 1])
{
	char msg[160];
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int ml = 0;
	size_t tl = strlen(tenant);
	int n = snprintf(msg, sizeof(msg), "e2b-envd\n%s\n%s", tenant, id);
	if (n < 0 || (size_t)n >= sizeof(msg) || tl > 64 ||
	    !HMAC(EVP_sha256(), x->access_key, sizeof(x->access_key), (const unsigned char *)msg,
		  (size_t)n, mac, &ml) ||
	    ml != 32)
		return -EINVAL;
	for (unsigned i = 0; i < ml; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
	out[64] = '.';
	memcpy(out + 65, tenant, tl + 1);
	return 0;
}

static bool id_ok(const char *s, size_t n)
{
	return n > 0 && n < SUP_ID_MAX && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") >= n;
}

/* The id in /e2b/sandboxes/{id}/envd... or .../code..., into id:
 * whether the path is one. */
static bool envd_path(const char *p, char id[SUP_ID_MAX])
{
	if (strncmp(p, SANDBOXES, sizeof(SANDBOXES) - 1) != 0)
		return false;
	p += sizeof(SANDBOXES) - 1;
	size_t n = strcspn(p, "/");
	if (!id_ok(p, n) || (strncmp(p + n, "/envd", 5) != 0 && strncmp(p + n, "/code", 5) != 0) ||
	    (p[n + 5] != '/' && p[n + 5] != '\0'))
		return false;
	memcpy(id, p, n);
	id[n] = '\0';
	return true;
}

/* The token's tenant, held, when tok signs (tenant, id): NULL otherwise. */
static const sup_tenant *token_tenant(const sup_e2b_ctx *x, const char *tok, const char *id)
{
	size_t n = strlen(tok);
	char want[SUP_E2B_TOKEN_MAX + 1];
	if (n < 66 || n > SUP_E2B_TOKEN_MAX || tok[64] != '.' || !x->tenants || !*x->tenants)
		return NULL;
	const char *tenant = tok + 65;
	if (sup_e2b_token(x, tenant, id, want) < 0 || strlen(want) != n ||
	    CRYPTO_memcmp(want, tok, n) != 0)
		return NULL;
	const sup_tenant *t = sup_tenants_find(*x->tenants, tenant);
	return t ? sup_tenant_hold(t) : NULL;
}

int sup_e2b_gate(void *ud, const sup_http_in *in, char **path, const sup_tenant **who, sbx_err *err)
{
	sup_e2b_ctx *x = ud;
	const char *p = in->path;
	char id[SUP_ID_MAX];
	size_t pl = sizeof(ENVD_PREFIX) - 1;
	if (strncmp(p, ENVD_PREFIX, pl) == 0 && (p[pl] == '/' || p[pl] == '\0')) {
		const char *sid = sup_http_in_header(in, "E2b-Sandbox-Id");
		const char *port = sup_http_in_header(in, "E2b-Sandbox-Port");
		if (!sid)
			return 0; /* no route: their 404 */
		if (!id_ok(sid, strlen(sid)))
			return sbx_err_set(err, -ENOENT, "no sandbox %.64s", sid);
		bool code = port && strcmp(port, "49999") == 0;
		if (port && !code && strcmp(port, "49983") != 0)
			return sbx_err_set(err, -ENOENT,
					   "port %.8s of sandbox %s: only envd's (49983) and the code "
					   "interpreter's (49999) are served at this URL; a port of the "
					   "sandbox's own is sbx's port proxy",
					   port, sid);
		size_t n = strlen(p) + strlen(sid) + 32;
		if (!(*path = malloc(n)))
			return sbx_err_set(err, -ENOMEM, "out of memory");
		snprintf(*path, n, SANDBOXES "%s/%s%s", sid, code ? "code" : "envd", p + pl);
		p = *path;
	}
	const char *tok = sup_http_in_header(in, "X-Access-Token");
	if (!tok)
		tok = sup_http_in_header(in, "E2B-Traffic-Access-Token");
	if (tok && envd_path(p, id))
		*who = token_tenant(x, tok, id);
	return 0;
}

/* The sbx error's message, or its code. */
static const char *message_of(json_t *sbx_error)
{
	json_t *e = json_object_get(sbx_error, "error");
	const char *m = json_string_value(json_object_get(e, "message"));
	return m ? m : json_string_value(json_object_get(e, "code"));
}


const char *sup_e2b_connect_code(int status)
{
	switch (status) {
	case 400: return "invalid_argument";
	case 401: return "unauthenticated";
	case 403: return "permission_denied";
	case 404: return "not_found";
	case 408: return "deadline_exceeded";
	case 409: return "already_exists";
	case 412: return "failed_precondition";
	case 413: return "resource_exhausted";
	case 415: return "invalid_argument";
	case 429: return "resource_exhausted";
	case 499: return "canceled";
	case 501: return "unimplemented";
	case 502: return "unavailable";
	case 503: return "unavailable";
	case 504: return "deadline_exceeded";
	case 507: return "resource_exhausted";
	default: return status >= 400 && status < 500 ? "invalid_argument" : "internal";
	}
}

json_t *sup_e2b_error(int status, const char *path, json_t *sbx_error)
{
	const char *m = message_of(sbx_error);
	const char *rpc = path ? strstr(path, "/envd/") : NULL;
	/* a Connect call's path is .../envd/<package>.<Service>/<Method> */
	size_t seg = rpc ? strcspn(rpc + 6, "/") : 0;
	if (rpc && memchr(rpc + 6, '.', seg) && rpc[6 + seg] == '/')
		return json_pack("{s:s, s:s}", "code", sup_e2b_connect_code(status), "message",
				 m ? m : "error");
	return json_pack("{s:i, s:s}", "code", status, "message", m ? m : "error");
}
