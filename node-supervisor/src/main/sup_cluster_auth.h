/* Node-to-node authentication in a cluster (--kubeconfig,
 * --kube-in-cluster): the relay reviews the service-account token of every
 * relayed request it receives (the kube module's TokenReview, on the
 * relay's worker) and accepts only the supervisors' account
 * (--node-account), and sends this node's own token (--kube-token-file, or
 * the kube credentials') with every request it relays. Wiring only, for
 * main: the relay knows no Kubernetes, the kube module no relay. */
#ifndef SUP_CLUSTER_AUTH_H
#define SUP_CLUSTER_AUTH_H

#include "sbx/err.h"
#include "sup_cluster.h"
#include "sup_config.h"
#include "sup_relay.h"

struct event_base;

/* Set relay's node auth (sup_relay_node_auth) for the cluster cl: a token
 * file that cannot be read, or a reviewer that cannot be made, fails the
 * start. */
int sup_cluster_auth_wire(const sup_config *cfg, const sup_cluster *cl, sup_relay *relay,
			  struct event_base *base, sbx_err *err);

#endif
