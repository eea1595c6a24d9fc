/* sup_cgroup: see sup_cgroup.h. Files used:
 *   v1: memory/<p>/memory.limit_in_bytes, memory.memsw.limit_in_bytes,
 *       memory.usage_in_bytes, memory.max_usage_in_bytes, memory.oom_control
 *       (its oom_kill line); pids/<p>/pids.max, pids.current;
 *       cpu/<p>/cpu.cfs_quota_us; cpuacct/<p>/cpuacct.usage (ns);
 *       freezer/<p>/freezer.state, or (hybrid) unified/<p>/cgroup.freeze and
 *       cgroup.events
 *   v2: <p>/memory.max, memory.current, memory.peak, memory.events
 *       (oom_kill), pids.max, pids.current, cpu.max, cpu.stat (usage_usec),
 *       cgroup.freeze, cgroup.events (frozen) */
#include "sup_cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sup_fsutil.h"


/* Controllers of v1 this module uses, each its own mount below root. */
static const char *const v1_controllers[] = { "memory", "pids", "cpu", "cpuacct" };

static int file_path(const sup_cgroup_host *h, const char *ctrl, const char *path,
		     const char *file, char *out, size_t cap, sbx_err *err)
{
	int n = h->mode == SUP_CGROUP_V1 ? snprintf(out, cap, "%s/%s%s/%s", h->root, ctrl, path, file)
					 : snprintf(out, cap, "%s%s/%s", h->root, path, file);
	if (n < 0 || (size_t)n >= cap)
		return sbx_err_set(err, -ENAMETOOLONG, "cgroup file %s of %s: path too long", file,
				   path);
	return 0;
}

/* One write(2) of the whole value: a cgroup file takes a value per write. */
static int write_value(const sup_cgroup_host *h, const char *ctrl, const char *path,
		       const char *file, const char *value, sbx_err *err)
{
	char p[PATH_MAX];
	int r = file_path(h, ctrl, path, file, p, sizeof(p), err);
	if (r < 0)
		return r;
	SBX_AUTO_CLOSE int fd = open(p, O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "cgroup %s", p);
	size_t len = strlen(value);
	ssize_t n = write(fd, value, len);
	if (n < 0)
		return sbx_err_sys(err, -errno, "write '%s' to %s", value, p);
	if ((size_t)n != len)
		return sbx_err_set(err, -EIO, "write '%s' to %s: short write", value, p);
	return 0;
}

static int write_u64(const sup_cgroup_host *h, const char *ctrl, const char *path,
		     const char *file, uint64_t v, sbx_err *err)
{
	char buf[32];
	snprintf(buf, sizeof(buf), "%" PRIu64, v);
	return write_value(h, ctrl, path, file, buf, err);
}

static ssize_t read_file(const sup_cgroup_host *h, const char *ctrl, const char *path,
			 const char *file, char *buf, size_t cap, sbx_err *err)
{
	char p[PATH_MAX];
	int r = file_path(h, ctrl, path, file, p, sizeof(p), err);
	if (r < 0)
		return r;
	return sup_fs_read_small(AT_FDCWD, p, buf, cap, err);
}

static int parse_u64(const char *s, uint64_t *v)
{
	char *end;
	errno = 0;
	unsigned long long x = strtoull(s, &end, 10);
	if (end == s || errno || (*end && *end != '\n' && *end != ' '))
		return -EINVAL;
	*v = x;
	return 0;
}

/* A file holding one number. -ENOENT when the file is not there. */
static int read_u64(const sup_cgroup_host *h, const char *ctrl, const char *path,
		    const char *file, uint64_t *v, sbx_err *err)
{
	char buf[64];
	ssize_t n = read_file(h, ctrl, path, file, buf, sizeof(buf), err);
	if (n < 0)
		return (int)n;
	if (parse_u64(buf, v) < 0)
		return sbx_err_set(err, -EINVAL, "cgroup %s%s/%s: '%.20s' is not a number", ctrl, path,
				   file, buf);
	return 0;
}

/* The number after "key " on a line of a flat keyed file (memory.events,
 * memory.oom_control, cpu.stat). */
static int read_key(const sup_cgroup_host *h, const char *ctrl, const char *path,
		    const char *file, const char *key, uint64_t *v, sbx_err *err)
{
	char buf[1024];
	ssize_t n = read_file(h, ctrl, path, file, buf, sizeof(buf), err);
	if (n < 0)
		return (int)n;
	size_t klen = strlen(key);
	for (const char *l = buf; *l;) {
		if (strncmp(l, key, klen) == 0 && l[klen] == ' ')
			return parse_u64(l + klen + 1, v) < 0
				       ? sbx_err_set(err, -EINVAL, "cgroup %s%s/%s: bad %s line", ctrl,
						     path, file, key)
				       : 0;
		const char *nl = strchr(l, '\n');
		l = nl ? nl + 1 : l + strlen(l);
	}
	return sbx_err_set(err, -ENOENT, "cgroup %s%s/%s: no %s line", ctrl, path, file, key);
}

int sup_cgroup_host_init(sup_cgroup_host *h, const char *root, sup_cgroup_mode mode, bool swap,
			 sbx_err *err)
{
	memset(h, 0, sizeof(*h));
	if (root[0] != '/' || strlen(root) >= sizeof(h->root))
		return sbx_err_set(err, -EINVAL, "cgroup root '%.64s': want an absolute path", root);
	if (mode != SUP_CGROUP_V1 && mode != SUP_CGROUP_V2)
		return sbx_err_set(err, -EINVAL, "cgroup mode %d", (int)mode);
	snprintf(h->root, sizeof(h->root), "%s", root);
	h->mode = mode;
	h->swap = swap;
	return 0;
}

static bool exists(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0;
}

static int detect_v2(const char *root, sup_cgroup_host *h, sbx_err *err)
{
	char p[PATH_MAX], buf[512];
	snprintf(p, sizeof(p), "%s/cgroup.controllers", root);
	if (sup_fs_read_small(AT_FDCWD, p, buf, sizeof(buf), err) < 0)
		return sbx_err_wrap(err, "cgroup v2");
	static const char *const want[] = { "memory", "pids", "cpu" };
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		bool found = false;
		size_t wl = strlen(want[i]);
		for (const char *w = buf; *w && !found;) {
			size_t l = strcspn(w, " \n");
			found = l == wl && memcmp(w, want[i], l) == 0;
			w += l;
			w += strspn(w, " \n");
		}
		if (!found)
			return sbx_err_set(err, -ENOTSUP,
					   "cgroup v2 at %s: the %s controller is not available (%s lists '%s')",
					   root, want[i], p, buf);
	}
	/* Swap accounting shows as memory.swap.max in every non-root cgroup:
	 * look at our own (the root cgroup has none). */
	char self[512];
	bool swap = false;
	if (sup_fs_read_small(AT_FDCWD, "/proc/self/cgroup", self, sizeof(self), err) >= 0) {
		char *l = strstr(self, "0::");
		if (l) {
			l += 3;
			l[strcspn(l, "\n")] = '\0';
			if (strcmp(l, "/") != 0) {
				snprintf(p, sizeof(p), "%s%s/memory.swap.max", root, l);
				swap = exists(p);
			}
		}
	}
	return sup_cgroup_host_init(h, root, SUP_CGROUP_V2, swap, err);
}

static int detect_v1(const char *root, sup_cgroup_host *h, sbx_err *err)
{
	char p[PATH_MAX];
	for (size_t i = 0; i < sizeof(v1_controllers) / sizeof(v1_controllers[0]); i++) {
		struct statfs fs;
		snprintf(p, sizeof(p), "%s/%s", root, v1_controllers[i]);
		if (statfs(p, &fs) < 0 || fs.f_type != CGROUP_SUPER_MAGIC)
			return sbx_err_set(err, -ENOTSUP,
					   "cgroup v1 at %s: %s is not a cgroup mount (the %s controller is needed)",
					   root, p, v1_controllers[i]);
	}
	snprintf(p, sizeof(p), "%s/memory/memory.memsw.limit_in_bytes", root);
	return sup_cgroup_host_init(h, root, SUP_CGROUP_V1, exists(p), err);
}

int sup_cgroup_detect(const char *root, sup_cgroup_host *h, sbx_err *err)
{
	struct statfs fs;
	if (statfs(root, &fs) < 0)
		return sbx_err_sys(err, -errno, "cgroups: %s", root);
	if (fs.f_type == CGROUP2_SUPER_MAGIC)
		return detect_v2(root, h, err);
	return detect_v1(root, h, err);
}

static int apply_memory(const sup_cgroup_host *h, const char *path, uint64_t from, uint64_t to,
			sbx_err *err)
{
	if (h->mode == SUP_CGROUP_V2)
		/* memory.swap.max stays 0, as the runtime set it */
		return write_u64(h, "", path, "memory.max", to, err);
	if (!h->swap)
		return write_u64(h, "memory", path, "memory.limit_in_bytes", to, err);
	/* v1 keeps memory <= memory+swap at every step */
	int r;
	if (to > from) {
		r = write_u64(h, "memory", path, "memory.memsw.limit_in_bytes", to, err);
		r = r ?: write_u64(h, "memory", path, "memory.limit_in_bytes", to, err);
	} else {
		r = write_u64(h, "memory", path, "memory.limit_in_bytes", to, err);
		r = r ?: write_u64(h, "memory", path, "memory.memsw.limit_in_bytes", to, err);
	}
	return r;
}

int sup_cgroup_apply(const sup_cgroup_host *h, const char *path, const sup_resources *from,
		     const sup_resources *to, sbx_err *err)
{
	int r = 0;
	if (to->memory != from->memory)
		r = apply_memory(h, path, from->memory, to->memory, err);
	if (r == 0 && to->pids != from->pids)
		r = write_u64(h, "pids", path, "pids.max", to->pids, err);
	if (r == 0 && to->cpu_milli != from->cpu_milli) {
		uint64_t quota = (uint64_t)to->cpu_milli * SUP_CGROUP_PERIOD_US / 1000u;
		if (h->mode == SUP_CGROUP_V1) {
			r = write_u64(h, "cpu", path, "cpu.cfs_quota_us", quota, err);
		} else {
			char v[48];
			snprintf(v, sizeof(v), "%" PRIu64 " %u", quota, SUP_CGROUP_PERIOD_US);
			r = write_value(h, "", path, "cpu.max", v, err);
		}
	}
	if (r < 0)
		return sbx_err_wrap(err, "set limits of cgroup %s", path);
	return 0;
}

int sup_cgroup_unthrottle(const sup_cgroup_host *h, const char *path, sbx_err *err)
{
	if (h->mode == SUP_CGROUP_V1)
		return write_value(h, "cpu", path, "cpu.cfs_quota_us", "-1", err);
	char v[32];
	snprintf(v, sizeof(v), "max %u", SUP_CGROUP_PERIOD_US);
	return write_value(h, "", path, "cpu.max", v, err);
}

/* Which freezer a cgroup has: v2's core one (cgroup.freeze; on a v1 host
 * the "hybrid" unified mount at <root>/unified holds the same cgroup, and
 * its freezer thaws in 0.1 ms where v1's freezer.state took 12-40 ms on
 * this kernel: BENCHMARKS.md), else v1's freezer controller. ctrl: the
 * prefix file_path takes for it. */
static bool v2_freezer(const sup_cgroup_host *h, const char *path, const char **ctrl)
{
	*ctrl = h->mode == SUP_CGROUP_V2 ? "" : "unified";
	if (h->mode == SUP_CGROUP_V2)
		return true;
	char p[PATH_MAX];
	sbx_err ignored;
	return file_path(h, *ctrl, path, "cgroup.freeze", p, sizeof(p), &ignored) == 0 &&
	       access(p, W_OK) == 0;
}

/* Has the kernel frozen every task? v2: cgroup.events' "frozen 1"; v1:
 * freezer.state reads FROZEN (not FREEZING). */
static int is_frozen(const sup_cgroup_host *h, const char *ctrl, bool v2, const char *path,
		     bool *frozen, sbx_err *err)
{
	if (v2) {
		uint64_t v = 0;
		int r = read_key(h, ctrl, path, "cgroup.events", "frozen", &v, err);
		*frozen = v == 1;
		return r;
	}
	char buf[32];
	ssize_t n = read_file(h, "freezer", path, "freezer.state", buf, sizeof(buf), err);
	if (n < 0)
		return (int)n;
	*frozen = strncmp(buf, "FROZEN", 6) == 0;
	return 0;
}

static int set_frozen(const sup_cgroup_host *h, const char *ctrl, bool v2, const char *path,
		      bool frozen, sbx_err *err)
{
	return v2 ? write_value(h, ctrl, path, "cgroup.freeze", frozen ? "1" : "0", err)
		  : write_value(h, "freezer", path, "freezer.state", frozen ? "FROZEN" : "THAWED", err);
}

int sup_cgroup_freeze(const sup_cgroup_host *h, const char *path, bool frozen, sbx_err *err)
{
	const char *ctrl;
	bool v2 = v2_freezer(h, path, &ctrl);
	int r = set_frozen(h, ctrl, v2, path, frozen, err);
	if (r == 0 && !frozen && v2 && h->mode == SUP_CGROUP_V1) {
		/* frozen through v1 by someone else (`runc pause`): thawed too,
		 * its slow write only then */
		char st[32];
		sbx_err ignored;
		if (read_file(h, "freezer", path, "freezer.state", st, sizeof(st), &ignored) > 0 &&
		    strncmp(st, "THAWED", 6) != 0)
			r = set_frozen(h, "freezer", false, path, false, err);
	}
	if (r < 0 || !frozen)
		return r < 0 ? sbx_err_wrap(err, "%s cgroup %s", frozen ? "freeze" : "thaw", path) : 0;
	/* the kernel freezes task by task: wait for all of them, in steps that
	 * start short (a sandbox of a few tasks is frozen within a few ms) */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long step_us = 20;; step_us = step_us < 5000 ? step_us * 2 : step_us) {
		bool done = false;
		r = is_frozen(h, ctrl, v2, path, &done, err);
		if (r < 0 || done)
			return r < 0 ? sbx_err_wrap(err, "freeze cgroup %s", path) : 0;
		clock_gettime(CLOCK_MONOTONIC, &now);
		long ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
		if (ms >= (long)SUP_CGROUP_FREEZE_WAIT_MS)
			break;
		struct timespec ts = { 0, step_us * 1000 };
		nanosleep(&ts, NULL);
	}
	sbx_err ignored;
	set_frozen(h, ctrl, v2, path, false, &ignored);
	return sbx_err_set(err, -EBUSY,
			   "freeze cgroup %s: its tasks were not all frozen within %u ms (one may be "
			   "in an uninterruptible sleep); thawed again",
			   path, SUP_CGROUP_FREEZE_WAIT_MS);
}

int sup_cgroup_read(const sup_cgroup_host *h, const char *path, sup_usage *u, sbx_err *err)
{
	bool v1 = h->mode == SUP_CGROUP_V1;
	/* Each figure on its own: a host without a controller (or v2 before
	 * Linux 5.19, without memory.peak) still gives the others. */
	sbx_err e[5];
	uint64_t us = 0;
	int r[5];
	r[0] = read_u64(h, "memory", path, v1 ? "memory.usage_in_bytes" : "memory.current",
			&u->memory, &e[0]);
	r[1] = read_u64(h, "memory", path, v1 ? "memory.max_usage_in_bytes" : "memory.peak",
			&u->memory_peak, &e[1]);
	r[2] = v1 ? read_u64(h, "cpuacct", path, "cpuacct.usage", &u->cpu_ns, &e[2])
		  : read_key(h, "", path, "cpu.stat", "usage_usec", &us, &e[2]);
	if (!v1)
		u->cpu_ns = us * 1000u;
	r[3] = read_u64(h, "pids", path, "pids.current", &u->pids, &e[3]);
	r[4] = v1 ? read_key(h, "memory", path, "memory.oom_control", "oom_kill", &u->oom_kills, &e[4])
		  : read_key(h, "", path, "memory.events", "oom_kill", &u->oom_kills, &e[4]);
	static const unsigned bits[5] = { SUP_USAGE_MEMORY, SUP_USAGE_MEMORY_PEAK, SUP_USAGE_CPU,
					  SUP_USAGE_PIDS, SUP_USAGE_OOM_KILLS };
	u->known &= SUP_USAGE_DISK;
	int first = -1;
	for (int i = 0; i < 5; i++) {
		if (r[i] == 0)
			u->known |= bits[i];
		else if (first < 0)
			first = i;
	}
	if (first >= 0 && (u->known & ~(unsigned)SUP_USAGE_DISK) == 0) {
		*err = e[first];
		return sbx_err_wrap(err, "usage of cgroup %s", path);
	}
	return 0;
}
