/* sup_net: see sup_net.h. The slots, the router and the life of the
 * plumbing; reading the settings (uplink, resolver, refused ranges, the
 * node's addresses) is sup_net_cfg.c. */
#include "sup_net.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_dns.h"
#include "sup_log.h"
#include "sup_netns.h"
#include "sup_net_int.h"
#include "sup_nft.h"
#include "sup_rtnl.h"

#define UP_LINK "up"

enum slot_state { SLOT_FREE, SLOT_TAKEN, SLOT_READY, SLOT_RELEASING };

typedef struct net_slot {
	enum slot_state state;
	bool nft_made; /* its chain and sets exist (kept for the next sandbox) */
	bool up;       /* the sandbox's link is up with its routes */
	int eth0;      /* the sandbox's link index, in its namespace */
	sup_rtnl *nl;  /* a socket in the sandbox's namespace */
	bool has_pol;
	sup_netpol pol;
	uint32_t gen;  /* changes with every policy and sandbox: stale answers are dropped */
} net_slot;

struct sup_net {
	struct event_base *base;
	sup_net_cfg cfg;
	char router[32];    /* its namespace's name, "sbx-<tag>" */
	char peer[IFNAMSIZ]; /* the uplink's end, "sbx-<tag>" */
	bool iface_mode;    /* an interface of ours for uplink, not a namespace */
	char iface[IFNAMSIZ];
	int host_fd;        /* the supervisor's namespace */
	int uplink_fd;      /* where the peer lives (host_fd's twin with an interface) */
	int router_fd;
	uint8_t up4[4], peer4[4], up6[16], peer6[16]; /* the link to the uplink */
	sup_nft *nft;
	sup_dns *dns;
	net_slot *slots; /* [0] unused */
	unsigned nslots;
	unsigned next; /* where the search for a free slot starts */
};

/* ---- addresses ---- */

static void sandbox4(unsigned s, uint8_t a[4])
{
	uint32_t base;
	inet_pton(AF_INET, SUP_NET_GATEWAY4, &base);
	uint32_t v = ntohl(base) + s; /* the gateway is .1, slot 1 is .2 */
	v = htonl(v);
	memcpy(a, &v, 4);
}

static void sandbox6(unsigned s, uint8_t a[16])
{
	inet_pton(AF_INET6, SUP_NET_GATEWAY6, a);
	uint32_t last;
	memcpy(&last, a + 12, 4);
	last = htonl(ntohl(last) + s);
	memcpy(a + 12, &last, 4);
}

void sup_net_addresses(unsigned slot, char *v4, size_t v4_cap, char *v6, size_t v6_cap)
{
	uint8_t a4[4], a6[16];
	sandbox4(slot, a4);
	sandbox6(slot, a6);
	inet_ntop(AF_INET, a4, v4, (socklen_t)v4_cap);
	inet_ntop(AF_INET6, a6, v6, (socklen_t)v6_cap);
}

/* The slot a sandbox address belongs to, or 0. */
static unsigned slot_of(const sup_net *n, const struct sockaddr *sa)
{
	uint8_t first[16];
	const uint8_t *a;
	size_t len;
	if (sa->sa_family == AF_INET) {
		a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
		len = 4;
		sandbox4(0, first);
	} else if (sa->sa_family == AF_INET6) {
		a = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
		len = 16;
		sandbox6(0, first);
	} else {
		return 0;
	}
	if (memcmp(a, first, len - 4) != 0)
		return 0;
	uint32_t x, y;
	memcpy(&x, a + len - 4, 4);
	memcpy(&y, first + len - 4, 4);
	uint32_t s = ntohl(x) - ntohl(y);
	return s >= 1 && s <= n->nslots ? s : 0;
}

/* The link to the uplink: a /30 (and a /64) picked by the tag, so two
 * supervisors sharing an uplink rarely meet; the peer has .1, we .2. */
static void transfer_net(sup_net *n)
{
	unsigned idx = (unsigned)strtoul(n->cfg.tag, NULL, 16) % 16384;
	uint32_t v = htonl((100u << 24) | (95u << 16) | (idx << 2));
	memcpy(n->peer4, &v, 4);
	n->peer4[3] |= 1;
	memcpy(n->up4, n->peer4, 4);
	n->up4[3] = (uint8_t)((n->up4[3] & ~3u) | 2);
	inet_pton(AF_INET6, "fd73:6278:ffff::1", n->peer6);
	n->peer6[6] = (uint8_t)(idx >> 8);
	n->peer6[7] = (uint8_t)idx;
	memcpy(n->up6, n->peer6, 16);
	n->up6[15] = 2;
}

/* ---- the router ---- */

/* What an earlier run of this state folder left: the router's namespace,
 * the uplink's end of its link (the namespace would take its links along,
 * but only once nothing holds it, and a name we are about to reuse must be
 * free now), the node's table. */
static void sweep(sup_net *n, const char *why)
{
	sbx_err e;
	int saved;
	if (sup_netns_enter(n->uplink_fd, &saved, &e) == 0) {
		sup_rtnl *nl = sup_rtnl_open(&e);
		if (nl && sup_rtnl_ifindex(nl, n->peer, &e) > 0) {
			sup_info("net: removing link %s%s", n->peer, why);
			if (sup_rtnl_link_del(nl, n->peer, &e) < 0)
				sup_warn("net: %s", e.msg);
		}
		sup_rtnl_close(nl);
		if (n->iface_mode && sup_nft_table_remove(n->router, &e) < 0)
			sup_warn("net: %s", e.msg);
		sup_netns_leave(&saved);
	}
	char path[PATH_MAX];
	snprintf(path, sizeof(path), SUP_NETNS_DIR "/%s", n->router);
	if (access(path, F_OK) == 0) {
		sup_info("net: removing the router namespace %s%s", n->router, why);
		if (sup_netns_remove(n->router, &e) < 0)
			sup_warn("net: %s", e.msg);
	}
}

static int router_links(sup_net *n, sbx_err *err)
{
	sup_rtnl *nl = sup_rtnl_open(err);
	if (!nl)
		return err->code;
	uint8_t gw4[4];
	inet_pton(AF_INET, SUP_NET_GATEWAY4, gw4);
	int lo = sup_rtnl_ifindex(nl, "lo", err);
	int rc = lo < 0 ? lo : 0;
	rc = rc ?: sup_rtnl_link_up(nl, lo, err);
	/* the gateway is the router's own address (the resolver binds it)
	 * before any sandbox link exists */
	rc = rc ?: sup_rtnl_addr_add(nl, lo, 4, gw4, 32, err);
	rc = rc ?: sup_netns_sysctl("ipv4/ip_forward", "1", err);
	rc = rc ?: sup_netns_sysctl("ipv6/conf/all/forwarding", "1", err);
	rc = rc ?: sup_rtnl_veth(nl, UP_LINK, n->peer, n->uplink_fd, err);
	int up = rc < 0 ? rc : sup_rtnl_ifindex(nl, UP_LINK, err);
	if (up < 0)
		rc = up;
	rc = rc ?: sup_rtnl_link_nolinklocal(nl, up, err);
	rc = rc ?: sup_rtnl_addr_add(nl, up, 4, n->up4, 30, err);
	rc = rc ?: sup_rtnl_addr_add(nl, up, 6, n->up6, 64, err);
	rc = rc ?: sup_rtnl_link_up(nl, up, err);
	uint8_t any[16] = {0};
	rc = rc ?: sup_rtnl_route_add(nl, up, 4, any, 0, n->peer4, false, err);
	rc = rc ?: sup_rtnl_route_add(nl, up, 6, any, 0, n->peer6, false, err);
	sup_rtnl_close(nl);
	return rc;
}

static int peer_link(sup_net *n, sbx_err *err)
{
	int saved;
	int rc = sup_netns_enter(n->uplink_fd, &saved, err);
	if (rc < 0)
		return rc;
	sup_rtnl *nl = sup_rtnl_open(err);
	int idx = nl ? sup_rtnl_ifindex(nl, n->peer, err) : err->code;
	rc = idx < 0 ? idx : 0;
	rc = rc ?: sup_rtnl_link_nolinklocal(nl, idx, err);
	rc = rc ?: sup_rtnl_addr_add(nl, idx, 4, n->peer4, 30, err);
	rc = rc ?: sup_rtnl_addr_add(nl, idx, 6, n->peer6, 64, err);
	rc = rc ?: sup_rtnl_link_up(nl, idx, err);
	if (rc == 0 && n->iface_mode) {
		/* forwarding between the router's link and the uplink only (per
		 * interface: the node's other interfaces are left as they are);
		 * IPv6 needs the kernel's per-interface force_forwarding */
		char p[96];
		const char *ifs[] = { n->peer, n->iface };
		for (int i = 0; i < 2 && rc == 0; i++) {
			snprintf(p, sizeof(p), "ipv4/conf/%s/forwarding", ifs[i]);
			rc = sup_netns_sysctl(p, "1", err);
			snprintf(p, sizeof(p), "ipv6/conf/%s/force_forwarding", ifs[i]);
			sbx_err e6;
			if (rc == 0 && sup_netns_sysctl(p, "1", &e6) < 0 && i == 0)
				sup_warn("net: no IPv6 egress through interface %s (%s)", n->iface, e6.msg);
		}
		char from4[INET_ADDRSTRLEN], from6[INET6_ADDRSTRLEN];
		inet_ntop(AF_INET, n->up4, from4, sizeof(from4));
		inet_ntop(AF_INET6, n->up6, from6, sizeof(from6));
		sup_nft_host h = { .name = n->router, .peer = n->peer, .iface = n->iface,
				   .from4 = from4, .from6 = from6 };
		rc = rc ?: sup_nft_host_table(&h, err);
	}
	sup_rtnl_close(nl);
	sup_netns_leave(&saved);
	return rc;
}

static int router_table(sup_net *n, const char *node4, const char *node6, sbx_err *err)
{
	SBX_AUTO_FREE char *r4 = malloc(REFUSED_MAX);
	SBX_AUTO_FREE char *r6 = malloc(REFUSED_MAX);
	if (!r4 || !r6)
		return sbx_err_set(err, -ENOMEM, "router table");
	char up4[INET_ADDRSTRLEN], up6[INET6_ADDRSTRLEN];
	uint8_t net4[4], net6[16];
	memcpy(net4, n->up4, 4);
	net4[3] &= (uint8_t)~3u;
	memcpy(net6, n->up6, 16);
	memset(net6 + 8, 0, 8);
	inet_ntop(AF_INET, net4, up4, sizeof(up4));
	inet_ntop(AF_INET6, net6, up6, sizeof(up6));
	/* never: this and other sandboxes, the router's link, loopback,
	 * link-local and cloud metadata, multicast and reserved, the node */
	snprintf(r4, REFUSED_MAX,
		 "0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16, 224.0.0.0/3, " SUP_NET_SANDBOX4 ", %s/30%s", up4,
		 node4);
	snprintf(r6, REFUSED_MAX,
		 "::/127, ::ffff:0:0/96, fe80::/10, ff00::/8, fd00:ec2::254, " SUP_NET_SANDBOX6 ", %s/64%s",
		 up6, node6);
	int rc = sup_net_add_deny_cidrs(n->cfg.deny_cidrs, 4, r4, REFUSED_MAX, err);
	rc = rc ?: sup_net_add_deny_cidrs(n->cfg.deny_cidrs, 6, r6, REFUSED_MAX, err);
	sup_nft_router t = { .gw4 = SUP_NET_GATEWAY4, .refused4 = r4, .refused6 = r6 };
	return rc ?: sup_nft_router_table(&t, err);
}

/* ---- the resolver's view of the slots ---- */

static int dns_decide(const struct sockaddr *from, const char *name, sup_netpol_name_verdict *v,
		      uint64_t *who, void *ud)
{
	sup_net *n = ud;
	unsigned s = slot_of(n, from);
	if (!s)
		return -1;
	net_slot *sl = &n->slots[s];
	if (sl->state != SLOT_READY || !sl->has_pol)
		return 0;
	sup_netpol_name(&sl->pol, name, v);
	*who = ((uint64_t)s << 32) | sl->gen;
	return v->answer ? 1 : 0;
}

static int dns_admit(uint64_t who, int family, const uint8_t *addrs, size_t count,
		     const sup_netpol_name_verdict *v, unsigned ttl, void *ud)
{
	sup_net *n = ud;
	unsigned s = (unsigned)(who >> 32);
	if (s == 0 || s > n->nslots)
		return -EINVAL;
	net_slot *sl = &n->slots[s];
	if (sl->state != SLOT_READY || sl->gen != (uint32_t)who)
		return -ESTALE; /* another policy or sandbox since the question */
	sbx_err e;
	int rc = sup_nft_slot_admit(n->nft, s, family, addrs, count, v, ttl, &e);
	if (rc < 0)
		sup_warn("net: %s", e.msg);
	return rc;
}

static int resolver(sup_net *n, const struct sockaddr_storage *up, socklen_t up_len, sbx_err *err)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "resolver socket");
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(53) };
	inet_pton(AF_INET, SUP_NET_GATEWAY4, &sa.sin_addr);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return sbx_err_sys(err, -e, "resolver: bind " SUP_NET_GATEWAY4 ":53");
	}
	sup_dns_cfg dc = { .min_ttl = n->cfg.min_ttl, .max_ttl = n->cfg.max_ttl,
			   .max_pending = 1024, .max_pending_each = 64,
			   .timeout_ms = 2000, .attempts = 2 };
	sup_dns_hooks hooks = { .decide = dns_decide, .admit = dns_admit, .ud = n };
	n->dns = sup_dns_new(n->base, fd, (const struct sockaddr *)up, up_len, &dc, &hooks, err);
	return n->dns ? 0 : err->code;
}

/* ---- life ---- */

static int setup(sup_net *n, sbx_err *err)
{
	struct sockaddr_storage up;
	socklen_t up_len = 0;
	int rc = sup_net_upstream_of(&n->cfg, &up, &up_len, err);
	if (rc < 0)
		return rc;
	SBX_AUTO_FREE char *node4 = calloc(1, REFUSED_MAX);
	SBX_AUTO_FREE char *node6 = calloc(1, REFUSED_MAX);
	if (!node4 || !node6)
		return sbx_err_set(err, -ENOMEM, "net");
	rc = sup_net_node_addresses(4, node4, REFUSED_MAX, err);
	rc = rc ?: sup_net_node_addresses(6, node6, REFUSED_MAX, err);
	if (rc < 0)
		return rc;
	sweep(n, " left by an earlier run");
	rc = sup_netns_create(n->router, &n->router_fd, err);
	if (rc < 0)
		return sbx_err_wrap(err, "router namespace");
	int saved;
	rc = sup_netns_enter(n->router_fd, &saved, err);
	if (rc < 0)
		return rc;
	rc = router_links(n, err);
	rc = rc ?: router_table(n, node4, node6, err);
	if (rc == 0 && !(n->nft = sup_nft_open(err)))
		rc = err->code;
	rc = rc ?: resolver(n, &up, up_len, err);
	sup_netns_leave(&saved);
	return rc ?: peer_link(n, err);
}

sup_net *sup_net_new(struct event_base *base, const sup_net_cfg *cfg, sbx_err *err)
{
	if (sup_net_check_cfg(cfg, err) < 0)
		return NULL;
	sup_net *n = calloc(1, sizeof(*n));
	if (!n) {
		sbx_err_set(err, -ENOMEM, "net");
		return NULL;
	}
	n->base = base;
	n->cfg = *cfg;
	n->host_fd = n->uplink_fd = n->router_fd = -1;
	n->nslots = cfg->max_slots < SUP_NET_MAX_SLOTS ? cfg->max_slots : SUP_NET_MAX_SLOTS;
	n->next = 1;
	snprintf(n->router, sizeof(n->router), "sbx-%s", cfg->tag);
	snprintf(n->peer, sizeof(n->peer), "sbx-%s", cfg->tag);
	transfer_net(n);
	n->slots = calloc(n->nslots + 1, sizeof(*n->slots));
	n->host_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int rc = !n->slots ? sbx_err_set(err, -ENOMEM, "net")
		 : n->host_fd < 0 ? sbx_err_sys(err, -errno, "the supervisor's network namespace")
				  : 0;
	if (rc == 0 && sup_net_is_netns_spec(cfg->uplink)) {
		rc = sup_netns_open(cfg->uplink[0] == '/' ? cfg->uplink : cfg->uplink + 6,
				    &n->uplink_fd, err);
	} else if (rc == 0) {
		n->iface_mode = true;
		snprintf(n->iface, sizeof(n->iface), "%s", cfg->uplink);
		if (!if_nametoindex(cfg->uplink))
			rc = sbx_err_sys(err, -errno, "uplink interface %s", cfg->uplink);
		else if ((n->uplink_fd = dup(n->host_fd)) < 0)
			rc = sbx_err_sys(err, -errno, "dup");
	}
	rc = rc ?: setup(n, err);
	if (rc < 0) {
		sbx_err_wrap(err, "network (--uplink %s)", cfg->uplink);
		sup_net_free(n);
		return NULL;
	}
	char a[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, n->up4, a, sizeof(a));
	sup_info("net: router %s up, uplink %s%s (router %s), sandboxes " SUP_NET_SANDBOX4
		 " and " SUP_NET_SANDBOX6 ", %u slots",
		 n->router, n->iface_mode ? "interface " : "namespace ", cfg->uplink, a, n->nslots);
	return n;
}

void sup_net_stop(sup_net *n)
{
	if (n)
		sup_dns_stop(n->dns);
}

void sup_net_free(sup_net *n)
{
	if (!n)
		return;
	sup_dns_free(n->dns);
	sup_nft_close(n->nft);
	for (unsigned s = 1; n->slots && s <= n->nslots; s++) {
		sup_rtnl_close(n->slots[s].nl);
		if (n->slots[s].has_pol)
			sup_netpol_free(&n->slots[s].pol);
	}
	free(n->slots);
	if (n->uplink_fd >= 0)
		/* the peer link (and the router's with it), the node's table, the namespace */
		sweep(n, "");
	if (n->router_fd >= 0)
		close(n->router_fd);
	if (n->uplink_fd >= 0)
		close(n->uplink_fd);
	if (n->host_fd >= 0)
		close(n->host_fd);
	free(n);
}

/* ---- slots ---- */

unsigned sup_net_slot_take(sup_net *n, sbx_err *err)
{
	for (unsigned i = 0; i < n->nslots; i++) {
		unsigned s = (n->next - 1 + i) % n->nslots + 1;
		if (n->slots[s].state == SLOT_FREE) {
			n->slots[s].state = SLOT_TAKEN;
			n->next = s % n->nslots + 1;
			return s;
		}
	}
	sbx_err_set(err, -EAGAIN, "net: all %u network slots are in use", n->nslots);
	return 0;
}

int sup_net_slot_claim(sup_net *n, unsigned slot, sbx_err *err)
{
	if (slot == 0 || slot > n->nslots)
		return sbx_err_set(err, -EINVAL, "net: slot %u is not one of the %u slots", slot,
				   n->nslots);
	if (n->slots[slot].state != SLOT_FREE)
		return sbx_err_set(err, -EBUSY, "net: slot %u is taken", slot);
	n->slots[slot].state = SLOT_TAKEN;
	return 0;
}

int sup_net_plumb(sup_net *n, unsigned slot, int pid, sup_rtnl **sb_nl, sbx_err *err)
{
	*sb_nl = NULL;
	char link[IFNAMSIZ];
	snprintf(link, sizeof(link), "s%u", slot);
	uint8_t a4[4], a6[16], gw4[4], gw6[16];
	sandbox4(slot, a4);
	sandbox6(slot, a6);
	inet_pton(AF_INET, SUP_NET_GATEWAY4, gw4);
	inet_pton(AF_INET6, SUP_NET_GATEWAY6, gw6);
	SBX_AUTO_CLOSE int sbns = -1;
	int rc = sup_netns_open_pid(pid, &sbns, err);
	if (rc < 0)
		return sbx_err_wrap(err, "plumb slot %u", slot);
	/* the router's end: up, the gateway's addresses, a route to the
	 * sandbox's */
	int saved;
	rc = sup_netns_enter(n->router_fd, &saved, err);
	if (rc < 0)
		return sbx_err_wrap(err, "plumb slot %u", slot);
	sup_rtnl *rnl = sup_rtnl_open(err);
	sbx_err ignored;
	/* a link of the slot's last sandbox whose removal failed */
	if (rnl)
		sup_rtnl_link_del(rnl, link, &ignored);
	rc = rnl ? sup_rtnl_veth(rnl, link, "eth0", sbns, err) : err->code;
	int idx = rc < 0 ? rc : sup_rtnl_ifindex(rnl, link, err);
	rc = idx < 0 ? idx : 0;
	rc = rc ?: sup_rtnl_link_nolinklocal(rnl, idx, err);
	rc = rc ?: sup_rtnl_addr_add(rnl, idx, 4, gw4, 32, err);
	rc = rc ?: sup_rtnl_addr_add(rnl, idx, 6, gw6, 128, err);
	rc = rc ?: sup_rtnl_link_up(rnl, idx, err);
	rc = rc ?: sup_rtnl_route_add(rnl, idx, 4, a4, 32, NULL, false, err);
	rc = rc ?: sup_rtnl_route_add(rnl, idx, 6, a6, 128, NULL, false, err);
	sup_netns_leave(&saved);
	/* the sandbox's end: its addresses, and down until a policy comes */
	sup_rtnl *snl = NULL;
	if (rc == 0 && (rc = sup_netns_enter(sbns, &saved, err)) == 0) {
		snl = sup_rtnl_open(err);
		int e = snl ? sup_rtnl_ifindex(snl, "eth0", err) : err->code;
		rc = e < 0 ? e : 0;
		rc = rc ?: sup_rtnl_link_nolinklocal(snl, e, err);
		rc = rc ?: sup_rtnl_addr_add(snl, e, 4, a4, 32, err);
		rc = rc ?: sup_rtnl_addr_add(snl, e, 6, a6, 128, err);
		sup_netns_leave(&saved);
	}
	if (rc < 0) {
		sbx_err e;
		if (rnl && sup_rtnl_link_del(rnl, link, &e) < 0)
			sup_warn("net: %s", e.msg);
		sup_rtnl_close(snl);
		snl = NULL;
	}
	sup_rtnl_close(rnl);
	if (rc < 0)
		return sbx_err_wrap(err, "plumb slot %u", slot);
	*sb_nl = snl;
	return 0;
}

int sup_net_slot_ready(sup_net *n, unsigned slot, sup_rtnl *sb_nl, sbx_err *err)
{
	net_slot *s = &n->slots[slot];
	s->nl = sb_nl;
	s->up = false;
	int rc = s->nft_made ? sup_nft_slot_reset(n->nft, slot, err) : sup_nft_slot_init(n->nft, slot, err);
	if (rc == 0)
		s->nft_made = true;
	int idx = rc < 0 ? rc : sup_rtnl_ifindex(sb_nl, "eth0", err);
	if (idx < 0)
		return sbx_err_wrap(err, "net slot %u", slot);
	s->eth0 = idx;
	s->state = SLOT_READY;
	return 0;
}

int sup_net_apply(sup_net *n, unsigned slot, const sup_netpol *p, sbx_err *err)
{
	if (slot == 0 || slot > n->nslots || n->slots[slot].state != SLOT_READY)
		return sbx_err_set(err, -EINVAL, "net: slot %u is not ready", slot);
	net_slot *s = &n->slots[slot];
	sup_netpol copy;
	if (sup_netpol_copy(p, &copy) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	int rc = sup_nft_slot_load(n->nft, slot, p, err);
	if (rc < 0) {
		sup_netpol_free(&copy);
		return rc;
	}
	if (s->has_pol)
		sup_netpol_free(&s->pol);
	s->pol = copy;
	s->has_pol = true;
	s->gen++;
	if (!s->up) {
		uint8_t any[16] = {0}, gw4[4], gw6[16];
		inet_pton(AF_INET, SUP_NET_GATEWAY4, gw4);
		inet_pton(AF_INET6, SUP_NET_GATEWAY6, gw6);
		rc = sup_rtnl_link_up(s->nl, s->eth0, err);
		rc = rc ?: sup_rtnl_route_add(s->nl, s->eth0, 4, any, 0, gw4, true, err);
		rc = rc ?: sup_rtnl_route_add(s->nl, s->eth0, 6, any, 0, gw6, true, err);
		if (rc < 0)
			return sbx_err_wrap(err, "net slot %u: the sandbox's link", slot);
		s->up = true;
	}
	return 0;
}

const sup_netpol *sup_net_policy(const sup_net *n, unsigned slot)
{
	if (!n || slot == 0 || slot > n->nslots || !n->slots[slot].has_pol)
		return NULL;
	return &n->slots[slot].pol;
}

sup_rtnl *sup_net_slot_release(sup_net *n, unsigned slot)
{
	net_slot *s = &n->slots[slot];
	if (s->state == SLOT_READY && s->nft_made) {
		sbx_err e;
		if (sup_nft_slot_reset(n->nft, slot, &e) < 0)
			sup_warn("net: %s", e.msg);
	}
	s->state = SLOT_RELEASING;
	s->gen++;
	if (s->has_pol) {
		sup_netpol_free(&s->pol);
		s->has_pol = false;
	}
	sup_rtnl *nl = s->nl;
	s->nl = NULL;
	return nl;
}

int sup_net_unplumb(sup_net *n, unsigned slot, sup_rtnl *sb_nl, sbx_err *err)
{
	/* the socket holds the sandbox's namespace: close it first */
	sup_rtnl_close(sb_nl);
	char link[IFNAMSIZ];
	snprintf(link, sizeof(link), "s%u", slot);
	int saved;
	int rc = sup_netns_enter(n->router_fd, &saved, err);
	if (rc < 0)
		return rc;
	sup_rtnl *nl = sup_rtnl_open(err);
	rc = nl ? sup_rtnl_link_del(nl, link, err) : err->code;
	sup_rtnl_close(nl);
	sup_netns_leave(&saved);
	return rc < 0 ? sbx_err_wrap(err, "unplumb slot %u", slot) : 0;
}

void sup_net_slot_put(sup_net *n, unsigned slot)
{
	if (slot == 0 || slot > n->nslots)
		return;
	net_slot *s = &n->slots[slot];
	if (s->nl) {
		sup_rtnl_close(s->nl);
		s->nl = NULL;
	}
	if (s->has_pol) {
		sup_netpol_free(&s->pol);
		s->has_pol = false;
	}
	s->state = SLOT_FREE;
	s->up = false;
}
