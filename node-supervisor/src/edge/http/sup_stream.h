/* A streamed reply of events (SSE or NDJSON) on a request of the HTTP edge.
 * Small events are batched while the client is behind; a producer's cost
 * for each event comes back (on_credit) only once the client has read what
 * was written (sup_http_charge), so a slow reader holds the producer back
 * instead of growing our memory. An idle stream can send keepalive
 * comments. It must not know sandboxes, agents or the core. Loop thread
 * only. */
#ifndef SUP_STREAM_H
#define SUP_STREAM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sup_http.h"

typedef struct sup_stream sup_stream;

typedef enum sup_stream_fmt {
	SUP_STREAM_NONE = 0,
	SUP_STREAM_SSE,    /* text/event-stream: "event: X\ndata: Y\n\n" */
	SUP_STREAM_NDJSON, /* application/x-ndjson: {"event":"X",...}\n */
	SUP_STREAM_BARE,   /* the object as is, then a blank line: {...}\n\n (the
			    * OpenSandbox execd stream; the event name is the
			    * caller's, inside the object) */
	SUP_STREAM_LINES,  /* application/x-ndjson: the object as is, one a line
			    * (the event name is the caller's, inside it) */
	SUP_STREAM_CONNECT, /* application/connect+json: each object in an
			     * envelope (flags 0, its length as 4 bytes big-
			     * endian), the Connect protocol's server stream;
			     * ended by sup_stream_connect_end */
} sup_stream_fmt;

/* The format the Accept header asks for (NONE: a plain JSON answer). */
sup_stream_fmt sup_stream_wanted(const char *accept);

/* Send the 200 head on r; costs come back through on_credit(cost, ud).
 * NULL without memory (nothing sent). */
sup_stream *sup_stream_start(sup_http_req *r, sup_stream_fmt fmt,
			     void (*on_credit)(size_t cost, void *ud), void *ud);
/* A data event: bytes base64-encoded in "data". */
void sup_stream_data(sup_stream *s, const char *event, const uint8_t *p, size_t n, size_t cost);
/* An event whose payload is the JSON object obj (reference taken); for
 * NDJSON it gets "event":event added. */
void sup_stream_json(sup_stream *s, const char *event, json_t *obj);
void sup_stream_json_cost(sup_stream *s, const char *event, json_t *obj, size_t cost);
/* An SSE event of the default type whose data is one line of text as is
 * (no newline in it), with its id (NULL: none). */
void sup_stream_sse_raw(sup_stream *s, const char *id, const char *data, size_t n, size_t cost);
/* While the stream is idle, a comment (SSE ": keepalive", NDJSON
 * {"event":"keepalive"}) every secs seconds. 0, or -1 without memory. */
int sup_stream_keepalive(sup_stream *s, unsigned secs);
/* For SUP_STREAM_BARE, LINES and CONNECT: the keepalive is this object (one line, without
 * the blank line; a static string), set before sup_stream_keepalive. */
void sup_stream_keepalive_text(sup_stream *s, const char *line);
/* CONNECT: the end-stream envelope (flags 2) with trailer (reference
 * taken; NULL: {}), then as sup_stream_end. */
void sup_stream_connect_end(sup_stream *s, json_t *trailer);
/* Bytes waiting for the client. */
size_t sup_stream_backlog(const sup_stream *s);
/* The last event went: end the reply (the request is over) and free s. */
void sup_stream_end(sup_stream *s);
/* Free s without a word more (its request is over: the client went). */
void sup_stream_free(sup_stream *s);

#endif
