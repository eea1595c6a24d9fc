/* sbx_proto_conn's large frames (proto_conn_block.c) over a real socketpair:
 * a DATA payload handed on by reference outlives the callback and the
 * connection, small pieces and small frames are copied, a large frame
 * trickled in pieces arrives whole and in order with its neighbours, and a
 * large frame left half-sent still meets the frame deadline. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <sys/socket.h>

#include "conn_harness.h"

static const sbx_proto_conn_opts server_opts = { .is_client = false };

#define BIG (200u * 1024u)
#define SMALL 1000u

/* What the server's on_frame did with each DATA frame. */
struct got {
	struct evbuffer *out;     /* the payloads (less their first 10 bytes) */
	const uint8_t *data[8];   /* where each frame's payload was */
	size_t len[8];
	int frames;
};

static void keep_data(struct side *s, const sbx_proto_frame *f)
{
	struct got *g = s->test;
	if (f->kind != SBX_PROTO_DATA || g->frames >= 8)
		return;
	g->data[g->frames] = f->data;
	g->len[g->frames] = f->data_len;
	g->frames++;
	/* a piece from the middle: the frame's first 10 bytes stay out */
	assert_int_equal(sbx_proto_conn_add_data(s->c, f->data + 10, f->data_len - 10, g->out), 0);
	sbx_proto_conn_consumed(s->c, f->id, f->body_len);
}

static void pattern(uint8_t *p, size_t n, uint8_t seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(seed + i * 13 + (i >> 8));
}

/* Whether buf's n bytes at off are payload seed's from its 10th byte on. */
static void expect_piece(struct evbuffer *buf, size_t off, size_t n, uint8_t seed)
{
	uint8_t *full = malloc(n + 10), *have = malloc(n);
	struct evbuffer_ptr at;
	assert_non_null(full);
	assert_non_null(have);
	pattern(full, n + 10, seed);
	assert_int_equal(evbuffer_ptr_set(buf, &at, off, EVBUFFER_PTR_SET), 0);
	assert_int_equal(evbuffer_copyout_from(buf, &at, have, n), (ev_ssize_t)n);
	assert_memory_equal(have, full + 10, n);
	free(full);
	free(have);
}

/* The evbuffer chain holding byte off of buf starts at p: a reference to
 * the frame, not a copy. */
static const uint8_t *chain_at(struct evbuffer *buf, size_t off)
{
	struct evbuffer_ptr at;
	struct evbuffer_iovec v;
	assert_int_equal(evbuffer_ptr_set(buf, &at, off, EVBUFFER_PTR_SET), 0);
	assert_int_equal(evbuffer_peek(buf, 1, &at, &v, 1), 1);
	return v.iov_base;
}

static void send_data(int fd, uint64_t id, size_t n, uint8_t seed, size_t piece,
		      struct event_base *base)
{
	sbx_proto_writer w;
	uint8_t *p = malloc(n);
	assert_non_null(p);
	pattern(p, n, seed);
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_data(&w, id, "tcp", p, n, false, 0, NULL), 0);
	/* piece: how much goes per send, the loop running in between */
	const char *q = w.buf.data;
	size_t left = w.buf.size;
	while (left) {
		size_t k = piece && piece < left ? piece : left;
		ssize_t m = send(fd, q, k, MSG_NOSIGNAL);
		if (m < 0 && errno == EAGAIN) {
			pump_for(base, 1);
			continue;
		}
		assert_true(m > 0);
		q += m;
		left -= (size_t)m;
		if (piece)
			pump_for(base, 2);
	}
	sbx_proto_writer_destroy(&w);
	free(p);
}

/* The raw client's end, stream 1 open on it (so given). */
static int open_stream(struct event_base *base, struct side *srv, const sbx_proto_conn_opts *so)
{
	int fd = harness_raw_client(base, srv, so ? so : &server_opts, 65536, true);
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_req(&w, 1, "cat", NULL, 0, 0, NULL), 0);
	raw_send(fd, &w);
	sbx_proto_writer_destroy(&w);
	pump_until(base, &srv->n[SBX_PROTO_REQ], 2000);
	return fd;
}

static void finish(struct event_base *base, int fd, struct side *srv, struct evbuffer *out)
{
	close(fd);
	sbx_proto_conn_free(srv->c);
	if (out)
		evbuffer_free(out);
	event_base_free(base);
}

/* A large frame's payload goes by reference and stays valid after the
 * callback, after the connection is freed, until the evbuffer lets go (the
 * sanitizers check the rest); a small frame's is copied. */
static void test_reference_outlives_conn(void **state)
{
	(void)state;
	struct event_base *base = harness_base();
	struct got g = { .out = evbuffer_new() };
	struct side srv = { .on_frame = keep_data, .test = &g };
	int fd = open_stream(base, &srv, NULL);
	send_data(fd, 1, BIG, 1, 0, base);
	send_data(fd, 1, SMALL, 2, 0, base);
	pump_until_n(base, &srv.n[SBX_PROTO_DATA], 2, 2000);
	assert_int_equal(g.frames, 2);
	assert_int_equal(evbuffer_get_length(g.out), BIG - 10 + SMALL - 10);
	assert_ptr_equal(chain_at(g.out, 0), g.data[0] + 10);
	assert_ptr_not_equal(chain_at(g.out, BIG - 10), g.data[1] + 10);
	close(fd);
	sbx_proto_conn_free(srv.c);
	event_base_free(base);
	expect_piece(g.out, 0, BIG - 10, 1);
	expect_piece(g.out, BIG - 10, SMALL - 10, 2);
	evbuffer_free(g.out);
}

/* A large frame sent in pieces (the loop reading each as it comes), then
 * a small and a large one in one send: whole, in order, the large ones by
 * reference. */
static void test_trickled_and_back_to_back(void **state)
{
	(void)state;
	struct event_base *base = harness_base();
	struct got g = { .out = evbuffer_new() };
	struct side srv = { .on_frame = keep_data, .test = &g };
	int fd = open_stream(base, &srv, NULL);
	send_data(fd, 1, BIG, 3, 7001, base);
	pump_until_n(base, &srv.n[SBX_PROTO_DATA], 1, 2000);
	send_data(fd, 1, SMALL, 4, 0, base);
	send_data(fd, 1, 40000, 5, 0, base);
	pump_until_n(base, &srv.n[SBX_PROTO_DATA], 3, 2000);
	assert_int_equal(srv.closed, 0);
	expect_piece(g.out, 0, BIG - 10, 3);
	expect_piece(g.out, BIG - 10, SMALL - 10, 4);
	expect_piece(g.out, BIG - 10 + SMALL - 10, 40000 - 10, 5);
	assert_ptr_equal(chain_at(g.out, 0), g.data[0] + 10);
	assert_ptr_equal(chain_at(g.out, BIG - 10 + SMALL - 10), g.data[2] + 10);
	finish(base, fd, &srv, g.out);
}

/* Half a large frame, then nothing: the frame deadline still holds, and
 * its message counts the bytes that came into the frame's block. */
static void test_block_deadline(void **state)
{
	(void)state;
	struct event_base *base = harness_base();
	struct side srv = { 0 };
	sbx_proto_conn_opts so = server_opts;
	so.frame_timeout_ms = 300;
	int fd = open_stream(base, &srv, &so);
	sbx_proto_writer w;
	uint8_t *p = calloc(1, BIG);
	assert_non_null(p);
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_data(&w, 1, "tcp", p, BIG, false, 0, NULL), 0);
	size_t half = w.buf.size / 2;
	assert_int_equal(send(fd, w.buf.data, half, MSG_NOSIGNAL), (ssize_t)half);
	pump_until(base, &srv.closed, 2000);
	assert_int_equal(srv.why.code, -ETIMEDOUT);
	assert_non_null(strstr(srv.why.msg, "not complete 300 ms after its first byte"));
	char want[64];
	snprintf(want, sizeof(want), "(%zu of its %zu bytes came)", half, w.buf.size);
	assert_non_null(strstr(srv.why.msg, want));
	assert_int_equal(srv.n[SBX_PROTO_DATA], 0);
	raw_expect_conn_err(base, fd, SBX_PROTO_E_PROTOCOL);
	sbx_proto_writer_destroy(&w);
	free(p);
	finish(base, fd, &srv, NULL);
}

/* A piece of a large frame under 4 KiB is copied (a chain of its own would
 * cost more than the bytes), a piece of anything else copied too. */
static void small_piece(struct side *s, const sbx_proto_frame *f)
{
	struct got *g = s->test;
	uint8_t other[8] = { 0 };
	if (f->kind != SBX_PROTO_DATA)
		return;
	g->data[0] = f->data;
	assert_int_equal(sbx_proto_conn_add_data(s->c, f->data + 10, 100, g->out), 0);
	assert_int_equal(sbx_proto_conn_add_data(s->c, other, sizeof(other), g->out), 0);
	g->frames++;
}

static void test_small_pieces_copied(void **state)
{
	(void)state;
	struct event_base *base = harness_base();
	struct got g = { .out = evbuffer_new() };
	struct side srv = { .on_frame = small_piece, .test = &g };
	int fd = open_stream(base, &srv, NULL);
	send_data(fd, 1, BIG, 6, 0, base);
	pump_until(base, &g.frames, 2000);
	assert_int_equal(evbuffer_get_length(g.out), 108);
	assert_ptr_not_equal(chain_at(g.out, 0), g.data[0] + 10);
	expect_piece(g.out, 0, 100, 6);
	finish(base, fd, &srv, g.out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reference_outlives_conn),
		cmocka_unit_test(test_trickled_and_back_to_back),
		cmocka_unit_test(test_block_deadline),
		cmocka_unit_test(test_small_pieces_copied),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
