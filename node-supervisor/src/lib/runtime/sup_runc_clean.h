/* The host's own look at a runc sandbox its agent has just reset (the
 * agent's `reset`, PROTOCOL.md): whether anything of its last tenant could
 * still reach the next one. The agent is trusted by nobody, so every
 * figure is read from the host:
 *
 * - processes: the sandbox's cgroup (pids controller) holds the agent's pid
 *   alone, and the agent has no child (every process of its PID namespace
 *   is the agent's descendant: an orphan is reparented to it);
 * - sockets: the network namespace's unix table (/proc/<agent>/net/unix,
 *   abstract names included) lists only the agent's own sockets (its fds),
 *   no TCP socket listens and no UDP or raw socket is bound;
 * - System V IPC: the IPC namespace holds no shared memory segment,
 *   message queue or semaphore set (read from inside it by the worker
 *   thread, setns'ed there and back);
 * - files: the folders reset emptied, /dev/shm and /dev/mqueue are empty,
 *   and they and the folders above them have the owner, mode and extended
 *   attributes they had when the sandbox was new (through the agent's root,
 *   no symlink followed); the writable layer (the overlay's upper folder,
 *   on the sandbox's own disk) holds what it held then and nothing else,
 *   but for folders copied up on the way to an emptied one and whiteouts
 *   inside those.
 *
 * The baseline is taken once, when the sandbox is new (sup_runc_baseline),
 * and every check compares with it. Blocking file reads: worker threads
 * only. It must not change the sandbox: a check that fails leaves it for
 * the caller to destroy. */
#ifndef SUP_RUNC_CLEAN_H
#define SUP_RUNC_CLEAN_H

#include <stddef.h>

#include "sbx/err.h"
#include "sup_runc.h"

typedef struct sup_runc_baseline sup_runc_baseline;

/* Entries of a writable layer a baseline may hold; a layer with more is
 * not reused (its check fails). */
#define SUP_RUNC_BASELINE_MAX 65536u

/* Take the baseline of a new sandbox made by sup_runc_create, for the
 * folders paths (absolute, normalised, as reset's). -ENOSPC past
 * SUP_RUNC_BASELINE_MAX entries, -errno when a file cannot be read. */
int sup_runc_baseline_take(const sup_runc_cfg *cfg, const sup_runc_box *box, const char *const *paths,
			   size_t npaths, sup_runc_baseline **out, sbx_err *err);
void sup_runc_baseline_free(sup_runc_baseline *b);

/* Check a sandbox whose agent answered reset with paths (the baseline's):
 * 0 when nothing of its tenant is left, else -EBUSY (err says what was
 * found first) or the -errno of a read that failed: either way the
 * sandbox must not be reused. */
int sup_runc_check_clean(const sup_runc_cfg *cfg, const sup_runc_box *box, const sup_runc_baseline *b,
			 sbx_err *err);

/* The same look at a pod's agent (the Kubernetes backend) after its reset,
 * its pid from the host's side of its socket (SO_PEERCRED): its own
 * cgroup (read from /proc/<pid>/cgroup: the pids controller's on v1, the
 * unified one on v2, below h->root) holds the agent alone and it has no
 * child; its namespaces' sockets and System V objects as above; each of
 * paths (the pod's emptyDirs, absolute) and /dev/shm, /dev/mqueue empty
 * through its root. No baseline: a pod's root filesystem is read-only, so
 * the emptyDirs are all a tenant could write. 0, -EBUSY (err says what was
 * found first), or the -errno of a read. */
int sup_runc_check_pod(const sup_cgroup_host *h, pid_t pid, const char *const *paths, size_t npaths,
		       sbx_err *err);

#endif
