/* The host side of a sandbox's cgroup: which hierarchy the host runs (v1,
 * one mount per controller, "hybrid" included; or the v2 unified one),
 * writing a sandbox's limits into its cgroup directly, and reading its usage
 * back. The runtime makes and removes the cgroup (linux.cgroupsPath and
 * linux.resources in config.json, sup_bundle); acquire changes a pooled
 * sandbox's limits with a few writes here instead of a `runc update`
 * process. It must not make or remove cgroups or move processes; it keeps no
 * state beyond what detect fills in, and is thread-safe. */
#ifndef SUP_CGROUP_H
#define SUP_CGROUP_H

#include <limits.h>
#include <stdbool.h>

#include "sbx/err.h"
#include "sup_resources.h"

typedef enum sup_cgroup_mode {
	SUP_CGROUP_V1 = 1, /* <root>/memory, <root>/pids, <root>/cpu, <root>/cpuacct */
	SUP_CGROUP_V2 = 2, /* <root> is the unified hierarchy */
} sup_cgroup_mode;

/* The CFS period every sandbox gets; its quota is cpus x this. */
#define SUP_CGROUP_PERIOD_US 100000u

typedef struct sup_cgroup_host {
	sup_cgroup_mode mode;
	char root[PATH_MAX / 2]; /* "/sys/fs/cgroup", or a test tree */
	bool swap; /* swap can be held to the memory figure (v1: memory.memsw.* exist,
		    * i.e. swap accounting is on; v2: memory.swap.max) */
} sup_cgroup_host;

/* Look at root (normally "/sys/fs/cgroup"): a cgroup2 mount is v2 (with the
 * memory, pids and cpu controllers available, else -ENOTSUP naming the
 * missing one); a folder of v1 mounts is v1 (memory, pids, cpu, cpuacct
 * each a cgroup mount, else -ENOTSUP). */
int sup_cgroup_detect(const char *root, sup_cgroup_host *h, sbx_err *err);

/* A host described by hand (tests run the v2 code against a tree of plain
 * files this way). */
int sup_cgroup_host_init(sup_cgroup_host *h, const char *root, sup_cgroup_mode mode, bool swap,
			 sbx_err *err);

/* Change the limits of the cgroup at path (the runtime's cgroupsPath,
 * "/sbx/<container id>") from `from` (in force) to `to`; only the figures
 * that differ are written (the disk is not a cgroup's business). Memory and
 * memory+swap are written in the order the kernel accepts (v1 refuses a
 * memory limit above the memory+swap one). On failure some figures may be
 * changed already: the sandbox should not be used. */
int sup_cgroup_apply(const sup_cgroup_host *h, const char *path, const sup_resources *from,
		     const sup_resources *to, sbx_err *err);

/* Lift the CPU quota of the cgroup at path (v1 cpu.cfs_quota_us -1, v2
 * cpu.max "max"): a sandbox about to be killed. Its processes then die at
 * once instead of waiting out the throttle a fork bomb's kernel time runs
 * it into (seconds, measured). */
int sup_cgroup_unthrottle(const sup_cgroup_host *h, const char *path, sbx_err *err);

/* Freeze (frozen) or thaw the cgroup at path: v2's cgroup.freeze (on a v1
 * host, the hybrid unified mount's, when it holds the cgroup), else v1's
 * freezer controller (freezer.state FROZEN/THAWED). A freeze returns once
 * the kernel reports every task frozen, polled for at most
 * SUP_CGROUP_FREEZE_WAIT_MS (a task in an uninterruptible sleep can hold
 * it in FREEZING): past that the cgroup is thawed again and -EBUSY
 * returned. A thaw takes effect as the write returns. Idempotent. A few
 * file writes and reads, no process: the loop may call it. */
#define SUP_CGROUP_FREEZE_WAIT_MS 200u
int sup_cgroup_freeze(const sup_cgroup_host *h, const char *path, bool frozen, sbx_err *err);

/* Memory now and at its peak, CPU time, pids and OOM kills of the cgroup at
 * path into u (u->disk and its bit are left alone). Each figure is read on
 * its own: one the host does not offer (v2's memory.peak before Linux 5.19,
 * a controller missing) is left out of u->known; fails only when none
 * could be read (the cgroup is gone). */
int sup_cgroup_read(const sup_cgroup_host *h, const char *path, sup_usage *u, sbx_err *err);

#endif
