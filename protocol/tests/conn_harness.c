/* Test harness for sbx_proto_conn (see conn_harness.h). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "conn_harness.h"

static void h_ready(sbx_proto_conn *c, void *ud)
{
	((struct side *)ud)->ready++;
}

static void h_frame(sbx_proto_conn *c, const sbx_proto_frame *f, void *ud)
{
	struct side *s = ud;
	s->n[f->kind]++;
	s->last_id = f->id;
	if (f->kind == SBX_PROTO_ERR)
		s->last_err_code = f->code;
	if (s->on_frame)
		s->on_frame(s, f);
}

static void h_writable(sbx_proto_conn *c, uint64_t id, void *ud)
{
	struct side *s = ud;
	s->writable++;
	if (s->on_writable)
		s->on_writable(s, id);
}

static void h_close(sbx_proto_conn *c, const sbx_err *why, void *ud)
{
	struct side *s = ud;
	s->closed++;
	s->why = *why;
	if (s->free_on_close) {
		sbx_proto_conn_free(c);
		s->c = NULL;
	}
}

const sbx_proto_conn_cbs harness_cbs = { h_ready, h_frame, h_writable, h_close };

struct event_base *harness_base(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *b = event_base_new_with_config(cfg);
	event_config_free(cfg);
	assert_non_null(b);
	return b;
}

static sbx_proto_conn *mk(struct event_base *base, int fd, const sbx_proto_conn_opts *o,
			  struct side *s)
{
	sbx_err err;
	s->c = sbx_proto_conn_new(base, fd, o, &harness_cbs, s, &err);
	if (!s->c)
		fail_msg("conn_new: %s", err.msg);
	return s->c;
}

void harness_pair(struct event_base *base, struct side *srv, const sbx_proto_conn_opts *so,
		  struct side *cli, const sbx_proto_conn_opts *co)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	mk(base, sv[0], so, srv);
	mk(base, sv[1], co, cli);
}

int harness_raw_client(struct event_base *base, struct side *srv, const sbx_proto_conn_opts *so,
		       uint64_t window, bool send_hello)
{
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	raw_forget(sv[1]);
	mk(base, sv[0], so, srv);
	if (send_hello) {
		sbx_proto_writer w;
		sbx_proto_writer_init(&w);
		sbx_proto_begin(&w, SBX_PROTO_HELLO, 0, 4);
		sbx_proto_pack_kv_uint(&w, "v", 1);
		sbx_proto_pack_kv_uint(&w, "max_frame", SBX_PROTO_HARD_MAX_FRAME);
		sbx_proto_pack_kv_uint(&w, "max_streams", 100000);
		sbx_proto_pack_kv_uint(&w, "window", window);
		assert_int_equal(sbx_proto_finish(&w, 0, NULL), 0);
		raw_send(sv[1], &w);
		sbx_proto_writer_destroy(&w);
		sbx_proto_frame f;
		assert_int_equal(raw_recv(base, sv[1], &f, 2000), 1);
		assert_int_equal(f.kind, SBX_PROTO_HELLO);
		sbx_proto_frame_release(&f);
		pump_until(base, &srv->ready, 2000);
	}
	return sv[1];
}

static long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void pump_until_n(struct event_base *base, const int *counter, int n, int timeout_ms)
{
	long end = now_ms() + timeout_ms;
	while (*counter < n) {
		if (now_ms() > end)
			fail_msg("count %d, not %d within %d ms", *counter, n, timeout_ms);
		event_base_loop(base, EVLOOP_NONBLOCK);
		if (*counter < n)
			usleep(100);
	}
}

void pump_until(struct event_base *base, const int *flag, int timeout_ms)
{
	pump_until_n(base, flag, 1, timeout_ms);
}

void pump_for(struct event_base *base, int ms)
{
	long end = now_ms() + ms;
	while (now_ms() < end) {
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(100);
	}
}

void raw_send(int fd, sbx_proto_writer *w)
{
	const char *p = w->buf.data;
	size_t left = w->buf.size;
	while (left) {
		ssize_t n = send(fd, p, left, MSG_NOSIGNAL);
		if (n < 0 && errno == EAGAIN) {
			usleep(100);
			continue;
		}
		assert_true(n > 0);
		p += n;
		left -= (size_t)n;
	}
	sbx_proto_writer_reset(w);
}

/* Bytes the raw end has read but not decoded, per fd (tests use a few fds). */
static struct {
	int fd;
	uint8_t buf[SBX_PROTO_HARD_MAX_FRAME / 4];
	size_t len;
} rx;

void raw_forget(int fd)
{
	rx.fd = fd;
	rx.len = 0;
}

int raw_recv(struct event_base *base, int fd, sbx_proto_frame *f, int timeout_ms)
{
	if (rx.fd != fd)
		raw_forget(fd);
	long end = now_ms() + timeout_ms;
	for (;;) {
		size_t used;
		sbx_err err;
		int rc = sbx_proto_frame_decode(rx.buf, rx.len, sizeof(rx.buf) - 4, f, &used, NULL, &err);
		if (rc < 0)
			fail_msg("raw_recv: %s", err.msg);
		if (rc == 1) {
			memmove(rx.buf, rx.buf + used, rx.len - used);
			rx.len -= used;
			return 1;
		}
		ssize_t n = recv(fd, rx.buf + rx.len, sizeof(rx.buf) - rx.len, MSG_DONTWAIT);
		if (n == 0)
			return 0;
		if (n > 0) {
			rx.len += (size_t)n;
			continue;
		}
		if (errno == ECONNRESET)
			return 0;
		assert_int_equal(errno, EAGAIN);
		if (now_ms() > end)
			fail_msg("raw_recv: no frame within %d ms", timeout_ms);
		event_base_loop(base, EVLOOP_NONBLOCK);
		usleep(100);
	}
}

void raw_expect_conn_err(struct event_base *base, int fd, sbx_proto_code code)
{
	sbx_proto_frame f;
	assert_int_equal(raw_recv(base, fd, &f, 2000), 1);
	assert_int_equal(f.kind, SBX_PROTO_ERR);
	assert_int_equal(f.id, 0);
	if (f.code != code)
		fail_msg("expected %s, got %.*s: %.*s", sbx_proto_code_name(code),
			 (int)f.code_name_len, f.code_name, (int)f.msg_len, f.msg);
	sbx_proto_frame_release(&f);
	assert_int_equal(raw_recv(base, fd, &f, 2000), 0);
}
