/* The API's JSON shape of an egress policy (OpenSandbox's networkPolicy):
 *   {"default_action": "deny"|"allow",
 *    "egress": [{"action": "allow"|"deny", "target": "..."}, ...]}
 * Parsing is strict (unknown fields, wrong types, a bad target: -EINVAL
 * naming the field); rendering gives the targets in their canonical form.
 * Pure (jansson only); the rules themselves are sup_netpol's. */
#ifndef SUP_NETPOL_JSON_H
#define SUP_NETPOL_JSON_H

#include <jansson.h>

#include "sbx/err.h"
#include "sup_netpol.h"

/* v: the "network" value. On success *out is initialised and owned by the
 * caller (sup_netpol_free); on failure nothing is left to free. */
int sup_netpol_from_json(json_t *v, sup_netpol *out, sbx_err *err);
/* A whole request body that is the policy (PATCH .../network). */
int sup_netpol_parse(const char *body, size_t len, sup_netpol *out, sbx_err *err);
json_t *sup_netpol_to_json(const sup_netpol *p);

#endif
