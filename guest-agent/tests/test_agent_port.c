/* port.open and port.list against the real agent binary as PID 1 of new
 * namespaces (its own network namespace, loopback only), with Python
 * servers started through the agent inside it: bytes both ways with eof
 * and the counts, a few MiB through an echo, ::1, a refused port, bad
 * arguments, a reader that holds its credit (the agent stops reading the
 * socket: what it sent stays within the window, its memory flat), a small
 * piece right behind a burst (the agent's larger turns never hold it), and
 * the listening ports listed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <msgpack.h>

#include "sbx/proto.h"
#include "agent_fixture.h"
#include "test_util.h"

#define PY "/usr/bin/python3"

/* An echo on 127.0.0.1:7000 and [::1]:7001; 7002 writes zeros for ever;
 * 7003 writes 4 MiB at once, then 4 bytes 0.3 s later, and waits for eof. */
static const char servers[] =
	"import socket, threading, time\n"
	"def echo(c):\n"
	"    while True:\n"
	"        d = c.recv(65536)\n"
	"        if not d:\n"
	"            break\n"
	"        c.sendall(d)\n"
	"    c.close()\n"
	"def flood(c):\n"
	"    z = bytes(65536)\n"
	"    try:\n"
	"        while True:\n"
	"            c.sendall(z)\n"
	"    except OSError:\n"
	"        pass\n"
	"def burst(c):\n"
	"    c.sendall(bytes(4 << 20))\n"
	"    time.sleep(0.3)\n"
	"    c.sendall(b'tail')\n"
	"    c.recv(1)\n"
	"    c.close()\n"
	"def serve(af, addr, port, fn):\n"
	"    s = socket.socket(af)\n"
	"    s.bind((addr, port))\n"
	"    s.listen(8)\n"
	"    while True:\n"
	"        threading.Thread(target=fn, args=(s.accept()[0],), daemon=True).start()\n"
	"threading.Thread(target=serve, args=(socket.AF_INET6, '::1', 7001, echo)).start()\n"
	"threading.Thread(target=serve, args=(socket.AF_INET, '127.0.0.1', 7002, flood)).start()\n"
	"threading.Thread(target=serve, args=(socket.AF_INET, '127.0.0.1', 7003, burst)).start()\n"
	"serve(socket.AF_INET, '127.0.0.1', 7000, echo)\n";

static tc_stream *open_port(tc_client *c, uint64_t port, const char *addr)
{
	msgpack_sbuffer buf;
	msgpack_packer pk;
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, addr ? 2 : 1);
	msgpack_pack_str_with_body(&pk, "port", 4);
	msgpack_pack_uint64(&pk, port);
	if (addr) {
		msgpack_pack_str_with_body(&pk, "addr", 4);
		msgpack_pack_str_with_body(&pk, addr, strlen(addr));
	}
	tc_stream *s = tc_request(c, SBX_OP_PORT_OPEN, buf.data, buf.size);
	msgpack_sbuffer_destroy(&buf);
	assert_non_null(s);
	return s;
}

/* The ports port.list shows, as "addr:port" joined by spaces. */
static void listed(tc_client *c, char *out, size_t size)
{
	tc_stream *s = tc_request(c, SBX_OP_PORT_LIST, NULL, 0);
	msgpack_unpacked u;
	assert_true(tc_wait(c, s, FX_WAIT_MS));
	assert_false(s->failed);
	assert_true(tc_result_unpack(s, &u));
	const msgpack_object *ports = sbx_proto_map_get(&u.data, "ports");
	assert_non_null(ports);
	out[0] = '\0';
	for (uint32_t i = 0; i < ports->via.array.size; i++) {
		const char *a;
		size_t al;
		uint64_t p;
		assert_true(sbx_proto_get_str(&ports->via.array.ptr[i], "addr", &a, &al));
		assert_true(sbx_proto_get_uint(&ports->via.array.ptr[i], "port", &p));
		size_t l = strlen(out);
		snprintf(out + l, size - l, "%.*s:%llu ", (int)al, a, (unsigned long long)p);
	}
	msgpack_unpacked_destroy(&u);
	tc_forget(c, s);
}

static void start_servers(fixture *fx)
{
	static const char *const argv[] = { PY, "-c", servers, NULL };
	tc_exec_opts o = { .argv = argv };
	tc_client *c = fx_client(fx, 0);
	tc_stream *s = tc_proc_start(c, &o);
	char l[1024];
	assert_true(tc_wait(c, s, FX_WAIT_MS));
	assert_false(s->failed);
	for (int i = 0; i < 200; i++) {
		listed(c, l, sizeof(l));
		if (strstr(l, "127.0.0.1:7000 ") && strstr(l, "::1:7001 ") && strstr(l, "127.0.0.1:7002 ") &&
		    strstr(l, "127.0.0.1:7003 "))
			return;
		tc_run(fx->base, 50);
	}
	fail_msg("servers never listened: %s", l);
}

static void bytes_both_ways(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	start_servers(fx);
	tc_stream *s = open_port(c, 7000, NULL);
	assert_int_equal(tc_send_data(c, s, SBX_CH_TCP, "hello", 5, true, FX_WAIT_MS), 0);
	assert_true(tc_wait(c, s, FX_WAIT_MS));
	assert_false(s->failed);
	assert_int_equal(s->err_len, 5);
	assert_memory_equal(s->err, "hello", 5);
	uint64_t sent = 0, received = 0;
	assert_true(tc_result_uint(s, "sent", &sent) && tc_result_uint(s, "received", &received));
	assert_int_equal(sent, 5);
	assert_int_equal(received, 5);
	msgpack_unpacked u;
	const char *a;
	size_t al;
	assert_true(tc_event_unpack(s, 0, &u));
	assert_true(sbx_proto_get_str(&u.data, "addr", &a, &al));
	assert_int_equal(al, 9);
	assert_memory_equal(a, "127.0.0.1", 9);
	msgpack_unpacked_destroy(&u);
	tc_forget(c, s);

	/* 6 MiB through the echo, over several windows each way. */
	size_t n = 6u << 20;
	char *big = malloc(n);
	for (size_t i = 0; i < n; i++)
		big[i] = (char)(i * 7 + i / 4096);
	s = open_port(c, 7000, NULL);
	assert_int_equal(tc_send_data(c, s, SBX_CH_TCP, big, n, true, 60000), 0);
	assert_true(tc_wait(c, s, 60000));
	assert_false(s->failed);
	assert_int_equal(s->err_len, n);
	assert_memory_equal(s->err, big, n);
	free(big);
	tc_forget(c, s);

	/* ::1, by name and as the fall-back when 127.0.0.1 refuses. */
	s = open_port(c, 7001, "::1");
	assert_int_equal(tc_send_data(c, s, SBX_CH_TCP, "six", 3, true, FX_WAIT_MS), 0);
	assert_true(tc_wait(c, s, FX_WAIT_MS));
	assert_false(s->failed);
	assert_int_equal(s->err_len, 3);
	tc_forget(c, s);
	s = open_port(c, 7001, NULL);
	assert_int_equal(tc_send_data(c, s, SBX_CH_TCP, "six", 3, true, FX_WAIT_MS), 0);
	assert_true(tc_wait(c, s, FX_WAIT_MS));
	assert_false(s->failed);
	assert_true(tc_event_unpack(s, 0, &u));
	assert_true(sbx_proto_get_str(&u.data, "addr", &a, &al));
	assert_int_equal(al, 3);
	msgpack_unpacked_destroy(&u);
	tc_forget(c, s);
}

static void refused_and_bad_input(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	tc_stream *s = open_port(c, 7999, NULL);
	assert_true(tc_wait(c, s, FX_WAIT_MS));
	assert_true(s->failed);
	assert_string_equal(s->code, "not_found");
	assert_non_null(strstr(s->msg, "nothing listens on port 7999"));
	static const struct {
		uint64_t port;
		const char *addr;
	} bad[] = { { 0, NULL }, { 65536, NULL }, { 80, "10.0.0.1" }, { 80, "localhost" } };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		s = open_port(c, bad[i].port, bad[i].addr);
		assert_true(tc_wait(c, s, FX_WAIT_MS));
		assert_true(s->failed);
		assert_string_equal(s->code, "bad_request");
		tc_forget(c, s);
	}
	/* Data on another channel than "tcp". */
	start_servers(fx);
	s = open_port(c, 7000, NULL);
	assert_int_equal(tc_send_data(c, s, "stdin", "x", 1, false, FX_WAIT_MS), 0);
	assert_true(tc_wait(c, s, FX_WAIT_MS));
	assert_true(s->failed);
	assert_string_equal(s->code, "bad_request");
}

static void held_credit_stops_the_reading(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	start_servers(fx);
	long rss0 = agent_ns_rss_kb(&fx->ns);
	tc_stream *s = open_port(c, 7002, NULL);
	s->hold_credit = true;
	tc_run(fx->base, 1500);
	/* Our window (the library's 256 KiB) and no more, though the server
	 * would write without end. */
	assert_false(s->done);
	assert_true(s->err_len > 0);
	assert_true(s->held <= 256u * 1024);
	long grown = agent_ns_rss_kb(&fx->ns) - rss0;
	if (grown > 8 * 1024)
		fail_msg("the agent grew %ld KiB holding a stalled stream", grown);
	tc_release(c, s);
	tc_run(fx->base, 200);
	assert_true(s->err_len > 256u * 1024);
	assert_int_equal(tc_cancel(c, s), 0);
	assert_true(tc_wait(c, s, FX_WAIT_MS));
	assert_true(s->failed);
	assert_string_equal(s->code, "cancelled");
}

/* The server's 4 MiB come in large pieces, so the agent waits for larger
 * turns; the 4 bytes behind them are no such turn and still come at once
 * (its timer: 1 ms), not when more bytes or the end come. */
static void small_piece_behind_a_burst(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	size_t n = 4u << 20;
	start_servers(fx);
	tc_stream *s = open_port(c, 7003, NULL);
	for (int i = 0; i < 3000 && s->err_len < n; i++)
		tc_run(fx->base, 10);
	assert_int_equal(s->err_len, n);
	uint64_t t0 = test_now_ms();
	while (s->err_len < n + 4 && test_now_ms() - t0 < 5000)
		tc_run(fx->base, 5);
	uint64_t waited = test_now_ms() - t0;
	assert_int_equal(s->err_len, n + 4);
	assert_memory_equal(s->err + n, "tail", 4);
	/* 0.3 s of the server's own, less what the burst's last frames took */
	if (waited > 500)
		fail_msg("the 4 bytes behind the burst came %llu ms after it",
			 (unsigned long long)waited);
	assert_false(s->done);
	assert_int_equal(tc_send_data(c, s, SBX_CH_TCP, NULL, 0, true, FX_WAIT_MS), 0);
	assert_true(tc_wait(c, s, FX_WAIT_MS));
	assert_false(s->failed);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(bytes_both_ways, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(refused_and_bad_input, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(held_credit_stops_the_reading, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(small_piece_behind_a_burst, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
