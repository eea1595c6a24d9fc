/* The blocking client against a real sbx_proto_conn server running its own
 * libevent loop in a thread, over a socketpair and over a unix socket path. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "sbx/proto_client.h"
#include "sbx/proto_conn.h"
#include "test_msgpack.h"

#define BIG (3u * 1024u * 1024u) /* several client windows */

/* The server: answers ops "exec", "fail", "hang", "stream" (until cancel). */
struct server {
	int fd;
	struct event_base *base;
	sbx_proto_conn *c;
	uint64_t big_id, stream_id;
	size_t big_sent;
	int cancels;
	pthread_t thread;
};

static void srv_end_result(sbx_proto_conn *c, uint64_t id)
{
	msgpack_sbuffer sb;
	tm_exec_result(&sb, 3, 42);
	sbx_proto_conn_end(c, id, sb.data, sb.size, NULL);
	msgpack_sbuffer_destroy(&sb);
}

/* Send as much as credit allows; resumed by on_writable. */
static void srv_pump(struct server *s, uint64_t id)
{
	static uint8_t chunk[16384];
	if (id == s->stream_id) {
		size_t room;
		while ((room = sbx_proto_conn_data_room(s->c, id)) > 0)
			sbx_proto_conn_send_data(s->c, id, SBX_CH_STDOUT, chunk,
						 room < sizeof(chunk) ? room : sizeof(chunk), false, NULL);
		return;
	}
	if (id != s->big_id || !id)
		return;
	while (s->big_sent < BIG) {
		size_t room = sbx_proto_conn_data_room(s->c, id);
		if (!room)
			return;
		size_t n = BIG - s->big_sent;
		n = n < room ? n : room;
		n = n < sizeof(chunk) ? n : sizeof(chunk);
		for (size_t i = 0; i < n; i++)
			chunk[i] = (uint8_t)((s->big_sent + i) % 251);
		sbx_proto_conn_send_data(s->c, id, SBX_CH_STDOUT, chunk, n, false, NULL);
		s->big_sent += n;
	}
	s->big_id = 0;
	srv_end_result(s->c, id);
}

static bool op_is(const sbx_proto_frame *f, const char *op)
{
	return f->op_len == strlen(op) && memcmp(f->op, op, f->op_len) == 0;
}

static void srv_frame(sbx_proto_conn *c, const sbx_proto_frame *f, void *ud)
{
	struct server *s = ud;
	if (f->kind == SBX_PROTO_CANCEL) {
		s->cancels++;
		sbx_proto_conn_fail(c, f->id, SBX_PROTO_E_CANCELLED, "cancelled", NULL);
		if (f->id == s->stream_id)
			s->stream_id = 0;
		return;
	}
	if (f->kind != SBX_PROTO_REQ)
		return;
	if (op_is(f, "exec")) {
		const msgpack_object *argv = sbx_proto_map_get(&f->args, "argv");
		if (argv && argv->type == MSGPACK_OBJECT_ARRAY && argv->via.array.size &&
		    argv->via.array.ptr[0].via.str.size == 3 &&
		    memcmp(argv->via.array.ptr[0].via.str.ptr, "big", 3) == 0) {
			s->big_id = f->id;
			s->big_sent = 0;
			srv_pump(s, f->id);
			return;
		}
		if (argv && argv->type == MSGPACK_OBJECT_ARRAY && argv->via.array.size &&
		    argv->via.array.ptr[0].via.str.size == 4 &&
		    memcmp(argv->via.array.ptr[0].via.str.ptr, "fail", 4) == 0) {
			sbx_proto_conn_fail(c, f->id, SBX_PROTO_E_EXEC_FAILED, "cannot start", NULL);
			return;
		}
		const char *cmd;
		size_t len;
		bool has_cmd = sbx_proto_get_str(&f->args, "cmd", &cmd, &len);
		sbx_proto_conn_send_data(c, f->id, SBX_CH_STDOUT, has_cmd ? cmd : "argv", has_cmd ? len : 4,
					 false, NULL);
		sbx_proto_conn_send_data(c, f->id, SBX_CH_STDERR, "oops", 4, true, NULL);
		srv_end_result(c, f->id);
		return;
	}
	if (op_is(f, "fail"))
		sbx_proto_conn_fail(c, f->id, SBX_PROTO_E_NOT_FOUND, "nope", NULL);
	else if (op_is(f, "stream")) {
		s->stream_id = f->id;
		srv_pump(s, f->id);
	} else if (!op_is(f, "hang"))
		sbx_proto_conn_end(c, f->id, NULL, 0, NULL);
}

static void srv_writable(sbx_proto_conn *c, uint64_t id, void *ud)
{
	srv_pump(ud, id);
}

static void srv_close(sbx_proto_conn *c, const sbx_err *why, void *ud)
{
	event_base_loopbreak(((struct server *)ud)->base);
}

static void *srv_main(void *arg)
{
	struct server *s = arg;
	const char *caps[] = { "exec" };
	sbx_proto_conn_opts o = { .caps = caps, .ncaps = 1, .agent = "test-server/1" };
	sbx_proto_conn_cbs cbs = { .on_frame = srv_frame, .on_writable = srv_writable, .on_close = srv_close };
	sbx_err err;
	s->c = sbx_proto_conn_new(s->base, s->fd, &o, &cbs, s, &err);
	if (s->c)
		event_base_dispatch(s->base);
	sbx_proto_conn_free(s->c);
	return NULL;
}

static sbx_proto_client *start_timeout(struct server *s, int timeout_ms)
{
	int sv[2];
	memset(s, 0, sizeof(*s));
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	s->fd = sv[0];
	s->base = event_base_new();
	assert_int_equal(pthread_create(&s->thread, NULL, srv_main, s), 0);
	sbx_proto_client *cl = NULL;
	sbx_err err;
	int rc = sbx_proto_client_from_fd(sv[1], timeout_ms, &cl, &err);
	if (rc < 0)
		fail_msg("client: %s", err.msg);
	return cl;
}

static sbx_proto_client *start(struct server *s)
{
	return start_timeout(s, 5000);
}

static void stop(struct server *s, sbx_proto_client *cl)
{
	sbx_proto_client_free(cl); /* EOF ends the server's loop */
	pthread_join(s->thread, NULL);
	event_base_free(s->base);
}

static void test_exec(void **state)
{
	struct server s;
	sbx_proto_client *cl = start(&s);
	assert_string_equal(sbx_proto_client_peer_agent(cl), "test-server/1");
	assert_true(sbx_proto_client_peer_has_cap(cl, "exec"));
	assert_false(sbx_proto_client_peer_has_cap(cl, "exe"));
	sbx_proto_exec_result r;
	sbx_err err;
	assert_int_equal(sbx_proto_client_exec(cl, NULL, "echo hi", 0, 0, &r, &err), 0);
	assert_string_equal(r.out, "echo hi");
	assert_string_equal(r.err, "oops");
	assert_true(r.exited);
	assert_int_equal(r.exit_code, 3);
	assert_false(r.signaled);
	assert_false(r.timed_out);
	assert_int_equal(r.duration_us, 42);
	sbx_proto_exec_result_free(&r);
	/* bounded output buffers */
	assert_int_equal(sbx_proto_client_exec(cl, NULL, "echo hi", 0, 3, &r, &err), 0);
	assert_string_equal(r.out, "ech");
	assert_true(r.out_truncated);
	assert_string_equal(r.err, "oop");
	sbx_proto_exec_result_free(&r);
	assert_int_equal(sbx_proto_client_exec(cl, NULL, NULL, 0, 0, &r, &err), -EINVAL);
	sbx_proto_exec_result_free(&r);
	stop(&s, cl);
}

static void test_big_output_returns_credit(void **state)
{
	struct server s;
	sbx_proto_client *cl = start(&s);
	const char *argv[] = { "big", NULL };
	sbx_proto_exec_result r;
	sbx_err err;
	assert_int_equal(sbx_proto_client_exec(cl, argv, NULL, 1000, BIG, &r, &err), 0);
	assert_int_equal(r.out_len, BIG);
	assert_false(r.out_truncated);
	for (size_t i = 0; i < BIG; i += 4099)
		assert_int_equal((uint8_t)r.out[i], (uint8_t)(i % 251));
	sbx_proto_exec_result_free(&r);
	stop(&s, cl);
}

static void test_err_and_ping(void **state)
{
	struct server s;
	sbx_proto_client *cl = start(&s);
	sbx_proto_frame fin;
	sbx_err err;
	assert_int_equal(sbx_proto_client_call(cl, "fail", NULL, 0, NULL, NULL, &fin, &err), 0);
	assert_int_equal(fin.kind, SBX_PROTO_ERR);
	assert_int_equal(fin.code, SBX_PROTO_E_NOT_FOUND);
	sbx_proto_frame_release(&fin);
	assert_int_equal(sbx_proto_client_call(cl, SBX_OP_PING, NULL, 0, NULL, NULL, &fin, &err), 0);
	assert_int_equal(fin.kind, SBX_PROTO_END);
	sbx_proto_frame_release(&fin);
	/* an ERR to exec is an error of the helper, with the code in the message */
	const char *argv[] = { "fail", NULL };
	sbx_proto_exec_result r;
	assert_int_equal(sbx_proto_client_exec(cl, argv, NULL, 0, 0, &r, &err), -EREMOTEIO);
	assert_non_null(strstr(err.msg, "exec_failed: cannot start"));
	sbx_proto_exec_result_free(&r);
	stop(&s, cl);
}

static int stop_after_some(const sbx_proto_frame *f, void *ud)
{
	size_t *got = ud;
	*got += f->data_len;
	return *got > 100000 ? -ECANCELED : 0;
}

static void test_callback_cancels(void **state)
{
	struct server s;
	sbx_proto_client *cl = start(&s);
	size_t got = 0;
	sbx_proto_frame fin;
	sbx_err err;
	assert_int_equal(sbx_proto_client_call(cl, "stream", NULL, 0, stop_after_some, &got, &fin, &err),
			 -ECANCELED);
	assert_true(got > 100000);
	/* the stream finished (the server answered the cancel): the next call works */
	assert_int_equal(sbx_proto_client_call(cl, SBX_OP_PING, NULL, 0, NULL, NULL, &fin, &err), 0);
	assert_int_equal(fin.kind, SBX_PROTO_END);
	sbx_proto_frame_release(&fin);
	stop(&s, cl);
	assert_int_equal(s.cancels, 1);
}

static void test_timeout(void **state)
{
	struct server s;
	sbx_proto_client *cl = start_timeout(&s, 300);
	sbx_proto_frame fin;
	sbx_err err;
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	int rc = sbx_proto_client_call(cl, "hang", NULL, 0, NULL, NULL, &fin, &err);
	clock_gettime(CLOCK_MONOTONIC, &b);
	assert_int_equal(rc, -ETIMEDOUT);
	long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
	assert_true(ms >= 290 && ms < 3000);
	stop(&s, cl);
}

static int listen_at(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, path);
	unlink(path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 1), 0);
	return fd;
}

static void *accept_and_serve(void *arg)
{
	struct server *s = arg;
	s->fd = accept(s->fd, NULL, NULL);
	return s->fd >= 0 ? srv_main(s) : NULL;
}

static void test_connect_path(void **state)
{
	char dir[] = "/tmp/sbx-proto-client-XXXXXX";
	assert_non_null(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	sbx_proto_client *cl = NULL;
	sbx_err err;

	/* nobody accepts: the handshake times out instead of hanging */
	int lfd = listen_at(path);
	assert_int_equal(sbx_proto_client_connect(path, 200, &cl, &err), -ETIMEDOUT);
	assert_non_null(strstr(err.msg, path));
	close(lfd);
	assert_int_equal(sbx_proto_client_connect("/nonexistent/x.sock", 200, &cl, &err), -ENOENT);

	struct server s = { 0 };
	lfd = listen_at(path);
	s.fd = lfd;
	s.base = event_base_new();
	assert_int_equal(pthread_create(&s.thread, NULL, accept_and_serve, &s), 0);
	assert_int_equal(sbx_proto_client_connect(path, 5000, &cl, &err), 0);
	sbx_proto_exec_result r;
	assert_int_equal(sbx_proto_client_exec(cl, NULL, "x", 0, 0, &r, &err), 0);
	assert_string_equal(r.out, "x");
	sbx_proto_exec_result_free(&r);
	stop(&s, cl);
	close(lfd);
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exec),
		cmocka_unit_test(test_big_output_returns_credit),
		cmocka_unit_test(test_err_and_ping),
		cmocka_unit_test(test_callback_cancels),
		cmocka_unit_test(test_timeout),
		cmocka_unit_test(test_connect_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
