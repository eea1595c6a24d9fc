/* Work sent to a sandbox's agent: commands (exec, captured within bounds
 * per stream and in total, or streamed) and the other calls (files,
 * processes, ...), each an op on its sandbox's list so a destroy fails it;
 * their figures for /metrics. Only a RUNNING, unpaused sandbox with an
 * agent gets work; everything from the agent is the agent client's to
 * check. Loop thread only. */
#include "sup_core.h"

#include <errno.h>
#include <event2/buffer.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sup_agent.h"
#include "sup_core_int.h"
#include "sup_core_op_int.h"
#include "sup_log.h"
#include "sup_sandbox.h"

enum exec_result { EXEC_EXITED, EXEC_SIGNALED, EXEC_TIMED_OUT, EXEC_FAILED };
const char *const sup_core_exec_results[SUP_CORE_EXEC_RESULTS] = { "exited", "signaled",
								   "timed_out", "failed" };

/* ---- captured output: bounded per stream and in total ---- */

void sup_core_bytes_free(sup_bytes *b)
{
	*b->budget_used -= b->len;
	free(b->p);
	b->p = NULL;
	b->len = 0;
}

static void bytes_append(sup_bytes *b, const uint8_t *p, size_t n)
{
	size_t room = b->limit - b->len;
	size_t global = b->budget > *b->budget_used ? b->budget - *b->budget_used : 0;
	if (room > global)
		room = global;
	if (n > room) {
		b->truncated = true;
		n = room;
	}
	if (n == 0)
		return;
	if (b->len + n > b->alloc) {
		size_t a = b->alloc ? b->alloc : 4096;
		while (a < b->len + n)
			a *= 2;
		if (a > b->limit)
			a = b->limit;
		uint8_t *q = realloc(b->p, a);
		if (!q) {
			b->truncated = true;
			return;
		}
		b->p = q;
		b->alloc = a;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	*b->budget_used += n;
}

/* ---- exec ---- */

static void exec_on_data(sup_exec_call *call, sup_chan ch, const uint8_t *p, size_t n,
			 size_t cost, void *ud)
{
	sup_op *op = ud;
	if (op->u.exec.scb) {
		op->u.exec.scb->on_data(ch, p, n, cost, op->ud);
		return;
	}
	bytes_append(ch == SUP_CH_STDOUT ? &op->u.exec.out : &op->u.exec.err, p, n);
	/* Buffered (or dropped past the cap): the agent may send more at once,
	 * so a chatty command is never blocked by the cap. */
	sup_agent_exec_consumed(call, cost);
}

static uint64_t elapsed_us(const struct timespec *start)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t us = (int64_t)(now.tv_sec - start->tv_sec) * 1000000 +
		     (now.tv_nsec - start->tv_nsec) / 1000;
	return us < 0 ? 0 : (uint64_t)us;
}

static void count_exec(sup_core *c, int rc, const sup_exec_status *st, uint64_t us)
{
	enum exec_result r = EXEC_FAILED;
	if (st)
		r = st->timed_out ? EXEC_TIMED_OUT : st->exited ? EXEC_EXITED : EXEC_SIGNALED;
	c->execs[r]++;
	if (rc == 0 || st)
		sup_hist_observe(&c->exec_seconds, (double)us / 1e6);
	if (st && st->oom_killed)
		c->oom_killed++;
}

static void exec_on_done(sup_exec_call *call, int rc, const sup_exec_status *st,
			 const sbx_err *err, void *ud)
{
	sup_op *op = ud;
	(void)call;
	TAILQ_REMOVE(&op->sb->execs, op, link);
	op->u.exec.call = NULL;
	if (rc == -ETIME)
		sup_core_count_timeout(op->sb, err);
	count_exec(op->core, rc, st, elapsed_us(&op->u.exec.start));
	if (st && st->oom_killed)
		sup_core_tell(op->core, SUP_LIFE_OOM, op->sb);
	if (op->u.exec.scb) {
		sup_exec_status s2;
		if (rc == 0) {
			s2 = *st;
			uint64_t measured = elapsed_us(&op->u.exec.start);
			if (!s2.duration_us || s2.duration_us > measured)
				s2.duration_us = measured;
		}
		op->u.exec.scb->on_done(rc, rc == 0 ? &s2 : NULL, err, op->ud);
	} else if (rc == 0 || (rc == -ETIME && st)) {
		sup_exec_result r = {
			.st = *st,
			.out = op->u.exec.out.p,
			.out_len = op->u.exec.out.len,
			.out_truncated = op->u.exec.out.truncated,
			.err = op->u.exec.err.p,
			.err_len = op->u.exec.err.len,
			.err_truncated = op->u.exec.err.truncated,
		};
		/* The guest's own figure is more precise, but not above what we
		 * measured around it. */
		uint64_t measured = elapsed_us(&op->u.exec.start);
		if (!r.st.duration_us || r.st.duration_us > measured)
			r.st.duration_us = measured;
		op->u.exec.cb(rc, &r, err, op->ud);
	} else {
		op->u.exec.cb(rc, NULL, err, op->ud);
	}
	sup_core_bytes_free(&op->u.exec.out);
	sup_core_bytes_free(&op->u.exec.err);
	free(op);
}

static const sup_exec_cbs exec_cbs = {
	.on_data = exec_on_data,
	.on_done = exec_on_done,
};

/* The sandbox id names, with a live agent to send work to; NULL with err
 * (a negative code) when there is none. */
static sup_sandbox *running_sandbox(sup_core *c, const char *id, sbx_err *err)
{
	sup_sandbox *sb = c->shutting_down ? NULL : sup_core_lookup(c, id);
	if (c->shutting_down)
		sbx_err_set(err, -ESHUTDOWN, "the supervisor is shutting down");
	else if (!sb)
		sbx_err_set(err, -ENOENT, "no sandbox %.64s", id);
	else if (sb->state == SUP_SB_DESTROYING)
		sbx_err_set(err, -EBUSY, "sandbox %s is being destroyed", sb->id);
	else if (sb->state != SUP_SB_RUNNING || !sb->agent)
		sbx_err_set(err, -ECONNRESET, "sandbox %s failed (%s); delete it and create another",
			    sb->id, sb->reason[0] ? sb->reason : "the agent connection was lost");
	else if (sb->paused)
		/* the one check: exec, files, ports, MCP and processes all come here */
		sbx_err_set(err, -EHOSTDOWN, "sandbox %s is paused; resume it first", sb->id);
	else
		return sb;
	return NULL;
}

sup_agent *sup_core_agent(sup_core *c, const char *id, sbx_err *err)
{
	sup_sandbox *sb = running_sandbox(c, id, err);

	return sb ? sb->agent : NULL;
}

/* The policy every command passes, in the foreground or not: root only
 * with --allow-root (the agent checks the uid the user resolves to). */
static sup_sandbox *command_sandbox(sup_core *c, const char *id, sup_exec_spec *spec, sbx_err *err)
{
	sup_sandbox *sb = running_sandbox(c, id, err);
	if (!sb)
		return NULL;
	if (spec->x.user && (strcmp(spec->x.user, "root") == 0 || strcmp(spec->x.user, "0") == 0) &&
	    !sb->allow_root) {
		sbx_err_set(err, -EPERM,
			    "running as root is not allowed for tenant %s (allow_root, or --allow-root without --tenants)",
			    sb->tenant);
		return NULL;
	}
	spec->x.allow_root = sb->allow_root;
	/* the image's User (when not root) and WorkingDir are the defaults */
	const sup_env *image_env;
	const char *image_user, *image_workdir;
	sup_pools_image_config(sb, &image_env, &image_user, &image_workdir);
	if ((!spec->x.user && image_user && !(spec->x.user = strdup(image_user))) ||
	    (!spec->x.cwd && image_workdir && !(spec->x.cwd = strdup(image_workdir)))) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	return sb;
}

int sup_core_command_prepare(sup_core *c, const char *id, sup_exec_spec *spec, const sup_env **env,
			     sbx_err *err)
{
	sup_sandbox *sb = command_sandbox(c, id, spec, err);
	if (!sb)
		return err->code;
	*env = &sb->env;
	return 0;
}

static int exec_start(sup_core *c, const char *id, sup_exec_spec *spec, sup_core_exec_cb cb,
		      const sup_core_stream_cbs *scb, void *ud, sup_op **opp, sbx_err *err)
{
	*opp = NULL;
	sup_sandbox *sb = command_sandbox(c, id, spec, err);
	if (!sb)
		return err->code;
	int rc;
	unsigned inflight = 0;
	sup_op *o;
	TAILQ_FOREACH(o, &sb->execs, link)
	inflight += o->kind == OP_EXEC;
	if (inflight >= c->cfg.max_execs)
		return sbx_err_set(err, -EAGAIN, "sandbox %s already runs %u commands; try again later",
				   sb->id, inflight);
	sup_op *op = calloc(1, sizeof(*op));
	if (!op)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	op->core = c;
	op->kind = OP_EXEC;
	op->ud = ud;
	op->sb = sb;
	op->u.exec.cb = cb;
	op->u.exec.scb = scb;
	sup_bytes proto = { .limit = spec->max_output_set ? spec->max_output : c->cfg.max_output,
			    .budget_used = &c->captured,
			    .budget = c->cfg.max_output_total };
	op->u.exec.out = proto;
	op->u.exec.err = proto;
	clock_gettime(CLOCK_MONOTONIC, &op->u.exec.start);
	rc = sup_agent_exec(sb->agent, spec, &sb->env, &exec_cbs, op, &op->u.exec.call, err);
	if (rc == 0)
		spec->stdin_data = NULL; /* the call owns it now */
	sup_exec_spec_free(spec);
	if (rc < 0) {
		free(op);
		return sbx_err_wrap(err, "sandbox %s", sb->id);
	}
	TAILQ_INSERT_TAIL(&sb->execs, op, link);
	*opp = op;
	return 0;
}

int sup_core_exec(sup_core *c, const char *id, sup_exec_spec *spec, sup_core_exec_cb cb,
		  void *ud, sup_op **opp, sbx_err *err)
{
	return exec_start(c, id, spec, cb, NULL, ud, opp, err);
}

int sup_core_exec_stream(sup_core *c, const char *id, sup_exec_spec *spec,
			 const sup_core_stream_cbs *cbs, void *ud, sup_op **opp, sbx_err *err)
{
	return exec_start(c, id, spec, NULL, cbs, ud, opp, err);
}

void sup_op_consumed(sup_op *op, size_t cost)
{
	if (op->kind == OP_EXEC && op->u.exec.call)
		sup_agent_exec_consumed(op->u.exec.call, cost);
	else if (op->kind == OP_CALL && op->u.call.call)
		sup_agent_call_consumed(op->u.call.call, cost);
}

/* ---- other agent operations ---- */

static void call_on_data(sup_agent_call *call, const char *ch, size_t ch_len, const uint8_t *p,
			 size_t n, size_t cost, void *ud)
{
	sup_op *op = ud;
	if (op->u.call.cbs->on_output) {
		op->u.call.cbs->on_output(sup_agent_chan(ch, ch_len), p, n, cost, op->ud);
		return;
	}
	if (!op->u.call.cbs->on_data) {
		sup_agent_call_consumed(call, cost);
		return;
	}
	op->u.call.cbs->on_data(p, n, cost, op->ud);
}

static void call_on_event(sup_agent_call *call, const msgpack_object *map, size_t cost, void *ud)
{
	sup_op *op = ud;
	if (!op->u.call.cbs->on_event) {
		sup_agent_call_consumed(call, cost);
		return;
	}
	op->u.call.cbs->on_event(map, cost, op->ud);
}

static void call_on_done(sup_agent_call *call, int rc, const msgpack_object *result,
			 const sbx_err *err, void *ud)
{
	sup_op *op = ud;
	(void)call;
	TAILQ_REMOVE(&op->sb->execs, op, link);
	op->u.call.call = NULL;
	if (rc == -ETIME)
		sup_core_count_timeout(op->sb, err);
	op->u.call.cbs->on_done(rc, result, err, op->ud);
	free(op);
}

static void call_on_writable(sup_agent_call *call, void *ud)
{
	sup_op *op = ud;
	(void)call;
	if (op->u.call.cbs->on_writable)
		op->u.call.cbs->on_writable(op->ud);
}

static const sup_agent_call_cbs call_cbs = {
	.on_data = call_on_data,
	.on_writable = call_on_writable,
	.on_event = call_on_event,
	.on_done = call_on_done,
};

int sup_core_call_add_data(sup_op *op, const uint8_t *p, size_t n, struct evbuffer *dst)
{
	if (op->kind == OP_CALL && op->u.call.call)
		return sup_agent_call_add_data(op->u.call.call, p, n, dst);
	return n == 0 || evbuffer_add(dst, p, n) == 0 ? 0 : -ENOMEM;
}

int sup_core_call_send(sup_op *op, const char *ch, const uint8_t *p, size_t n, bool eof,
		       sbx_err *err)
{
	if (op->kind != OP_CALL || !op->u.call.call)
		return sbx_err_set(err, -EINVAL, "not an agent call");
	return sup_agent_call_send(op->u.call.call, ch, p, n, eof, err);
}

int sup_core_call_send_from(sup_op *op, const char *ch, struct evbuffer *src, size_t n,
			    sbx_err *err)
{
	if (op->kind != OP_CALL || !op->u.call.call)
		return sbx_err_set(err, -EINVAL, "not an agent call");
	return sup_agent_call_send_from(op->u.call.call, ch, src, n, err);
}

int sup_core_call(sup_core *c, const char *id, const char *opname, sbx_proto_args *args,
		  const sup_core_call_cbs *cbs, void *ud, sup_op **opp, sbx_err *err)
{
	*opp = NULL;
	size_t args_len = 0;
	const char *enc = sbx_proto_args_done(args, &args_len);
	sup_sandbox *sb = running_sandbox(c, id, err);
	sup_op *op = sb && enc ? calloc(1, sizeof(*op)) : NULL;
	int rc;
	if (!op) {
		sbx_proto_args_destroy(args);
		return sb ? sbx_err_set(err, -ENOMEM, "out of memory") : err->code;
	}
	op->core = c;
	op->kind = OP_CALL;
	op->ud = ud;
	op->sb = sb;
	op->u.call.cbs = cbs;
	rc = sup_agent_call_start(sb->agent, opname, enc, args_len, cbs->wait, 0, &call_cbs, op,
				  &op->u.call.call, err);
	sbx_proto_args_destroy(args);
	if (rc < 0) {
		free(op);
		return sbx_err_wrap(err, "sandbox %s", sb->id);
	}
	TAILQ_INSERT_TAIL(&sb->execs, op, link);
	*opp = op;
	return 0;
}
