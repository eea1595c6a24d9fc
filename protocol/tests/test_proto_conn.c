/* sbx_proto_conn over a real socketpair and libevent loop: handshake,
 * streams, credit, limits, cancellation, closed ids, re-entrant frees. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <sys/socket.h>

#include "conn_harness.h"
#include "test_msgpack.h"

static const sbx_proto_conn_opts client_opts = { .is_client = true, .agent = "test-client" };
static const sbx_proto_conn_opts server_opts = { .is_client = false };

static void teardown_pair(struct event_base *base, struct side *a, struct side *b)
{
	sbx_proto_conn_free(a->c);
	sbx_proto_conn_free(b->c);
	event_base_free(base);
}

/* --- handshake ----------------------------------------------------------- */

static void test_handshake(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { 0 }, cli = { 0 };
	const char *caps[] = { "exec", "exec.stdin" };
	sbx_proto_conn_opts so = { .caps = caps, .ncaps = 2, .agent = "agent/9", .max_frame = 8192 };
	harness_pair(base, &srv, &so, &cli, &client_opts);
	assert_false(sbx_proto_conn_ready(cli.c));
	/* a request before ready is queued and goes out after the handshake */
	uint64_t id = 0;
	assert_int_equal(sbx_proto_conn_request(cli.c, SBX_OP_PING, NULL, 0, &id, NULL), 0);
	assert_int_equal(id, 1);
	assert_int_equal(sbx_proto_conn_data_room(cli.c, id), 0);
	pump_until(base, &srv.n[SBX_PROTO_REQ], 2000);
	assert_int_equal(cli.ready, 1);
	assert_int_equal(srv.ready, 1);
	assert_true(sbx_proto_conn_ready(cli.c));
	assert_true(sbx_proto_conn_peer_has_cap(cli.c, "exec.stdin"));
	assert_false(sbx_proto_conn_peer_has_cap(cli.c, "exec.std"));
	assert_string_equal(sbx_proto_conn_peer_agent(cli.c), "agent/9");
	assert_string_equal(sbx_proto_conn_peer_agent(srv.c), "test-client");
	assert_int_equal(sbx_proto_conn_peer_max_frame(cli.c), 8192);
	assert_int_equal(srv.last_id, 1);
	/* the client was blocked on room before ready: on_writable told it */
	assert_int_equal(cli.writable, 1);
	assert_int_equal(sbx_proto_conn_end(srv.c, 1, NULL, 0, NULL), 0);
	pump_until(base, &cli.n[SBX_PROTO_END], 2000);
	assert_int_equal(sbx_proto_conn_open_streams(cli.c), 0);
	assert_int_equal(sbx_proto_conn_open_streams(srv.c), 0);
	/* a large request before ready would not fit every peer's max_frame */
	teardown_pair(base, &srv, &cli);
}

static void test_request_too_big_before_ready(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { 0 }, cli = { 0 };
	harness_pair(base, &srv, &server_opts, &cli, &client_opts);
	msgpack_sbuffer sb;
	msgpack_packer pk;
	tm_init(&sb, &pk);
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, "cmd");
	char big[6000];
	memset(big, 'x', sizeof(big));
	sbx_proto_pack_strn(&pk, big, sizeof(big));
	uint64_t id;
	sbx_err err;
	assert_int_equal(sbx_proto_conn_request(cli.c, "exec", sb.data, sb.size, &id, &err), -EMSGSIZE);
	pump_until(base, &cli.ready, 2000);
	assert_int_equal(sbx_proto_conn_request(cli.c, "exec", sb.data, sb.size, &id, &err), 0);
	pump_until(base, &srv.n[SBX_PROTO_REQ], 2000);
	msgpack_sbuffer_destroy(&sb);
	teardown_pair(base, &srv, &cli);
}

/* --- many streams -------------------------------------------------------- */

#define MANY 600

static void many_srv_frame(struct side *s, const sbx_proto_frame *f)
{
	if (f->kind != SBX_PROTO_REQ || s->n[SBX_PROTO_REQ] < MANY)
		return;
	/* all requests are open at once now: answer every one */
	assert_int_equal(sbx_proto_conn_open_streams(s->c), MANY);
	for (uint64_t id = 1; id < 2 * MANY; id += 2) {
		assert_int_equal(sbx_proto_conn_send_data(s->c, id, "stdout", &id, sizeof(id), false, NULL), 0);
		assert_int_equal(sbx_proto_conn_end(s->c, id, NULL, 0, NULL), 0);
	}
}

static void many_cli_frame(struct side *s, const sbx_proto_frame *f)
{
	if (f->kind == SBX_PROTO_DATA) {
		uint64_t v;
		assert_int_equal(f->data_len, sizeof(v));
		memcpy(&v, f->data, sizeof(v));
		assert_int_equal(v, f->id);
		assert_ptr_equal(sbx_proto_conn_stream_data(s->c, f->id), (void *)(uintptr_t)f->id);
	}
}

static void test_many_streams(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { .on_frame = many_srv_frame }, cli = { .on_frame = many_cli_frame };
	harness_pair(base, &srv, &server_opts, &cli, &client_opts);
	pump_until(base, &cli.ready, 2000);
	for (int i = 0; i < MANY; i++) {
		uint64_t id;
		assert_int_equal(sbx_proto_conn_request(cli.c, SBX_OP_PING, NULL, 0, &id, NULL), 0);
		assert_int_equal(id, (uint64_t)(2 * i + 1));
		sbx_proto_conn_set_stream_data(cli.c, id, (void *)(uintptr_t)id);
	}
	assert_int_equal(sbx_proto_conn_open_streams(cli.c), MANY);
	pump_until_n(base, &cli.n[SBX_PROTO_END], MANY, 5000);
	assert_int_equal(cli.n[SBX_PROTO_DATA], MANY);
	assert_int_equal(sbx_proto_conn_open_streams(cli.c), 0);
	assert_int_equal(sbx_proto_conn_open_streams(srv.c), 0);
	assert_null(sbx_proto_conn_stream_data(cli.c, 1));
	teardown_pair(base, &srv, &cli);
}

/* --- credit -------------------------------------------------------------- */

#define TOTAL (200u * 1024u)

struct producer {
	uint64_t id;
	size_t sent;
	int ended;
};

static void produce(struct side *s, uint64_t id)
{
	struct producer *p = s->test;
	static uint8_t chunk[3000];
	while (p->sent < TOTAL) {
		size_t room = sbx_proto_conn_data_room(s->c, id);
		if (!room)
			return; /* on_writable resumes us */
		size_t n = TOTAL - p->sent;
		if (n > room)
			n = room;
		if (n > sizeof(chunk))
			n = sizeof(chunk);
		for (size_t i = 0; i < n; i++)
			chunk[i] = (uint8_t)(p->sent + i);
		assert_int_equal(sbx_proto_conn_send_data(s->c, id, "stdout", chunk, n, false, NULL), 0);
		p->sent += n;
	}
	if (!p->ended) {
		p->ended = 1;
		assert_int_equal(sbx_proto_conn_send_data(s->c, id, "stdout", NULL, 0, true, NULL), 0);
		assert_int_equal(sbx_proto_conn_end(s->c, id, NULL, 0, NULL), 0);
	}
}

static void producer_frame(struct side *s, const sbx_proto_frame *f)
{
	if (f->kind == SBX_PROTO_REQ) {
		((struct producer *)s->test)->id = f->id;
		produce(s, f->id);
	}
}

struct consumer {
	size_t got, body_unconsumed;
	bool consume;
	int eof;
};

static void consumer_frame(struct side *s, const sbx_proto_frame *f)
{
	struct consumer *k = s->test;
	if (f->kind != SBX_PROTO_DATA)
		return;
	for (size_t i = 0; i < f->data_len; i++)
		assert_int_equal(f->data[i], (uint8_t)(k->got + i));
	k->got += f->data_len;
	k->eof += f->eof;
	if (f->data_len)
		k->body_unconsumed += f->body_len;
	if (k->consume) {
		sbx_proto_conn_consumed(s->c, f->id, k->body_unconsumed);
		k->body_unconsumed = 0;
	}
}

static void test_credit(void **state)
{
	struct event_base *base = harness_base();
	struct producer prod = { 0 };
	struct consumer cons = { 0 };
	struct side srv = { .on_frame = producer_frame, .on_writable = produce, .test = &prod };
	struct side cli = { .on_frame = consumer_frame, .test = &cons };
	sbx_proto_conn_opts co = client_opts;
	co.window = 8192;
	harness_pair(base, &srv, &server_opts, &cli, &co);
	uint64_t id;
	assert_int_equal(sbx_proto_conn_request(cli.c, "cat", NULL, 0, &id, NULL), 0);
	pump_until(base, &srv.n[SBX_PROTO_REQ], 2000);
	pump_for(base, 100);
	/* without consumed() the producer stops at the window */
	assert_true(prod.sent > 0);
	assert_true(prod.sent < TOTAL);
	assert_true(cons.body_unconsumed <= 8192);
	assert_true(cons.body_unconsumed > 8192 - 2 * SBX_PROTO_DATA_OVERHEAD - 3000);
	assert_int_equal(cons.got, prod.sent);
	assert_int_equal(sbx_proto_conn_data_room(srv.c, id), 0);
	/* credit back: the producer resumes through on_writable and finishes */
	int writable_before = srv.writable;
	cons.consume = true;
	sbx_proto_conn_consumed(cli.c, id, cons.body_unconsumed);
	cons.body_unconsumed = 0;
	pump_until(base, &cli.n[SBX_PROTO_END], 5000);
	assert_true(srv.writable > writable_before);
	assert_int_equal(cons.got, TOTAL);
	assert_int_equal(cons.eof, 1);
	teardown_pair(base, &srv, &cli);
}

/* A peer that reads nothing: DATA stops at the output bound even with
 * plenty of credit, and on_writable fires once the socket drains. */
static void test_output_backpressure(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { 0 };
	int fd = harness_raw_client(base, &srv, &server_opts, 1u << 30, true);
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_req(&w, 1, "cat", NULL, 0, 0, NULL), 0);
	raw_send(fd, &w);
	pump_until(base, &srv.n[SBX_PROTO_REQ], 2000);
	static uint8_t chunk[32768];
	size_t sent = 0;
	for (int i = 0; i < 10000; i++) {
		pump_for(base, 0);
		size_t room = sbx_proto_conn_data_room(srv.c, 1);
		if (!room)
			break;
		size_t n = room < sizeof(chunk) ? room : sizeof(chunk);
		assert_int_equal(sbx_proto_conn_send_data(srv.c, 1, "stdout", chunk, n, false, NULL), 0);
		sent += n;
	}
	assert_int_equal(sbx_proto_conn_data_room(srv.c, 1), 0);
	assert_true(sent <= 2 * SBX_PROTO_DEFAULT_MAX_FRAME); /* long before the credit of 1 GiB */
	assert_int_equal(sbx_proto_conn_send_data(srv.c, 1, "stdout", chunk, 1, false, NULL), -EAGAIN);
	assert_int_equal(srv.writable, 0);
	/* drain the socket: the stalled sender hears it may go on */
	sbx_proto_frame f;
	while (srv.writable == 0) {
		assert_int_equal(raw_recv(base, fd, &f, 2000), 1);
		sbx_proto_frame_release(&f);
	}
	assert_true(sbx_proto_conn_data_room(srv.c, 1) > 0);
	close(fd);
	sbx_proto_writer_destroy(&w);
	sbx_proto_conn_free(srv.c);
	event_base_free(base);
}

/* DATA written in place (data_begin/commit): the frames are the ones
 * send_data makes, also when fewer bytes come than were reserved (a shorter
 * length field), credit is charged alike, and other output in between voids
 * the reservation instead of corrupting the stream. */
static size_t expect_data(struct event_base *base, int fd, const char *ch, uint8_t seed, size_t n)
{
	sbx_proto_frame f;
	sbx_proto_writer w;
	assert_int_equal(raw_recv(base, fd, &f, 2000), 1);
	assert_int_equal(f.kind, SBX_PROTO_DATA);
	assert_int_equal(f.id, 1);
	assert_int_equal(f.ch_len, strlen(ch));
	assert_memory_equal(f.ch, ch, f.ch_len);
	assert_false(f.eof);
	assert_int_equal(f.data_len, n);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(f.data[i], (uint8_t)(seed + i * 7));
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_data(&w, 1, ch, f.data, n, false, 0, NULL), 0);
	size_t body = f.body_len;
	assert_int_equal(body, w.buf.size - SBX_PROTO_HEADER_LEN);
	sbx_proto_writer_destroy(&w);
	sbx_proto_frame_release(&f);
	return body;
}

static void fill(uint8_t *p, uint8_t seed, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 7);
}

/* A raw client granting window that opened stream 1 ("cat") on srv; w
 * is initialised for the test's own frames. */
static int raw_cat_stream(struct event_base *base, struct side *srv, size_t window,
			  sbx_proto_writer *w)
{
	int fd = harness_raw_client(base, srv, &server_opts, window, true);
	sbx_proto_writer_init(w);
	assert_int_equal(sbx_proto_encode_req(w, 1, "cat", NULL, 0, 0, NULL), 0);
	raw_send(fd, w);
	pump_until(base, &srv->n[SBX_PROTO_REQ], 2000);
	return fd;
}

static void test_data_in_place(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { 0 };
	const size_t window = 300000;
	sbx_proto_writer w;
	int fd = raw_cat_stream(base, &srv, window, &w);
	size_t credit = window;
	void *buf = NULL;
	assert_int_equal(sbx_proto_conn_data_room(srv.c, 1), credit - SBX_PROTO_DATA_OVERHEAD);
	assert_int_equal(sbx_proto_conn_data_begin(srv.c, 1, "stdout", credit - SBX_PROTO_DATA_OVERHEAD + 1,
						   &buf, NULL), -EAGAIN);
	assert_int_equal(sbx_proto_conn_data_begin(srv.c, 1, "stdout", 0, &buf, NULL), -EAGAIN);
	assert_int_equal(sbx_proto_conn_data_begin(srv.c, 3, "stdout", 10, &buf, NULL), -ENOENT);
	assert_int_equal(sbx_proto_conn_data_commit(srv.c, 1, NULL), -ESTALE);

	/* as many as reserved (bin32), then fewer (bin16, bin8: moved up) */
	static const size_t cases[][2] = { { 100000, 100000 }, { 100000, 300 }, { 70000, 200 } };
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(sbx_proto_conn_data_begin(srv.c, 1, "stdout", cases[i][0], &buf, NULL), 0);
		fill(buf, (uint8_t)i, cases[i][1]);
		assert_int_equal(sbx_proto_conn_data_commit(srv.c, cases[i][1], NULL), 0);
		credit -= expect_data(base, fd, "stdout", (uint8_t)i, cases[i][1]);
		assert_int_equal(sbx_proto_conn_data_room(srv.c, 1), credit - SBX_PROTO_DATA_OVERHEAD);
	}
	/* more than reserved, or nothing read: nothing sent */
	assert_int_equal(sbx_proto_conn_data_begin(srv.c, 1, "stderr", 5000, &buf, NULL), 0);
	assert_int_equal(sbx_proto_conn_data_commit(srv.c, 5001, NULL), -EINVAL);
	assert_int_equal(sbx_proto_conn_data_begin(srv.c, 1, "stderr", 5000, &buf, NULL), 0);
	assert_int_equal(sbx_proto_conn_data_commit(srv.c, 0, NULL), 0);
	/* a frame sent in between goes out; the reservation is void */
	assert_int_equal(sbx_proto_conn_data_begin(srv.c, 1, "stderr", 5000, &buf, NULL), 0);
	fill(buf, 9, 5000);
	uint8_t mid[20];
	fill(mid, 4, sizeof(mid));
	assert_int_equal(sbx_proto_conn_send_data(srv.c, 1, "stderr", mid, sizeof(mid), false, NULL), 0);
	assert_int_equal(sbx_proto_conn_data_commit(srv.c, 5000, NULL), -ESTALE);
	credit -= expect_data(base, fd, "stderr", 4, sizeof(mid));
	assert_int_equal(sbx_proto_conn_data_room(srv.c, 1), credit - SBX_PROTO_DATA_OVERHEAD);
	/* and the stream goes on */
	assert_int_equal(sbx_proto_conn_data_begin(srv.c, 1, "stdout", 1000, &buf, NULL), 0);
	fill(buf, 5, 1000);
	assert_int_equal(sbx_proto_conn_data_commit(srv.c, 1000, NULL), 0);
	expect_data(base, fd, "stdout", 5, 1000);
	close(fd);
	sbx_proto_writer_destroy(&w);
	sbx_proto_conn_free(srv.c);
	event_base_free(base);
}

/* Exactly n bytes from the raw end, pumping the loop meanwhile. */
static void raw_bytes(struct event_base *base, int fd, uint8_t *buf, size_t n)
{
	size_t got = 0;
	for (int i = 0; got < n && i < 20000; i++) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		ssize_t r = recv(fd, buf + got, n - got, MSG_DONTWAIT);
		if (r > 0)
			got += (size_t)r;
		else
			usleep(100);
	}
	assert_int_equal(got, n);
}

/* Send a frame's payload from an evbuffer of several chains (moved, one
 * split in the middle), then the same bytes with send_data: both frames
 * are byte for byte what sbx_proto_encode_data makes, and charge alike. */
static void test_data_from(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { 0 };
	const size_t window = 400000;
	sbx_proto_writer w;
	int fd = raw_cat_stream(base, &srv, window, &w);

	static uint8_t data[300000], wire[2 * 100100];
	fill(data, 3, sizeof(data));
	struct evbuffer *src = evbuffer_new();
	assert_non_null(src);
	/* chains of 5000, 70000 and 225000 bytes */
	static const size_t parts[] = { 5000, 70000, 225000 };
	for (size_t i = 0, off = 0; i < 3; off += parts[i++]) {
		struct evbuffer *piece = evbuffer_new();
		assert_int_equal(evbuffer_add(piece, data + off, parts[i]), 0);
		assert_int_equal(evbuffer_add_buffer(src, piece), 0);
		evbuffer_free(piece);
	}
	size_t credit = window;
	sbx_err err;
	assert_int_equal(sbx_proto_conn_send_data_from(srv.c, 1, "stdin", src, 0, &err), -EINVAL);
	assert_int_equal(sbx_proto_conn_send_data_from(srv.c, 1, "stdin", src, sizeof(data) + 1, &err),
			 -EINVAL);
	assert_int_equal(sbx_proto_conn_send_data_from(srv.c, 3, "stdin", src, 10, &err), -ENOENT);
	/* a bin8, a bin16 and a bin32 payload; the last one splits a chain */
	static const size_t sizes[] = { 200, 60000, 100000 };
	size_t off = 0;
	for (size_t i = 0; i < 3; off += sizes[i++]) {
		size_t n = sizes[i];
		assert_int_equal(sbx_proto_conn_send_data_from(srv.c, 1, "stdin", src, n, &err), 0);
		assert_int_equal(evbuffer_get_length(src), sizeof(data) - off - n);
		assert_int_equal(sbx_proto_conn_send_data(srv.c, 1, "stdin", data + off, n, false, &err), 0);
		assert_int_equal(sbx_proto_encode_data(&w, 1, "stdin", data + off, n, false, 0, NULL), 0);
		size_t len = w.buf.size;
		raw_bytes(base, fd, wire, 2 * len);
		assert_memory_equal(wire, w.buf.data, len);
		assert_memory_equal(wire + len, w.buf.data, len);
		sbx_proto_writer_reset(&w);
		credit -= 2 * (len - SBX_PROTO_HEADER_LEN);
		assert_int_equal(sbx_proto_conn_data_room(srv.c, 1), credit - SBX_PROTO_DATA_OVERHEAD);
	}
	/* over the room: -EAGAIN, and src keeps every byte */
	size_t left = evbuffer_get_length(src);
	assert_true(left > credit - SBX_PROTO_DATA_OVERHEAD);
	assert_int_equal(sbx_proto_conn_send_data_from(srv.c, 1, "stdin", src, left, &err), -EAGAIN);
	assert_int_equal(evbuffer_get_length(src), left);
	uint8_t *rest = evbuffer_pullup(src, -1);
	assert_memory_equal(rest, data + off, left);
	evbuffer_free(src);
	close(fd);
	sbx_proto_writer_destroy(&w);
	sbx_proto_conn_free(srv.c);
	event_base_free(base);
}

static void test_over_credit(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { 0 };
	sbx_proto_conn_opts so = server_opts;
	so.window = 2048;
	int fd = harness_raw_client(base, &srv, &so, 65536, true);
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	uint8_t buf[1500] = { 0 };
	assert_int_equal(sbx_proto_encode_req(&w, 1, "exec", NULL, 0, 0, NULL), 0);
	/* 1500 + overhead fits the 2048 window once, not twice */
	assert_int_equal(sbx_proto_encode_data(&w, 1, "stdin", buf, sizeof(buf), false, 0, NULL), 0);
	raw_send(fd, &w);
	pump_until(base, &srv.n[SBX_PROTO_DATA], 2000);
	assert_int_equal(srv.closed, 0);
	assert_int_equal(sbx_proto_encode_data(&w, 1, "stdin", buf, sizeof(buf), false, 0, NULL), 0);
	raw_send(fd, &w);
	raw_expect_conn_err(base, fd, SBX_PROTO_E_FLOW_CONTROL);
	assert_int_equal(srv.closed, 1);
	assert_int_equal(srv.n[SBX_PROTO_DATA], 1);
	assert_non_null(strstr(srv.why.msg, "flow_control"));
	assert_false(sbx_proto_conn_ready(srv.c));
	assert_int_equal(sbx_proto_conn_send_data(srv.c, 1, "stdout", "x", 1, false, NULL), -ENOTCONN);
	close(fd);
	sbx_proto_writer_destroy(&w);
	sbx_proto_conn_free(srv.c);
	event_base_free(base);
}

/* A peer flooding, credit ignored, a stream we opened and pass nothing
 * on from (or cancelled: its frames are dropped, still charged), with
 * frames large enough to be read into blocks of their own: the frame that
 * goes past the window fails the connection and none after it is
 * delivered, whether or not anyone reads the stream. */
static void flood_unread(bool cancel)
{
	struct event_base *base = harness_base();
	struct side srv = { 0 };
	sbx_proto_conn_opts so = server_opts;
	so.window = 65536;
	int fd = harness_raw_client(base, &srv, &so, 65536, true);
	uint64_t id;
	sbx_proto_frame f;
	assert_int_equal(sbx_proto_conn_request(srv.c, SBX_OP_EXEC, NULL, 0, &id, NULL), 0);
	assert_int_equal(raw_recv(base, fd, &f, 2000), 1);
	assert_int_equal(f.kind, SBX_PROTO_REQ);
	sbx_proto_frame_release(&f);
	if (cancel) {
		assert_int_equal(sbx_proto_conn_cancel(srv.c, id, NULL), 0);
		assert_int_equal(raw_recv(base, fd, &f, 2000), 1);
		assert_int_equal(f.kind, SBX_PROTO_CANCEL);
		sbx_proto_frame_release(&f);
	}
	static uint8_t chunk[20000];
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_data(&w, id, "stdout", chunk, sizeof(chunk), false, 0, NULL), 0);
	size_t body = w.buf.size - SBX_PROTO_HEADER_LEN;
	sbx_proto_writer_reset(&w);
	size_t within = so.window / body;
	/* the frames within the window, the one past it, and two more */
	for (size_t i = 0; i < within + 3; i++)
		assert_int_equal(sbx_proto_encode_data(&w, id, "stdout", chunk, sizeof(chunk), false, 0,
						       NULL), 0);
	raw_send(fd, &w);
	pump_until(base, &srv.closed, 5000);
	assert_int_equal(srv.n[SBX_PROTO_DATA], cancel ? 0 : (int)within);
	char want[96];
	snprintf(want, sizeof(want), "data of %zu bytes on stream %llu, credit %zu", body,
		 (unsigned long long)id, so.window - within * body);
	if (!strstr(srv.why.msg, "flow_control") || !strstr(srv.why.msg, want))
		fail_msg("closed with '%s', not for '%s'", srv.why.msg, want);
	raw_expect_conn_err(base, fd, SBX_PROTO_E_FLOW_CONTROL);
	close(fd);
	sbx_proto_writer_destroy(&w);
	sbx_proto_conn_free(srv.c);
	event_base_free(base);
}

static void test_flood_unread_stream(void **state)
{
	flood_unread(false);
}

static void test_flood_cancelled_stream(void **state)
{
	flood_unread(true);
}

/* --- limits -------------------------------------------------------------- */

static void test_max_streams_local(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { 0 }, cli = { 0 };
	sbx_proto_conn_opts so = server_opts;
	so.max_streams = 3;
	harness_pair(base, &srv, &so, &cli, &client_opts);
	pump_until(base, &cli.ready, 2000);
	uint64_t id;
	sbx_err err;
	for (int i = 0; i < 3; i++)
		assert_int_equal(sbx_proto_conn_request(cli.c, SBX_OP_PING, NULL, 0, &id, NULL), 0);
	assert_int_equal(sbx_proto_conn_request(cli.c, SBX_OP_PING, NULL, 0, &id, &err), -EBUSY);
	assert_int_equal(err.code, -EBUSY);
	pump_until_n(base, &srv.n[SBX_PROTO_REQ], 3, 5000);
	assert_int_equal(sbx_proto_conn_end(srv.c, 3, NULL, 0, NULL), 0);
	pump_until(base, &cli.n[SBX_PROTO_END], 2000);
	assert_int_equal(sbx_proto_conn_request(cli.c, SBX_OP_PING, NULL, 0, &id, NULL), 0);
	assert_int_equal(id, 7);
	teardown_pair(base, &srv, &cli);
}

static void test_max_streams_remote(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { 0 };
	sbx_proto_conn_opts so = server_opts;
	so.max_streams = 2;
	int fd = harness_raw_client(base, &srv, &so, 65536, true);
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	for (uint64_t id = 1; id <= 5; id += 2)
		assert_int_equal(sbx_proto_encode_req(&w, id, "ping", NULL, 0, 0, NULL), 0);
	raw_send(fd, &w);
	sbx_proto_frame f;
	assert_int_equal(raw_recv(base, fd, &f, 2000), 1);
	assert_int_equal(f.kind, SBX_PROTO_ERR);
	assert_int_equal(f.id, 5);
	assert_int_equal(f.code, SBX_PROTO_E_TOO_MANY_STREAMS);
	sbx_proto_frame_release(&f);
	assert_int_equal(srv.n[SBX_PROTO_REQ], 2);
	assert_int_equal(srv.closed, 0);
	/* frames for the refused id are dropped; the connection goes on */
	assert_int_equal(sbx_proto_encode_cancel(&w, 5, NULL), 0);
	raw_send(fd, &w);
	assert_int_equal(sbx_proto_conn_end(srv.c, 1, NULL, 0, NULL), 0);
	assert_int_equal(raw_recv(base, fd, &f, 2000), 1);
	assert_int_equal(f.kind, SBX_PROTO_END);
	assert_int_equal(f.id, 1);
	sbx_proto_frame_release(&f);
	assert_int_equal(sbx_proto_encode_req(&w, 7, "ping", NULL, 0, 0, NULL), 0);
	raw_send(fd, &w);
	pump_until_n(base, &srv.n[SBX_PROTO_REQ], 3, 5000);
	assert_int_equal(srv.n[SBX_PROTO_CANCEL], 0);
	assert_int_equal(srv.closed, 0);
	assert_int_equal(sbx_proto_conn_open_streams(srv.c), 2);
	close(fd);
	sbx_proto_writer_destroy(&w);
	sbx_proto_conn_free(srv.c);
	event_base_free(base);
}

/* --- cancellation and closed ids ----------------------------------------- */

static void cancel_srv_frame(struct side *s, const sbx_proto_frame *f)
{
	if (f->kind != SBX_PROTO_CANCEL)
		return;
	/* data already on its way when the cancel arrived is dropped by the client */
	assert_int_equal(sbx_proto_conn_send_data(s->c, f->id, "stdout", "late", 4, false, NULL), 0);
	assert_int_equal(sbx_proto_conn_fail(s->c, f->id, SBX_PROTO_E_CANCELLED, "cancelled", NULL), 0);
}

static void test_cancel(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { .on_frame = cancel_srv_frame }, cli = { 0 };
	harness_pair(base, &srv, &server_opts, &cli, &client_opts);
	uint64_t id;
	assert_int_equal(sbx_proto_conn_request(cli.c, "exec", NULL, 0, &id, NULL), 0);
	pump_until(base, &srv.n[SBX_PROTO_REQ], 2000);
	assert_int_equal(sbx_proto_conn_send_data(srv.c, id, "stdout", "early", 5, false, NULL), 0);
	pump_until(base, &cli.n[SBX_PROTO_DATA], 2000);
	assert_int_equal(sbx_proto_conn_cancel(cli.c, id, NULL), 0);
	assert_int_equal(sbx_proto_conn_cancel(cli.c, id, NULL), 0); /* idempotent */
	/* the stream stays open until the answer */
	assert_int_equal(sbx_proto_conn_open_streams(cli.c), 1);
	pump_until(base, &cli.n[SBX_PROTO_ERR], 2000);
	assert_int_equal(srv.n[SBX_PROTO_CANCEL], 1);
	assert_int_equal(cli.n[SBX_PROTO_DATA], 1);
	assert_int_equal(cli.last_err_code, SBX_PROTO_E_CANCELLED);
	assert_int_equal(sbx_proto_conn_open_streams(cli.c), 0);
	assert_int_equal(sbx_proto_conn_open_streams(srv.c), 0);
	/* role checks: only the requester cancels, only the responder ends */
	assert_int_equal(sbx_proto_conn_cancel(cli.c, id, NULL), -ENOENT);
	assert_int_equal(sbx_proto_conn_request(cli.c, "exec", NULL, 0, &id, NULL), 0);
	pump_until_n(base, &srv.n[SBX_PROTO_REQ], 2, 5000);
	assert_int_equal(sbx_proto_conn_end(cli.c, id, NULL, 0, NULL), -EINVAL);
	assert_int_equal(sbx_proto_conn_cancel(srv.c, id, NULL), -EINVAL);
	assert_int_equal(sbx_proto_conn_send_ctl(srv.c, id, NULL, 0, NULL), -EINVAL);
	teardown_pair(base, &srv, &cli);
}

static void end_on_req(struct side *s, const sbx_proto_frame *f)
{
	if (f->kind == SBX_PROTO_REQ)
		assert_int_equal(sbx_proto_conn_end(s->c, f->id, NULL, 0, NULL), 0);
}

static void test_closed_and_unknown_ids(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { .on_frame = end_on_req };
	int fd = harness_raw_client(base, &srv, &server_opts, 65536, true);
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_req(&w, 1, "ping", NULL, 0, 0, NULL), 0);
	raw_send(fd, &w);
	sbx_proto_frame f;
	assert_int_equal(raw_recv(base, fd, &f, 2000), 1);
	assert_int_equal(f.kind, SBX_PROTO_END);
	sbx_proto_frame_release(&f);
	/* frames that crossed the END: dropped, not charged, not delivered */
	assert_int_equal(sbx_proto_encode_data(&w, 1, "stdin", "abc", 3, true, 0, NULL), 0);
	assert_int_equal(sbx_proto_encode_cancel(&w, 1, NULL), 0);
	assert_int_equal(sbx_proto_encode_credit(&w, 1, 100, NULL), 0);
	assert_int_equal(sbx_proto_encode_req(&w, 3, "ping", NULL, 0, 0, NULL), 0);
	raw_send(fd, &w);
	assert_int_equal(raw_recv(base, fd, &f, 2000), 1);
	assert_int_equal(f.kind, SBX_PROTO_END);
	assert_int_equal(f.id, 3);
	sbx_proto_frame_release(&f);
	assert_int_equal(srv.n[SBX_PROTO_DATA] + srv.n[SBX_PROTO_CANCEL], 0);
	assert_int_equal(srv.closed, 0);
	/* a frame for an id never opened is a protocol error */
	assert_int_equal(sbx_proto_encode_data(&w, 5, "stdin", "abc", 3, false, 0, NULL), 0);
	raw_send(fd, &w);
	raw_expect_conn_err(base, fd, SBX_PROTO_E_PROTOCOL);
	assert_int_equal(srv.closed, 1);
	close(fd);
	sbx_proto_writer_destroy(&w);
	sbx_proto_conn_free(srv.c);
	event_base_free(base);
}

/* Each hostile opening, on a fresh server: the ERR code it must get. */
static void expect_rejected(void (*write_frames)(sbx_proto_writer *w), bool hello_first,
			    sbx_proto_code code)
{
	struct event_base *base = harness_base();
	struct side srv = { 0 };
	sbx_proto_conn_opts so = server_opts;
	so.max_frame = 4096;
	int fd = harness_raw_client(base, &srv, &so, 65536, hello_first);
	if (!hello_first) {
		sbx_proto_frame f; /* the server's hello */
		assert_int_equal(raw_recv(base, fd, &f, 2000), 1);
		sbx_proto_frame_release(&f);
	}
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	write_frames(&w);
	raw_send(fd, &w);
	raw_expect_conn_err(base, fd, code);
	assert_int_equal(srv.closed, 1);
	pump_for(base, 5);
	assert_int_equal(srv.closed, 1); /* once */
	close(fd);
	sbx_proto_writer_destroy(&w);
	sbx_proto_conn_free(srv.c);
	event_base_free(base);
}

static void hello_v(sbx_proto_writer *w, uint64_t v, uint64_t window)
{
	sbx_proto_begin(w, SBX_PROTO_HELLO, 0, 4);
	sbx_proto_pack_kv_uint(w, "v", v);
	sbx_proto_pack_kv_uint(w, "max_frame", 65536);
	sbx_proto_pack_kv_uint(w, "max_streams", 8);
	sbx_proto_pack_kv_uint(w, "window", window);
	assert_int_equal(sbx_proto_finish(w, 0, NULL), 0);
}

static void w_version0(sbx_proto_writer *w) { hello_v(w, 0, 65536); }
static void w_small_window(sbx_proto_writer *w) { hello_v(w, 1, 16); }
static void w_req_first(sbx_proto_writer *w) { sbx_proto_encode_req(w, 1, "ping", NULL, 0, 0, NULL); }
static void w_second_hello(sbx_proto_writer *w) { hello_v(w, 1, 65536); }
static void w_even_req(sbx_proto_writer *w) { sbx_proto_encode_req(w, 2, "ping", NULL, 0, 0, NULL); }
static void w_reused_id(sbx_proto_writer *w)
{
	sbx_proto_encode_req(w, 3, "ping", NULL, 0, 0, NULL);
	sbx_proto_encode_req(w, 1, "ping", NULL, 0, 0, NULL);
}
static void w_id0(sbx_proto_writer *w) { sbx_proto_encode_credit(w, 0, 5, NULL); }
static void w_too_large(sbx_proto_writer *w)
{
	static char big[5000];
	sbx_proto_encode_data(w, 1, "stdin", big, sizeof(big), false, 0, NULL);
}
static void w_garbage(sbx_proto_writer *w)
{
	sbx_proto_begin(w, SBX_PROTO_CANCEL, 1, 0);
	w->buf.size -= 2; /* cut the id off: the map is short */
	assert_int_equal(sbx_proto_finish(w, 0, NULL), 0);
}
static void w_unknown_kind(sbx_proto_writer *w)
{
	sbx_proto_begin(w, SBX_PROTO_CANCEL, 1, 0);
	memcpy(w->buf.data + w->buf.size - 10, "xyzabc", 6); /* "cancel" -> "xyzabc" */
	assert_int_equal(sbx_proto_finish(w, 0, NULL), 0);
}
static void w_ctl_on_own(sbx_proto_writer *w)
{
	/* the server opens nothing; an END on a client-opened id from the client */
	sbx_proto_encode_req(w, 1, "ping", NULL, 0, 0, NULL);
	sbx_proto_encode_end(w, 1, NULL, 0, 0, NULL);
}

static void test_rejections(void **state)
{
	expect_rejected(w_version0, false, SBX_PROTO_E_UNSUPPORTED);
	expect_rejected(w_small_window, false, SBX_PROTO_E_UNSUPPORTED);
	expect_rejected(w_req_first, false, SBX_PROTO_E_PROTOCOL);
	expect_rejected(w_second_hello, true, SBX_PROTO_E_PROTOCOL);
	expect_rejected(w_even_req, true, SBX_PROTO_E_PROTOCOL);
	expect_rejected(w_reused_id, true, SBX_PROTO_E_PROTOCOL);
	expect_rejected(w_id0, true, SBX_PROTO_E_PROTOCOL);
	expect_rejected(w_too_large, true, SBX_PROTO_E_TOO_LARGE);
	expect_rejected(w_garbage, true, SBX_PROTO_E_BAD_FRAME);
	expect_rejected(w_unknown_kind, true, SBX_PROTO_E_UNSUPPORTED);
	expect_rejected(w_ctl_on_own, true, SBX_PROTO_E_PROTOCOL);
}

static void test_peer_error_and_eof(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { 0 };
	int fd = harness_raw_client(base, &srv, &server_opts, 65536, true);
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_err(&w, 0, SBX_PROTO_E_SHUTTING_DOWN, "bye", 0, NULL), 0);
	raw_send(fd, &w);
	pump_until(base, &srv.closed, 2000);
	assert_int_equal(srv.why.code, -ECONNABORTED);
	assert_non_null(strstr(srv.why.msg, "shutting_down: bye"));
	close(fd);
	sbx_proto_conn_free(srv.c);

	/* plain EOF */
	memset(&srv, 0, sizeof(srv));
	fd = harness_raw_client(base, &srv, &server_opts, 65536, true);
	close(fd);
	pump_until(base, &srv.closed, 2000);
	assert_int_equal(srv.why.code, -ECONNRESET);
	sbx_proto_conn_free(srv.c);
	sbx_proto_writer_destroy(&w);
	event_base_free(base);
}

/* --- re-entrancy ---------------------------------------------------------- */

static void free_on_req(struct side *s, const sbx_proto_frame *f)
{
	if (f->kind == SBX_PROTO_REQ) {
		sbx_proto_conn_free(s->c);
		s->c = NULL;
	}
}

static void test_free_in_callback(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { .on_frame = free_on_req }, cli = { .free_on_close = true };
	harness_pair(base, &srv, &server_opts, &cli, &client_opts);
	uint64_t id;
	/* three requests land in one read; the first frees the server */
	for (int i = 0; i < 3; i++)
		assert_int_equal(sbx_proto_conn_request(cli.c, SBX_OP_PING, NULL, 0, &id, NULL), 0);
	pump_until(base, &cli.closed, 2000);
	assert_int_equal(srv.n[SBX_PROTO_REQ], 1);
	assert_null(srv.c);
	assert_null(cli.c); /* freed inside on_close */
	pump_for(base, 5);
	assert_int_equal(srv.n[SBX_PROTO_REQ], 1);
	assert_int_equal(cli.closed, 1);
	event_base_free(base);
}

static void count_stream(uint64_t id, void *data, void *ud)
{
	(*(int *)ud)++;
}

/* The owner frees a conn inside on_close of a protocol error, and can walk
 * its streams there first. */
static void test_free_in_close(void **state)
{
	struct event_base *base = harness_base();
	struct side srv = { .free_on_close = true };
	int fd = harness_raw_client(base, &srv, &server_opts, 65536, true);
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	sbx_proto_encode_req(&w, 1, "ping", NULL, 0, 0, NULL);
	sbx_proto_encode_req(&w, 3, "ping", NULL, 0, 0, NULL);
	raw_send(fd, &w);
	pump_until_n(base, &srv.n[SBX_PROTO_REQ], 2, 5000);
	int n = 0;
	sbx_proto_conn_foreach_stream(srv.c, count_stream, &n);
	assert_int_equal(n, 2);
	sbx_proto_encode_req(&w, 3, "ping", NULL, 0, 0, NULL); /* reused id */
	sbx_proto_encode_req(&w, 5, "ping", NULL, 0, 0, NULL); /* never looked at */
	raw_send(fd, &w);
	raw_expect_conn_err(base, fd, SBX_PROTO_E_PROTOCOL);
	assert_null(srv.c);
	assert_int_equal(srv.n[SBX_PROTO_REQ], 2);
	close(fd);
	sbx_proto_writer_destroy(&w);
	event_base_free(base);
}

/* --- the frame deadline (a trickling peer) ------------------------------ */

/* A frame trickled in a byte at a time must be whole within
 * frame_timeout_ms of its first byte; a frame that keeps its pace inside the
 * deadline passes, and a quiet connection between frames costs nothing. */
static void test_frame_deadline(void **state)
{
	(void)state;
	struct event_base *base = harness_base();
	struct side srv = { 0 };
	sbx_proto_conn_opts so = server_opts;
	so.frame_timeout_ms = 300;
	int fd = harness_raw_client(base, &srv, &so, 65536, true);
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	/* quiet between frames: no deadline */
	pump_for(base, 450);
	assert_int_equal(srv.closed, 0);
	/* a whole frame in two parts within the deadline */
	sbx_proto_encode_req(&w, 1, "ping", NULL, 0, 0, NULL);
	size_t n = w.buf.size;
	assert_int_equal(send(fd, w.buf.data, 3, MSG_NOSIGNAL), 3);
	pump_for(base, 150);
	assert_int_equal(send(fd, w.buf.data + 3, n - 3, MSG_NOSIGNAL), (ssize_t)(n - 3));
	sbx_proto_writer_reset(&w);
	pump_until(base, &srv.n[SBX_PROTO_REQ], 2000);
	assert_int_equal(srv.closed, 0);
	/* the next one trickles: a byte every 100 ms never completes in 300 ms */
	sbx_proto_encode_req(&w, 3, "ping", NULL, 0, 0, NULL);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t i = 0; i < w.buf.size && !srv.closed; i++) {
		assert_int_equal(send(fd, w.buf.data + i, 1, MSG_NOSIGNAL), 1);
		pump_for(base, 100);
	}
	assert_int_equal(srv.closed, 1);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_in_range(ms, 280, 1000); /* libevent's coarse clock: a few ms either way */
	assert_int_equal(srv.why.code, -ETIMEDOUT);
	assert_non_null(strstr(srv.why.msg, "not complete 300 ms after its first byte"));
	assert_int_equal(srv.n[SBX_PROTO_REQ], 1);
	raw_expect_conn_err(base, fd, SBX_PROTO_E_PROTOCOL);
	close(fd);
	sbx_proto_conn_free(srv.c);
	sbx_proto_writer_destroy(&w);
	event_base_free(base);
}

/* --- slices: a burst of slow frames yields to the loop ------------------ */

static int slow_frames, frames_at_timer = -1;

static void slow_req(struct side *s, const sbx_proto_frame *f)
{
	(void)s;
	if (f->kind == SBX_PROTO_REQ) {
		usleep(25 * 1000); /* a handler that forks on a starved machine */
		slow_frames++;
	}
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
	frames_at_timer = slow_frames;
}

/* Ten requests in one read, each taking 25 ms to handle: the connection
 * hands the loop back between them (a timer due meanwhile runs before the
 * burst is through), and every frame is still handled, in order. */
static void test_input_slices(void **state)
{
	(void)state;
	struct event_base *base = harness_base();
	struct side srv = { .on_frame = slow_req };
	int fd = harness_raw_client(base, &srv, &server_opts, 65536, true);
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	for (uint64_t id = 1; id <= 19; id += 2)
		sbx_proto_encode_req(&w, id, "ping", NULL, 0, 0, NULL);
	struct event *t = evtimer_new(base, on_timer, NULL);
	struct timeval tv = { 0, 10 * 1000 };
	evtimer_add(t, &tv);
	raw_send(fd, &w);
	pump_until_n(base, &srv.n[SBX_PROTO_REQ], 10, 5000);
	assert_int_equal(slow_frames, 10);
	assert_in_range(frames_at_timer, 0, 9);
	assert_int_equal(srv.last_id, 19);
	assert_int_equal(srv.closed, 0);
	event_free(t);
	close(fd);
	sbx_proto_conn_free(srv.c);
	sbx_proto_writer_destroy(&w);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handshake),
		cmocka_unit_test(test_request_too_big_before_ready),
		cmocka_unit_test(test_many_streams),
		cmocka_unit_test(test_credit),
		cmocka_unit_test(test_output_backpressure),
		cmocka_unit_test(test_data_in_place),
		cmocka_unit_test(test_data_from),
		cmocka_unit_test(test_over_credit),
		cmocka_unit_test(test_flood_unread_stream),
		cmocka_unit_test(test_flood_cancelled_stream),
		cmocka_unit_test(test_max_streams_local),
		cmocka_unit_test(test_max_streams_remote),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_closed_and_unknown_ids),
		cmocka_unit_test(test_rejections),
		cmocka_unit_test(test_peer_error_and_eof),
		cmocka_unit_test(test_free_in_callback),
		cmocka_unit_test(test_free_in_close),
		cmocka_unit_test(test_frame_deadline),
		cmocka_unit_test(test_input_slices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
