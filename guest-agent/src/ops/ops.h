/* The operations: their start functions (ops/op_*.c), which the table of
 * op_table.c names for the session (conn/op.h). Each owns its work; none
 * reads the socket or knows another stream. */
#ifndef AGENT_OPS_H
#define AGENT_OPS_H

#include "op.h"

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
