/* The sandboxes' resolver: libevent's evdns on both sides. A server port
 * on the router's gateway address takes every sandbox's queries (the
 * firewall drops DNS to anywhere else); a name the asking sandbox's policy
 * lets out is resolved through the uplink's resolver, its addresses enter
 * the sandbox's firewall sets before the answer goes back, and anything
 * else is answered NXDOMAIN without a query leaving the node. So a sandbox
 * reaches an allowed name's addresses and no neighbour of them, and cannot
 * smuggle other names out through DNS.
 *
 * A and AAAA are resolved (CNAME chains come back flattened into the
 * question's name), other types of an allowed name are NOTIMPL. Answers'
 * TTLs are clamped to [min_ttl, max_ttl], for the client as for the
 * firewall. Queries waiting on the upstream are bounded in all and per
 * sandbox (beyond: SERVFAIL). Which sandbox asked and what its policy says
 * are the owner's (hooks): this module knows no slots. A socket filter
 * drops datagrams shorter than a DNS header before libevent reads them
 * (libevent 2.1 crashes on them). Loop thread only; the sockets are made
 * in the namespace the thread is in at sup_dns_new (the router's). */
#ifndef SUP_DNS_H
#define SUP_DNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sbx/err.h"
#include "sup_netpol.h"

struct event_base;
typedef struct sup_dns sup_dns;

typedef struct sup_dns_hooks {
	/* Who sent from `from` and what its policy says of name (normalised):
	 * 1 answer it (v filled, *who names the sandbox's policy as it is
	 * now), 0 refuse it (NXDOMAIN), < 0 a stranger (REFUSED). */
	int (*decide)(const struct sockaddr *from, const char *name, sup_netpol_name_verdict *v,
		      uint64_t *who, void *ud);
	/* The upstream answered: let the addresses in (before the answer goes).
	 * < 0: the answer becomes SERVFAIL (the sandbox or its policy changed
	 * since, or its sets are full). */
	int (*admit)(uint64_t who, int family, const uint8_t *addrs, size_t count,
		     const sup_netpol_name_verdict *v, unsigned ttl, void *ud);
	void *ud;
} sup_dns_hooks;

typedef struct sup_dns_cfg {
	unsigned min_ttl, max_ttl;     /* seconds */
	unsigned max_pending;          /* queries waiting on the upstream, in all */
	unsigned max_pending_each;     /* per sandbox */
	unsigned timeout_ms, attempts; /* of an upstream query */
} sup_dns_cfg;

/* server_fd: a bound UDP socket (taken over). upstream: the resolver the
 * allowed names go to (its socket is made here, in the thread's current
 * namespace). */
sup_dns *sup_dns_new(struct event_base *base, int server_fd, const struct sockaddr *upstream,
		     socklen_t upstream_len, const sup_dns_cfg *cfg, const sup_dns_hooks *hooks,
		     sbx_err *err);
/* Stop answering: the server port closes, queries waiting are cancelled
 * (their callbacks run on the loop's next turns; keep it running). */
void sup_dns_stop(sup_dns *d);
void sup_dns_free(sup_dns *d);

typedef struct sup_dns_stats {
	uint64_t answered, refused, failed;
	unsigned pending;
} sup_dns_stats;
void sup_dns_stats_get(const sup_dns *d, sup_dns_stats *out);

#endif
