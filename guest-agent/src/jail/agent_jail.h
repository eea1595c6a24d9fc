/* The jail a command's child enters between fork and exec: resource limits,
 * user and groups, capabilities, no_new_privs and, last, the seccomp filter.
 *
 * Two halves, so that exec, background processes and PTY sessions share it:
 *   agent_jail_prepare   in the agent, before fork: resolves the user from
 *                        the container's /etc/passwd and /etc/group, checks
 *                        the rlimits, takes the compiled seccomp program
 *                        (cached per profile version, see agent_seccomp.h).
 *                        Everything that reads files, allocates or calls
 *                        libseccomp happens here.
 *   agent_jail_enter     in the child: system calls on prepared data only,
 *                        no allocation, no locks, no stdio, so it is safe
 *                        after fork of a threaded or sanitized process.
 *                        Credentials change with raw syscalls, which act on
 *                        the calling thread only: glibc's wrappers signal
 *                        every thread of the process, which after a future
 *                        vfork/CLONE_VM would be the agent's threads.
 *
 * Capabilities. A non-root user ends with none: bounding set emptied,
 * ambient cleared, effective/permitted/inheritable empty. uid 0 ("root", only
 * when the caller's policy passed allow_root) keeps Docker's default set
 * (AGENT_JAIL_ROOT_CAPS) intersected with what the agent holds, so it can
 * install packages (chown, setuid to _apt, bind low ports); everything else
 * leaves the bounding set too, so exec cannot win it back. Both get
 * no_new_privs and the same seccomp filter, which is built for a process
 * without capabilities (a root command cannot mount, unshare, chroot...).
 *
 * This module must not decide policy (the caller says whether uid 0 may be
 * used), touch fds, signals, cwd, env or the terminal (spawn's job), or exec. */
#ifndef AGENT_JAIL_H
#define AGENT_JAIL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/resource.h>
#include <linux/capability.h>

#include "sbx/err.h"
#include "agent_jail_user.h"
#include "agent_seccomp.h"

/* What uid 0 keeps: Docker's default capability set. */
#define AGENT_JAIL_ROOT_CAPS                                                                         \
	((1ULL << CAP_CHOWN) | (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_FSETID) |                   \
	 (1ULL << CAP_FOWNER) | (1ULL << CAP_MKNOD) | (1ULL << CAP_NET_RAW) | (1ULL << CAP_SETGID) | \
	 (1ULL << CAP_SETUID) | (1ULL << CAP_SETFCAP) | (1ULL << CAP_SETPCAP) |                      \
	 (1ULL << CAP_NET_BIND_SERVICE) | (1ULL << CAP_SYS_CHROOT) | (1ULL << CAP_KILL) |            \
	 (1ULL << CAP_AUDIT_WRITE))

typedef enum agent_jail_rlimit_id {
	AGENT_JAIL_RLIMIT_NOFILE,
	AGENT_JAIL_RLIMIT_NPROC,
	AGENT_JAIL_RLIMIT_FSIZE,
	AGENT_JAIL_RLIMIT_CPU, /* seconds */
	AGENT_JAIL_RLIMIT_COUNT
} agent_jail_rlimit_id;

typedef struct agent_jail_rlimit {
	bool set;   /* false: inherit the agent's limit */
	rlim_t soft;
	rlim_t hard; /* RLIM_INFINITY for none; soft <= hard */
} agent_jail_rlimit;

typedef struct agent_jail_spec {
	const char *user;       /* NULL: "sandbox"; a name or a decimal uid */
	bool allow_root;        /* policy passed: the user may resolve to uid 0 */
	agent_jail_rlimit rlimits[AGENT_JAIL_RLIMIT_COUNT];
	const char *seccomp_profile; /* NULL: AGENT_SECCOMP_DEFAULT_PATH */
	const char *passwd_path;     /* NULL: /etc/passwd */
	const char *group_path;      /* NULL: /etc/group */
} agent_jail_spec;

/* Prepared jail: plain data plus one reference on the filter. The caller
 * reads user (uid, gid, name, home) to set HOME/USER/LOGNAME. */
typedef struct agent_jail {
	agent_jail_user user;
	uint64_t caps; /* kept in bounding/effective/permitted; 0 unless uid 0 */
	uint64_t bset_drop; /* the agent's bounding set less caps: dropped in the child */
	size_t nrlimits;
	struct {
		int resource;     /* RLIMIT_* */
		const char *step; /* "setrlimit nofile", for agent_jail_enter's *step */
		struct rlimit lim;
	} rlimits[AGENT_JAIL_RLIMIT_COUNT];
	agent_seccomp_filter *filter;
} agent_jail;

/* "nofile", "nproc", "fsize", "cpu" -> id, or -1 (for request parsers). */
int agent_jail_rlimit_by_name(const char *name);
const char *agent_jail_rlimit_name(agent_jail_rlimit_id id);

/* Parent side. -EPERM when the user resolves to uid 0 without allow_root;
 * -ENOENT/-EINVAL for an unknown or malformed user; -EINVAL for soft > hard,
 * -EPERM for a hard limit above the agent's own that the agent could not
 * raise; a profile error as agent_seccomp_get reports it. On failure *out is
 * released (agent_jail_release on it is still fine). */
int agent_jail_prepare(const agent_jail_spec *spec, agent_jail *out, sbx_err *err);

/* Add a process tree's mark (tree.h) to the command's supplementary groups,
 * and take CAP_SETGID from uid 0 too (bounding set included), so that no
 * process of the tree can drop the mark. -E2BIG when the groups are full. */
int agent_jail_mark(agent_jail *j, gid_t mark, sbx_err *err);

/* Child side, after fork and after the caller set up fds, signals, process
 * group, setsid/controlling terminal; before chdir and execve. Applies
 * rlimits, bounding set, ambient clear, setgroups/setresgid/setresuid,
 * capset, no_new_privs, then the seccomp filter. What runs after it runs
 * under the filter: chdir, execve, write and _exit are allowed by the
 * default profile. Returns 0, or -errno with *step naming the step that
 * failed (a static string); the caller writes it to the child's stderr and
 * _exits 126. */
int agent_jail_enter(const agent_jail *j, const char **step);

/* Drop the filter reference; safe on a zeroed or released jail. */
void agent_jail_release(agent_jail *j);

#endif
