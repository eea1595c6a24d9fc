/* Replies: bytes out. The status line and headers, a JSON answer with its
 * Content-Length, a streamed body (Content-Length, chunked, or for HTTP/1.0
 * delimited by the connection's end), HEAD (the head alone), the cost a
 * producer is charged until the client has read, and the switch to raw
 * bytes after "101 Switching Protocols". */
#include "sup_http_int.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sup_b64.h"
#include "sup_text.h"

static const char *reason(int status)
{
	switch (status) {
	case 101: return "Switching Protocols";
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 206: return "Partial Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 413: return "Content Too Large";
	case 416: return "Range Not Satisfiable";
	case 431: return "Request Header Fields Too Large";
	case 499: return "Client Closed Request";
	case 500: return "Internal Server Error";
	case 501: return "Not Implemented";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 507: return "Insufficient Storage";
	case 508: return "Loop Detected";
	default: return "Status";
	}
}

static bool head_only(const sup_http_req *r)
{
	return r->in.method && strcmp(r->in.method, "HEAD") == 0;
}

/* The status line and headers; length: of the body, SUP_HTTP_CHUNKED, or
 * UINT64_MAX - 1 for none (204). */
static void put_head(sup_http_req *r, int status, const char *ctype, uint64_t length)
{
	sup_conn *c = r->c;
	struct evbuffer *out = sup_conn_output(c);
	/* refused before a route took its body: what follows the body cannot
	 * be told from it, so the connection ends, and the head says so */
	if (c->h->stopping || r->body_unclaimed)
		c->close_after = true;
	r->status = status;
	evbuffer_add_printf(out, "HTTP/1.1 %d %s\r\nDate: %s\r\n", status, reason(status),
			    sup_http_date(c->h));
	if (ctype)
		evbuffer_add_printf(out, "Content-Type: %s\r\n", ctype);
	if (length == SUP_HTTP_CHUNKED && r->ph.minor >= 1)
		evbuffer_add(out, "Transfer-Encoding: chunked\r\n", 28);
	else if (length == SUP_HTTP_CHUNKED)
		c->close_after = true; /* HTTP/1.0: the end of the connection ends it */
	else if (length != UINT64_MAX - 1)
		evbuffer_add_printf(out, "Content-Length: %llu\r\n", (unsigned long long)length);
	if (r->hdr_out)
		evbuffer_add_buffer(out, r->hdr_out);
	if (c->close_after)
		evbuffer_add(out, "Connection: close\r\n", 19);
	else if (r->ph.minor == 0)
		evbuffer_add(out, "Connection: keep-alive\r\n", 24);
	evbuffer_add(out, "\r\n", 2);
	r->chunked_out = length == SUP_HTTP_CHUNKED && r->ph.minor >= 1;
	r->out_len = length;
}

void sup_http_header(sup_http_req *r, const char *name, const char *value)
{
	if (!r->hdr_out)
		r->hdr_out = evbuffer_new();
	if (r->hdr_out && !strpbrk(value, "\r\n"))
		evbuffer_add_printf(r->hdr_out, "%s: %s\r\n", name, value);
}

void sup_http_json(sup_http_req *r, int status, json_t *body)
{
	static const char oom[] = "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}\n";
	char small[4096], *big = NULL, *out = NULL;
	size_t len = 0;
	if (r->done || r->started) {
		/* Too late for an answer of its own: the client sees the reply cut. */
		json_decref(body);
		sup_http_cut(r, "failed after the reply started");
		return;
	}
	/* Most answers fit the stack; a bigger one is dumped again, sized. */
	if (body) {
		len = json_dumpb(body, small, sizeof(small) - 1, SUP_HTTP_JSON_DUMP);
		if (len && len < sizeof(small) - 1)
			out = small;
		else if (len && (big = malloc(len + 1)) && json_dumpb(body, big, len, SUP_HTTP_JSON_DUMP) == len)
			out = big;
		if (out)
			out[len++] = '\n';
		else
			status = 500;
	}
	json_decref(body);
	const char *bytes = out ? out : body ? oom : NULL;
	len = out ? len : body ? sizeof(oom) - 1 : 0;
	bool nobody = status == 204 || status == 304;
	put_head(r, status, len ? "application/json" : NULL, nobody ? UINT64_MAX - 1 : len);
	if (len && !head_only(r) && !nobody)
		evbuffer_add(sup_conn_output(r->c), bytes, len);
	free(big);
	sup_http_done(r);
}

int sup_http_set_bytes(json_t *o, const char *key, const char *p, size_t n)
{
	if (sup_utf8_valid((const uint8_t *)p, n))
		return json_object_set_new(o, key, json_stringn(p, n));
	size_t tl, bl;
	SBX_AUTO_FREE char *t = sup_utf8_repair((const uint8_t *)p, n, &tl);
	SBX_AUTO_FREE char *b = sup_base64_encode((const uint8_t *)p, n, &bl);
	char k2[40];
	snprintf(k2, sizeof(k2), "%s_b64", key);
	if (!t || !b || json_object_set_new(o, key, json_stringn(t, tl)) < 0)
		return -1;
	return json_object_set_new(o, k2, json_stringn(b, bl));
}

json_t *sup_http_error_json(const char *code, const char *message)
{
	/* Messages may quote guest or client bytes: never let that break JSON. */
	size_t ml;
	SBX_AUTO_FREE char *m = sup_utf8_repair((const uint8_t *)message, strlen(message), &ml);
	if (!m)
		return NULL;
	return json_pack("{s:{s:s, s:s%}}", "error", "code", code, "message", m, ml);
}

json_t *sup_http_error_flat(int status, const char *path, json_t *sbx_error)
{
	(void)status;
	(void)path;
	return json_incref(json_object_get(sbx_error, "error"));
}

static void error_reply(sup_http_req *r, int status, const char *code, const char *msg,
			const char *subject, size_t slen)
{
	json_t *o = sup_http_error_json(code, msg);
	if (o && subject)
		sup_http_set_bytes(json_object_get(o, "error"), "path", subject, slen);
	/* A client of another API reads errors in that API's shape. */
	const sup_http_cfg *cfg = &r->c->h->cfg;
	for (size_t i = 0; o && r->in.path && i < cfg->nerror_shapes; i++) {
		const sup_http_error_shape *sh = &cfg->error_shapes[i];
		if (strncmp(r->in.path, sh->prefix, strlen(sh->prefix)) != 0)
			continue;
		json_t *b = sh->body(status, r->in.path, o);
		if (b) {
			json_decref(o);
			o = b;
		}
		break;
	}
	if (status >= 500 && status != 503)
		snprintf(r->note, sizeof(r->note), "%s", msg);
	/* 503 is "not now": no sandbox in time, the node at its limit, too
	 * many commands, a store out of reach; a client's retry loop waits a
	 * second rather than spinning */
	if (status == 503)
		sup_http_header(r, "Retry-After", "1");
	sup_http_json(r, status, o);
}

void sup_http_refuse(sup_http_req *r, int status, const char *code, const char *msg)
{
	error_reply(r, status, code, msg, NULL, 0);
}

void sup_http_fail(sup_http_req *r, const sbx_err *err)
{
	const sup_http_family *f = r->mount ? r->mount->family : NULL;
	const char *code, *subject = NULL;
	size_t slen = 0;
	int status = sup_http_status(f ? f->name : NULL, err->code, &code);
	if (f && f->subject && r->state)
		subject = f->subject(r->state, err, &slen);
	error_reply(r, status, code, err->msg[0] ? err->msg : code, subject, slen);
}

/* ---- streamed replies ---- */

void sup_http_start(sup_http_req *r, int status, uint64_t length)
{
	if (r->done || r->started)
		return;
	r->started = true;
	put_head(r, status, NULL, length);
	/* HEAD: the head is the whole answer; the act is released. */
	if (head_only(r))
		sup_http_done(r);
}

void sup_http_write(sup_http_req *r, struct evbuffer *data)
{
	size_t n = evbuffer_get_length(data);
	struct evbuffer *out = sup_conn_output(r->c);
	if (r->done || !n || !(r->started || r->raw)) {
		evbuffer_drain(data, n);
		return;
	}
	if (r->chunked_out)
		evbuffer_add_printf(out, "%zx\r\n", n);
	evbuffer_add_buffer(out, data);
	if (r->chunked_out)
		evbuffer_add(out, "\r\n", 2);
	r->out_sent += n;
}

size_t sup_http_backlog(const sup_http_req *r)
{
	return evbuffer_get_length(sup_conn_output(r->c));
}

void sup_http_on_drained(sup_http_req *r, void (*cb)(void *ud), void *ud)
{
	r->on_drained = cb;
	r->drained_ud = ud;
}

void sup_http_on_credit(sup_http_req *r, void (*cb)(size_t cost, void *ud), void *ud)
{
	r->on_credit = cb;
	r->credit_ud = ud;
}

/* Whether cost may go back now: the backlog and all the producer may
 * still send on the credit it has (its window) fit the budget together. */
static bool credit_fits(const sup_http_req *r)
{
	size_t backlog = sup_http_backlog(r), window = r->c->h->cfg.credit_window;
	return backlog == 0 || (backlog < SUP_HTTP_HWM && window <= SUP_HTTP_HWM - backlog);
}

void sup_http_give_credit(sup_http_req *r)
{
	size_t c = r->owed;
	if (!c || !credit_fits(r))
		return;
	r->owed = 0;
	if (r->on_credit)
		r->on_credit(c, r->credit_ud);
}

void sup_http_charge(sup_http_req *r, size_t cost)
{
	r->owed += cost;
	if (r->done) {
		/* Nobody reads any more: the producer gets it back at once. */
		r->owed = 0;
		if (cost && r->on_credit)
			r->on_credit(cost, r->credit_ud);
		return;
	}
	sup_http_give_credit(r);
}

void sup_http_end(sup_http_req *r)
{
	if (r->done)
		return;
	if (r->chunked_out)
		evbuffer_add(sup_conn_output(r->c), "0\r\n\r\n", 5);
	else if (r->started && r->out_len != SUP_HTTP_CHUNKED && r->out_len != SUP_HTTP_NO_BODY &&
		 r->out_sent != r->out_len)
		r->c->close_after = true;
	if (r->raw)
		r->c->close_after = true;
	sup_http_done(r);
}

void sup_http_cut(sup_http_req *r, const char *why)
{
	if (r->done)
		return;
	r->cut = true;
	r->c->close_after = true;
	snprintf(r->note, sizeof(r->note), "%s", why);
	sup_http_done(r);
}

/* ---- upgrade ---- */

void sup_http_upgrade(sup_http_req *r, const char *proto, const char *const *headers,
		      void (*on_read)(void *ud), void *ud)
{
	sup_conn *c = r->c;
	struct evbuffer *out = sup_conn_output(c);
	if (r->done || r->started)
		return;
	r->status = 101;
	r->raw = true;
	r->started = true;
	c->close_after = true;
	evbuffer_add_printf(out, "HTTP/1.1 101 %s\r\nUpgrade: %s\r\nConnection: Upgrade\r\n",
			    reason(101), proto);
	for (size_t i = 0; headers && headers[i]; i += 2)
		evbuffer_add_printf(out, "%s: %s\r\n", headers[i], headers[i + 1]);
	evbuffer_add(out, "\r\n", 2);
	r->on_ready = on_read;
	r->ready_ud = ud;
	sup_conn_reading(c, true);
	if (evbuffer_get_length(sup_conn_input(c))) {
		r->ready_pending = true;
		sup_conn_kick(c);
	}
}

void sup_http_takeover(sup_http_req *r, void (*on_read)(void *ud), void *ud)
{
	sup_conn *c = r->c;
	if (r->done || r->started)
		return;
	r->raw = true;
	r->close_asked = c->close_after;
	c->close_after = true;
	r->on_ready = on_read;
	r->ready_ud = ud;
	sup_conn_reading(c, false);
}

void sup_http_takeover_end(sup_http_req *r)
{
	if (r->done)
		return;
	r->body_done = true;
	r->c->close_after = r->close_asked || r->c->rd_eof;
	sup_http_done(r);
}

void sup_http_raw_status(sup_http_req *r, int status)
{
	r->status = status;
	r->started = true;
}

struct evbuffer *sup_http_raw_input(sup_http_req *r)
{
	return sup_conn_input(r->c);
}

void sup_http_raw_pause(sup_http_req *r, bool paused)
{
	/* Not reading, the client's end and a reset are seen by the watch
	 * (sup_http_conn.c). */
	sup_conn_reading(r->c, !paused);
}

void sup_http_raw_half_close(sup_http_req *r)
{
	r->raw_half = true;
}

bool sup_http_raw_ended(sup_http_req *r)
{
	return r->c->rd_eof && evbuffer_get_length(sup_conn_input(r->c)) == 0;
}
