/* File-system confinement: resolving a request's path beneath an allowed
 * root, with the kernel (openat2) as the judge where it can be, else with a
 * component walk that gives the same answers (agent_fsconf_walk.h).
 *
 * The supervisor sends an allowed root ("/workspace") and a path below it.
 * The agent does not trust that the path was normalised or that the tree
 * holds no traps: every resolution starts at an fd of the root and uses
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS), so `..`, a symlink
 * (absolute ones always; relative ones climbing out), a /proc magic link or a
 * rename racing the lookup cannot lead outside the root. Absolute symlinks
 * are refused even when they point inside: the kernel cannot place them
 * relative to the root without changing their meaning. Mounts inside a root
 * are followed (volumes), except by recursive removal (agent_fsconf_ops.h).
 *
 * The root itself is reopened for every request, from "/" with
 * RESOLVE_NO_SYMLINKS: a root replaced by a symlink (`rm -r /workspace;
 * ln -s / /workspace`) is refused, and an fd cached earlier cannot point at
 * a folder that has since been moved or deleted. It costs one openat2.
 *
 * Two resolvers, one chosen for the whole process: openat2 (the default) and
 * the walk, for kernels without openat2 (gVisor answers ENOSYS; Linux before
 * 5.6). agent_fsconf_probe picks at start: openat2 where it works, else the
 * walk where what it relies on works, else nothing: with openat2 chosen and
 * missing, or no resolver at all, every call fails with -ENOSYS and a
 * message saying file operations are refused. Nothing falls back silently:
 * the resolver changes only through the probe or agent_fsconf_use.
 *
 * This module owns path resolution only. It must not decide which roots are
 * allowed (the supervisor's policy does), must not follow anything out of a
 * root, and keeps no state between calls beyond the resolver in use. Errors
 * name the path as given (raw bytes; the supervisor escapes them for
 * output). */
#ifndef AGENT_FSCONF_H
#define AGENT_FSCONF_H

#include <limits.h>
#include <linux/openat2.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "sbx/err.h"

/* Every lookup beneath a root. */
#define AGENT_FSCONF_RESOLVE_BENEATH (RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)

typedef struct agent_fsconf_root {
	int fd;              /* O_PATH | O_DIRECTORY, -1 when closed */
	char path[PATH_MAX]; /* as given, for messages */
} agent_fsconf_root;

typedef enum agent_fsconf_resolver {
	AGENT_FSCONF_OPENAT2, /* the kernel's openat2 */
	AGENT_FSCONF_WALK,    /* agent_fsconf_walk.h */
	AGENT_FSCONF_NONE,    /* neither works: everything is refused (-ENOSYS) */
} agent_fsconf_resolver;

/* Pick the resolver: openat2 with RESOLVE_BENEATH if it works here, else the
 * walk if its probe passes, else none. Returns the one chosen (now in use),
 * or a negative errno with a message saying file operations are refused
 * (AGENT_FSCONF_NONE is then in use). note (cap bytes) says what was chosen
 * and why, for the log. */
int agent_fsconf_probe(char *note, size_t cap, sbx_err *err);

/* Use r from now on, without probing (tests; the agent's --fs-resolve). */
void agent_fsconf_use(agent_fsconf_resolver r);
agent_fsconf_resolver agent_fsconf_resolver_in_use(void);
/* "openat2", "walk" or "none". */
const char *agent_fsconf_resolver_name(agent_fsconf_resolver r);

/* Open root (absolute, normalised: no ".", "..", "//" or trailing slash)
 * with no symlink anywhere on its path. -EINVAL for a bad path, -ELOOP when
 * a component is a symlink, -ENOTDIR, -ENOENT. */
int agent_fsconf_root_open(agent_fsconf_root *root, const char *path, sbx_err *err);
void agent_fsconf_root_close(agent_fsconf_root *root);
#define AGENT_FSCONF_AUTO_ROOT __attribute__((cleanup(agent_fsconf_root_close)))

/* Validate a path from the wire before it becomes a C string: len bytes,
 * no NUL, shorter than PATH_MAX, relative ("" is the root itself).
 * -EINVAL or -ENAMETOOLONG. Every function below applies the same checks. */
int agent_fsconf_check_rel(const char *rel, size_t len, sbx_err *err);

/* openat2(root->fd, rel, flags, mode) beneath the root (or what the walk
 * gives for it); "" is the root.
 * Returns the fd or a negative errno: an escape (EXDEV from the kernel) is
 * reported as -EACCES, a magic link or a loop as -ELOOP. Retries the
 * kernel's -EAGAIN (a rename raced a `..`) a few times. what names the
 * operation in messages ("read", "stat"). */
int agent_fsconf_open(const agent_fsconf_root *root, const char *rel, uint64_t flags,
		      uint64_t mode, const char *what, sbx_err *err);

/* The folder holding rel's last component, O_PATH | O_DIRECTORY beneath the
 * root, for the *at calls that act on an entry without following it
 * (unlinkat, renameat, mkdirat). leaf receives the last component (trailing
 * slashes dropped). Refused: rel naming the root itself (-EBUSY), a last
 * component "." or ".." (-EINVAL). Returns the fd. */
int agent_fsconf_open_parent(const agent_fsconf_root *root, const char *rel, char *leaf,
			     size_t leaf_cap, const char *what, sbx_err *err);

/* One component name (no '/', not "." or ".."), opened beneath dirfd with
 * no symlink and no mount crossing: how recursive walks go down. */
int agent_fsconf_open_child(int dirfd, const char *name, uint64_t flags, sbx_err *err);

/* openat2(dirfd, path, {flags | O_CLOEXEC, mode, resolve}) through the
 * resolver in use (RESOLVE_* from <linux/openat2.h>): the fd or -errno. For
 * the rest of the module and for tests. */
int agent_fsconf_resolve(int dirfd, const char *path, uint64_t flags, uint64_t mode,
			 uint64_t resolve);

/* A failed lookup (code from agent_fsconf_resolve beneath root) in the
 * words of agent_fsconf_open: EXDEV becomes -EACCES. Returns that code. */
int agent_fsconf_resolve_fail(sbx_err *err, int code, const agent_fsconf_root *root,
			      const char *rel, const char *what);

/* err for rel under root: "<what> <root>/<rel>: <msg>: strerror". */
int agent_fsconf_fail(sbx_err *err, int code, const agent_fsconf_root *root, const char *rel,
		      const char *what, const char *msg);

#endif
