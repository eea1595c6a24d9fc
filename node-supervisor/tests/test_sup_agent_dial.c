/* The agent client's transports below the socket (sup_agent_dial), through
 * sup_agent_connect as the pools call it:
 * - addresses: unix, vsock:CID:PORT, hvsock:PATH:PORT, and what is refused;
 * - hybrid vsock (Firecracker, Cloud Hypervisor): the test plays the VMM on
 *   a unix socket (reads "CONNECT <port>\n", answers) and then the agent
 *   (its hello in the same write as "OK", so nothing of the agent's may be
 *   eaten by the exchange); a VMM that closes (no listener in the guest),
 *   one that answers garbage or too long a line, one that never answers
 *   (the handshake deadline, which covers the dial), a socket that is not
 *   there;
 * - AF_VSOCK: these machines have no vhost-vsock (no VM to reach), so the
 *   connect's error path only: the error names the address.
 * Deadlines are a few hundred ms so the file runs in about a second. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>
#include <linux/vm_sockets.h>

#include "conn_harness.h"
#include "sbx/proto.h"
#include "sup_agent.h"
#include "sup_agent_dial.h"

/* ---- addresses ---- */

static void test_addr_parse(void **state)
{
	(void)state;
	sup_agent_addr a;
	sbx_err e;
	assert_int_equal(sup_agent_addr_parse("/run/sbx/a.sock", &a, &e), 0);
	assert_int_equal(a.kind, SUP_AGENT_UNIX);
	assert_string_equal(a.path, "/run/sbx/a.sock");
	assert_int_equal(sup_agent_addr_parse("unix:/x/y", &a, &e), 0);
	assert_int_equal(a.kind, SUP_AGENT_UNIX);
	assert_string_equal(a.path, "/x/y");
	assert_int_equal(sup_agent_addr_parse("vsock:3:1024", &a, &e), 0);
	assert_int_equal(a.kind, SUP_AGENT_VSOCK);
	assert_int_equal(a.cid, 3);
	assert_int_equal(a.port, 1024);
	assert_int_equal(sup_agent_addr_parse("vsock:4294967294:4294967294", &a, &e), 0);
	assert_int_equal(a.cid, 4294967294u);
	assert_int_equal(sup_agent_addr_parse("vsock:1:5", &a, &e), 0);
	/* The path may hold colons: the port is after the last. */
	assert_int_equal(sup_agent_addr_parse("hvsock:/srv/vm:1/v.sock:52", &a, &e), 0);
	assert_int_equal(a.kind, SUP_AGENT_HVSOCK);
	assert_string_equal(a.path, "/srv/vm:1/v.sock");
	assert_int_equal(a.port, 52);

	static const struct {
		const char *s, *why;
	} bad[] = {
		{ "", "no socket path" },
		{ "unix:", "no socket path" },
		{ "vsock:3", "want vsock:CID:PORT" },
		{ "vsock:0:1024", "CID" },              /* the hypervisor */
		{ "vsock:2:1024", "CID" },              /* the host: ourselves */
		{ "vsock:4294967295:1", "CID" },        /* VMADDR_CID_ANY */
		{ "vsock:99999999999:1", "CID" },
		{ "vsock:-3:1", "CID" },
		{ "vsock: 3:1", "CID" },
		{ "vsock::1", "CID" },
		{ "vsock:3:", "port" },
		{ "vsock:3:0", "port" },
		{ "vsock:3:4294967295", "port" },       /* VMADDR_PORT_ANY */
		{ "vsock:3:1x", "port" },
		{ "vsock:3:1:2", "port" },
		{ "hvsock:/v.sock", "want hvsock:PATH:PORT" },
		{ "hvsock::5", "no socket path" },
		{ "hvsock:/v.sock:", "port" },
		{ "hvsock:/v.sock:+5", "port" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = sup_agent_addr_parse(bad[i].s, &a, &e);
		if (rc != -EINVAL || !strstr(e.msg, bad[i].why))
			fail_msg("%s: rc %d, %s (wanted -EINVAL, %s)", bad[i].s, rc, e.msg, bad[i].why);
	}
	char longp[200];
	memset(longp, 'a', sizeof(longp));
	memcpy(longp, "hvsock:/", 8);
	memcpy(longp + sizeof(longp) - 4, ":52", 4);
	assert_int_equal(sup_agent_addr_parse(longp, &a, &e), -ENAMETOOLONG);
}

/* ---- hybrid vsock: the test as the VMM ---- */

typedef struct t_vmm {
	struct event_base *base;
	char dir[64], path[96], addr[128];
	int listener, peer;
	sup_agent *a;
	int ready, lost;
	sbx_err why;
} t_vmm;

static void a_ready(sup_agent *a, void *ud)
{
	(void)a;
	((t_vmm *)ud)->ready++;
}

static void a_lost(sup_agent *a, const sbx_err *why, void *ud)
{
	t_vmm *t = ud;
	t->lost++;
	t->why = *why;
	sup_agent_free(a);
	t->a = NULL;
}

static const sup_agent_cbs agent_cbs = { .on_ready = a_ready, .on_lost = a_lost };

static sup_agent_opts opts(void)
{
	return (sup_agent_opts){
		.grace_ms = 200, .idle_ms = 300,
		.ping_after_ms = 60000, .ping_timeout_ms = 60000, .frame_ms = 60000,
		.max_streams = 64, .max_waiting = 64, .max_queued = 8u << 20,
	};
}

/* The VMM's socket, and the supervisor's connect to port 1024 through it;
 * the test holds the VMM's end of that connection. */
static void vmm_start(t_vmm *t, unsigned handshake_ms)
{
	memset(t, 0, sizeof(*t));
	t->base = harness_base();
	snprintf(t->dir, sizeof(t->dir), "/tmp/sbx-hvsock-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->path, sizeof(t->path), "%s/v.sock", t->dir);
	snprintf(t->addr, sizeof(t->addr), "hvsock:%s:1024", t->path);
	t->listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(t->listener >= 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", t->path);
	assert_int_equal(bind(t->listener, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(t->listener, 4), 0);
	sup_agent_opts o = opts();
	sbx_err e;
	int rc = sup_agent_connect(t->base, t->addr, "sb-hv", handshake_ms, &o, &agent_cbs, t, &t->a,
				   &e);
	if (rc < 0)
		fail_msg("connect %s: %s", t->addr, e.msg);
	t->peer = accept4(t->listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	assert_true(t->peer >= 0);
	raw_forget(t->peer);
}

static void vmm_stop(t_vmm *t)
{
	if (t->a)
		sup_agent_free(t->a);
	if (t->peer >= 0)
		close(t->peer);
	close(t->listener);
	unlink(t->path);
	rmdir(t->dir);
	event_base_free(t->base);
}

/* What the supervisor sent before its first newline, the loop running. */
static void vmm_read_line(t_vmm *t, char *out, size_t size)
{
	size_t n = 0;
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		char c;
		ssize_t k = recv(t->peer, &c, 1, 0);
		if (k == 1) {
			if (c == '\n')
				break;
			assert_true(n + 1 < size);
			out[n++] = c;
			continue;
		}
		assert_true(k < 0 && errno == EAGAIN);
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		assert_true(now.tv_sec - t0.tv_sec < 3);
		pump_for(t->base, 5);
	}
	out[n] = '\0';
}

static void vmm_send(t_vmm *t, const void *p, size_t n)
{
	assert_int_equal(send(t->peer, p, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* The VMM says OK and, in the same write, the agent says hello: the
 * supervisor answers with its own hello and is ready. */
static void test_hvsock_connects(void **state)
{
	(void)state;
	t_vmm t;
	vmm_start(&t, 2000);
	char line[64];
	vmm_read_line(&t, line, sizeof(line));
	assert_string_equal(line, "CONNECT 1024");
	sbx_proto_writer w;
	sbx_proto_writer_init(&w);
	assert_int_equal(sbx_proto_encode_hello(&w, SBX_PROTO_DEFAULT_MAX_FRAME, 1024, 65536, NULL, 0,
						"sandbox-agent/0.1.0", NULL),
			 0);
	const char ok[] = "OK 1073741824\n";
	char both[512];
	assert_true(sizeof(ok) - 1 + w.buf.size <= sizeof(both));
	memcpy(both, ok, sizeof(ok) - 1);
	memcpy(both + sizeof(ok) - 1, w.buf.data, w.buf.size);
	vmm_send(&t, both, sizeof(ok) - 1 + w.buf.size);
	sbx_proto_writer_destroy(&w);
	sbx_proto_frame f;
	assert_int_equal(raw_recv(t.base, t.peer, &f, 2000), 1);
	assert_int_equal(f.kind, SBX_PROTO_HELLO);
	sbx_proto_frame_release(&f);
	pump_until(t.base, &t.ready, 2000);
	assert_int_equal(t.lost, 0);
	assert_string_equal(sup_agent_peer(t.a), "sandbox-agent/0.1.0");
	vmm_stop(&t);
}

/* The VMM's answer, then what the supervisor made of it. */
static void hv_refused(const void *answer, size_t n, bool close_after, const char *want)
{
	t_vmm t;
	vmm_start(&t, 2000);
	char line[64];
	vmm_read_line(&t, line, sizeof(line));
	assert_string_equal(line, "CONNECT 1024");
	if (n)
		vmm_send(&t, answer, n);
	if (close_after) {
		close(t.peer);
		t.peer = -1;
	}
	pump_until(t.base, &t.lost, 2000);
	assert_int_equal(t.ready, 0);
	assert_int_equal(t.why.code, -ECONNRESET);
	if (!strstr(t.why.msg, want) || !strstr(t.why.msg, t.addr))
		fail_msg("%s (wanted %s, naming %s)", t.why.msg, want, t.addr);
	vmm_stop(&t);
}

static void test_hvsock_refused(void **state)
{
	(void)state;
	/* Firecracker closes when nothing listens on the port in the guest. */
	hv_refused(NULL, 0, true, "closed the connection before answering CONNECT");
	hv_refused("OK", 2, true, "closed the connection before answering CONNECT");
	hv_refused("NOPE\n", 5, false, "answered CONNECT with NOPE");
	hv_refused("OK \n", 4, false, "answered CONNECT with OK ");
	hv_refused("OK 12x\n", 7, false, "answered CONNECT with OK 12x");
	hv_refused("OK 99999999999\n", 15, false, "answered CONNECT with OK 99999999999");
	hv_refused("ok 5\n", 5, false, "answered CONNECT with ok 5");
	hv_refused("OK 5\r\n", 6, false, "answered CONNECT with OK 5\\x0d");
	/* A line that does not end: refused at the bound, not read forever. */
	hv_refused("OK 1234567890123456789012345", 28, false, "no \"OK <port>\" line");
}

/* A VMM that takes CONNECT and never answers: the handshake deadline. */
static void test_hvsock_timeout(void **state)
{
	(void)state;
	t_vmm t;
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	vmm_start(&t, 300);
	char line[64];
	vmm_read_line(&t, line, sizeof(line));
	pump_until(t.base, &t.lost, 3000);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_in_range(ms, 280, 2500);
	assert_int_equal(t.why.code, -ETIMEDOUT);
	if (!strstr(t.why.msg, "not connected in time") || !strstr(t.why.msg, t.addr))
		fail_msg("%s", t.why.msg);
	vmm_stop(&t);
}

/* No socket at the path: refused at once, as a unix socket's would be. */
static void test_hvsock_no_socket(void **state)
{
	(void)state;
	struct event_base *base = harness_base();
	sup_agent_opts o = opts();
	sup_agent *a = NULL;
	sbx_err e;
	int rc = sup_agent_connect(base, "hvsock:/nonexistent/sbx/v.sock:5", "sb-hv", 300, &o,
				   &agent_cbs, NULL, &a, &e);
	assert_int_equal(rc, -ENOENT);
	assert_null(a);
	assert_non_null(strstr(e.msg, "hvsock:/nonexistent/sbx/v.sock:5"));
	rc = sup_agent_connect(base, "vsock:3", "sb-hv", 300, &o, &agent_cbs, NULL, &a, &e);
	assert_int_equal(rc, -EINVAL);
	event_base_free(base);
}

/* This machine's own CID (a guest's, from its virtio vsock device), or 0
 * where it has none. */
static uint32_t local_cid(void)
{
	uint32_t cid = 0;
	int fd = open("/dev/vsock", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (ioctl(fd, IOCTL_VM_SOCKETS_GET_LOCAL_CID, &cid) < 0)
			cid = 0;
		close(fd);
	}
	return cid;
}

/* AF_VSOCK where no agent is. These machines have no vhost-vsock (no VM to
 * reach), so only the error path: to the machine's own CID, which no
 * transport serves here (ENODEV at once; nothing leaves the machine, as a
 * connect to another CID would through the virtio device to our own
 * hypervisor). Without any vsock the socket itself is refused. Either
 * way, or had the connect been under way and failed later, the error names
 * the address and the agent never became ready. */
static void test_vsock_error_path(void **state)
{
	(void)state;
	t_vmm t;
	memset(&t, 0, sizeof(t));
	t.base = harness_base();
	uint32_t cid = local_cid();
	snprintf(t.addr, sizeof(t.addr), "vsock:%u:1024", cid > 2 ? cid : 3);
	sup_agent_opts o = opts();
	sbx_err e;
	int rc = sup_agent_connect(t.base, t.addr, "sb-vs", 500, &o, &agent_cbs, &t, &t.a, &e);
	if (rc == 0) {
		pump_until(t.base, &t.lost, 3000);
		e = t.why;
	} else {
		assert_null(t.a);
	}
	print_message("%s -> %s\n", t.addr, e.msg);
	if (!strstr(e.msg, t.addr))
		fail_msg("%s", e.msg);
	assert_int_equal(t.ready, 0);
	event_base_free(t.base);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_addr_parse),
		cmocka_unit_test(test_hvsock_connects),
		cmocka_unit_test(test_hvsock_refused),
		cmocka_unit_test(test_hvsock_timeout),
		cmocka_unit_test(test_hvsock_no_socket),
		cmocka_unit_test(test_vsock_error_path),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
