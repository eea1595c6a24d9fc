/* What exec and the proc.* operations share: the result map of a finished
 * command, ctl handling (signal, resize), signal numbers, and the protocol
 * code of a failed start. Encoding and validation only; it must not keep
 * state or send frames. */
#ifndef AGENT_OP_UTIL_H
#define AGENT_OP_UTIL_H

#include <msgpack.h>

#include "sbx/err.h"
#include "sbx/proto.h"
#include "proc.h"

/* The result keys of a finished command: exit_code, signal, timed_out,
 * oom_killed, duration_us, rusage {max_rss_kb, user_ms, sys_ms}. Packs a map
 * of AGENT_OP_RESULT_PAIRS + extra pairs; the caller packs the extra ones. */
#define AGENT_OP_RESULT_PAIRS 6u
void agent_op_pack_result(msgpack_packer *pk, const agent_proc_result *r, uint32_t extra);
/* Just the pairs (for a map the caller opened). */
void agent_op_pack_result_pairs(msgpack_packer *pk, const agent_proc_result *r);

/* args[key] when args is a map and the key is there and not nil. */
const msgpack_object *agent_op_arg(const msgpack_object *args, const char *key);

/* A signal number a client may send: 1..31 or SIGRTMIN..SIGRTMAX (32 and
 * 33 belong to the C library's threads). -EINVAL with a message. */
int agent_op_signal_arg(const msgpack_object *o, const char *what, int *sig, sbx_err *err);

/* A ctl frame's args: {"signal": n} to the process group, {"resize":
 * {"cols", "rows"}} to the terminal; other keys are ignored. -EINVAL on bad
 * values, else what the signal or resize returned. */
int agent_op_ctl(agent_proc *p, const msgpack_object *args, sbx_err *err);

/* The code for a failed agent_proc_start: bad_request (bad user name or
 * limits), not_found (no such user), permission_denied (root not allowed,
 * a hard limit above the sandbox's), else exec_failed. */
sbx_proto_code agent_op_start_code(int neg_errno);

#endif
