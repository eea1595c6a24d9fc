/* A running command on the event loop: its pipes, its exit, its timeout.
 *
 * proc starts the command (spawn.c), reads stdout/stderr only while its owner
 * has room for the bytes (that is the backpressure: a full owner makes the
 * command block on write, nothing is buffered here), feeds stdin from a
 * bounded buffer, kills the process group on timeout, and reports the end
 * once the process was reaped and both pipes are closed. Pipes held open by a
 * background grandchild after the main process died get a short grace, then
 * what they hold at that moment is passed on and they are closed.
 *
 * With a terminal ("pty"), its master carries the output (as stdout) and
 * takes stdin; stdin eof then only stops input, the terminal stays.
 * Kills (timeout, detach, agent_proc_kill) end the command's whole process
 * tree (tree.h).
 *
 * The owner is a sink (an exec stream, or a background process's ring).
 * This module owns the process and its fds; it must not know the protocol. */
#ifndef AGENT_PROC_H
#define AGENT_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "sbx/err.h"
#include "exec_spec.h"
#include "tree.h"

struct event_base;
typedef struct agent_proc agent_proc;

typedef enum agent_proc_stream {
	AGENT_PROC_STDOUT = 0,
	AGENT_PROC_STDERR = 1,
} agent_proc_stream;

/* After the main process was reaped, how long pipes may stay open. */
#define AGENT_PROC_PIPE_GRACE_MS 100u
/* Bound of stdin bytes accepted but not yet in the pipe. The requester's
 * credit keeps it far lower; this only stops a peer that ignores credit. */
#define AGENT_PROC_STDIN_MAX (4u << 20)
/* Pipe bytes beyond the kernel's default that sink->pipe_size may take,
 * over every live command together: pipe pages are kernel memory. */
#define AGENT_PROC_PIPE_BUDGET (8u << 20)

typedef struct agent_proc_result {
	int status;           /* wait status: WIFEXITED / WIFSIGNALED */
	struct rusage rusage;
	bool timed_out;       /* the timeout killed the group */
	bool oom_killed;      /* SIGKILL (or exit 137, a shell's report of one) not
			       * sent by the agent, and the sandbox's OOM kill
			       * count rose while it ran (oom.h) */
	uint64_t duration_us; /* from start to reap */
} agent_proc_result;

typedef struct agent_proc_sink {
	/* The command runs as pid (optional; the start itself is async). */
	void (*started)(void *ud, pid_t pid);
	/* Bytes the owner takes on s right now; 0 pauses that pipe until
	 * agent_proc_resume(). */
	size_t (*room)(void *ud, agent_proc_stream s);
	/* Optional: where to read up to len (<= the last room) bytes of s,
	 * e.g. straight into the owner's socket buffer; NULL (or no hook):
	 * into proc's own buffer. output() then gets this buffer back, unless
	 * nothing was read. */
	void *(*buffer)(void *ud, agent_proc_stream s, size_t len);
	/* Output, len <= the last room. */
	void (*output)(void *ud, agent_proc_stream s, const void *data, size_t len);
	/* n bytes of stdin went into the pipe, or were dropped because the
	 * command no longer reads stdin: either way the owner may take more. */
	void (*stdin_done)(void *ud, size_t n);
	/* The end: reaped and pipes closed. Last call; the owner must not
	 * use the proc afterwards (it is freed from the loop). */
	void (*finished)(void *ud, const agent_proc_result *r);
	/* Bytes wanted in the stdout pipe, so that a fast writer runs ahead
	 * while the owner waits for room (0: the kernel's default). Granted
	 * within AGENT_PROC_PIPE_BUDGET for all commands together and
	 * /proc/sys/fs/pipe-max-size; otherwise, silently, the default. */
	size_t pipe_size;
} agent_proc_sink;

int agent_proc_start(struct event_base *base, const agent_exec_spec *spec,
		     const agent_proc_sink *sink, void *ud, agent_proc **out, sbx_err *err);

/* 0 until the command started (sink->started). */
pid_t agent_proc_pid(const agent_proc *p);
/* The owner has room again on s. */
void agent_proc_resume(agent_proc *p, agent_proc_stream s);
/* Queue stdin bytes (see stdin_done). -EPIPE without a stdin pipe,
 * -ENOBUFS beyond AGENT_PROC_STDIN_MAX. */
int agent_proc_write_stdin(agent_proc *p, const void *data, size_t len, sbx_err *err);
/* No more stdin: the pipe closes once the queued bytes are written. */
void agent_proc_close_stdin(agent_proc *p);
/* Signal the command's process group. 0 also when it is already gone. */
int agent_proc_signal(agent_proc *p, int sig, sbx_err *err);
/* SIGKILL the command's whole tree (the end comes through the sink). */
int agent_proc_kill(agent_proc *p, sbx_err *err);
/* Window size of the terminal; -ENOTTY without one. */
int agent_proc_resize(agent_proc *p, uint16_t cols, uint16_t rows, sbx_err *err);
/* The main process was reaped (its result is final). */
bool agent_proc_reaped(const agent_proc *p);
/* The command's tree (take a reference to keep it past the proc). */
agent_tree *agent_proc_tree(const agent_proc *p);
/* The owner leaves: SIGKILL the group, close the pipes; the proc frees
 * itself once reaped. No sink call after this; p must not be used again. */
void agent_proc_detach(agent_proc *p);

/* Every live command: signal its group (shutdown forwarding). */
void agent_proc_signal_all(int sig);
/* Detach every command (connection-less shutdown, test teardown). */
void agent_proc_detach_all(void);
/* At exit only: release every command's memory and fds without waiting
 * (the agent is leaving; as PID 1 the kernel kills what is left). */
void agent_proc_discard_all(void);
/* Commands not yet finished (detached ones included). */
size_t agent_proc_count(void);

#endif
