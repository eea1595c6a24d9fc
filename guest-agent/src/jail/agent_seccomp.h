/* Seccomp profiles for the commands the agent runs.
 *
 * A profile is a JSON file in the Docker/moby seccomp format (the subset
 * below), compiled with libseccomp and exported once to a classic BPF
 * program in memory, so that a child installs it with one prctl() after
 * fork, without allocating. Compiled programs are cached: agent_seccomp_get()
 * compiles a file again only when it changed (device, inode, size, mtime or
 * ctime), and uses the profile built into the agent (seccomp/default.json)
 * when the file does not exist. Any other problem with the file (unreadable,
 * malformed, unknown action...) is an error, never a silent fallback: the
 * operator asked for that policy.
 *
 * Owns parsing, compiling and caching. It must not install a filter (the
 * jail does that in the child), fork, or log: errors go to the caller in an
 * sbx_err. Not thread-safe: the agent calls it from its loop thread only.
 *
 * Format. Keys not listed are refused, so a typo is an error and not a hole:
 *   defaultAction    SCMP_ACT_ERRNO | _ALLOW | _KILL | _KILL_THREAD |
 *                    _KILL_PROCESS | _TRAP | _LOG
 *   defaultErrnoRet  the errno of SCMP_ACT_ERRNO (default EPERM)
 *   architectures    ["SCMP_ARCH_X86_64", ...]: added to the native one,
 *                    which is always in. A call from an architecture not
 *                    in the filter kills the process (the calling thread
 *                    where the kernel offers no SECCOMP_RET_KILL_PROCESS).
 *   archMap          [{architecture, subArchitectures}]: the entry of the
 *                    native architecture adds its subArchitectures
 *   syscalls         [{names (or name), action, errnoRet, args, includes,
 *                    excludes, comment}]
 *     args           [{index 0-5, value, valueTwo, op}], all must hold; op
 *                    SCMP_CMP_NE | _LT | _LE | _EQ | _GE | _GT | _MASKED_EQ
 *                    ((arg & value) == valueTwo, as in moby). Comparisons are
 *                    on 64 bits: to refuse one value of an int argument,
 *                    allow the others with LT/EQ rather than with NE, which
 *                    upper-bit garbage would get past.
 *     includes/excludes {arches: Go names (amd64, arm64, ...), caps,
 *                    minKernel "X.Y"}. The filter is built for a process
 *                    without capabilities: an entry that includes caps is
 *                    left out, one that excludes caps is applied.
 *   comment          ignored, anywhere a key is allowed
 * Syscall names libseccomp does not know are skipped (profiles name calls of
 * other architectures and newer kernels; the default action refuses them),
 * and so are rules whose action is the default action (libseccomp refuses
 * them, and they could only repeat what the default does). */
#ifndef AGENT_SECCOMP_H
#define AGENT_SECCOMP_H

#include <stdbool.h>
#include <stddef.h>
#include <linux/filter.h>

#include "sbx/err.h"

#define AGENT_SECCOMP_DEFAULT_PATH "/etc/sandbox/seccomp.json"
/* Bound on a profile file: moby's default is 20 KiB. */
#define AGENT_SECCOMP_MAX_PROFILE_BYTES (1u << 20)
/* What the kernel takes in one classic BPF program (BPF_MAXINSNS). */
#define AGENT_SECCOMP_MAX_INSNS 4096u
#define AGENT_SECCOMP_ORIGIN_BUILTIN "built-in seccomp profile"

/* A compiled profile. Reference counted, so a jail can keep the program it
 * was prepared with while the cache moves to a changed file. */
typedef struct agent_seccomp_filter agent_seccomp_filter;

/* The compiled profile at path (NULL: AGENT_SECCOMP_DEFAULT_PATH), or the
 * built-in one when path does not exist. *out is a new reference. */
int agent_seccomp_get(const char *path, agent_seccomp_filter **out, sbx_err *err);

/* Compile a profile from memory; origin names it in error messages. *out is
 * a new reference, not cached. -EINVAL with a message on a bad profile. */
int agent_seccomp_compile(const char *json, size_t len, const char *origin,
			  agent_seccomp_filter **out, sbx_err *err);

agent_seccomp_filter *agent_seccomp_ref(agent_seccomp_filter *f);
/* NULL is fine. */
void agent_seccomp_unref(agent_seccomp_filter *f);

/* The program for prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog). Valid as
 * long as the reference is held; reading it allocates nothing. */
const struct sock_fprog *agent_seccomp_prog(const agent_seccomp_filter *f);
/* The file the filter was compiled from, or AGENT_SECCOMP_ORIGIN_BUILTIN. */
const char *agent_seccomp_origin(const agent_seccomp_filter *f);

/* Does the kernel offer SECCOMP_RET_KILL_PROCESS and _LOG (libseccomp's
 * API level 3+, from SECCOMP_GET_ACTION_AVAIL)? gVisor (2022-12) does not:
 * it answers EINVAL to the query, applies KILL_PROCESS to the calling thread
 * only and kills the process for LOG. Where it does not, profiles naming
 * either are refused and a foreign architecture kills the calling thread. */
bool agent_seccomp_kill_process_ok(void);

/* The JSON text of the built-in profile (NUL-terminated, len excludes it). */
const char *agent_seccomp_builtin_profile(size_t *len);

/* Drop the cached filters (their holders keep theirs), e.g. at exit. */
void agent_seccomp_cache_clear(void);

#endif
