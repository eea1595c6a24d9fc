/* sup_nft: see sup_nft.h. */
#include "sup_nft.h"

#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <net/if.h>
#include <nftables/libnftables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define BATCH_MAX (512u << 10)
#define SNDBUF (2u << 20)
#define RCVBUF (1u << 20)

/* nft's datatype numbers, so that `nft list` shows the sets readably */
#define TYPE_IPADDR 7
#define TYPE_IP6ADDR 8
#define TYPE_INET_SERVICE 13
#define TYPE_BITS 6

struct sup_nft {
	struct mnl_socket *sock;
	unsigned portid;
	uint32_t seq;
	char *buf; /* one batch */
	struct mnl_nlmsg_batch *batch;
	unsigned msgs; /* messages in the batch */
	struct nlmsghdr *last; /* the last one: it asks for the ack */
	uint32_t begin_seq;
	bool overflow;
};

int sup_nft_run_text(const char *script, sbx_err *err)
{
	struct nft_ctx *ctx = nft_ctx_new(NFT_CTX_DEFAULT);
	if (!ctx)
		return sbx_err_set(err, -ENOMEM, "nft context");
	nft_ctx_buffer_output(ctx);
	nft_ctx_buffer_error(ctx);
	int rc = nft_run_cmd_from_buffer(ctx, script);
	if (rc != 0) {
		const char *e = nft_ctx_get_error_buffer(ctx);
		rc = sbx_err_set(err, -EINVAL, "nft: %.400s", e && *e ? e : "failed");
	}
	nft_ctx_free(ctx);
	return rc;
}

/* Order: the family's own checks first (anti-spoofing, DNS to us only,
 * never into another sandbox, the node or the refused sets), then the
 * sandbox's chain through the vmap, whose last rule is its default. An
 * established connection goes on whatever the policy says now. */
static const char router_fmt[] =
	"table inet " SUP_NFT_TABLE " {\n"
	"  set l4 { type inet_proto; elements = { tcp, udp }; }\n"
	"  set refused4 { type ipv4_addr; flags interval; auto-merge; elements = { %s }; }\n"
	"  set refused6 { type ipv6_addr; flags interval; auto-merge; elements = { %s }; }\n"
	"  map slots { type ifname : verdict; }\n"
	"  chain pre {\n"
	"    type filter hook prerouting priority raw; policy accept;\n"
	"    iifname \"s*\" fib saddr . iif oif missing drop\n"
	"  }\n"
	"  chain inbound {\n"
	"    type filter hook input priority filter; policy drop;\n"
	"    iif lo accept\n"
	"    ct state established,related accept\n"
	"    icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept\n"
	"    iifname \"s*\" ip daddr %s udp dport 53 accept\n"
	"    iifname \"s*\" reject with icmpx admin-prohibited\n"
	"  }\n"
	"  chain fw {\n"
	"    type filter hook forward priority filter; policy drop;\n"
	"    ct state established,related accept\n"
	"    ct state invalid drop\n"
	"    iifname != \"s*\" drop\n"
	"    oifname != \"up\" reject with icmpx admin-prohibited\n"
	"    ip daddr @refused4 reject with icmpx admin-prohibited\n"
	"    ip6 daddr @refused6 reject with icmpx admin-prohibited\n"
	"    meta l4proto @l4 th dport 53 reject with icmpx admin-prohibited\n"
	"    iifname vmap @slots\n"
	"    reject with icmpx admin-prohibited\n"
	"  }\n"
	"  chain post {\n"
	"    type nat hook postrouting priority srcnat; policy accept;\n"
	"    oifname \"up\" masquerade\n"
	"  }\n"
	"}\n";

int sup_nft_router_table(const sup_nft_router *r, sbx_err *err)
{
	size_t cap = sizeof(router_fmt) + strlen(r->refused4) + strlen(r->refused6) + 64;
	char *s = malloc(cap);
	if (!s)
		return sbx_err_set(err, -ENOMEM, "router table");
	snprintf(s, cap, router_fmt, r->refused4, r->refused6, r->gw4);
	int rc = sup_nft_run_text(s, err);
	free(s);
	return rc < 0 ? sbx_err_wrap(err, "router table") : 0;
}

/* Another firewall's forward chain that drops (iptables' policy, a
 * distribution's) still drops: every base chain has its say. */
static const char host_fmt[] =
	"table inet %s {\n"
	"  chain fw {\n"
	"    type filter hook forward priority filter; policy accept;\n"
	"    iifname \"%s\" oifname \"%s\" accept\n"
	"    iifname \"%s\" oifname \"%s\" ct state established,related accept\n"
	"    iifname \"%s\" reject with icmpx admin-prohibited\n"
	"    oifname \"%s\" drop\n"
	"  }\n"
	"  chain inbound {\n"
	"    type filter hook input priority filter; policy accept;\n"
	"    iifname \"%s\" icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert } accept\n"
	"    iifname \"%s\" reject with icmpx admin-prohibited\n"
	"  }\n"
	"  chain post {\n"
	"    type nat hook postrouting priority srcnat; policy accept;\n"
	"    oifname \"%s\" ip saddr %s masquerade\n"
	"    oifname \"%s\" ip6 saddr %s masquerade\n"
	"  }\n"
	"}\n";

int sup_nft_host_table(const sup_nft_host *h, sbx_err *err)
{
	char s[sizeof(host_fmt) + 16 * 64];
	snprintf(s, sizeof(s), host_fmt, h->name, h->peer, h->iface, h->iface, h->peer, h->peer,
		 h->peer, h->peer, h->peer, h->iface, h->from4, h->iface, h->from6);
	int rc = sup_nft_run_text(s, err);
	return rc < 0 ? sbx_err_wrap(err, "table %s", h->name) : 0;
}

int sup_nft_table_remove(const char *name, sbx_err *err)
{
	char s[128];
	/* "add" first makes the delete succeed when the table is absent */
	snprintf(s, sizeof(s), "add table inet %s\ndelete table inet %s\n", name, name);
	int rc = sup_nft_run_text(s, err);
	return rc < 0 ? sbx_err_wrap(err, "remove table %s", name) : 0;
}

sup_nft *sup_nft_open(sbx_err *err)
{
	sup_nft *n = calloc(1, sizeof(*n));
	if (!n || !(n->buf = malloc(BATCH_MAX))) {
		free(n);
		sbx_err_set(err, -ENOMEM, "nftables");
		return NULL;
	}
	n->sock = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!n->sock || mnl_socket_bind(n->sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		sbx_err_sys(err, -errno, "nftables netlink socket");
		sup_nft_close(n);
		return NULL;
	}
	int one = 1, size = SNDBUF;
	int rsize = RCVBUF;
	/* acks of failed messages echo only their headers; the batch of a
	 * long policy fits in one send */
	mnl_socket_setsockopt(n->sock, NETLINK_CAP_ACK, &one, sizeof(one));
	mnl_socket_setsockopt(n->sock, NETLINK_EXT_ACK, &one, sizeof(one));
	if (setsockopt(mnl_socket_get_fd(n->sock), SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
		setsockopt(mnl_socket_get_fd(n->sock), SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	/* room for an error of every message of the longest batch */
	if (setsockopt(mnl_socket_get_fd(n->sock), SOL_SOCKET, SO_RCVBUFFORCE, &rsize, sizeof(rsize)) < 0)
		setsockopt(mnl_socket_get_fd(n->sock), SOL_SOCKET, SO_RCVBUF, &rsize, sizeof(rsize));
	n->portid = mnl_socket_get_portid(n->sock);
	n->seq = (uint32_t)time(NULL);
	return n;
}

void sup_nft_close(sup_nft *n)
{
	if (!n)
		return;
	if (n->sock)
		mnl_socket_close(n->sock);
	free(n->buf);
	free(n);
}

/* ---- batches ---- */

static void batch_begin(sup_nft *n)
{
	n->batch = mnl_nlmsg_batch_start(n->buf, BATCH_MAX);
	n->msgs = 0;
	n->overflow = false;
	n->last = NULL;
	n->begin_seq = n->seq;
	nftnl_batch_begin(mnl_nlmsg_batch_current(n->batch), n->seq++);
	mnl_nlmsg_batch_next(n->batch);
}

static struct nlmsghdr *msg(sup_nft *n, uint16_t type, uint16_t flags)
{
	n->last = nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(n->batch), type, NFPROTO_INET,
					flags, n->seq++);
	return n->last;
}

static void msg_done(sup_nft *n)
{
	if (!mnl_nlmsg_batch_next(n->batch))
		n->overflow = true;
	n->msgs++;
}

/* Send the batch and read its answers. The kernel applies a batch while
 * we send it and queues every answer before sendto returns: an error for
 * each message that failed, then the ack of the last message (the only
 * one that asks for one, so a long policy does not fill our receive
 * buffer with acks), or an error on the batch itself (out of memory). */
static int batch_commit(sup_nft *n, const char *what, sbx_err *err)
{
	nftnl_batch_end(mnl_nlmsg_batch_current(n->batch), n->seq++);
	if (!mnl_nlmsg_batch_next(n->batch))
		n->overflow = true;
	if (n->overflow || !n->last) {
		mnl_nlmsg_batch_stop(n->batch);
		return sbx_err_set(err, -E2BIG, "%s: batch over %u bytes", what, BATCH_MAX);
	}
	n->last->nlmsg_flags |= NLM_F_ACK;
	uint32_t last_seq = n->last->nlmsg_seq;
	ssize_t sent = mnl_socket_sendto(n->sock, mnl_nlmsg_batch_head(n->batch),
					 mnl_nlmsg_batch_size(n->batch));
	mnl_nlmsg_batch_stop(n->batch);
	if (sent < 0)
		return sbx_err_sys(err, -errno, "%s: send", what);
	int first = 0;
	bool done = false;
	char rbuf[MNL_SOCKET_BUFFER_SIZE];
	int fd = mnl_socket_get_fd(n->sock);
	while (!done) {
		ssize_t got = recv(fd, rbuf, sizeof(rbuf), MSG_DONTWAIT);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) { /* answers lost: failed, read on */
				first = first ?: -ENOBUFS;
				continue;
			}
			if (errno == EAGAIN)
				return sbx_err_set(err, first ?: -EPROTO, "%s: %s", what,
						   first ? strerror(-first) : "the kernel did not answer");
			return sbx_err_sys(err, -errno, "%s: receive", what);
		}
		int len = (int)got;
		for (const struct nlmsghdr *h = (const struct nlmsghdr *)rbuf; mnl_nlmsg_ok(h, len);
		     h = mnl_nlmsg_next(h, &len)) {
			if (h->nlmsg_type != NLMSG_ERROR)
				continue;
			const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
			if (e->error && !first)
				first = e->error;
			if (h->nlmsg_seq == last_seq || h->nlmsg_seq == n->begin_seq)
				done = true;
		}
	}
	if (first)
		return sbx_err_sys(err, first, "%s", what);
	return 0;
}

/* ---- expressions ---- */

static int add_expr(struct nftnl_rule *r, struct nftnl_expr *e)
{
	if (!e)
		return -ENOMEM;
	nftnl_rule_add_expr(r, e);
	return 0;
}

static int e_meta(struct nftnl_rule *r, uint32_t key, uint32_t dreg)
{
	struct nftnl_expr *e = nftnl_expr_alloc("meta");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_KEY, key);
		nftnl_expr_set_u32(e, NFTNL_EXPR_META_DREG, dreg);
	}
	return add_expr(r, e);
}

static int e_cmp(struct nftnl_rule *r, uint32_t sreg, const void *data, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("cmp");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, sreg);
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, NFT_CMP_EQ);
		nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	}
	return add_expr(r, e);
}

static int e_payload(struct nftnl_rule *r, uint32_t base, uint32_t off, uint32_t len, uint32_t dreg)
{
	struct nftnl_expr *e = nftnl_expr_alloc("payload");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
	}
	return add_expr(r, e);
}

static int e_mask(struct nftnl_rule *r, uint32_t reg, const uint8_t *mask, uint32_t len)
{
	static const uint8_t zero[16];
	struct nftnl_expr *e = nftnl_expr_alloc("bitwise");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, reg);
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, reg);
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
		nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
		nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, zero, len);
	}
	return add_expr(r, e);
}

static int e_lookup(struct nftnl_rule *r, uint32_t sreg, const char *set)
{
	struct nftnl_expr *e = nftnl_expr_alloc("lookup");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
		nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
	}
	return add_expr(r, e);
}

static int e_verdict(struct nftnl_rule *r, sup_netpol_action a)
{
	struct nftnl_expr *e;
	if (a == SUP_NETPOL_ALLOW) {
		e = nftnl_expr_alloc("immediate");
		if (e) {
			nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
			nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, NF_ACCEPT);
		}
	} else {
		/* an immediate "administratively prohibited": a refused connect
		 * fails at once instead of timing out */
		e = nftnl_expr_alloc("reject");
		if (e) {
			nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_ICMPX_UNREACH);
			nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, NFT_REJECT_ICMPX_ADMIN_PROHIBITED);
		}
	}
	return add_expr(r, e);
}

/* ---- names of a slot's objects ---- */

static void chain_name(char *buf, size_t cap, unsigned slot)
{
	snprintf(buf, cap, "p%u", slot);
}

static const char *set_prefix(sup_netpol_set s)
{
	switch (s) {
	case SUP_NETPOL_SET_ALLOW:
		return "a";
	case SUP_NETPOL_SET_ALLOW_PORT:
		return "ap";
	case SUP_NETPOL_SET_DENY_PORT:
		return "dp";
	default:
		return "?";
	}
}

static void set_name(char *buf, size_t cap, sup_netpol_set s, int family, unsigned slot)
{
	snprintf(buf, cap, "%s%d_%u", set_prefix(s), family, slot);
}

/* A set of our table by name, for a message about it (NULL: no memory). */
static struct nftnl_set *table_set(const char *name)
{
	struct nftnl_set *s = nftnl_set_alloc();
	if (s) {
		nftnl_set_set_str(s, NFTNL_SET_TABLE, SUP_NFT_TABLE);
		nftnl_set_set_str(s, NFTNL_SET_NAME, name);
	}
	return s;
}

static const sup_netpol_set all_sets[] = { SUP_NETPOL_SET_ALLOW, SUP_NETPOL_SET_ALLOW_PORT,
					   SUP_NETPOL_SET_DENY_PORT };

/* A slot's set of kind all_sets[i] and family f. */
static struct nftnl_set *slot_set(unsigned slot, size_t i, int f)
{
	char name[32];
	set_name(name, sizeof(name), all_sets[i], f, slot);
	return table_set(name);
}

/* Key length of a set: the address, plus a 32-bit register for the port. */
static uint32_t key_len(sup_netpol_set s, int family)
{
	uint32_t a = family == 4 ? 4 : 16;
	return s == SUP_NETPOL_SET_ALLOW ? a : a + 4;
}

/* ---- messages ---- */

static int put_rule(sup_nft *n, struct nftnl_rule *r)
{
	struct nlmsghdr *nlh = msg(n, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	nftnl_rule_free(r);
	msg_done(n);
	return 0;
}

static struct nftnl_rule *rule_new(unsigned slot)
{
	char chain[32];
	chain_name(chain, sizeof(chain), slot);
	struct nftnl_rule *r = nftnl_rule_alloc();
	if (!r)
		return NULL;
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, SUP_NFT_TABLE);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	nftnl_rule_set_u32(r, NFTNL_RULE_FAMILY, NFPROTO_INET);
	return r;
}

/* One compiled entry as a rule: family, then tcp/udp when it has a port,
 * then the address (or the set), then the verdict. */
static int entry_rule(sup_nft *n, unsigned slot, const sup_netpol_entry *en)
{
	struct nftnl_rule *r = rule_new(slot);
	if (!r)
		return -ENOMEM;
	uint8_t proto = en->family == 4 ? NFPROTO_IPV4 : NFPROTO_IPV6;
	uint32_t alen = en->family == 4 ? 4 : 16;
	uint32_t daddr = en->family == 4 ? 16 : 24; /* offset in the network header */
	int rc = e_meta(r, NFT_META_NFPROTO, NFT_REG_1);
	rc = rc ?: e_cmp(r, NFT_REG_1, &proto, 1);
	if (en->has_port) {
		rc = rc ?: e_meta(r, NFT_META_L4PROTO, NFT_REG_1);
		rc = rc ?: e_lookup(r, NFT_REG_1, "l4");
	}
	if (en->set == SUP_NETPOL_SET_NONE) {
		const sup_netpol_rule *ru = en->rule;
		if (ru->prefix > 0) {
			rc = rc ?: e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, daddr, alen, NFT_REG_1);
			if (ru->prefix < alen * 8) {
				uint8_t mask[16] = {0};
				for (unsigned b = 0; b < ru->prefix; b++)
					mask[b / 8] |= (uint8_t)(0x80 >> (b % 8));
				rc = rc ?: e_mask(r, NFT_REG_1, mask, alen);
			}
			rc = rc ?: e_cmp(r, NFT_REG_1, ru->addr, alen);
		}
		if (ru->port) {
			uint16_t p = htons(ru->port);
			rc = rc ?: e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG_1);
			rc = rc ?: e_cmp(r, NFT_REG_1, &p, 2);
		}
	} else {
		char set[32];
		set_name(set, sizeof(set), en->set, en->family, slot);
		/* a concatenation: the address in the first registers, the
		 * port in the next 32-bit one */
		rc = rc ?: e_payload(r, NFT_PAYLOAD_NETWORK_HEADER, daddr, alen, NFT_REG32_00);
		if (en->set != SUP_NETPOL_SET_ALLOW)
			rc = rc ?: e_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2,
					     NFT_REG32_00 + alen / 4);
		rc = rc ?: e_lookup(r, NFT_REG32_00, set);
	}
	rc = rc ?: e_verdict(r, en->action);
	if (rc < 0) {
		nftnl_rule_free(r);
		return rc;
	}
	return put_rule(n, r);
}

static int default_rule(sup_nft *n, unsigned slot, sup_netpol_action a)
{
	struct nftnl_rule *r = rule_new(slot);
	if (!r || e_verdict(r, a) < 0) {
		if (r)
			nftnl_rule_free(r);
		return -ENOMEM;
	}
	return put_rule(n, r);
}

static void flush_chain(sup_nft *n, unsigned slot)
{
	char chain[32];
	chain_name(chain, sizeof(chain), slot);
	struct nftnl_rule *r = rule_new(slot);
	if (!r) {
		n->overflow = true;
		return;
	}
	/* a DELRULE naming only the chain deletes all its rules */
	struct nlmsghdr *nlh = msg(n, NFT_MSG_DELRULE, 0);
	nftnl_rule_nlmsg_build_payload(nlh, r);
	nftnl_rule_free(r);
	msg_done(n);
}

static void flush_sets(sup_nft *n, unsigned slot)
{
	for (int f = 4; f <= 6; f += 2) {
		for (size_t i = 0; i < sizeof(all_sets) / sizeof(all_sets[0]); i++) {
			struct nftnl_set *s = slot_set(slot, i, f);
			if (!s) {
				n->overflow = true;
				return;
			}
			/* a DELSETELEM without elements flushes the set */
			struct nlmsghdr *nlh = msg(n, NFT_MSG_DELSETELEM, 0);
			nftnl_set_elems_nlmsg_build_payload(nlh, s);
			nftnl_set_free(s);
			msg_done(n);
		}
	}
}

int sup_nft_slot_init(sup_nft *n, unsigned slot, sbx_err *err)
{
	char chain[32], ifname[IFNAMSIZ];
	chain_name(chain, sizeof(chain), slot);
	snprintf(ifname, sizeof(ifname), "s%u", slot);
	batch_begin(n);
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!c) {
		mnl_nlmsg_batch_stop(n->batch);
		return sbx_err_set(err, -ENOMEM, "nft slot %u", slot);
	}
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, SUP_NFT_TABLE);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, chain);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
	struct nlmsghdr *nlh = msg(n, NFT_MSG_NEWCHAIN, NLM_F_CREATE);
	nftnl_chain_nlmsg_build_payload(nlh, c);
	nftnl_chain_free(c);
	msg_done(n);

	for (int f = 4; f <= 6; f += 2) {
		for (size_t i = 0; i < sizeof(all_sets) / sizeof(all_sets[0]); i++) {
			struct nftnl_set *s = slot_set(slot, i, f);
			if (!s) {
				mnl_nlmsg_batch_stop(n->batch);
				return sbx_err_set(err, -ENOMEM, "nft slot %u", slot);
			}
			uint32_t atype = f == 4 ? TYPE_IPADDR : TYPE_IP6ADDR;
			nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
			nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_TIMEOUT);
			nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, key_len(all_sets[i], f));
			nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE,
					  all_sets[i] == SUP_NETPOL_SET_ALLOW
						  ? atype
						  : (atype << TYPE_BITS) | TYPE_INET_SERVICE);
			nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, SUP_NFT_SET_SIZE);
			nftnl_set_set_u32(s, NFTNL_SET_ID, (uint32_t)(i + 1 + (size_t)f * 4));
			nlh = msg(n, NFT_MSG_NEWSET, NLM_F_CREATE);
			nftnl_set_nlmsg_build_payload(nlh, s);
			nftnl_set_free(s);
			msg_done(n);
		}
	}

	/* the link's entry in the vmap: "s<slot>" : jump p<slot> */
	struct nftnl_set *m = table_set("slots");
	struct nftnl_set_elem *e = nftnl_set_elem_alloc();
	if (!m || !e) {
		if (m)
			nftnl_set_free(m);
		if (e)
			nftnl_set_elem_free(e);
		mnl_nlmsg_batch_stop(n->batch);
		return sbx_err_set(err, -ENOMEM, "nft slot %u", slot);
	}
	char key[IFNAMSIZ] = {0}; /* the kernel compares all IFNAMSIZ bytes */
	snprintf(key, sizeof(key), "%s", ifname);
	nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, sizeof(key));
	nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, (uint32_t)NFT_JUMP);
	nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, chain);
	nftnl_set_elem_add(m, e);
	nlh = msg(n, NFT_MSG_NEWSETELEM, NLM_F_CREATE);
	nftnl_set_elems_nlmsg_build_payload(nlh, m);
	nftnl_set_free(m);
	msg_done(n);

	flush_chain(n, slot);
	if (default_rule(n, slot, SUP_NETPOL_DENY) < 0)
		n->overflow = true;
	int rc = batch_commit(n, "nft slot init", err);
	return rc < 0 ? sbx_err_wrap(err, "slot %u", slot) : 0;
}

int sup_nft_slot_load(sup_nft *n, unsigned slot, const sup_netpol *p, sbx_err *err)
{
	sup_netpol_entry *en = malloc((p->n + 2 * SUP_NETPOL_SETS_PER_FAMILY) * sizeof(*en));
	if (!en)
		return sbx_err_set(err, -ENOMEM, "nft policy");
	size_t cnt = sup_netpol_compile(p, en);
	batch_begin(n);
	flush_chain(n, slot);
	flush_sets(n, slot);
	int rc = 0;
	for (size_t i = 0; i < cnt && rc == 0; i++)
		rc = entry_rule(n, slot, &en[i]);
	free(en);
	rc = rc ?: default_rule(n, slot, p->default_action);
	if (rc < 0) {
		mnl_nlmsg_batch_stop(n->batch);
		return sbx_err_set(err, rc, "nft policy of slot %u: building rules", slot);
	}
	rc = batch_commit(n, "nft policy", err);
	return rc < 0 ? sbx_err_wrap(err, "slot %u", slot) : 0;
}

int sup_nft_slot_reset(sup_nft *n, unsigned slot, sbx_err *err)
{
	batch_begin(n);
	flush_chain(n, slot);
	flush_sets(n, slot);
	if (default_rule(n, slot, SUP_NETPOL_DENY) < 0)
		n->overflow = true;
	int rc = batch_commit(n, "nft reset", err);
	return rc < 0 ? sbx_err_wrap(err, "slot %u", slot) : 0;
}

/* One element message for each address (with port when port != 0). */
static int elems(sup_nft *n, uint16_t type, const char *set, int family, const uint8_t *addrs,
		 size_t count, uint16_t port, bool with_port, uint64_t timeout_ms)
{
	struct nftnl_set *s = table_set(set);
	if (!s)
		return -ENOMEM;
	size_t alen = family == 4 ? 4 : 16;
	for (size_t i = 0; i < count; i++) {
		struct nftnl_set_elem *e = nftnl_set_elem_alloc();
		if (!e) {
			nftnl_set_free(s);
			return -ENOMEM;
		}
		uint8_t key[20] = {0};
		memcpy(key, addrs + i * alen, alen);
		if (with_port) {
			uint16_t p = htons(port);
			memcpy(key + alen, &p, 2);
		}
		nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, (uint32_t)(alen + (with_port ? 4 : 0)));
		if (timeout_ms)
			nftnl_set_elem_set_u64(e, NFTNL_SET_ELEM_TIMEOUT, timeout_ms);
		nftnl_set_elem_add(s, e);
	}
	struct nlmsghdr *nlh = msg(n, type, type == NFT_MSG_NEWSETELEM ? NLM_F_CREATE : 0);
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
	nftnl_set_free(s);
	msg_done(n);
	return 0;
}

/* Add with a fresh timeout: an add of an element that is there keeps its
 * old timeout, so add (to be sure it is there), delete, add again, in one
 * batch. */
static int renew(sup_nft *n, const char *set, int family, const uint8_t *addrs, size_t count,
		 uint16_t port, bool with_port, uint64_t ms)
{
	int rc = elems(n, NFT_MSG_NEWSETELEM, set, family, addrs, count, port, with_port, ms);
	rc = rc ?: elems(n, NFT_MSG_DELSETELEM, set, family, addrs, count, port, with_port, 0);
	rc = rc ?: elems(n, NFT_MSG_NEWSETELEM, set, family, addrs, count, port, with_port, ms);
	return rc;
}

int sup_nft_slot_admit(sup_nft *n, unsigned slot, int family, const uint8_t *addrs, size_t count,
		       const sup_netpol_name_verdict *v, unsigned ttl_s, sbx_err *err)
{
	if (count == 0)
		return 0;
	uint64_t ms = (uint64_t)ttl_s * 1000;
	char set[32];
	batch_begin(n);
	int rc = 0;
	if (v->allow_all) {
		set_name(set, sizeof(set), SUP_NETPOL_SET_ALLOW, family, slot);
		rc = renew(n, set, family, addrs, count, 0, false, ms);
	}
	set_name(set, sizeof(set), SUP_NETPOL_SET_ALLOW_PORT, family, slot);
	for (size_t i = 0; i < v->n_allow && rc == 0; i++)
		rc = renew(n, set, family, addrs, count, v->allow[i], true, ms);
	set_name(set, sizeof(set), SUP_NETPOL_SET_DENY_PORT, family, slot);
	for (size_t i = 0; i < v->n_deny && rc == 0; i++)
		rc = renew(n, set, family, addrs, count, v->deny[i], true, ms);
	if (rc < 0) {
		mnl_nlmsg_batch_stop(n->batch);
		return sbx_err_set(err, rc, "nft: resolved addresses of slot %u", slot);
	}
	if (n->msgs == 0) {
		mnl_nlmsg_batch_stop(n->batch);
		return 0;
	}
	rc = batch_commit(n, "nft resolved addresses", err);
	return rc < 0 ? sbx_err_wrap(err, "slot %u", slot) : 0;
}
