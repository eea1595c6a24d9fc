/* What a start reads of the runtimes' state roots: the containers there
 * and their states, a handed-over sandbox adopted again, the leftovers of
 * an earlier run (calls killed, frozen ones thawed, containers and folders
 * removed), the state root locked and the runtimes checked. Blocking:
 * start-up and worker threads only. */
#include "sup_runc.h"

#include <ctype.h>
#include <sys/file.h>
#include <sys/pidfd.h>
#include <sys/syscall.h>

#include <jansson.h>

#include <errno.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/clock.h"
#include "sup_cgroup.h"
#include "sup_disk.h"
#include "sup_fsutil.h"
#include "sup_overlay.h"
#include "sup_runc_cmd.h"
#include "sup_runc_image.h"
#include "sup_runc_int.h"

#define STATES_OUT_MAX (8u << 20) /* one `list --format json` of a state root */

struct sup_runc_states {
	/* per isolation: container id -> the runtime's state of it (an
	 * object with "status" and "pid"); NULL: not read (each adopt asks
	 * `state` of its own) */
	json_t *by_id[SUP_ISO_N];
};

/* One `<runtime> list --format json` of its state root, by id. */
static int list_states(const sup_runtime *rt, json_t **out, sbx_err *err)
{
	*out = NULL;
	SBX_AUTO_FREE char *buf = malloc(STATES_OUT_MAX);
	if (!buf)
		return sbx_err_set(err, -ENOMEM, "%s list", rt->binary);
	char errout[256];
	static const char *const args[] = { "list", "--format", "json", NULL };
	int r = sup_runc_runtime_run(rt, args, buf, STATES_OUT_MAX, errout, sizeof(errout), err);
	if (r > 0)
		return sbx_err_set(err, -EIO, "%s list: exit %d: %s", rt->binary, r, errout);
	if (r < 0)
		return sbx_err_wrap(err, "%s list", rt->binary);
	json_error_t je;
	json_t *all = json_loads(buf, JSON_DECODE_ANY, &je);
	json_t *by_id = json_object();
	/* an empty root lists "null" (runc) or "[]" */
	if (!by_id || !all || (!json_is_array(all) && !json_is_null(all))) {
		json_decref(all);
		json_decref(by_id);
		return sbx_err_set(err, -EPROTO, "%s list: not a JSON list: %s", rt->binary, je.text);
	}
	size_t i;
	json_t *st;
	json_array_foreach(all, i, st) {
		const char *cid = json_string_value(json_object_get(st, "id"));
		if (cid && json_object_set(by_id, cid, st) < 0) {
			json_decref(all);
			json_decref(by_id);
			return sbx_err_set(err, -ENOMEM, "%s list", rt->binary);
		}
	}
	json_decref(all);
	*out = by_id;
	return 0;
}

int sup_runc_states_read(const sup_runc_cfg *cfg, sup_runc_states **out, sbx_err *err)
{
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return sbx_err_set(err, -ENOMEM, "runtime states");
	int rc = 0;
	for (int iso = 0; iso < SUP_ISO_N; iso++) {
		const sup_runtime *rt = sup_runc_runtime_of(cfg, (sup_isolation)iso);
		sbx_err e;
		if (rt && list_states(rt, &(*out)->by_id[iso], &e) < 0 && rc == 0) {
			rc = e.code; /* the others are still read; this one's adopts ask one by one */
			*err = e;
		}
	}
	return rc;
}

void sup_runc_states_free(sup_runc_states *st)
{
	if (!st)
		return;
	for (int iso = 0; iso < SUP_ISO_N; iso++)
		json_decref(st->by_id[iso]);
	free(st);
}

/* The runtime's state of container cid: from the listing, or its own
 * `state` call. *state: a new reference, NULL when the runtime has none. */
static int state_of(const sup_runtime *rt, const json_t *listed, const char *cid, json_t **state,
		    sbx_err *err)
{
	*state = NULL;
	if (listed) {
		*state = json_incref(json_object_get(listed, cid));
		if (!*state)
			return sbx_err_set(err, -ESRCH, "%s lists no container %s", rt->binary, cid);
		return 0;
	}
	char out[4096], errout[256];
	const char *args[] = { "state", cid, NULL };
	int r = sup_runc_runtime_run(rt, args, out, sizeof(out), errout, sizeof(errout), err);
	if (r > 0)
		return sbx_err_set(err, -ESRCH, "%s state: exit %d: %s", rt->binary, r, errout);
	if (r < 0)
		return sbx_err_wrap(err, "%s state", rt->binary);
	*state = json_loads(out, 0, NULL);
	return 0;
}

int sup_runc_adopt(const sup_runc_cfg *cfg, const sup_runc_states *states, const char *id,
		   sup_isolation isolation, sup_runc_box *box, sbx_err *err)
{
	memset(box, 0, sizeof(*box));
	const sup_runtime *rt = sup_runc_runtime_of(cfg, isolation);
	if (!rt)
		return sbx_err_set(err, -EINVAL, "sandbox %.64s: isolation %s is not offered now", id,
				   (unsigned)isolation < SUP_ISO_N ? sup_isolation_names[isolation] : "?");
	SBX_AUTO_FREE box_paths *p = calloc(1, sizeof(*p));
	if (!p)
		return sbx_err_set(err, -ENOMEM, "adopt sandbox");
	int r = sup_runc_make_paths(cfg, id, p, err);
	pid_t pid = 0;
	r = r ?: sup_runc_read_pid(p->pidfile, &pid, err);
	if (r < 0)
		return sbx_err_wrap(err, "sandbox %.64s", id);
	if (!sup_runc_is_container_pid(pid, p->cgroup))
		return sbx_err_set(err, -ESRCH, "sandbox %s: its init (pid %d) is gone", id, (int)pid);
	/* the runtime's word too: a container it no longer runs is not ours
	 * to keep, whatever is left in its cgroup */
	json_t *st = NULL;
	r = state_of(rt, states ? states->by_id[isolation] : NULL, p->cid, &st, err);
	if (r < 0)
		return sbx_err_wrap(err, "sandbox %s", id);
	const char *status = json_string_value(json_object_get(st, "status"));
	/* paused: frozen by sup_runc_freeze, and kept so */
	bool running = status && (strcmp(status, "running") == 0 || strcmp(status, "paused") == 0);
	json_int_t spid = json_integer_value(json_object_get(st, "pid"));
	r = running && spid == pid ? 0
				   : sbx_err_set(err, -ESRCH, "sandbox %s: %s says %s (pid %lld)", id,
						 rt->binary, status ? status : "nothing readable",
						 (long long)spid);
	json_decref(st);
	if (r < 0)
		return r;
	sup_runc_fill_box(box, p, id, isolation, pid);
	return 0;
}

/* Does /proc/<pid>/cmdline hold an argument starting with prefix? */
static bool names_prefix(long pid, const char *prefix)
{
	char path[64], buf[8192];
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
	SBX_AUTO_CLOSE int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	size_t plen = strlen(prefix);
	for (char *a = buf; a < buf + n; a += strlen(a) + 1)
		if (strncmp(a, prefix, plen) == 0 && sup_runc_valid_id(a + plen))
			return true;
	return false;
}

/* Is pid inside the cgroup of one of this folder's containers? Then it
 * is part of a container (gVisor's runsc-sandbox and runsc-gofer carry the
 * container id in their arguments for as long as the container lives),
 * never a runtime call: a call runs in the supervisor's cgroup. */
static bool in_container_cgroup(long pid, const char *prefix)
{
	char path[64], buf[4096], want[32];
	snprintf(path, sizeof(path), "/proc/%ld/cgroup", pid);
	snprintf(want, sizeof(want), "/sbx/%s", prefix);
	sbx_err ignored;
	if (sup_fs_read_small(AT_FDCWD, path, buf, sizeof(buf), &ignored) < 0)
		return false;
	return strstr(buf, want) != NULL;
}

int sup_runc_kill_calls(const sup_runc_cfg *cfg, sbx_err *err)
{
	char state[PATH_MAX], prefix[16];
	int r = sup_runc_resolve_state(cfg->state_dir, state, err);
	if (r < 0)
		return sbx_err_wrap(err, "runtime calls of an earlier run");
	sup_runc_container_prefix(state, prefix, sizeof(prefix));
	SBX_AUTO_CLOSEDIR DIR *d = opendir("/proc");
	if (!d)
		return sbx_err_sys(err, -errno, "runtime calls of an earlier run: /proc");
	int killed = 0;
	pid_t self = getpid();
	struct dirent *de;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 1 || pid == self || !names_prefix(pid, prefix) ||
		    in_container_cgroup(pid, prefix))
			continue;
		/* a call leads its own session (sup_runc_cmd): its group holds
		 * whatever it forked (runc init of a container being made) */
		pid_t pg = getpgid((pid_t)pid);
		int k = pg == (pid_t)pid ? kill(-pg, SIGKILL) : kill((pid_t)pid, SIGKILL);
		if (k < 0)
			continue; /* gone meanwhile */
		killed++;
		SBX_AUTO_CLOSE int pfd = pidfd_open((pid_t)pid, 0);
		struct pollfd pf = { .fd = pfd, .events = POLLIN };
		while (pfd >= 0 && poll(&pf, 1, KILL_WAIT_MS) < 0 && errno == EINTR)
			;
	}
	return killed;
}

int sup_runc_thaw_all(const sup_runc_cfg *cfg, sbx_err *err)
{
	char state[PATH_MAX], sandboxes[PATH_MAX];
	int r = sup_runc_resolve_state(cfg->state_dir, state, err);
	if (r < 0)
		return sbx_err_wrap(err, "thaw");
	if (sup_runc_fmt(sandboxes, sizeof(sandboxes), "%s/sandboxes", state) < 0)
		return sbx_err_set(err, -ENAMETOOLONG, "thaw: path too long");
	SBX_AUTO_CLOSEDIR DIR *d = opendir(sandboxes);
	if (!d)
		return errno == ENOENT ? 0 : sbx_err_sys(err, -errno, "thaw: %s", sandboxes);
	SBX_AUTO_FREE box_paths *p = calloc(1, sizeof(*p));
	if (!p)
		return sbx_err_set(err, -ENOMEM, "thaw");
	int thawed = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		sbx_err e;
		if (!sup_runc_valid_id(de->d_name) || sup_runc_make_paths(cfg, de->d_name, p, &e) < 0)
			continue;
		/* no cgroup (the container is gone): nothing to thaw */
		if (sup_cgroup_freeze(cfg->cgroup, p->cgroup, false, &e) == 0)
			thawed++;
	}
	return thawed;
}

int sup_runc_remove_leftovers(const sup_runc_cfg *cfg, const char *const *keep, size_t nkeep,
			      sbx_err *err)
{
	char state[PATH_MAX], prefix[16], sandboxes[PATH_MAX];
	int r = sup_runc_resolve_state(cfg->state_dir, state, err);
	if (r < 0)
		return sbx_err_wrap(err, "remove leftovers");
	sup_runc_container_prefix(state, prefix, sizeof(prefix));
	if (sup_runc_fmt(sandboxes, sizeof(sandboxes), "%s/sandboxes", state) < 0)
		return sbx_err_set(err, -ENAMETOOLONG, "remove leftovers: path too long");

	int removed = 0;
	SBX_AUTO_FREE char *out = calloc(1, LIST_OUT_MAX);
	SBX_AUTO_FREE box_paths *p = calloc(1, sizeof(*p));
	if (!out || !p)
		return sbx_err_set(err, -ENOMEM, "remove leftovers");
	size_t plen = strlen(prefix);
	for (int iso = 0; iso < SUP_ISO_N; iso++) {
		const sup_runtime *rt = sup_runc_runtime_of(cfg, (sup_isolation)iso);
		if (!rt)
			continue;
		r = sup_runc_runtime_list(rt, out, err);
		if (r < 0)
			return sbx_err_wrap(err, "remove leftovers");
		for (char *l = out; *l;) {
			char *e = strchrnul(l, '\n');
			char *next = *e ? e + 1 : e;
			*e = '\0';
			if (strncmp(l, prefix, plen) == 0 && sup_runc_valid_id(l + plen) &&
			    !sup_runc_kept(keep, nkeep, l + plen)) {
				r = sup_runc_make_paths(cfg, l + plen, p, err);
				if (r == 0)
					r = sup_runc_destroy_paths(cfg, rt, p, false, err);
				if (r < 0)
					return sbx_err_wrap(err, "remove leftovers");
				removed++;
			}
			l = next;
		}
	}

	/* nothing kept: whatever is below the folder goes, also a mount or
	 * loop device whose folder is gone already */
	if (nkeep == 0) {
		r = sup_overlay_umount_under(sandboxes, err);
		if (r >= 0)
			r = sup_disk_sweep(sandboxes, err);
		if (r < 0)
			return sbx_err_wrap(err, "remove leftovers");
	}
	SBX_AUTO_CLOSEDIR DIR *d = opendir(sandboxes);
	if (!d) {
		if (errno == ENOENT)
			return removed;
		return sbx_err_sys(err, -errno, "remove leftovers: %s", sandboxes);
	}
	struct dirent *de;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		char path[PATH_MAX];
		if (sup_runc_kept(keep, nkeep, de->d_name) ||
		    sup_runc_fmt(path, sizeof(path), "%s/%s", sandboxes, de->d_name) < 0)
			continue;
		/* its mounts and loop device first, then its files */
		r = sup_overlay_umount_under(path, err);
		r = r < 0 ? r : sup_disk_sweep(path, err);
		r = r < 0 ? r : sup_fs_rm_tree(path, err);
		if (r < 0)
			return sbx_err_wrap(err, "remove leftovers");
		removed++;
	}
	return removed;
}

static int mkdir_p(const char *path, mode_t mode, sbx_err *err)
{
	char buf[PATH_MAX];
	if (sup_runc_fmt(buf, sizeof(buf), "%s", path) < 0)
		return sbx_err_set(err, -ENAMETOOLONG, "mkdir %s: too long", path);
	for (char *s = buf + 1;; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return sbx_err_sys(err, -errno, "mkdir %s", buf);
		*s = c;
		if (!c)
			return 0;
	}
}

/* One supervisor per state folder: a second one would take the first's
 * sandboxes for leftovers and remove them. The lock is a POSIX record lock
 * on <state>/lock, held by the process (so a second init in the same process
 * is fine) until it exits; the fd is deliberately never closed, as closing
 * any fd of the file would drop the lock. */
static int lock_state(const char *state, sbx_err *err)
{
	char path[PATH_MAX];
	if (sup_runc_fmt(path, sizeof(path), "%s/lock", state) < 0)
		return sbx_err_set(err, -ENAMETOOLONG, "lock %s: path too long", state);
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "open %s", path);
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	if (fcntl(fd, F_SETLK, &fl) == 0)
		return 0;
	int e = errno;
	struct flock who = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
	int holder = fcntl(fd, F_GETLK, &who) == 0 && who.l_type != F_UNLCK ? (int)who.l_pid : 0;
	close(fd);
	if (e == EAGAIN || e == EACCES)
		return sbx_err_set(err, -EBUSY, "state folder %s is in use by another supervisor (pid %d)",
				   state, holder);
	return sbx_err_sys(err, -e, "lock %s", path);
}

int sup_runc_runtime_check(const sup_runtime *rt, sbx_err *err)
{
	char errout[256], out[256];
	static const char *const args[] = { "--version", NULL };
	const char *argv[SUP_RUNTIME_ARGV_MAX];
	/* --version alone: runsc refuses global flags it would not use */
	sup_runtime bare = { .binary = rt->binary };
	if (!rt->binary || !rt->binary[0])
		return sbx_err_set(err, -EINVAL, "no runtime binary set");
	sup_runtime_argv(&bare, NULL, args, argv);
	sup_runc_cmd c = {.argv = argv, .stdout_fd = -1, .stderr_fd = -1, .out = out,
			  .out_cap = sizeof(out), .errout = errout, .errout_cap = sizeof(errout),
			  .timeout_ms = 10000};
	int r = sup_runc_cmd_run(&c, err);
	if (r == -E2BIG)
		r = 0; /* a long version text is still an answer */
	if (r > 0)
		r = sbx_err_set(err, -EIO, "%s --version: exit %d: %s", rt->binary, r, errout);
	if (r < 0)
		return sbx_err_wrap(err, "runtime '%s' does not answer", rt->binary);
	return 0;
}

int sup_runc_init(const sup_runc_cfg *cfg, sbx_err *err)
{
	if (!cfg->runtimes[SUP_ISO_RUNC].binary || !cfg->runtimes[SUP_ISO_RUNC].binary[0])
		return sbx_err_set(err, -EINVAL, "runc backend: no runtime binary set");
	if (!cfg->cgroup || !cfg->res || cfg->disk_ceiling < cfg->res->disk)
		return sbx_err_set(err, -EINVAL, "runc backend: no cgroups, limits or disk ceiling set");
	if (!cfg->agent_path || cfg->agent_path[0] != '/')
		return sbx_err_set(err, -EINVAL, "runc backend: agent path '%s' is not absolute",
				   cfg->agent_path ? cfg->agent_path : "(null)");
	struct stat st;
	if (stat(cfg->agent_path, &st) < 0)
		return sbx_err_sys(err, -errno, "runc backend: agent %s", cfg->agent_path);
	if (!S_ISREG(st.st_mode) || !(st.st_mode & 0111))
		return sbx_err_set(err, -EACCES, "runc backend: agent %s is not an executable file",
				   cfg->agent_path);
	if (!cfg->state_dir || cfg->state_dir[0] != '/')
		return sbx_err_set(err, -EINVAL, "runc backend: state folder '%s' is not absolute",
				   cfg->state_dir ? cfg->state_dir : "(null)");
	int r = mkdir_p(cfg->state_dir, 0700, err);
	if (r < 0)
		return sbx_err_wrap(err, "runc backend");
	char state[PATH_MAX];
	r = sup_runc_resolve_state(cfg->state_dir, state, err);
	if (r < 0)
		return sbx_err_wrap(err, "runc backend");
	r = sup_overlay_check_path("state folder", state, err);
	if (r < 0)
		return sbx_err_wrap(err, "runc backend");
	/* fail now, not at the first create with a long id */
	size_t need = strlen(state) + strlen("/sandboxes/") + ID_MAX + strlen(SOCK_SUFFIX);
	size_t have = sizeof(((struct sockaddr_un *)0)->sun_path) - 1;
	if (need > have)
		return sbx_err_set(err, -ENAMETOOLONG,
				   "runc backend: state folder %s is too long: agent socket paths would "
				   "need %zu bytes, a unix socket address holds %zu; use a folder of at "
				   "most %zu characters",
				   state, need, have, have - (need - strlen(state)));
	r = lock_state(state, err);
	if (r < 0)
		return sbx_err_wrap(err, "runc backend");
	char sub[PATH_MAX];
	if (sup_runc_fmt(sub, sizeof(sub), "%s/sandboxes", state) < 0 || (mkdir(sub, 0700) < 0 && errno != EEXIST))
		return sbx_err_sys(err, -errno, "runc backend: mkdir %s", sub);
	if (sup_runc_fmt(sub, sizeof(sub), "%s/images", state) < 0 || (mkdir(sub, 0700) < 0 && errno != EEXIST))
		return sbx_err_sys(err, -errno, "runc backend: mkdir %s", sub);

	for (int iso = 0; iso < SUP_ISO_N; iso++) {
		const sup_runtime *rt = sup_runc_runtime_of(cfg, (sup_isolation)iso);
		if (!rt)
			continue;
		r = sup_runc_runtime_check(rt, err);
		if (r == 0 && rt->root)
			r = mkdir_p(rt->root, 0700, err);
		if (r < 0)
			return sbx_err_wrap(err, "runc backend: %s isolation", sup_isolation_names[iso]);
	}

	r = sup_runc_image_prepare_host(state, err);
	r = r ?: sup_disk_template(state, cfg->disk_ceiling, err);
	if (r < 0)
		return sbx_err_wrap(err, "runc backend");
	return 0;
}
