/* sup_agent_exec: the exec operation typed on top of a generic call (see
 * sup_agent.h): its argument map, channel names to sup_chan, stdin within
 * credit, and the timed-out status when the supervisor's deadline passed.
 * The result an untrusted agent sends is checked in sup_agent_result.c. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "sup_agent.h"

/* Exec adapter: channel names to sup_chan, END map to sup_exec_status. */
struct sup_exec_call {
	sup_agent_call *call;
	const sup_exec_cbs *cbs;
	void *ud;
	uint8_t *in;      /* stdin still to send, then EOF */
	size_t in_len;
	size_t in_off;
	bool in_pending;  /* EOF not sent yet */
	bool timed;       /* the command has a timeout */
};

int sup_agent_encode_exec_args(const sup_exec_spec *spec, const sup_env *base_env,
			       sbx_proto_args *a, sbx_err *err)
{
	if (!spec->x.argv == !spec->x.cmd)
		return sbx_err_set(err, -EINVAL, "exec: exactly one of argv and cmd");
	sbx_proto_exec_encode(&spec->x, base_env, a);
	return 0;
}

sup_chan sup_agent_chan(const char *ch, size_t ch_len)
{
	if (ch_len == strlen(SBX_CH_STDOUT) && memcmp(ch, SBX_CH_STDOUT, ch_len) == 0)
		return SUP_CH_STDOUT;
	if (ch_len == strlen(SBX_CH_STDERR) && memcmp(ch, SBX_CH_STDERR, ch_len) == 0)
		return SUP_CH_STDERR;
	return 0;
}

static void exec_data(sup_agent_call *call, const char *ch, size_t ch_len, const uint8_t *p,
		      size_t n, size_t cost, void *ud)
{
	sup_exec_call *x = ud;
	sup_chan c = sup_agent_chan(ch, ch_len);
	if (!c) {
		/* A channel exec does not define: ignored, for forward compatibility. */
		sup_agent_call_consumed(call, cost);
		return;
	}
	x->cbs->on_data(x, c, p, n, cost, x->ud);
}

static void exec_done(sup_agent_call *call, int rc, const msgpack_object *result,
		      const sbx_err *err, void *ud)
{
	sup_exec_call *x = ud;
	sup_exec_status st;
	sbx_err e;
	const sup_exec_status *stp = NULL;
	if (rc == -ENOENT || rc == -EACCES || rc == -EEXIST || rc == -ENOSPC) {
		/* For exec these are a command that could not start: 400 as before. */
		e = *err;
		e.code = -EINVAL;
		err = &e;
		rc = -EINVAL;
	} else if (rc == -E2BIG) {
		/* exec has no too_large answer (the request fit the agent's
		 * max_frame, we checked): not the client's 413 */
		e = *err;
		sbx_err_wrap(&e, "the agent answered exec with an error it does not have");
		e.code = -EPROTO;
		err = &e;
		rc = -EPROTO;
	}
	if (rc == 0) {
		sbx_err_clear(&e);
		rc = sup_agent_parse_exec_result(result, &st, &e);
		if (rc < 0) {
			/* A result of the wrong shape: the guest broke the protocol. */
			sbx_err_wrap(&e, "the agent broke the protocol");
			sup_agent_blame(sup_agent_call_agent(call), "%s", e.msg);
			err = &e;
		} else {
			stp = &st;
		}
	} else if (rc == -ETIME && x->timed) {
		/* What the API documents for a command that timed out; the
		 * agent never confirmed the kill. */
		memset(&st, 0, sizeof(st));
		st.signal = SIGKILL;
		st.timed_out = true;
		st.kill_unconfirmed = true;
		stp = &st;
	}
	x->cbs->on_done(x, rc, stp, rc == 0 ? NULL : err, x->ud);
	free(x->in);
	free(x);
}

/* Send what the credit allows of stdin, then EOF. */
static void exec_pump_stdin(sup_exec_call *x)
{
	sbx_err e;
	while (x->in_pending) {
		size_t left = x->in_len - x->in_off;
		int rc = sup_agent_call_send(x->call, SBX_CH_STDIN, x->in + x->in_off, left, true, &e);
		if (rc < 0) {
			/* The stream is gone (the agent refused or ended it): its
			 * END/ERR tells the caller. */
			x->in_pending = false;
			break;
		}
		x->in_off += (size_t)rc;
		if ((size_t)rc == left)
			x->in_pending = false; /* the eof went with the last byte */
		else if (rc == 0)
			return; /* on_writable brings us back */
	}
	free(x->in);
	x->in = NULL;
}

static void exec_writable(sup_agent_call *call, void *ud)
{
	(void)call;
	sup_exec_call *x = ud;
	if (x->in_pending)
		exec_pump_stdin(x);
}

static const sup_agent_call_cbs exec_call_cbs = {
	.on_data = exec_data,
	.on_writable = exec_writable,
	.on_done = exec_done,
};

int sup_agent_exec(sup_agent *a, const sup_exec_spec *spec, const sup_env *base_env,
		   const sup_exec_cbs *cbs, void *ud, sup_exec_call **out, sbx_err *err)
{
	sbx_proto_args args;
	sbx_proto_args_init(&args);
	int rc = sup_agent_encode_exec_args(spec, base_env, &args, err);
	sup_exec_call *x = NULL;
	size_t len = 0;
	const char *enc = rc < 0 ? NULL : sbx_proto_args_done(&args, &len);
	if (rc < 0)
		goto out;
	if (!enc) {
		rc = sbx_err_set(err, -ENOMEM, "exec args");
		goto out;
	}
	x = calloc(1, sizeof(*x));
	if (!x) {
		rc = sbx_err_set(err, -ENOMEM, "exec call");
		goto out;
	}
	x->cbs = cbs;
	x->ud = ud;
	x->timed = spec->x.timeout_ms > 0;
	/* A command may rightly be silent until its timeout, or for ever
	 * without one: the deadline is the timeout (plus grace), else none. */
	rc = sup_agent_call_start(a, SBX_OP_EXEC, enc, len, SUP_AGENT_WAIT_QUIET,
				  spec->x.timeout_ms, &exec_call_cbs, x, &x->call, err);
	if (rc < 0)
		goto out;
	if (spec->x.stdin_pipe) {
		x->in = spec->stdin_data;
		x->in_len = spec->stdin_len;
		x->in_pending = true;
		exec_pump_stdin(x);
	}
	*out = sbx_steal_ptr(&x);
out:
	free(x);
	sbx_proto_args_destroy(&args);
	return rc;
}

void sup_agent_exec_consumed(sup_exec_call *x, size_t cost)
{
	sup_agent_call_consumed(x->call, cost);
}

void sup_agent_exec_cancel(sup_exec_call *x)
{
	sup_agent_call_cancel(x->call);
	free(x->in);
	free(x);
}
