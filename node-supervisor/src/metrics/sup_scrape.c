/* sup_scrape: see sup_scrape.h. */
#include "sup_scrape.h"

#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>

static int act_metrics(sup_http_req *r, void *state, sbx_err *err)
{
	(void)state;
	sup_scrape_ctx *x = sup_http_ctx(r);
	const sup_tenant *who = sup_http_input(r)->who;
	if (!x->open && !who) {
		sup_http_header(r, "WWW-Authenticate", "Bearer realm=\"sbx\"");
		sup_http_json(r, 401, sup_http_error_json("unauthorized",
							  "missing or wrong Authorization: Bearer <token>"));
		return 0;
	}
	if (!x->open && !who->admin)
		return sbx_err_set(err, -EPERM, "only the admin tenant reads /metrics");
	sup_prom w;
	sup_prom_init(&w);
	sup_core_metrics(x->core, *x->tenants, &w);
	sup_prom_family(&w, "sbx_http_requests_total", "counter",
			"Answered HTTP requests by route and status.");
	sup_ctab_render(x->requests, &w, "sbx_http_requests_total");
	size_t len;
	const char *text = sup_prom_text(&w, &len);
	struct evbuffer *buf = text ? evbuffer_new() : NULL;
	if (!buf || evbuffer_add(buf, text, len) < 0) {
		if (buf)
			evbuffer_free(buf);
		sup_prom_release(&w);
		return sbx_err_set(err, -ENOMEM, "metrics: out of memory (or over %u bytes)",
				   SUP_PROM_MAX);
	}
	sup_prom_release(&w);
	sup_http_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	sup_http_start(r, 200, len);
	sup_http_write(r, buf);
	evbuffer_free(buf);
	sup_http_end(r);
	return 0;
}

static const sup_http_route routes[] = {
	{ "GET", "/metrics", "GET metrics", SUP_BODY_NONE, 0, NULL, act_metrics },
};

const sup_http_family sup_scrape_family = {
	.name = "metrics",
	.routes = routes,
	.nroutes = sizeof(routes) / sizeof(routes[0]),
	.state_size = 0,
};

sup_ctab *sup_scrape_requests_new(void)
{
	static const char *const labels[] = { "route", "status" };
	return sup_ctab_new(2, labels, SUP_SCRAPE_MAX_REQUEST_SERIES);
}

void sup_scrape_count(void *ud, const char *route, int status)
{
	char st[16];
	snprintf(st, sizeof(st), "%d", status);
	const char *v[] = { route, st };
	sup_ctab_add(ud, v, 1);
}
