/* sup_openapi: see sup_openapi.h. */
#include "sup_openapi.h"

#include <errno.h>
#include <event2/buffer.h>

#include "sup_api.h"

static int act_get(sup_http_req *r, void *state, sbx_err *err)
{
	(void)state;
	struct evbuffer *buf = evbuffer_new();
	/* By reference: the document lives as long as the binary. */
	if (!buf || evbuffer_add_reference(buf, sup_openapi_json, sup_openapi_json_len, NULL, NULL) < 0) {
		if (buf)
			evbuffer_free(buf);
		return sbx_err_set(err, -ENOMEM, "openapi: out of memory");
	}
	sup_http_header(r, "Content-Type", "application/json");
	sup_http_start(r, 200, sup_openapi_json_len);
	sup_http_write(r, buf);
	evbuffer_free(buf);
	sup_http_end(r);
	return 0;
}

static const sup_http_route routes[] = {
	{ "GET", "/v1/openapi.json", "GET openapi", SUP_BODY_NONE, 0, NULL, act_get },
};

const sup_http_family sup_openapi_family = {
	.name = "openapi",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = 0,
};
