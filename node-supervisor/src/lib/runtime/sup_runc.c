/* sup_runc: see sup_runc.h. Layout of one sandbox on the host:
 *   <state>/sandboxes/<id>/bundle/config.json   OCI config (sup_bundle)
 *   <state>/sandboxes/<id>/bundle/rootfs        overlay mount point
 *   <state>/sandboxes/<id>/disk.img, disk/       the writable layer's file system
 *                                               (sup_disk), holding
 *   <state>/sandboxes/<id>/disk/upper, disk/work overlay upper and work folders
 *   <state>/sandboxes/<id>/run                  /run/sandbox inside: agent.sock
 *   <state>/sandboxes/<id>/fork                 the fork slot: a lower layer,
 *                                               empty until sup_runc_fill
 *   <state>/sandboxes/<id>/agent.log            the agent's stdout and stderr
 *   <state>/sandboxes/<id>/runtime.log          the runtime's own log
 *   <state>/sandboxes/<id>/init.pid             host pid of the agent
 * Here: a sandbox's paths, the runtime's calls and a destroy; a create is
 * sup_runc_create.c, a start's reading of the state roots (adoption,
 * leftovers, init) sup_runc_states.c. */
#include "sup_runc.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "sbx/cleanup.h"
#include "sbx/clock.h"
#include "sup_bundle.h"
#include "sup_cgroup.h"
#include "sup_disk.h"
#include "sup_fsutil.h"
#include "sup_layer_tar.h"
#include "sup_overlay.h"
#include "sup_runc_cmd.h"
#include "sup_runc_image.h"
#include "sup_runc_int.h"

__attribute__((format(printf, 3, 4))) int sup_runc_fmt(char *buf, size_t cap, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int n = vsnprintf(buf, cap, f, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

int sup_runc_valid_id(const char *id)
{
	size_t n = strlen(id);
	if (n == 0 || n > ID_MAX)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(islower((unsigned char)id[i]) || isdigit((unsigned char)id[i]) || id[i] == '-'))
			return 0;
	return 1;
}

/* A short, stable tag of the state folder, part of every container id: two
 * supervisors with different state folders never take each other's
 * containers for leftovers. */
static void state_tag(const char *state_real, char out[9])
{
	uint32_t h = 2166136261u;
	for (const char *p = state_real; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	snprintf(out, 9, "%08x", h);
}

int sup_runc_resolve_state(const char *state_dir, char out[PATH_MAX], sbx_err *err)
{
	out[0] = '\0'; /* never garbage, whatever the caller does with a failure */
	if (!state_dir || state_dir[0] != '/')
		return sbx_err_set(err, -EINVAL, "state folder '%s': not an absolute path",
				   state_dir ? state_dir : "(null)");
	if (!realpath(state_dir, out))
		return sbx_err_sys(err, -errno, "state folder %s", state_dir);
	return 0;
}

int sup_runc_state_tag(const sup_runc_cfg *cfg, char out[9], sbx_err *err)
{
	char state[PATH_MAX];
	int r = sup_runc_resolve_state(cfg->state_dir, state, err);
	if (r < 0)
		return r;
	state_tag(state, out);
	return 0;
}

int sup_runc_container_prefix(const char *state_real, char *buf, size_t cap)
{
	char tag[9];
	state_tag(state_real, tag);
	return sup_runc_fmt(buf, cap, "sbx-%s-", tag);
}

int sup_runc_make_paths(const sup_runc_cfg *cfg, const char *id, box_paths *p, sbx_err *err)
{
	if (!sup_runc_valid_id(id))
		return sbx_err_set(err, -EINVAL, "sandbox id '%.64s': want 1-%d of [a-z0-9-]", id, ID_MAX);
	int r = sup_runc_resolve_state(cfg->state_dir, p->state, err);
	if (r < 0)
		return r;
	char prefix[16];
	r = sup_runc_container_prefix(p->state, prefix, sizeof(prefix));
	r = r ?: sup_runc_fmt(p->cid, sizeof(p->cid), "%s%s", prefix, id);
	r = r ?: sup_runc_fmt(p->cgroup, sizeof(p->cgroup), "/sbx/%s", p->cid);
	r = r ?: sup_runc_fmt(p->dir, sizeof(p->dir), "%s/sandboxes/%s", p->state, id);
	r = r ?: sup_runc_fmt(p->bundle, sizeof(p->bundle), "%s/bundle", p->dir);
	r = r ?: sup_runc_fmt(p->rootfs, sizeof(p->rootfs), "%s/bundle/rootfs", p->dir);
	r = r ?: sup_runc_fmt(p->upper, sizeof(p->upper), "%s/" SUP_DISK_UPPER, p->dir);
	r = r ?: sup_runc_fmt(p->work, sizeof(p->work), "%s/" SUP_DISK_WORK, p->dir);
	r = r ?: sup_runc_fmt(p->run, sizeof(p->run), "%s/run", p->dir);
	r = r ?: sup_runc_fmt(p->log, sizeof(p->log), "%s/agent.log", p->dir);
	r = r ?: sup_runc_fmt(p->rtlog, sizeof(p->rtlog), "%s/runtime.log", p->dir);
	r = r ?: sup_runc_fmt(p->pidfile, sizeof(p->pidfile), "%s/init.pid", p->dir);
	if (r < 0)
		return sbx_err_set(err, r, "sandbox %s: state folder path too long", id);
	if (sup_runc_fmt(p->sock, sizeof(p->sock), "%s" SOCK_SUFFIX, p->dir) < 0)
		return sbx_err_set(err, -ENAMETOOLONG,
				   "sandbox %s: agent socket path %s" SOCK_SUFFIX
				   " is longer than a unix socket address (%zu bytes): use a shorter state folder",
				   id, p->dir, sizeof(p->sock) - 1);
	return 0;
}

/* ---- runtime calls ---------------------------------------------------- */

/* Run `<runtime> ARGS...` (NULL-ended) with RUN_TIMEOUT_MS; its stdout
 * into out (out_cap bytes; out NULL: dropped), its stderr into errout.
 * Returns its exit status, or <0 when it could not run. */
int sup_runc_runtime_run(const sup_runtime *rt, const char *const *args, char *out, size_t out_cap,
		       char *errout, size_t errout_cap, sbx_err *err)
{
	const char *argv[SUP_RUNTIME_ARGV_MAX];
	if (sup_runtime_argv(rt, NULL, args, argv) < 0)
		return sbx_err_set(err, -E2BIG, "%s %s: too many arguments", rt->binary, args[0]);
	sup_runc_cmd c = {.argv = argv, .stdout_fd = -1, .stderr_fd = -1, .out = out,
			  .out_cap = out_cap, .errout = errout, .errout_cap = errout_cap,
			  .timeout_ms = RUN_TIMEOUT_MS};
	return sup_runc_cmd_run(&c, err);
}

/* `<runtime> list --quiet` into out (LIST_OUT_MAX bytes): one id a line.
 * runc's list fails when a container (anyone's: the root is shared) goes
 * while it reads them ("container does not exist"): a few more tries. */
int sup_runc_runtime_list(const sup_runtime *rt, char *out, sbx_err *err)
{
	char errout[256];
	static const char *const args[] = { "list", "--quiet", NULL };
	int r = 0;
	for (int i = 0; i < LIST_TRIES; i++) {
		r = sup_runc_runtime_run(rt, args, out, LIST_OUT_MAX, errout, sizeof(errout), err);
		if (r <= 0)
			return r;
		struct timespec pause = {0, LIST_RETRY_NS};
		nanosleep(&pause, NULL);
	}
	return sbx_err_set(err, -EIO, "%s list: exit %d: %s", rt->binary, r, errout);
}

/* Is the container listed by the runtime? 1 yes, 0 no, <0 error. */
static int runtime_has(const sup_runtime *rt, const char *cid, sbx_err *err)
{
	SBX_AUTO_FREE char *out = calloc(1, LIST_OUT_MAX);
	if (!out)
		return sbx_err_set(err, -ENOMEM, "%s list", rt->binary);
	int r = sup_runc_runtime_list(rt, out, err);
	if (r < 0)
		return r;
	size_t n = strlen(cid);
	for (char *l = out; *l;) {
		char *e = strchrnul(l, '\n');
		if ((size_t)(e - l) == n && memcmp(l, cid, n) == 0)
			return 1;
		l = *e ? e + 1 : e;
	}
	return 0;
}

int sup_runc_read_pid(const char *pidfile, pid_t *pid, sbx_err *err)
{
	char buf[32];
	ssize_t n = sup_fs_read_small(AT_FDCWD, pidfile, buf, sizeof(buf), err);
	if (n < 0)
		return (int)n;
	char *end;
	long v = strtol(buf, &end, 10);
	if (end == buf || v <= 1 || v > INT32_MAX)
		return sbx_err_set(err, -EINVAL, "pid file %s: '%s'", pidfile, buf);
	*pid = (pid_t)v;
	return 0;
}

/* Run `<runtime> <args...> <cid>`; returns its exit status, errout gets
 * its stderr. */
static int runtime_call(const sup_runtime *rt, const char *a1, const char *a2, const char *a3,
			char *errout, size_t cap, sbx_err *err)
{
	const char *args[] = {a1, a2, a3, NULL};
	return sup_runc_runtime_run(rt, args, NULL, 0, errout, cap, err);
}

/* Is pid still the container's init (a pid can be reused once it is gone)?
 * Its cgroup names the container. */
bool sup_runc_is_container_pid(pid_t pid, const char *cgroup)
{
	char path[64], buf[4096];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	sbx_err ignored;
	if (sup_fs_read_small(AT_FDCWD, path, buf, sizeof(buf), &ignored) < 0)
		return false;
	size_t n = strlen(cgroup);
	for (const char *h = buf; (h = strstr(h, cgroup)); h += n)
		if (h[n] == '\n' || h[n] == '/' || h[n] == '\0')
			return true;
	return false;
}

static int runtime_delete(const sup_runc_cfg *cfg, const sup_runtime *rt, const box_paths *p,
			  sbx_err *err)
{
	/* `delete --force` alone would do, but runc then sleeps in steps of
	 * 100 ms until the init is gone; kill, a wait on a pidfd and a plain
	 * delete take a fraction of that */
	SBX_AUTO_CLOSE int pfd = -1;
	pid_t pid = 0;
	sbx_err ignored;
	if (sup_runc_read_pid(p->pidfile, &pid, &ignored) == 0) {
		pfd = pidfd_open(pid, 0);
		if (pfd >= 0 && !sup_runc_is_container_pid(pid, p->cgroup)) {
			close(pfd);
			pfd = -1;
		}
	}
	char errout[384];
	if (pfd >= 0) {
		/* The pidfd is the container's init (checked above): signal it
		 * directly rather than through a runtime process (30-90 ms of
		 * the destroy). Its death takes every process of its PID
		 * namespace with it (under gVisor: the sandbox's kernel), and
		 * the kernel allows that namespace no new pid from then on, so
		 * a fork bomb ends there too; its CPU quota is lifted first, so
		 * that the dying are not held back by the throttle (a fork
		 * bomb's took 0.3-1.4 s to die). */
		sup_cgroup_unthrottle(cfg->cgroup, p->cgroup, &ignored);
		if (pidfd_send_signal(pfd, SIGKILL, NULL, 0) < 0)
			/* "not running" and "does not exist" are fine: delete says more */
			runtime_call(rt, "kill", p->cid, "KILL", errout, sizeof(errout), &ignored);
		/* a paused sandbox: its frozen tasks die only once thawed */
		sup_cgroup_freeze(cfg->cgroup, p->cgroup, false, &ignored);
		struct pollfd pf = {.fd = pfd, .events = POLLIN};
		while (poll(&pf, 1, KILL_WAIT_MS) < 0 && errno == EINTR)
			;
		if (runtime_call(rt, "delete", p->cid, NULL, errout, sizeof(errout), &ignored) == 0)
			return 0;
	}
	int r = runtime_call(rt, "delete", "--force", p->cid, errout, sizeof(errout), err);
	if (r == 0)
		return 0;
	if (r > 0) {
		/* "does not exist" reads differently in every runtime: ask the
		 * list instead of parsing the message */
		int has = runtime_has(rt, p->cid, &ignored);
		if (has == 0)
			return 0;
		return sbx_err_set(err, -EIO, "%s delete %s: exit %d: %s", rt->binary, p->cid, r,
				   errout);
	}
	return sbx_err_wrap(err, "delete container %s", p->cid);
}

/* Unmount and remove what a sandbox left on the host, container first (its
 * processes may still use the rootfs). best_effort: go on with the host side
 * even when the runtime cannot delete the container; only for a create whose
 * `run` failed, which leaves no container behind. */
int sup_runc_destroy_paths(const sup_runc_cfg *cfg, const sup_runtime *rt, const box_paths *p,
			 bool best_effort,
			 sbx_err *err)
{
	sbx_err derr;
	/* a paused sandbox is thawed first: runsc kills through the Sentry,
	 * which cannot answer frozen. Best effort: a cgroup already gone has
	 * nothing to thaw, and a thaw that fails shows as the delete's error */
	(void)sup_cgroup_freeze(cfg->cgroup, p->cgroup, false, &derr);
	int r = runtime_delete(cfg, rt, p, &derr);
	if (r < 0 && !best_effort) {
		*err = derr;
		return r;
	}
	r = sup_overlay_umount(p->rootfs, err);
	r = r ?: sup_disk_unmount(p->dir, err);
	if (r < 0)
		return r;
	return sup_fs_rm_tree(p->dir, err);
}

/* ---- destroy, leftovers, init ----------------------------------------- */

bool sup_runc_kept(const char *const *keep, size_t nkeep, const char *id)
{
	for (size_t i = 0; i < nkeep; i++)
		if (strcmp(keep[i], id) == 0)
			return true;
	return false;
}

int sup_runc_destroy(const sup_runc_cfg *cfg, const sup_runc_box *box, sbx_err *err)
{
	/* every path is rebuilt from the id: nothing in box is trusted as a
	 * path to remove */
	const sup_runtime *rt = sup_runc_runtime_of(cfg, box->isolation);
	if (!rt)
		return sbx_err_set(err, -EINVAL, "destroy sandbox %.64s: its isolation is not offered",
				   box->id);
	SBX_AUTO_FREE box_paths *p = calloc(1, sizeof(*p));
	if (!p)
		return sbx_err_set(err, -ENOMEM, "destroy sandbox");
	int r = sup_runc_make_paths(cfg, box->id, p, err);
	if (r == 0)
		r = sup_runc_destroy_paths(cfg, rt, p, false, err);
	if (r < 0)
		return sbx_err_wrap(err, "destroy sandbox %.64s", box->id);
	return 0;
}
