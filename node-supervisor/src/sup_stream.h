/* A streamed HTTP reply (SSE or NDJSON) with backpressure: events go out as
 * chunks of one evhttp request, and the producer's cost for each data event
 * is given back (on_credit) only once the connection's output buffer is
 * below a high watermark, so a slow reader holds the producer back instead
 * of growing our memory. Owns the evhttp request from start to end and
 * notices the client going away (the connection's close callback). It must
 * not know about sandboxes, agents or the core. Loop thread only. */
#ifndef SUP_STREAM_H
#define SUP_STREAM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct evhttp_request;
typedef struct sup_stream sup_stream;

typedef enum sup_stream_fmt {
	SUP_STREAM_NONE = 0,
	SUP_STREAM_SSE,    /* text/event-stream: "event: X\ndata: Y\n\n" */
	SUP_STREAM_NDJSON, /* application/x-ndjson: {"event":"X",...}\n */
} sup_stream_fmt;

/* The default high watermark of a connection's output buffer. */
#define SUP_STREAM_HWM (1u << 20)

typedef struct sup_stream_cbs {
	/* Bytes worth cost were handed to a connection below the watermark. */
	void (*on_credit)(size_t cost, void *ud);
	/* The client went away: nothing more can be sent. The owner stops its
	 * producer and calls sup_stream_end (which then only frees). */
	void (*on_gone)(void *ud);
} sup_stream_cbs;

/* The format the Accept header asks for (NONE: a plain JSON answer). */
sup_stream_fmt sup_stream_wanted(const char *accept);

/* Send the 200 head and take over req. NULL on allocation failure (req is
 * untouched then). */
sup_stream *sup_stream_start(struct evhttp_request *req, sup_stream_fmt fmt, size_t hwm,
			     const sup_stream_cbs *cbs, void *ud);
/* A data event: bytes base64-encoded in "data". Its cost comes back
 * through on_credit (at once, or once the reader caught up). */
void sup_stream_data(sup_stream *s, const char *event, const uint8_t *p, size_t n, size_t cost);
/* An event whose payload is the JSON object obj (reference taken). For
 * NDJSON the object gets "event":event added. */
void sup_stream_json(sup_stream *s, const char *event, json_t *obj);
/* The same for an event the producer charged cost for: it comes back
 * through on_credit like a data event's (at once, or once the reader caught
 * up), so a reader that stops holds the producer back. */
void sup_stream_json_cost(sup_stream *s, const char *event, json_t *obj, size_t cost);
/* While the stream is idle, a comment (SSE ": keepalive", NDJSON
 * {"event":"keepalive"}) every secs seconds, so proxies keep it open; never
 * while output waits for the reader. 0, or -1 (no connection, no memory). */
int sup_stream_keepalive(sup_stream *s, unsigned secs);
/* True once the client is gone. */
bool sup_stream_gone(const sup_stream *s);
/* Bytes waiting in the connection's output buffer (for tests and logs). */
size_t sup_stream_backlog(const sup_stream *s);
/* Finish the reply and free s. No callback runs after this. */
void sup_stream_end(sup_stream *s);

#endif
