/* Scope-bound release of a jansson value (as sbx/cleanup.h does for memory
 * and fds): SBX_AUTO_JSON json_t *j = ...; drops the reference on every
 * path; hand it on with sbx_steal_ptr. Header only, for jansson's users: it
 * adds no link dependency to common/. */
#ifndef SBX_JSON_AUTO_H
#define SBX_JSON_AUTO_H

#include <jansson.h>

static inline void sbx_json_cleanup(json_t **j)
{
	if (*j)
		json_decref(*j);
}
#define SBX_AUTO_JSON __attribute__((cleanup(sbx_json_cleanup)))

#endif
