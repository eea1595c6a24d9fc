/* sup_kubemode: routes refused with --backend kubernetes (sup_kubemode.h). */
#include <errno.h>

#include "sup_kubemode.h"

static int act_refuse(sup_http_req *r, void *state, sbx_err *err)
{
	(void)state;
	const sup_http_in *in = sup_http_input(r);
	return sbx_err_set(err, -ENOSYS,
			   "%s %s is not offered with --backend kubernetes: sandboxes are pods of a template "
			   "(node-supervisor/API.md, \"Kubernetes backend\")",
			   in->method, in->path);
}

#define NO(method, pattern, name) { method, pattern, name, SUP_BODY_NONE, 0, NULL, act_refuse }
/* an upload is refused before its body is read (a NONE body is read first) */
#define NO_UPLOAD(method, pattern, name) { method, pattern, name, SUP_BODY_STREAMED, 0, NULL, act_refuse }

static const sup_http_route routes[] = {
	NO("POST", "/v1/sandboxes/{id}/snapshots", "POST snapshots (kubernetes)"),
	NO("POST", "/v1/sandboxes/{id}/fork", "POST fork (kubernetes)"),
	NO("PATCH", "/v1/sandboxes/{id}/network", "PATCH network (kubernetes)"),
	NO("GET", "/v1/snapshots", "GET snapshots (kubernetes)"),
	NO("GET", "/v1/snapshots/{pid}", "GET snapshot (kubernetes)"),
	NO("DELETE", "/v1/snapshots/{pid}", "DELETE snapshot (kubernetes)"),
	NO("POST", "/v1/volumes", "POST volumes (kubernetes)"),
	NO("GET", "/v1/volumes", "GET volumes (kubernetes)"),
	NO("GET", "/v1/volumes/{pid}", "GET volume (kubernetes)"),
	NO("DELETE", "/v1/volumes/{pid}", "DELETE volume (kubernetes)"),
	NO_UPLOAD("POST", "/v1/images", "POST images (kubernetes)"),
	NO("DELETE", "/v1/images/{pid}", "DELETE image (kubernetes)"),
	NO("POST", "/opensandbox/v1/sandboxes/{id}/snapshots", "POST osbx snapshots (kubernetes)"),
	NO("GET", "/opensandbox/v1/snapshots", "GET osbx snapshots (kubernetes)"),
	NO("GET", "/opensandbox/v1/snapshots/{pid}", "GET osbx snapshot (kubernetes)"),
	NO("DELETE", "/opensandbox/v1/snapshots/{pid}", "DELETE osbx snapshot (kubernetes)"),
};

const sup_http_family sup_kubemode_family = {
	.name = "kubemode",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = 0,
};
