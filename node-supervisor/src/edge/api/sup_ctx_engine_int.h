/* What the contexts' engine's two files share (sup_ctx.c: contexts, their
 * sessions and life; sup_ctx_run.c: the cells they run): its state and the
 * calls each makes of the other. Loop thread only; not for other modules. */
#ifndef SUP_CTX_ENGINE_INT_H
#define SUP_CTX_ENGINE_INT_H

#include <stdbool.h>
#include <sys/queue.h>
#include <time.h>

#include "sup_agent_mcp.h"
#include "sup_ctx.h"
#include "sup_ctx_int.h"

#define OUTQ 4                      /* lines waiting for the agent: init, run, interrupts */
#define PAUSE_AT (1u << 20)         /* a streamed cell's bytes the client has not read */
#define RESUME_AT (PAUSE_AT / 2)
#define DEFAULT_MAX_OUTPUT (16u << 20)

typedef enum { ST_STARTING, ST_READY, ST_DEAD } ctx_state;

typedef struct context context;

struct sup_ctx_wait {
	TAILQ_ENTRY(sup_ctx_wait) link;
	context *c;
	sup_ctx_ready_cb cb;
	void *ud;
};

/* A configure in flight names its context through this, which the
 * context's end empties. */
typedef struct ctx_ticket {
	context *c;
} ctx_ticket;

typedef struct ctx_text {
	char *p;
	size_t n, cap;
} ctx_text;

struct sup_ctx_run {
	context *c;
	sup_ctx_run_cbs cbs;
	void *ud;
	sup_ctx_cell cell;
	uint64_t req;          /* the run request's id; 0 not sent yet */
	uint64_t started_ms;
	struct event *timer;   /* the timeout, then the grace */
	bool timed_out, in_grace, cancelled;
	/* collected */
	json_t *results, *error;
	ctx_text out, err;
	size_t bytes;
	bool truncated;
	/* streamed */
	size_t outstanding;
	bool paused;
};

struct context {
	TAILQ_ENTRY(context) link;
	sup_ctx_engine *e;
	char sid[SUP_ID_MAX];
	char id[SUP_CTX_ID_MAX];
	sup_ctx_lang lang;
	bool is_default;
	char *cwd;
	json_t *env;
	ctx_state state;
	bool was_ready;        /* it ran once: a failed start is a death, not a refusal */
	bool configure;        /* the next start configures the server first */
	bool reopened;         /* the server was gone once in this start */
	ctx_ticket *tk;
	sup_mcp_session *sess;
	uint64_t next_req, init_req;
	int64_t pid;
	char version[64];
	uint64_t executions;
	time_t created_at;
	char reason[SUP_CTX_REASON_MAX];
	bool oom;
	struct event *start_timer;
	TAILQ_HEAD(, sup_ctx_wait) waits;
	sup_ctx_run *run;
	char *outq[OUTQ];
	size_t outn[OUTQ];
	int nout;
	bool busy;             /* a line went to the agent and was not taken yet */
};

struct sup_ctx_engine {
	struct event_base *base;
	sup_core *core;
	size_t max_output;
	TAILQ_HEAD(, context) all;
};

/* ---- sup_ctx.c ---- */
context *sup_ctx_find(sup_ctx_engine *e, const char *sid, const char *id);
/* -ENOENT no such sandbox, -EBUSY SUP_CTX_MAX contexts. */
int sup_ctx_check_sandbox(sup_ctx_engine *e, const char *sid, sbx_err *err);
/* A default context when id (a language's name), else "ctx-" and hex. */
context *sup_ctx_new(sup_ctx_engine *e, const char *sid, sup_ctx_lang lang, const char *id, sbx_err *err);
/* Configure (first of its language), open, init. */
void sup_ctx_start(context *c);
/* Forget c: its session killed, its waiters and run answered with err. */
void sup_ctx_free(context *c, int rc, const sbx_err *err);
/* Kill c's interpreter and start another (same cwd and env); a running
 * cell ends as timed out and restarted (for_timeout) or -ECANCELED. */
void sup_ctx_restart_now(context *c, bool for_timeout);
/* One JSON-RPC line to the driver (params stolen; id 0: a notification);
 * -ENOBUFS when OUTQ lines wait already. */
int sup_ctx_send(context *c, uint64_t id, const char *method, json_t *params);

/* ---- sup_ctx_run.c ---- */
/* The run request of c's waiting cell, once c is ready. */
void sup_ctx_run_send(context *c);
/* The driver's answer to the run request. */
void sup_ctx_run_answer(context *c, sup_ctx_msg *m);
/* An event of the running cell: to the caller, or collected. */
void sup_ctx_deliver(sup_ctx_run *r, sup_ctx_msg_kind kind, json_t *ev, size_t len);
/* The run's end: detached from its context, then its caller's on_done. */
void sup_ctx_run_end(sup_ctx_run *r, int rc, json_t *extra, const sbx_err *err);
void sup_ctx_run_free(sup_ctx_run *r);

#endif
