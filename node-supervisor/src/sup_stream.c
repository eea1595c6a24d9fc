#include "sup_stream.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sup_api.h"
#include "sup_httpin.h"
#include "sup_log.h"
#include "sup_text.h"

/* Events under SMALL_EVENT bytes are copied into one batch; the batch goes
 * out once the connection's output drained, or at PEND_MAX. */
#define SMALL_EVENT 4096u
#define PEND_MAX (16u << 10)

struct sup_stream {
	struct evhttp_request *req;   /* NULL once evhttp freed it */
	struct evhttp_connection *evcon; /* NULL once the client is gone */
	struct evbuffer *buf;         /* one event being built */
	struct evbuffer *pend;        /* small events batched while the reader is behind */
	sup_stream_fmt fmt;
	size_t hwm;
	size_t owed;                  /* cost held back until the reader drains */
	const sup_stream_cbs *cbs;
	void *ud;
	struct event *keepalive;      /* NULL: none */
	unsigned keepalive_s;
	bool armed;                   /* on_drained will run: something of ours waits */
	bool gone;
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

static struct evbuffer *output_of(const sup_stream *s)
{
	struct bufferevent *bev = s->evcon ? evhttp_connection_get_bufferevent(s->evcon) : NULL;
	return bev ? bufferevent_get_output(bev) : NULL;
}

static size_t output_len(const sup_stream *s)
{
	struct evbuffer *out = output_of(s);
	return out ? evbuffer_get_length(out) : 0;
}

size_t sup_stream_backlog(const sup_stream *s)
{
	return output_len(s) + evbuffer_get_length(s->pend);
}

bool sup_stream_gone(const sup_stream *s)
{
	return s->gone;
}

static void give_back(sup_stream *s)
{
	size_t c = s->owed;
	s->owed = 0;
	if (c && s->cbs->on_credit)
		s->cbs->on_credit(c, s->ud);
}

static void keepalive_arm(sup_stream *s)
{
	struct timeval tv = { (time_t)s->keepalive_s, 0 };
	if (s->keepalive)
		event_add(s->keepalive, &tv);
}

/* One chunk to the connection: b (emptied), after the batch if b is not it. */
static void on_drained(struct evhttp_connection *evcon, void *arg);
static void send_chunk(sup_stream *s, struct evbuffer *b)
{
	if (b != s->pend && evbuffer_get_length(s->pend))
		send_chunk(s, s->pend);
	if (!evbuffer_get_length(b))
		return;
	evhttp_send_reply_chunk_with_cb(s->req, b, on_drained, s);
	evbuffer_drain(b, evbuffer_get_length(b));
	s->armed = true;
	keepalive_arm(s); /* the stream is not idle: the next keepalive later */
}

/* evhttp calls this each time the connection's output buffer empties. */
static void on_drained(struct evhttp_connection *evcon, void *arg)
{
	sup_stream *s = arg;
	(void)evcon;
	s->armed = false;
	send_chunk(s, s->pend);
	if (sup_stream_backlog(s) < s->hwm)
		give_back(s);
}

static void on_close(struct evhttp_connection *evcon, void *arg)
{
	sup_stream *s = arg;
	/* The client hung up (or evhttp is being freed). When evhttp detached
	 * the request from the connection it is ours to free at the end;
	 * otherwise the connection frees it right after this. */
	if (evhttp_request_get_connection(s->req) == evcon)
		s->req = NULL;
	s->evcon = NULL;
	s->gone = true;
	s->owed = 0;
	if (s->cbs->on_gone)
		s->cbs->on_gone(s->ud);
}

sup_stream *sup_stream_start(struct evhttp_request *req, sup_stream_fmt fmt, size_t hwm,
			     const sup_stream_cbs *cbs, void *ud)
{
	sup_stream *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->buf = evbuffer_new();
	s->pend = evbuffer_new();
	if (!s->buf || !s->pend) {
		if (s->buf)
			evbuffer_free(s->buf);
		if (s->pend)
			evbuffer_free(s->pend);
		free(s);
		return NULL;
	}
	s->req = req;
	s->fmt = fmt;
	s->hwm = hwm ? hwm : SUP_STREAM_HWM;
	s->cbs = cbs;
	s->ud = ud;
	struct evkeyvalq *oh = evhttp_request_get_output_headers(req);
	evhttp_add_header(oh, "Content-Type",
			  fmt == SUP_STREAM_SSE ? "text/event-stream" : "application/x-ndjson");
	evhttp_add_header(oh, "Cache-Control", "no-cache");
	evhttp_add_header(oh, "X-Accel-Buffering", "no");
	s->evcon = evhttp_request_get_connection(req);
	if (s->evcon) {
		evhttp_connection_set_closecb(s->evcon, on_close, s);
		/* libevent writes 16 KiB per syscall by default; a streamed
		 * response moves up to hwm per write instead. */
		struct bufferevent *bev = evhttp_connection_get_bufferevent(s->evcon);
		if (bev)
			bufferevent_set_max_single_write(bufferevent_get_underlying(bev) ?: bev, s->hwm);
	} else {
		s->gone = true;
	}
	evhttp_send_reply_start(req, 200, "OK");
	return s;
}

/* Hand the event in s->buf to the connection; cost comes back now if the
 * reader keeps up, else when the output buffer has drained. */
static void flush_event(sup_stream *s, size_t cost)
{
	if (s->gone || !s->req) {
		evbuffer_drain(s->buf, evbuffer_get_length(s->buf));
		if (cost && s->cbs->on_credit)
			s->cbs->on_credit(cost, s->ud);
		return;
	}
	s->owed += cost;
	size_t len = evbuffer_get_length(s->buf);
	if (len < SMALL_EVENT) {
		/* Copied into the batch: handed over as it is, each small event
		 * would keep a buffer chain of 1 KiB or more while it waits. */
		char tmp[SMALL_EVENT];
		evbuffer_copyout(s->buf, tmp, len);
		evbuffer_drain(s->buf, len);
		if (evbuffer_add(s->pend, tmp, len) < 0)
			sup_warn("stream: out of memory; an event of %zu bytes dropped", len);
		/* Out now unless our last chunk is still being written (then
		 * on_drained sends the batch), or the batch is big enough. */
		if (!s->armed || output_len(s) == 0 || evbuffer_get_length(s->pend) >= PEND_MAX)
			send_chunk(s, s->pend);
	} else {
		send_chunk(s, s->buf);
	}
	if (sup_stream_backlog(s) < s->hwm)
		give_back(s);
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
		if (cost && s->cbs->on_credit)
			s->cbs->on_credit(cost, s->ud);
		return;
	}
	if (need) {
		v.iov_len = sup_base64_encode_into(p, n, v.iov_base);
		evbuffer_commit_space(s->buf, &v, 1);
	}
	if (s->fmt == SUP_STREAM_SSE)
		evbuffer_add(s->buf, "\n\n", 2);
	else
		evbuffer_add(s->buf, "\"}\n", 3);
	flush_event(s, cost);
}

static int dump_cb(const char *b, size_t size, void *data)
{
	return evbuffer_add(data, b, size);
}

void sup_stream_json(sup_stream *s, const char *event, json_t *obj)
{
	sup_stream_json_cost(s, event, obj, 0);
}

void sup_stream_json_cost(sup_stream *s, const char *event, json_t *obj, size_t cost)
{
	json_t *o = obj;
	if (s->fmt == SUP_STREAM_NDJSON) {
		o = json_pack("{s:s}", "event", event);
		if (o && obj)
			json_object_update(o, obj);
		json_decref(obj);
	} else {
		evbuffer_add_printf(s->buf, "event: %s\ndata: ", event);
	}
	if (!o || json_dump_callback(o, dump_cb, s->buf, SUP_API_JSON_DUMP) < 0) {
		static const char oom[] = "\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
		evbuffer_drain(s->buf, evbuffer_get_length(s->buf));
		if (s->fmt == SUP_STREAM_SSE)
			evbuffer_add_printf(s->buf, "event: error\ndata: {%s", oom);
		else
			evbuffer_add_printf(s->buf, "{\"event\":\"error\",%s", oom);
	}
	json_decref(o);
	evbuffer_add(s->buf, s->fmt == SUP_STREAM_SSE ? "\n\n" : "\n", s->fmt == SUP_STREAM_SSE ? 2 : 1);
	flush_event(s, cost);
}

/* keepalive_s after the last chunk, unless output still waits (a reader
 * that is behind needs no filler). */
static void on_keepalive(evutil_socket_t fd, short what, void *arg)
{
	sup_stream *s = arg;
	(void)fd;
	(void)what;
	if (s->gone || !s->req)
		return;
	if (sup_stream_backlog(s) == 0) {
		static const char sse[] = ": keepalive\n\n", nd[] = "{\"event\":\"keepalive\"}\n";
		if (s->fmt == SUP_STREAM_SSE)
			evbuffer_add(s->buf, sse, sizeof(sse) - 1);
		else
			evbuffer_add(s->buf, nd, sizeof(nd) - 1);
		flush_event(s, 0);
	}
	keepalive_arm(s);
}

int sup_stream_keepalive(sup_stream *s, unsigned secs)
{
	struct event_base *base = s->evcon ? evhttp_connection_get_base(s->evcon) : NULL;
	if (!base || s->keepalive)
		return base ? 0 : -1;
	s->keepalive = event_new(base, -1, 0, on_keepalive, s);
	if (!s->keepalive)
		return -1;
	s->keepalive_s = secs;
	keepalive_arm(s);
	return 0;
}

void sup_stream_end(sup_stream *s)
{
	if (!s)
		return;
	if (s->keepalive)
		event_free(s->keepalive);
	s->keepalive = NULL; /* send_chunk would arm it again */
	if (s->evcon)
		evhttp_connection_set_closecb(s->evcon, NULL, NULL);
	if (!s->gone && s->req)
		send_chunk(s, s->pend);
	/* A detached request (client gone) is freed by this; an attached one
	 * gets the last chunk and goes back to evhttp. */
	if (s->req)
		sup_httpin_reply_end(s->req);
	evbuffer_free(s->buf);
	evbuffer_free(s->pend);
	free(s);
}
