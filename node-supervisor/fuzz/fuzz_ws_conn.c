/* The WebSocket side of the HTTP edge under libFuzzer: a valid upgrade to
 * the test family's echo (tests/http_harness.c: messages back as they came,
 * "close" closes, "pause" stops reading), then the input as the client's
 * frames (masked or not, fragmented, control frames, lengths of any size),
 * over a real loopback socket. Input: one byte choosing the write size, one
 * whether the client then shuts its side, then the frames. Checks, besides
 * the sanitizers: the answer starts with the 101, and once the client is
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

static const char upgrade[] = "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\n"
			      "Upgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
			      "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n";
static th_server srv;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool started;
	if (!started) {
		sup_log_set_level(SUP_LOG_ERROR);
		CHECK(th_start(&srv, NULL) == 0);
		started = true;
	}
	if (size < 2)
		return 0;
	size_t len = sizeof(upgrade) - 1 + size - 2, n;
	uint8_t *req = malloc(len);
	CHECK(req != NULL);
	memcpy(req, upgrade, sizeof(upgrade) - 1);
	memcpy(req + sizeof(upgrade) - 1, data + 2, size - 2);
	bool closed;
	char *out = th_talk(&srv, req, len, (size_t)data[0] * 7 + 1, data[1] & 1, -20, &n, &closed);
	CHECK(out != NULL);
	CHECK(n >= 12 && memcmp(out, "HTTP/1.1 101 ", 13) == 0);
	free(out);
	free(req);
	for (int i = 0; i < 200 && th_conns(&srv); i++)
		th_pump(&srv, 1);
	CHECK(th_conns(&srv) == 0);
	return 0;
}
