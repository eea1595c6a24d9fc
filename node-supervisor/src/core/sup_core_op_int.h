/* What the core's files share (sup_core.c, sup_core_create.c,
 * sup_core_tenant.c, sup_core_prep.c, sup_core_exec.c): the core's struct,
 * an operation in flight (sup_op) and the steps one file calls in another.
 * Nothing outside these files includes this; the core's interface is
 * sup_core.h (and, for its metrics and snapshots, sup_core_int.h). */
#ifndef SUP_CORE_OP_INT_H
#define SUP_CORE_OP_INT_H

#include <sys/queue.h>
#include <time.h>

#include "sup_agent.h"
#include "sup_core.h"
#include "sup_core_int.h"
#include "sup_sandbox.h"
#include "sup_volseed.h"

TAILQ_HEAD(sup_reg_list, sup_sandbox);

struct sup_core {
	struct event_base *base;
	sup_pools *pools;
	sup_core_cfg cfg;
	void *index;                /* tsearch tree of listed sandboxes by id */
	struct sup_reg_list listed; /* creation order */
	TAILQ_HEAD(, sup_op) creates;
	size_t captured;            /* bytes held by all execs in flight */
	bool shutting_down;
	/* For /metrics. */
	sup_hist exec_seconds;
	uint64_t execs[SUP_CORE_EXEC_RESULTS]; /* by exec_result */
	uint64_t oom_killed;        /* execs the kernel killed for memory */
	sup_ctab *refusals;         /* quota refusals by tenant and figure */
	const sup_core_restorer *restorer; /* restores from snapshots; NULL: none */
	struct sup_snaps *snaps;           /* the restorer's */
};

typedef enum sup_op_kind {
	OP_CREATE = 1,
	OP_EXEC,
	OP_DELETE,
	OP_CALL,
	OP_FETCH,
	OP_VOLS
} sup_op_kind;

typedef struct sup_bytes {
	uint8_t *p;
	size_t len;
	size_t alloc;
	size_t limit;
	bool truncated;
	size_t *budget_used; /* the core's total, shared by every exec */
	size_t budget;
} sup_bytes;

struct sup_op {
	sup_core *core;
	sup_op_kind kind;
	void *ud;
	TAILQ_ENTRY(sup_op) link; /* core->creates, sb->execs or sb->delete_waiters */
	sup_sandbox *sb;
	union {
		struct {
			sup_acquire *acq;
			sup_create_req req;
			sup_core_sandbox_cb cb;
			char tenant[SUP_TENANT_NAME_MAX + 1];
			bool allow_root;
			/* failed once it had its sandbox: answered with fail
			 * when the container is gone (failed_gone) */
			bool failing, in_destroy;
			sbx_err fail;
		} create;
		struct {
			sup_exec_call *call;
			sup_core_exec_cb cb;
			const sup_core_stream_cbs *scb; /* streaming: no capture */
			sup_bytes out, err;
			struct timespec start;
		} exec;
		struct {
			sup_core_done_cb cb;
		} del;
		struct {
			sup_agent_call *call;
			const sup_core_call_cbs *cbs;
		} call;
		/* a create with a step first (OP_FETCH: a restore's archive
		 * fetched from the object store; OP_VOLS: a restore's or
		 * fork's volumes made), then the create proper (create) */
		struct {
			sup_op *create;
			sup_create_req req;
			sup_core_sandbox_cb cb;
			const sup_tenant *who;
			struct sup_snaps_job *job; /* OP_FETCH: the download */
			char snap[SUP_ID_MAX];
			bool held;            /* OP_FETCH: a downloaded archive to drop at the end */
			sup_volseed *vs;      /* OP_VOLS: the volumes made */
		} pre;
	} u;
};

/* ---- sup_core.c: the registry ---- */

/* The listed sandbox id (NULL: none). */
sup_sandbox *sup_core_lookup(sup_core *c, const char *id);
void sup_core_view_of(const sup_sandbox *sb, sup_sandbox_view *v);
/* A call the agent let pass its deadline counts against the sandbox. */
void sup_core_count_timeout(sup_sandbox *sb, const sbx_err *err);
/* Its volumes free again (its container gone, or never given them). */
void sup_core_release_volumes(sup_core *c, const sup_sandbox *sb);
void sup_core_tell(sup_core *c, sup_core_life what, const sup_sandbox *sb);
/* What the catalog keeps of a handed-out sandbox, written now. */
int sup_core_record(sup_core *c, const sup_sandbox *sb, sbx_err *err);
/* Into the registry, its lifetime running for seconds more. */
int sup_core_list_sandbox(sup_core *c, sup_sandbox *sb, time_t seconds, sbx_err *err);

/* ---- sup_core_tenant.c: what a tenant may have ---- */

/* What req leaves out is who's; what it names must be within who's. */
int sup_core_apply_tenant(const sup_tenant *who, sup_create_req *req, sbx_err *err);
/* Offered on this node and allowed to who. */
int sup_core_allow_isolation(const sup_core *c, const sup_tenant *who, const sup_create_req *req,
			     sbx_err *err);
/* A policy needs the node's egress and a runc sandbox. */
int sup_core_allow_network(const sup_core *c, const sup_create_req *req, sbx_err *err);
/* want beside what who holds, within its quota (a refusal counted). */
int sup_core_check_quota(sup_core *c, const sup_tenant *who, const sup_resources *want,
			 sbx_err *err);
/* req's volumes: runc sandboxes, who's, free for the mode asked. */
int sup_core_allow_volumes(const sup_core *c, const sup_tenant *who, const sup_create_req *req,
			   sbx_err *err);
/* size more bytes of disk (volumes) within who's disk quota: -EDQUOT. */
int sup_core_disk_fits(sup_core *c, const sup_tenant *who, uint64_t size, sbx_err *err);

/* ---- sup_core_prep.c: a create with a step first ---- */

/* What the step holds goes (rc < 0) or is kept (rc 0), and op. */
void sup_core_prep_end(sup_op *op, int rc);
/* The snapshot's archive fetched from the object store, then the create. */
int sup_core_create_from_store(sup_core *c, const sup_tenant *who, sup_create_req *req,
			       sup_core_sandbox_cb cb, void *ud, sup_op **opp, sbx_err *err);
/* The volumes the snapshot carries made, then the create mounting them. */
int sup_core_create_with_volumes(sup_core *c, const sup_tenant *who, sup_create_req *req,
				 sup_core_sandbox_cb cb, void *ud, sup_op **opp, sbx_err *err);

/* ---- sup_core_exec.c ---- */

/* A capture's bytes given back to the core's total. */
void sup_core_bytes_free(sup_bytes *b);

#endif
