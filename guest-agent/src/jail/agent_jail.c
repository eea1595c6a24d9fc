/* agent_jail: prepare in the agent, enter in the child (see agent_jail.h). */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/capability.h>
#include <linux/seccomp.h>

#include "agent_jail.h"

/* On 32-bit x86 and arm the plain numbers take 16-bit ids. */
#ifdef SYS_setresuid32
#define NR_SETRESUID SYS_setresuid32
#define NR_SETRESGID SYS_setresgid32
#define NR_SETGROUPS SYS_setgroups32
#else
#define NR_SETRESUID SYS_setresuid
#define NR_SETRESGID SYS_setresgid
#define NR_SETGROUPS SYS_setgroups
#endif

/* Capabilities are numbered below 64 for the foreseeable future
 * (cap_last_cap is 40 on 6.x); the bounding-set loop stops at EINVAL. */
#define CAP_SLOTS 64

static const struct {
	const char *name;
	const char *step;
	int resource;
} rlimit_table[AGENT_JAIL_RLIMIT_COUNT] = {
	[AGENT_JAIL_RLIMIT_NOFILE] = { "nofile", "setrlimit nofile", RLIMIT_NOFILE },
	[AGENT_JAIL_RLIMIT_NPROC] = { "nproc", "setrlimit nproc", RLIMIT_NPROC },
	[AGENT_JAIL_RLIMIT_FSIZE] = { "fsize", "setrlimit fsize", RLIMIT_FSIZE },
	[AGENT_JAIL_RLIMIT_CPU] = { "cpu", "setrlimit cpu", RLIMIT_CPU },
};

int agent_jail_rlimit_by_name(const char *name)
{
	for (int i = 0; i < AGENT_JAIL_RLIMIT_COUNT; i++)
		if (strcmp(rlimit_table[i].name, name) == 0)
			return i;
	return -1;
}

const char *agent_jail_rlimit_name(agent_jail_rlimit_id id)
{
	return (unsigned)id < AGENT_JAIL_RLIMIT_COUNT ? rlimit_table[id].name : "?";
}

/* The agent's own permitted and effective capability sets. */
static int own_caps(uint64_t *permitted, uint64_t *effective)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2] = { 0 };

	if (syscall(SYS_capget, &h, d) < 0)
		return -errno;
	*permitted = d[0].permitted | (uint64_t)d[1].permitted << 32;
	*effective = d[0].effective | (uint64_t)d[1].effective << 32;
	return 0;
}

/* Read once: a process's bounding set never grows, and dropping a
 * capability that is already out still succeeds, so a set read earlier
 * is never short of one to drop. */
static uint64_t own_bounding_set(void)
{
	static uint64_t set;
	static bool known;

	for (unsigned cap = 0; !known && cap < CAP_SLOTS; cap++) {
		int in = prctl(PR_CAPBSET_READ, cap, 0, 0, 0);

		if (in < 0)
			break;
		if (in)
			set |= 1ULL << cap;
	}
	known = true;
	return set;
}

static int prepare_rlimits(const agent_jail_spec *spec, uint64_t effective, agent_jail *out, sbx_err *err)
{
	for (int i = 0; i < AGENT_JAIL_RLIMIT_COUNT; i++) {
		const agent_jail_rlimit *r = &spec->rlimits[i];
		struct rlimit cur;

		if (!r->set)
			continue;
		if (r->soft > r->hard)
			return sbx_err_set(err, -EINVAL, "rlimit %s: soft limit %llu above hard limit %llu",
					   rlimit_table[i].name, (unsigned long long)r->soft,
					   (unsigned long long)r->hard);
		if (getrlimit(rlimit_table[i].resource, &cur) < 0)
			return sbx_err_sys(err, -errno, "rlimit %s", rlimit_table[i].name);
		/* Found out here, with a clear message, rather than as EPERM
		 * from the child. The child inherits exactly these limits. */
		if (r->hard > cur.rlim_max && !(effective & (1ULL << CAP_SYS_RESOURCE)))
			return sbx_err_set(err, -EPERM, "rlimit %s: hard limit %llu is above the sandbox's %llu",
					   rlimit_table[i].name, (unsigned long long)r->hard,
					   (unsigned long long)cur.rlim_max);
		out->rlimits[out->nrlimits].resource = rlimit_table[i].resource;
		out->rlimits[out->nrlimits].step = rlimit_table[i].step;
		out->rlimits[out->nrlimits].lim = (struct rlimit){ .rlim_cur = r->soft, .rlim_max = r->hard };
		out->nrlimits++;
	}
	return 0;
}

int agent_jail_prepare(const agent_jail_spec *spec, agent_jail *out, sbx_err *err)
{
	uint64_t permitted = 0, effective = 0;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = agent_jail_user_lookup(spec->user, spec->passwd_path, spec->group_path, &out->user, err);
	if (rc < 0)
		return rc;
	if (out->user.uid == 0 && !spec->allow_root)
		return sbx_err_set(err, -EPERM, "user %s is uid 0, and root is not allowed here", out->user.name);
	rc = own_caps(&permitted, &effective);
	if (rc < 0)
		return sbx_err_sys(err, rc, "read the agent's capabilities");
	if (out->user.uid == 0)
		out->caps = AGENT_JAIL_ROOT_CAPS & permitted & own_bounding_set();
	out->bset_drop = own_bounding_set() & ~out->caps;
	rc = prepare_rlimits(spec, effective, out, err);
	if (rc < 0)
		return rc;
	rc = agent_seccomp_get(spec->seccomp_profile, &out->filter, err);
	if (rc < 0)
		return rc;
	return 0;
}

int agent_jail_mark(agent_jail *j, gid_t mark, sbx_err *err)
{
	if (j->user.ngroups == AGENT_JAIL_MAX_GROUPS)
		return sbx_err_set(err, -E2BIG, "user %s: %d groups, no room for the process "
				   "tree's mark", j->user.name, AGENT_JAIL_MAX_GROUPS);
	j->user.groups[j->user.ngroups++] = mark;
	if (j->caps & (1ULL << CAP_SETGID)) {
		j->caps &= ~(1ULL << CAP_SETGID);
		j->bset_drop |= own_bounding_set() & (1ULL << CAP_SETGID);
	}
	return 0;
}

void agent_jail_release(agent_jail *j)
{
	agent_seccomp_unref(j->filter);
	j->filter = NULL;
}

/* ---- child side: system calls on prepared data only ---- */

static int failed(const char **step, const char *what)
{
	*step = what;
	return -errno;
}

int agent_jail_enter(const agent_jail *j, const char **step)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
	struct __user_cap_data_struct d[2] = {
		{ .effective = (uint32_t)j->caps, .permitted = (uint32_t)j->caps, .inheritable = 0 },
		{ .effective = (uint32_t)(j->caps >> 32), .permitted = (uint32_t)(j->caps >> 32), .inheritable = 0 },
	};
	const struct sock_fprog *prog = j->filter ? agent_seccomp_prog(j->filter) : NULL;
	uid_t uid = j->user.uid;
	gid_t gid = j->user.gid;

	*step = NULL;
	if (!prog) {
		*step = "no seccomp filter prepared";
		return -EINVAL;
	}
	/* Limits first, while the agent's privileges still allow them. */
	for (size_t i = 0; i < j->nrlimits; i++)
		if (setrlimit(j->rlimits[i].resource, &j->rlimits[i].lim) < 0)
			return failed(step, j->rlimits[i].step);
	/* The bounding set needs CAP_SETPCAP, so it goes before setresuid
	 * clears the effective set. What to drop was worked out before the
	 * fork, so the child does not read all 41 slots again. */
	for (unsigned cap = 0; cap < CAP_SLOTS; cap++)
		if ((j->bset_drop & (1ULL << cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return failed(step, "drop from the capability bounding set");
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
		return failed(step, "clear ambient capabilities");
	if (syscall(NR_SETGROUPS, j->user.ngroups, j->user.groups) < 0)
		return failed(step, "setgroups");
	if (syscall(NR_SETRESGID, gid, gid, gid) < 0)
		return failed(step, "setresgid");
	if (syscall(NR_SETRESUID, uid, uid, uid) < 0)
		return failed(step, "setresuid");
	/* setresuid to non-zero ids already emptied effective and permitted;
	 * this also empties inheritable, and sets root's kept set exactly. */
	if (syscall(SYS_capset, &h, d) < 0)
		return failed(step, "capset");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return failed(step, "set no_new_privs");
	/* Last: from here on only what the profile allows works. */
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, prog, 0, 0) < 0)
		return failed(step, "load the seccomp filter");
	return 0;
}
