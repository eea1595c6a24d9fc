/* What lets a browser reach a port: routing by Host ({port}-{id}.D with
 * --ports-domain) and signed URLs (sup_urlsign.h: one port of one sandbox
 * until a time, dying with the supervisor). A signature comes in the query
 * (sbx_exp, sbx_sig) once, then as the cookie the proxy sets for that
 * port's path (or host); or in the path form /v1/signed/{id}/{port}/{exp}/
 * {sig}/..., rewritten here to the port's path, for a client that appends
 * its own path to what it was given (no cookie: the form is the whole
 * route). The edge asks this before authentication (sup_http_cfg.gate); it
 * answers for paths under /v1/sandboxes/{id}/ports/{port} (and the path
 * form) only, and vouches for none that carries a token (the token speaks
 * for itself). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sup_ports_int.h"

void sup_ports_init(sup_ports_ctx *pc, sup_core *core, const char *domain,
		    const struct sup_urlsign *sign)
{
	memset(pc, 0, sizeof(*pc));
	pc->core = core;
	pc->domain = domain;
	pc->sign = sign;
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

/* A proof's parts as found (exp: decimal digits, no more than a uint64
 * holds; sig: the signature's length), copied out; not checked here. */
static bool parts(const char *e, size_t el, const char *s, size_t sl, uint64_t *exp,
		  char sig[SUP_URLSIGN_HEX + 1])
{
	char num[20];
	if (el == 0 || el >= sizeof(num) || strspn(e, "0123456789") < el || sl != SUP_URLSIGN_HEX)
		return false;
	memcpy(num, e, el);
	num[el] = '\0';
	*exp = strtoull(num, NULL, 10);
	memcpy(sig, s, sl);
	sig[sl] = '\0';
	return true;
}

/* The query's proof: its first sbx_exp and sbx_sig (both, or none). */
static bool query_proof(const char *query, bool *both, uint64_t *exp,
			char sig[SUP_URLSIGN_HEX + 1])
{
	const char *e, *s;
	size_t el, sl;
	*both = field(query, '&', SUP_PORTS_Q_EXP, &e, &el) &&
		field(query, '&', SUP_PORTS_Q_SIG, &s, &sl);
	return *both && parts(e, el, s, sl, exp, sig);
}

/* The proof a request carries: sbx_exp and sbx_sig in the query, else the
 * cookie "sbx_port=EXP.SIG". */
static bool proof(const sup_http_in *in, uint64_t *exp, char sig[SUP_URLSIGN_HEX + 1])
{
	const char *e;
	size_t el;
	bool both;
	bool ok = query_proof(in->query, &both, exp, sig);
	if (both) /* the query's, and no cookie beside it */
		return ok;
	if (!field(sup_http_in_header(in, "Cookie"), ';', SUP_PORTS_COOKIE, &e, &el))
		return false;
	const char *dot = memchr(e, '.', el);
	if (!dot)
		return false;
	return parts(e, (size_t)(dot - e), dot + 1, el - (size_t)(dot + 1 - e), exp, sig);
}

bool sup_ports_query_proof(const sup_ports_ctx *pc, const char *query, const char *id,
			   uint16_t port, uint64_t *exp)
{
	char sig[SUP_URLSIGN_HEX + 1];
	bool both;
	sbx_err err;
	return query_proof(query, &both, exp, sig) &&
	       sup_urlsign_check(pc->sign, id, port, *exp, sig, strlen(sig), &err) == 0;
}

/* A token of the tenant's, as the edge reads one (Authorization, or
 * OpenSandbox's header): the request is judged by it, owner check
 * included, never vouched for (a proof must not lend another tenant's
 * token a sandbox: .../url would mint for it). */
static bool has_token(const sup_http_in *in)
{
	return sup_http_in_header(in, "Authorization") || sup_http_in_header(in, "OPEN-SANDBOX-API-KEY");
}

/* The path form: checked whatever else the request carries (it routes
 * nowhere without its proof), then routed as the port's own path. */
static int signed_path(sup_ports_ctx *pc, const sup_http_in *in, char **path, sbx_err *err)
{
	char id[48], sig[SUP_URLSIGN_HEX + 1];
	uint16_t port;
	uint64_t exp;
	const char *rest;
	if (!sup_urlsign_parse_path(in->path, id, &port, &exp, sig, &rest))
		return 0;
	int rc = sup_urlsign_check(pc->sign, id, port, exp, sig, strlen(sig), err);
	if (rc < 0)
		return rc;
	size_t n = strlen(rest) + 80;
	*path = malloc(n);
	if (!*path)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	snprintf(*path, n, "/v1/sandboxes/%s/ports/%u%s", id, (unsigned)port, rest);
	return 1;
}

int sup_ports_gate(void *ud, const sup_http_in *in, char **path, const struct sup_tenant **who,
		   sbx_err *err)
{
	(void)who;
	sup_ports_ctx *pc = ud;
	const char *p = in->path;
	char id[48], sig[SUP_URLSIGN_HEX + 1];
	uint16_t port;
	uint64_t exp;
	if (sup_ports_host(pc, sup_http_in_header(in, "Host"), id, &port)) {
		size_t n = strlen(in->path) + 80;
		*path = malloc(n);
		if (!*path)
			return sbx_err_set(err, -ENOMEM, "out of memory");
		snprintf(*path, n, "/v1/sandboxes/%s/ports/%u%s", id, (unsigned)port, in->path);
		p = *path;
	} else {
		int rc = signed_path(pc, in, path, err);
		if (rc != 0)
			return rc < 0 ? rc : !has_token(in);
	}
	if (has_token(in) || !port_path(p, id, &port) || !proof(in, &exp, sig))
		return 0;
	return sup_urlsign_check(pc->sign, id, port, exp, sig, strlen(sig), err) < 0 ? err->code : 1;
}
