/* What sup_net.c and sup_net_cfg.c share: the settings' readings the
 * plumbing uses. Nothing outside these files includes this; the interface
 * is sup_net.h. */
#ifndef SUP_NET_INT_H
#define SUP_NET_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>

#include "sup_net.h"

#define REFUSED_MAX 16384 /* bytes of each refused set's text */

/* The uplink names a network namespace ("netns:NAME" or a path), not an
 * interface. */
bool sup_net_is_netns_spec(const char *u);
/* The resolver the sandboxes' DNS asks: --dns, or the uplink's
 * resolv.conf's first nameserver. */
int sup_net_upstream_of(const sup_net_cfg *cfg, struct sockaddr_storage *ss, socklen_t *len,
			sbx_err *err);
/* Append the --deny-cidrs of one family to a refused set's text. */
int sup_net_add_deny_cidrs(const char *list, int family, char *out, size_t cap, sbx_err *err);
/* The node's own addresses (the API's among them), as set elements. */
int sup_net_node_addresses(int family, char *out, size_t cap, sbx_err *err);

#endif
