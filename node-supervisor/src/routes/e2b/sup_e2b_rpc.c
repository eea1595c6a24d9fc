/* The Connect protocol as E2B's SDKs speak it to envd: the JSON codec
 * only (their SDKs never send binary protobuf), a unary call's message as
 * the body, a server stream's request as one envelope (a flags byte, a
 * 4-byte big-endian length, the JSON) and its answer as envelopes ending
 * with the end-stream one (flags 2), which carries a stream's error. */
#include "sup_e2b_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "sbx/cleanup.h"
#include "sup_text.h"

/* Whether ct is their JSON codec's media type (a charset allowed). */
static bool media_is(const char *ct, const char *want)
{
	size_t n = strlen(want);
	if (!ct || strncasecmp(ct, want, n) != 0)
		return false;
	ct += n;
	ct += strspn(ct, " \t");
	return *ct == '\0' || *ct == ';';
}

int sup_e2b_rpc_message(const sup_http_in *in, bool stream, json_t **msg, sbx_err *err)
{
	const char *ct = sup_http_in_header(in, "Content-Type");
	const char *p = in->body;
	size_t n = in->body_len;
	json_error_t je;
	*msg = NULL;
	if (!media_is(ct, stream ? "application/connect+json" : "application/json"))
		return sbx_err_set(err, -EINVAL,
				   "Content-Type %.64s: want %s (the JSON codec; binary protobuf is not served)",
				   ct ? ct : "(none)", stream ? "application/connect+json" : "application/json");
	if (stream) {
		if (n < 5)
			return sbx_err_set(err, -EINVAL, "the request is not one Connect envelope");
		const uint8_t *h = (const uint8_t *)p;
		uint32_t len = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 8 | h[4];
		if (h[0] != 0)
			return sbx_err_set(err, -EINVAL, "envelope flags %u: want 0 (no compression)", h[0]);
		if ((size_t)len != n - 5)
			return sbx_err_set(err, -EINVAL, "the envelope says %u bytes, the body has %zu",
					   len, n - 5);
		p += 5;
		n -= 5;
	}
	*msg = json_loadb(n ? p : "{}", n ? n : 2, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(*msg))
		return sbx_err_set(err, -EINVAL, "the message is not a JSON object: %s", je.text);
	return 0;
}

json_t *sup_e2b_field(const json_t *msg, const char *camel, const char *snake)
{
	json_t *v = json_object_get(msg, camel);
	if (!v && snake)
		v = json_object_get(msg, snake);
	return json_is_null(v) ? NULL : v;
}

int sup_e2b_rpc_pid(const json_t *msg, long *pid, sbx_err *err)
{
	json_t *sel = sup_e2b_field(msg, "process", NULL);
	json_t *v = sup_e2b_field(sel, "pid", NULL);
	if (!v && sup_e2b_field(sel, "tag", NULL))
		return sbx_err_set(err, -EINVAL, "a process selected by tag is not served: give its pid");
	/* uint32 in proto3 JSON: a number, or a string of one */
	json_int_t n = json_is_integer(v) ? json_integer_value(v)
		       : json_is_string(v) ? strtoll(json_string_value(v), NULL, 10)
					   : 0;
	if (n < 1 || n > 0x7fffffff)
		return sbx_err_set(err, -EINVAL, "field \"process\": want {\"pid\": N}");
	*pid = (long)n;
	return 0;
}

void sup_e2b_rpc_reply(sup_http_req *r, json_t *o)
{
	sup_http_json(r, 200, o ? o : json_object());
}

static void give_back(size_t cost, void *ud)
{
	sup_eq *q = ud;
	if (q->op)
		sup_op_consumed(q->op, cost);
}

sup_stream *sup_e2b_rpc_stream(sup_eq *q, const char *keepalive_line)
{
	const char *ka = sup_http_in_header(sup_http_input(q->r), "Keepalive-Ping-Interval");
	long secs = ka ? strtol(ka, NULL, 10) : 0;
	q->s = sup_stream_start(q->r, SUP_STREAM_CONNECT, give_back, q);
	if (!q->s)
		return NULL;
	sup_stream_keepalive_text(q->s, keepalive_line);
	/* their envd's default is 90 s; a client's ask within reason */
	sup_stream_keepalive(q->s, secs >= 1 && secs <= 3600 ? (unsigned)secs : 90);
	return q->s;
}

void sup_e2b_rpc_end(sup_eq *q, int rc, const sbx_err *err)
{
	if (!q->s && !sup_e2b_rpc_stream(q, NULL)) {
		sup_http_fail(q->r, err);
		return;
	}
	json_t *t = NULL;
	if (rc < 0) {
		const char *code;
		int status = sup_http_status("e2b", rc, &code);
		t = json_pack("{s:{s:s, s:s}}", "error", "code", sup_e2b_connect_code(status), "message",
			      err && err->msg[0] ? err->msg : code);
	}
	sup_stream_connect_end(q->s, t);
	q->s = NULL;
}

int sup_e2b_rpc_user(sup_eq *q, const sup_http_in *in, sbx_err *err)
{
	const char *a = sup_http_in_header(in, "Authorization");
	q->user = NULL;
	if (!a || strncasecmp(a, "Basic ", 6) != 0)
		return 0;
	a += 6;
	a += strspn(a, " ");
	size_t n, bad;
	SBX_AUTO_FREE uint8_t *raw = sup_base64_decode(a, strlen(a), &n, &bad);
	const uint8_t *colon = raw ? memchr(raw, ':', n) : NULL;
	size_t ul = colon ? (size_t)(colon - raw) : 0;
	if (!colon || ul > SUP_API_MAX_USER || memchr(raw, '\0', ul))
		return sbx_err_set(err, -EINVAL, "Authorization: want Basic <user:> in base64");
	/* "user" is their templates' default user: here the sandbox's own */
	if (ul == 0 || (ul == 4 && memcmp(raw, "user", 4) == 0))
		return 0;
	memcpy(q->user_buf, raw, ul);
	q->user_buf[ul] = '\0';
	q->user = q->user_buf;
	return 0;
}

int sup_e2b_rpc_timeout(const sup_http_in *in, uint64_t *ms, sbx_err *err)
{
	const char *t = sup_http_in_header(in, "Connect-Timeout-Ms");
	*ms = 0;
	if (!t)
		return 0;
	size_t n = strlen(t);
	if (n == 0 || n > 10 || strspn(t, "0123456789") != n)
		return sbx_err_set(err, -EINVAL, "Connect-Timeout-Ms: want at most 10 digits");
	*ms = strtoull(t, NULL, 10);
	return 0;
}

void sup_e2b_q_init(sup_eq *q, const sup_http_in *in, void *ctx)
{
	q->x = ctx;
	q->id = in->id;
	sbx_proto_args_init(&q->args);
}

int sup_e2b_parse_rpc(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_eq *q = state;
	sup_e2b_q_init(q, in, ctx);
	int rc = sup_e2b_rpc_message(in, false, &q->msg, err);
	return rc < 0 ? rc : sup_e2b_rpc_user(q, in, err);
}

int sup_e2b_parse_rpc_stream(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_eq *q = state;
	sup_e2b_q_init(q, in, ctx);
	int rc = sup_e2b_rpc_message(in, true, &q->msg, err);
	if (rc == 0)
		rc = sup_e2b_rpc_user(q, in, err);
	if (rc < 0) {
		q->early = rc;
		q->early_err = *err;
	}
	return 0;
}
