/* sup_cluster_auth: the relay's node auth wired to the kube module
 * (sup_cluster_auth.h). */
#include <stdio.h>

#include "sup_cluster_auth.h"
#include "sup_kube_review.h"
#include "sup_log.h"

/* The supervisors' ServiceAccount (daemonset/rbac.yaml). */
#define NODE_SA "sbx-supervisor"
/* One review's deadline: a request waits for it at most this. */
#define REVIEW_MS 5000

static void reviewer_free(void *ud)
{
	sup_kube_review_free(ud);
}

int sup_cluster_auth_wire(const sup_config *cfg, const sup_cluster *cl, sup_relay *relay,
			  struct event_base *base, sbx_err *err)
{
	const sup_kube_cfg *kc = sup_cluster_kube_cfg(cl);
	char account[256];
	snprintf(account, sizeof(account), "%s", cfg->node_account ? cfg->node_account : "");
	if (!cfg->node_account)
		snprintf(account, sizeof(account), "system:serviceaccount:%s:" NODE_SA,
			 sup_cluster_namespace(cl));
	sup_kube_review *rv = sup_kube_review_new(kc, REVIEW_MS, err);
	if (!rv)
		return sbx_err_wrap(err, "token review");
	sup_relay_auth *auth = sup_relay_auth_new(base, sup_kube_review_token, rv, reviewer_free,
						  account, err);
	if (!auth)
		return err->code;
	const char *file = cfg->kube_token_file ? cfg->kube_token_file
			   : kc->token_file[0]  ? kc->token_file
						: NULL;
	const char *token = file ? NULL : kc->token.p;
	if (sup_relay_node_auth(relay, auth, file, token, err) < 0)
		return sbx_err_wrap(err, "--kube-token-file");
	if (!relay->node_token)
		sup_warn("relay: this node has no service-account token (its kube credentials are a "
			 "certificate; give --kube-token-file): the requests it relays carry none, and "
			 "its peers refuse them");
	sup_info("relay: relayed requests need a node token of %s (TokenReview)%s", account,
		 relay->key ? " and the cluster key" : "");
	return 0;
}
