/* A sandbox's egress policy: its rules, parsed and checked, and what they
 * decide. Pure: no I/O, no JSON (sup_netpol_json reads and writes the API's
 * shape), no kernel state. The firewall (sup_nft) and the resolver
 * (sup_dns) act on what this module decides; it must not know how.
 *
 * Targets: a host name ("pkgs.example.com"), a wildcard ("*.example.com":
 * every name below it, not the name itself), an IPv4 or IPv6 address or
 * network ("10.20.0.0/16", "2001:db8::/32"), each with an optional port
 * ("example.com:443", "10.0.0.0/8:22", "[2001:db8::1]:443",
 * "[2001:db8::/32]:443"). A port matches TCP and UDP; a rule without one
 * matches every protocol.
 *
 * The most specific rule wins:
 * - A connection's address: the rule of the longest prefix that matches
 *   (an address is /32 or /128); at the same prefix, a rule with a port
 *   before one without; at the same prefix and port, deny before allow.
 *   Addresses the resolver answered for a name count as rules of full
 *   prefix (/32, /128) with the ports the name's rules give (below), for
 *   the answer's TTL. Nothing matches: the default action.
 * - A name's rules: an exact name before any wildcard, a wildcard of more
 *   labels before one of fewer; with the same pattern, a rule with a port
 *   before one without. The name's most specific rule without a port (or
 *   the default action when none matches) decides every port but those
 *   that a rule with a port at least as specific decides. The resolver
 *   answers a name that some port allows; its addresses then enter the
 *   firewall as the rules above: allowed on every port (an explicit
 *   portless allow) or on the ports allowed, denied on the ports denied.
 *   A default "allow" answers the name but adds no rule of its own, so it
 *   never lifts an explicit address deny. */
#ifndef SUP_NETPOL_H
#define SUP_NETPOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"

#define SUP_NETPOL_MAX_RULES 256
#define SUP_NETPOL_NAME_MAX 253
#define SUP_NETPOL_TARGET_MAX 300 /* a target's text, bytes */

typedef enum sup_netpol_action { SUP_NETPOL_DENY = 0, SUP_NETPOL_ALLOW = 1 } sup_netpol_action;

typedef enum sup_netpol_kind {
	SUP_NETPOL_HOST,     /* an exact name */
	SUP_NETPOL_WILDCARD, /* names below a suffix */
	SUP_NETPOL_NET4,
	SUP_NETPOL_NET6,
} sup_netpol_kind;

typedef struct sup_netpol_rule {
	sup_netpol_action action;
	sup_netpol_kind kind;
	uint16_t port;    /* 0: every port (and protocols without ports) */
	uint8_t prefix;   /* NET4 0..32, NET6 0..128 */
	uint8_t labels;   /* HOST / WILDCARD: labels of name */
	uint8_t addr[16]; /* NET4 / NET6: the network, host bits zero (NET4: 4 bytes) */
	char *name;       /* HOST: the name; WILDCARD: the suffix after "*."; lower case, no final dot */
} sup_netpol_rule;

typedef struct sup_netpol {
	sup_netpol_action default_action;
	size_t n;
	sup_netpol_rule *rules; /* in the order given */
} sup_netpol;

void sup_netpol_init(sup_netpol *p, sup_netpol_action default_action);
void sup_netpol_free(sup_netpol *p);
/* Deep copy into dst (initialised by it). 0 or -ENOMEM. */
int sup_netpol_copy(const sup_netpol *src, sup_netpol *dst);
/* The policy as text to keep (the catalog's column) and back: the API's
 * JSON shape (sup_netpol_json.c), so a module that must not know JSON (the
 * core) can store and load one. to_text: malloc'd, NULL out of memory;
 * from_text: as sup_netpol_parse. */
char *sup_netpol_to_text(const sup_netpol *p);
int sup_netpol_from_text(const char *text, sup_netpol *out, sbx_err *err);

/* Parse one target into r (r->name allocated for names; free with
 * sup_netpol_rule_free). -EINVAL with a message naming what is wrong. */
int sup_netpol_parse_target(const char *target, sup_netpol_rule *r, sbx_err *err);
void sup_netpol_rule_free(sup_netpol_rule *r);
/* The target in its canonical text (as rendered back). Returns its length,
 * or -ENOSPC. */
int sup_netpol_format_target(const sup_netpol_rule *r, char *buf, size_t cap);

/* Append a rule; a target given twice (after normalising: case, a final
 * dot, "/32") or more than SUP_NETPOL_MAX_RULES rules is -EINVAL. */
int sup_netpol_add(sup_netpol *p, sup_netpol_action action, const char *target, sbx_err *err);

/* A DNS name as the resolver and the rules compare it: lower case, one
 * final dot dropped, labels of 1..63 of [a-z0-9_-], at most 253 bytes, the
 * last label not all digits. Returns its label count, or -EINVAL. */
int sup_netpol_norm_name(const char *in, char *out, size_t cap);

/* What the rules say of one (normalised) name. */
typedef struct sup_netpol_name_verdict {
	bool answer;    /* the resolver answers it */
	bool allow_all; /* its addresses allowed on every port (but deny[]) */
	size_t n_allow, n_deny;
	uint16_t allow[SUP_NETPOL_MAX_RULES]; /* ports its addresses are allowed on */
	uint16_t deny[SUP_NETPOL_MAX_RULES];  /* ports its addresses are denied on */
} sup_netpol_name_verdict;

void sup_netpol_name(const sup_netpol *p, const char *norm_name, sup_netpol_name_verdict *v);

/* The firewall's order: one entry per address rule, plus the resolver's
 * sets of each family at full prefix, most specific first. The firewall
 * tries them in this order and the first that matches decides; nothing
 * matched, the default action. */
typedef enum sup_netpol_set {
	SUP_NETPOL_SET_NONE,       /* an address rule */
	SUP_NETPOL_SET_ALLOW,      /* answered addresses allowed on every port */
	SUP_NETPOL_SET_ALLOW_PORT, /* (address, port) allowed */
	SUP_NETPOL_SET_DENY_PORT,  /* (address, port) denied */
} sup_netpol_set;

typedef struct sup_netpol_entry {
	uint8_t family;           /* 4 or 6 */
	uint8_t prefix;
	bool has_port;
	sup_netpol_action action;
	sup_netpol_set set;
	const sup_netpol_rule *rule; /* SET_NONE: the rule */
} sup_netpol_entry;

#define SUP_NETPOL_SETS_PER_FAMILY 3
/* Fills out (room for p->n + 2 * SUP_NETPOL_SETS_PER_FAMILY entries);
 * returns how many. */
size_t sup_netpol_compile(const sup_netpol *p, sup_netpol_entry *out);

/* The decision for a connection to addr (family 4: 4 bytes, 6: 16) on port
 * (0: a protocol without ports), as the firewall takes it when the
 * resolver answered addr for `name` (NULL: it did not). For tests and for
 * the documentation's examples: the firewall itself runs the compiled
 * entries. */
sup_netpol_action sup_netpol_decide(const sup_netpol *p, int family, const uint8_t *addr,
				    uint16_t port, const char *name);

#endif
