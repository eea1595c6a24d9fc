/* The sandboxes' resolver (sup_dns) under libFuzzer, over real loopback UDP:
 * a sandbox's query goes to a fresh sup_dns (libevent's server port parses
 * it), the upstream it asks is this fuzzer's socket, which answers with
 * the input's bytes (libevent's client parses those), and the answer comes
 * back to the asking socket. The hooks hold a real policy (sup_netpol).
 * Input: a flags byte, two bytes of the query's length, the query, then
 * the upstream's answer (its id made the question's; with F_SPLICE the
 * question section of what was asked goes in after the answer's header,
 * so mutations reach the records instead of breaking the match).
 * Checks, besides the sanitizers: no name leaves the node that the policy
 * does not answer, and none from a stranger; addresses reach the sandbox
 * only after admit let them in; every reply is to a question asked and
 * carries its id; after sup_dns_stop and a few turns of the loop nothing
 * is pending, and sup_dns_free leaves nothing behind. */
#include <arpa/inet.h>
#include <event2/event.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sup_dns.h"
#include "sup_log.h"
#include "sup_netpol.h"
#include "udp_loopback.h"

#define CHECK(x) \
	do { \
		if (!(x)) \
			abort(); \
	} while (0)

enum {
	F_STRANGER = 1,   /* decide: a sender with no sandbox */
	F_ADMIT_FAIL = 2, /* admit refuses (the policy changed since) */
	F_TWICE = 4,      /* the query sent twice (max_pending_each is 1) */
	F_SILENT = 8,     /* the upstream never answers */
	F_REPEAT = 16,    /* the upstream answers twice */
	F_SPLICE = 32,    /* the question asked goes into the answer */
};

#define MSG_MAX 4096

static struct event_base *base;
static int up_fd, client_fd;
static struct sockaddr_in up_addr;
static sup_netpol pol;

/* What one input did. */
static struct {
	uint8_t flags;
	const uint8_t *answer;
	size_t answer_len;
	bool admitted, refused_admit;
	unsigned asked, replies;
	uint8_t qid[2];
} run;

static int bind_loopback(struct sockaddr_in *sa)
{
	int fd = udp_loopback(sa);
	CHECK(fd >= 0);
	return fd;
}

static int decide(const struct sockaddr *from, const char *name, sup_netpol_name_verdict *v,
		  uint64_t *who, void *ud)
{
	(void)from, (void)ud;
	char again[SUP_NETPOL_NAME_MAX + 2];
	CHECK(sup_netpol_norm_name(name, again, sizeof(again)) >= 0 && strcmp(again, name) == 0);
	if (run.flags & F_STRANGER)
		return -1;
	sup_netpol_name(&pol, name, v);
	*who = 7;
	return v->answer ? 1 : 0;
}

static int admit(uint64_t who, int family, const uint8_t *addrs, size_t count,
		 const sup_netpol_name_verdict *v, unsigned ttl, void *ud)
{
	(void)ud;
	CHECK(who == 7 && (family == 4 || family == 6) && count > 0 && addrs && v->answer);
	CHECK(ttl >= 5 && ttl <= 300);
	if (run.flags & F_ADMIT_FAIL) {
		run.refused_admit = true;
		return -1;
	}
	run.admitted = true;
	return 0;
}

/* The end of the question section of a well-formed query (evdns's own,
 * uncompressed), its name in dotted form into name; 0 when malformed. */
static size_t question_end(const uint8_t *m, size_t n, char *name, size_t cap)
{
	size_t i = 12, o = 0;
	while (i < n && m[i] != 0) {
		size_t l = m[i++];
		if (l > 63 || i + l > n || o + l + 2 > cap)
			return 0;
		if (o)
			name[o++] = '.';
		memcpy(name + o, m + i, l);
		o += l;
		i += l;
	}
	name[o] = '\0';
	return i + 5 <= n ? i + 5 : 0;
}

/* The upstream: a question that must be allowed, answered with the input. */
static void on_upstream_query(evutil_socket_t fd, short what, void *ud)
{
	(void)what, (void)ud;
	uint8_t q[MSG_MAX], a[2 * MSG_MAX];
	struct sockaddr_storage from;
	socklen_t fl = sizeof(from);
	ssize_t n;
	while ((n = recvfrom(fd, q, sizeof(q), 0, (struct sockaddr *)&from, &fl)) > 0) {
		char name[300];
		size_t qend = question_end(q, (size_t)n, name, sizeof(name));
		CHECK(qend > 0);
		sup_netpol_name_verdict v;
		CHECK(!(run.flags & F_STRANGER));
		sup_netpol_name(&pol, name, &v);
		CHECK(v.answer);
		run.asked++;
		if (run.flags & F_SILENT)
			continue;
		size_t len = 0, hl = run.answer_len < 12 ? run.answer_len : 12;
		memcpy(a, run.answer, hl);
		len = hl;
		if (len >= 2)
			memcpy(a, q, 2);
		if ((run.flags & F_SPLICE) && hl == 12) {
			memcpy(a + len, q + 12, qend - 12);
			len += qend - 12;
		}
		memcpy(a + len, run.answer + hl, run.answer_len - hl);
		len += run.answer_len - hl;
		for (int k = 0; k < ((run.flags & F_REPEAT) ? 2 : 1); k++)
			(void)sendto(fd, a, len, 0, (struct sockaddr *)&from, fl);
		fl = sizeof(from);
	}
}

/* The sandbox: every reply answers the question asked, with its id, and
 * carries addresses only once admit let them in. */
static void on_reply(evutil_socket_t fd, short what, void *ud)
{
	(void)what, (void)ud;
	uint8_t r[MSG_MAX];
	ssize_t n;
	while ((n = recv(fd, r, sizeof(r), 0)) > 0) {
		run.replies++;
		CHECK(n >= 12 && memcmp(r, run.qid, 2) == 0 && (r[2] & 0x80));
		unsigned ancount = (unsigned)r[6] << 8 | r[7];
		if (ancount)
			CHECK(run.admitted && !(run.flags & F_STRANGER));
	}
}

static void setup(void)
{
	sup_log_set_level(SUP_LOG_ERROR);
	base = event_base_new();
	CHECK(base);
	struct sockaddr_in ca;
	up_fd = bind_loopback(&up_addr);
	client_fd = bind_loopback(&ca);
	struct event *e1 = event_new(base, up_fd, EV_READ | EV_PERSIST, on_upstream_query, NULL);
	struct event *e2 = event_new(base, client_fd, EV_READ | EV_PERSIST, on_reply, NULL);
	CHECK(e1 && e2 && event_add(e1, NULL) == 0 && event_add(e2, NULL) == 0);
	sup_netpol_init(&pol, SUP_NETPOL_DENY);
	sbx_err e;
	CHECK(sup_netpol_add(&pol, SUP_NETPOL_ALLOW, "*.example.com", &e) == 0);
	CHECK(sup_netpol_add(&pol, SUP_NETPOL_DENY, "bad.example.com", &e) == 0);
	CHECK(sup_netpol_add(&pol, SUP_NETPOL_ALLOW, "api.test:443", &e) == 0);
	CHECK(sup_netpol_add(&pol, SUP_NETPOL_DENY, "10.0.0.0/8", &e) == 0);
}

/* Turns of the loop until nothing moved for a few. */
static void settle(const sup_dns *d)
{
	unsigned quiet = 0;
	for (int i = 0; i < 400 && quiet < 4; i++) {
		sup_dns_stats a, b;
		unsigned asked = run.asked, replies = run.replies;
		sup_dns_stats_get(d, &a);
		event_base_loop(base, EVLOOP_NONBLOCK);
		sup_dns_stats_get(d, &b);
		bool moved = asked != run.asked || replies != run.replies ||
			     a.answered != b.answered || a.refused != b.refused ||
			     a.failed != b.failed || a.pending != b.pending;
		quiet = moved ? 0 : quiet + 1;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool started;
	if (!started) {
		setup();
		started = true;
	}
	if (size < 3)
		return 0;
	size_t qlen = (size_t)data[1] << 8 | data[2];
	if (qlen > size - 3 || qlen > MSG_MAX || size - 3 - qlen > MSG_MAX)
		return 0;
	memset(&run, 0, sizeof(run));
	run.flags = data[0];
	run.answer = data + 3 + qlen;
	run.answer_len = size - 3 - qlen;
	const uint8_t *query = data + 3;
	if (qlen >= 2)
		memcpy(run.qid, query, 2);

	struct sockaddr_in sa;
	int server_fd = bind_loopback(&sa);
	sup_dns_cfg cfg = { .min_ttl = 5, .max_ttl = 300, .max_pending = 4,
			    .max_pending_each = 1, .timeout_ms = 1000, .attempts = 1 };
	sup_dns_hooks hooks = { .decide = decide, .admit = admit };
	sbx_err e;
	sup_dns *d = sup_dns_new(base, server_fd, (struct sockaddr *)&up_addr, sizeof(up_addr), &cfg,
				 &hooks, &e);
	CHECK(d);
	for (int k = 0; k < ((run.flags & F_TWICE) ? 2 : 1); k++)
		(void)sendto(client_fd, query, qlen, 0, (struct sockaddr *)&sa, sizeof(sa));
	settle(d);
	CHECK(run.replies <= ((run.flags & F_TWICE) ? 2u : 1u));
	sup_dns_stop(d);
	settle(d);
	sup_dns_stats st;
	sup_dns_stats_get(d, &st);
	CHECK(st.pending == 0);
	sup_dns_free(d);
	event_base_loop(base, EVLOOP_NONBLOCK);
	return 0;
}
