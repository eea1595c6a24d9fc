/* HTTP input framing for evhttp connections, so an upload's body streams
 * instead of being read whole into memory (evhttp does that before it calls
 * a handler). Every accepted connection gets a bufferevent filter
 * (evhttp_set_bevcb) that reads request heads itself: a normal request
 * passes through unchanged with exactly its Content-Length body; an upload
 * (a method and path the owner names) passes on with its head rewritten to
 * "Content-Length: 0" and "Connection: close", and its body stays in the
 * socket's bufferevent for the handler to take as fast as it can pass it
 * on (reading the socket stops at SUP_HTTPIN_BODY_HWM meanwhile), moving
 * it out of the socket's input buffer without a copy. Anything the
 * filter cannot frame exactly as evhttp would (chunked normal requests,
 * odd heads) leaves the rest of the connection to evhttp unchanged.
 * Owns the per-connection filter state. It must not know about files,
 * sandboxes or agents. Loop thread only. */
#ifndef SUP_HTTPIN_H
#define SUP_HTTPIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

#include "sbx/err.h"

struct bufferevent;
struct evbuffer;
struct event;
struct event_base;
struct evhttp_request;
typedef struct sup_httpin sup_httpin;

/* Socket bytes buffered per upload before reading stops. */
#define SUP_HTTPIN_BODY_HWM (256 * 1024)

/* Whether a request (method and path without the query, NUL-terminated)
 * is an upload. */
typedef struct sup_httpin_cfg {
	bool (*is_upload)(const char *method, const char *path, void *ud);
	void *ud;
} sup_httpin_cfg;

/* For evhttp_set_bevcb(http, sup_httpin_bevcb, cfg); cfg must outlive the
 * connections (evhttp_free ends them). */
struct bufferevent *sup_httpin_bevcb(struct event_base *base, void *cfg);

/* An EV_CLOSED event on req's connection, added, that runs cb(fd, what, ud)
 * when the client hangs up while req waits (e.g. on an agent); NULL where
 * the backend cannot tell (no EV_FEATURE_EARLY_CLOSE) or req has no
 * connection. The caller frees it. */
struct event *sup_httpin_watch_hangup(struct event_base *base, struct evhttp_request *req,
				      void (*cb)(evutil_socket_t fd, short what, void *ud),
				      void *ud);

/* evhttp_send_reply_end for a reply that may have been sent without chunks
 * (a Content-Length download, any reply to HTTP/1.0): on a filtered
 * connection the end waits until the socket took every byte, else evhttp
 * would close a "Connection: close" connection with the last ones unsent.
 * req is handed over either way. */
void sup_httpin_reply_end(struct evhttp_request *req);

/* The upload on req's connection whose body nobody took yet, or NULL (no
 * filter, or evhttp read the body itself: see evhttp_request_get_input_buffer). */
sup_httpin *sup_httpin_upload_of(struct evhttp_request *req);

/* Framing of the upload that may not be trusted (see sup_httpin_parse_head),
 * or NULL. Such a body is never read: answer 400. */
const char *sup_httpin_refused(const sup_httpin *c);
/* Content-Length, or UINT64_MAX for a chunked body. */
uint64_t sup_httpin_length(const sup_httpin *c);
bool sup_httpin_wants_continue(const sup_httpin *c);

/* Take the body from now on: reading resumes, and on_ready(ud) runs (from
 * the event loop, never inside a call of this module) whenever new bytes
 * may be there. */
void sup_httpin_start(sup_httpin *c, void (*on_ready)(void *ud), void *ud);
/* Write "100 Continue" to the client (only for HTTP/1.1 asking for it). */
void sup_httpin_send_continue(sup_httpin *c);
/* Body bytes: > 0 that many (<= max) at the front of *buf, the socket's
 * input buffer (chunked framing before them is skipped), for the taker to
 * move out (evbuffer_remove_buffer moves whole chains without a copy),
 * 0 the body is complete, -EAGAIN wait for on_ready, -EBADMSG bad chunked
 * framing, -ECONNRESET the client's end came first (err says what). */
int sup_httpin_body(sup_httpin *c, size_t max, struct evbuffer **buf, sbx_err *err);
/* The taker removed the first n of those bytes from *buf. */
void sup_httpin_took(sup_httpin *c, size_t n);
/* Done with the body (whole or not): on_ready will not run again, and
 * whatever else arrives on the connection is discarded until it closes. */
void sup_httpin_stop(sup_httpin *c);

#endif
