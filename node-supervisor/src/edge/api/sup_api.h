/* HTTP API bodies: parse and validate request JSON into plain structs,
 * render results and errors as JSON, map error codes to HTTP statuses.
 * Pure (jansson; msgpack for the agent's answers it renders): no I/O, no event loop, no knowledge of sandboxes
 * beyond the views handed in. Strict: unknown fields and wrong types are
 * errors (-EINVAL with a message naming the field). */
#ifndef SUP_API_H
#define SUP_API_H

#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "sbx/err.h"
#include "sbx/proto_args.h"
#include "sup_pool.h"
#include "sup_resources.h"
#include "sup_snaps.h"
#include "sup_types.h"
#include "sup_volumes.h"

#define SUP_API_MAX_ARGV 4096
#define SUP_API_MAX_ENV 4096
#define SUP_API_MAX_PATH 4096
#define SUP_API_MAX_SNAPSHOT_ID 64
#define SUP_API_MAX_EXEC_TIMEOUT_S (24.0 * 3600)
#define SUP_API_MAX_USER 64
#define SUP_API_MAX_OUTPUT (1ull << 30)
#define SUP_API_MAX_TAG 256

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

/* A string field's bytes (malloc'd into *data, *len): as they are, or
 * decoded from base64 (b64: the field is named field + "_b64"). */
int sup_api_parse_bytes(json_t *v, const char *field, bool b64, uint8_t **data, size_t *len, sbx_err *err);
/* A file mode as octal digits ("0644", "644"), at most 0777: 0, or -EINVAL. */
int sup_api_parse_mode(const char *s, uint64_t *mode);

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
/* A snapshot's "name" (NULL: none, ""): at most SUP_SNAPS_NAME_MAX bytes
 * without NUL, into out. */
int sup_api_parse_snapshot_name(const json_t *name, char out[SUP_SNAPS_NAME_MAX + 1], sbx_err *err);
/* "include_volumes" of a snapshot or fork (absent: false). */
int sup_api_parse_include_volumes(const json_t *v, bool *out, sbx_err *err);
/* A snapshot as /v1/snapshots shows it. */
json_t *sup_api_render_snapshot(const sup_snap_view *v);
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

/* A create's "secrets" ({"VAR": "secret-name"}: the tenant's secret as
 * variable VAR of the sandbox's commands; sup_api_secrets.c), and its
 * rendering in a view: [{"name", "env"}], never a value. */
int sup_api_parse_secret_binds(json_t *v, sup_secret_binds *out, sbx_err *err);
/* A create's "secret_files": {"FILE": "secret"}, each a file FILE of
 * SUP_SECRET_FILES_DIR; added to out beside "secrets". */
int sup_api_parse_secret_files(json_t *v, sup_secret_binds *out, sbx_err *err);
json_t *sup_api_render_secret_binds(const sup_secret_binds *b);
/* A volume as /v1/volumes shows it. */
json_t *sup_api_render_volume(const sup_volume_view *v);

/* The OpenAPI 3.1 document of this API (node-supervisor/openapi.json),
 * built in by cmake/embed.cmake (NUL-terminated): served as it is by
 * GET /v1/openapi.json, and the source of the MCP tools' input schemas. */
extern const char sup_openapi_json[];
extern const size_t sup_openapi_json_len;

/* Bytes p[0..n) at key as text; when they are not UTF-8 the text has
 * U+FFFD for what is not, and key_b64 the exact bytes. 0 or -1 (memory). */
int sup_api_set_bytes(json_t *o, const char *key, const char *p, size_t n);

/* ---- files (sup_api_files.c): the agent's answers ---- */

/* The agent's stat keys, checked: what every family's view of a file is
 * made from (this API's, and a compatibility family's own shape). */
typedef struct sup_api_stat {
	const char *type; /* "file", "dir", "symlink", "fifo", "socket", "char", "block", "other" */
	uint64_t size, mode, mtime_ns, uid, gid, nlink, ino; /* mode <= 07777, the rest <= 2^62 */
	const char *target; /* a symlink's target when the agent gave one (<= 4096 bytes) */
	size_t target_len;
} sup_api_stat;
/* -EPROTO when a key is missing, of the wrong type or out of range. */
int sup_api_stat_read(const msgpack_object *map, sup_api_stat *st, sbx_err *err);
/* Stat keys of an agent map -> JSON fields of o. -EPROTO as _read. */
int sup_api_stat_json(const msgpack_object *map, json_t *o, sbx_err *err);
/* fs.list / fs.search's "entries" (NULL with -EPROTO when not an array). */
const msgpack_object *sup_api_listing_entries(const msgpack_object *res, sbx_err *err);
/* One entry of a listing of folder base, checked: a relative path below the
 * folder (in normal form: an agent's "../x" would show a path outside it),
 * a name without '/' or NUL, its stat keys. path is base joined with it
 * (malloc'd, the caller's); name points into e. */
typedef struct sup_api_entry {
	char *path;
	const char *name;
	size_t name_len;
	sup_api_stat st;
} sup_api_entry;
int sup_api_entry_read(const char *base, const msgpack_object *e, sup_api_entry *out, sbx_err *err);
/* base (a normalised absolute path) joined with rel[0..rl) below it
 * (rl 0: base); malloc'd, NULL without memory. */
char *sup_api_path_join(const char *base, const char *rel, size_t rl);
/* fs.list / fs.search's result of folder base -> {"path", "entries":
 * [stat + "path", "name"], "count", "truncated"}; NULL with err (-EPROTO:
 * an entry that is not a relative path below base). */
json_t *sup_api_render_listing(const char *base, const msgpack_object *res, sbx_err *err);

/* ---- background processes (sup_api_procs.c, sup_api.c) ---- */

/* POST .../processes: the exec body plus "tag", "buffer" and "stdin" (a
 * bool: stdin stays open for POST .../stdin) into spec and the agent's
 * extra arguments (tag, buffer) into args. */
int sup_api_parse_process_start(json_t *j, sup_exec_spec *spec, sbx_proto_args *args, sbx_err *err);
/* An unsigned integer at key of an agent's map (at most max): 0, or -EPROTO. */
int sup_api_mp_uint(const msgpack_object *map, const char *key, uint64_t max, uint64_t *out,
		    sbx_err *err);
/* A process description from the agent, checked: what every family's view
 * of a process is made from. full: what proc.get adds (argv, pty, stdin,
 * output); want_pid > 0: it must be of that process. -EPROTO when it
 * breaks the protocol; tag and argv point into m. */
typedef struct sup_api_proc {
	uint64_t pid, started_ms;
	bool exited;
	const char *tag; /* NULL: none */
	size_t tag_len;
	/* exited */
	bool has_code;   /* exited with code (0..255), else killed by signal (1..64) */
	int code, signal;
	uint64_t ended_ms, duration_us;
	bool timed_out, oom_killed;
	/* full */
	bool full, pty, stdin_open;
	uint64_t out_start, out_end, out_buffer;
	const msgpack_object *argv; /* strings, at most SUP_API_MAX_ARGV */
} sup_api_proc;
int sup_api_proc_read(const msgpack_object *m, bool full, long want_pid, sup_api_proc *p,
		      sbx_err *err);
/* A process description from the agent as JSON; full adds what proc.get
 * tells. NULL with err when it breaks the protocol. want_pid > 0: it must
 * be of that process. */
json_t *sup_api_proc_json(const msgpack_object *m, bool full, long want_pid, sbx_err *err);
/* A proc.output event naming a gap (bytes the ring dropped) that must
 * start at off: 1 with *to (where the data goes on), 0 for an event that
 * is not a gap, or -EPROTO with err when it does not follow the data. */
int sup_api_gap_read(const msgpack_object *event, uint64_t off, uint64_t *to, sbx_err *err);
/* The end of proc.output: the description plus next_offset, which must be
 * off (where the data ended); NULL with err otherwise. */
json_t *sup_api_proc_end_json(const msgpack_object *result, long pid, uint64_t off, sbx_err *err);

#endif
