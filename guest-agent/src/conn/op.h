/* The interface between a session and the operations it serves.
 *
 * A REQ starts an operation (agent_op_start_fn). A short one answers at once
 * with END/ERR and keeps nothing. A long one (exec) embeds agent_op, attaches
 * it to the session so the stream's later frames (DATA, CTL, CANCEL) and
 * credit reach it, and detaches itself right before it sends its final
 * frame. Operations own their work; they must not read the socket or know
 * about other streams. */
#ifndef AGENT_OP_H
#define AGENT_OP_H

#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#include "sbx/proto.h"

typedef struct agent_session agent_session;
typedef struct agent_op agent_op;

typedef struct agent_op_vtbl {
	/* DATA, CTL or CANCEL from the requester on the op's stream. */
	void (*frame)(agent_op *op, const sbx_proto_frame *f);
	/* Send credit grew (or the socket drained): output may go on. */
	void (*writable)(agent_op *op);
	/* The connection is gone: stop the work and free op; no frames. */
	void (*abort)(agent_op *op);
} agent_op_vtbl;

struct agent_op {
	const agent_op_vtbl *vt;
	agent_session *session;
	uint64_t id;
	agent_op *prev, *next; /* the session's list */
};

/* Start an operation for REQ id with its args (a map or NIL). */
typedef void (*agent_op_start_fn)(agent_session *s, uint64_t id, const msgpack_object *args);

/* The operations a session serves, by name (SBX_OP_*): the table lives
 * with them (ops/op_table.c), so this floor names none of them. */
typedef struct agent_op_entry {
	const char *name;
	agent_op_start_fn start;
} agent_op_entry;
extern const agent_op_entry agent_op_table[];
extern const size_t agent_op_count;

#endif
