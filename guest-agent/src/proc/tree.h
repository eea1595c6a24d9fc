/* A command's process tree, and the one way to end all of it.
 *
 * Every command runs under a holder: a forked copy of the agent that is a
 * child subreaper (PR_SET_CHILD_SUBREAPER) and forks the command. Whatever
 * the command starts, double-forked and setsid daemons included, is the
 * holder's descendant for good: an orphan is reparented to its nearest
 * subreaper ancestor, which is the holder (or a subreaper inside the tree),
 * never the agent. A process cannot otherwise change its parent, so the
 * holder's subtree is exactly the command's tree. A kill asks the holder to
 * SIGKILL it top-down: a killed process can no longer fork (the kernel
 * refuses a fork with a fatal signal pending), so the children it has are
 * final once it is killed; the holder sweeps again until nothing is left.
 *
 * The holder reaps the command and reports its wait status and rusage over a
 * pipe; then it reaps the orphans and leaves once it has no child left. So a
 * finished exec's leftovers (`nohup server &`) keep running, and a kill
 * still reaches them until they are gone.
 *
 * Pids stay those of the sandbox's one PID namespace: ps, kill, pkill and
 * /proc/<pid> mean the same in every command. No capability is needed
 * beyond what the agent has as root. (Per-command PID namespaces were
 * rejected: they need CAP_SYS_ADMIN, and a command would see /proc with
 * pids that are not its own (procps' ps fails) unless it also got a mount
 * namespace with its own /proc, hiding every other command's processes.)
 *
 * A root command (allow_root) can signal its holder (both are uid 0, so
 * no capability is needed: dropping CAP_KILL would not stop it, and with
 * CAP_SETUID it could take any uid the holder might have). So killing or
 * stopping its holder is made harmless rather than impossible: a holder
 * only ever leaves by itself, so one that was killed left its tree to the
 * agent (the nearest subreaper), whose only other children are holders;
 * the agent then kills everything below it that is not a holder, as a
 * holder sweeps, and ends the command as killed. A holder asked to kill
 * gets SIGCONT too, and if it is still there a second later (stopped
 * again) the agent kills it, which comes to the same sweep.
 *
 * Where a holder cannot be a subreaper (gVisor answers EINVAL to
 * PR_SET_CHILD_SUBREAPER but for init), orphans go to the agent, and the
 * tree is marked instead: the command gets one more supplementary group, a
 * gid of its own (AGENT_TREE_MARK_BASE + n) that every descendant inherits
 * and none can drop (setgroups needs CAP_SETGID, which no command keeps in
 * this mode: root's is taken too, agent_jail_mark). The tree is every
 * process whose /proc/<pid>/status lists that gid. A holder cannot wait for
 * orphans, so it leaves once it has no child (the command's answer comes
 * then); a kill, by the holder or (once it left, or was killed) by the
 * agent, sweeps every process with the mark until none is left, never by
 * parentage (the agent is every orphan's parent then). `id` shows the gid,
 * which names no group and owns no file.
 *
 * This module owns holders, the report pipe and tree kills; it must not know
 * about the command's stdio, sinks or the protocol. Loop thread only. */
#ifndef AGENT_TREE_H
#define AGENT_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "sbx/err.h"

struct event_base;
typedef struct agent_tree agent_tree;

/* How to run the command in the holder's child. fn must not return; it
 * runs (vforked: until its exec it shares the holder's memory, so it may
 * only write its own stack) with every signal blocked and the agent's
 * handlers reset; it sets up its process group or session itself, before
 * its exec, so the group exists once the agent hears of the pid. keep are
 * the fds it needs (others are closed in the holder); the holder closes
 * them once the command is started, so that pipes see EOF when the tree is
 * done with them. */
typedef struct agent_tree_cmd {
	void (*fn)(void *arg);
	void *arg;
	int keep[4];
	size_t nkeep;
	/* When the holder cannot fork: "sandbox-agent: fork: ..." goes to
	 * err_fd and the command "exits" with fail_exit. */
	int err_fd;
	int fail_exit;
	/* The tree's mark (agent_tree_next_mark), which fn must add to the
	 * command's groups; 0 where holders are subreapers. */
	gid_t mark;
} agent_tree_cmd;

typedef struct agent_tree_cbs {
	/* The command runs as pid (also its process group, or session with a
	 * terminal). Optional. */
	void (*started)(pid_t pid, void *ud);
	/* The command was reaped by its holder: status and rusage as from
	 * wait4. Called once, last; if the holder dies first (killed by
	 * root), with SIGKILL. pid is 0 if it never started. */
	void (*exited)(pid_t pid, int status, const struct rusage *ru, void *ud);
} agent_tree_cbs;

/* Marks: gids from here on, one per tree at a time. */
#define AGENT_TREE_MARK_BASE 2146435072u /* 2^31 - 2^20 */
#define AGENT_TREE_MARK_COUNT 1048576u

/* How trees are held and swept. Holders are subreapers where the kernel
 * lets them (else trees are marked, see above); sweeps find a process's
 * children through /proc/<pid>/task/<tid>/children where the kernel has it,
 * else (gVisor) one scan of every /proc/<pid>/stat per sweep. Call once at
 * start, before any holder is forked; *how says which, for the log. Without
 * a readable /proc, -errno: no tree could be killed whole, so
 * agent_tree_spawn refuses every command (-ENOSYS). force_mark: mark trees
 * even where subreapers work (tests of the gVisor way on Linux). */
int agent_tree_probe(bool force_mark, const char **how);
/* The mark for the next command's tree, or 0 where trees are not marked. */
gid_t agent_tree_next_mark(void);

/* Fork the holder, which forks the command; returns at once, the rest
 * comes through cbs from the loop (the agent never waits for a fork or an
 * exec). *t holds one reference for the caller. */
int agent_tree_spawn(struct event_base *base, const agent_tree_cmd *cmd, const agent_tree_cbs *cbs, void *ud,
		     agent_tree **t, sbx_err *err);

agent_tree *agent_tree_ref(agent_tree *t);
/* The owner leaves: no callback after this. */
void agent_tree_forget_owner(agent_tree *t);
void agent_tree_unref(agent_tree *t);

/* SIGKILL the whole tree (the command's end comes through exited), also
 * before the command started. 0 also when it is already gone. */
int agent_tree_kill(agent_tree *t, sbx_err *err);
/* The command (or what it left behind) may still run. */
bool agent_tree_alive(const agent_tree *t);

/* Shutdown: kill every tree, lingering ones included. */
void agent_tree_kill_all(void);
/* Holders not yet reaped (running commands and lingering leftovers). */
size_t agent_tree_holders(void);
/* At exit only: forget every holder without waiting (as PID 1 the kernel
 * kills what is left; otherwise each holder's parent-death signal does). */
void agent_tree_discard_all(void);

#endif
