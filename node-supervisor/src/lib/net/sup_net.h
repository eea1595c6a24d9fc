/* Egress of sandboxes by policy, enforced on the node.
 *
 * Owns the router: a network namespace of the supervisor's
 * ("/run/netns/sbx-<tag>", the tag of the state folder, as containers
 * carry it), linked to the uplink by a veth pair ("up" inside, "sbx-<tag>"
 * in the uplink's namespace: the named one, or the supervisor's own with an
 * interface for uplink), forwarding and masquerading out of "up" only. Each
 * plumbed sandbox has a slot: a veth pair from the router ("s<slot>") into
 * its namespace ("eth0"), its addresses (SUP_NET_SANDBOX4/6 plus the slot),
 * its chain and sets in the router's firewall (sup_nft), its policy
 * (sup_netpol) and the resolver's view of it (sup_dns, on the gateway
 * address). Nothing of it is inside the sandbox but its end of the link,
 * so root inside cannot lift a rule.
 *
 * A slot's life: taken on the loop when a create is queued; plumbed on a
 * worker after the runtime made the container (link down, addresses set:
 * still no way out); made ready on the loop (its firewall chain rejects
 * everything); a policy applied on the loop (acquire, PATCH: rules
 * loaded, link up with its routes: well under a millisecond); released on
 * the loop at destroy (rules reset at once), unplumbed on a worker, put
 * back on the loop.
 *
 * Everything it made is removed by sup_net_free, and what an earlier run
 * of the same state folder left (killed) is swept by sup_net_new first.
 * It must not know sandboxes, pools or HTTP: the pool drives the slots,
 * the core applies policies. */
#ifndef SUP_NET_H
#define SUP_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_netpol.h"

struct event_base;
typedef struct sup_net sup_net;
typedef struct sup_rtnl sup_rtnl;

/* The sandboxes' addresses: the network, its first address the gateway
 * (and the resolver), slot s at network + s + 1. */
#define SUP_NET_SANDBOX4 "100.96.0.0/16"
#define SUP_NET_SANDBOX6 "fd73:6278::/64"
#define SUP_NET_GATEWAY4 "100.96.0.1"
#define SUP_NET_GATEWAY6 "fd73:6278::1"
#define SUP_NET_MAX_SLOTS 65533u
/* resolv.conf of a plumbed sandbox */
#define SUP_NET_RESOLV_CONF                                                                         \
	"# sbx: the supervisor's resolver; it answers the names the sandbox's network\n"          \
	"# policy allows (no network at all without a policy)\n"                                  \
	"nameserver " SUP_NET_GATEWAY4 "\noptions timeout:2 attempts:2\n"

typedef struct sup_net_cfg {
	const char *uplink;     /* "IFACE", or "netns:NAME" or an absolute path of a netns */
	const char *dns;        /* "ADDR" or "ADDR:PORT" / "[V6]:PORT"; NULL: the uplink's
				 * resolv.conf (/etc/netns/NAME/resolv.conf, else /etc/resolv.conf) */
	const char *deny_cidrs; /* "CIDR,CIDR"; NULL: none */
	const char *tag;        /* the state folder's tag, 8 hex */
	unsigned max_slots;
	unsigned min_ttl, max_ttl; /* of resolved addresses, seconds */
} sup_net_cfg;

/* Check cfg without touching anything (for the flags' errors). */
int sup_net_check_cfg(const sup_net_cfg *cfg, sbx_err *err);

/* Sweep an earlier run's leftovers, then make the router, its uplink, the
 * firewall and the resolver. Loop thread, before the workers run. */
sup_net *sup_net_new(struct event_base *base, const sup_net_cfg *cfg, sbx_err *err);
/* Stop the resolver (keep the loop running for a turn so its cancelled
 * queries end). */
void sup_net_stop(sup_net *n);
/* Remove everything (the slots must have been put back). */
void sup_net_free(sup_net *n);

/* Loop: a free slot (0: none; err says why). */
unsigned sup_net_slot_take(sup_net *n, sbx_err *err);
/* Loop or start-up: take that very slot (a sandbox of an earlier run
 * re-adopted keeps its slot, hence its addresses): -EBUSY when taken,
 * -EINVAL when out of range. Then plumb it as a new one: the earlier
 * run's router, and with it the sandbox's end of the link, went at
 * sup_net_new's sweep. */
int sup_net_slot_claim(sup_net *n, unsigned slot, sbx_err *err);
/* Worker: plumb slot into the namespace of pid (the sandbox's init). On
 * success *sb_nl is a netlink socket inside the sandbox's namespace, for
 * sup_net_slot_ready. On failure nothing of it is left. */
int sup_net_plumb(sup_net *n, unsigned slot, int pid, sup_rtnl **sb_nl, sbx_err *err);
/* Loop: the plumbed slot's firewall objects (rejecting everything); takes
 * sb_nl. */
int sup_net_slot_ready(sup_net *n, unsigned slot, sup_rtnl *sb_nl, sbx_err *err);
/* Loop: load policy p (copied) into a ready slot: new connections follow
 * it at once, established ones go on; addresses resolved under the old
 * policy are forgotten. */
int sup_net_apply(sup_net *n, unsigned slot, const sup_netpol *p, sbx_err *err);
/* Loop: the slot's policy (NULL: none loaded) and addresses. */
const sup_netpol *sup_net_policy(const sup_net *n, unsigned slot);
void sup_net_addresses(unsigned slot, char *v4, size_t v4_cap, char *v6, size_t v6_cap);
/* Loop: the sandbox goes: its rules reject everything at once; returns the
 * sandbox-side socket for sup_net_unplumb (may be NULL). */
sup_rtnl *sup_net_slot_release(sup_net *n, unsigned slot);
/* Worker: remove the slot's router link (the sandbox's end goes with it)
 * and close sb_nl. */
int sup_net_unplumb(sup_net *n, unsigned slot, sup_rtnl *sb_nl, sbx_err *err);
/* Loop: the slot is free again. */
void sup_net_slot_put(sup_net *n, unsigned slot);

#endif
