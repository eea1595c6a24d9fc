/* The port proxy's head rules (sup_ports_head.c): what of a client's
 * request goes inside, what of a server's answer comes out. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <event2/buffer.h>

#include "sup_ports_int.h"

static char *head_of(const sup_http_in *in, const char *target, bool upgrade)
{
	struct evbuffer *b = evbuffer_new();
	assert_int_equal(sup_pp_request_head(in, target, upgrade, NULL, b), 0);
	size_t n = evbuffer_get_length(b);
	char *s = malloc(n + 1);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	evbuffer_free(b);
	return s;
}

static void test_request_head(void **state)
{
	(void)state;
	const sup_http_hdr hdrs[] = {
		{ "Host", "h:1" },
		{ "Authorization", "Bearer secret" },
		{ "open-sandbox-api-key", "secret" },
		{ "Connection", "X-Gone, keep-alive" },
		{ "X-Gone", "1" },
		{ "Keep-Alive", "timeout=5" },
		{ "TE", "trailers" },
		{ "Transfer-Encoding", "chunked" },
		{ "Expect", "100-continue" },
		{ "Proxy-Authorization", "Basic x" },
		{ "Cookie", "a=b" },
		{ "Upgrade", "websocket" },
	};
	sup_http_in in = { .method = "POST", .hdrs = hdrs, .nhdrs = sizeof(hdrs) / sizeof(hdrs[0]),
			   .body_expect = UINT64_MAX };
	char *s = head_of(&in, "/a?b=c", false);
	assert_string_equal(s, "POST /a?b=c HTTP/1.1\r\nHost: h:1\r\nCookie: a=b\r\n"
			       "X-Forwarded-Host: h:1\r\nX-Forwarded-Proto: http\r\n"
			       "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
	free(s);
	/* A bodyless GET that upgrades: Upgrade goes on, no length. */
	const sup_http_hdr up[] = { { "Connection", "Upgrade" }, { "Upgrade", "websocket" },
				    { "Sec-WebSocket-Key", "k" } };
	sup_http_in g = { .method = "GET", .hdrs = up, .nhdrs = 3 };
	s = head_of(&g, "/", true);
	assert_string_equal(s, "GET / HTTP/1.1\r\nHost: localhost\r\nSec-WebSocket-Key: k\r\n"
			       "X-Forwarded-Proto: http\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
	free(s);
	/* A POST without a body says so. */
	sup_http_in p = { .method = "POST" };
	s = head_of(&p, "/", false);
	assert_non_null(strstr(s, "Content-Length: 0\r\n"));
	free(s);
}

/* The proof cookie opens the port from outside: it never goes inside;
 * the page's own cookies do, in their order. */
static void test_proof_cookie_stays_out(void **state)
{
	(void)state;
	const sup_http_hdr only[] = { { "Cookie", "sbx_port=123.abc" } };
	sup_http_in a = { .method = "GET", .hdrs = only, .nhdrs = 1 };
	char *s = head_of(&a, "/", false);
	assert_null(strstr(s, "Cookie"));
	assert_null(strstr(s, "sbx_port"));
	free(s);
	const sup_http_hdr mixed[] = { { "Cookie", "a=1; sbx_port=123.abc;  b=2 ;sbx_portx=3" } };
	sup_http_in b = { .method = "GET", .hdrs = mixed, .nhdrs = 1 };
	s = head_of(&b, "/", false);
	assert_non_null(strstr(s, "\r\nCookie: a=1; b=2; sbx_portx=3\r\n"));
	assert_null(strstr(s, "sbx_port="));
	free(s);
}

static void test_response_headers(void **state)
{
	(void)state;
	static const char r[] = "HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\n"
				"Date: x\r\nContent-Length: 3\r\nKeep-Alive: 1\r\nSet-Cookie: a=b\r\n"
				"Transfer-Encoding: chunked\r\nX-Ok: 1\r\n\r\n";
	sup_httpin_head *h = malloc(sizeof(*h));
	assert_int_equal(sup_httpin_parse_response(r, sizeof(r) - 1, h), 0);
	char passed[256] = "";
	for (size_t i = 0; i < h->nhdrs; i++)
		if (sup_pp_pass_response_header(h, &h->hdrs[i]))
			strncat(passed, h->hdrs[i].name, h->hdrs[i].name_len);
	assert_string_equal(passed, "Set-CookieX-Ok");
	free(h);
	assert_true(sup_httpin_has_token("a, Upgrade", 10, "upgrade"));
	assert_false(sup_httpin_has_token("upgraded", 8, "upgrade"));
}

static void test_host(void **state)
{
	(void)state;
	sup_ports_ctx pc = { .domain = "sbx.example" };
	char id[48];
	uint16_t port = 0;
	assert_true(sup_ports_host(&pc, "8000-sb-1a2b.sbx.example", id, &port));
	assert_string_equal(id, "sb-1a2b");
	assert_int_equal(port, 8000);
	assert_true(sup_ports_host(&pc, "1-x.SBX.example:7070", id, &port));
	assert_string_equal(id, "x");
	assert_int_equal(port, 1);
	assert_false(sup_ports_host(&pc, "0-x.sbx.example", id, &port));
	assert_false(sup_ports_host(&pc, "65536-x.sbx.example", id, &port));
	assert_false(sup_ports_host(&pc, "80-.sbx.example", id, &port));
	assert_false(sup_ports_host(&pc, "80-x.sbx.example.evil", id, &port));
	assert_false(sup_ports_host(&pc, "80-x.evilsbx.example", id, &port));
	assert_false(sup_ports_host(&pc, "80-x_y.sbx.example", id, &port));
	assert_false(sup_ports_host(&pc, "sbx.example", id, &port));
	pc.domain = NULL;
	assert_false(sup_ports_host(&pc, "8000-sb-1a2b.sbx.example", id, &port));
}

static int gate_of(sup_ports_ctx *pc, const char *path, const char *query, const char *auth)
{
	sup_http_hdr h[2] = { { "Host", "127.0.0.1" }, { "Authorization", auth } };
	sup_http_in in = { .method = "GET", .path = path, .query = query, .hdrs = h,
			   .nhdrs = auth ? 2 : 1 };
	char *vp = NULL;
	sbx_err err;
	int rc = sup_ports_gate(pc, &in, &vp, NULL, &err);
	free(vp);
	return rc;
}

static void test_gate(void **state)
{
	(void)state;
	sup_ports_ctx pc;
	sup_urlsign us, other_us;
	sbx_err err;
	char sig[SUP_URLSIGN_HEX + 1], q[160];
	assert_int_equal(sup_urlsign_init(&us, &err), 0);
	sup_ports_init(&pc, NULL, NULL, &us);
	unsigned long long exp = (unsigned long long)time(NULL) + 60;
	assert_int_equal(sup_urlsign_sign(&us, "sb-1", 8000, exp, sig), 0);
	snprintf(q, sizeof(q), "a=1&sbx_exp=%llu&sbx_sig=%s", exp, sig);
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-1/ports/8000/x", q, NULL), 1);
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-1/ports/8000", q, NULL), 1);
	/* Another port, another sandbox, a path outside the port: no. */
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-1/ports/8001/x", q, NULL), -EPERM);
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-2/ports/8000/x", q, NULL), -EPERM);
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-1/ports/80000/x", q, NULL), 0);
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-1/files", q, NULL), 0);
	/* A bearer token speaks for itself; no proof, nothing to say. */
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-1/ports/8000/x", q, "Bearer t"), 0);
	/* OpenSandbox's key header is a token too: a proof lends it no
	 * sandbox (vouched, its .../url would mint for another's port) */
	sup_http_hdr hk[2] = { { "Host", "127.0.0.1" }, { "OPEN-SANDBOX-API-KEY", "t" } };
	sup_http_in kin = { .method = "GET", .path = "/v1/sandboxes/sb-1/ports/8000/url", .query = q,
			    .hdrs = hk, .nhdrs = 2 };
	char *kvp = NULL;
	assert_int_equal(sup_ports_gate(&pc, &kin, &kvp, NULL, &err), 0);
	assert_null(kvp);
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-1/ports/8000/x", "a=1", NULL), 0);
	/* The cookie's expiry is the proof's, the first of each key, checked
	 * for that sandbox and port. */
	uint64_t kept = 0;
	snprintf(q, sizeof(q), "sbx_exp=%llu&sbx_sig=%s&sbx_exp=%llu", exp, sig, exp + 99999);
	assert_true(sup_ports_query_proof(&pc, q, "sb-1", 8000, &kept));
	assert_int_equal(kept, exp);
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-1/ports/8000/x", q, NULL), 1);
	assert_false(sup_ports_query_proof(&pc, q, "sb-1", 8001, &kept));
	snprintf(q, sizeof(q), "sbx_exp=%llu&sbx_sig=%s", exp + 99999, sig);
	assert_false(sup_ports_query_proof(&pc, q, "sb-1", 8000, &kept));
	assert_false(sup_ports_query_proof(&pc, NULL, "sb-1", 8000, &kept));
	/* The expiry is signed: moving it breaks the signature. */
	snprintf(q, sizeof(q), "sbx_exp=%llu&sbx_sig=%s", exp + 1, sig);
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-1/ports/8000/x", q, NULL), -EPERM);
	/* Expired. */
	assert_int_equal(sup_urlsign_sign(&us, "sb-1", 8000, exp - 120, sig), 0);
	snprintf(q, sizeof(q), "sbx_exp=%llu&sbx_sig=%s", exp - 120, sig);
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-1/ports/8000/x", q, NULL), -EPERM);
	/* Another supervisor's secret. */
	assert_int_equal(sup_urlsign_init(&other_us, &err), 0);
	assert_int_equal(sup_urlsign_sign(&other_us, "sb-1", 8000, exp, sig), 0);
	snprintf(q, sizeof(q), "sbx_exp=%llu&sbx_sig=%s", exp, sig);
	assert_int_equal(gate_of(&pc, "/v1/sandboxes/sb-1/ports/8000/x", q, NULL), -EPERM);
}

/* The path form: the port's own path after it, a token beside it or not;
 * anything else in its place is refused, never routed. */
static void test_gate_path(void **state)
{
	(void)state;
	sup_ports_ctx pc;
	sup_urlsign us;
	sbx_err err;
	char base[SUP_URLSIGN_PATH_MAX], p[SUP_URLSIGN_PATH_MAX + 64], *vp = NULL;
	assert_int_equal(sup_urlsign_init(&us, &err), 0);
	sup_ports_init(&pc, NULL, NULL, &us);
	uint64_t exp = (uint64_t)time(NULL) + 60;
	assert_int_equal(sup_urlsign_path(&us, "sb-1", 8000, exp, base, &err), 0);
	sup_http_hdr h[1] = { { "Host", "127.0.0.1" } };
	sup_http_in in = { .method = "GET", .path = base, .query = "a=1", .hdrs = h, .nhdrs = 1 };
	assert_int_equal(sup_ports_gate(&pc, &in, &vp, NULL, &err), 1);
	assert_string_equal(vp, "/v1/sandboxes/sb-1/ports/8000");
	free(vp);
	vp = NULL;
	snprintf(p, sizeof(p), "%s/a/b", base);
	in.path = p;
	assert_int_equal(sup_ports_gate(&pc, &in, &vp, NULL, &err), 1);
	assert_string_equal(vp, "/v1/sandboxes/sb-1/ports/8000/a/b");
	free(vp);
	vp = NULL;
	/* a token beside it: routed, checked, but judged by the token */
	sup_http_hdr ht[2] = { { "Host", "127.0.0.1" }, { "OPEN-SANDBOX-API-KEY", "k" } };
	in.hdrs = ht;
	in.nhdrs = 2;
	assert_int_equal(sup_ports_gate(&pc, &in, &vp, NULL, &err), 0);
	assert_string_equal(vp, "/v1/sandboxes/sb-1/ports/8000/a/b");
	free(vp);
	vp = NULL;
	/* another port under the same signature */
	snprintf(p, sizeof(p), "/v1/signed/sb-1/8001/%llu%s", (unsigned long long)exp,
		 strrchr(base, '/'));
	assert_int_equal(sup_ports_gate(&pc, &in, &vp, NULL, &err), -EPERM);
	assert_null(vp);
	/* the expiry moved */
	snprintf(p, sizeof(p), "/v1/signed/sb-1/8000/%llu%s", (unsigned long long)exp + 1,
		 strrchr(base, '/'));
	assert_int_equal(sup_ports_gate(&pc, &in, &vp, NULL, &err), -EPERM);
	/* one hex digit changed */
	snprintf(p, sizeof(p), "%s", base);
	p[strlen(p) - 1] = p[strlen(p) - 1] == '0' ? '1' : '0';
	assert_int_equal(sup_ports_gate(&pc, &in, &vp, NULL, &err), -EPERM);
	assert_null(vp);
	/* expired */
	assert_int_equal(sup_urlsign_path(&us, "sb-1", 8000, exp - 120, p, &err), 0);
	assert_int_equal(sup_ports_gate(&pc, &in, &vp, NULL, &err), -EPERM);
	assert_string_equal(err.msg, "the signed URL expired");
	/* not the form's shape: no proof, routed as given (nowhere) */
	const char *odd[] = { "/v1/signed/sb-1/8000", "/v1/signed/SB-1/8000/1/x",
			      "/v1/signed/sb-1/08000/1/", "/v1/signed/sb-1/0/1/" };
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		in.path = odd[i];
		assert_int_equal(sup_ports_gate(&pc, &in, &vp, NULL, &err), 0);
		assert_null(vp);
	}
	snprintf(p, sizeof(p), "%sx", base);
	in.path = p;
	assert_int_equal(sup_ports_gate(&pc, &in, &vp, NULL, &err), 0);
	assert_null(vp);
}

/* The DevTools discovery answers: each webSocketDebuggerUrl (and the
 * frontend's ws=) on the way the client came in, a proof's query after
 * it; anything but JSON objects refused. */
static void test_cdp_rewrite(void **state)
{
	(void)state;
	assert_true(sup_ports_cdp_discovery("/json"));
	assert_true(sup_ports_cdp_discovery("/json/version"));
	assert_true(sup_ports_cdp_discovery("/json/list/"));
	assert_false(sup_ports_cdp_discovery("/jsonx"));
	assert_false(sup_ports_cdp_discovery("/devtools/browser/x"));
	assert_false(sup_ports_cdp_discovery(""));
	const char *list = "[{\"id\":\"P1\",\"webSocketDebuggerUrl\":\"ws://127.0.0.1:9222/devtools/page/P1\","
			   "\"devtoolsFrontendUrl\":\"/devtools/inspector.html?ws=127.0.0.1:9222/devtools/page/P1\"}]";
	const char *base = "ws://h:7070/v1/sandboxes/sb-1/ports/9222";
	json_t *j = sup_ports_cdp_rewrite(list, strlen(list), base, NULL);
	assert_non_null(j);
	json_t *o = json_array_get(j, 0);
	assert_string_equal(json_string_value(json_object_get(o, "webSocketDebuggerUrl")),
			    "ws://h:7070/v1/sandboxes/sb-1/ports/9222/devtools/page/P1");
	assert_string_equal(json_string_value(json_object_get(o, "devtoolsFrontendUrl")),
			    "/devtools/inspector.html?ws=h:7070/v1/sandboxes/sb-1/ports/9222/devtools/page/P1");
	assert_string_equal(json_string_value(json_object_get(o, "id")), "P1");
	json_decref(j);
	/* over TLS with a proof in the query: wss, the proof after the path */
	const char *ver = "{\"Browser\":\"Chrome/1\",\"webSocketDebuggerUrl\":\"ws://127.0.0.1:9222/devtools/browser/B\"}";
	j = sup_ports_cdp_rewrite(ver, strlen(ver), "wss://h", "sbx_exp=1&sbx_sig=ab");
	assert_non_null(j);
	assert_string_equal(json_string_value(json_object_get(j, "webSocketDebuggerUrl")),
			    "wss://h/devtools/browser/B?sbx_exp=1&sbx_sig=ab");
	json_decref(j);
	/* not JSON, not objects, a URL that is not ws: refused */
	const char *bad[] = { "", "not json", "[1]", "{\"webSocketDebuggerUrl\":\"http://x/y\"}",
			      "[{}, 2]", "{\"webSocketDebuggerUrl\":7}" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_null(sup_ports_cdp_rewrite(bad[i], strlen(bad[i]), base, NULL));
	/* an object without URLs (an empty /json list) is kept as it is */
	j = sup_ports_cdp_rewrite("[]", 2, base, NULL);
	assert_non_null(j);
	assert_int_equal(json_array_size(j), 0);
	json_decref(j);
}

/* GET .../browser's answer from /json/version. */
static void test_browser_answer(void **state)
{
	(void)state;
	const char *ver = "{\"Browser\":\"Chrome/156\",\"Protocol-Version\":\"1.3\","
			  "\"webSocketDebuggerUrl\":\"ws://127.0.0.1:9222/devtools/browser/B\"}";
	sup_ports_where w = { "h:7070", "/v1/sandboxes/sb-1/ports/9222", false };
	json_t *j = sup_ports_browser_answer(ver, strlen(ver), &w, "/v1/signed/sb-1/9222/99/SIG", 99);
	assert_non_null(j);
	assert_int_equal(json_integer_value(json_object_get(j, "port")), 9222);
	assert_string_equal(json_string_value(json_object_get(j, "cdp_url")),
			    "http://h:7070/v1/sandboxes/sb-1/ports/9222");
	assert_string_equal(json_string_value(json_object_get(j, "ws_url")),
			    "ws://h:7070/v1/sandboxes/sb-1/ports/9222/devtools/browser/B");
	assert_string_equal(json_string_value(json_object_get(j, "browser")), "Chrome/156");
	json_t *sg = json_object_get(j, "signed");
	assert_string_equal(json_string_value(json_object_get(sg, "cdp_url")),
			    "http://h:7070/v1/signed/sb-1/9222/99/SIG");
	assert_string_equal(json_string_value(json_object_get(sg, "ws_url")),
			    "ws://h:7070/v1/signed/sb-1/9222/99/SIG/devtools/browser/B");
	assert_int_equal(json_integer_value(json_object_get(sg, "expires_at")), 99);
	json_decref(j);
	w.tls = true;
	j = sup_ports_browser_answer(ver, strlen(ver), &w, "/v1/signed/sb-1/9222/99/SIG", 99);
	assert_string_equal(json_string_value(json_object_get(j, "cdp_url")),
			    "https://h:7070/v1/sandboxes/sb-1/ports/9222");
	assert_string_equal(json_string_value(json_object_get(j, "ws_url")),
			    "wss://h:7070/v1/sandboxes/sb-1/ports/9222/devtools/browser/B");
	json_decref(j);
	/* no browser URL in it: no answer */
	assert_null(sup_ports_browser_answer("{\"Browser\":\"x\"}", 14, &w, "/p", 1));
}

/* Requests to the DevTools port carry Chromium's own Host; the client's
 * goes on as X-Forwarded-Host. */
static void test_cdp_host(void **state)
{
	(void)state;
	const sup_http_hdr hdrs[] = { { "Host", "sbx.example:7070" } };
	sup_http_in in = { .method = "GET", .hdrs = hdrs, .nhdrs = 1 };
	struct evbuffer *b = evbuffer_new();
	assert_int_equal(sup_pp_request_head(&in, "/json/version", false, SUP_PORTS_CDP_HOST, b), 0);
	size_t n = evbuffer_get_length(b);
	char *s = calloc(1, n + 1);
	evbuffer_remove(b, s, n);
	assert_string_equal(s, "GET /json/version HTTP/1.1\r\nHost: 127.0.0.1:9222\r\n"
			       "X-Forwarded-Host: sbx.example:7070\r\nX-Forwarded-Proto: http\r\n"
			       "Connection: close\r\n\r\n");
	free(s);
	evbuffer_free(b);
}

/* The browser route's parser, through its row: expires' bounds. */
static void test_browser_row(void **state)
{
	(void)state;
	const sup_http_route *row = NULL;
	for (size_t i = 0; i < sup_ports_family.nroutes; i++)
		if (strcmp(sup_ports_family.routes[i].pattern, "/v1/sandboxes/{id}/browser") == 0)
			row = &sup_ports_family.routes[i];
	assert_non_null(row);
	assert_string_equal(row->method, "GET");
	sup_ports_ctx pc = { 0 };
	const char *queries[] = { NULL, "expires=1", "expires=604800", "expires=0", "expires=604801",
				  "expires=x", "other=1" };
	const int want[] = { 0, 0, 0, -EINVAL, -EINVAL, -EINVAL, -EINVAL };
	for (size_t i = 0; i < sizeof(queries) / sizeof(queries[0]); i++) {
		sup_pp *pp = calloc(1, sizeof(*pp));
		sup_http_in in = { .method = "GET", .path = "/v1/sandboxes/sb-1/browser", .id = "sb-1",
				   .query = queries[i] };
		sbx_err err;
		sbx_err_clear(&err);
		assert_int_equal(row->parse(&in, &pc, pp, &err), want[i]);
		if (want[i] == 0) {
			assert_int_equal(pp->port, SUP_PORTS_CDP);
			assert_string_equal(pp->target, "/json/version");
			assert_string_equal(pp->prefix, "/v1/sandboxes/sb-1/ports/9222");
			assert_int_equal(pp->expires, queries[i] ? strtoull(queries[i] + 8, NULL, 10) : 600);
		}
		sup_ports_family.release(pp);
		free(pp);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_head),
		cmocka_unit_test(test_proof_cookie_stays_out),
		cmocka_unit_test(test_response_headers),
		cmocka_unit_test(test_host),
		cmocka_unit_test(test_gate),
		cmocka_unit_test(test_gate_path),
		cmocka_unit_test(test_cdp_rewrite),
		cmocka_unit_test(test_browser_answer),
		cmocka_unit_test(test_cdp_host),
		cmocka_unit_test(test_browser_row),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
