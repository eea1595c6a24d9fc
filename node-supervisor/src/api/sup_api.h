/* HTTP API bodies: parse and validate request JSON into plain structs,
 * render results and errors as JSON, map error codes to HTTP statuses.
 * Pure (jansson only): no I/O, no event loop, no knowledge of sandboxes
 * beyond the views handed in. Strict: unknown fields and wrong types are
 * errors (-EINVAL with a message naming the field). */
#ifndef SUP_API_H
#define SUP_API_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "sbx/err.h"
#include "sup_pool.h"
#include "sup_resources.h"
#include "sup_types.h"
#include "sup_volumes.h"

#define SUP_API_MAX_ARGV 4096
#define SUP_API_MAX_ENV 4096
#define SUP_API_MAX_PATH 4096
#define SUP_API_MAX_EXEC_TIMEOUT_S (24.0 * 3600)
#define SUP_API_MAX_USER 64
#define SUP_API_MAX_OUTPUT (1ull << 30)

typedef struct sup_api_limits {
	unsigned default_timeout_s; /* sandbox lifetime when none is given */
	unsigned max_timeout_s;
	sup_resources res_default;  /* limits when the request names none */
	sup_resources res_max;      /* the most a request may ask for */
} sup_api_limits;

/* POST /v1/sandboxes. An empty body means all defaults. */
int sup_api_parse_create(const char *body, size_t len, const sup_api_limits *lim,
			 sup_create_req *out, sbx_err *err);
/* POST /v1/sandboxes/{id}/timeout: {"timeout": seconds} and nothing else,
 * 1..lim->max_timeout_s. */
int sup_api_parse_timeout(const char *body, size_t len, const sup_api_limits *lim, unsigned *out,
			  sbx_err *err);
/* POST /v1/sandboxes/{id}/exec. */
int sup_api_parse_exec(const char *body, size_t len, sup_exec_spec *out, sbx_err *err);
/* The same from a loaded object, leaving the keys in skip (NULL-terminated,
 * or NULL) to the caller: POST .../processes adds its own. */
int sup_api_parse_exec_obj(json_t *obj, const char *const *skip, sup_exec_spec *out, sbx_err *err);

/* One MCP server as in "mcp.servers" (PUT /v1/sandboxes/{id}/mcp/{name}). */
int sup_api_parse_mcp_server(const char *name, json_t *v, sup_mcp_server *out, sbx_err *err);

json_t *sup_api_render_sandbox(const sup_sandbox_view *v);
/* stdout/stderr: UTF-8 text; invalid sequences become U+FFFD and the exact
 * bytes are added as stdout_b64 / stderr_b64. A result the supervisor made
 * up when the agent let its deadline pass (st.kill_unconfirmed) says
 * "kill_confirmed": false; the route adds its "error". */
json_t *sup_api_render_exec(const sup_exec_result *r);
/* The end of a streamed exec: exit_code / signal, duration_ms, timed_out
 * and the byte counts streamed. */
json_t *sup_api_render_exit(const sup_exec_status *st, uint64_t out_bytes, uint64_t err_bytes);
/* A pool as GET /v1/pools and PUT /v1/pools/{image} show it. */
json_t *sup_api_render_pool(const sup_pool_stats *s);

/* ---- volumes (sup_api_volumes.c) ---- */

/* POST /v1/volumes: {"name": "proj", "size": "2G"} (size a size string or
 * a byte count), both required, nothing else. */
int sup_api_parse_volume_create(const char *body, size_t len, char *name, size_t name_cap,
				uint64_t *size, sbx_err *err);
/* A create's "volumes": [{"name", "mount", "read_only"}] (read_only
 * optional, false), each checked by sup_volspec and the list as a whole. */
int sup_api_parse_volume_mounts(json_t *v, sup_vol_mounts *out, sbx_err *err);
/* [{"name", "mount", "read_only"}], as a create names them. */
json_t *sup_api_render_volume_mounts(const sup_vol_mount *m, size_t n);
/* A volume as /v1/volumes shows it. */
json_t *sup_api_render_volume(const sup_volume_view *v);

#endif
