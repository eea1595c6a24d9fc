/* What the proc.* operations (op_proc.c: start, list, get, signal, kill,
 * resize; op_proc_io.c: output, stdin) share: argument checks, the lookup
 * by pid, the description of a background process, answers. Internal to
 * those files; the operations themselves are declared in op.h. */
#ifndef AGENT_OP_PROC_H
#define AGENT_OP_PROC_H

#include <msgpack.h>

#include "sbx/proto.h"
#include "bg.h"
#include "ops.h"

/* An operation that watches a background process: the first member of
 * each long proc.* operation. */
typedef struct agent_proc_op {
	agent_op op;
	agent_bg_watch w;
	agent_bg *b; /* NULL once the process was dropped (gone) */
} agent_proc_op;

/* Allocate size bytes (a struct that starts with agent_proc_op), watch b
 * (changed/gone get the op) and attach to s as stream id. NULL, with an
 * ERR sent, when out of memory. */
void *agent_op_proc_new(agent_session *s, uint64_t id, size_t size, const agent_op_vtbl *vt, agent_bg *b,
			void (*changed)(void *ud), void (*gone)(void *ud));
/* Stop watching and free; detach from the session first if still attached
 * (detach false: the caller did, or the session is aborting it). */
void agent_op_proc_free(agent_proc_op *o, bool detach);
/* writable() of operations that send only their final frame. */
void agent_op_proc_no_writable(agent_op *op);

/* The "pid" argument, or an ERR sent (bad_request, not_found): NULL. */
agent_bg *agent_op_proc_find(agent_session *s, uint64_t id, const char *op, const msgpack_object *args);

/* A map describing b: pid, tag, state, started_ms, and once exited
 * ended_ms and the result (op_util.h); full adds argv, pty, stdin and
 * output {start, end, buffer}. The map has room for extra more pairs,
 * which the caller packs after. */
void agent_op_proc_pack(msgpack_packer *pk, const agent_bg *b, bool full, uint32_t extra);

/* END with b's short description plus "next_offset" when next >= 0. */
void agent_op_proc_end(agent_session *s, uint64_t id, const agent_bg *b, int64_t next);
void agent_op_proc_fail(agent_session *s, uint64_t id, sbx_proto_code code, const char *msg);
/* ERR for an sbx_err from bg.c: -ESRCH "has exited" is not_found, -EPIPE,
 * -ENOTTY and -EINVAL bad_request, -EBUSY exists, else internal. */
void agent_op_proc_fail_err(agent_session *s, uint64_t id, const sbx_err *err);

#endif
