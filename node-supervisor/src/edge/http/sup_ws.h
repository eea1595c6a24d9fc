/* A WebSocket (RFC 6455) on a request of the HTTP edge: the upgrade's
 * checks and its Sec-WebSocket-Accept, then messages both ways over the
 * connection taken over (sup_http_upgrade). libwslay does the framing
 * (masking, fragments, ping/pong, the close handshake) and no I/O; the
 * bytes go through the connection's buffers. Backpressure both ways: a
 * producer's cost comes back once the client has read (sup_http_charge),
 * and a consumer that cannot take more pauses reading the client.
 * It must not know what the messages mean. Loop thread only. */
#ifndef SUP_WS_H
#define SUP_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_http.h"

/* Largest message taken from a client (a bigger one closes with 1009). */
#define SUP_WS_MAX_MSG (1u << 20)
#define SUP_WS_ACCEPT_LEN 28

typedef struct sup_ws sup_ws;

/* For a parser: the request asks for a WebSocket (GET, Connection: upgrade,
 * Upgrade: websocket, version 13, a key of 16 bytes): 0 with accept
 * (SUP_WS_ACCEPT_LEN + 1 bytes) filled, or -EINVAL with err. */
int sup_ws_check(const sup_http_in *in, char *accept, sbx_err *err);

/* Answer 101 and speak WebSocket on r from here; on_message(binary, p, n,
 * ud) for each whole message. The request ends once the close handshake
 * is done (either side's) or the client is gone. NULL without memory. */
sup_ws *sup_ws_start(sup_http_req *r, const char *accept,
		     void (*on_message)(bool binary, const uint8_t *p, size_t n, void *ud),
		     void *ud);
/* Queue a message; cost comes back through r's on_credit once the client
 * has read it. -EPIPE once closing. */
int sup_ws_send(sup_ws *w, bool binary, const void *p, size_t n, size_t cost);
/* Stop (true) or go on taking messages from the client. */
void sup_ws_pause(sup_ws *w, bool paused);
/* Close with code and reason; the request ends once the frame is out. */
void sup_ws_close(sup_ws *w, uint16_t code, const char *reason);
/* From the family's release: no callback after this. */
void sup_ws_free(sup_ws *w);

#endif
