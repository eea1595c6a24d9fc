/* The HTTP edge over real loopback sockets with a test route family: the
 * status table, queries, routing, and bytes in, bytes out: keep-alive and
 * pipelining, HEAD, bodies (Content-Length, chunked, 100-continue,
 * streamed), framing that could be read two ways, every limit, timeouts,
 * --max-connections, upgrade, graceful stop, a request held by the relay
 * hook and resumed or cancelled, the budget of what a charged reply
 * holds (the producer's window counted in), and clients that end their
 * side with a request in flight: half-closed (answered, then closed) or
 * gone for good (released, also out of descriptors), also by a reset
 * (released at once, held, half-closed, not reading or streaming). */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <dirent.h>
#include <event2/event.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http_harness.h"
#include "sup_query.h"
#include "sup_ws.h"

static th_server srv;

static int setup(void **state)
{
	return th_start(&srv, NULL);
}

static int teardown(void **state)
{
	th_stop(&srv);
	return 0;
}

/* The answer to req (whole), the server expected to close after it. */
static char *talk(const char *req, bool *closed)
{
	size_t n;
	return th_talk(&srv, req, strlen(req), 0, false, 1500, &n, closed);
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p++)
		n++;
	return n;
}

static void test_status_table(void **state)
{
	const char *code;
	assert_int_equal(sup_http_status("files", -ENAMETOOLONG, &code), 400);
	assert_int_equal(sup_http_status("processes", -ENAMETOOLONG, &code), 400);
	assert_int_equal(sup_http_status(NULL, -ENAMETOOLONG, &code), 400);
	assert_string_equal(code, "bad_request");
	assert_int_equal(sup_http_status(NULL, -EPERM, &code), 403);
	assert_string_equal(code, "forbidden");
	assert_int_equal(sup_http_status(NULL, -ENOKEY, &code), 401); /* a peer's node token */
	assert_string_equal(code, "unauthorized");
	assert_int_equal(sup_http_status(NULL, -EACCES, &code), 403);
	assert_string_equal(code, "permission_denied");
	assert_int_equal(sup_http_status(NULL, -ENOENT, &code), 404);
	assert_int_equal(sup_http_status(NULL, -EEXIST, &code), 409);
	assert_int_equal(sup_http_status(NULL, -E2BIG, &code), 413);
	/* the client's wait, the agent's, any other */
	assert_int_equal(sup_http_status(NULL, -ENOLINK, &code), 408);
	assert_string_equal(code, "request_timeout");
	assert_int_equal(sup_http_status(NULL, -ETIME, &code), 504);
	assert_string_equal(code, "agent_timeout");
	assert_int_equal(sup_http_status(NULL, -ETIMEDOUT, &code), 504);
	assert_string_equal(code, "timeout");
	assert_int_equal(sup_http_status(NULL, -ERANGE, &code), 416);
	assert_int_equal(sup_http_status(NULL, -ECONNRESET, &code), 502);
	assert_string_equal(code, "agent_error");
	assert_int_equal(sup_http_status(NULL, -EAGAIN, &code), 503);
	assert_int_equal(sup_http_status(NULL, -ESHUTDOWN, &code), 503);
	assert_string_equal(code, "shutting_down");
	assert_int_equal(sup_http_status(NULL, -ENOSPC, &code), 507);
	assert_int_equal(sup_http_status(NULL, -ENOMEM, &code), 500);
	assert_string_equal(code, "internal");
	json_t *j = sup_http_error_json("bad_request", "field \"x\": bad \xff");
	json_t *e = json_object_get(j, "error");
	assert_string_equal(json_string_value(json_object_get(e, "message")),
			    "field \"x\": bad \xEF\xBF\xBD");
	json_decref(j);
}

static void test_query(void **state)
{
	static const char *const keys[] = { "path", "n", "f", NULL };
	size_t len;
	char *d = sup_query_decode("a%2Bb+c%zz%4%00x", 16, &len);
	assert_int_equal(len, 12);
	assert_memory_equal(d, "a+b c%zz%4\0x", 13);
	free(d);
	sup_query q;
	sbx_err e;
	assert_int_equal(sup_query_parse("path=/a%20b&&n=12&f=true", keys, &q, &e), 0);
	assert_string_equal(sup_query_get(&q, "path", &len), "/a b");
	uint64_t n;
	assert_int_equal(sup_query_uint(&q, "n", 1, 32, 1, &n, &e), 0);
	assert_int_equal(n, 12);
	assert_int_equal(sup_query_uint(&q, "n", 1, 10, 1, &n, &e), -EINVAL);
	assert_int_equal(sup_query_flag(&q, "f", false, &e), 1);
	assert_null(sup_query_get(&q, "x", NULL));
	sup_query_free(&q);
	assert_int_equal(sup_query_parse("path=a&path=b", keys, &q, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "twice"));
	assert_int_equal(sup_query_parse("nope=1", keys, &q, &e), -EINVAL);
	assert_non_null(strstr(e.msg, "unknown"));
	assert_int_equal(sup_query_parse("path", keys, &q, &e), -EINVAL);
	assert_int_equal(sup_query_parse(NULL, keys, &q, &e), 0);
	assert_int_equal(q.n, 0);
	assert_int_equal(sup_query_parse("f=maybe", keys, &q, &e), 0);
	assert_int_equal(sup_query_flag(&q, "f", false, &e), -EINVAL);
	sup_query_free(&q);
}

static void test_routes(void **state)
{
	char allow[64];
	int why;
	const sup_http_mount *m;
	const sup_http_route *r = sup_http_match(srv.h, "GET", "/echo", &m, allow, sizeof(allow), &why);
	assert_non_null(r);
	assert_string_equal(r->name, "GET echo");
	assert_non_null(sup_http_match(srv.h, "HEAD", "/echo", &m, allow, sizeof(allow), &why));
	assert_null(sup_http_match(srv.h, "PUT", "/echo", &m, allow, sizeof(allow), &why));
	assert_int_equal(why, -EPERM);
	assert_string_equal(allow, "GET, DELETE");
	assert_null(sup_http_match(srv.h, "GET", "/echo/", &m, allow, sizeof(allow), &why));
	assert_int_equal(why, -ENOENT);
	assert_non_null(sup_http_match(srv.h, "GET", "/v1/sandboxes/sb-1/x/7", &m, allow, 64, &why));
	assert_null(sup_http_match(srv.h, "GET", "/v1/sandboxes//x/7", &m, allow, 64, &why));
}

#define AUTH "Authorization: Bearer " TH_TOKEN "\r\n"

static void test_keepalive_pipelining(void **state)
{
	/* Ten requests in one write, the slow one among them: ten answers, in
	 * order, on one connection. */
	char req[4096] = "";
	for (int i = 0; i < 10; i++) {
		char one[160];
		snprintf(one, sizeof(one), "GET /%s?n=%d HTTP/1.1\r\nHost: x\r\n%s\r\n",
			 i == 3 ? "slow" : "echo", i, i == 9 ? "Connection: close\r\n" : "");
		strcat(req, one);
	}
	bool closed;
	char *out = talk(req, &closed);
	assert_true(closed);
	assert_int_equal(count(out, "HTTP/1.1 200 OK"), 10);
	const char *p = out;
	for (int i = 0; i < 10; i++) {
		char want[32];
		snprintf(want, sizeof(want), i == 3 ? "\"slow\":\"n=%d\"" : "\"query\":\"n=%d\"", i);
		p = strstr(p, want);
		assert_non_null(p);
	}
	assert_int_equal(count(out, "Connection: close"), 1);
	free(out);
	/* HTTP/1.0: closed after one answer unless it asks to keep alive. */
	out = talk("GET /echo HTTP/1.0\r\n\r\nGET /echo HTTP/1.0\r\n\r\n", &closed);
	assert_true(closed);
	assert_int_equal(count(out, "HTTP/1.1 200"), 1);
	free(out);
	out = talk("GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /echo HTTP/1.0\r\n\r\n", &closed);
	assert_int_equal(count(out, "HTTP/1.1 200"), 2);
	assert_int_equal(count(out, "Connection: keep-alive"), 1);
	free(out);
}

static void test_head_and_chunks(void **state)
{
	bool closed;
	char *out = talk("HEAD /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
	assert_non_null(strstr(out, "Content-Length: "));
	assert_null(strstr(out, "{"));
	free(out);
	out = talk("GET /chunks HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
	assert_non_null(strstr(out, "Transfer-Encoding: chunked\r\n"));
	assert_non_null(strstr(out, "\r\n\r\n1\r\na\r\n1\r\nb\r\n1\r\nc\r\n0\r\n\r\n"));
	free(out);
	/* HTTP/1.0 cannot take chunks: the end of the connection ends the body. */
	out = talk("GET /chunks HTTP/1.0\r\n\r\n", &closed);
	assert_true(closed);
	assert_null(strstr(out, "chunked"));
	assert_non_null(strstr(out, "\r\n\r\nabc"));
	free(out);
}

static void test_bodies(void **state)
{
	bool closed;
	char *out = talk("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
			 "POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
			 "3\r\nabc\r\n2;e=1\r\nde\r\n0\r\nT: x\r\n\r\n"
			 "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n"
			 "Connection: close\r\n\r\nok", &closed);
	assert_non_null(strstr(out, "\"body\":\"hello\""));
	assert_non_null(strstr(out, "\"body\":\"abcde\""));
	assert_non_null(strstr(out, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK"));
	assert_non_null(strstr(out, "\"body\":\"ok\""));
	free(out);
	/* A streamed body of 1 MiB in uneven chunks, backpressure on the way. */
	size_t big = 1 << 20, n;
	char *req = malloc(big * 2);
	int off = sprintf(req, "PUT /stream HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
			       "Expect: 100-continue\r\nConnection: close\r\n\r\n");
	for (size_t sent = 0, k = 1; sent < big; sent += k, k = k * 3 + 7) {
		if (k > big - sent)
			k = big - sent;
		off += sprintf(req + off, "%zx\r\n", k);
		memset(req + off, 'z', k);
		off += (int)k;
		off += sprintf(req + off, "\r\n");
	}
	off += sprintf(req + off, "0\r\n\r\n");
	out = th_talk(&srv, req, (size_t)off, 7777, false, 3000, &n, &closed);
	assert_non_null(strstr(out, "HTTP/1.1 100 Continue"));
	assert_non_null(strstr(out, "{\"len\":1048576}"));
	free(out);
	free(req);
}

/* Each of these could hide one request inside another: 400, closed. */
static void test_smuggling_refused(void **state)
{
#define S(x) { x, sizeof(x) - 1 }
	static const struct {
		const char *s;
		size_t len;
	} bad[] = {
		S("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"),
		S("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n"),
		S("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n x: folded\r\n\r\n"),
		S("POST /body HTTP/1.1\r\nHost: x\nContent-Length: 3\r\n\r\n"),
		S("POST /body HTTP/1.1\r\nHost: x\r\nX: a\0b\r\nContent-Length: 3\r\n\r\n"),
		S("POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"),
		S("POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
		S("POST /body HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
		S("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: +3\r\n\r\n"),
		S("POST /body HTTP/1.1\r\nHost: x\r\nHost: y\r\nContent-Length: 3\r\n\r\n"),
		S("POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3x\r\nabc\r\n0\r\n\r\n"),
		S("GET /echo HTTP/1.1\r\n\r\n"),
		S("GET http://x/echo HTTP/1.1\r\nHost: x\r\n\r\n"),
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t len = bad[i].len;
		char req[512];
		memcpy(req, bad[i].s, len);
		memcpy(req + len, "abcGET /echo HTTP/1.1\r\nHost: x\r\n\r\n", 35);
		size_t n;
		bool closed;
		char *out = th_talk(&srv, req, len + 35, 0, false, 1500, &n, &closed);
		assert_true(closed);
		assert_non_null(strstr(out, "HTTP/1.1 400 "));
		assert_non_null(strstr(out, "\"code\":\"bad_request\""));
		assert_int_equal(count(out, "\r\nDate: "), 1); /* the GET after it was not read */
		free(out);
	}
}

static void test_limits(void **state)
{
	bool closed;
	size_t n;
	/* 413 at any size: announced, or as a chunked body grows. */
	char *out = talk("POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n", &closed);
	assert_true(closed);
	assert_non_null(strstr(out, "HTTP/1.1 413 "));
	assert_non_null(strstr(out, "\"code\":\"too_large\""));
	free(out);
	char *req = malloc(8192);
	int off = sprintf(req, "POST /body HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
	for (int i = 0; i < 6; i++) {
		off += sprintf(req + off, "100\r\n");
		memset(req + off, 'y', 256);
		off += 256;
		off += sprintf(req + off, "\r\n");
	}
	out = th_talk(&srv, req, (size_t)off, 0, false, 1500, &n, &closed);
	assert_non_null(strstr(out, "HTTP/1.1 413 "));
	free(out);
	/* 431: a head over 64 KiB, or more than 100 header lines. */
	size_t big = 70 * 1024;
	char *h = malloc(big + 64);
	off = sprintf(h, "GET /echo HTTP/1.1\r\nHost: x\r\nX: ");
	memset(h + off, 'a', big);
	strcpy(h + off + big, "\r\n\r\n");
	out = th_talk(&srv, h, strlen(h), 0, false, 1500, &n, &closed);
	assert_true(closed);
	assert_non_null(strstr(out, "HTTP/1.1 431 "));
	free(out);
	off = sprintf(h, "GET /echo HTTP/1.1\r\nHost: x\r\n");
	for (int i = 0; i < 101; i++)
		off += sprintf(h + off, "X%d: y\r\n", i);
	strcpy(h + off, "\r\n");
	out = th_talk(&srv, h, strlen(h), 0, false, 1500, &n, &closed);
	assert_non_null(strstr(out, "HTTP/1.1 431 "));
	free(out);
	free(h);
	free(req);
	/* 401 before routing, 404, 405 with Allow, an {id} that cannot be one,
	 * a parser's and an act's refusal. */
	out = talk("GET /v1/sandboxes/sb-1/x/1 HTTP/1.1\r\nHost: x\r\n\r\n"
		   "GET /v1/nothing HTTP/1.1\r\nHost: x\r\n" AUTH "\r\n"
		   "PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"
		   "GET /v1/sandboxes/SB/x/1 HTTP/1.1\r\nHost: x\r\n" AUTH "\r\n"
		   "GET /v1/sandboxes/sb-1/x/abc HTTP/1.1\r\nHost: x\r\n" AUTH "\r\n"
		   "GET /fail HTTP/1.1\r\nHost: x\r\n\r\n"
		   "GET /v1/sandboxes/sb-1/x/12 HTTP/1.1\r\nHost: x\r\n" AUTH "Connection: close\r\n\r\n",
		   &closed);
	const char *want[] = { "401 ", "WWW-Authenticate: Bearer", "404 ", "405 ", "Allow: GET, DELETE",
			       "404 ", "400 ", "400 ", "\"pid\":\"12\"" };
	const char *p = out;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		p = strstr(p, want[i]);
		assert_non_null(p);
	}
	free(out);
}

static void test_upgrade(void **state)
{
	bool closed;
	char *out = talk("GET /raw HTTP/1.1\r\nHost: x\r\nConnection: upgrade\r\nUpgrade: echo\r\n\r\n"
			 "ping pong bye", &closed);
	assert_true(closed);
	assert_non_null(strstr(out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\n"));
	assert_non_null(strstr(out, "X-Test: 1\r\n\r\nping pong bye"));
	free(out);
}

/* A client frame: FIN, opcode, masked with key "abcd". */
static size_t ws_frame(char *out, int opcode, const char *p, size_t n)
{
	size_t o = 0;
	out[o++] = (char)(0x80 | opcode);
	out[o++] = (char)(0x80 | n); /* n < 126 here */
	memcpy(out + o, "abcd", 4);
	o += 4;
	for (size_t i = 0; i < n; i++)
		out[o++] = p[i] ^ "abcd"[i % 4];
	return o;
}

static void test_websocket(void **state)
{
	/* RFC 6455 1.3's example key and answer. */
	sup_http_hdr h[] = { { "Connection", "keep-alive, Upgrade" }, { "Upgrade", "websocket" },
			     { "Sec-WebSocket-Version", "13" },
			     { "Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==" } };
	sup_http_in in = { .method = "GET", .path = "/ws", .hdrs = h, .nhdrs = 4 };
	char accept[32];
	sbx_err e;
	assert_int_equal(sup_ws_check(&in, accept, &e), 0);
	assert_string_equal(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	h[2].value = "8";
	assert_int_equal(sup_ws_check(&in, accept, &e), -EINVAL);
	h[2].value = "13";
	h[3].value = "short";
	assert_int_equal(sup_ws_check(&in, accept, &e), -EINVAL);
	h[3].value = "dGhlIHNhbXBsZSBub25jZQ==";
	h[1].value = "h2c";
	assert_int_equal(sup_ws_check(&in, accept, &e), -EINVAL);

	/* Over the wire: text and binary echoed, a ping answered, our close. */
	char req[512];
	int off = sprintf(req, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
			       "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n");
	off += (int)ws_frame(req + off, 1, "hello", 5);
	off += (int)ws_frame(req + off, 2, "\x01\x02", 2);
	off += (int)ws_frame(req + off, 9, "pi", 2);
	off += (int)ws_frame(req + off, 1, "close", 5);
	size_t n;
	bool closed;
	char *out = th_talk(&srv, req, (size_t)off, 0, false, 1500, &n, &closed);
	assert_true(closed);
	assert_non_null(strstr(out, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"));
	assert_non_null(strstr(out, "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
	const char *body = strstr(out, "\r\n\r\n") + 4;
	/* The pong goes ahead of the data (control frames may), the close last. */
	static const char want[] = "\x8a\x02pi\x81\x05hello\x82\x02\x01\x02\x88\x05\x03\xe8" "bye";
	assert_int_equal(n - (size_t)(body - out), sizeof(want) - 1);
	assert_memory_equal(body, want, sizeof(want) - 1);
	free(out);
	/* An unmasked frame from a client: closed with 1002. */
	off = sprintf(req, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
			   "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
			   "\x81\x02hi");
	out = th_talk(&srv, req, (size_t)off, 0, false, 1500, &n, &closed);
	assert_non_null(memmem(out, n, "\x88\x02\x03\xea", 4));
	free(out);
	/* Not an upgrade: a plain 400. */
	out = talk("GET /ws HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
	assert_non_null(strstr(out, "HTTP/1.1 400 "));
	free(out);
}

/* What load on the machine may add to a timer of test_timeouts before the
 * test calls it late: generous, a test that passes ends when the timer
 * fires; and short of the harness's idle timeout (5 s), a timer that would
 * also cut a trickling head, too late. */
#define LATE_MS 2000

static void test_timeouts(void **state)
{
	/* A head that trickles, a byte every 100 ms and never complete, is cut
	 * at head_timeout from its first byte: 408, while a second client is
	 * served. Bytes that keep coming do not put the deadline off (then no
	 * 408 would come), and it does not come early: t0 is taken before the
	 * first byte, so the server's timer is not due before t0 +
	 * head_timeout. Load on the machine only delays what we see, so these
	 * bounds hold under it (LATE_MS for the delay); a fixed number of
	 * loop passes or a fixed time to wait would not. */
	sup_http_cfg cfg;
	th_default_cfg(&cfg);
	long slack = th_clock_slack_ms();
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(srv.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int slow = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(slow, (struct sockaddr *)&a, sizeof(a)), 0);
	static const char head[] = "GET /echo HTTP/1.1\r\nHost: x\r\nX-Slow: ";
	size_t sent = 0;
	bool served = false, closed;
	char buf[512];
	ssize_t r;
	long t0 = th_now_ms(), next = t0, took;
	for (;;) {
		long now = th_now_ms();
		if (now - t0 >= (long)cfg.head_timeout_s * 1000 + LATE_MS)
			fail_msg("no answer %ld ms after a trickling head's first byte", now - t0);
		if (now >= next) {
			char c = sent < sizeof(head) - 1 ? head[sent] : 'a';
			assert_int_equal(send(slow, &c, 1, MSG_NOSIGNAL), 1);
			sent++;
			next = now + 100;
		}
		th_pump(&srv, 10);
		r = recv(slow, buf, sizeof(buf) - 1, MSG_DONTWAIT);
		if (r >= 0)
			break;
		assert_int_equal(errno, EAGAIN);
		if (!served && sent >= 3) {
			char *out = talk("GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &closed);
			assert_non_null(strstr(out, "HTTP/1.1 200 "));
			free(out);
			served = true;
		}
	}
	took = th_now_ms() - t0;
	assert_true(served);
	assert_true(r > 0);
	buf[r] = '\0';
	assert_non_null(strstr(buf, "HTTP/1.1 408 "));
	assert_non_null(strstr(buf, "request_timeout"));
	if (took < (long)cfg.head_timeout_s * 1000 - slack)
		fail_msg("408 after %ld ms, before head_timeout", took);
	close(slow);
	/* A buffered body that stops: 408 as well, body_timeout after the
	 * head (t0 is taken before it is sent). */
	static const char stalled[] = "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc";
	size_t n;
	t0 = th_now_ms();
	char *out = th_talk(&srv, stalled, sizeof(stalled) - 1, 0, false,
			    (int)cfg.body_timeout_s * 1000 + LATE_MS, &n, &closed);
	took = th_now_ms() - t0;
	assert_true(closed);
	assert_non_null(strstr(out, "HTTP/1.1 408 "));
	free(out);
	if (took < (long)cfg.body_timeout_s * 1000 - slack)
		fail_msg("408 after %ld ms, before body_timeout", took);
}

/* ---- held by the relay hook ---- */

/* The hook holds every request with X-Hold; a timer resumes the one held
 * with the verdict its header asks ("ok": go on, else 401). */
static struct {
	sup_http_req *r;
	int verdict;
	int cancelled;
	struct event *ev;
} held;

static void held_cancel(void *ud)
{
	held.cancelled++;
	held.r = NULL;
}

static void held_resume(evutil_socket_t fd, short what, void *ud)
{
	sbx_err e;
	sbx_err_set(&e, held.verdict, "the test refuses it");
	sup_http_req *r = held.r;
	held.r = NULL;
	if (r)
		sup_http_resume(r, held.verdict, &e);
}

static int hold_hook(void *ud, sup_http_req *r, const char *id, sbx_err *err)
{
	const char *v = sup_http_in_header(sup_http_input(r), "X-Hold");
	if (!v)
		return 0;
	held.r = r;
	held.verdict = strcmp(v, "ok") == 0 ? 0 : -ENOKEY;
	sup_http_hold(r, held_cancel, NULL);
	struct timeval tv = { 0, 200000 };
	evtimer_add(held.ev, &tv);
	return 2;
}

static void test_held_and_resumed(void **state)
{
	th_server s;
	sup_http_cfg cfg;
	th_default_cfg(&cfg);
	cfg.relay = hold_hook;
	assert_int_equal(th_start(&s, &cfg), 0);
	held.ev = evtimer_new(s.base, held_resume, NULL);
	/* Go on: the token, the route and its body as for any request, and the
	 * connection kept for the next one. */
	static const char ok[] = "POST /body HTTP/1.1\r\nHost: x\r\nX-Hold: ok\r\n" AUTH
				 "Content-Length: 5\r\n\r\nhelloGET /echo HTTP/1.1\r\nHost: x\r\n"
				 "Connection: close\r\n\r\n";
	size_t n;
	bool closed;
	char *out = th_talk(&s, ok, sizeof(ok) - 1, 0, false, 1500, &n, &closed);
	assert_int_equal(count(out, "HTTP/1.1 200 "), 2);
	assert_non_null(strstr(out, "hello"));
	free(out);
	/* Refused: answered as the status table says, the body not taken for a
	 * request. */
	static const char no[] = "POST /body HTTP/1.1\r\nHost: x\r\nX-Hold: no\r\n" AUTH
				 "Content-Length: 5\r\n\r\nhello";
	out = th_talk(&s, no, sizeof(no) - 1, 0, false, 1500, &n, &closed);
	assert_non_null(strstr(out, "HTTP/1.1 401 "));
	assert_non_null(strstr(out, "the test refuses it"));
	assert_true(closed);
	free(out);
	/* Still checked after: no token is 401 from the edge itself. */
	static const char notoken[] = "GET /v1/x HTTP/1.1\r\nHost: x\r\nX-Hold: ok\r\n\r\n";
	out = th_talk(&s, notoken, sizeof(notoken) - 1, 0, false, 1500, &n, &closed);
	assert_non_null(strstr(out, "HTTP/1.1 401 "));
	assert_non_null(strstr(out, "missing Authorization"));
	free(out);
	/* The client gone while held: the wait is cancelled, nothing resumed. */
	static const char gone[] = "GET /echo HTTP/1.1\r\nHost: x\r\nX-Hold: ok\r\n\r\n";
	held.cancelled = 0;
	out = th_talk(&s, gone, sizeof(gone) - 1, 0, false, 100, &n, &closed);
	free(out);
	th_pump(&s, 400);
	assert_int_equal(held.cancelled, 1);
	assert_null(held.r);
	assert_int_equal(th_conns(&s), 0);
	/* Half-closed while held: resumed and answered all the same. */
	out = th_talk(&s, gone, sizeof(gone) - 1, 0, true, 1500, &n, &closed);
	assert_non_null(strstr(out, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 "));
	assert_true(closed);
	free(out);
	assert_int_equal(held.cancelled, 1);
	assert_int_equal(th_conns(&s), 0);
	event_free(held.ev);
	th_stop(&s);
}

/* A client that reads nothing for a while, then the whole answer: what
 * the server held of the producer's bytes for it (beside the head, which
 * is the edge's) stayed within SUP_HTTP_HWM, the producer's window
 * included, and every byte came. */
static void produce_stalled(size_t window)
{
	th_server s;
	sup_http_cfg cfg;
	th_default_cfg(&cfg);
	cfg.credit_window = window;
	assert_int_equal(th_start(&s, &cfg), 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(s.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), small = 4096;
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	static const char req[] = "GET /produce HTTP/1.1\r\nHost: x\r\n\r\n";
	assert_int_equal(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL), (ssize_t)(sizeof(req) - 1));
	th_pump(&s, 300);
	/* stalled: the producer stopped, the backlog never past the budget */
	assert_true(th_produced.sent < TH_PRODUCE_LEN);
	assert_in_range(th_produced.max_backlog, th_produced.head + 1, SUP_HTTP_HWM + th_produced.head);
	size_t got = 0;
	char buf[65536];
	for (int idle = 0; idle < 200;) { /* until quiet for 200 rounds */
		event_base_loop(s.base, EVLOOP_NONBLOCK);
		ssize_t r = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (r > 0) {
			got += (size_t)r;
			idle = 0;
		} else {
			assert_true(r < 0 && errno == EAGAIN);
			th_pump(&s, 1);
			idle++;
		}
	}
	/* the head, then every byte of the body */
	assert_in_range(got, TH_PRODUCE_LEN + 1, TH_PRODUCE_LEN + 255);
	assert_in_range(th_produced.max_backlog, th_produced.head + 1, SUP_HTTP_HWM + th_produced.head);
	close(fd);
	th_stop(&s);
}

static void test_credit_window(void **state)
{
	produce_stalled(256u << 10);
	/* a window as large as the budget: cost goes back once the backlog
	 * is empty, and the stream still flows */
	produce_stalled(SUP_HTTP_HWM);
}

/* ---- a client's end with a request in flight ---- */

static long ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Send req whole and end our side at once, before the server has run for
 * its last bytes (they and the end arrive together): shut our sending side
 * (half) and read until the server closes, or close for good (NULL). */
static char *send_and_end(th_server *s, const char *req, size_t len, bool half, size_t *n,
			  bool *closed)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(s->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	size_t off = 0;
	while (off < len) {
		ssize_t w = send(fd, req + off, len - off, MSG_NOSIGNAL);
		assert_true(w > 0 || errno == EAGAIN);
		if (w > 0)
			off += (size_t)w;
		if (off < len)
			event_base_loop(s->base, EVLOOP_NONBLOCK);
	}
	*closed = false;
	*n = 0;
	if (!half) {
		close(fd);
		return NULL;
	}
	shutdown(fd, SHUT_WR);
	size_t cap = 1 << 16, got = 0;
	char *out = malloc(cap);
	assert_non_null(out);
	for (long end = ms_now() + 3000; ms_now() < end;) {
		event_base_loop(s->base, EVLOOP_NONBLOCK);
		ssize_t r = recv(fd, out + got, cap - got - 1, 0);
		if (r > 0) {
			got += (size_t)r;
			if (got + 1 == cap)
				out = realloc(out, cap *= 2);
			assert_non_null(out);
		} else if (r == 0 || errno != EAGAIN) {
			*closed = r == 0;
			break;
		} else {
			poll(NULL, 0, 1);
		}
	}
	close(fd);
	out[got] = '\0';
	*n = got;
	return out;
}

/* The answers in out, interim ones (1xx) left out: each whole (its
 * Content-Length of body there), their statuses in st; how many. */
static int answers(const char *out, int *st, int max)
{
	int k = 0;
	for (const char *p = out; p && *p;) {
		assert_int_equal(strncmp(p, "HTTP/1.1 ", 9), 0);
		int status = atoi(p + 9);
		const char *end = strstr(p, "\r\n\r\n");
		assert_non_null(end);
		end += 4;
		if (status < 200) {
			p = end;
			continue;
		}
		const char *cl = strstr(p, "Content-Length: ");
		assert_true(cl && cl < end);
		size_t len = strtoul(cl + 16, NULL, 10);
		assert_true(strlen(end) >= len); /* the body whole */
		assert_true(k < max);
		st[k++] = status;
		p = end + len;
	}
	return k;
}

/* One request and our end with it; then the server holds nothing. */
static void half_closed_gets(th_server *s, const char *req, size_t len, int nanswers,
			     const char *want)
{
	size_t n;
	bool closed;
	int st[8];
	char *out = send_and_end(s, req, len, true, &n, &closed);
	if (answers(out, st, 8) != nanswers || !closed || !strstr(out, want))
		fail_msg("half-closed after %.40s: %d answers, closed %d:\n%s", req,
			 answers(out, st, 8), closed, out);
	for (int i = 0; i < nanswers; i++)
		assert_int_equal(st[i], 200);
	free(out);
	th_pump(s, 5);
	assert_int_equal(th_conns(s), 0);
}

static void test_half_closed_client_answered(void **state)
{
	char req[512];
	/* The answer at once, later in the pass that read the request, in
	 * the pass that reads the end, or after it. */
	for (int k = 0; k < 8; k++) {
		for (int round = 0; round < 5; round++) {
			int len = snprintf(req, sizeof(req), "GET /later?n=%d HTTP/1.1\r\nHost: x\r\n\r\n", k);
			char want[32];
			snprintf(want, sizeof(want), "{\"later\":%d}", k);
			half_closed_gets(&srv, req, (size_t)len, 1, want);
		}
	}
	static const char echo[] = "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n";
	half_closed_gets(&srv, echo, sizeof(echo) - 1, 1, "\"path\":\"/echo\"");
	static const char old[] = "GET /echo HTTP/1.0\r\n\r\n";
	half_closed_gets(&srv, old, sizeof(old) - 1, 1, "\"path\":\"/echo\"");
	static const char body[] = "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
	half_closed_gets(&srv, body, sizeof(body) - 1, 1, "\"body\":\"hello\"");
	/* Pipelined before the end: every one answered, in order. */
	static const char two[] = "GET /later?n=3 HTTP/1.1\r\nHost: x\r\n\r\n"
				  "GET /echo HTTP/1.1\r\nHost: x\r\n\r\n"
				  "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok";
	half_closed_gets(&srv, two, sizeof(two) - 1, 3, "\"body\":\"ok\"");
	/* An upload, its answer coming at once or passes after its body's
	 * end (an agent's, as PUT /files waits for file.write's). */
	size_t big = 300000;
	char *up = malloc(big + 256);
	assert_non_null(up);
	for (int k = 0; k < 6; k++) {
		for (size_t size = 10; size <= big; size += big - 10) {
			int hl = sprintf(up, "PUT /stream?n=%d HTTP/1.1\r\nHost: x\r\n"
					     "Content-Length: %zu\r\n\r\n", k, size);
			memset(up + hl, 'u', size);
			char want[32];
			snprintf(want, sizeof(want), "{\"len\":%zu}", size);
			half_closed_gets(&srv, up, (size_t)hl + size, 1, want);
		}
	}
	free(up);
}

/* The highest descriptor this process has open. */
static int highest_fd(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int top = -1;
	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.' && atoi(e->d_name) > top)
			top = atoi(e->d_name);
	closedir(d);
	return top;
}

static void test_gone_client_released(void **state)
{
	/* A client that closed for good while its request was in flight: the
	 * request ends (its state released) at once, not when (if ever) an
	 * answer would come. */
	static const char never[] = "GET /never HTTP/1.1\r\nHost: x\r\n\r\n";
	size_t n;
	bool closed;
	th_never = true;
	for (int i = 0; i < 5; i++) {
		unsigned released = th_released;
		assert_null(send_and_end(&srv, never, sizeof(never) - 1, false, &n, &closed));
		long t0 = ms_now();
		while (th_released == released && ms_now() - t0 < 1000)
			th_pump(&srv, 1);
		assert_int_equal(th_released, released + 1);
		assert_int_equal(th_conns(&srv), 0);
	}
	/* Its answer due in the same pass or soon after: freed all the same. */
	char req[128];
	for (int k = 0; k < 8; k++) {
		int len = snprintf(req, sizeof(req), "GET /later?n=%d HTTP/1.1\r\nHost: x\r\n\r\n", k);
		unsigned released = th_released;
		assert_null(send_and_end(&srv, req, (size_t)len, false, &n, &closed));
		long t0 = ms_now();
		while ((th_released == released || th_conns(&srv)) && ms_now() - t0 < 1000)
			th_pump(&srv, 1);
		assert_int_equal(th_released, released + 1);
		assert_int_equal(th_conns(&srv), 0);
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(srv.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	/* Out of descriptors at its end (no watch can be made): a timer
	 * looks at the socket instead, and it is released all the same. */
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(send(fd, never, sizeof(never) - 1, MSG_NOSIGNAL), (ssize_t)(sizeof(never) - 1));
	th_pump(&srv, 50);
	assert_int_equal(th_conns(&srv), 1);
	close(fd);
	struct rlimit was, lim;
	int top = highest_fd(), nfill = 0, k = 0;
	int *fill = malloc(sizeof(int) * (size_t)(top + 1));
	assert_non_null(fill);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
	lim = (struct rlimit){ (rlim_t)top + 1, was.rlim_max };
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &lim), 0);
	while (nfill <= top && (k = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
		fill[nfill++] = k;
	int full = k < 0 ? errno : 0;
	unsigned released = th_released;
	for (long t0 = ms_now(); th_released == released && ms_now() - t0 < 1000;)
		th_pump(&srv, 1);
	while (nfill > 0)
		close(fill[--nfill]);
	free(fill);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &was), 0);
	assert_int_equal(full, EMFILE);
	assert_int_equal(th_released, released + 1);
	assert_int_equal(th_conns(&srv), 0);
	/* Half-closed, by contrast, the request goes on (told by the
	 * interim answer the client's stack took). */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(send(fd, never, sizeof(never) - 1, MSG_NOSIGNAL), (ssize_t)(sizeof(never) - 1));
	shutdown(fd, SHUT_WR);
	released = th_released;
	th_pump(&srv, 300);
	assert_int_equal(th_conns(&srv), 1);
	assert_int_equal(th_released, released);
	char buf[128];
	ssize_t r = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
	assert_int_equal(r, 25);
	buf[r] = '\0';
	assert_string_equal(buf, "HTTP/1.1 100 Continue\r\n\r\n");
	close(fd);
	/* gone for good now: seen only once something is written, here by
	 * the stop */
	th_stop(&srv);
	assert_int_equal(th_released, released + 1);
	assert_int_equal(th_start(&srv, NULL), 0);
	th_never = false;
}

/* ---- a client that resets its connection with a request in flight ---- */

/* The statuses the server logged (its on_answered), the last one kept. */
static int last_status;

static void answered(void *ud, const char *route, int status)
{
	last_status = status;
}

static int connect_to(const th_server *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(s->port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	return fd;
}

/* Close with SO_LINGER {1, 0}: a reset (RST), no FIN. */
static void reset(int fd)
{
	struct linger l = { 1, 0 };
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l)), 0);
	close(fd);
}

/* The server at work on fd's request for ms, then fd reset: the request
 * ends (its state released, done() true) and the connection goes within
 * 100 ms (not on a probe's timer, nor when an answer would have come),
 * logged as 499. How long it took, in ms. */
static long reset_ends(th_server *s, int fd, int ms, bool (*done)(void), const char *what)
{
	th_pump(s, ms);
	assert_int_equal(th_conns(s), 1);
	assert_false(done());
	last_status = 0;
	reset(fd);
	long t0 = ms_now();
	while ((!done() || th_conns(s)) && ms_now() - t0 < 1000)
		th_pump(s, 1);
	long took = ms_now() - t0;
	if (!done() || th_conns(s) || last_status != 499 || took > 100)
		fail_msg("%s, then reset: released %d, connections %u, status %d, after %ld ms", what,
			 done(), th_conns(s), last_status, took);
	return took;
}

static unsigned released_before;

static bool released(void)
{
	return th_released > released_before;
}

static bool cancelled(void)
{
	return held.cancelled > 0;
}

static void test_reset_client_released(void **state)
{
	th_server s;
	sup_http_cfg cfg;
	th_default_cfg(&cfg);
	cfg.relay = hold_hook;
	cfg.on_answered = answered;
	cfg.credit_window = 256u << 10;
	assert_int_equal(th_start(&s, &cfg), 0);
	held.ev = evtimer_new(s.base, held_resume, NULL);
	static const char never[] = "GET /never HTTP/1.1\r\nHost: x\r\n\r\n";
	th_never = true;
	/* In flight, the connection reading. */
	int fd = connect_to(&s);
	assert_int_equal(send(fd, never, sizeof(never) - 1, 0), (ssize_t)(sizeof(never) - 1));
	released_before = th_released;
	reset_ends(&s, fd, 50, released, "in flight");
	/* Held by the relay hook (reading off, the end watched for): the wait
	 * cancelled, nothing resumed, no answer. */
	static const char hold[] = "GET /echo HTTP/1.1\r\nHost: x\r\nX-Hold: ok\r\n\r\n";
	held.cancelled = 0;
	fd = connect_to(&s);
	assert_int_equal(send(fd, hold, sizeof(hold) - 1, 0), (ssize_t)(sizeof(hold) - 1));
	reset_ends(&s, fd, 50, cancelled, "held");
	assert_int_equal(held.cancelled, 1);
	assert_null(held.r);
	th_pump(&s, 250); /* past the hook's timer: nothing resumes */
	assert_int_equal(held.cancelled, 1);
	/* Half-closed first (its 100 Continue taken by its stack, so known to
	 * be there, the probe over), reset long after. */
	fd = connect_to(&s);
	assert_int_equal(send(fd, never, sizeof(never) - 1, 0), (ssize_t)(sizeof(never) - 1));
	shutdown(fd, SHUT_WR);
	released_before = th_released;
	reset_ends(&s, fd, 1500, released, "half-closed");
	/* Half-closed behind a request answered first: the one in flight
	 * reads its end before it runs. */
	static const char two[] = "GET /later?n=2 HTTP/1.1\r\nHost: x\r\n\r\n"
				  "GET /never HTTP/1.1\r\nHost: x\r\n\r\n";
	fd = connect_to(&s);
	assert_int_equal(send(fd, two, sizeof(two) - 1, 0), (ssize_t)(sizeof(two) - 1));
	shutdown(fd, SHUT_WR);
	released_before = th_released;
	th_pump(&s, 300);
	assert_int_equal(th_released, released_before + 1); /* the first one's */
	released_before = th_released;
	reset_ends(&s, fd, 1200, released, "half-closed behind another");
	/* Reading off with a request in flight: a pipelined flood past the
	 * input's bound waits in the kernel. */
	size_t flood = 1u << 20; /* past the input's bound of 256 KiB */
	char *junk = malloc(flood);
	assert_non_null(junk);
	memset(junk, 'x', flood);
	fd = connect_to(&s);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	assert_int_equal(send(fd, never, sizeof(never) - 1, 0), (ssize_t)(sizeof(never) - 1));
	released_before = th_released;
	for (size_t off = 0; off < flood;) {
		ssize_t w = send(fd, junk + off, flood - off, 0);
		if (w < 0) {
			assert_int_equal(errno, EAGAIN);
			break; /* both sides' buffers full */
		}
		off += (size_t)w;
		event_base_loop(s.base, EVLOOP_NONBLOCK);
	}
	free(junk);
	reset_ends(&s, fd, 100, released, "flooding");
	/* A streamed answer the client does not read: freed at once. */
	fd = connect_to(&s);
	int small = 4096;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
	static const char produce[] = "GET /produce HTTP/1.1\r\nHost: x\r\n\r\n";
	memset(&th_produced, 0, sizeof(th_produced));
	assert_int_equal(send(fd, produce, sizeof(produce) - 1, 0), (ssize_t)(sizeof(produce) - 1));
	released_before = th_released;
	reset_ends(&s, fd, 200, released, "streaming");
	assert_true(th_produced.sent > 0 && th_produced.sent < TH_PRODUCE_LEN);
	th_never = false;
	event_free(held.ev);
	th_stop(&s);
}

static void stopped(void *ud)
{
	(*(int *)ud)++;
}

static void test_max_connections_and_stop(void **state)
{
	th_server s;
	sup_http_cfg cfg;
	th_default_cfg(&cfg);
	cfg.max_conns = 2;
	assert_int_equal(th_start(&s, &cfg), 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(s.port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fds[3];
	for (int i = 0; i < 3; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		assert_int_equal(connect(fds[i], (struct sockaddr *)&a, sizeof(a)), 0);
		th_pump(&s, 50);
	}
	assert_int_equal(th_conns(&s), 2);
	char c;
	assert_int_equal(recv(fds[2], &c, 1, MSG_DONTWAIT), 0); /* closed at accept */
	/* Graceful stop: idle connections closed at once, then done. */
	int done = 0;
	sup_http_stop(s.h, 5, stopped, &done);
	th_pump(&s, 50);
	assert_int_equal(done, 1);
	assert_int_equal(th_conns(&s), 0);
	assert_int_equal(recv(fds[0], &c, 1, MSG_DONTWAIT), 0);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	th_stop(&s);
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN); /* as the supervisor: a reset peer is an error, not a death */
	if (argc > 1) /* one test (a pattern) run alone, e.g. over and over under load */
		cmocka_set_test_filter(argv[1]);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_table),
		cmocka_unit_test(test_query),
		cmocka_unit_test(test_routes),
		cmocka_unit_test(test_keepalive_pipelining),
		cmocka_unit_test(test_head_and_chunks),
		cmocka_unit_test(test_bodies),
		cmocka_unit_test(test_smuggling_refused),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_upgrade),
		cmocka_unit_test(test_websocket),
		cmocka_unit_test(test_timeouts),
		cmocka_unit_test(test_max_connections_and_stop),
		cmocka_unit_test(test_held_and_resumed),
		cmocka_unit_test(test_credit_window),
		cmocka_unit_test(test_half_closed_client_answered),
		cmocka_unit_test(test_gone_client_released),
		cmocka_unit_test(test_reset_client_released),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
