/* The holder process of a command's tree (see tree.h): the code that runs in
 * the agent's forked child. Internal to tree.c.
 *
 * It must not allocate, take locks or use stdio (it is a fork of the
 * agent): system calls on stack buffers only. */
#ifndef AGENT_TREE_HOLDER_H
#define AGENT_TREE_HOLDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>

#include "tree.h"

/* Holder -> agent, each written at once (atomic: smaller than PIPE_BUF). */
enum {
	AGENT_TREE_MSG_STARTED = 1, /* value: the command's pid */
	AGENT_TREE_MSG_EXITED,      /* value: wait status; ru: its rusage */
};

/* EXITED flag: the command left nothing behind, the holder exits now. */
#define AGENT_TREE_MSG_LAST 1

typedef struct agent_tree_msg {
	int32_t kind;
	int32_t value;
	int32_t flags;
	struct rusage ru;
} agent_tree_msg;

/* Agent -> holder: SIGKILL the tree, then leave. */
#define AGENT_TREE_SIG_KILL SIGUSR1

/* Choose how sweeps find children (agent_tree_probe). */
int agent_tree_sweep_init(const char **how);

/* SIGKILL every descendant of root (not root), parents first, except the
 * subtrees of the pids spare (optional) says to keep. Returns how many were
 * signalled (zombies count). No allocation: the holder and the agent. */
size_t agent_tree_sweep(pid_t root, bool (*spare)(pid_t pid, void *ud), void *ud);

/* SIGKILL (kill_them) or only count every process but the caller whose
 * supplementary groups hold mark: a marked tree's members (tree.h).
 * Returns how many were found. No allocation. */
size_t agent_tree_sweep_mark(gid_t mark, bool kill_them);

/* Run as the holder: fork the command, report on report_fd, reap, kill on
 * request. Never returns. */
__attribute__((noreturn)) void agent_tree_holder_run(const agent_tree_cmd *cmd, int report_fd);

#endif
