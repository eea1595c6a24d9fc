/* sup_nodes: GET /v1/nodes (sup_nodes.h). */
#include <errno.h>
#include <stdlib.h>
#include <time.h>

#include "sup_nodes.h"
#include "sup_tenants.h"
#include "sup_text.h"

static json_t *node_json(const sup_kube_node *n)
{
	char renewed[32];
	sup_rfc3339(n->renewed, renewed, sizeof(renewed));
	json_t *ready = json_object();
	for (size_t i = 0; ready && i < n->cap.nimages; i++)
		json_object_set_new(ready, n->cap.images[i].image, json_integer(n->cap.images[i].ready));
	return json_pack("{s:s,s:s,s:s,s:s,s:i,s:b,s:o?,s:i}", "name", n->name, "tag", n->tag,
			 "url", n->url, "renewed_at", renewed, "lease_seconds", (int)n->duration_s, "live",
			 n->live, "ready", ready, "leased",
			 (int)n->cap.leased);
}

static int act_list(sup_http_req *r, void *state, sbx_err *err)
{
	(void)state;
	const sup_nodes_ctx *x = sup_http_ctx(r);
	const sup_tenant *who = sup_http_input(r)->who;
	if (!who->admin)
		return sbx_err_set(err, -EPERM, "only the admin tenant reads the node directory");
	sup_kube *k = *x->kube;
	if (!k)
		return sbx_err_set(err, -ENOENT,
				   "this supervisor is not in a cluster (start it with --kubeconfig or --kube-in-cluster)");
	sup_kube_node *v;
	size_t n;
	if (sup_kube_nodes_list(k, &v, &n) < 0)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	json_t *nodes = json_array();
	for (size_t i = 0; nodes && i < n; i++)
		json_array_append_new(nodes, node_json(&v[i]));
	free(v);
	sup_kube_stats st;
	sup_kube_get_stats(k, &st);
	json_t *body = json_pack(
		"{s:s,s:o?,s:{s:b,s:I,s:I,s:I,s:I,s:I,s:I}}", "self", sup_kube_self(k), "nodes", nodes,
		"kube", "connected", st.connected, "leases_renewed", (json_int_t)st.leases_renewed,
		"events_sent", (json_int_t)st.events_sent, "events_dropped",
		(json_int_t)st.events_dropped, "events_queued", (json_int_t)st.events_queued,
		"watch_resumes", (json_int_t)st.watch_resumes, "relists", (json_int_t)st.relists);
	if (!body)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	sup_http_json(r, 200, body);
	return 0;
}

static const sup_http_route routes[] = {
	{ "GET", "/v1/nodes", "GET nodes", SUP_BODY_NONE, 0, NULL, act_list },
};

const sup_http_family sup_nodes_family = {
	.name = "nodes",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = 0,
};
