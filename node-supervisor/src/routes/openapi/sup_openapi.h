/* GET /v1/openapi.json: the OpenAPI 3.1 document of this API
 * (node-supervisor/openapi.json), built into the binary by
 * cmake/embed.cmake (sup_api.h: sup_openapi_json), served as it is kept
 * in the repository. It owns that
 * one answer; it must not build or change the document at run time (so
 * the file, its test and the answer never differ). */
#ifndef SUP_OPENAPI_H
#define SUP_OPENAPI_H

#include <stddef.h>

#include "sup_http.h"

extern const sup_http_family sup_openapi_family;

#endif
