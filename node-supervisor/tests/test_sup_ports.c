/* The port proxy's head rules (sup_ports_head.c): what of a client's
 * request goes inside, what of a server's answer comes out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <event2/buffer.h>

#include "sup_ports_int.h"

static char *head_of(const sup_http_in *in, const char *target, bool upgrade)
{
	struct evbuffer *b = evbuffer_new();
	assert_int_equal(sup_pp_request_head(in, target, upgrade, b), 0);
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
	assert_true(sup_pp_has_token("a, Upgrade", 10, "upgrade"));
	assert_false(sup_pp_has_token("upgraded", 8, "upgrade"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_head),
		cmocka_unit_test(test_response_headers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
