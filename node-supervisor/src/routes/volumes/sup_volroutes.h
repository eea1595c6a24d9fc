/* The volume routes: POST and GET /v1/volumes, GET and DELETE
 * /v1/volumes/{name}. Bodies are parsed by sup_api; the registry is the
 * core's (sup_volumes.h). Each tenant sees its own volumes by name; the
 * admin's list shows every tenant's, and ?tenant=NAME lets the admin name
 * another tenant's volume. It must not touch sandboxes or the catalog. */
#ifndef SUP_VOLROUTES_H
#define SUP_VOLROUTES_H

#include "sup_core.h"
#include "sup_http.h"

typedef struct sup_volroutes_ctx {
	sup_core *core;
} sup_volroutes_ctx;

extern const sup_http_family sup_volumes_family;

#endif
