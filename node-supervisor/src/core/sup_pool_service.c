/* An image's service (its label dev.sbx.service, sup_img_manifest.h:
 * sbx/browser's Chromium) started in each sandbox of its pool as the
 * sandbox comes up, new or reset for reuse, before it is offered: a
 * pooled sandbox is handed out with it running. It runs as any background
 * process (tag SUP_POOL_SERVICE_TAG, the processes API lists it) with the
 * image's env, user and working folder. A service that does not start is
 * logged and the sandbox is offered all the same (what a client of the
 * service sees is its port closed, the process list says why); a sandbox
 * whose agent goes meanwhile is its caller's to handle as a loss. */
#include <errno.h>
#include <string.h>

#include "sbx/proto.h"
#include "sbx/proto_exec.h"
#include "sup_agent.h"
#include "sup_log.h"
#include "sup_pool_int.h"

/* proc.start answers once the program runs: an agent that takes longer
 * is late (the call's grace comes on top). */
#define SERVICE_START_MS 10000u

static void service_data(sup_agent_call *call, const char *ch, size_t ch_len, const uint8_t *p,
			 size_t n, size_t cost, void *ud)
{
	(void)ch;
	(void)ch_len;
	(void)p;
	(void)n;
	(void)ud;
	sup_agent_call_consumed(call, cost);
	sup_agent_blame(sup_agent_call_agent(call), "the agent sent data on proc.start");
}

static void service_done(sup_agent_call *call, int rc, const msgpack_object *result,
			 const sbx_err *err, void *ud)
{
	sup_sandbox *sb = ud;
	sup_pool_service_then then = sb->service_then;
	const char *state = NULL;
	size_t sl = 0;
	sb->service_then = NULL;
	/* freed by the supervisor: whoever did handles the sandbox */
	if (rc == -ECONNABORTED)
		return;
	bool lost = rc < 0 && sup_agent_gone(sup_agent_call_agent(call));
	if (lost)
		sup_debug("sandbox %s: its agent went away as its service started", sb->id);
	else if (rc < 0)
		sup_warn("sandbox %s: the image's service %s did not start: %s", sb->id,
			 sb->pool->service, err ? err->msg : "unknown");
	else if (!sbx_proto_get_str(result, "state", &state, &sl) || sl != 7 ||
		 memcmp(state, "running", 7) != 0)
		sup_warn("sandbox %s: the image's service %s exited at once (GET .../processes?tag="
			 SUP_POOL_SERVICE_TAG " has its output)", sb->id, sb->pool->service);
	else
		sup_debug("sandbox %s: service %s started", sb->id, sb->pool->service);
	then(sb, lost);
}

static const sup_agent_call_cbs service_cbs = {
	.on_data = service_data,
	.on_done = service_done,
};

int sup_pool_service_start(sup_sandbox *sb, sup_pool_service_then then)
{
	sup_pool *pool = sb->pool;
	sbx_err err;
	sbx_proto_args args;
	size_t len;
	sup_agent_call *call;
	if (!pool->service || !sb->agent)
		return 0;
	char *argv[2] = { pool->service, NULL };
	sbx_proto_exec_args x = { .argv = argv, .argc = 1, .user = pool->user, .cwd = pool->workdir };
	sbx_proto_args_init(&args);
	sbx_proto_exec_encode(&x, &pool->env, &args);
	sbx_proto_args_str(&args, "tag", SUP_POOL_SERVICE_TAG, strlen(SUP_POOL_SERVICE_TAG));
	const char *buf = sbx_proto_args_done(&args, &len);
	sb->service_then = then;
	int rc = buf ? sup_agent_call_start(sb->agent, SBX_OP_PROC_START, buf, len,
					    SUP_AGENT_WAIT_ANSWER, SERVICE_START_MS, &service_cbs, sb,
					    &call, &err)
		     : sbx_err_set(&err, -ENOMEM, "out of memory");
	sbx_proto_args_destroy(&args);
	if (rc < 0) {
		sb->service_then = NULL;
		sup_warn("sandbox %s: the image's service %s did not start: %s", sb->id, pool->service,
			 err.msg);
		return 0;
	}
	return 1;
}
