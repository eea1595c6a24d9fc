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
#include "sup_resources.h"
#include "sup_types.h"

#define SUP_API_MAX_ARGV 4096
#define SUP_API_MAX_ENV 4096
#define SUP_API_MAX_PATH 4096
#define SUP_API_MAX_EXEC_TIMEOUT_S (24.0 * 3600)
#define SUP_ID_MAX 48
#define SUP_API_MAX_USER 64
#define SUP_API_MAX_OUTPUT (1ull << 30)
/* How replies are dumped: compact, reals with 12 significant digits ("cpus":
 * 0.1, "cpu_seconds": 1.234567, not jansson's 17-digit 0.10000000000000001). */
#define SUP_API_JSON_DUMP (JSON_COMPACT | JSON_REAL_PRECISION(12))

typedef struct sup_api_limits {
	unsigned default_timeout_s; /* sandbox lifetime when none is given */
	unsigned max_timeout_s;
	sup_resources res_default;  /* limits when the request names none */
	sup_resources res_max;      /* the most a request may ask for */
} sup_api_limits;

typedef struct sup_create_req {
	char *image;          /* NULL: "host" */
	sup_isolation isolation; /* "isolation": runc (default) or gvisor */
	unsigned timeout_s;
	sup_env env;
	sup_resources resources; /* every figure set: the request's over the defaults */
	unsigned given;       /* what the request named: SUP_RES_* bits of resources,
			       * and SUP_CREATE_GIVEN_* (the rest is the tenant's to fill) */
} sup_create_req;
enum { SUP_CREATE_GIVEN_ISOLATION = 1u << 8, SUP_CREATE_GIVEN_TIMEOUT = 1u << 9 };

void sup_create_req_free(sup_create_req *r);

/* POST /v1/sandboxes. An empty body means all defaults. */
int sup_api_parse_create(const char *body, size_t len, const sup_api_limits *lim,
			 sup_create_req *out, sbx_err *err);
/* POST /v1/sandboxes/{id}/exec. */
int sup_api_parse_exec(const char *body, size_t len, sup_exec_spec *out, sbx_err *err);

/* A sandbox as the API shows it. */
typedef struct sup_sandbox_view {
	const char *id;
	const char *state;
	const char *image;
	sup_isolation isolation;
	time_t created_at;
	time_t expires_at;
	const char *reason;      /* state "failed": why; NULL otherwise */
	unsigned agent_streams;  /* calls open on the agent connection */
	unsigned agent_waiting;  /* requests waiting on the agent */
	size_t agent_queued;     /* bytes queued towards the agent */
	unsigned agent_timeouts; /* calls the agent let pass their deadline */
	sup_resources resources; /* in force */
	bool has_usage;          /* usage read (GET of one sandbox; lists leave it out) */
	sup_usage usage;
} sup_sandbox_view;

json_t *sup_api_render_sandbox(const sup_sandbox_view *v);
/* stdout/stderr: UTF-8 text; invalid sequences become U+FFFD and the exact
 * bytes are added as stdout_b64 / stderr_b64. */
json_t *sup_api_render_exec(const sup_exec_result *r);
/* A command whose agent let the supervisor's deadline pass: the timed-out
 * result (kill_confirmed false) with "error" {code agent_timeout, message}. */
json_t *sup_api_render_exec_timeout(const sup_exec_result *r, const char *message);
/* The end of a streamed exec: exit_code / signal, duration_ms, timed_out
 * and the byte counts streamed. */
json_t *sup_api_render_exit(const sup_exec_status *st, uint64_t out_bytes, uint64_t err_bytes);
json_t *sup_api_render_error(const char *code, const char *message);

/* Status and stable error code for a negative errno from the core:
 * EINVAL 400 bad_request, ENOENT 404 not_found, E2BIG 413 too_large,
 * EBUSY 409 conflict, EAGAIN 503 unavailable, ESHUTDOWN 503 shutting_down,
 * ECONNRESET/ECONNREFUSED/EPIPE/EPROTO 502 agent_error, ETIMEDOUT 504 timeout,
 * ETIME 504 agent_timeout (the agent let the supervisor's deadline pass),
 * ECANCELED 499 cancelled, EACCES/EPERM 403 forbidden, other 500 internal. */
int sup_api_status(int neg_errno, const char **code);

/* Sandbox ids: [a-z0-9-], 1..40 chars. */
bool sup_api_valid_id(const char *s);

#endif
