/* Node names and the sandbox ids that carry them: "sb-<node>-<12 hex>", so
 * any supervisor of a cluster knows from an id alone which node holds the
 * sandbox (no lookup on the request's path). Owns the id's format, the
 * node name's rules (1..SUP_NODE_NAME_MAX of [a-z0-9-], no '-' at either
 * end) and the default name from the host name. It must not know where a
 * node is (the relay's directory does). */
#ifndef SUP_NODEID_H
#define SUP_NODEID_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/err.h"

/* Short enough that an id stays within the runtime's 40 bytes:
 * 3 + 20 + 1 + 12 = 36. */
#define SUP_NODE_NAME_MAX 20
#define SUP_NODEID_HEX 12

/* 0, or -EINVAL with err saying what a node name must be. */
int sup_nodeid_name_check(const char *name, sbx_err *err);
/* This machine's host name as a node name: up to its first '.', lower
 * case, other bytes as '-', cut to SUP_NODE_NAME_MAX ("node" if nothing
 * is left). out: SUP_NODE_NAME_MAX + 1 bytes. */
void sup_nodeid_default(char *out);
/* A new id of node: "sb-<node>-<12 random hex>". */
int sup_nodeid_make(const char *node, char *out, size_t cap, sbx_err *err);
/* The node an id names (copied into node, cap bytes): true; false for an
 * id of no node ("sb-<12 hex>" of an earlier version, or not an id). */
bool sup_nodeid_node(const char *id, char *node, size_t cap);

#endif
