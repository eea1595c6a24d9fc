/* rtnetlink requests of the egress plumbing, over libmnl: veth pairs,
 * links up, addresses, routes, link lookups and removal.
 *
 * A socket acts in the network namespace it was opened in (whatever the
 * thread's namespace when it is used), so open one per namespace: that is
 * how one thread configures the router's and a sandbox's ends. Each call is
 * one request answered by the kernel's ack: blocking, but the kernel answers
 * at once. One socket per thread at a time. It must not decide addresses
 * or names (sup_net does). */
#ifndef SUP_RTNL_H
#define SUP_RTNL_H

#include <stdbool.h>
#include <stdint.h>

#include "sbx/err.h"

typedef struct sup_rtnl sup_rtnl;

/* A socket in the calling thread's current network namespace. */
sup_rtnl *sup_rtnl_open(sbx_err *err);
void sup_rtnl_close(sup_rtnl *nl);

/* A veth pair: name here, peer in the namespace of peer_ns_fd (-1: here). */
int sup_rtnl_veth(sup_rtnl *nl, const char *name, const char *peer, int peer_ns_fd, sbx_err *err);
/* The index of a link, or -ENODEV. */
int sup_rtnl_ifindex(sup_rtnl *nl, const char *name, sbx_err *err);
/* Up, and without IPv6 link-local addresses (addr_gen_mode none: the
 * plumbing's addresses are static). */
int sup_rtnl_link_up(sup_rtnl *nl, int ifindex, sbx_err *err);
int sup_rtnl_link_nolinklocal(sup_rtnl *nl, int ifindex, sbx_err *err);
/* Remove a link by name (a veth takes its peer along); gone already: 0. */
int sup_rtnl_link_del(sup_rtnl *nl, const char *name, sbx_err *err);
/* family 4 or 6; IPv6 addresses without duplicate detection (usable at
 * once). */
int sup_rtnl_addr_add(sup_rtnl *nl, int ifindex, int family, const uint8_t *addr, unsigned prefix,
		      sbx_err *err);
/* A route to dst/prefix (prefix 0: the default route) through ifindex,
 * via gw (NULL: on the link). onlink: the gateway is on the link whatever
 * the addresses say. Replaces a route of the same destination. */
int sup_rtnl_route_add(sup_rtnl *nl, int ifindex, int family, const uint8_t *dst, unsigned prefix,
		       const uint8_t *gw, bool onlink, sbx_err *err);

#endif
