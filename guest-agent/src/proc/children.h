/* Child registry: which module owns which child pid.
 *
 * The reaper (pid1.c) collects every exit with wait4(-1) and hands it here;
 * a registered pid goes to its owner's callback with the wait status and
 * rusage, an unregistered one (a reparented orphan, a grandchild) is just
 * reaped. This module owns only the pid -> owner map; it must not wait,
 * signal or fork. Single-threaded: the event loop's thread only. */
#ifndef AGENT_CHILDREN_H
#define AGENT_CHILDREN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "sbx/err.h"

/* Called once, after the child was reaped; the entry is already gone. */
typedef void (*agent_children_exit_fn)(pid_t pid, int status, const struct rusage *ru, void *ud);

/* Register pid (just forked, not yet reaped). -EEXIST if already there. */
int agent_children_add(pid_t pid, agent_children_exit_fn fn, void *ud, sbx_err *err);
/* Forget pid without calling its owner (owner gone; the reaper reaps it). */
void agent_children_forget(pid_t pid);
/* Hand a reaped child to its owner. Returns false when pid has no owner. */
bool agent_children_dispatch(pid_t pid, int status, const struct rusage *ru);
/* Registered children not yet reaped. */
size_t agent_children_count(void);

#endif
