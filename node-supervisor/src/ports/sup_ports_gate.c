/* What lets a browser reach a port: routing by Host ({port}-{id}.D with
 * --ports-domain) and signed URLs. A signature is an HMAC-SHA256 of the
 * sandbox id, the port and the expiry, keyed by a secret drawn at start:
 * it names one port of one sandbox until a time, and dies with the
 * supervisor. It comes in the query (sbx_exp, sbx_sig) once, then as the
 * cookie the proxy sets for that port's path (or host). The edge asks this
 * before authentication (sup_http_cfg.gate); it answers for paths under
 * /v1/sandboxes/{id}/ports/{port} only, and never when a token is given
 * (the token speaks for itself). */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "sup_ports_int.h"

int sup_ports_init(sup_ports_ctx *pc, sup_core *core, const char *domain, sbx_err *err)
{
	memset(pc, 0, sizeof(*pc));
	pc->core = core;
	pc->domain = domain;
	if (getrandom(pc->secret, sizeof(pc->secret), 0) != (ssize_t)sizeof(pc->secret))
		return sbx_err_sys(err, -errno, "ports: the signing secret");
	return 0;
}

int sup_ports_sign(const sup_ports_ctx *pc, const char *id, uint16_t port, uint64_t exp,
		   char hex[SUP_PORTS_SIG_HEX + 1])
{
	char msg[96];
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;
	int ml = snprintf(msg, sizeof(msg), "%s\n%u\n%llu", id, (unsigned)port,
			  (unsigned long long)exp);
	if (ml < 0 || (size_t)ml >= sizeof(msg) ||
	    !HMAC(EVP_sha256(), pc->secret, sizeof(pc->secret), (const unsigned char *)msg,
		  (size_t)ml, md, &n) || n != SUP_PORTS_SIG_HEX / 2)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++)
		snprintf(hex + 2 * i, 3, "%02x", md[i]);
	return 0;
}

bool sup_ports_host(const sup_ports_ctx *pc, const char *host, char id[48], uint16_t *port)
{
	if (!pc->domain || !host)
		return false;
	size_t hl = strcspn(host, ":"), dl = strlen(pc->domain);
	size_t digits = strspn(host, "0123456789");
	if (digits == 0 || digits > 5 || host[digits] != '-' || hl < digits + 3 + dl ||
	    host[hl - dl - 1] != '.' || strncasecmp(host + hl - dl, pc->domain, dl) != 0)
		return false;
	unsigned long v = strtoul(host, NULL, 10);
	const char *is = host + digits + 1;
	size_t il = (size_t)(host + hl - dl - 1 - is);
	if (v < 1 || v > 65535 || il == 0 || il > 40 ||
	    strspn(is, "abcdefghijklmnopqrstuvwxyz0123456789-") < il)
		return false;
	memcpy(id, is, il);
	id[il] = '\0';
	*port = (uint16_t)v;
	return true;
}

/* /v1/sandboxes/{id}/ports/{port} and below: its id and port. */
static bool port_path(const char *p, char id[48], uint16_t *port)
{
	static const char pre[] = "/v1/sandboxes/";
	if (strncmp(p, pre, sizeof(pre) - 1) != 0)
		return false;
	p += sizeof(pre) - 1;
	size_t il = strcspn(p, "/");
	if (il == 0 || il > 40 || strncmp(p + il, "/ports/", 7) != 0)
		return false;
	memcpy(id, p, il);
	id[il] = '\0';
	p += il + 7;
	size_t d = strspn(p, "0123456789");
	unsigned long v = d && d <= 5 ? strtoul(p, NULL, 10) : 0;
	if (v < 1 || v > 65535 || (p[d] != '\0' && p[d] != '/'))
		return false;
	*port = (uint16_t)v;
	return true;
}

/* key=value in a query or a cookie list (sep '&' or ';'), value kept raw. */
static bool field(const char *s, char sep, const char *key, const char **v, size_t *vl)
{
	size_t kl = strlen(key);
	while (s && *s) {
		while (*s == ' ' || *s == sep)
			s++;
		size_t n = strcspn(s, sep == '&' ? "&" : ";");
		if (n > kl && strncmp(s, key, kl) == 0 && s[kl] == '=') {
			*v = s + kl + 1;
			*vl = n - kl - 1;
			return true;
		}
		s += n;
	}
	return false;
}

/* The proof a request carries: sbx_exp and sbx_sig in the query, else the
 * cookie "sbx_port=EXP.SIG". */
static bool proof(const sup_http_in *in, uint64_t *exp, char sig[SUP_PORTS_SIG_HEX + 1])
{
	const char *e, *s;
	size_t el, sl;
	char num[24];
	if (field(in->query, '&', SUP_PORTS_Q_EXP, &e, &el) &&
	    field(in->query, '&', SUP_PORTS_Q_SIG, &s, &sl)) {
		/* both from the query */
	} else if (field(sup_http_in_header(in, "Cookie"), ';', SUP_PORTS_COOKIE, &e, &el)) {
		const char *dot = memchr(e, '.', el);
		if (!dot)
			return false;
		s = dot + 1;
		sl = el - (size_t)(s - e);
		el = (size_t)(dot - e);
	} else {
		return false;
	}
	if (el == 0 || el >= sizeof(num) || strspn(e, "0123456789") < el || sl != SUP_PORTS_SIG_HEX)
		return false;
	memcpy(num, e, el);
	num[el] = '\0';
	*exp = strtoull(num, NULL, 10);
	memcpy(sig, s, sl);
	sig[sl] = '\0';
	return true;
}

/* A token of the tenant's, as the edge reads one (Authorization, or
 * OpenSandbox's header): the request is judged by it, owner check
 * included, never vouched for (a proof must not lend another tenant's
 * token a sandbox: .../url would mint for it). */
static bool has_token(const sup_http_in *in)
{
	return sup_http_in_header(in, "Authorization") || sup_http_in_header(in, "OPEN-SANDBOX-API-KEY");
}

int sup_ports_gate(void *ud, const sup_http_in *in, char **path, sbx_err *err)
{
	sup_ports_ctx *pc = ud;
	const char *p = in->path;
	char id[48], want[SUP_PORTS_SIG_HEX + 1], sig[SUP_PORTS_SIG_HEX + 1];
	uint16_t port;
	uint64_t exp;
	if (sup_ports_host(pc, sup_http_in_header(in, "Host"), id, &port)) {
		size_t n = strlen(in->path) + 80;
		*path = malloc(n);
		if (!*path)
			return sbx_err_set(err, -ENOMEM, "out of memory");
		snprintf(*path, n, "/v1/sandboxes/%s/ports/%u%s", id, (unsigned)port, in->path);
		p = *path;
	}
	if (has_token(in) || !port_path(p, id, &port) || !proof(in, &exp, sig))
		return 0;
	if (sup_ports_sign(pc, id, port, exp, want) < 0 ||
	    CRYPTO_memcmp(want, sig, SUP_PORTS_SIG_HEX) != 0)
		return sbx_err_set(err, -EPERM, "the signed URL is not one of this port's");
	if ((uint64_t)time(NULL) > exp)
		return sbx_err_set(err, -EPERM, "the signed URL expired");
	return 1;
}
