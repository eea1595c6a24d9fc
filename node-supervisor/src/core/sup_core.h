/* Supervisor core: the operations the API offers, independent of HTTP.
 * Owns the registry of handed-out sandboxes (id -> sandbox), their
 * lifetime (expiry timers), their env, and the operations in flight
 * (create waiting for a pool, exec running on an agent, delete waiting for
 * a destroy). Handlers call it and render what it answers; it calls the
 * pools for sandboxes and the agent client for commands, never the other
 * way round. Loop thread only.
 *
 * Tenants: a sandbox belongs to the tenant that created it. Lookups take
 * the caller's tenant (who), and another tenant's sandbox is not found
 * (-ENOENT, as an unknown id: ids do not leak); the admin tenant sees all.
 * A create is checked against its tenant (images, isolations, timeout,
 * defaults) and its quota (-EDQUOT naming what is over and by how much),
 * counting the tenant's listed sandboxes and its creates still waiting.
 *
 * Async operations: a function returns < 0 when it failed at once (its
 * callback does not run), or 0 and either *op (the callback runs later;
 * sup_op_cancel withdraws it) or *op == NULL (the callback already ran).
 * Errors are negative errnos (EPERM: this supervisor's policy refuses;
 * EACCES: the sandbox refused), the route families map them to statuses. */
#ifndef SUP_CORE_H
#define SUP_CORE_H

#include <msgpack.h>
#include <stddef.h>

#include "sbx/err.h"
#include "sbx/proto_args.h"
#include "sup_metrics.h"
#include "sup_policy.h"
#include "sup_pool.h"
#include "sup_tenants.h"
#include "sup_types.h"
#include "sup_volumes.h"

struct event_base;
struct evbuffer;
struct sup_net;
struct sup_catalog;
struct sup_catalog_rec;
typedef struct sup_core sup_core;
typedef struct sup_op sup_op;

/* What the core tells of a sandbox's life (sup_core_cfg.on_life). */
typedef enum sup_core_life {
	SUP_LIFE_CREATED,  /* handed out to its tenant */
	SUP_LIFE_EXPIRED,  /* its lifetime ran out: being destroyed */
	SUP_LIFE_DELETED,  /* a DELETE: being destroyed */
	SUP_LIFE_OOM,      /* a command of it was killed for memory */
} sup_core_life;

typedef struct sup_core_cfg {
	size_t max_output;       /* captured bytes per stream of an exec */
	size_t max_output_total; /* captured bytes of all execs in flight together */
	unsigned max_execs;      /* execs in flight per sandbox */
	struct sup_net *net;     /* egress by policy; NULL: sandboxes are loopback only */
	struct sup_catalog *catalog; /* a sandbox handed out is recorded before the answer;
				      * NULL: nothing outlives the process */
	sup_volumes *volumes;    /* the node's volumes, mounted by creates that name them;
				  * NULL: none (a create naming one is -EINVAL) */
	struct sup_secrets *secrets; /* tenants' secrets, given to creates that name them
				      * (sup_core_secrets.h); NULL: none (naming one is -EINVAL) */
	/* The pools' backend when not the local runtime ("kubernetes"): a
	 * create naming volumes or a snapshot is then -ENOSYS. NULL: runc. */
	const char *backend;
	/* Told on the loop thread as it happens (must not block); NULL: nobody. */
	void (*on_life)(void *ud, sup_core_life what, const char *id, const char *image,
			const char *tenant);
	void *life_ud;
} sup_core_cfg;

sup_core *sup_core_new(struct event_base *base, sup_pools *pools, const sup_core_cfg *cfg,
		       sbx_err *err);
void sup_core_free(sup_core *c);

/* The pools' hooks the core needs (pass to sup_pools_new). */
sup_pools_hooks sup_core_pool_hooks(sup_core *c);
void sup_core_set_pools(sup_core *c, sup_pools *pools);

typedef void (*sup_core_sandbox_cb)(int rc, const sup_sandbox_view *v, const sbx_err *err,
				    void *ud);
typedef void (*sup_core_done_cb)(int rc, const sbx_err *err, void *ud);
/* rc 0 with r; rc < 0 with err, and for -ETIME of a command with a
 * timeout also r: the timed-out result with what was captured. */
typedef void (*sup_core_exec_cb)(int rc, const sup_exec_result *r, const sbx_err *err, void *ud);

/* Hand out a sandbox of req->image with req's lifetime, env and egress
 * policy (req is consumed) to who. What req does not name is who's (its
 * default isolation, resources, a timeout within its max); an image or
 * isolation who may not use is -EPERM, a timeout over its max -EINVAL,
 * over its quota -EDQUOT. A policy is loaded into the pooled sandbox's
 * plumbing before the answer; without a network, asking for one is
 * -EINVAL. */
int sup_core_create(sup_core *c, const sup_tenant *who, sup_create_req *req,
		    sup_core_sandbox_cb cb, void *ud, sup_op **op, sbx_err *err);
int sup_core_get(sup_core *c, const sup_tenant *who, const char *id, sup_sandbox_view *out,
		 sbx_err *err);
/* Replace a running sandbox's egress policy (copied): new connections
 * follow it at once. *out: the sandbox as it is now. The edge has checked
 * the id is the caller's (sup_core_check_owner). */
int sup_core_set_network(sup_core *c, const char *id, const sup_netpol *p, sup_sandbox_view *out,
			 sbx_err *err);
/* A new lifetime for a sandbox who sees: it expires seconds from now (at
 * most who's max_timeout_s: -EINVAL), recorded in the catalog before the
 * answer. *out: the sandbox as it is now. */
int sup_core_set_timeout(sup_core *c, const sup_tenant *who, const char *id, unsigned seconds,
			 sup_sandbox_view *out, sbx_err *err);
/* Pause (paused) or resume a running sandbox (the edge checked the id is
 * the caller's): its processes frozen or thawed (sup_pools_freeze), kept
 * in the catalog before the answer. Asking for the state it is in already
 * answers as the first time (idempotent). While paused every operation
 * that needs its agent (exec, files, ports, MCP, processes) is -EHOSTDOWN
 * ("paused"); GET, DELETE, timeout and network still work, and its
 * lifetime runs on. *out: the sandbox as it is now. */
int sup_core_pause(sup_core *c, const char *id, bool paused, sup_sandbox_view *out, sbx_err *err);
/* Whether sandbox id stands paused now (false when there is none): for
 * clocks that must not count the time it is frozen (MCP idle sessions). */
bool sup_core_paused(sup_core *c, const char *id);
/* Calls fn for every handed-out sandbox who sees, oldest first. */
void sup_core_list(sup_core *c, const sup_tenant *who,
		   void (*fn)(const sup_sandbox_view *v, void *ud), void *ud);
/* Destroy; the callback runs when the container is gone. */
int sup_core_delete(sup_core *c, const sup_tenant *who, const char *id, sup_core_done_cb cb,
		    void *ud, sup_op **op, sbx_err *err);
/* Whether who sees sandbox id: 0, or -ENOENT worded as for an unknown id.
 * The HTTP edge asks it once for every request naming a sandbox, before
 * its route runs; the operations below then take the id alone. */
int sup_core_check_owner(sup_core *c, const sup_tenant *who, const char *id, sbx_err *err);
/* A file path p[0..len) who names in sandbox id, for need: a volume the
 * sandbox mounts there decides (read-only: -EPERM for a write), else who's
 * path policy (sup_policy_check); *m then holds the root and the part
 * below it the agent gets. -EPERM without a tenant. */
int sup_core_check_path(sup_core *c, const sup_tenant *who, const char *id, const char *p,
			size_t len, sup_policy_access need, sup_policy_match *m, sbx_err *err);
/* Run spec (consumed) and capture its output (bounded by max_output). */
int sup_core_exec(sup_core *c, const char *id, sup_exec_spec *spec, sup_core_exec_cb cb,
		  void *ud, sup_op **op, sbx_err *err);
/* For a command started another way (a background process): the same
 * policy as exec (root only when the sandbox's tenant has allow_root:
 * -EPERM; spec->allow_root set) on a running sandbox, and its create-time
 * env in *env (valid until
 * the loop runs again), which the request's env overrides key by key. */
int sup_core_command_prepare(sup_core *c, const char *id, sup_exec_spec *spec, const sup_env **env,
			     sbx_err *err);
/* Streaming exec: output is handed on as it comes, never captured. */
typedef struct sup_core_stream_cbs {
	/* Bytes of one stream; give cost back with sup_op_consumed() once they
	 * are passed on. Until then the agent's credit stays spent and the
	 * command blocks on its pipe, so a slow reader costs no memory. */
	void (*on_data)(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud);
	/* Exactly once unless cancelled: rc 0 with st (duration clamped as for
	 * sup_core_exec), or rc < 0 with err. */
	void (*on_done)(int rc, const sup_exec_status *st, const sbx_err *err, void *ud);
} sup_core_stream_cbs;

/* Run spec (consumed) and stream its output through cbs (no cap). */
int sup_core_exec_stream(sup_core *c, const char *id, sup_exec_spec *spec,
			 const sup_core_stream_cbs *cbs, void *ud, sup_op **op, sbx_err *err);
/* Give back the cost of bytes on_data delivered (streaming exec and
 * sup_core_call). */
void sup_op_consumed(sup_op *op, size_t cost);

/* Any other agent operation (file.read, fs.stat, ...) on a running
 * sandbox: op with args (an encoded msgpack map). Data and events arrive
 * with a cost the caller gives back with sup_op_consumed(); the END map or
 * the error comes once through on_done (-ENOENT, -EACCES, -EEXIST,
 * -ENOSPC, -E2BIG, -EINVAL from the agent's codes; -ETIME the agent let
 * the call's deadline pass), also when the sandbox is destroyed
 * meanwhile. Everything handed over is the guest's: callers validate it,
 * and blame the sandbox (sup_core_blame) for what does not hold. */
typedef struct sup_core_call_cbs {
	void (*on_data)(const uint8_t *p, size_t n, size_t cost, void *ud);
	/* Optional, for an op whose data are a command's output (proc.output):
	 * called instead of on_data with the stream the bytes are of; ch is 0
	 * for a channel that is neither stdout nor stderr. */
	void (*on_output)(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud);
	void (*on_event)(const msgpack_object *map, size_t cost, void *ud);
	void (*on_done)(int rc, const msgpack_object *result, const sbx_err *err, void *ud);
	/* Optional: the agent took bytes sent with sup_core_call_send; more may go. */
	void (*on_writable)(void *ud);
	/* How the call waits on the agent (its deadline): an answer is due
	 * (the default), input is streamed first, or it may rightly be quiet. */
	sup_agent_wait wait;
} sup_core_call_cbs;
/* args is finished and destroyed here, whatever happens. */
int sup_core_call(sup_core *c, const char *id, const char *op, sbx_proto_args *args,
		  const sup_core_call_cbs *cbs, void *ud, sup_op **opp, sbx_err *err);
/* Inside on_data: append p[0..n) (a part of the bytes it was given) to
 * dst without a copy where the agent's frame allows it. -ENOMEM. */
int sup_core_call_add_data(sup_op *op, const uint8_t *p, size_t n, struct evbuffer *dst);
/* Bytes towards the agent on a sup_core_call stream (stdin of proc.stdin):
 * how many went within its credit (0: wait for on_writable), < 0 when the
 * stream is gone (on_done tells why). */
int sup_core_call_send(sup_op *op, const char *ch, const uint8_t *p, size_t n, bool eof,
		       sbx_err *err);
/* The same for the first n bytes of src, moved into the frame without a
 * copy (an upload's body); eof goes alone with sup_core_call_send. */
int sup_core_call_send_from(sup_op *op, const char *ch, struct evbuffer *src, size_t n,
			    sbx_err *err);

/* What a caller found in the agent's answer (err): -EPROTO, naming what
 * the agent did, is a promise broken above the framing (an answer of the
 * wrong shape): its connection is dropped on the next turn of the loop and
 * the sandbox fails with err's message as the reason (every call still in
 * flight is answered as an agent error). Any other code is the caller's own
 * (out of memory) and blames nobody; nothing either when the sandbox has
 * no agent any more. */
void sup_core_blame(sup_core *c, const char *id, const sbx_err *err);
/* Sandbox id went out in something that outlives its owner's use of it
 * (a signed URL naming the id): with --pool-reuse it is then destroyed,
 * never reset for another owner, who would be reached by it. */
void sup_core_id_given_out(sup_core *c, const char *id);
/* The agent of a running sandbox (for the typed calls of sup_agent_*.h),
 * or NULL with err as for any operation on it. */
struct sup_agent *sup_core_agent(sup_core *c, const char *id, sbx_err *err);

/* Creates with "snapshot" reach the snapshots through this table, which
 * the snapshot operations fill (sup_core_set_snaps, sup_snaps.h): they call
 * the core (a fork is creates), and the core calls them back only through
 * it, naming no snapshot module. Without one such creates are refused. */
struct sup_snaps;
struct sup_snaps_job;
typedef void (*sup_core_step_cb)(int rc, const sbx_err *err, void *ud);
typedef struct sup_core_restorer {
	/* the snapshots are kept in an object store: a restore fetches first */
	bool (*remote)(const struct sup_snaps *s);
	/* snap_id's archive here for a create (1: ready now, cb not called;
	 * 0: cb later, *job to cancel), kept until fetched_drop */
	int (*fetch)(struct sup_snaps *s, const sup_tenant *who, const char *snap_id,
		     sup_core_step_cb cb, void *ud, struct sup_snaps_job **job, sbx_err *err);
	void (*fetched_drop)(struct sup_snaps *s, const char *snap_id);
	void (*job_cancel)(struct sup_snaps_job *job);
	/* req->snapshot (who's) becomes req's image, acquired image, seed and
	 * the volumes to make */
	int (*seed)(struct sup_snaps *s, const sup_tenant *who, sup_create_req *req, sbx_err *err);
} sup_core_restorer;
void sup_core_set_restorer(sup_core *c, const sup_core_restorer *r, struct sup_snaps *s);

/* Withdraw an operation whose requester went away: its callback will not
 * run. A running exec is cancelled on the agent (the command is killed); a
 * waiting create leaves its sandbox to the pool; a delete goes on. */
void sup_op_cancel(sup_op *op);

/* The node's series for /metrics: sandboxes by state, image and
 * isolation; the pools' sizes and latencies; execs (count by result,
 * duration, OOM kills); the agents' bytes, timeouts and faults; quota
 * refusals; and per tenant (every tenant of ts, and the owners of
 * sandboxes still running after a reload removed them) what it holds, what
 * it uses now (read from each sandbox's cgroup and disk) and its quota. */
void sup_core_metrics(sup_core *c, const sup_tenants *ts, sup_prom *w);

size_t sup_core_pool_count(const sup_core *c);
/* Sandboxes handed out (listed), every tenant's. */
size_t sup_core_listed_count(const sup_core *c);
void sup_core_pool_stats(const sup_core *c, size_t i, sup_pool_stats *out);
/* PUT /v1/pools/{image}: the pool's size from now on (sup_pools_set_size),
 * kept in the catalog so that the next start sizes it so again. */
int sup_core_pool_set_size(sup_core *c, const char *image, sup_isolation isolation, unsigned size,
			   sup_pool_stats *out, sbx_err *err);

/* Take back a sandbox of an earlier run (its catalog row, and its box
 * from sup_runc_adopt or the pools' backend, fd its agent's connected
 * socket, taken, or -1), before the pools start: a pooled one returns to
 * its pool, a handed-out one to its tenant with its lifetime, limits,
 * env, pause and egress policy (loaded into its plumbing made again),
 * listed again once its agent answers the new connection (or destroyed,
 * when it does not). < 0: not taken back (err says why). */
int sup_core_restore(sup_core *c, const struct sup_catalog_rec *rec, const sup_runc_box *box, int fd,
		     sbx_err *err);

/* Stop for a successor on the same state folder: what is in flight fails
 * with -ESHUTDOWN, nothing is destroyed (the catalog keeps every sandbox
 * for the next start), done runs once the workers are idle. */
void sup_core_handover(sup_core *c, void (*done)(void *ud), void *ud);

/* Fail what is in flight with -ESHUTDOWN, destroy every sandbox, then call
 * done once no sandbox is alive and the workers are idle. */
void sup_core_shutdown(sup_core *c, void (*done)(void *ud), void *ud);

/* Volumes (sup_volumes.h): the registry, for the routes to read and
 * delete; a create goes through the core, which counts the tenant's
 * volumes with its sandboxes against its disk quota (-EDQUOT). A create
 * naming volumes (req->volumes) gets them bound as it is handed out: an
 * unknown one is -ENOENT, one in use -ETXTBSY (volume_busy), a gvisor
 * sandbox's -EINVAL. */
sup_volumes *sup_core_volumes(sup_core *c);
int sup_core_volume_create(sup_core *c, const sup_tenant *who, const char *name, uint64_t size,
			   sup_volumes_cb cb, void *ud, sbx_err *err);

#endif
