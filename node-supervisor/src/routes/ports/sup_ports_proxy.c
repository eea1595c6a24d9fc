/* One proxied request on one port.open stream (DESIGN.md, "Ports").
 *
 * The request goes to the server with Connection: close, so each stream
 * carries one request and its answer; the client's connection keeps its
 * own keep-alive because the answer is framed again here. The answer's
 * head is found (bounded by the edge's head limit) and parsed with the
 * edge's strict parser; its body is passed on as it comes: Content-Length
 * as it is, chunked decoded and chunked again (so SSE and other streamed
 * answers flow event by event), a close-delimited one chunked until the
 * server closes. A 101 to an upgrade the client asked for turns both
 * sides into a raw byte pipe, as does a tunnel (Upgrade: tcp).
 * Backpressure: the server's bytes are charged to the client's connection
 * (sup_http_charge) and their credit goes back to the agent only once the
 * client has read them; the client's bytes wait here at most SUP_PP_UP_MAX
 * and are read from the client only as the agent's credit allows. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "sbx/proto.h"
#include "sup_log.h"
#include "sup_ports_int.h"

static void pump_up(void *ud);

/* The whole request is with the server: its answer's head is due within
 * --ports-answer-timeout (a slow upload is the client's, not the server's). */
static void answer_wait(sup_pp *pp)
{
	struct timeval tv = { (time_t)(pp->ctx->answer_ms / 1000),
			      (suseconds_t)(pp->ctx->answer_ms % 1000) * 1000 };
	if (pp->answer_due)
		evtimer_add(pp->answer_due, &tv);
}

/* Stop the stream (no callback of it runs any more). */
static void pp_stop(sup_pp *pp)
{
	if (pp->op) {
		sup_op_cancel(pp->op);
		pp->op = NULL;
	}
	if (pp->answer_due)
		evtimer_del(pp->answer_due);
	pp->resp = SUP_PP_DONE;
}

/* A failure: an error answer before the reply started, a cut after. */
static void pp_fail(sup_pp *pp, const sbx_err *e)
{
	bool started = pp->resp != SUP_PP_HEAD;
	pp_stop(pp);
	if (started)
		sup_http_cut(pp->r, e->msg);
	else
		sup_http_fail(pp->r, e);
}

/* What the server sent that no client may be shown: 502 before the reply
 * started, a cut after. The server is the sandbox's program, not the
 * agent: nobody is blamed. */
static void pp_bad_gateway(sup_pp *pp, const char *why)
{
	sbx_err e;
	sbx_err_set(&e, -EBADMSG, "port %u: %s", pp->port, why);
	pp_fail(pp, &e);
}

static void cdp_answer(sup_pp *pp);

static void pp_finish(sup_pp *pp)
{
	pp_stop(pp);
	if (pp->collect)
		cdp_answer(pp);
	else
		sup_http_end(pp->r);
}

static void on_credit(size_t cost, void *ud)
{
	sup_pp *pp = ud;
	if (pp->op)
		sup_op_consumed(pp->op, cost);
}

/* Body bytes p[0..n) of the frame on_data has for the client, by
 * reference to the agent's frame where it can be (no copy here); they go
 * out with flush(). */
static int pass(sup_pp *pp, const uint8_t *p, size_t n)
{
	if (n == 0)
		return 0;
	if (pp->collect) {
		pp->got += n;
		return evbuffer_add(pp->json, p, n) < 0 ? -ENOMEM : 0;
	}
	if (sup_core_call_add_data(pp->op, p, n, pp->chunk) < 0)
		return -ENOMEM;
	pp->got += n;
	return 0;
}

/* What one frame brought, to the client at once: a chunked answer's
 * pieces leave as one chunk (the edge's framing), not one per piece the
 * server's own chunks cut it into. */
static void flush(sup_pp *pp)
{
	if (evbuffer_get_length(pp->chunk) > 0)
		sup_http_write(pp->r, pp->chunk);
}

/* Body bytes of the answer as its framing says; 1 when the body is whole. */
static int body(sup_pp *pp, const uint8_t *p, size_t n)
{
	switch (pp->resp) {
	case SUP_PP_LENGTH: {
		size_t k = n < pp->left ? n : (size_t)pp->left;
		if (pass(pp, p, k) < 0)
			return -ENOMEM;
		pp->left -= k;
		return pp->left == 0; /* bytes past Content-Length are dropped */
	}
	case SUP_PP_CHUNKED:
		while (n > 0) {
			size_t used = 0;
			const char *why = NULL;
			int st = sup_httpin_chunked_frame(&pp->dec, p, n, &used, &why);
			if (st < 0) {
				pp_bad_gateway(pp, why ? why : "bad chunked framing");
				return -EBADMSG;
			}
			p += used;
			n -= used;
			if (st == SUP_HTTPIN_END)
				return 1;
			if (st == SUP_HTTPIN_DATA) {
				size_t k = n < pp->dec.left ? n : (size_t)pp->dec.left;
				if (pass(pp, p, k) < 0)
					return -ENOMEM;
				sup_httpin_chunked_took(&pp->dec, k);
				p += k;
				n -= k;
			}
		}
		return 0;
	case SUP_PP_CLOSE:
	case SUP_PP_RAW:
		return pass(pp, p, n) < 0 ? -ENOMEM : 0;
	default:
		return 0;
	}
}

static void on_raw_read(void *ud)
{
	pump_up(ud);
}

/* A 101 the client asked for: the same head on, then raw bytes. */
static int switch_protocols(sup_pp *pp, const sup_httpin_head *h)
{
	const char *pairs[2 * SUP_HTTPIN_MAX_HEADERS + 1];
	char *proto = NULL;
	size_t np = 0;
	int rc = 0;
	for (size_t i = 0; i < h->nhdrs; i++) {
		const sup_httpin_hdr *hd = &h->hdrs[i];
		if (hd->name_len == 7 && strncasecmp(hd->name, "Upgrade", 7) == 0) {
			free(proto);
			proto = strndup(hd->value, hd->value_len);
			continue;
		}
		if (!sup_pp_pass_response_header(h, hd))
			continue;
		pairs[np++] = strndup(hd->name, hd->name_len);
		pairs[np++] = strndup(hd->value, hd->value_len);
		if (!pairs[np - 1] || !pairs[np - 2])
			rc = -ENOMEM;
	}
	pairs[np] = NULL;
	if (rc == 0 && !proto)
		rc = -EBADMSG;
	if (rc == 0) {
		pp->resp = SUP_PP_RAW;
		sup_http_on_credit(pp->r, on_credit, pp);
		sup_http_upgrade(pp->r, proto, pairs, on_raw_read, pp);
	}
	for (size_t i = 0; i < np; i++)
		free((char *)pairs[i]);
	free(proto);
	return rc;
}

/* A DevTools discovery answer: its body gathered (a 200 with a length
 * in bounds; another passes on as it is, but to GET .../browser), the
 * reply made of it once whole (cdp_answer). 1 when done already. */
static int collect(sup_pp *pp, const sup_httpin_head *h, const char *method)
{
	bool ok = h->status == 200 && strcmp(method, "HEAD") != 0 && h->has_cl && !h->te_chunked &&
		  h->cl <= SUP_PORTS_CDP_JSON_MAX;
	if (!ok && pp->mode == SUP_PP_BROWSER) {
		char why[96];
		snprintf(why, sizeof(why), "DevTools' /json/version answered %d without a JSON body",
			 h->status);
		pp_bad_gateway(pp, why);
		return -EBADMSG;
	}
	if (!ok) {
		pp->cdp_json = false;
		return 2;
	}
	pp->json = evbuffer_new();
	if (!pp->json)
		return -ENOMEM;
	pp->collect = true;
	pp->resp = SUP_PP_LENGTH;
	pp->left = h->cl;
	if (pp->left == 0) {
		pp_finish(pp);
		return 1;
	}
	return 0;
}

/* The answer's head is whole in down[0..len): the reply starts. */
static int answer_head(sup_pp *pp, size_t len)
{
	sup_httpin_head *h = malloc(sizeof(*h));
	const char *buf = (const char *)evbuffer_pullup(pp->down, (ssize_t)len);
	const char *method = sup_http_input(pp->r)->method;
	int rc = 0;
	if (!h || !buf) {
		free(h);
		return -ENOMEM;
	}
	if (sup_httpin_parse_response(buf, len, h) < 0) {
		pp_bad_gateway(pp, "its answer's head is malformed");
		rc = -EBADMSG;
	} else if (h->status == 101 && pp->upgrade) {
		rc = switch_protocols(pp, h);
		if (rc == -EBADMSG)
			pp_bad_gateway(pp, "a 101 without Upgrade");
	} else if (h->status < 200) {
		rc = 0; /* 100, 103: informational, the real head follows */
		pp->scan = (sup_httpin_headscan){ 0 };
	} else if (h->bad || (h->has_te && !h->te_chunked)) {
		pp_bad_gateway(pp, h->bad ? h->bad : "a Transfer-Encoding other than chunked");
		rc = -EBADMSG;
	} else if ((pp->cdp_json || pp->mode == SUP_PP_BROWSER) &&
		   (rc = collect(pp, h, method)) != 2) {
		/* gathered (or refused) */
	} else {
		char name[128], value[8192];
		rc = 0;
		for (size_t i = 0; i < h->nhdrs; i++) {
			const sup_httpin_hdr *hd = &h->hdrs[i];
			if (!sup_pp_pass_response_header(h, hd) || hd->name_len >= sizeof(name) ||
			    hd->value_len >= sizeof(value))
				continue;
			snprintf(name, sizeof(name), "%.*s", (int)hd->name_len, hd->name);
			snprintf(value, sizeof(value), "%.*s", (int)hd->value_len, hd->value);
			sup_http_header(pp->r, name, value);
		}
		bool none = strcmp(method, "HEAD") == 0 || h->status == 204 || h->status == 304;
		uint64_t length = SUP_HTTP_CHUNKED;
		if (none)
			length = strcmp(method, "HEAD") == 0 && h->has_cl ? h->cl : SUP_HTTP_NO_BODY;
		else if (!h->te_chunked && h->has_cl)
			length = h->cl;
		pp->resp = none ? SUP_PP_DONE : h->te_chunked ? SUP_PP_CHUNKED
				: h->has_cl ? SUP_PP_LENGTH : SUP_PP_CLOSE;
		pp->left = h->has_cl ? h->cl : 0;
		sup_httpin_chunked_init(&pp->dec);
		sup_http_on_credit(pp->r, on_credit, pp);
		sup_http_start(pp->r, h->status, length);
		if (none || (pp->resp == SUP_PP_LENGTH && pp->left == 0)) {
			pp_finish(pp);
			rc = 1;
		}
	}
	free(h);
	if (rc >= 0)
		evbuffer_drain(pp->down, len);
	return rc;
}

static void on_data(const uint8_t *p, size_t n, size_t cost, void *ud)
{
	sup_pp *pp = ud;
	sbx_err e;
	int rc = 0;
	if (pp->resp == SUP_PP_DONE) {
		if (pp->op)
			sup_op_consumed(pp->op, cost);
		return;
	}
	if (pp->resp != SUP_PP_HEAD) {
		rc = body(pp, p, n);
		if (rc == -EBADMSG)
			return;
		flush(pp);
		if (rc < 0) {
			sbx_err_set(&e, -ENOMEM, "out of memory");
			pp_fail(pp, &e);
			return;
		}
		if (rc == 1) {
			sup_op_consumed(pp->op, cost);
			pp_finish(pp);
			return;
		}
		if (pp->collect) /* held here, bounded: the agent may go on */
			sup_op_consumed(pp->op, cost);
		else
			sup_http_charge(pp->r, cost);
		return;
	}
	/* The head: copied (bounded by the scan), its cost given back now. */
	sup_op_consumed(pp->op, cost);
	while (n > 0 && pp->resp == SUP_PP_HEAD) {
		size_t end = 0;
		int st = sup_httpin_headscan_feed(&pp->scan, p, n, &end);
		if (st < 0) {
			pp_bad_gateway(pp, st == -E2BIG ? "its answer's head is over 64 KiB"
						       : "its answer's head is malformed");
			return;
		}
		size_t take = st > 0 ? end : n;
		if (evbuffer_add(pp->down, p, take) < 0) {
			sbx_err_set(&e, -ENOMEM, "out of memory");
			pp_fail(pp, &e);
			return;
		}
		p += take;
		n -= take;
		if (st == 0)
			return;
		rc = answer_head(pp, evbuffer_get_length(pp->down));
		if (rc != 0 || pp->resp == SUP_PP_DONE) {
			if (rc == -ENOMEM) {
				sbx_err_set(&e, -ENOMEM, "out of memory");
				pp_fail(pp, &e);
			}
			return;
		}
	}
	/* What followed the head in the same frame: already paid for. */
	rc = body(pp, p, n);
	if (rc >= 0)
		flush(pp);
	if (rc == 1)
		pp_finish(pp);
	else if (rc < 0 && rc != -EBADMSG) {
		sbx_err_set(&e, -ENOMEM, "out of memory");
		pp_fail(pp, &e);
	}
}

static void on_event(const msgpack_object *map, size_t cost, void *ud)
{
	sup_pp *pp = ud;
	sup_op_consumed(pp->op, cost);
	if (pp->mode != SUP_PP_TUNNEL || pp->resp != SUP_PP_HEAD)
		return;
	/* The port answered: only now the tunnel's 101. */
	pp->resp = SUP_PP_RAW;
	sup_http_on_credit(pp->r, on_credit, pp);
	sup_http_upgrade(pp->r, "tcp", NULL, on_raw_read, pp);
	sup_http_raw_half_close(pp->r);
}

static void on_done(int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	sup_pp *pp = ud;
	sbx_err e;
	pp->op = NULL;
	if (pp->resp == SUP_PP_DONE)
		return;
	if (rc < 0) {
		e = *err;
		/* The agent's not_found is the port's: nothing listens. */
		if (e.code == -ENOENT)
			e.code = -ECONNREFUSED;
		pp_fail(pp, &e);
		return;
	}
	switch (pp->resp) {
	case SUP_PP_HEAD:
		pp_bad_gateway(pp, "the server closed the connection without an answer");
		break;
	case SUP_PP_CLOSE:
	case SUP_PP_RAW:
		pp_finish(pp);
		break;
	default:
		sup_http_note(pp->r, "the server closed the connection after %" PRIu64 " body bytes",
			      pp->got);
		pp_bad_gateway(pp, "the server closed the connection mid-body");
		break;
	}
}

/* The client's bytes (body, or raw after an upgrade) into `up`, and `up`
 * to the agent, as far as its credit goes. */
static void pump_up(void *ud)
{
	sup_pp *pp = ud;
	sbx_err e;
	sbx_err_clear(&e);
	for (;;) {
		bool moved = false;
		size_t held = evbuffer_get_length(pp->up);
		if (!pp->op)
			return;
		if (pp->resp == SUP_PP_RAW && held < SUP_PP_UP_MAX) {
			struct evbuffer *in = sup_http_raw_input(pp->r);
			size_t avail = evbuffer_get_length(in);
			size_t k = avail < SUP_PP_UP_MAX - held ? avail : SUP_PP_UP_MAX - held;
			if (k > 0 && evbuffer_remove_buffer(in, pp->up, k) > 0)
				moved = true;
			sup_http_raw_pause(pp->r, evbuffer_get_length(in) > 0);
			/* A tunnel's client shut its writing and all it sent is
			 * with the server: the server's socket gets the same. */
			if (pp->mode == SUP_PP_TUNNEL && !pp->up_eof && held == 0 && k == 0 &&
			    sup_http_raw_ended(pp->r)) {
				if (sup_core_call_send(pp->op, SBX_CH_TCP, NULL, 0, true, &e) < 0) {
					pp_fail(pp, &e);
					return;
				}
				pp->up_eof = true;
			}
		} else if (pp->resp == SUP_PP_RAW) {
			sup_http_raw_pause(pp->r, true);
		} else if (pp->in_body && !pp->in_done && held < SUP_PP_UP_MAX) {
			struct evbuffer *buf = NULL;
			int n = sup_http_body(pp->r, SUP_PP_UP_MAX - held, &buf, &e);
			if (n < 0 && n != -EAGAIN) {
				if (n == -ENODATA)
					sup_http_note(pp->r, "client went away mid-body");
				pp_fail(pp, &e);
				return;
			}
			if (n == 0) {
				pp->in_done = true;
				answer_wait(pp);
				if (pp->in_chunked)
					evbuffer_add(pp->up, "0\r\n\r\n", 5);
				moved = true;
			} else if (n > 0) {
				if (pp->in_chunked)
					evbuffer_add_printf(pp->up, "%x\r\n", n);
				evbuffer_remove_buffer(buf, pp->up, (size_t)n);
				if (pp->in_chunked)
					evbuffer_add(pp->up, "\r\n", 2);
				sup_http_body_took(pp->r, (size_t)n);
				moved = true;
			}
		}
		held = evbuffer_get_length(pp->up);
		if (held > 0) {
			int k = sup_core_call_send_from(pp->op, SBX_CH_TCP, pp->up, held, &e);
			if (k == -ENOMEM || k == -EINVAL) {
				pp_fail(pp, &e);
				return;
			}
			if (k < 0)
				return; /* the stream is gone: on_done says why */
			moved |= k > 0;
		}
		if (!moved)
			return;
	}
}

/* The server inside took the request but sent no head in time (it hangs,
 * or reads forever): 504, and the stream inside is closed. A head that
 * came in time ends the wait: a streamed body may then be quiet as long
 * as the client keeps listening. */
static void answer_overdue(evutil_socket_t fd, short what, void *ud)
{
	sup_pp *pp = ud;
	sbx_err e;
	(void)fd;
	(void)what;
	if (pp->resp != SUP_PP_HEAD)
		return;
	sbx_err_set(&e, -ETIMEDOUT, "port %u: the server sent no answer within %u ms", pp->port,
		    pp->ctx->answer_ms);
	pp_fail(pp, &e);
}

static const sup_core_call_cbs proxy_cbs = {
	.on_data = on_data,
	.on_event = on_event,
	.on_done = on_done,
	.on_writable = pump_up,
	/* A server may rightly be quiet (SSE, WebSocket, a long poll): the
	 * agent's liveness is the ping's, the client's end releases us. */
	.wait = SUP_AGENT_WAIT_QUIET,
};

/* GET .../url: a signed URL for the port, by Host when there is a
 * --ports-domain, else by path, on the host and port the client used. */
static int answer_url(sup_pp *pp, const sup_http_in *in, sbx_err *err)
{
	uint64_t exp = (uint64_t)time(NULL) + pp->expires;
	char sig[SUP_URLSIGN_HEX + 1], url[512];
	const char *host = sup_http_in_header(in, "Host");
	if (!host)
		host = "localhost";
	if (sup_urlsign_sign(pp->ctx->sign, pp->id, pp->port, exp, sig) < 0)
		return sbx_err_set(err, -EINVAL, "cannot sign for sandbox %s", pp->id);
	/* the URL names the id until it expires: never another owner's */
	sup_core_id_given_out(pp->ctx->core, pp->id);
	/* the scheme the client came by: over TLS the URL is https:// */
	const char *scheme = sup_http_tls(pp->r) ? "https" : "http";
	if (pp->ctx->domain) {
		const char *end = strrchr(host, ']'), *colon = strrchr(end ? end : host, ':');
		snprintf(url, sizeof(url), "%s://%u-%s.%s%s/?%s=%llu&%s=%s", scheme,
			 (unsigned)pp->port, pp->id, pp->ctx->domain, colon ? colon : "",
			 SUP_PORTS_Q_EXP, (unsigned long long)exp, SUP_PORTS_Q_SIG, sig);
	} else {
		snprintf(url, sizeof(url), "%s://%.200s/v1/sandboxes/%s/ports/%u/?%s=%llu&%s=%s", scheme,
			 host, pp->id, (unsigned)pp->port, SUP_PORTS_Q_EXP, (unsigned long long)exp,
			 SUP_PORTS_Q_SIG, sig);
	}
	sup_http_json(pp->r, 200, json_pack("{s:s, s:I}", "url", url, "expires_at", (json_int_t)exp));
	return 0;
}

/* The gathered discovery answer, rewritten for the way the client came
 * (sup_ports_cdp.c), or GET .../browser's answer made of it. */
static void cdp_answer(sup_pp *pp)
{
	const sup_http_in *in = sup_http_input(pp->r);
	const char *host = sup_http_in_header(in, "Host");
	size_t n = evbuffer_get_length(pp->json);
	const char *body = (const char *)evbuffer_pullup(pp->json, -1);
	sup_ports_where w = { host ? host : "localhost", pp->prefix ? pp->prefix : "",
			      sup_http_tls(pp->r) };
	json_t *j = NULL;
	sbx_err e;
	sbx_err_clear(&e);
	if (pp->mode == SUP_PP_BROWSER) {
		uint64_t exp = (uint64_t)time(NULL) + pp->expires;
		char path[SUP_URLSIGN_PATH_MAX];
		if (sup_urlsign_path(pp->ctx->sign, pp->id, pp->port, exp, path, &e) == 0) {
			/* the URL names the id until it expires: never another owner's */
			sup_core_id_given_out(pp->ctx->core, pp->id);
			j = sup_ports_browser_answer(body ? body : "", n, &w, path, exp);
		}
	} else {
		char base[512], sig[SUP_URLSIGN_HEX + 1], query[128] = "";
		snprintf(base, sizeof(base), "%s://%s%s", w.tls ? "wss" : "ws", w.host, w.prefix);
		/* a proof that came in the query goes on in the URLs (the cookie
		 * it leaves is for clients that keep cookies) */
		if (pp->set_cookie &&
		    sup_urlsign_sign(pp->ctx->sign, pp->id, pp->port, pp->expires, sig) == 0)
			snprintf(query, sizeof(query), "%s=%llu&%s=%s", SUP_PORTS_Q_EXP,
				 (unsigned long long)pp->expires, SUP_PORTS_Q_SIG, sig);
		j = sup_ports_cdp_rewrite(body ? body : "", n, base, query);
	}
	if (!j) {
		if (e.code == 0)
			sbx_err_set(&e, -EBADMSG, "port %u: DevTools' answer is not the JSON it should "
				    "be (webSocketDebuggerUrl)", pp->port);
		sup_http_fail(pp->r, &e);
		return;
	}
	sup_http_json(pp->r, 200, j);
}

/* A proof that came in the query stays as a cookie for the port's path
 * (or its host), so the page's own links and scripts get in too. */
static void keep_proof(sup_pp *pp, const sup_http_in *in)
{
	char sig[SUP_URLSIGN_HEX + 1], c[256];
	uint64_t now = (uint64_t)time(NULL);
	if (!pp->set_cookie || pp->expires <= now ||
	    sup_urlsign_sign(pp->ctx->sign, pp->id, pp->port, pp->expires, sig) < 0)
		return;
	if (pp->by_host)
		snprintf(c, sizeof(c), "%s=%llu.%s; Path=/; Max-Age=%llu; HttpOnly; SameSite=Lax",
			 SUP_PORTS_COOKIE, (unsigned long long)pp->expires, sig,
			 (unsigned long long)(pp->expires - now));
	else
		snprintf(c, sizeof(c), "%s=%llu.%s; Path=/v1/sandboxes/%s/ports/%u; Max-Age=%llu; "
			 "HttpOnly; SameSite=Lax", SUP_PORTS_COOKIE, (unsigned long long)pp->expires,
			 sig, pp->id, (unsigned)pp->port, (unsigned long long)(pp->expires - now));
	/* a proof that came over TLS never goes back in clear */
	if (sup_http_tls(pp->r) && strlen(c) + 8 < sizeof(c))
		strcat(c, "; Secure");
	sup_http_header(pp->r, "Set-Cookie", c);
}

int sup_ports_act_proxy(sup_http_req *r, void *state, sbx_err *err)
{
	sup_pp *pp = state;
	const sup_http_in *in = sup_http_input(r);
	sbx_proto_args args;
	pp->r = r;
	if (pp->mode == SUP_PP_URL)
		return answer_url(pp, in, err);
	if (pp->mode != SUP_PP_BROWSER)
		keep_proof(pp, in);
	pp->up = evbuffer_new();
	pp->down = evbuffer_new();
	pp->chunk = evbuffer_new();
	if (!pp->up || !pp->down || !pp->chunk)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_http_log_tag(r, " port %u", pp->port);
	if (pp->mode == SUP_PP_HTTP &&
	    sup_pp_request_head(in, pp->target, pp->upgrade, pp->cdp ? SUP_PORTS_CDP_HOST : NULL,
				pp->up) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	if (pp->mode == SUP_PP_BROWSER &&
	    evbuffer_add_printf(pp->up, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
				pp->target, SUP_PORTS_CDP_HOST) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	pp->in_body = in->body_expect > 0;
	pp->in_chunked = in->body_expect == UINT64_MAX;
	sbx_proto_args_init(&args);
	sbx_proto_args_uint(&args, "port", pp->port);
	int rc = sup_core_call(pp->ctx->core, pp->id, SBX_OP_PORT_OPEN, &args, &proxy_cbs, pp,
			       &pp->op, err);
	if (rc < 0)
		return rc;
	if (pp->ctx->answer_ms) {
		pp->answer_due = evtimer_new(sup_http_base(r), answer_overdue, pp);
		if (!pp->answer_due)
			return sbx_err_set(err, -ENOMEM, "out of memory");
		if (!pp->in_body)
			answer_wait(pp);
	}
	if (pp->in_body)
		sup_http_body_start(r, pump_up, pp);
	pump_up(pp);
	return 0;
}
