/* Node names and the sandbox ids that carry them: "sb-<tag>-<12 hex>", so
 * any supervisor of a cluster knows from an id alone which node holds the
 * sandbox (no lookup on the request's path). A node's name is what
 * Kubernetes calls it (a DNS-1123 subdomain, up to 253 bytes, dots
 * allowed); its tag is the short, URL-safe stand-in an id carries: the
 * name itself when it is 1..SUP_NODEID_TAG_MAX of [a-z0-9-] (so ids made
 * before tags existed, which carry that literal name, still name their
 * node), else the start of its first label and 8 base32 characters of
 * the name's SHA-256. A tag is derived from the name alone, so every
 * directory (the Leases, --peer) finds a node by its tag without storing
 * it; two names of one tag are the directory's to refuse.
 * Owns the id's format, the name's rules, the tag and the default name
 * from the host name. It must not know where a node is (the relay's
 * directory does). */
#ifndef SUP_NODEID_H
#define SUP_NODEID_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/err.h"

/* A DNS-1123 subdomain, as spec.nodeName may be. */
#define SUP_NODE_NAME_MAX 253
/* Short enough that an id stays within the runtime's 40 bytes:
 * 3 + 20 + 1 + 12 = 36. */
#define SUP_NODEID_TAG_MAX 20
#define SUP_NODEID_HEX 12
/* A hashed tag: up to this much of the first label, '-', the hash. */
#define SUP_NODEID_TAG_PREFIX 11
#define SUP_NODEID_TAG_HASH 8

/* 0, or -EINVAL with err saying what a node name must be. */
int sup_nodeid_name_check(const char *name, sbx_err *err);
/* This machine's host name as a node name: up to its first '.', lower
 * case, other bytes as '-', cut to SUP_NODEID_TAG_MAX ("node" if nothing
 * is left), so that its tag is itself (as before tags). out:
 * SUP_NODEID_TAG_MAX + 1 bytes. */
void sup_nodeid_default(char *out);
/* The tag of a valid node name (out: SUP_NODEID_TAG_MAX + 1 bytes). */
void sup_nodeid_tag(const char *name, char *out);
/* A new id of the node of this tag: "sb-<tag>-<12 random hex>". */
int sup_nodeid_make(const char *tag, char *out, size_t cap, sbx_err *err);
/* The tag an id carries (copied into tag, cap bytes): true; false for an
 * id of no node ("sb-<12 hex>" of an earlier version, or not an id). */
bool sup_nodeid_tag_of(const char *id, char *tag, size_t cap);

#endif
