/* The agent client's distrust of the guest (sup_agent), one test per
 * deadline and per limit, over a socketpair whose far end a scripted peer
 * drives frame by frame (protocol/tests/conn_harness: raw_send, raw_recv):
 * an exec's timeout plus grace, the idle deadline and the clock standing
 * while the caller holds credit or an upload waits for its client, the
 * ping, the frame deadline, guest faults reported as agent errors (never a
 * client's status), the deferred blame, and the streams / waiting / queued
 * limits. Deadlines are a few hundred ms so the whole file runs in seconds. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "conn_harness.h"
#include "sbx/proto.h"
#include "sup_agent.h"

/* What the client side saw. */
typedef struct t_agent {
	struct event_base *base;
	sup_agent *a;
	int peer;                /* the scripted agent's end */
	int ready, lost;
	sbx_err why;
	long lost_ms;
} t_agent;

typedef struct t_call {
	t_agent *t;
	sup_agent_call *call;
	int done, rc, data, events;
	size_t held;             /* cost not given back */
	bool consume;            /* give cost back at once */
	sbx_err err;
	long done_ms;
	bool blame_on_done;
} t_call;

static long ms_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void a_ready(sup_agent *a, void *ud)
{
	(void)a;
	((t_agent *)ud)->ready++;
}

static void a_lost(sup_agent *a, const sbx_err *why, void *ud)
{
	t_agent *t = ud;
	t->lost++;
	t->why = *why;
	t->lost_ms = ms_now();
	sup_agent_free(a);
	t->a = NULL;
}

static const sup_agent_cbs agent_cbs = { .on_ready = a_ready, .on_lost = a_lost };

static void c_data(sup_agent_call *call, const char *ch, size_t ch_len, const uint8_t *p, size_t n,
		   size_t cost, void *ud)
{
	t_call *c = ud;
	(void)ch;
	(void)ch_len;
	(void)p;
	(void)n;
	c->data++;
	if (c->consume)
		sup_agent_call_consumed(call, cost);
	else
		c->held += cost;
}

static void c_event(sup_agent_call *call, const msgpack_object *map, size_t cost, void *ud)
{
	t_call *c = ud;
	(void)map;
	c->events++;
	if (c->consume)
		sup_agent_call_consumed(call, cost);
	else
		c->held += cost;
}

static void c_done(sup_agent_call *call, int rc, const msgpack_object *result, const sbx_err *err,
		   void *ud)
{
	t_call *c = ud;
	(void)result;
	c->done++;
	c->rc = rc;
	if (err)
		c->err = *err;
	c->done_ms = ms_now();
	c->call = NULL;
	if (c->blame_on_done)
		sup_agent_blame(sup_agent_call_agent(call), "agent: %s", "a result of the wrong shape");
}

static const sup_agent_call_cbs call_cbs = { .on_data = c_data, .on_event = c_event,
					     .on_done = c_done };

static sup_agent_opts opts_default(void)
{
	return (sup_agent_opts){
		.grace_ms = 200,
		.idle_ms = 300,
		.ping_after_ms = 60000, /* out of the way unless a test wants it */
		.ping_timeout_ms = 60000,
		.frame_ms = 60000,
		.max_streams = 64,
		.max_waiting = 64,
		.max_queued = 8u << 20,
	};
}

/* The scripted peer names itself as an agent of the oldest version served. */
static const char *peer_name = "sandbox-agent/0.1.0";

static void peer_hello(int fd, uint64_t window)
{
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_hello(&w, SBX_PROTO_DEFAULT_MAX_FRAME, 1024, window, NULL,
						0, peer_name, NULL),
			 0);
	raw_send(fd, &w);
	sbx_proto_writer_destroy(&w);
}

/* Connect, shake hands (the peer grants window), ready. */
static void t_open(t_agent *t, const sup_agent_opts *o, uint64_t window)
{
	memset(t, 0, sizeof(*t));
	t->base = harness_base();
	int sv[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	raw_forget(sv[1]);
	t->peer = sv[1];
	sbx_err e;
	assert_int_equal(sup_agent_open(t->base, sv[0], "sb-test", 2000, o, &agent_cbs, t, &t->a, &e),
			 0);
	peer_hello(t->peer, window);
	sbx_proto_frame f;
	assert_int_equal(raw_recv(t->base, t->peer, &f, 2000), 1);
	assert_int_equal(f.kind, SBX_PROTO_HELLO);
	sbx_proto_frame_release(&f);
	pump_until(t->base, &t->ready, 2000);
}

static void t_close(t_agent *t)
{
	if (t->a)
		sup_agent_free(t->a);
	close(t->peer);
	event_base_free(t->base);
}

/* The next frame the peer gets, of kind; its id. */
static uint64_t peer_expect(t_agent *t, sbx_proto_kind kind, const char *op)
{
	sbx_proto_frame f;
	assert_int_equal(raw_recv(t->base, t->peer, &f, 3000), 1);
	if (f.kind != kind)
		fail_msg("peer got %s, wanted %s", sbx_proto_kind_name(f.kind),
			 sbx_proto_kind_name(kind));
	if (op)
		assert_true(f.op_len == strlen(op) && memcmp(f.op, op, f.op_len) == 0);
	uint64_t id = f.id;
	sbx_proto_frame_release(&f);
	return id;
}

static void peer_send_end(t_agent *t, uint64_t id)
{
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_end(&w, id, NULL, 0, 0, NULL), 0);
	raw_send(t->peer, &w);
	sbx_proto_writer_destroy(&w);
}

static void peer_send_data(t_agent *t, uint64_t id, size_t n)
{
	static uint8_t buf[4096];
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_data(&w, id, SBX_CH_STDOUT, buf, n, false, 0, NULL), 0);
	raw_send(t->peer, &w);
	sbx_proto_writer_destroy(&w);
}

/* Bytes as they are, the loop running meanwhile (the client side reads
 * them while the socket is full); stops early once the client hung up. */
static void peer_send_raw(t_agent *t, const void *p, size_t n)
{
	const uint8_t *b = p;
	long end = ms_now() + 3000;
	while (n) {
		ssize_t k = send(t->peer, b, n, MSG_NOSIGNAL);
		if (k < 0 && (errno == EPIPE || errno == ECONNRESET))
			return;
		if (k < 0) {
			assert_int_equal(errno, EAGAIN);
			assert_true(ms_now() < end);
			event_base_loop(t->base, EVLOOP_NONBLOCK);
			continue;
		}
		b += k;
		n -= (size_t)k;
	}
}

static void start(t_agent *t, t_call *c, const char *op, sup_agent_wait wait, uint64_t timeout_ms)
{
	memset(c, 0, sizeof(*c));
	c->t = t;
	c->consume = true;
	sbx_err e;
	int rc = sup_agent_call_start(t->a, op, NULL, 0, wait, timeout_ms, &call_cbs, c, &c->call, &e);
	if (rc < 0)
		fail_msg("start %s: %s", op, e.msg);
}

/* ---- exec: its timeout plus grace ---- */

typedef struct t_exec {
	int done, rc;
	sup_exec_status st;
	bool has_st;
	sbx_err err;
	long done_ms;
	bool hold_one;           /* a slow reader: the last frame's cost is held */
	size_t last_cost;
} t_exec;

static void x_data(sup_exec_call *call, sup_chan ch, const uint8_t *p, size_t n, size_t cost,
		   void *ud)
{
	t_exec *x = ud;
	(void)ch;
	(void)p;
	(void)n;
	if (!x->hold_one) {
		sup_agent_exec_consumed(call, cost);
		return;
	}
	if (x->last_cost)
		sup_agent_exec_consumed(call, x->last_cost);
	x->last_cost = cost;
}

static void x_done(sup_exec_call *call, int rc, const sup_exec_status *st, const sbx_err *err,
		   void *ud)
{
	t_exec *x = ud;
	(void)call;
	x->done++;
	x->rc = rc;
	x->has_st = st != NULL;
	if (st)
		x->st = *st;
	if (err)
		x->err = *err;
	x->done_ms = ms_now();
}

static const sup_exec_cbs exec_cbs = { .on_data = x_data, .on_done = x_done };

/* An agent that takes the exec and never answers: the call ends at its
 * timeout plus grace with the timed-out status (kill not confirmed), the
 * stream is cancelled, the connection goes on. A command without timeout
 * has no such deadline. */
static void test_exec_timeout_plus_grace(void **state)
{
	(void)state;
	t_agent t;
	sup_agent_opts o = opts_default();
	t_open(&t, &o, 65536);
	char *argv[] = { "sleep", "10", NULL };
	sup_exec_spec spec = { .x = { .argv = argv, .argc = 2, .timeout_ms = 300 } };
	t_exec x = { 0 };
	sup_exec_call *call;
	sbx_err e;
	long t0 = ms_now();
	assert_int_equal(sup_agent_exec(t.a, &spec, NULL, &exec_cbs, &x, &call, &e), 0);
	uint64_t id = peer_expect(&t, SBX_PROTO_REQ, SBX_OP_EXEC);
	pump_until(t.base, &x.done, 4000);
	assert_int_equal(x.rc, -ETIME);
	assert_in_range(x.done_ms - t0, 480, 2500);
	assert_true(x.has_st);
	assert_true(x.st.timed_out && x.st.kill_unconfirmed && !x.st.exited);
	assert_int_equal(x.st.signal, SIGKILL);
	assert_non_null(strstr(x.err.msg, "timeout of 300 ms and 200 ms of grace"));
	assert_int_equal(peer_expect(&t, SBX_PROTO_CANCEL, NULL), id);
	sup_agent_stats st;
	sup_agent_stats_get(t.a, &st);
	assert_int_equal(st.streams, 1); /* open until the agent answers the cancel */
	assert_int_equal(st.waiting, 0);
	peer_send_end(&t, id);
	pump_for(t.base, 50);
	sup_agent_stats_get(t.a, &st);
	assert_int_equal(st.streams, 0);
	assert_int_equal(t.lost, 0);

	/* no timeout: no deadline at all */
	spec.x.timeout_ms = 0;
	memset(&x, 0, sizeof(x));
	assert_int_equal(sup_agent_exec(t.a, &spec, NULL, &exec_cbs, &x, &call, &e), 0);
	peer_expect(&t, SBX_PROTO_REQ, SBX_OP_EXEC);
	pump_for(t.base, 800);
	assert_int_equal(x.done, 0);
	sup_agent_exec_cancel(call);
	t_close(&t);
}

/* The peer floods the stream with frames of n bytes (the credit it gets
 * back unread), the loop running between them, until the call is done. */
static void peer_flood(t_agent *t, uint64_t id, size_t n, const int *done)
{
	long end = ms_now() + 5000;
	while (!*done && ms_now() < end) {
		peer_send_data(t, id, n);
		event_base_loop(t->base, EVLOOP_NONBLOCK);
	}
}

/* An agent that floods an exec and never ends it, for a caller that gives
 * every frame's cost back at once (a buffered exec: the clock stops and
 * runs again around each frame, and used to lose the part of a ms each
 * time, so the budget was never spent) and for one that always holds the
 * last frame's (a reader behind by a frame: the clock stands, and the
 * call ends once the agent sent SUP_AGENT_LATE_BYTES past its timeout
 * plus grace). Both end at their timeout plus grace. */
static void test_exec_deadline_under_a_flood(void **state)
{
	(void)state;
	for (int hold = 0; hold < 2; hold++) {
		t_agent t;
		sup_agent_opts o = opts_default();
		t_open(&t, &o, 65536);
		char *argv[] = { "yes", NULL };
		sup_exec_spec spec = { .x = { .argv = argv, .argc = 1, .timeout_ms = 300 } };
		t_exec x = { .hold_one = hold };
		sup_exec_call *call;
		sbx_err e;
		long t0 = ms_now();
		assert_int_equal(sup_agent_exec(t.a, &spec, NULL, &exec_cbs, &x, &call, &e), 0);
		uint64_t id = peer_expect(&t, SBX_PROTO_REQ, SBX_OP_EXEC);
		peer_flood(&t, id, 4096, &x.done);
		assert_int_equal(x.done, 1);
		assert_int_equal(x.rc, -ETIME);
		assert_in_range(x.done_ms - t0, 480, 3000);
		assert_true(x.has_st && x.st.timed_out);
		assert_non_null(strstr(x.err.msg, "timeout of 300 ms and 200 ms of grace"));
		if (hold)
			assert_non_null(strstr(x.err.msg, "bytes past it"));
		assert_int_equal(t.lost, 0);
		t_close(&t);
	}
}

/* An exec answered with too_large, which exec does not have (its request
 * fit the agent's max_frame): an agent error, not the client's 413. */
static void test_exec_too_large_is_the_agents(void **state)
{
	(void)state;
	t_agent t;
	sup_agent_opts o = opts_default();
	t_open(&t, &o, 65536);
	char *argv[] = { "true", NULL };
	sup_exec_spec spec = { .x = { .argv = argv, .argc = 1 } };
	t_exec x = { 0 };
	sup_exec_call *call;
	sbx_err e;
	assert_int_equal(sup_agent_exec(t.a, &spec, NULL, &exec_cbs, &x, &call, &e), 0);
	uint64_t id = peer_expect(&t, SBX_PROTO_REQ, SBX_OP_EXEC);
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	sbx_proto_encode_err(&w, id, SBX_PROTO_E_TOO_LARGE, "says who", 0, NULL);
	raw_send(t.peer, &w);
	sbx_proto_writer_destroy(&w);
	pump_until(t.base, &x.done, 4000);
	assert_int_equal(x.rc, -EPROTO);
	assert_non_null(strstr(x.err.msg, "an error it does not have"));
	t_close(&t);
}

/* ---- the idle deadline ---- */

/* A call that waits for an answer: each frame of it starts the idle budget
 * again; silence for idle_ms ends it (-ETIME) and cancels the stream. */
static void test_idle_deadline(void **state)
{
	(void)state;
	t_agent t;
	sup_agent_opts o = opts_default();
	o.idle_ms = 600; /* four times the frames' pace: a loaded machine keeps up */
	t_open(&t, &o, 65536);
	t_call c;
	long t0 = ms_now();
	start(&t, &c, SBX_OP_FILE_READ, SUP_AGENT_WAIT_ANSWER, 0);
	uint64_t id = peer_expect(&t, SBX_PROTO_REQ, SBX_OP_FILE_READ);
	/* frames every 150 ms for 900 ms keep it alive */
	long last = 0;
	for (int i = 0; i < 6; i++) {
		peer_send_data(&t, id, 100);
		last = ms_now();
		pump_for(t.base, 150);
	}
	assert_int_equal(c.done, 0);
	assert_int_equal(c.data, 6);
	pump_until(t.base, &c.done, 4000);
	assert_int_equal(c.rc, -ETIME);
	assert_true(c.done_ms - t0 > 900);
	assert_in_range(c.done_ms - last, 550, 2500);
	assert_non_null(strstr(c.err.msg, "sent nothing on file.read for 600 ms"));
	assert_int_equal(peer_expect(&t, SBX_PROTO_CANCEL, NULL), id);
	assert_int_equal(t.lost, 0);
	t_close(&t);
}

/* A client reading slowly is not the agent's fault: while the caller holds
 * cost it has not given back, the clock stands; it runs again once the
 * cost is back. */
static void test_idle_stands_while_credit_held(void **state)
{
	(void)state;
	t_agent t;
	sup_agent_opts o = opts_default();
	t_open(&t, &o, 65536);
	t_call c;
	start(&t, &c, SBX_OP_FILE_READ, SUP_AGENT_WAIT_ANSWER, 0);
	c.consume = false;
	uint64_t id = peer_expect(&t, SBX_PROTO_REQ, SBX_OP_FILE_READ);
	peer_send_data(&t, id, 1000);
	pump_until(t.base, &c.data, 2000);
	pump_for(t.base, 900); /* three idle deadlines */
	assert_int_equal(c.done, 0);
	long back = ms_now();
	sup_agent_call_consumed(c.call, c.held);
	pump_until(t.base, &c.done, 4000);
	assert_int_equal(c.rc, -ETIME);
	assert_in_range(c.done_ms - back, 250, 2000);
	t_close(&t);
}

/* An upload: while its input waits for the client the clock stands; while a
 * send waits for the agent's credit, and after the input's eof, it runs. */
static void test_sends_clock(void **state)
{
	(void)state;
	t_agent t;
	sup_agent_opts o = opts_default();
	t_open(&t, &o, 4096); /* a small window: the agent's credit runs out fast */
	t_call c;
	start(&t, &c, SBX_OP_FILE_WRITE, SUP_AGENT_WAIT_SENDS, 0);
	uint64_t id = peer_expect(&t, SBX_PROTO_REQ, SBX_OP_FILE_WRITE);
	pump_for(t.base, 800); /* the client sends nothing yet */
	assert_int_equal(c.done, 0);
	static uint8_t buf[8192];
	sbx_err e;
	int n = sup_agent_call_send(c.call, SBX_CH_FILE, buf, sizeof(buf), false, &e);
	assert_true(n > 0 && n < (int)sizeof(buf)); /* the credit ran out */
	long starved = ms_now();
	pump_until(t.base, &c.done, 4000);
	assert_int_equal(c.rc, -ETIME);
	assert_in_range(c.done_ms - starved, 250, 2000);
	peer_expect(&t, SBX_PROTO_DATA, NULL);
	assert_int_equal(peer_expect(&t, SBX_PROTO_CANCEL, NULL), id);

	/* the whole input went with its eof: the answer is due */
	start(&t, &c, SBX_OP_FILE_WRITE, SUP_AGENT_WAIT_SENDS, 0);
	peer_expect(&t, SBX_PROTO_REQ, SBX_OP_FILE_WRITE);
	assert_int_equal(sup_agent_call_send(c.call, SBX_CH_FILE, buf, 100, true, &e), 100);
	long eof = ms_now();
	pump_until(t.base, &c.done, 4000);
	assert_int_equal(c.rc, -ETIME);
	assert_in_range(c.done_ms - eof, 250, 2000);
	t_close(&t);
}

/* A call that may rightly be quiet (a watch) has no deadline. */
static void test_quiet_has_no_deadline(void **state)
{
	(void)state;
	t_agent t;
	sup_agent_opts o = opts_default();
	t_open(&t, &o, 65536);
	t_call c;
	start(&t, &c, SBX_OP_FS_WATCH, SUP_AGENT_WAIT_QUIET, 0);
	peer_expect(&t, SBX_PROTO_REQ, SBX_OP_FS_WATCH);
	pump_for(t.base, 900);
	assert_int_equal(c.done, 0);
	sup_agent_call_cancel(c.call);
	t_close(&t);
}

/* ---- liveness ---- */

/* A quiet connection is pinged; an agent that answers stays; one that does
 * not is lost ping_timeout_ms later, and what waited on it gets an agent
 * error. */
/* An agent older than the supervisor serves (or not one at all) is lost at
 * the handshake, naming both versions; a newer one is served. */
static void test_agent_version(void **state)
{
	(void)state;
	static const char *const refused[] = { "sandbox-agent/0.0.9", "sandbox-agent/0.1",
						"scripted-peer", "sandbox-agent/" };
	sup_agent_opts o = opts_default();
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		t_agent t;
		memset(&t, 0, sizeof(t));
		t.base = harness_base();
		int sv[2];
		assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
		fcntl(sv[1], F_SETFL, O_NONBLOCK);
		raw_forget(sv[1]);
		t.peer = sv[1];
		sbx_err e;
		assert_int_equal(sup_agent_open(t.base, sv[0], "sb-test", 2000, &o, &agent_cbs, &t, &t.a, &e), 0);
		peer_name = refused[i];
		peer_hello(t.peer, 65536);
		pump_until(t.base, &t.lost, 2000);
		assert_int_equal(t.ready, 0);
		assert_int_equal(t.why.code, -EPROTO);
		assert_non_null(strstr(t.why.msg, refused[i]));
		assert_non_null(strstr(t.why.msg, "needs sandbox-agent/0.1.0 or newer"));
		t_close(&t);
	}
	t_agent t;
	peer_name = "sandbox-agent/0.2.0";
	t_open(&t, &o, 65536);
	assert_int_equal(t.ready, 1);
	assert_int_equal(t.lost, 0);
	t_close(&t);
	peer_name = "sandbox-agent/0.1.0";
}

static void test_ping(void **state)
{
	(void)state;
	t_agent t;
	sup_agent_opts o = opts_default();
	o.ping_after_ms = 200;
	o.ping_timeout_ms = 200;
	t_open(&t, &o, 65536);
	long t0 = ms_now();
	for (int i = 0; i < 3; i++) {
		uint64_t id = peer_expect(&t, SBX_PROTO_REQ, SBX_OP_PING);
		peer_send_end(&t, id);
	}
	assert_true(ms_now() - t0 >= 550);
	assert_int_equal(t.lost, 0);
	t_call c;
	start(&t, &c, SBX_OP_FS_WATCH, SUP_AGENT_WAIT_QUIET, 0);
	peer_expect(&t, SBX_PROTO_REQ, SBX_OP_FS_WATCH);
	peer_expect(&t, SBX_PROTO_REQ, SBX_OP_PING); /* and never answered */
	long pinged = ms_now();
	pump_until(t.base, &t.lost, 4000);
	assert_in_range(t.lost_ms - pinged, 150, 2000);
	assert_int_equal(t.why.code, -EPROTO);
	assert_non_null(strstr(t.why.msg, "did not answer a ping: nothing came from it for 200 ms"));
	assert_int_equal(c.done, 1);
	assert_int_equal(c.rc, -EPROTO);
	t_close(&t);
}

/* A busy agent works through the requests queued before the ping: as long
 * as frames come, the ping's answer may be late; once nothing comes for
 * ping_timeout_ms, the connection is lost. */
static void test_ping_busy_agent(void **state)
{
	(void)state;
	t_agent t;
	sup_agent_opts o = opts_default();
	o.ping_after_ms = 200;
	o.ping_timeout_ms = 300;
	t_open(&t, &o, 65536);
	t_call c;
	start(&t, &c, SBX_OP_FILE_READ, SUP_AGENT_WAIT_QUIET, 0);
	uint64_t id = peer_expect(&t, SBX_PROTO_REQ, SBX_OP_FILE_READ);
	peer_expect(&t, SBX_PROTO_REQ, SBX_OP_PING); /* never answered */
	long last = 0;
	for (int i = 0; i < 10; i++) { /* a second of work, a frame every 100 ms */
		peer_send_data(&t, id, 100);
		last = ms_now();
		pump_for(t.base, 100);
	}
	assert_int_equal(t.lost, 0);
	pump_until(t.base, &t.lost, 4000);
	assert_in_range(t.lost_ms - last, 250, 2000);
	assert_int_equal(c.rc, -EPROTO);
	t_close(&t);
}

/* ---- the frame deadline ---- */

/* A frame trickled in: lost frame_ms after its first byte, as a protocol
 * violation of the agent's. */
static void test_frame_deadline(void **state)
{
	(void)state;
	t_agent t;
	sup_agent_opts o = opts_default();
	o.frame_ms = 250;
	t_open(&t, &o, 65536);
	t_call c;
	start(&t, &c, SBX_OP_FS_STAT, SUP_AGENT_WAIT_QUIET, 0);
	uint64_t id = peer_expect(&t, SBX_PROTO_REQ, SBX_OP_FS_STAT);
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_end(&w, id, NULL, 0, 0, NULL), 0);
	long t0 = ms_now();
	for (size_t i = 0; i < 3; i++) {
		peer_send_raw(&t, w.buf.data + i, 1);
		pump_for(t.base, 100);
	}
	pump_until(t.base, &t.lost, 4000);
	assert_in_range(t.lost_ms - t0, 230, 2000);
	assert_int_equal(t.why.code, -EPROTO);
	assert_non_null(strstr(t.why.msg, "not complete 250 ms after its first byte"));
	assert_int_equal(c.rc, -EPROTO);
	sbx_proto_writer_destroy(&w);
	t_close(&t);
}

/* ---- guest faults are agent errors ---- */

static void expect_fault(const void *bytes, size_t n, const char *words)
{
	t_agent t;
	sup_agent_opts o = opts_default();
	t_open(&t, &o, 65536);
	t_call c;
	start(&t, &c, SBX_OP_FS_STAT, SUP_AGENT_WAIT_ANSWER, 0);
	c.consume = false; /* a client reading slowly: the credit stays spent */
	peer_expect(&t, SBX_PROTO_REQ, SBX_OP_FS_STAT);
	peer_send_raw(&t, bytes, n);
	pump_until(t.base, &t.lost, 4000);
	/* -EPROTO (502), never the library's -EMSGSIZE or -EBADMSG, which
	 * one level up would read as the client's 413 or 400 */
	assert_int_equal(c.rc, -EPROTO);
	assert_int_equal(t.why.code, -EPROTO);
	if (!strstr(t.why.msg, words))
		fail_msg("\"%s\" not in \"%s\"", words, t.why.msg);
	assert_non_null(strstr(c.err.msg, "the agent broke the protocol"));
	t_close(&t);
}

static void test_guest_faults(void **state)
{
	(void)state;
	static const uint8_t too_long[] = { 0x7f, 0xff, 0xff, 0xff, 0x81, 0xa1, 't' };
	expect_fault(too_long, sizeof(too_long), "exceeds max_frame");
	static const uint8_t garbage[] = { 0, 0, 0, 4, 0xc1, 0xc1, 0xc1, 0xc1 };
	expect_fault(garbage, sizeof(garbage), "bad_frame");
	/* a second hello */
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	sbx_proto_encode_hello(&w, SBX_PROTO_DEFAULT_MAX_FRAME, 16, 65536, NULL, 0, NULL, NULL);
	expect_fault(w.buf.data, w.buf.size, "second hello");
	/* an answer on a stream never opened */
	sbx_proto_writer_reset(&w);
	sbx_proto_encode_end(&w, 99, NULL, 0, 0, NULL);
	expect_fault(w.buf.data, w.buf.size, "never opened");
	/* data beyond the credit we granted (SUP_AGENT_RECV_WINDOW) */
	sbx_proto_writer_reset(&w);
	static uint8_t big[64 * 1024];
	for (size_t i = 0; i <= SUP_AGENT_RECV_WINDOW / sizeof(big); i++)
		sbx_proto_encode_data(&w, 1, SBX_CH_STDOUT, big, sizeof(big), false, 0, NULL);
	expect_fault(w.buf.data, w.buf.size, "flow_control");
	sbx_proto_writer_destroy(&w);
}

/* A promise broken above the framing: the connection goes on the next turn
 * of the loop (not inside the caller's callback), every other call ends as
 * an agent error, on_lost says why. */
static void test_blame(void **state)
{
	(void)state;
	t_agent t;
	sup_agent_opts o = opts_default();
	t_open(&t, &o, 65536);
	t_call c1, c2;
	start(&t, &c1, SBX_OP_FS_STAT, SUP_AGENT_WAIT_ANSWER, 0);
	uint64_t id = peer_expect(&t, SBX_PROTO_REQ, SBX_OP_FS_STAT);
	start(&t, &c2, SBX_OP_FS_WATCH, SUP_AGENT_WAIT_QUIET, 0);
	peer_expect(&t, SBX_PROTO_REQ, SBX_OP_FS_WATCH);
	c1.blame_on_done = true;
	peer_send_end(&t, id);
	pump_until(t.base, &c1.done, 2000);
	assert_int_equal(c1.rc, 0);
	pump_until(t.base, &t.lost, 4000);
	assert_int_equal(t.why.code, -EPROTO);
	assert_string_equal(t.why.msg, "agent: a result of the wrong shape");
	assert_int_equal(c2.done, 1);
	assert_int_equal(c2.rc, -EPROTO);
	t_close(&t);
}

/* ---- what one agent may hold of ours ---- */

static void test_limits(void **state)
{
	(void)state;
	t_agent t;
	sup_agent_opts o = opts_default();
	o.max_streams = 4;
	o.max_waiting = 3;
	t_open(&t, &o, 65536);
	t_call c[5];
	sbx_err e;
	sup_agent_call *x;
	for (int i = 0; i < 3; i++)
		start(&t, &c[i], SBX_OP_FS_WATCH, SUP_AGENT_WAIT_QUIET, 0);
	assert_int_equal(sup_agent_call_start(t.a, SBX_OP_FS_STAT, NULL, 0, SUP_AGENT_WAIT_ANSWER, 0,
					      &call_cbs, &c[3], &x, &e),
			 -EAGAIN);
	assert_non_null(strstr(e.msg, "3 requests wait on the agent"));
	/* cancelled ones wait no more, but their streams stay open until the
	 * agent answers */
	sup_agent_call_cancel(c[0].call);
	sup_agent_call_cancel(c[1].call);
	start(&t, &c[3], SBX_OP_FS_WATCH, SUP_AGENT_WAIT_QUIET, 0);
	assert_int_equal(sup_agent_call_start(t.a, SBX_OP_FS_STAT, NULL, 0, SUP_AGENT_WAIT_ANSWER, 0,
					      &call_cbs, &c[4], &x, &e),
			 -EAGAIN);
	assert_non_null(strstr(e.msg, "4 streams are open"));
	sup_agent_stats st;
	sup_agent_stats_get(t.a, &st);
	assert_int_equal(st.streams, 4);
	assert_int_equal(st.waiting, 2);
	sup_agent_call_cancel(c[2].call);
	sup_agent_call_cancel(c[3].call);
	t_close(&t);

	/* bytes queued towards an agent that does not read */
	o = opts_default();
	o.max_queued = 256 * 1024;
	o.max_streams = o.max_waiting = 1000;
	t_open(&t, &o, 65536);
	static uint8_t args[60 * 1024];
	args[0] = 0xc0; /* not a map: the agent would refuse it, but never reads it */
	msgpack_sbuffer sb;
	msgpack_sbuffer_init(&sb);
	msgpack_packer pk;
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, "pad");
	msgpack_pack_bin(&pk, sizeof(args));
	msgpack_pack_bin_body(&pk, args, sizeof(args));
	int n = 0, rc;
	t_call q;
	memset(&q, 0, sizeof(q));
	/* the kernel's socket buffers take a few MiB first */
	while ((rc = sup_agent_call_start(t.a, SBX_OP_FS_STAT, sb.data, sb.size,
					  SUP_AGENT_WAIT_QUIET, 0, &call_cbs, &q, &x, &e)) == 0 &&
	       n < 200) {
		n++;
		pump_for(t.base, 1);
	}
	assert_int_equal(rc, -EAGAIN);
	assert_non_null(strstr(e.msg, "bytes wait to be read by the agent"));
	sup_agent_stats_get(t.a, &st);
	assert_true(st.queued <= o.max_queued);
	assert_true(st.queued + sb.size > o.max_queued);
	msgpack_sbuffer_destroy(&sb);
	t_close(&t);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agent_version),
		cmocka_unit_test(test_exec_timeout_plus_grace),
		cmocka_unit_test(test_exec_deadline_under_a_flood),
		cmocka_unit_test(test_exec_too_large_is_the_agents),
		cmocka_unit_test(test_idle_deadline),
		cmocka_unit_test(test_idle_stands_while_credit_held),
		cmocka_unit_test(test_sends_clock),
		cmocka_unit_test(test_quiet_has_no_deadline),
		cmocka_unit_test(test_ping),
		cmocka_unit_test(test_ping_busy_agent),
		cmocka_unit_test(test_frame_deadline),
		cmocka_unit_test(test_guest_faults),
		cmocka_unit_test(test_blame),
		cmocka_unit_test(test_limits),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
