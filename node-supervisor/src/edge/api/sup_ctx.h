/* Code contexts: live interpreters (python, javascript, bash) in a sandbox,
 * each keeping its state from one cell to the next. The engine every door
 * to them shares: the contexts routes (routes/contexts), the MCP tool
 * run_code, and the compatibility layers to come.
 *
 * A context is one session (sup_agent_mcp.h) on the sandbox's context
 * driver, /usr/lib/sbx/sbx-ctx LANGUAGE in the image (images/ctx/), which the
 * agent runs as it runs an MCP server: a stdio process of JSON lines, as the
 * sandbox's user in its jail and limits, with one spare started ahead (a
 * warm interpreter). The driver's server is configured on the agent when a
 * sandbox's first context of a language is made and removed with its last.
 * What the driver says is checked here (sup_ctx_msg.c: shapes, sizes) and
 * turned into events: "stdout"/"stderr" {"text"}, "result" {"main","data":
 * {mime: text}}, "error" {"name","value","traceback"}. The default context
 * of a language has that language as its id and is made by its first run.
 *
 * Life: starting (configure, open, the driver's init with cwd and env),
 * ready, running (one cell at a time: another is 409), dead (the driver or
 * its interpreter ended: -EOWNERDEAD, context_died, with the reason, OOM
 * said; a restart revives it). A cell past its timeout is interrupted; one
 * still running SUP_CTX_GRACE_MS later gets its context restarted (state
 * lost, said in the answer). A context goes with its sandbox (its session
 * ends with the agent's connection). Bounds: SUP_CTX_MAX per sandbox; a
 * collected cell's output at max_output bytes (then "truncated"); a
 * streamed one holds the driver back while the client does not read.
 * It must not know HTTP: the routes own requests and renderings of
 * errors. Loop thread only. */
#ifndef SUP_CTX_H
#define SUP_CTX_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sup_core.h"

struct event_base;

#define SUP_CTX_MAX 16                 /* contexts per sandbox */
#define SUP_CTX_DRIVER "/usr/lib/sbx/sbx-ctx"
#define SUP_CTX_ID_MAX 32              /* "ctx-" and 24 hex, or a language */
#define SUP_CTX_CWD_MAX 4096
#define SUP_CTX_ENV_MAX 256            /* variables of a context's env */
#define SUP_CTX_CODE_MAX (4u << 20)    /* one cell's code */
#define SUP_CTX_DEFAULT_TIMEOUT_MS 300000u
#define SUP_CTX_MAX_TIMEOUT_MS 86400000u
#define SUP_CTX_START_MS 120000u       /* configure, open and init */
#define SUP_CTX_GRACE_MS 3000u         /* after the interrupt of a late cell */

typedef enum sup_ctx_lang {
	SUP_CTX_PYTHON = 0,
	SUP_CTX_JAVASCRIPT,
	SUP_CTX_BASH,
	SUP_CTX_NLANG,
} sup_ctx_lang;

/* "python" -> SUP_CTX_PYTHON; -1 for anything else. */
int sup_ctx_lang_of(const char *s);
const char *sup_ctx_lang_name(sup_ctx_lang l);

/* POST /v1/sandboxes/{id}/contexts: {"language", "cwd", "env"}. */
typedef struct sup_ctx_spec {
	sup_ctx_lang lang;
	char *cwd;   /* NULL: the sandbox's default */
	json_t *env; /* an object of strings, or NULL */
} sup_ctx_spec;

/* POST .../contexts/{ctx}/run: {"code", "timeout"} (seconds). */
typedef struct sup_ctx_cell {
	char *code;
	uint64_t timeout_ms;
} sup_ctx_cell;

/* Pure parsers (sup_api_ctx.c): strict, -EINVAL naming the field. */
int sup_ctx_parse_spec(const char *body, size_t len, sup_ctx_spec *out, sbx_err *err);
int sup_ctx_parse_cell(const char *body, size_t len, sup_ctx_cell *out, sbx_err *err);
/* The same from a loaded object (the MCP tool's arguments, less skip). */
int sup_ctx_parse_cell_obj(json_t *o, const char *const *skip, sup_ctx_cell *out, sbx_err *err);
/* A {ctx} path segment: "ctx-" and hex, or a language's name. */
bool sup_ctx_id_ok(const char *s);
void sup_ctx_spec_free(sup_ctx_spec *s);
void sup_ctx_cell_free(sup_ctx_cell *c);

typedef struct sup_ctx_engine sup_ctx_engine;
typedef struct sup_ctx_wait sup_ctx_wait;
typedef struct sup_ctx_run sup_ctx_run;

/* max_output: a collected cell's bytes (0: 16 MiB). */
sup_ctx_engine *sup_ctx_engine_new(struct event_base *base, sup_core *core, size_t max_output);
/* Every session cancelled, every waiter and run dropped without a call. */
void sup_ctx_engine_free(sup_ctx_engine *e);

/* A create or restart's end: rc 0 with the context as JSON (borrowed:
 * incref to keep it), else err. */
typedef void (*sup_ctx_ready_cb)(int rc, json_t *ctx, const sbx_err *err, void *ud);

/* Make a context (spec consumed, also on failure). 0 with *w (cb will
 * run), or < 0 with err: -ENOENT no such sandbox, -EBUSY SUP_CTX_MAX. cb
 * may fail with -ENOEXEC (the image cannot run the language: the driver's
 * words), -EINVAL (cwd or env refused inside), -ETIMEDOUT. */
int sup_ctx_create(sup_ctx_engine *e, const char *sid, sup_ctx_spec *spec, sup_ctx_ready_cb cb, void *ud,
		   sup_ctx_wait **w, sbx_err *err);
/* A new interpreter for the context (its cwd and env again); a running
 * cell ends with -ECANCELED. */
int sup_ctx_restart(sup_ctx_engine *e, const char *sid, const char *ctx, sup_ctx_ready_cb cb, void *ud,
		    sup_ctx_wait **w, sbx_err *err);
/* The waiter's caller went: cb will not run; the context goes on. */
void sup_ctx_wait_cancel(sup_ctx_wait *w);

/* {"contexts": [...]}: sandbox sid's, oldest first. */
json_t *sup_ctx_list(sup_ctx_engine *e, const char *sid);
json_t *sup_ctx_get(sup_ctx_engine *e, const char *sid, const char *ctx, sbx_err *err);
/* Its interpreter killed, the context forgotten; a cell running ends with
 * -ECANCELED. -ENOENT. */
int sup_ctx_delete(sup_ctx_engine *e, const char *sid, const char *ctx, sbx_err *err);
/* SIGINT to a running cell (state kept); *running says whether one ran. */
int sup_ctx_interrupt(sup_ctx_engine *e, const char *sid, const char *ctx, bool *running, sbx_err *err);

typedef struct sup_ctx_run_cbs {
	/* One event (obj: a new reference, the callee's), cost to give back
	 * with sup_ctx_run_consumed. NULL: the cell's output is collected
	 * into on_done's answer. */
	void (*on_event)(const char *event, json_t *obj, size_t cost, void *ud);
	/* The end, once: rc 0 and the answer (collected: {"results",
	 * "stdout","stderr","error","execution_count","duration_ms",
	 * "timed_out","truncated"[, "restarted"]}; streamed: the same without
	 * the outputs), borrowed; else err: -EOWNERDEAD the context
	 * died (its reason), -ECANCELED deleted or restarted, -ENOENT. */
	void (*on_done)(int rc, json_t *answer, const sbx_err *err, void *ud);
} sup_ctx_run_cbs;

/* Run cell (consumed) in ctx (an id, or a language: its default context,
 * made now when there is none). 0 with *run, or < 0: -ENOENT, -EBUSY a
 * cell runs, -EOWNERDEAD dead. A cell waits while its context starts. */
int sup_ctx_run_start(sup_ctx_engine *e, const char *sid, const char *ctx, sup_ctx_cell *cell,
		      const sup_ctx_run_cbs *cbs, void *ud, sup_ctx_run **run, sbx_err *err);
void sup_ctx_run_consumed(sup_ctx_run *run, size_t cost);
/* The caller went: no more calls; a cell still running is interrupted. */
void sup_ctx_run_cancel(sup_ctx_run *run);

#endif
