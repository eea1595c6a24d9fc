/* Internal to sup_mcp_api.c and sup_mcp_tools*.c: sbx's own operations as
 * MCP tools. Each tool is one operation of the OpenAPI document
 * (openapi.json, built in: sup_openapi_json): its inputSchema is that
 * operation's path and query parameters and its request body's properties,
 * its outputSchema the schema of the operation's JSON answer (or, where the
 * route answers no JSON, the tool's result schema there), $refs resolved,
 * built once from the document (sup_mcp_tools.c), so the tools and the
 * document cannot disagree. A call runs on the core as the operation's
 * route runs it (sup_mcp_tools_ops.c, sup_mcp_tools_files.c) and ends in a
 * CallToolResult: the answer as structuredContent (conforming to the
 * outputSchema) and text, or isError with the API's error code and message
 * as text only (a client validates any structuredContent against the
 * outputSchema, an error's too). Nothing here knows the transport. Not for
 * other modules. */
#ifndef SUP_MCP_TOOLS_H
#define SUP_MCP_TOOLS_H

#include <event2/buffer.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sbx/proto_args.h"
#include "sup_mcp.h"
#include "sup_query.h"

/* Output a tool shows, at most, per stream or file (longer is cut with a
 * note saying so and how to read the rest). */
#define MT_SHOW_MAX (64u * 1024)

typedef struct mt_call mt_call;
typedef struct mt_tool mt_tool;

struct mt_call {
	sup_mcp_ctx *x;
	const sup_tenant *who;
	const mt_tool *tool;
	json_t *args;      /* the arguments (owned) */
	json_t *body;      /* the arguments that are the request body's (owned) */
	char id[SUP_ID_MAX]; /* "id": the sandbox, the caller's (checked) */
	/* exactly once, now or later (not after mt_cancel): the result, owned
	 * by the callee */
	void (*done)(mt_call *c, json_t *result);
	/* what is in flight */
	sup_op *op;
	sup_snaps_op *sop;
	sup_ctx_run *crun;
	bool finished;
	/* the operation's state */
	sup_create_req create;
	sup_exec_spec spec;
	sbx_proto_args pargs;
	sup_policy_match m;
	sup_ctx_cell cell;
	long pid;
	uint64_t off, size, shown;
	bool started, cut;
	char gap_note[128];
	struct evbuffer *buf;
	json_t *desc;
	/* write_file, write_process_stdin: the bytes, sent on channel wch
	 * within the agent's credit (sup_mcp_tool_pump) */
	uint8_t *wdata;
	size_t wlen, woff;
	const char *wch;
	bool wdone;
};

struct mt_tool {
	const char *name;
	const char *op;      /* the operationId in openapi.json */
	const char *family;  /* whose row of the status table names its errors */
	const char *note;    /* added to the operation's summary for the model */
	const char *omit;    /* a query parameter that is not offered (NULL: none) */
	/* the result's schema in components/schemas where the route answers
	 * no JSON (NULL: the operation's first 2xx JSON answer's) */
	const char *out;
	int (*start)(mt_call *c, sbx_err *err);
};

/* ---- sup_mcp_tools.c ---- */

/* The tools as tools/list answers them ({"tools": [...]}), built on first
 * use from the document; borrowed. NULL with err when the document lacks
 * an operation or a $ref does not resolve. */
const json_t *sup_mcp_tools_list(sbx_err *err);
void sup_mcp_tools_free(void);
/* The arguments that are query parameters of the tool's operation as the
 * route gets them (a number or a bool as its text), for the same parsers
 * (sup_query.h). */
int sup_mcp_tool_query(mt_call *c, sup_query *qs, sbx_err *err);
/* Start a call of tool name with args (an object or NULL; reference
 * taken). -ENOENT: no such tool (a JSON-RPC error for the caller); any
 * other failure, and every later one, ends in done with an isError result. */
int sup_mcp_tool_call(mt_call *c, sup_mcp_ctx *x, const sup_tenant *who, const char *name,
		      json_t *args, void (*done)(mt_call *c, json_t *result));
/* Withdraw it: done will not run. Frees what c holds. */
void sup_mcp_tool_cancel(mt_call *c);

/* For the operations: answer once. */
void sup_mcp_tool_ok(mt_call *c, const char *text, size_t len, json_t *structured);
void sup_mcp_tool_fail(mt_call *c, const sbx_err *err);
/* text and structured (reference taken) as the result, an error or not. */
void sup_mcp_tool_result(mt_call *c, const char *text, size_t len, json_t *structured, bool is_error);
/* The result as the API's JSON, its text that JSON (reference taken). */
void sup_mcp_tool_json(mt_call *c, json_t *structured);
/* The body's "content" (text) or "content_b64" (bytes) into wdata; need:
 * one of them is required (else neither is empty content). */
int sup_mcp_tool_content(mt_call *c, bool need, sbx_err *err);
/* Call the agent's op aop with pargs and stream wdata to it on channel ch
 * within its credit, the end after it; cbs->on_writable must be
 * sup_mcp_tool_pump, which hands it what its credit takes. */
int sup_mcp_tool_send(mt_call *c, const char *aop, const char *ch, const sup_core_call_cbs *cbs, sbx_err *err);
void sup_mcp_tool_pump(void *ud);

/* ---- the operations (sup_mcp_tools_ops.c, sup_mcp_tools_files.c) ---- */

int sup_mcp_op_create(mt_call *c, sbx_err *err);
int sup_mcp_op_list(mt_call *c, sbx_err *err);
int sup_mcp_op_delete(mt_call *c, sbx_err *err);
int sup_mcp_op_run(mt_call *c, sbx_err *err);
int sup_mcp_op_start(mt_call *c, sbx_err *err);
int sup_mcp_op_output(mt_call *c, sbx_err *err);
int sup_mcp_op_kill(mt_call *c, sbx_err *err);
int sup_mcp_op_stdin(mt_call *c, sbx_err *err);
int sup_mcp_op_snapshot(mt_call *c, sbx_err *err);
int sup_mcp_op_read(mt_call *c, sbx_err *err);
int sup_mcp_op_write(mt_call *c, sbx_err *err);
int sup_mcp_op_ls(mt_call *c, sbx_err *err);
int sup_mcp_op_search(mt_call *c, sbx_err *err);
int sup_mcp_op_code(mt_call *c, sbx_err *err);

#endif
