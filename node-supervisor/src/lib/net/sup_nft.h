/* The sandboxes' firewall: nftables in the router's network namespace.
 *
 * The fixed part (the table "sbx": hooks, the always-refused sets, the
 * vmap from a sandbox's link to its chain) is nft's own language, loaded
 * once through libnftables (sup_nft_run_text). The per-sandbox part (a
 * chain p<slot> and six sets of resolved addresses per slot) changes on
 * the acquire path and on every DNS answer, so it is built with libnftnl
 * and sent as one netlink batch, which the kernel applies atomically:
 * libnftables would first read back the whole ruleset, which grows with
 * every sandbox (3.7 ms per policy load at 200 sandboxes, measured).
 *
 * A slot's chain holds its policy in sup_netpol_compile's order: the
 * first rule that matches decides, the last one is the default action.
 * Until a policy is loaded (and after a reset) it rejects everything.
 * Loop thread only (one netlink socket); the socket acts in the namespace
 * it was opened in. It must not decide policy (sup_netpol does) nor
 * addresses or names (sup_net does). */
#ifndef SUP_NFT_H
#define SUP_NFT_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_netpol.h"

#define SUP_NFT_TABLE "sbx"
#define SUP_NFT_SET_SIZE 1024 /* resolved addresses per set and slot */

typedef struct sup_nft sup_nft;

/* Run an nft script through libnftables in the calling thread's current
 * namespace (one transaction). */
int sup_nft_run_text(const char *script, sbx_err *err);

/* The router's fixed table, in the calling thread's current namespace
 * (the router's). Sandbox links are "s<slot>", the uplink "up". */
typedef struct sup_nft_router {
	const char *gw4;      /* the resolver's address, on every sandbox link */
	const char *refused4; /* elements of the always-refused sets, "a, b/16, ..." */
	const char *refused6;
} sup_nft_router;
int sup_nft_router_table(const sup_nft_router *r, sbx_err *err);

/* With an interface for uplink: the node's table "<name>" that forwards
 * the router's link (peer) out of iface only, masquerading the router's
 * address (from4), and keeps it from the node itself. */
typedef struct sup_nft_host {
	const char *name;  /* the table, "sbx-<tag>" */
	const char *peer;  /* the router's link on the node's side */
	const char *iface; /* the uplink */
	const char *from4; /* the router's address on the link */
	const char *from6;
} sup_nft_host;
int sup_nft_host_table(const sup_nft_host *h, sbx_err *err);
/* Remove the table "name" of the current namespace; absent: 0. */
int sup_nft_table_remove(const char *name, sbx_err *err);

/* A netlink socket in the calling thread's current namespace. */
sup_nft *sup_nft_open(sbx_err *err);
void sup_nft_close(sup_nft *n);

/* The slot's chain (rejecting everything), its sets, and its link's entry
 * "s<slot>" in the table's vmap "slots". Idempotent. */
int sup_nft_slot_init(sup_nft *n, unsigned slot, sbx_err *err);
/* Replace the slot's rules with p's, and forget every resolved address. */
int sup_nft_slot_load(sup_nft *n, unsigned slot, const sup_netpol *p, sbx_err *err);
/* Back to rejecting everything, resolved addresses forgotten. */
int sup_nft_slot_reset(sup_nft *n, unsigned slot, sbx_err *err);
/* Addresses the resolver answered for a name (family 4: n x 4 bytes, 6:
 * n x 16) enter the slot's sets as v says, for ttl_s seconds (a second
 * answer renews them). */
int sup_nft_slot_admit(sup_nft *n, unsigned slot, int family, const uint8_t *addrs, size_t count,
		       const sup_netpol_name_verdict *v, unsigned ttl_s, sbx_err *err);

#endif
