/* The sandboxes' resolver (sup_dns) over real loopback UDP, with this test
 * as the upstream resolver: short datagrams never reach libevent's parser
 * (2.1 crashes on them) while a short whole query does, a name
 * the policy does not answer is NXDOMAIN without a query upstream, and an
 * allowed one is asked upstream and answered once admit let it in: each
 * of its addresses a record of its own. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "sup_dns.h"
#include "sup_netpol.h"
#include "udp_loopback.h"

typedef struct fix {
	struct event_base *base;
	sup_dns *d;
	sup_netpol pol;
	int client, upstream;
	struct sockaddr_in server;
	unsigned admitted;
	size_t last_count; /* addresses in the last admit */
} fix;

static int bind_loopback(struct sockaddr_in *sa)
{
	int fd = udp_loopback(sa);
	assert_true(fd >= 0);
	return fd;
}

static int decide(const struct sockaddr *from, const char *name, sup_netpol_name_verdict *v,
		  uint64_t *who, void *ud)
{
	(void)from;
	fix *f = ud;
	sup_netpol_name(&f->pol, name, v);
	*who = 1;
	return v->answer ? 1 : 0;
}

static int admit(uint64_t who, int family, const uint8_t *addrs, size_t count,
		 const sup_netpol_name_verdict *v, unsigned ttl, void *ud)
{
	(void)who, (void)addrs, (void)v, (void)ttl;
	fix *f = ud;
	assert_int_equal(family, 4);
	f->last_count = count;
	f->admitted++;
	return 0;
}

static int setup(void **state)
{
	static fix f;
	memset(&f, 0, sizeof(f));
	f.base = event_base_new();
	assert_non_null(f.base);
	sup_netpol_init(&f.pol, SUP_NETPOL_DENY);
	sbx_err e;
	assert_int_equal(sup_netpol_add(&f.pol, SUP_NETPOL_ALLOW, "*.example.com", &e), 0);
	struct sockaddr_in ca, ua;
	f.client = bind_loopback(&ca);
	f.upstream = bind_loopback(&ua);
	int server_fd = bind_loopback(&f.server);
	sup_dns_cfg cfg = { .min_ttl = 5, .max_ttl = 300, .max_pending = 8,
			    .max_pending_each = 8, .timeout_ms = 2000, .attempts = 1 };
	sup_dns_hooks hooks = { .decide = decide, .admit = admit, .ud = &f };
	f.d = sup_dns_new(f.base, server_fd, (struct sockaddr *)&ua, sizeof(ua), &cfg, &hooks, &e);
	assert_non_null(f.d);
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	fix *f = *state;
	sup_dns_stop(f->d);
	for (int i = 0; i < 10; i++)
		event_base_loop(f->base, EVLOOP_NONBLOCK);
	sup_dns_free(f->d);
	sup_netpol_free(&f->pol);
	close(f->client);
	close(f->upstream);
	event_base_free(f->base);
	return 0;
}

/* Turns of the loop until fd has a datagram (its length) or a second
 * passed (-1). */
static ssize_t wait_recv(fix *f, int fd, uint8_t *buf, size_t cap, struct sockaddr_in *from)
{
	for (int i = 0; i < 1000; i++) {
		socklen_t fl = sizeof(*from);
		ssize_t n = recvfrom(fd, buf, cap, 0, (struct sockaddr *)from, &fl);
		if (n >= 0)
			return n;
		assert_true(errno == EAGAIN);
		event_base_loop(f->base, EVLOOP_NONBLOCK);
		usleep(1000);
	}
	return -1;
}

static size_t query(uint8_t *q, uint16_t id, const char *name)
{
	const uint8_t head[12] = { id >> 8, id & 0xff, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0 };
	memcpy(q, head, 12);
	size_t n = 12;
	for (const char *p = name; *p;) {
		const char *dot = strchr(p, '.');
		size_t l = dot ? (size_t)(dot - p) : strlen(p);
		q[n++] = (uint8_t)l;
		memcpy(q + n, p, l);
		n += l;
		p += l + (dot ? 1 : 0);
	}
	const uint8_t tail[5] = { 0, 0, 1, 0, 1 }; /* root, A, IN */
	memcpy(q + n, tail, 5);
	return n + 5;
}

static void ask(fix *f, const uint8_t *q, size_t n)
{
	assert_int_equal(sendto(f->client, q, n, 0, (struct sockaddr *)&f->server, sizeof(f->server)),
			 (ssize_t)n);
}

static void test_short_datagrams_dropped(void **state)
{
	fix *f = *state;
	uint8_t q[64], r[512];
	struct sockaddr_in from;
	/* libevent 2.1 dereferenced NULL on each of these */
	for (size_t n = 0; n < 12; n++) {
		memset(q, 0, n);
		ask(f, q, n);
	}
	/* the resolver lives, and a query shorter than the filter's 20 bytes
	 * (it counts the UDP header's 8) still reaches it: the root's A, 17 */
	size_t ql = query(q, 0x42, "");
	assert_int_equal(ql, 17);
	ask(f, q, ql);
	ssize_t n = wait_recv(f, f->client, r, sizeof(r), &from);
	assert_true(n >= 12);
	assert_int_equal(r[1], 0x42);
	assert_int_equal(r[3] & 0xf, 3); /* NXDOMAIN: not a name a rule can allow */
}

static void test_refused_name_stays_home(void **state)
{
	fix *f = *state;
	uint8_t q[300], r[512];
	struct sockaddr_in from;
	ask(f, q, query(q, 7, "exfil.attacker.org"));
	ssize_t n = wait_recv(f, f->client, r, sizeof(r), &from);
	assert_true(n >= 12);
	assert_int_equal(r[1], 7);
	assert_int_equal(r[3] & 0xf, 3); /* NXDOMAIN */
	assert_int_equal(recv(f->upstream, r, sizeof(r), MSG_DONTWAIT), -1);
}

static void test_allowed_name_answered(void **state)
{
	fix *f = *state;
	uint8_t q[300], up[512], r[512];
	struct sockaddr_in from, resolver;
	ask(f, q, query(q, 9, "www.example.com"));
	ssize_t n = wait_recv(f, f->upstream, up, sizeof(up), &resolver);
	assert_true(n > 12);
	/* the question back with one A record (a pointer to the name) */
	up[2] = 0x81;
	up[3] = 0x80;
	up[7] = 1;
	const uint8_t rec[16] = { 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 93, 184, 216, 34 };
	memcpy(up + n, rec, sizeof(rec));
	assert_true(sendto(f->upstream, up, (size_t)n + sizeof(rec), 0, (struct sockaddr *)&resolver,
			   sizeof(resolver)) > 0);
	n = wait_recv(f, f->client, r, sizeof(r), &from);
	assert_true(n > 12);
	assert_int_equal(r[1], 9);
	assert_int_equal(r[3] & 0xf, 0);
	assert_int_equal(r[7], 1); /* one answer */
	assert_int_equal(f->admitted, 1);
}

/* libevent's add_a_reply with n addresses writes one record of 4n bytes,
 * which resolvers refuse: a name with several addresses did not resolve
 * in a sandbox at all. Each address is a record of 4 bytes. */
static void test_several_addresses_each_a_record(void **state)
{
	fix *f = *state;
	uint8_t q[300], up[512], r[512];
	struct sockaddr_in from, resolver;
	size_t ql = query(q, 11, "cdn.example.com");
	ask(f, q, ql);
	ssize_t n = wait_recv(f, f->upstream, up, sizeof(up), &resolver);
	assert_true(n > 12);
	up[2] = 0x81;
	up[3] = 0x80;
	up[7] = 3;
	for (int i = 0; i < 3; i++) {
		const uint8_t rec[16] = { 0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 198, 51, 100, (uint8_t)(1 + i) };
		memcpy(up + n + 16 * i, rec, sizeof(rec));
	}
	assert_true(sendto(f->upstream, up, (size_t)n + 48, 0, (struct sockaddr *)&resolver,
			   sizeof(resolver)) > 0);
	n = wait_recv(f, f->client, r, sizeof(r), &from);
	assert_true(n > 12);
	assert_int_equal(r[1], 11);
	assert_int_equal(r[3] & 0xf, 0);
	assert_int_equal(f->last_count, 3);
	assert_int_equal(r[7], 3); /* three answers */
	size_t off = ql; /* the question comes back as asked */
	for (int i = 0; i < 3; i++) {
		/* a name (a pointer, or labels), type, class, ttl, rdlength */
		if ((r[off] & 0xc0) == 0xc0) {
			off += 2;
		} else {
			while (r[off])
				off += r[off] + 1u;
			off++;
		}
		assert_true(off + 10 <= (size_t)n);
		assert_int_equal(r[off + 1], 1); /* A */
		assert_int_equal((r[off + 8] << 8) | r[off + 9], 4);
		assert_int_equal(r[off + 10 + 3], 1 + i);
		off += 10 + 4;
	}
	assert_int_equal(off, (size_t)n);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_short_datagrams_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_name_stays_home, setup, teardown),
		cmocka_unit_test_setup_teardown(test_allowed_name_answered, setup, teardown),
		cmocka_unit_test_setup_teardown(test_several_addresses_each_a_record, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
