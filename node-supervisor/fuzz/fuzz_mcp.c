/* MCP hosting (mcp-host) under libFuzzer: one session's traffic both ways,
 * as the supervisor's mcp family drives it. Input: records of a type byte,
 * two bytes of length and the bytes:
 *   0, 1  a client's POSTed message, without / with Mcp-Session-Id: parsed
 *         (mcp_rpc_parse), sorted (mcp_tx_post_kind), its request id put in
 *         flight on a new SSE stream, and made the line the stdio server
 *         gets (mcp_tx_line); a refusal becomes an error body;
 *   2     a guest server's stdout, in pieces as the agent delivers it: split
 *         into lines (mcp_rpc_lines, bounded), each routed (mcp_tx_route_msg)
 *         and kept in the replay buffer on the stream it goes to;
 *   3     a client's Last-Event-ID: the events replayed after it;
 *   4     a client's Origin, Accept and MCP-Protocol-Version headers.
 * Checks, besides the sanitizers: the line a server gets is one JSON line
 * (no CR or LF: a client cannot slip it a second message); error bodies
 * are JSON on one line; the lines split from a server hold no newline and
 * never exceed the bound; an answer goes to the stream of the request it
 * answers, which is then no longer in flight, and anything else changes no
 * request in flight; requests in flight stay bounded; a resumption replays
 * only its own stream's events, in order, after the one named. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mcp_host/replay.h"
#include "mcp_host/rpc.h"
#include "mcp_host/session.h"
#include "mcp_host/transport.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

#define MAX_LINE 2048

typedef struct run {
	mcp_session *s;
	uint32_t latest; /* newest POST stream, 0: none */
} run;

static bool one_json_line(const char *p, size_t n)
{
	if (memchr(p, '\n', n) || memchr(p, '\r', n))
		return false;
	json_t *j = json_loadb(p, n, JSON_DECODE_ANY, NULL);
	json_decref(j);
	return j != NULL;
}

static void client(run *r, const char *body, size_t len, bool in_session)
{
	mcp_rpc_msg m;
	int code = 0;
	sbx_err e = { 0 };
	if (mcp_rpc_parse(body, len, &m, &code, &e) < 0) {
		CHECK(code == MCP_RPC_PARSE_ERROR || code == MCP_RPC_INVALID_REQUEST ||
		      code == MCP_RPC_INVALID_PARAMS);
		size_t bl;
		char *eb = mcp_rpc_error_body(NULL, code, e.msg, &bl);
		CHECK(eb && one_json_line(eb, bl));
		free(eb);
		return;
	}
	mcp_tx_post kind;
	char key[MCP_SESSION_KEY_MAX];
	if (mcp_tx_post_kind(&m, in_session, &kind, key, &e) == 0) {
		CHECK(kind != MCP_TX_INIT || !in_session);
		CHECK(strlen(key) < MCP_SESSION_KEY_MAX);
		if (kind == MCP_TX_INIT || kind == MCP_TX_CALL) {
			uint32_t st = mcp_session_new_stream(r->s);
			CHECK(st > r->latest);
			if (mcp_session_pending_add(r->s, key, st) == 0)
				r->latest = st;
		} else if (kind == MCP_TX_CANCEL && key[0]) {
			uint32_t st;
			(void)mcp_session_pending_take(r->s, key, &st);
		}
		CHECK(mcp_session_pending(r->s) <= MCP_SESSION_MAX_PENDING);
		const char *line;
		size_t ll;
		char *owned;
		CHECK(mcp_tx_line(&m, body, len, &line, &ll, &owned, &e) == 0);
		CHECK(one_json_line(line, ll));
		free(owned);
	} else {
		size_t bl;
		char *eb = mcp_rpc_error_body(m.id, MCP_TX_ERROR, e.msg, &bl);
		CHECK(eb && one_json_line(eb, bl));
		free(eb);
	}
	mcp_rpc_msg_free(&m);
}

static int on_line(const char *line, size_t len, void *ud)
{
	run *r = ud;
	CHECK(len > 0 && len <= MAX_LINE && !memchr(line, '\n', len));
	size_t before = mcp_session_pending(r->s);
	mcp_tx_route route;
	uint32_t stream = 0;
	sbx_err e = { 0 };
	if (mcp_tx_route_msg(r->s, line, len, &route, &stream, &e) < 0) {
		CHECK(mcp_session_pending(r->s) == before);
		return 0;
	}
	if (route == MCP_TX_STREAM) {
		CHECK(mcp_session_pending(r->s) == before - 1 && stream >= 1 && stream <= r->latest);
		CHECK(!mcp_session_stream_pending(r->s, stream));
	} else {
		CHECK(mcp_session_pending(r->s) == before);
		if (route == MCP_TX_DROP)
			return 0;
		stream = r->latest;
	}
	char id[MCP_REPLAY_ID_MAX];
	(void)mcp_replay_push(mcp_session_replay(r->s), stream, line, len, id, &e);
	return 0;
}

typedef struct replayed {
	uint64_t after;
	uint32_t stream;
} replayed;

static int on_replayed(const char *id, const char *data, size_t len, void *ud)
{
	replayed *p = ud;
	(void)data, (void)len;
	char *dash;
	unsigned long st = strtoul(id, &dash, 10);
	uint64_t seq = mcp_replay_id_seq(id);
	if (p->stream == UINT32_MAX)
		p->stream = (uint32_t)st;
	CHECK(*dash == '-' && st == p->stream && seq > p->after);
	p->after = seq;
	return 0;
}

static void resume(run *r, const char *v, size_t n)
{
	char id[64];
	if (n >= sizeof(id) || memchr(v, '\0', n))
		return;
	memcpy(id, v, n);
	id[n] = '\0';
	replayed p = { .after = mcp_replay_id_seq(id), .stream = UINT32_MAX };
	uint32_t stream = 0;
	sbx_err e = { 0 };
	int rc = mcp_replay_after(mcp_session_replay(r->s), id, &stream, on_replayed, &p, &e);
	CHECK(rc == 0 || rc == -EINVAL || rc == -ENOENT);
	if (rc == 0)
		CHECK(p.stream == UINT32_MAX || p.stream == stream);
}

static void headers(const char *v, size_t n)
{
	char h[256];
	if (n >= sizeof(h) || memchr(v, '\0', n))
		return;
	memcpy(h, v, n);
	h[n] = '\0';
	sbx_err e = { 0 };
	mcp_tx_reply reply;
	int rc = mcp_tx_origin("https://app.example, http://localhost:3000", h, &e);
	CHECK(rc == 0 || rc == -EPERM);
	if (rc == 0)
		CHECK(strcasecmp(h, "https://app.example") == 0 || strcasecmp(h, "http://localhost:3000") == 0);
	rc = mcp_tx_post_accept(h, &reply, &e);
	CHECK(rc == 0 || rc == -ENOTSUP);
	rc = mcp_tx_get_accept(h, &e);
	CHECK(rc == 0 || rc == -ENOTSUP);
	rc = mcp_tx_version(h, &e);
	CHECK(rc == 0 ? mcp_rpc_version_supported(h) : rc == -EINVAL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static mcp_session_table *t;
	sbx_err e;
	if (!t) {
		mcp_session_opts o = { .max_sessions = 4, .replay_bytes = 4096, .replay_events = 16 };
		CHECK(mcp_session_table_new(&o, &t, &e) == 0);
	}
	run r = { 0 };
	CHECK(mcp_session_open(t, "fs", 1, &r.s, &e) == 0);
	mcp_rpc_lines lines;
	mcp_rpc_lines_init(&lines, MAX_LINE);
	bool split_ok = true;
	while (size >= 3) {
		uint8_t type = data[0];
		size_t n = (size_t)data[1] << 8 | data[2];
		data += 3;
		size -= 3;
		if (n > size)
			n = size;
		const char *p = (const char *)data;
		switch (type % 5) {
		case 0:
		case 1: client(&r, p, n, type % 5 == 1); break;
		case 2:
			/* after a line over the bound the splitter is done (the
			 * session fails), as the supervisor's is */
			if (split_ok && mcp_rpc_lines_feed(&lines, p, n, on_line, &r, &e) < 0)
				split_ok = false;
			CHECK(mcp_rpc_lines_pending(&lines) <= MAX_LINE);
			break;
		case 3: resume(&r, p, n); break;
		default: headers(p, n); break;
		}
		data += n;
		size -= n;
	}
	mcp_rpc_lines_free(&lines);
	mcp_session_close(t, r.s);
	return 0;
}
