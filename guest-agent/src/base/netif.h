/* Network interfaces the agent sets up for itself: only loopback.
 * A fresh network namespace starts with "lo" down; as PID 1 the agent brings
 * it up so servers inside the sandbox can talk to themselves. Anything beyond
 * loopback is the supervisor's business, never the agent's. */
#ifndef AGENT_NETIF_H
#define AGENT_NETIF_H

#include "sbx/err.h"

/* Set IFF_UP on "lo". 0 if it is up (already or now); a negative errno
 * (-EPERM without CAP_NET_ADMIN) with err filled otherwise. */
int agent_netif_loopback_up(sbx_err *err);

#endif
