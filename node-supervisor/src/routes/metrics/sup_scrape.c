/* sup_scrape: see sup_scrape.h. */
#include "sup_scrape.h"

#include <errno.h>
#include <event2/buffer.h>
#include <stdio.h>

#include "sup_snaps.h"

/* The store's figures: gauges of now (a folder read: a few hundred layers
 * at most), and what the GC gave back since start. */
static void store_metrics(sup_img_store *s, sup_prom *w)
{
	uint64_t bytes, gc_bytes, gc_layers;
	unsigned layers = sup_img_store_layers(s, &bytes);
	sup_img_store_gc_totals(s, &gc_bytes, &gc_layers);
	sup_prom_family(w, "sbx_images", "gauge", "Images in the store.");
	sup_prom_sample(w, "sbx_images", NULL, (double)sup_img_store_count(s));
	sup_prom_family(w, "sbx_image_layers", "gauge", "Unpacked layers in the store.");
	sup_prom_sample(w, "sbx_image_layers", NULL, (double)layers);
	sup_prom_family(w, "sbx_image_store_bytes", "gauge",
			"File data of the store's layers, in bytes.");
	sup_prom_sample(w, "sbx_image_store_bytes", NULL, (double)bytes);
	sup_prom_family(w, "sbx_image_gc_layers_total", "counter",
			"Layers no image used, removed by the GC.");
	sup_prom_sample(w, "sbx_image_gc_layers_total", NULL, (double)gc_layers);
	sup_prom_family(w, "sbx_image_gc_bytes_total", "counter",
			"File data of the layers the GC removed, in bytes.");
	sup_prom_sample(w, "sbx_image_gc_bytes_total", NULL, (double)gc_bytes);
}

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
	if (x->store)
		store_metrics(x->store, &w);
	if (x->snaps)
		sup_snaps_metrics(x->snaps, &w);
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
