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

void agent_op_ping(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_info(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_exec(agent_session *s, uint64_t id, const msgpack_object *args);
/* op_proc.c, op_proc_io.c: background processes (proc.*). */
void agent_op_proc_start(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_proc_list(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_proc_get(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_proc_signal(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_proc_kill(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_proc_resize(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_proc_output(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_proc_stdin(agent_session *s, uint64_t id, const msgpack_object *args);
/* op_file.c: file.read, file.write (streams). */
void agent_op_file_read(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_file_write(agent_session *s, uint64_t id, const msgpack_object *args);
/* op_fs.c: fs.* answered at once. */
void agent_op_fs_stat(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_fs_list(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_fs_mkdir(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_fs_move(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_fs_remove(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_fs_chmod(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_fs_search(agent_session *s, uint64_t id, const msgpack_object *args);
/* op_mcp.c: MCP servers (mcp.configure/remove/list) and sessions (mcp.open). */
void agent_op_mcp_configure(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_mcp_remove(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_mcp_list(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_mcp_open(agent_session *s, uint64_t id, const msgpack_object *args);
/* op_port.c: port.open (a TCP byte stream on loopback), port.list. */
void agent_op_port_open(agent_session *s, uint64_t id, const msgpack_object *args);
void agent_op_port_list(agent_session *s, uint64_t id, const msgpack_object *args);
/* op_reset.c: reset (back to a fresh sandbox; PID 1 only). */
void agent_op_reset(agent_session *s, uint64_t id, const msgpack_object *args);
/* op_watch.c: fs.watch (a stream of events). */
void agent_op_fs_watch(agent_session *s, uint64_t id, const msgpack_object *args);

#endif
