/* A server of the HTTP edge with a test route family, and a client that
 * talks to it over real loopback sockets from the same thread (the loop is
 * pumped while bytes go out and come back). For test_sup_http and the
 * connection fuzzer: bytes in, bytes out, no sandboxes. */
#ifndef HTTP_HARNESS_H
#define HTTP_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sup_http.h"

struct event_base;

/* The bearer token the harness's server takes. */
#define TH_TOKEN "secret-token-0123456789"

typedef struct th_server {
	struct event_base *base;
	sup_http *h;
	uint16_t port;
} th_server;

/* GET /produce: a producer that charges its reply as an agent's stream
 * does (sup_http_charge): TH_PRODUCE_LEN bytes in pieces of TH_PIECE,
 * never more sent and not given back than the server's credit_window.
 * What it saw, for the test to check. */
#define TH_PRODUCE_LEN (16u << 20)
#define TH_PIECE (64u << 10)
typedef struct th_produce_stats {
	size_t sent;        /* bytes written to the reply */
	size_t head;        /* the reply's head, in the backlog before the body */
	size_t max_backlog; /* the largest backlog after a write, the head's too */
} th_produce_stats;
extern th_produce_stats th_produced;

/* Route states released so far (requests ended, answered or not). */
extern unsigned th_released;

/* GET /later?n=N answers N loop passes after its act ran (0: at once, 1:
 * later in the same pass); PUT /stream?n=N answers N passes after its
 * body's end; GET /never never answers while th_never is set (a 404
 * otherwise: the fuzzer's clients would wait on it for good). */
extern bool th_never;

/* cfg: NULL for the defaults (max_body 4096, head/body timeouts 2 s). */
int th_start(th_server *s, const sup_http_cfg *cfg);
void th_stop(th_server *s);
/* The harness's defaults, to change before th_start. */
void th_default_cfg(sup_http_cfg *cfg);
/* Connections the server holds now. */
unsigned th_conns(const th_server *s);

/* Send req[0..len) in pieces of step bytes (0: whole) on a new connection,
 * shut our side when shut, and collect the answer until the server closes,
 * or nothing came for idle_ms (< 0: for -idle_ms rounds of the loop).
 * Returns the bytes (NUL-terminated, free them); *closed: the server
 * closed. */
char *th_talk(th_server *s, const void *req, size_t len, size_t step, bool shut, int idle_ms,
	      size_t *outlen, bool *closed);
/* Pump the loop for ms. */
void th_pump(th_server *s, int ms);
/* CLOCK_MONOTONIC in ms, the clock th_pump and th_talk go by. */
long th_now_ms(void);
/* How far the server's timers may run ahead of th_now_ms: libevent's clock
 * is CLOCK_MONOTONIC_COARSE (one tick behind), and ms are truncated. A
 * test that a timer did not fire early allows this much. */
long th_clock_slack_ms(void);

#endif
