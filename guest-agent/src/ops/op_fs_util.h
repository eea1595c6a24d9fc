/* What the file and fs.* operations share: reading a path argument (an
 * allowed root and a path relative to it) and opening the root with
 * agent_fsconf, reading modes and bounded numbers, the protocol code of a
 * failed file-system call, and answering END/ERR.
 *
 * It validates and encodes only: it must not resolve paths itself (every
 * lookup goes through agent_fsconf), keep state or decide policy. */
#ifndef AGENT_OP_FS_UTIL_H
#define AGENT_OP_FS_UTIL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include <msgpack.h>

#include "sbx/err.h"
#include "sbx/proto.h"
#include "agent_fsconf.h"
#include "agent_jail_user.h"
#include "op.h"

/* Owner of what the agent creates when it runs as root: the sandbox user,
 * whom commands run as by default. */
#define AGENT_FS_UID AGENT_JAIL_DEFAULT_UID
#define AGENT_FS_GID AGENT_JAIL_DEFAULT_GID
/* The owner for new entries: the sandbox user when the agent runs as root,
 * else -1 (left as the agent's: it cannot give files away). */
#define AGENT_FS_OWNER_UID() (geteuid() == 0 ? (uid_t)AGENT_FS_UID : (uid_t)-1)
#define AGENT_FS_OWNER_GID() (geteuid() == 0 ? (gid_t)AGENT_FS_GID : (gid_t)-1)

/* A path argument: the root opened (reopened per request) and the path
 * below it as a C string ("" is the root itself). */
typedef struct agent_fs_path {
	agent_fsconf_root root;
	char rel[PATH_MAX];
} agent_fs_path;

/* args[root_key] (absolute, normalised) and args[path_key] (relative; ""
 * is the root), both required, checked with agent_fsconf_check_rel, root
 * opened. -EINVAL for a missing or malformed argument, else what
 * agent_fsconf said. what names the operation in messages. */
int agent_fs_path_get(const msgpack_object *args, const char *root_key, const char *path_key,
		      const char *what, agent_fs_path *p, sbx_err *err);
void agent_fs_path_close(agent_fs_path *p);
#define AGENT_FS_AUTO_PATH __attribute__((cleanup(agent_fs_path_close)))
#define AGENT_FS_PATH_INIT { .root = { .fd = -1 } }

/* Optional arguments: absent or nil leaves *v as it is. -EINVAL when of
 * another type; uint: also above max; mode: above 07777. */
int agent_fs_get_bool(const msgpack_object *args, const char *key, bool *v, sbx_err *err);
int agent_fs_get_uint(const msgpack_object *args, const char *key, uint64_t max, uint64_t *v,
		      sbx_err *err);
int agent_fs_get_mode(const msgpack_object *args, const char *key, mode_t *v, sbx_err *err);

/* Stable protocol code for a failed file-system call (negative errno). */
sbx_proto_code agent_fs_code(int neg_errno);

/* "file", "dir", "symlink", "fifo", "socket", "char", "block", "other". */
const char *agent_fs_type_name(mode_t mode);

/* Pack the stat keys type, size, mode (permission bits), mtime_ns, uid,
 * gid, nlink, ino (7 + 1 pairs). */
#define AGENT_FS_STAT_PAIRS 8u
void agent_fs_pack_stat(msgpack_packer *pk, const struct stat *st);

/* Final frames of a stream that has no op attached (or was detached). */
void agent_fs_end(agent_session *s, uint64_t id, const msgpack_sbuffer *map);
void agent_fs_fail(agent_session *s, uint64_t id, int neg_errno, const char *msg);

#endif
