/* One sandbox as the supervisor tracks it, from the moment its creation is
 * queued until its destruction finished. The pool module (sup_pool) makes,
 * connects and unmakes sandboxes and owns the lifecycle fields; the core
 * (sup_core) owns the fields it sets while a sandbox is handed out to a
 * user. Loop thread only. */
#ifndef SUP_SANDBOX_H
#define SUP_SANDBOX_H

#include <stdbool.h>
#include <sys/queue.h>
#include <time.h>

#include "sup_runc.h"
#include "sup_tenants.h"
#include "sup_types.h"

struct sup_pool;
struct sup_agent;
struct event;
struct sup_op;
struct sup_core;
struct sup_runc_baseline;
struct sup_agent_reset_call;

typedef enum sup_sb_state {
	SUP_SB_CREATING,   /* runtime create queued or running on a worker */
	SUP_SB_CONNECTING, /* container up, protocol handshake in progress */
	SUP_SB_READY,      /* in its pool, agent connected, not handed out */
	SUP_SB_RUNNING,    /* handed out to a user */
	SUP_SB_FAILED,     /* handed out, and the agent connection was lost
			    * (it went away, broke the protocol, missed a ping) */
	SUP_SB_DESTROYING, /* runtime destroy queued or running */
	SUP_SB_RESETTING,  /* released by its owner, being reset for the next one
			    * (the agent's reset, then the host's check) */
} sup_sb_state;

const char *sup_sb_state_name(sup_sb_state s);

typedef struct sup_sandbox sup_sandbox;
struct sup_sandbox {
	char id[SUP_ID_MAX];
	sup_sb_state state;
	struct sup_pool *pool;     /* image it was made for */
	sup_runc_box box;          /* valid from CONNECTING on */
	sup_resources res;         /* limits in force, valid from CONNECTING on */
	unsigned net_slot;         /* its egress plumbing (sup_net), 0: none */
	struct sup_agent *agent;   /* NULL unless CONNECTING, READY, RUNNING */
	bool adopting;             /* CONNECTING: a handed-out sandbox of an earlier run */
	bool seeded;               /* made for one request (sup_pools_acquire_seeded):
				    * never pooled, destroyed when its requester left */
	struct sup_acquire *dedicated; /* seeded: that request, NULL once gone */
	bool paused;               /* RUNNING: frozen (sup_pools_freeze); its agent held */
	bool forked;               /* its fork slot was filled (sup_snaps): a lower layer
				    * with a tenant's files, never reset for reuse */
	char reason[SBX_ERR_MSG_MAX];          /* FAILED: why the agent connection was lost */
	struct timespec queued_at;             /* its create was queued (cold-create latency) */
	struct sup_runc_baseline *baseline;    /* what it was when new, for the check after a
						* reset (sup_runc_clean.h); NULL: never reused */
	struct sup_agent_reset_call *reset_call; /* RESETTING: the agent's reset in flight */
	void (*service_then)(sup_sandbox *sb, bool lost); /* the image's service being
							   * started (sup_pool_service.c):
							   * what follows */
	struct timespec reset_at;              /* RESETTING: released at */
	TAILQ_ENTRY(sup_sandbox) ready_link; /* pool's ready list */
	TAILQ_ENTRY(sup_sandbox) all_link;   /* every sandbox alive */

	/* Core fields, set while handed out. */
	struct sup_core *core;
	char tenant[SUP_TENANT_NAME_MAX + 1]; /* its owner: only it (and admin) sees it */
	bool allow_root;                      /* its owner's allow_root when it was made */
	time_t created_at;
	time_t expires_at;
	sup_env env;                          /* its commands' (secrets' variables among them) */
	sup_secret_binds secrets;             /* which variables of env are secrets' */
	struct event *expiry;
	unsigned agent_timeouts;              /* calls the agent let pass their deadline */
	bool id_given_out;                    /* its id is in a signed URL: never reused */
	bool listed;                          /* in the core's registry */
	TAILQ_ENTRY(sup_sandbox) reg_link;    /* core's registry, creation order */
	TAILQ_HEAD(, sup_op) execs;           /* execs in flight */
	TAILQ_HEAD(, sup_op) delete_waiters;  /* DELETEs waiting for the destroy */
};

#endif
