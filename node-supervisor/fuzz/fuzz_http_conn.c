/* The HTTP edge's whole connection state machine under libFuzzer, bytes in
 * and bytes out over a real loopback socket: a server with the test route
 * family (tests/http_harness.c: buffered, streamed and chunked bodies,
 * chunked replies, HEAD, an upgrade to a raw echo, a parser that refuses)
 * reads the input as one client's bytes. Input: one byte choosing the size
 * of the pieces the client writes in, one choosing whether it then shuts
 * its side, then the bytes. Checks, besides the sanitizers: whatever comes
 * back is answers (it starts with a status line), and once the client is
 * gone the server holds no connection. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http_harness.h"
#include "sup_log.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

static th_server srv;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool started;
	if (!started) {
		sup_http_cfg cfg;
		sup_log_set_level(SUP_LOG_ERROR); /* a line per request would drown the output */
		th_default_cfg(&cfg);
		CHECK(th_start(&srv, &cfg) == 0);
		started = true;
	}
	if (size < 2)
		return 0;
	size_t step = (size_t)data[0] * 7 + 1, n;
	bool shut = data[1] & 1, closed;
	char *out = th_talk(&srv, data + 2, size - 2, step, shut, -20, &n, &closed);
	CHECK(out != NULL);
	CHECK(n == 0 || (n >= 12 && memcmp(out, "HTTP/1.1 ", 9) == 0));
	free(out);
	for (int i = 0; i < 200 && th_conns(&srv); i++)
		th_pump(&srv, 1);
	CHECK(th_conns(&srv) == 0);
	return 0;
}
