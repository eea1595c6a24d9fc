/* HTTP API server on libevent's evhttp: the route table, bearer-token
 * authentication, request bodies (bounded), and JSON replies. Handlers are
 * thin: parse and validate (sup_api) -> call the core -> render. A request
 * waiting on the core is withdrawn (sup_op_cancel) when its client hangs
 * up. It must not touch sandboxes, pools or agents except through the core. */
#ifndef SUP_HTTP_H
#define SUP_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_api.h"
#include "sup_core.h"
#include "sup_files.h"

struct event_base;
typedef struct sup_http sup_http;

typedef struct sup_http_cfg {
	const char *host;
	uint16_t port;        /* 0: any free port; see sup_http_port */
	sup_tenants *const *tenants; /* the set in force (main swaps it on SIGHUP) */
	size_t max_body;
	sup_api_limits limits;
	sup_files *files;     /* the file API; NULL: its routes answer 501 */
} sup_http_cfg;

sup_http *sup_http_new(struct event_base *base, sup_core *core, const sup_http_cfg *cfg,
		       sbx_err *err);
uint16_t sup_http_port(const sup_http *h);
/* Close the listening socket and answer requests still waiting with 503. */
void sup_http_stop(sup_http *h);
void sup_http_free(sup_http *h);

/* Route matching, exposed for unit tests. Returns the index of the route
 * whose pattern matches path and method (>= 0), -ENOENT when no pattern
 * matches the path, -EPERM when one matches the path but not the method
 * (allow gets the methods that would, e.g. "GET, DELETE"). id receives a
 * {id} segment. */
int sup_http_route(const char *method, const char *path, char *id, size_t id_size, char *allow,
		   size_t allow_size);

#endif
