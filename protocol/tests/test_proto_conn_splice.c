/* sbx_proto_conn_data_splice over a real socketpair: payloads taken from a
 * pipe arrive whole and in order, whether they were spliced to the socket
 * (output empty), copied behind frames already queued, or cut where the
 * socket filled up (the rest copied); the pipe is left empty each time. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "conn_harness.h"

#define FRAME (512u * 1024u)
#define WINDOW (16u << 20)

static const sbx_proto_conn_opts client_opts = { .is_client = true, .window = WINDOW };
static const sbx_proto_conn_opts server_opts = { .is_client = false };

/* The client's DATA payloads, in order, credit returned at once. */
static void collect(struct side *s, const sbx_proto_frame *f)
{
	if (f->kind != SBX_PROTO_DATA)
		return;
	assert_int_equal(evbuffer_add(s->test, f->data, f->data_len), 0);
	sbx_proto_conn_consumed(s->c, f->id, f->body_len);
}

static uint8_t byte_at(size_t i)
{
	return (uint8_t)(i * 7 + (i >> 9));
}

/* n bytes of the pattern from *off on into the pipe, then a frame of them. */
static void splice_frame(sbx_proto_conn *c, uint64_t id, const int *pfd, size_t n, size_t *off)
{
	uint8_t *p = malloc(n);
	sbx_err err;
	int left = 0;
	assert_non_null(p);
	for (size_t i = 0; i < n; i++)
		p[i] = byte_at(*off + i);
	assert_int_equal(write(pfd[1], p, n), (ssize_t)n);
	free(p);
	assert_int_equal(sbx_proto_conn_data_splice(c, id, "tcp", pfd[0], n, &err), 0);
	assert_int_equal(ioctl(pfd[0], FIONREAD, &left), 0);
	assert_int_equal(left, 0);
	*off += n;
}

static void test_spliced_copied_and_cut(void **state)
{
	(void)state;
	struct event_base *base = harness_base();
	struct evbuffer *got = evbuffer_new();
	struct side srv = { 0 }, cli = { .on_frame = collect, .test = got };
	int pfd[2];
	uint64_t id;
	size_t off = 0;
	assert_int_equal(pipe2(pfd, O_NONBLOCK | O_CLOEXEC), 0);
	assert_true(fcntl(pfd[1], F_SETPIPE_SZ, (int)FRAME) >= (int)FRAME);
	harness_pair(base, &srv, &server_opts, &cli, &client_opts);
	pump_until(base, &cli.ready, 2000);
	assert_int_equal(sbx_proto_conn_request(cli.c, "cat", NULL, 0, &id, NULL), 0);
	pump_until(base, &srv.n[SBX_PROTO_REQ], 2000);
	assert_int_equal(sbx_proto_conn_data_splice(srv.c, id, "tcp", pfd[0], 0, NULL), -EAGAIN);

	/* output empty: spliced straight to the socket */
	splice_frame(srv.c, id, pfd, 1000, &off);
	assert_int_equal(sbx_proto_conn_pending_output(srv.c), 0);
	/* behind a frame already queued: copied after it */
	assert_int_equal(sbx_proto_conn_send_data(srv.c, id, "tcp", "", 0, false, NULL), 0);
	assert_true(sbx_proto_conn_pending_output(srv.c) > 0);
	splice_frame(srv.c, id, pfd, 3000, &off);
	pump_until_n(base, &cli.n[SBX_PROTO_DATA], 3, 2000);
	/* no reading meanwhile: the socket fills, a frame is cut there and
	 * the frames after it queue, until data_room says wait */
	size_t room;
	while ((room = sbx_proto_conn_data_room(srv.c, id)) > 0)
		splice_frame(srv.c, id, pfd, room < FRAME ? room : FRAME, &off);
	assert_true(sbx_proto_conn_pending_output(srv.c) > 0);
	while (evbuffer_get_length(got) < off)
		pump_for(base, 5);
	assert_int_equal(evbuffer_get_length(got), off);
	const uint8_t *p = evbuffer_pullup(got, -1);
	for (size_t i = 0; i < off; i++)
		if (p[i] != byte_at(i))
			fail_msg("byte %zu of %zu differs", i, off);
	close(pfd[0]);
	close(pfd[1]);
	evbuffer_free(got);
	sbx_proto_conn_free(cli.c);
	sbx_proto_conn_free(srv.c);
	event_base_free(base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_spliced_copied_and_cut),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
