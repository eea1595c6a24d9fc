/* What the Kubernetes backend does not offer, refused at the edge
 * (mounted before every other family with --backend kubernetes): the
 * routes whose work needs a local runc sandbox (snapshots and forks of its
 * writable layer, volumes bound into it, egress plumbing of its network
 * namespace, images of the local store) answer 501 not_implemented with a
 * JSON error naming the route, instead of half-working on a pod. Pause and
 * resume, limits other than the template's and a create naming volumes or
 * a snapshot are refused by the pools and the core the same way. It knows
 * routes only: nothing of pods or the core. */
#ifndef SUP_KUBEMODE_H
#define SUP_KUBEMODE_H

#include "sup_http.h"

extern const sup_http_family sup_kubemode_family;

#endif
