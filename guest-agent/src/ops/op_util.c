#include "op_util.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>

#include "exec_spec.h"

static uint64_t tv_ms(const struct timeval *tv)
{
	return (uint64_t)tv->tv_sec * 1000u + (uint64_t)tv->tv_usec / 1000u;
}

void agent_op_pack_result_pairs(msgpack_packer *pk, const agent_proc_result *r)
{
	sbx_proto_pack_str(pk, "exit_code");
	if (WIFEXITED(r->status))
		msgpack_pack_int(pk, WEXITSTATUS(r->status));
	else
		msgpack_pack_nil(pk);
	sbx_proto_pack_str(pk, "signal");
	if (WIFSIGNALED(r->status))
		msgpack_pack_int(pk, WTERMSIG(r->status));
	else
		msgpack_pack_nil(pk);
	sbx_proto_pack_str(pk, "timed_out");
	if (r->timed_out)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
	sbx_proto_pack_str(pk, "oom_killed");
	if (r->oom_killed)
		msgpack_pack_true(pk);
	else
		msgpack_pack_false(pk);
	sbx_proto_pack_str(pk, "duration_us");
	msgpack_pack_uint64(pk, r->duration_us);
	sbx_proto_pack_str(pk, "rusage");
	msgpack_pack_map(pk, 3);
	sbx_proto_pack_str(pk, "max_rss_kb");
	msgpack_pack_uint64(pk, r->rusage.ru_maxrss > 0 ? (uint64_t)r->rusage.ru_maxrss : 0);
	sbx_proto_pack_str(pk, "user_ms");
	msgpack_pack_uint64(pk, tv_ms(&r->rusage.ru_utime));
	sbx_proto_pack_str(pk, "sys_ms");
	msgpack_pack_uint64(pk, tv_ms(&r->rusage.ru_stime));
}

void agent_op_pack_result(msgpack_packer *pk, const agent_proc_result *r, uint32_t extra)
{
	msgpack_pack_map(pk, AGENT_OP_RESULT_PAIRS + extra);
	agent_op_pack_result_pairs(pk, r);
}

const msgpack_object *agent_op_arg(const msgpack_object *args, const char *key)
{
	const msgpack_object *o;

	if (args->type != MSGPACK_OBJECT_MAP)
		return NULL;
	o = sbx_proto_map_get(args, key);
	return o && o->type != MSGPACK_OBJECT_NIL ? o : NULL;
}

int agent_op_signal_arg(const msgpack_object *o, const char *what, int *sig, sbx_err *err)
{
	if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 < 1 ||
	    (o->via.u64 > 31 && o->via.u64 < (uint64_t)SIGRTMIN) || o->via.u64 > (uint64_t)SIGRTMAX)
		return sbx_err_set(err, -EINVAL, "%s: signal must be a signal number, 1..31 or %d..%d", what,
				   SIGRTMIN, SIGRTMAX);
	*sig = (int)o->via.u64;
	return 0;
}

int agent_op_ctl(agent_proc *p, const msgpack_object *args, sbx_err *err)
{
	const msgpack_object *sig, *resize;
	int ret, signo = 0;

	if (args->type != MSGPACK_OBJECT_MAP)
		return 0;
	sig = sbx_proto_map_get(args, "signal");
	resize = sbx_proto_map_get(args, "resize");
	if (sig) {
		ret = agent_op_signal_arg(sig, "ctl", &signo, err);
		if (ret < 0)
			return ret;
		ret = agent_proc_signal(p, signo, err);
		if (ret < 0)
			return ret;
	}
	if (resize) {
		uint16_t cols = 0, rows = 0;

		if (resize->type != MSGPACK_OBJECT_MAP || !sbx_proto_map_get(resize, "cols") ||
		    !sbx_proto_map_get(resize, "rows"))
			return sbx_err_set(err, -EINVAL, "ctl: resize must be {\"cols\": n, \"rows\": n}");
		ret = agent_exec_spec_parse_size(resize, &cols, &rows, err);
		if (ret < 0)
			return ret;
		ret = agent_proc_resize(p, cols, rows, err);
		/* Resizing a command without a terminal is the requester's
		 * mistake, not the agent's. */
		if (ret == -ENOTTY)
			return -EINVAL;
		return ret;
	}
	return 0;
}

sbx_proto_code agent_op_start_code(int neg_errno)
{
	switch (neg_errno) {
	case -EINVAL:
		return SBX_PROTO_E_BAD_REQUEST;
	case -ENOENT:
		return SBX_PROTO_E_NOT_FOUND;
	case -EPERM:
	case -EACCES:
		return SBX_PROTO_E_PERMISSION;
	default:
		return SBX_PROTO_E_EXEC_FAILED;
	}
}
