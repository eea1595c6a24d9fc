/* The firewall's netlink batches (sup_nft) against the real kernel, in a
 * network namespace of the test's own (unshared at start: it goes with the
 * process, so nothing is left behind whatever happens). What the kernel
 * took is read back through libnftables, an independent decoder: the
 * listing must say what the policy says, in sup_netpol_compile's order.
 * Needs root. */
#include <arpa/inet.h>
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>
#include <nftables/libnftables.h>

#include "sup_netpol.h"
#include "sup_nft.h"

static sup_nft *nft;

static char *list(const char *what)
{
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	assert_non_null(ctx);
	nft_ctx_buffer_output(ctx);
	nft_ctx_buffer_error(ctx);
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "list %s", what);
	if (nft_run_cmd_from_buffer(ctx, cmd) != 0)
		fail_msg("%s: %s", cmd, nft_ctx_get_error_buffer(ctx));
	char *out = strdup(nft_ctx_get_output_buffer(ctx));
	nft_ctx_free(ctx);
	return out;
}

/* The lines of `needles` appear in `hay` in this order. */
static void in_order(const char *hay, const char *const *needles)
{
	const char *at = hay;
	for (size_t i = 0; needles[i]; i++) {
		const char *f = strstr(at, needles[i]);
		if (!f)
			fail_msg("'%s' missing (or out of order) in:\n%s", needles[i], hay);
		at = f + strlen(needles[i]);
	}
}

static int setup(void **state)
{
	(void)state;
	if (unshare(CLONE_NEWNET) < 0) {
		fprintf(stderr, "unshare(CLONE_NEWNET): %s (root needed)\n", strerror(errno));
		return -1;
	}
	sbx_err e;
	sup_nft_router r = { .gw4 = "100.96.0.1",
			     .refused4 = "169.254.0.0/16, 100.96.0.0/16, 192.0.2.7",
			     .refused6 = "fe80::/10, fd00:ec2::254, fd73:6278::/64" };
	if (sup_nft_router_table(&r, &e) < 0) {
		fprintf(stderr, "%s\n", e.msg);
		return -1;
	}
	nft = sup_nft_open(&e);
	return nft ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	sup_nft_close(nft);
	return 0;
}

static void test_router_table(void **state)
{
	(void)state;
	char *t = list("table inet sbx");
	static const char *const want[] = {
		"set refused4", "169.254.0.0/16", "set refused6", "fd00:ec2::254",
		"map slots", "type ifname : verdict",
		"chain pre", "fib saddr . iif oif missing drop",
		"chain inbound", "ip daddr 100.96.0.1 udp dport 53 accept",
		"chain fw", "ct state established,related accept", "oifname != \"up\"",
		"ip daddr @refused4", "th dport 53 reject", "iifname vmap @slots",
		"chain post", "oifname \"up\" masquerade", NULL,
	};
	in_order(t, want);
	free(t);
}

static void test_slot_policy(void **state)
{
	(void)state;
	sbx_err e;
	assert_int_equal(sup_nft_slot_init(nft, 7, &e), 0);
	assert_int_equal(sup_nft_slot_init(nft, 7, &e), 0); /* idempotent */
	char *t = list("chain inet sbx p7");
	static const char *const fresh[] = { "chain p7 {", "reject with icmpx admin-prohibited", "}",
					     NULL };
	in_order(t, fresh);
	free(t);
	t = list("map inet sbx slots");
	assert_non_null(strstr(t, "\"s7\" : jump p7"));
	free(t);

	sup_netpol p;
	sup_netpol_init(&p, SUP_NETPOL_DENY);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_ALLOW, "pkgs.example.com", &e), 0);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_ALLOW, "10.20.0.0/16:443", &e), 0);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_DENY, "10.20.5.0/24", &e), 0);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_ALLOW, "[2001:db8::/32]:80", &e), 0);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_DENY, "0.0.0.0/0:25", &e), 0);
	if (sup_nft_slot_load(nft, 7, &p, &e) < 0)
		fail_msg("%s", e.msg);
	t = list("chain inet sbx p7");
	static const char *const want[] = {
		"ip daddr . th dport @dp4_7 reject",
		"ip daddr . th dport @ap4_7 accept",
		"ip daddr @a4_7 accept",
		"ip daddr 10.20.5.0/24 reject with icmpx admin-prohibited",
		"ip daddr 10.20.0.0/16 th dport 443 accept",
		"meta nfproto ipv4 meta l4proto @l4 th dport 25 reject",
		"ip6 daddr . th dport @dp6_7 reject",
		"ip6 daddr 2001:db8::/32 th dport 80 accept",
		"reject with icmpx admin-prohibited",
		NULL,
	};
	in_order(t, want);
	free(t);

	/* the resolver's answers: a name allowed on every port but 25 */
	sup_netpol_name_verdict *v = calloc(1, sizeof(*v));
	assert_non_null(v);
	sup_netpol_name(&p, "pkgs.example.com", v);
	assert_true(v->allow_all);
	uint8_t a4[8];
	inet_pton(AF_INET, "192.0.2.10", a4);
	inet_pton(AF_INET, "192.0.2.11", a4 + 4);
	assert_int_equal(sup_nft_slot_admit(nft, 7, 4, a4, 2, v, 60, &e), 0);
	assert_int_equal(sup_nft_slot_admit(nft, 7, 4, a4, 2, v, 90, &e), 0); /* renewed */
	uint8_t a6[16];
	inet_pton(AF_INET6, "2001:db8::10", a6);
	v->allow_all = false;
	v->n_allow = 1;
	v->allow[0] = 443;
	v->n_deny = 1;
	v->deny[0] = 22;
	assert_int_equal(sup_nft_slot_admit(nft, 7, 6, a6, 1, v, 30, &e), 0);
	t = list("set inet sbx a4_7");
	assert_non_null(strstr(t, "192.0.2.10 timeout 1m30s"));
	assert_non_null(strstr(t, "192.0.2.11 timeout 1m30s"));
	free(t);
	t = list("set inet sbx ap6_7");
	assert_non_null(strstr(t, "2001:db8::10 . 443 timeout 30s"));
	free(t);
	t = list("set inet sbx dp6_7");
	assert_non_null(strstr(t, "2001:db8::10 . 22 timeout 30s"));
	free(t);

	/* a new policy forgets the answers; a reset rejects everything */
	sup_netpol_free(&p);
	sup_netpol_init(&p, SUP_NETPOL_ALLOW);
	assert_int_equal(sup_nft_slot_load(nft, 7, &p, &e), 0);
	t = list("set inet sbx a4_7");
	assert_null(strstr(t, "192.0.2.10"));
	free(t);
	t = list("chain inet sbx p7");
	assert_non_null(strstr(t, "accept"));
	free(t);
	assert_int_equal(sup_nft_slot_reset(nft, 7, &e), 0);
	t = list("chain inet sbx p7");
	assert_null(strstr(t, "accept"));
	assert_non_null(strstr(t, "reject"));
	free(t);
	sup_netpol_free(&p);
	free(v);
}

static void test_bounds_and_errors(void **state)
{
	(void)state;
	sbx_err e;
	/* a slot never made: the kernel's ENOENT, named */
	sup_netpol p;
	sup_netpol_init(&p, SUP_NETPOL_ALLOW);
	assert_int_equal(sup_nft_slot_load(nft, 4242, &p, &e), -ENOENT);
	assert_non_null(strstr(e.msg, "slot 4242"));
	/* the biggest policy fits one batch */
	for (int i = 0; i < SUP_NETPOL_MAX_RULES; i++) {
		char t[64];
		if (i % 2)
			snprintf(t, sizeof(t), "[2001:db8:%x::/48]:%d", i, 1000 + i);
		else
			snprintf(t, sizeof(t), "10.%d.%d.0/24:%d", i / 256, i % 256, 1000 + i);
		assert_int_equal(sup_netpol_add(&p, i % 3 ? SUP_NETPOL_ALLOW : SUP_NETPOL_DENY, t, &e), 0);
	}
	assert_int_equal(sup_nft_slot_init(nft, 8, &e), 0);
	if (sup_nft_slot_load(nft, 8, &p, &e) < 0)
		fail_msg("%s", e.msg);
	sup_netpol_free(&p);
	/* a set holds SUP_NFT_SET_SIZE addresses, then the kernel refuses */
	sup_netpol_name_verdict *v = calloc(1, sizeof(*v));
	assert_non_null(v);
	v->allow_all = true;
	uint8_t *a = calloc(SUP_NFT_SET_SIZE + 1, 4);
	assert_non_null(a);
	for (uint32_t i = 0; i <= SUP_NFT_SET_SIZE; i++) {
		uint32_t x = htonl(0xc6120000u + i);
		memcpy(a + i * 4, &x, 4);
	}
	assert_int_equal(sup_nft_slot_admit(nft, 8, 4, a, SUP_NFT_SET_SIZE, v, 60, &e), 0);
	assert_true(sup_nft_slot_admit(nft, 8, 4, a + 4, SUP_NFT_SET_SIZE, v, 60, &e) < 0);
	free(a);
	free(v);
}

/* A resolved address stays in the slot's set for its answer's TTL only:
 * the kernel forgets it then, while a longer one stays. */
static void test_answers_expire(void **state)
{
	(void)state;
	sbx_err e;
	assert_int_equal(sup_nft_slot_init(nft, 9, &e), 0);
	sup_netpol p;
	sup_netpol_init(&p, SUP_NETPOL_DENY);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_ALLOW, "pkgs.example.com", &e), 0);
	assert_int_equal(sup_nft_slot_load(nft, 9, &p, &e), 0);
	sup_netpol_name_verdict *v = calloc(1, sizeof(*v));
	assert_non_null(v);
	sup_netpol_name(&p, "pkgs.example.com", v);
	uint8_t a[4];
	inet_pton(AF_INET, "192.0.2.20", a);
	assert_int_equal(sup_nft_slot_admit(nft, 9, 4, a, 1, v, 1, &e), 0);
	inet_pton(AF_INET, "192.0.2.21", a);
	assert_int_equal(sup_nft_slot_admit(nft, 9, 4, a, 1, v, 60, &e), 0);
	char *t = list("set inet sbx a4_9");
	assert_non_null(strstr(t, "192.0.2.20"));
	free(t);
	bool gone = false;
	for (int i = 0; i < 40 && !gone; i++) {
		struct timespec ts = { 0, 100 * 1000 * 1000 };
		nanosleep(&ts, NULL);
		t = list("set inet sbx a4_9");
		gone = !strstr(t, "192.0.2.20");
		if (gone)
			assert_non_null(strstr(t, "192.0.2.21"));
		free(t);
	}
	assert_true(gone);
	sup_netpol_free(&p);
	free(v);
}

/* The per-slot calls do not read the ruleset back: their cost stays flat
 * as sandboxes come. Printed, not asserted (a shared machine). */
static void test_flat_cost(void **state)
{
	(void)state;
	sbx_err e;
	sup_netpol p;
	sup_netpol_init(&p, SUP_NETPOL_DENY);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_ALLOW, "10.20.0.0/16:443", &e), 0);
	assert_int_equal(sup_netpol_add(&p, SUP_NETPOL_DENY, "10.20.5.0/24", &e), 0);
	double t[2];
	for (int round = 0; round < 2; round++) {
		unsigned base = 100 + (unsigned)round * 1000, n = round ? 300 : 3;
		for (unsigned s = base; s < base + n; s++)
			assert_int_equal(sup_nft_slot_init(nft, s, &e), 0);
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (int i = 0; i < 50; i++)
			assert_int_equal(sup_nft_slot_load(nft, base + 1, &p, &e), 0);
		clock_gettime(CLOCK_MONOTONIC, &b);
		t[round] = ((double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6) / 50;
	}
	printf("policy load: %.3f ms with 5 slots, %.3f ms with 305\n", t[0], t[1]);
	sup_netpol_free(&p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_router_table),
		cmocka_unit_test(test_slot_policy),
		cmocka_unit_test(test_bounds_and_errors),
		cmocka_unit_test(test_answers_expire),
		cmocka_unit_test(test_flat_cost),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
