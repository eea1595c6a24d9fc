/* The DevTools port (SUP_PORTS_CDP, sbx/browser's Chromium): the
 * discovery answers (/json/version, /json, /json/list, /json/new) name
 * the browser's and pages' WebSocket URLs by the Host Chromium saw, which
 * is its own address (Chromium refuses any other Host than an IP or
 * localhost, so the proxy sends it 127.0.0.1:9222): here they are
 * rewritten to the way the client came in (its Host, the path prefix it
 * reached the port by, a signed URL's proof), so a client outside follows
 * them through the proxy. And GET /v1/sandboxes/{id}/browser, made of
 * /json/version the same way. Pure functions of the bytes; no I/O. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sup_ports_int.h"

/* url's path after "ws://host", on base, with query after it. */
static char *ws_on(const char *url, const char *base, const char *query)
{
	if (strncmp(url, "ws://", 5) != 0 && strncmp(url, "wss://", 6) != 0)
		return NULL;
	const char *path = strchr(url + 5 + (url[2] == 's'), '/');
	if (!path)
		path = "/";
	char *out = NULL;
	bool q = query && *query;
	if (asprintf(&out, "%s%s%s%s", base, path, q ? (strchr(path, '?') ? "&" : "?") : "",
		     q ? query : "") < 0)
		return NULL;
	return out;
}

/* devtoolsFrontendUrl's "ws=HOST/devtools/..." on the way in (wss= over
 * TLS): base without its scheme. */
static char *frontend_on(const char *url, const char *base)
{
	const char *at = strstr(url, "?ws=");
	if (!at)
		at = strstr(url, "&ws=");
	const char *b = strstr(base, "://");
	if (!at || !b)
		return NULL;
	const char *host = at + 4, *path = strchr(host, '/');
	if (!path)
		return NULL;
	bool tls = strncmp(base, "wss", 3) == 0;
	char *out = NULL;
	if (asprintf(&out, "%.*s%s=%s%s", (int)(at + 1 - url), url, tls ? "wss" : "ws", b + 3, path) < 0)
		return NULL;
	return out;
}

static int rewrite_one(json_t *o, const char *base, const char *query)
{
	json_t *wsv = json_object_get(o, "webSocketDebuggerUrl");
	/* a URL that is no string is not passed on as it is either */
	if (!json_is_object(o) || (wsv && !json_is_string(wsv)))
		return -EINVAL;
	const char *ws = json_string_value(wsv);
	const char *fe = json_string_value(json_object_get(o, "devtoolsFrontendUrl"));
	if (ws) {
		char *n = ws_on(ws, base, query);
		if (!n || json_object_set_new(o, "webSocketDebuggerUrl", json_string(n)) < 0) {
			free(n);
			return -EINVAL;
		}
		free(n);
	}
	if (fe) {
		char *n = frontend_on(fe, base);
		if (n)
			json_object_set_new(o, "devtoolsFrontendUrl", json_string(n));
		free(n);
	}
	return 0;
}

json_t *sup_ports_cdp_rewrite(const char *body, size_t len, const char *base, const char *query)
{
	json_error_t je;
	json_t *j = json_loadb(body, len, 0, &je);
	int rc = j ? 0 : -EINVAL;
	if (json_is_array(j)) {
		size_t i;
		json_t *v;
		json_array_foreach(j, i, v) {
			if (rc == 0)
				rc = rewrite_one(v, base, query);
		}
	} else if (j) {
		rc = rewrite_one(j, base, query);
	}
	if (rc < 0) {
		json_decref(j);
		return NULL;
	}
	return j;
}

bool sup_ports_cdp_discovery(const char *rest)
{
	return strncmp(rest, "/json", 5) == 0 && (rest[5] == '\0' || rest[5] == '/');
}

json_t *sup_ports_browser_answer(const char *version, size_t len, const sup_ports_where *w,
				 const char *signed_prefix, uint64_t exp)
{
	char base[512], sbase[512];
	snprintf(base, sizeof(base), "%s://%s%s", w->tls ? "wss" : "ws", w->host, w->prefix);
	snprintf(sbase, sizeof(sbase), "%s://%s%s", w->tls ? "wss" : "ws", w->host, signed_prefix);
	json_t *v = sup_ports_cdp_rewrite(version, len, base, NULL);
	json_t *sv = sup_ports_cdp_rewrite(version, len, sbase, NULL);
	const char *ws = json_string_value(json_object_get(v, "webSocketDebuggerUrl"));
	const char *sws = json_string_value(json_object_get(sv, "webSocketDebuggerUrl"));
	json_t *out = NULL;
	if (json_is_object(v) && ws && sws) {
		char cdp[512], scdp[512];
		snprintf(cdp, sizeof(cdp), "%s://%s%s", w->tls ? "https" : "http", w->host, w->prefix);
		snprintf(scdp, sizeof(scdp), "%s://%s%s", w->tls ? "https" : "http", w->host,
			 signed_prefix);
		const char *browser = json_string_value(json_object_get(v, "Browser"));
		const char *proto = json_string_value(json_object_get(v, "Protocol-Version"));
		out = json_pack("{s:i, s:s, s:s, s:s?, s:s?, s:{s:s, s:s, s:I}}", "port", SUP_PORTS_CDP,
				"cdp_url", cdp, "ws_url", ws, "browser", browser, "protocol_version",
				proto, "signed", "cdp_url", scdp, "ws_url", sws, "expires_at",
				(json_int_t)exp);
	}
	json_decref(v);
	json_decref(sv);
	return out;
}
