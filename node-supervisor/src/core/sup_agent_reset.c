/* The agent's reset over an agent call (sup_agent_reset.h). */
#include "sup_agent_reset.h"

#include <errno.h>
#include <stdlib.h>

#include "sbx/proto.h"

/* Beyond the kills' timeout: emptying folders of many files takes its
 * time (a tree of 100,000 files about a second here). */
#define EMPTY_MS 30000u

typedef struct sup_agent_reset_call {
	sup_agent_call *call;
	sup_agent_reset_cb cb;
	void *ud;
} reset_call;

static void reset_data(sup_agent_call *call, const char *ch, size_t ch_len, const uint8_t *p, size_t n,
		       size_t cost, void *ud)
{
	sup_agent_call_consumed(call, cost);
	sup_agent_blame(sup_agent_call_agent(call), "the agent sent data on a reset");
}

static void reset_done(sup_agent_call *call, int rc, const msgpack_object *result, const sbx_err *err, void *ud)
{
	reset_call *x = ud;
	sbx_proto_reset_result r;
	sbx_err e;

	sbx_err_clear(&e);
	if (rc == 0 && (rc = sbx_proto_reset_parse_result(result, &r, &e)) < 0) {
		sbx_err_wrap(&e, "the agent broke the protocol");
		sup_agent_blame(sup_agent_call_agent(call), "%s", e.msg);
		rc = e.code = -EPROTO;
		err = &e;
	}
	x->cb(rc, rc == 0 ? &r : NULL, rc == 0 ? NULL : err, x->ud);
	free(x);
}

static const sup_agent_call_cbs reset_cbs = {
	.on_data = reset_data,
	.on_done = reset_done,
};

int sup_agent_reset(sup_agent *a, const char *const *paths, size_t npaths, uint64_t timeout_ms,
		    sup_agent_reset_cb cb, void *ud, sup_agent_reset_call **out, sbx_err *err)
{
	sbx_proto_reset_args args = { .npaths = npaths, .timeout_ms = timeout_ms };
	msgpack_sbuffer sb;
	msgpack_packer pk;
	reset_call *x;
	int rc;

	if (npaths > SBX_RESET_MAX_PATHS)
		return sbx_err_set(err, -EINVAL, "reset: more than %u folders", SBX_RESET_MAX_PATHS);
	for (size_t i = 0; i < npaths; i++)
		args.paths[i] = paths[i];
	msgpack_sbuffer_init(&sb);
	msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
	rc = sbx_proto_reset_pack_args(&pk, &args, err);
	if (rc == 0) {
		x = calloc(1, sizeof(*x));
		if (!x) {
			msgpack_sbuffer_destroy(&sb);
			return sbx_err_set(err, -ENOMEM, "reset: out of memory");
		}
		x->cb = cb;
		x->ud = ud;
		/* the agent's own deadline for its kills and the emptying,
		 * plus the grace the connection gives every call with a
		 * timeout */
		rc = sup_agent_call_start(a, SBX_OP_RESET, sb.data, sb.size, SUP_AGENT_WAIT_ANSWER,
					  (timeout_ms ? timeout_ms : SBX_RESET_DEFAULT_TIMEOUT_MS) + EMPTY_MS, &reset_cbs, x,
					  &x->call, err);
		if (rc < 0)
			free(x);
		else
			*out = x;
	}
	msgpack_sbuffer_destroy(&sb);
	return rc;
}

void sup_agent_reset_cancel(sup_agent_reset_call *x)
{
	sup_agent_call_cancel(x->call);
	free(x);
}
