/* Internal to sup_e2b*.c: one request's state, the pure translations
 * between E2B's JSON and sbx's (sup_e2b_json.c, unit-tested), the access
 * tokens (sup_e2b_gate.c), the Connect protocol's framing (sup_e2b_rpc.c)
 * and the envd services' entry points. Not for other modules. */
#ifndef SUP_E2B_INT_H
#define SUP_E2B_INT_H

#include <jansson.h>
#include <msgpack.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sbx/proto_args.h"
#include "sup_ctx.h"
#include "sup_e2b.h"
#include "sup_stream.h"

/* Largest body of a control-plane request (a create with its metadata). */
#define SUP_E2B_MAX_BODY (256 * 1024)
/* Largest Connect message a client sends (a command and its env). */
#define SUP_E2B_MAX_MSG (1024 * 1024)
/* Their list's page when the client names none, and the most. */
#define SUP_E2B_PAGE 100
#define SUP_E2B_PAGE_MAX 1000
/* An access token: 64 hex digits, '.', the tenant's name. */
#define SUP_E2B_TOKEN_MAX (64 + 1 + 64)

struct e2b_fs; /* a filesystem call (sup_e2b_fs*.c) */

struct sup_eq {
	sup_http_req *r;
	sup_e2b_ctx *x;
	const char *id;
	sup_op *op;
	int kind;
	/* control plane */
	sup_create_req create;
	json_t *kept;          /* create: what E2B keeps beside sbx's view */
	unsigned timeout_s;    /* create, connect, timeout: 0 none given */
	bool paused;           /* connect: the sandbox was paused (201 once resumed) */
	char sid[SUP_ID_MAX];
	/* envd: the request's message, decoded */
	json_t *msg;
	int early;             /* a stream call's error found by its parser */
	sbx_err early_err;
	const char *user;      /* Authorization: Basic's user, NULL: the sandbox's */
	char user_buf[SUP_API_MAX_USER + 1];
	/* process calls */
	sup_exec_spec spec;
	sbx_proto_args args;
	sup_stream *s;
	long pid;
	uint64_t off;          /* where the output goes on */
	bool pty;
	json_t *list;          /* List: the processes so far */
	json_t *pending;       /* List: pids still to describe */
	uint8_t *input;        /* SendInput: the bytes, sent within credit */
	size_t input_len, input_off;
	bool input_eof;        /* CloseStdin */
	/* the code interpreter */
	char ctx_id[SUP_CTX_ID_MAX + 1];
	sup_ctx_cell cell;
	sup_ctx_run *run;
	sup_ctx_wait *wait;
	sup_ctx_spec spec_ctx;
	bool has_spec;         /* a context create's spec, not yet handed over */
	struct e2b_fs *fs;
};
typedef struct sup_eq sup_eq;

/* ---- sup_e2b_json.c: pure ---- */

/* Their create body (NewSandbox / NewSandboxV2) into sbx's create (through
 * sup_api's own parser, so sbx's checks hold) and *kept ({"metadata",
 * "templateID"}: the caller decrefs it, also on failure). What sbx cannot
 * do is -EINVAL naming it. */
int sup_e2b_parse_create(const char *body, size_t len, const sup_e2b_ctx *x, sup_create_req *out,
			 json_t **kept, sbx_err *err);
/* {"timeout": seconds} of a connect or set-timeout (absent: 0, allowed
 * only when optional). */
int sup_e2b_parse_timeout(const char *body, size_t len, bool optional, unsigned *out, sbx_err *err);
/* The image a template names (malloc'd; NULL for sbx's default image). */
int sup_e2b_template_image(const sup_e2b_ctx *x, const char *tmpl, char **out, sbx_err *err);
/* Their Sandbox (create, connect: with the access token) or their
 * SandboxDetail / ListedSandbox (token NULL). */
json_t *sup_e2b_sandbox_json(const sup_e2b_ctx *x, const sup_sandbox_view *v, const json_t *kept,
			     const char *token);
/* Their state name for sbx's: "running" or "paused". */
const char *sup_e2b_state(const char *sbx_state);
/* The list's query: metadata (their double-encoded k=v&...), state
 * (comma-joined), limit, nextToken. */
typedef struct sup_e2b_listq {
	json_t *meta;       /* {k: v} that must all hold; NULL: any */
	bool running, paused; /* both false: both */
	uint64_t limit;
	char next[SUP_ID_MAX]; /* the id after which the page starts; "": first */
} sup_e2b_listq;
int sup_e2b_listq_parse(const char *query, sup_e2b_listq *lq, sbx_err *err);
void sup_e2b_listq_free(sup_e2b_listq *lq);
/* Whether a sandbox with kept metadata and sbx state passes lq. */
bool sup_e2b_listq_match(const sup_e2b_listq *lq, const char *sbx_state, const json_t *kept);

/* ---- sup_e2b_gate.c ---- */
/* The access token of sandbox id of tenant (SUP_E2B_TOKEN_MAX + 1): 0, or
 * -EINVAL. */
int sup_e2b_token(const sup_e2b_ctx *x, const char *tenant, const char *id,
		  char out[SUP_E2B_TOKEN_MAX + 1]);

/* ---- sup_e2b_rpc.c: the Connect protocol with the JSON codec ---- */
/* The Connect code for an HTTP status (404 -> "not_found"). */
const char *sup_e2b_connect_code(int status);
/* A unary call's message (Content-Type application/json) or a stream
 * call's one envelope (application/connect+json) into *msg, a JSON object
 * (the caller decrefs it, also on failure): 0, or -EINVAL / -EPROTONOSUPPORT
 * (a binary codec: 415). */
int sup_e2b_rpc_message(const sup_http_in *in, bool stream, json_t **msg, sbx_err *err);
/* A field of a message in either spelling (lowerCamelCase or snake_case):
 * borrowed, NULL when absent or null. */
json_t *sup_e2b_field(const json_t *msg, const char *camel, const char *snake);
/* A process selector ({"process": {"pid": N}}) into *pid: 0, or -EINVAL. */
int sup_e2b_rpc_pid(const json_t *msg, long *pid, sbx_err *err);
/* Answer a unary call: 200 with o (reference taken; NULL: {}). */
void sup_e2b_rpc_reply(sup_http_req *r, json_t *o);
/* Start a server stream on q (200, application/connect+json); the
 * keepalive as the client asked (Keepalive-Ping-Interval) with line.
 * NULL without memory. */
sup_stream *sup_e2b_rpc_stream(sup_eq *q, const char *keepalive_line);
/* End q's stream: with err (rc < 0) the end-stream envelope carries it as
 * their error, else {}. A stream not yet started starts first, so an
 * error of a stream call is always a 200 with its end-stream envelope. */
void sup_e2b_rpc_end(sup_eq *q, int rc, const sbx_err *err);
/* The user Authorization: Basic names (their envd's), into q->user:
 * 0, or -EINVAL (a header that is not Basic user:password). */
int sup_e2b_rpc_user(sup_eq *q, const sup_http_in *in, sbx_err *err);
/* Connect-Timeout-Ms in ms (0: none). */
int sup_e2b_rpc_timeout(const sup_http_in *in, uint64_t *ms, sbx_err *err);
/* Every parser of envd starts with it. */
void sup_e2b_q_init(sup_eq *q, const sup_http_in *in, void *ctx);

/* The parsers of envd's calls: a unary one's message (errors answered as
 * their Connect error by the edge), a stream's (errors kept in q->early
 * for the act to end the stream with: their SDKs read a stream's error
 * from its end-stream envelope). Both read the Basic user. */
int sup_e2b_parse_rpc(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_e2b_parse_rpc_stream(const sup_http_in *in, void *ctx, void *state, sbx_err *err);

/* ---- sup_e2b_proc.c: process.Process ---- */
int sup_e2b_act_start(sup_http_req *r, void *state, sbx_err *err);
int sup_e2b_act_connect(sup_http_req *r, void *state, sbx_err *err);
int sup_e2b_act_list(sup_http_req *r, void *state, sbx_err *err);
int sup_e2b_act_input(sup_http_req *r, void *state, sbx_err *err);
int sup_e2b_act_signal(sup_http_req *r, void *state, sbx_err *err);
int sup_e2b_act_update(sup_http_req *r, void *state, sbx_err *err);
void sup_e2b_proc_release(sup_eq *q);

/* ---- sup_e2b_code.c: the code interpreter (/execute, /contexts) ---- */
int sup_e2b_parse_execute(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_e2b_act_execute(sup_http_req *r, void *state, sbx_err *err);
int sup_e2b_parse_context(const sup_http_in *in, void *ctx, void *state, sbx_err *err);
int sup_e2b_act_context(sup_http_req *r, void *state, sbx_err *err);
void sup_e2b_code_release(sup_eq *q);

#endif
