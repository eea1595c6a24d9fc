#include "sup_stream.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sup_b64.h"
#include "sup_log.h"

/* Events under SMALL_EVENT bytes are copied into one batch; the batch goes
 * out once the connection's output drained, or at PEND_MAX: handed over
 * one by one, each small event would pin a buffer chain of 1 KiB or more. */
#define SMALL_EVENT 4096u
#define PEND_MAX (16u << 10)

struct sup_stream {
	sup_http_req *r;
	struct evbuffer *buf;         /* one event being built */
	struct evbuffer *pend;        /* small events batched while the reader is behind */
	sup_stream_fmt fmt;
	struct event *keepalive;      /* NULL: none */
	unsigned keepalive_s;
	const char *keepalive_line;   /* BARE: the keepalive object */
	bool armed;                   /* output of ours waits: on_drained will run */
};

sup_stream_fmt sup_stream_wanted(const char *accept)
{
	if (!accept)
		return SUP_STREAM_NONE;
	if (strcasestr(accept, "text/event-stream"))
		return SUP_STREAM_SSE;
	if (strcasestr(accept, "application/x-ndjson"))
		return SUP_STREAM_NDJSON;
	return SUP_STREAM_NONE;
}

size_t sup_stream_backlog(const sup_stream *s)
{
	return sup_http_backlog(s->r) + evbuffer_get_length(s->pend);
}

static void keepalive_arm(sup_stream *s)
{
	struct timeval tv = { (time_t)s->keepalive_s, 0 };
	if (s->keepalive)
		event_add(s->keepalive, &tv);
}

/* b (emptied) to the client, after the batch if b is not it. */
static void send_chunk(sup_stream *s, struct evbuffer *b)
{
	if (b != s->pend && evbuffer_get_length(s->pend))
		send_chunk(s, s->pend);
	if (!evbuffer_get_length(b))
		return;
	sup_http_write(s->r, b);
	s->armed = true;
	keepalive_arm(s); /* the stream is not idle: the next keepalive later */
}

static void on_drained(void *arg)
{
	sup_stream *s = arg;
	s->armed = false;
	send_chunk(s, s->pend);
}

sup_stream *sup_stream_start(sup_http_req *r, sup_stream_fmt fmt,
			     void (*on_credit)(size_t cost, void *ud), void *ud)
{
	sup_stream *s = calloc(1, sizeof(*s));
	if (!s || !(s->buf = evbuffer_new()) || !(s->pend = evbuffer_new())) {
		if (s && s->buf)
			evbuffer_free(s->buf);
		free(s);
		return NULL;
	}
	s->r = r;
	s->fmt = fmt;
	sup_http_on_drained(r, on_drained, s);
	sup_http_on_credit(r, on_credit, ud);
	sup_http_header(r, "Content-Type",
			fmt == SUP_STREAM_NDJSON || fmt == SUP_STREAM_LINES ? "application/x-ndjson"
			: fmt == SUP_STREAM_CONNECT ? "application/connect+json"
						    : "text/event-stream");
	sup_http_header(r, "Cache-Control", "no-cache");
	sup_http_header(r, "X-Accel-Buffering", "no");
	sup_http_start(r, 200, SUP_HTTP_CHUNKED);
	return s;
}

/* Hand the event in s->buf on; its cost comes back once the reader keeps up. */
static void flush_event(sup_stream *s, size_t cost)
{
	size_t len = evbuffer_get_length(s->buf);
	if (len < SMALL_EVENT) {
		char tmp[SMALL_EVENT];
		evbuffer_remove(s->buf, tmp, len);
		if (evbuffer_add(s->pend, tmp, len) < 0)
			sup_warn("stream: out of memory; an event of %zu bytes dropped", len);
		/* Out now unless our last chunk is still being written (then
		 * on_drained sends the batch), or the batch is big enough. */
		if (!s->armed || sup_http_backlog(s->r) == 0 || evbuffer_get_length(s->pend) >= PEND_MAX)
			send_chunk(s, s->pend);
	} else {
		send_chunk(s, s->buf);
	}
	sup_http_charge(s->r, cost);
}

/* The line before the base64 payload, without printf: it runs per frame. */
static int add_prefix(sup_stream *s, const char *event)
{
	bool sse = s->fmt == SUP_STREAM_SSE;
	if (evbuffer_add(s->buf, sse ? "event: " : "{\"event\":\"", sse ? 7 : 10) < 0 ||
	    evbuffer_add(s->buf, event, strlen(event)) < 0 ||
	    evbuffer_add(s->buf, sse ? "\ndata: " : "\",\"data\":\"", sse ? 7 : 10) < 0)
		return -1;
	return 0;
}

void sup_stream_data(sup_stream *s, const char *event, const uint8_t *p, size_t n, size_t cost)
{
	int rc = add_prefix(s, event);
	struct evbuffer_iovec v;
	size_t need = (n + 2) / 3 * 4;
	if (rc < 0 || (need && evbuffer_reserve_space(s->buf, (ev_ssize_t)need, &v, 1) < 1)) {
		sup_warn("stream: out of memory; %zu bytes of %s dropped", n, event);
		evbuffer_drain(s->buf, evbuffer_get_length(s->buf));
		sup_http_charge(s->r, cost);
		return;
	}
	if (need) {
		v.iov_len = sup_base64_encode_into(p, n, v.iov_base);
		evbuffer_commit_space(s->buf, &v, 1);
	}
	evbuffer_add(s->buf, s->fmt == SUP_STREAM_SSE ? "\n\n" : "\"}\n", s->fmt == SUP_STREAM_SSE ? 2 : 3);
	flush_event(s, cost);
}

static int dump_cb(const char *b, size_t size, void *data)
{
	return evbuffer_add(data, b, size);
}

/* One Connect envelope of o into s->buf: flags, length, the JSON. */
static void envelope(sup_stream *s, uint8_t flags, json_t *o)
{
	size_t at = evbuffer_get_length(s->buf);
	if (!o || json_dump_callback(o, dump_cb, s->buf, SUP_HTTP_JSON_DUMP) < 0) {
		static const char oom[] = "{\"error\":{\"code\":\"resource_exhausted\",\"message\":\"out of memory\"}}";
		evbuffer_drain(s->buf, evbuffer_get_length(s->buf));
		evbuffer_add(s->buf, oom, sizeof(oom) - 1);
		flags = 2; /* the stream cannot go on honestly */
		at = 0;
	}
	size_t n = evbuffer_get_length(s->buf) - at;
	uint8_t h[5] = { flags, (uint8_t)(n >> 24), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };
	evbuffer_prepend(s->buf, h, sizeof(h));
}

void sup_stream_connect_end(sup_stream *s, json_t *trailer)
{
	json_t *o = trailer ? trailer : json_object();
	envelope(s, 2, o);
	json_decref(o);
	flush_event(s, 0);
	sup_stream_end(s);
}

void sup_stream_json(sup_stream *s, const char *event, json_t *obj)
{
	sup_stream_json_cost(s, event, obj, 0);
}

void sup_stream_json_cost(sup_stream *s, const char *event, json_t *obj, size_t cost)
{
	json_t *o = obj;
	if (s->fmt == SUP_STREAM_CONNECT) {
		envelope(s, 0, obj);
		json_decref(obj);
		flush_event(s, cost);
		return;
	}
	if (s->fmt == SUP_STREAM_BARE || s->fmt == SUP_STREAM_LINES) {
		/* the object as is */
	} else if (s->fmt == SUP_STREAM_NDJSON) {
		o = json_pack("{s:s}", "event", event);
		if (o && obj)
			json_object_update(o, obj);
		json_decref(obj);
	} else {
		evbuffer_add_printf(s->buf, "event: %s\ndata: ", event);
	}
	if (!o || json_dump_callback(o, dump_cb, s->buf, SUP_HTTP_JSON_DUMP) < 0) {
		static const char oom[] = "\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
		evbuffer_drain(s->buf, evbuffer_get_length(s->buf));
		evbuffer_add_printf(s->buf, s->fmt == SUP_STREAM_SSE ? "event: error\ndata: {%s"
					    : s->fmt == SUP_STREAM_BARE ? "{\"type\":\"error\",%s"
					    : "{\"event\":\"error\",%s", oom);
	}
	json_decref(o);
	bool blank = s->fmt != SUP_STREAM_NDJSON && s->fmt != SUP_STREAM_LINES;
	evbuffer_add(s->buf, blank ? "\n\n" : "\n", blank ? 2 : 1);
	flush_event(s, cost);
}

void sup_stream_sse_raw(sup_stream *s, const char *id, const char *data, size_t n, size_t cost)
{
	int rc = 0;
	if (id)
		rc = evbuffer_add_printf(s->buf, "id: %s\n", id) < 0 ? -1 : 0;
	if (rc < 0 || evbuffer_add(s->buf, "data: ", 6) < 0 || evbuffer_add(s->buf, data, n) < 0 ||
	    evbuffer_add(s->buf, "\n\n", 2) < 0) {
		sup_warn("stream: out of memory; an event of %zu bytes dropped", n);
		evbuffer_drain(s->buf, evbuffer_get_length(s->buf));
	}
	flush_event(s, cost);
}

/* keepalive_s after the last chunk, unless output still waits (a reader
 * that is behind needs no filler). */
static void on_keepalive(evutil_socket_t fd, short what, void *arg)
{
	sup_stream *s = arg;
	if (sup_stream_backlog(s) == 0) {
		static const char sse[] = ": keepalive\n\n", nd[] = "{\"event\":\"keepalive\"}\n";
		bool is_sse = s->fmt == SUP_STREAM_SSE;
		if (s->fmt == SUP_STREAM_CONNECT) {
			json_t *o = json_loads(s->keepalive_line ? s->keepalive_line : "{}", 0, NULL);
			envelope(s, 0, o);
			json_decref(o);
		} else if (s->fmt == SUP_STREAM_BARE || s->fmt == SUP_STREAM_LINES)
			evbuffer_add_printf(s->buf, s->fmt == SUP_STREAM_BARE ? "%s\n\n" : "%s\n",
					    s->keepalive_line ? s->keepalive_line : "{}");
		else
			evbuffer_add(s->buf, is_sse ? sse : nd, is_sse ? sizeof(sse) - 1 : sizeof(nd) - 1);
		flush_event(s, 0);
	}
	keepalive_arm(s);
}

void sup_stream_keepalive_text(sup_stream *s, const char *line) /* BARE, CONNECT */
{
	s->keepalive_line = line;
}

int sup_stream_keepalive(sup_stream *s, unsigned secs)
{
	if (s->keepalive)
		return 0;
	s->keepalive = event_new(sup_http_base(s->r), -1, 0, on_keepalive, s);
	if (!s->keepalive)
		return -1;
	s->keepalive_s = secs;
	keepalive_arm(s);
	return 0;
}

void sup_stream_free(sup_stream *s)
{
	if (!s)
		return;
	if (s->keepalive)
		event_free(s->keepalive);
	sup_http_on_drained(s->r, NULL, NULL);
	evbuffer_free(s->buf);
	evbuffer_free(s->pend);
	free(s);
}

void sup_stream_end(sup_stream *s)
{
	if (s->keepalive)
		event_free(s->keepalive);
	s->keepalive = NULL; /* send_chunk would arm it again */
	send_chunk(s, s->pend);
	sup_http_end(s->r);
	sup_stream_free(s);
}
