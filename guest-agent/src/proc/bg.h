/* Background processes: commands that outlive the request and connection
 * that started them (proc.* operations, op_proc.c).
 *
 * Each one is a proc (proc.c) whose sink is a ring (ring.h): output is read
 * as fast as it comes, so the process never waits for a reader, and the
 * oldest output is dropped when the ring is full. Readers (watchers) are
 * told when output arrives or the process ends; the stdin writer is told
 * when its bytes reached the process. Exited processes are kept (the last
 * AGENT_BG_KEEP_EXITED) so that their status and output can still be read;
 * their process tree is kept too, so that a kill reaches what they left
 * behind.
 *
 * This module owns the registry, the rings and the bounds; it must not know
 * the protocol (op_proc.c does). Loop thread only. */
#ifndef AGENT_BG_H
#define AGENT_BG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbx/err.h"
#include "exec_spec.h"
#include "proc.h"
#include "ring.h"

struct event_base;

#define AGENT_BG_MAX_RUNNING 256u
#define AGENT_BG_KEEP_EXITED 64u
/* Bound of the rings' capacities together (each is allocated as it fills). */
#define AGENT_BG_MAX_RING_TOTAL (1024u << 20)
#define AGENT_BG_MAX_TAG 256u

typedef struct agent_bg agent_bg;

typedef enum agent_bg_state {
	AGENT_BG_STARTING, /* forked, pid not known yet */
	AGENT_BG_RUNNING,
	AGENT_BG_EXITED,
} agent_bg_state;

/* A reader or a pending proc.start: called when output was appended, the
 * process started or ended (changed), or when the process is dropped from
 * the registry (gone: the watcher must forget it; no call after). */
typedef struct agent_bg_watch {
	void (*changed)(void *ud);
	void (*gone)(void *ud);
	void *ud;
	struct agent_bg_watch *prev, *next;
} agent_bg_watch;

/* Start spec in the background with a ring of ring_cap bytes and tag (may
 * be NULL). -EAGAIN beyond AGENT_BG_MAX_RUNNING, -ENOSPC beyond the rings'
 * total, else what agent_proc_start says. */
int agent_bg_start(struct event_base *base, const agent_exec_spec *spec, const char *tag, size_t ring_cap,
		   agent_bg **out, sbx_err *err);

/* Lookup by pid (agent view): a running one first, else the newest exited. */
agent_bg *agent_bg_find(pid_t pid);
/* Every process, newest first. */
agent_bg *agent_bg_first(void);
agent_bg *agent_bg_next(const agent_bg *b);

pid_t agent_bg_pid(const agent_bg *b);
const char *agent_bg_tag(const agent_bg *b);
char *const *agent_bg_argv(const agent_bg *b);
agent_bg_state agent_bg_get_state(const agent_bg *b);
const char *agent_bg_state_name(agent_bg_state s);
/* Wall clock (ms since the epoch) of the start and of the end (0 while
 * running). */
uint64_t agent_bg_started_ms(const agent_bg *b);
uint64_t agent_bg_ended_ms(const agent_bg *b);
/* Valid once exited. */
const agent_proc_result *agent_bg_result(const agent_bg *b);
bool agent_bg_has_pty(const agent_bg *b);
bool agent_bg_has_stdin(const agent_bg *b);
const agent_ring *agent_bg_ring(const agent_bg *b);

void agent_bg_watch_add(agent_bg *b, agent_bg_watch *w);
void agent_bg_watch_del(agent_bg *b, agent_bg_watch *w);

/* Signal the process group; -ESRCH once exited. */
int agent_bg_signal(agent_bg *b, int sig, sbx_err *err);
/* SIGKILL the whole tree, also what an exited process left behind. */
int agent_bg_kill(agent_bg *b, sbx_err *err);
/* -ENOTTY without a terminal, -ESRCH once exited. */
int agent_bg_resize(agent_bg *b, uint16_t cols, uint16_t rows, sbx_err *err);

/* The stdin writer: one at a time (-EBUSY), told through done(n) as its
 * bytes reach the process (or are dropped because it stopped reading). */
int agent_bg_stdin_claim(agent_bg *b, void (*done)(void *ud, size_t n), void *ud, sbx_err *err);
void agent_bg_stdin_release(agent_bg *b, void *ud);
/* -EPIPE without stdin or once closed, -ESRCH once exited, -ENOBUFS as
 * agent_proc_write_stdin. */
int agent_bg_stdin_write(agent_bg *b, const void *data, size_t len, sbx_err *err);
void agent_bg_stdin_close(agent_bg *b);

size_t agent_bg_count(void);
/* Reset: drop every entry, each watcher told (gone). -EBUSY (nothing
 * dropped) while one still runs. */
int agent_bg_forget_all(void);
/* At exit: drop every entry (their procs are discarded by proc.c). */
void agent_bg_discard_all(void);

#endif
