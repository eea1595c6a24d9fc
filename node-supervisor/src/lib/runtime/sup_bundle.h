/* The OCI runtime configuration (config.json) of one sandbox, written with
 * jansson: what the agent runs as, which namespaces, mounts, capabilities,
 * masked paths, rlimits and the container-level seccomp filter it gets.
 * Owns the security baseline of a sandbox; it must not touch the file system
 * beyond writing config.json, nor decide paths (callers pass them). */
#ifndef SUP_BUNDLE_H
#define SUP_BUNDLE_H

#include <stdbool.h>
#include <stddef.h>

#include "sbx/err.h"
#include "sup_resources.h"

/* Where the agent's socket folder and binary appear inside every sandbox. */
#define SUP_BUNDLE_RUN_DIR "/run/sandbox"
#define SUP_BUNDLE_AGENT_PATH "/.sbx/sandbox-agent"
#define SUP_BUNDLE_AGENT_LISTEN "unix:/run/sandbox/agent.sock"

/* A bind mount from the host. */
typedef struct sup_bundle_bind {
	const char *source;      /* host path */
	const char *destination; /* path inside the sandbox */
	bool readonly;
	bool noexec;
} sup_bundle_bind;

typedef struct sup_bundle_spec {
	const char *hostname;     /* also the sandbox id */
	const char *rootfs;       /* root.path, relative to the bundle ("rootfs") */
	const char *run_dir;      /* host folder bound read-write at SUP_BUNDLE_RUN_DIR */
	const char *agent_path;   /* host agent binary, bound read-only at SUP_BUNDLE_AGENT_PATH;
				   * NULL: the image's own runs */
	const char *cgroups_path; /* linux.cgroupsPath, e.g. "/sbx/<container-id>" */
	bool cgroup_ns;           /* the kernel has cgroup namespaces */
	unsigned long nofile;     /* RLIMIT_NOFILE, soft = hard */
	const sup_resources *res; /* cgroup limits: memory, pids, CPU quota (disk is not a cgroup's) */
	bool swap_limit;          /* the host can hold swap: memory+swap = memory */
	unsigned cpu_period_us;   /* CFS period; the quota is res->cpu_milli of it */
	const sup_bundle_bind *binds; /* image binds (host /usr, ...) and, later, volumes */
	size_t n_binds;
} sup_bundle_spec;

/* Write <bundle_dir>/config.json for spec. */
int sup_bundle_write(const char *bundle_dir, const sup_bundle_spec *spec, sbx_err *err);

#endif
