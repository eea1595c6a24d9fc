/* Who a command runs as: a user name or numeric uid resolved against the
 * container's /etc/passwd and /etc/group, parsed here because a static
 * binary has no NSS.
 *
 * Owns lookup and validation only, in the agent before fork; it must not
 * change credentials (agent_jail_enter does) or decide whether a user is
 * allowed (the caller's policy). Files are read with bounds (line length,
 * file size) and only when they are regular files, since whatever runs as
 * root in the sandbox can replace them. */
#ifndef AGENT_JAIL_USER_H
#define AGENT_JAIL_USER_H

#include <stddef.h>
#include <sys/types.h>

#include "sbx/err.h"

#define AGENT_JAIL_DEFAULT_USER "sandbox"
#define AGENT_JAIL_DEFAULT_UID 1000
#define AGENT_JAIL_DEFAULT_GID 1000
#define AGENT_JAIL_DEFAULT_HOME "/home/sandbox"
#define AGENT_JAIL_PASSWD "/etc/passwd"
#define AGENT_JAIL_GROUP "/etc/group"

#define AGENT_JAIL_NAME_MAX 32
#define AGENT_JAIL_HOME_MAX 255
#define AGENT_JAIL_MAX_GROUPS 64
/* Bound on what is read of /etc/passwd or /etc/group. */
#define AGENT_JAIL_MAX_DB_BYTES (8u << 20)

typedef struct agent_jail_user {
	uid_t uid;
	gid_t gid;
	size_t ngroups; /* groups[0] is gid; then the groups that list the user */
	gid_t groups[AGENT_JAIL_MAX_GROUPS];
	char name[AGENT_JAIL_NAME_MAX + 1];
	char home[AGENT_JAIL_HOME_MAX + 1];
} agent_jail_user;

/* Resolve user (NULL: "sandbox"): a name from passwd_path, or a decimal uid
 * (with its passwd entry if there is one, else gid = uid and home "/").
 * "sandbox" and "root" exist even when passwd_path lacks them (1000:1000
 * /home/sandbox, 0:0 /root), so a bare image still runs commands. A missing
 * group_path means no supplementary groups. NULL paths: /etc/passwd,
 * /etc/group. -ENOENT for an unknown name, -EINVAL for a malformed one.
 * The last answer is kept and given again while both files keep their
 * identity (inode, size, times) and did not change in the last 50 ms; one
 * thread only (the agent's loop). */
int agent_jail_user_lookup(const char *user, const char *passwd_path, const char *group_path,
			   agent_jail_user *out, sbx_err *err);

#endif
