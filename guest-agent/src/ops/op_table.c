/* The table of operations a session serves (conn/op.h): each op's name
 * (the protocol's SBX_OP_*) and its start function. */
#include "ops.h"

#include "sbx/proto.h"

const agent_op_entry agent_op_table[] = {
	{ SBX_OP_PING, agent_op_ping },
	{ SBX_OP_INFO, agent_op_info },
	{ SBX_OP_EXEC, agent_op_exec },
	{ SBX_OP_PROC_START, agent_op_proc_start },
	{ SBX_OP_PROC_LIST, agent_op_proc_list },
	{ SBX_OP_PROC_GET, agent_op_proc_get },
	{ SBX_OP_PROC_OUTPUT, agent_op_proc_output },
	{ SBX_OP_PROC_STDIN, agent_op_proc_stdin },
	{ SBX_OP_PROC_SIGNAL, agent_op_proc_signal },
	{ SBX_OP_PROC_KILL, agent_op_proc_kill },
	{ SBX_OP_PROC_RESIZE, agent_op_proc_resize },
	{ SBX_OP_FILE_READ, agent_op_file_read },
	{ SBX_OP_FILE_WRITE, agent_op_file_write },
	{ SBX_OP_FS_STAT, agent_op_fs_stat },
	{ SBX_OP_FS_LIST, agent_op_fs_list },
	{ SBX_OP_FS_MKDIR, agent_op_fs_mkdir },
	{ SBX_OP_FS_MOVE, agent_op_fs_move },
	{ SBX_OP_FS_REMOVE, agent_op_fs_remove },
	{ SBX_OP_FS_CHMOD, agent_op_fs_chmod },
	{ SBX_OP_FS_SEARCH, agent_op_fs_search },
	{ SBX_OP_FS_WATCH, agent_op_fs_watch },
	{ SBX_OP_MCP_CONFIGURE, agent_op_mcp_configure },
	{ SBX_OP_MCP_REMOVE, agent_op_mcp_remove },
	{ SBX_OP_MCP_LIST, agent_op_mcp_list },
	{ SBX_OP_MCP_OPEN, agent_op_mcp_open },
	{ SBX_OP_PORT_OPEN, agent_op_port_open },
	{ SBX_OP_PORT_LIST, agent_op_port_list },
	{ SBX_OP_RESET, agent_op_reset },
};

const size_t agent_op_count = sizeof(agent_op_table) / sizeof(agent_op_table[0]);
