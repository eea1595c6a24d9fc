/* The heads a proxied request and its answer carry across: hop-by-hop
 * headers (RFC 9110 7.6.1) end here in both directions, the client's
 * credentials for the supervisor never go inside, and the framing of each
 * side is the side's own (the edge writes the client's, this writes the
 * server's). Pure functions on headers; no I/O. */
#include <errno.h>
#include <event2/buffer.h>
#include <string.h>
#include <strings.h>

#include "sup_ports_int.h"

/* Hop-by-hop everywhere, and what each side's framing owns. */
static const char *const hop[] = {
	"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer", "Transfer-Encoding",
	"Upgrade", "Proxy-Authorization", "Proxy-Authenticate", "Content-Length", NULL,
};

static bool in_list(const char *const *l, const char *name, size_t nl)
{
	for (size_t i = 0; l[i]; i++)
		if (strlen(l[i]) == nl && strncasecmp(l[i], name, nl) == 0)
			return true;
	return false;
}

/* name is one the request's or answer's Connection header names. */
static bool named_by_connection(const char *conn, size_t cl, const char *name, size_t nl)
{
	char tok[64];
	if (!conn || nl >= sizeof(tok))
		return false;
	memcpy(tok, name, nl);
	tok[nl] = '\0';
	return sup_httpin_has_token(conn, cl, tok);
}

/* A Cookie header without the supervisor's own proof (sbx_port): that
 * cookie opens the port from outside, so the server inside never sees it
 * (as Authorization). Nothing left: no header. */
static int put_cookies(struct evbuffer *out, const char *v)
{
	static const char own[] = SUP_PORTS_COOKIE "=";
	bool first = true;
	int rc = 0;
	while (rc >= 0 && *v) {
		v += strspn(v, " \t;");
		size_t l = strcspn(v, ";");
		size_t t = l;
		while (t > 0 && (v[t - 1] == ' ' || v[t - 1] == '\t'))
			t--;
		if (t > 0 && strncmp(v, own, sizeof(own) - 1) != 0) {
			rc = evbuffer_add_printf(out, "%s%.*s", first ? "Cookie: " : "; ", (int)t, v);
			first = false;
		}
		v += l;
	}
	if (rc >= 0 && !first)
		rc = evbuffer_add(out, "\r\n", 2);
	return rc;
}

int sup_pp_request_head(const sup_http_in *in, const char *target, bool upgrade,
			const char *host_as, struct evbuffer *out)
{
	static const char *const drop[] = { "Authorization", "OPEN-SANDBOX-API-KEY", "Expect", "Host",
					    SUP_HTTP_CLUSTER_KEY, SUP_HTTP_RELAY_HOPS,
					    SUP_HTTP_RELAY_FROM, NULL };
	const char *conn = sup_http_in_header(in, "Connection");
	const char *host = sup_http_in_header(in, "Host");
	const char *up = sup_http_in_header(in, "Upgrade");
	size_t cl = conn ? strlen(conn) : 0;
	int rc = evbuffer_add_printf(out, "%s %s HTTP/1.1\r\nHost: %s\r\n", in->method, target,
				     host_as ? host_as : host ? host : "localhost");
	for (size_t i = 0; rc >= 0 && i < in->nhdrs; i++) {
		const char *n = in->hdrs[i].name;
		size_t nl = strlen(n);
		if (in_list(hop, n, nl) || in_list(drop, n, nl) || named_by_connection(conn, cl, n, nl))
			continue;
		if (nl == 6 && strncasecmp(n, "Cookie", 6) == 0) {
			rc = put_cookies(out, in->hdrs[i].value);
			continue;
		}
		rc = evbuffer_add_printf(out, "%s: %s\r\n", n, in->hdrs[i].value);
	}
	if (rc >= 0 && host)
		rc = evbuffer_add_printf(out, "X-Forwarded-Host: %s\r\n", host);
	if (rc >= 0)
		rc = evbuffer_add_printf(out, "X-Forwarded-Proto: http\r\n");
	if (rc >= 0 && in->body_expect == UINT64_MAX)
		rc = evbuffer_add_printf(out, "Transfer-Encoding: chunked\r\n");
	else if (rc >= 0 && (in->body_expect > 0 || !strcmp(in->method, "POST") ||
			     !strcmp(in->method, "PUT") || !strcmp(in->method, "PATCH")))
		rc = evbuffer_add_printf(out, "Content-Length: %llu\r\n",
					 (unsigned long long)in->body_expect);
	if (rc >= 0 && upgrade && up)
		rc = evbuffer_add_printf(out, "Connection: Upgrade\r\nUpgrade: %s\r\n\r\n", up);
	else if (rc >= 0)
		rc = evbuffer_add_printf(out, "Connection: close\r\n\r\n");
	return rc < 0 ? -ENOMEM : 0;
}

bool sup_pp_pass_response_header(const sup_httpin_head *h, const sup_httpin_hdr *hd)
{
	static const char *const own[] = { "Date", NULL };
	const char *conn = NULL;
	size_t cl = 0;
	for (size_t i = 0; i < h->nhdrs; i++) {
		if (h->hdrs[i].name_len == 10 && strncasecmp(h->hdrs[i].name, "Connection", 10) == 0) {
			conn = h->hdrs[i].value;
			cl = h->hdrs[i].value_len;
			break;
		}
	}
	return !in_list(hop, hd->name, hd->name_len) && !in_list(own, hd->name, hd->name_len) &&
	       !named_by_connection(conn, cl, hd->name, hd->name_len);
}
