/* sup_bundle: see sup_bundle.h. */
#include "sup_bundle.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>

#include <jansson.h>

#include "sbx/json_auto.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Docker's default set, plus CAP_NET_ADMIN for the agent to manage the
 * sandbox's own network namespace. Everything else (SYS_ADMIN, SYS_PTRACE,
 * SYS_MODULE, ...) is gone from the bounding set, so no process inside can
 * ever get it back. The agent drops all of these for the commands it runs. */
static const char *const capabilities[] = {
	"CAP_CHOWN",	    "CAP_DAC_OVERRIDE", "CAP_FSETID",	       "CAP_FOWNER",
	"CAP_MKNOD",	    "CAP_NET_RAW",	"CAP_SETGID",	       "CAP_SETUID",
	"CAP_SETFCAP",	    "CAP_SETPCAP",	"CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
	"CAP_KILL",	    "CAP_AUDIT_WRITE",	"CAP_NET_ADMIN",
};

/* As Docker and `runc spec`: kernel state a sandbox has no business reading
 * (masked with /dev/null or an empty tmpfs) or changing (read-only). */
static const char *const masked_paths[] = {
	"/proc/acpi",	     "/proc/asound",	 "/proc/kcore",		"/proc/keys",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
	"/proc/scsi",	     "/sys/firmware",	 "/sys/devices/virtual/powercap",
};
static const char *const readonly_paths[] = {
	"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

/* The container-level filter is a short deny list, not the per-command
 * allow list of the exec issue (the agent loads that one before each
 * command's exec, stacked on top of this): it closes kernel surface that no
 * capability guards (keys, bpf, userfaultfd, perf, io_uring, vsock) for
 * everything in the sandbox, the agent included, from the first instruction,
 * while leaving the agent free to do its own work. */
static const char *const denied_syscalls[] = {
	"add_key",	 "keyctl",	     "request_key",	 "bpf",		  "userfaultfd",
	"perf_event_open", "kexec_load",     "kexec_file_load", "init_module",	  "finit_module",
	"delete_module", "open_by_handle_at", "lookup_dcookie", "acct",		  "swapon",
	"swapoff",	 "io_uring_setup",   "io_uring_enter",	"io_uring_register",
};
#define AF_VSOCK_NR 40

static json_t *string_array(const char *const *v, size_t n)
{
	json_t *a = json_array();
	for (size_t i = 0; a && i < n; i++) {
		if (json_array_append_new(a, json_string(v[i])) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

static json_t *process_json(const sup_bundle_spec *s)
{
	json_t *caps = string_array(capabilities, N(capabilities));
	if (!caps)
		return NULL;
	/* No inheritable or ambient set: only the agent itself (root, exec'd
	 * by the runtime) holds capabilities; nothing it execs inherits them
	 * by accident. */
	return json_pack("{s:b, s:{s:i, s:i}, s:[sss], s:[sss], s:s,"
			 " s:{s:O, s:O, s:o}, s:[{s:s, s:I, s:I}], s:b}",
			 "terminal", 0,
			 "user", "uid", 0, "gid", 0,
			 "args", SUP_BUNDLE_AGENT_PATH, "--listen", SUP_BUNDLE_AGENT_LISTEN,
			 "env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			 "HOME=/root", "LANG=C.UTF-8",
			 "cwd", "/",
			 "capabilities", "bounding", caps, "effective", caps, "permitted", caps,
			 "rlimits", "type", "RLIMIT_NOFILE", "hard", (json_int_t)s->nofile, "soft",
			 (json_int_t)s->nofile,
			 "noNewPrivileges", 1);
}

static int add_mount(json_t *mounts, const char *dst, const char *type, const char *src,
		     json_t *opts)
{
	json_t *m = json_pack("{s:s, s:s, s:s, s:o}", "destination", dst, "type", type, "source",
			      src, "options", opts);
	if (!m)
		return -ENOMEM;
	return json_array_append_new(mounts, m) < 0 ? -ENOMEM : 0;
}

static json_t *mounts_json(const sup_bundle_spec *s)
{
	SBX_AUTO_JSON json_t *m = json_array();
	if (!m)
		return NULL;
	int r = 0;
	r |= add_mount(m, "/proc", "proc", "proc", json_pack("[sss]", "nosuid", "noexec", "nodev"));
	r |= add_mount(m, "/dev", "tmpfs", "tmpfs",
		       json_pack("[ssss]", "nosuid", "strictatime", "mode=755", "size=65536k"));
	r |= add_mount(m, "/dev/pts", "devpts", "devpts",
		       json_pack("[ssssss]", "nosuid", "noexec", "newinstance", "ptmxmode=0666",
				 "mode=0620", "gid=5"));
	r |= add_mount(m, "/dev/shm", "tmpfs", "shm",
		       json_pack("[sssss]", "nosuid", "noexec", "nodev", "mode=1777", "size=65536k"));
	r |= add_mount(m, "/dev/mqueue", "mqueue", "mqueue",
		       json_pack("[sss]", "nosuid", "noexec", "nodev"));
	r |= add_mount(m, "/sys", "sysfs", "sysfs",
		       json_pack("[ssss]", "nosuid", "noexec", "nodev", "ro"));
	r |= add_mount(m, "/sys/fs/cgroup", "cgroup", "cgroup",
		       json_pack("[sssss]", "nosuid", "noexec", "nodev", "relatime", "ro"));
	/* /tmp stays in the writable overlay layer (no tmpfs): a snapshot of
	 * the upper layer then holds everything a sandbox wrote, a reset that
	 * drops the layer drops /tmp too, and its size counts against disk,
	 * not against the sandbox's memory. */
	for (size_t i = 0; i < s->n_binds; i++) {
		const sup_bundle_bind *b = &s->binds[i];
		json_t *o = json_pack("[ssss]", "bind", b->readonly ? "ro" : "rw", "nosuid", "nodev");
		if (o && b->noexec && json_array_append_new(o, json_string("noexec")) < 0) {
			json_decref(o);
			o = NULL;
		}
		r |= add_mount(m, b->destination, "bind", b->source, o);
	}
	r |= add_mount(m, SUP_BUNDLE_RUN_DIR, "bind", s->run_dir,
		       json_pack("[sssss]", "bind", "rw", "nosuid", "nodev", "noexec"));
	if (s->agent_path)
		r |= add_mount(m, SUP_BUNDLE_AGENT_PATH, "bind", s->agent_path,
			       json_pack("[ssss]", "bind", "ro", "nosuid", "nodev"));
	if (r)
		return NULL;
	json_t *out = m;
	m = NULL;
	return out;
}

static json_t *seccomp_json(void)
{
	SBX_AUTO_JSON json_t *deny = string_array(denied_syscalls, N(denied_syscalls));
	if (!deny)
		return NULL;
	static const char *const arches[] = {
#if defined(__x86_64__)
		"SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32",
#elif defined(__aarch64__)
		"SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM",
#else
#error "add the seccomp architectures of this platform"
#endif
	};
	return json_pack("{s:s, s:o, s:[{s:O, s:s, s:i}, {s:[s], s:s, s:i, s:[{s:i, s:I, s:s}]}]}",
			 "defaultAction", "SCMP_ACT_ALLOW",
			 "architectures", string_array(arches, N(arches)),
			 "syscalls",
			 "names", deny, "action", "SCMP_ACT_ERRNO", "errnoRet", EPERM,
			 "names", "socket", "action", "SCMP_ACT_ERRNO", "errnoRet", EPERM,
			 "args", "index", 0, "value", (json_int_t)AF_VSOCK_NR, "op", "SCMP_CMP_EQ");
}

/* Memory (swap held to the same figure where the host accounts swap: OCI's
 * "swap" is memory+swap, as cgroup v1's memsw; runc turns it into v2's
 * memory.swap.max = swap - limit = 0), processes, CPU quota. The devices
 * list only denies; the runtime adds its default devices (null, zero, full,
 * random, urandom, tty, ptmx) and allows those. */
static json_t *resources_json(const sup_bundle_spec *s)
{
	const sup_resources *r = s->res;
	json_t *mem = json_pack("{s:I}", "limit", (json_int_t)r->memory);
	if (mem && s->swap_limit && json_object_set_new(mem, "swap", json_integer((json_int_t)r->memory)) < 0) {
		json_decref(mem);
		mem = NULL;
	}
	json_int_t quota = (json_int_t)r->cpu_milli * s->cpu_period_us / 1000;
	return json_pack("{s:[{s:b, s:s}], s:o, s:{s:I}, s:{s:I, s:I}}",
			 "devices", "allow", 0, "access", "rwm",
			 "memory", mem,
			 "pids", "limit", (json_int_t)r->pids,
			 "cpu", "quota", quota, "period", (json_int_t)s->cpu_period_us);
}

static json_t *linux_json(const sup_bundle_spec *s)
{
	json_t *ns = json_pack("[{s:s}, {s:s}, {s:s}, {s:s}, {s:s}]", "type", "pid", "type",
			       "network", "type", "ipc", "type", "uts", "type", "mount");
	if (!ns)
		return NULL;
	if (s->cgroup_ns && json_array_append_new(ns, json_pack("{s:s}", "type", "cgroup")) < 0) {
		json_decref(ns);
		return NULL;
	}
	return json_pack("{s:o, s:s, s:o, s:o, s:o, s:o}",
			 "namespaces", ns,
			 "cgroupsPath", s->cgroups_path,
			 "resources", resources_json(s),
			 "maskedPaths", string_array(masked_paths, N(masked_paths)),
			 "readonlyPaths", string_array(readonly_paths, N(readonly_paths)),
			 "seccomp", seccomp_json());
}

int sup_bundle_write(const char *bundle_dir, const sup_bundle_spec *s, sbx_err *err)
{
	char path[PATH_MAX];
	int n = snprintf(path, sizeof(path), "%s/config.json", bundle_dir);
	if (n < 0 || (size_t)n >= sizeof(path))
		return sbx_err_set(err, -ENAMETOOLONG, "bundle %s: path too long", bundle_dir);

	SBX_AUTO_JSON json_t *cfg = json_pack("{s:s, s:o, s:{s:s, s:b}, s:s, s:o, s:o}",
					  "ociVersion", "1.0.2",
					  "process", process_json(s),
					  "root", "path", s->rootfs, "readonly", 0,
					  "hostname", s->hostname,
					  "mounts", mounts_json(s),
					  "linux", linux_json(s));
	if (!cfg)
		return sbx_err_set(err, -ENOMEM, "bundle %s: building config.json", bundle_dir);
	if (json_dump_file(cfg, path, JSON_COMPACT) < 0)
		return sbx_err_set(err, -EIO, "bundle %s: writing config.json", bundle_dir);
	return 0;
}
