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
 *   <state>/sandboxes/<id>/init.pid             host pid of the agent */
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

#define ID_MAX 40
#define DEFAULT_READY_MS 10000u
#define RUN_TIMEOUT_MS 30000u
#define LIST_OUT_MAX (1u << 20)
#define LIST_TRIES 4
#define LIST_RETRY_NS 50000000L
#define SOCK_SUFFIX "/run/agent.sock"
#define NOFILE_WANT 65536ul
#define KILL_WAIT_MS 5000
#define SEED_MAX_ENTRIES (1u << 20)

typedef struct box_paths {
	char state[PATH_MAX]; /* the state folder, resolved */
	char dir[PATH_MAX];
	char bundle[PATH_MAX];
	char rootfs[PATH_MAX];
	char upper[PATH_MAX];
	char work[PATH_MAX];
	char run[PATH_MAX];
	char log[PATH_MAX];
	char rtlog[PATH_MAX];
	char pidfile[PATH_MAX];
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)];
	char cid[64];
	char cgroup[96];
} box_paths;

__attribute__((format(printf, 3, 4))) static int fmt(char *buf, size_t cap, const char *f, ...)
{
	va_list ap;
	va_start(ap, f);
	int n = vsnprintf(buf, cap, f, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

static int valid_id(const char *id)
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

static int resolve_state(const char *state_dir, char out[PATH_MAX], sbx_err *err)
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
	int r = resolve_state(cfg->state_dir, state, err);
	if (r < 0)
		return r;
	state_tag(state, out);
	return 0;
}

static int container_prefix(const char *state_real, char *buf, size_t cap)
{
	char tag[9];
	state_tag(state_real, tag);
	return fmt(buf, cap, "sbx-%s-", tag);
}

static int make_paths(const sup_runc_cfg *cfg, const char *id, box_paths *p, sbx_err *err)
{
	if (!valid_id(id))
		return sbx_err_set(err, -EINVAL, "sandbox id '%.64s': want 1-%d of [a-z0-9-]", id, ID_MAX);
	int r = resolve_state(cfg->state_dir, p->state, err);
	if (r < 0)
		return r;
	char prefix[16];
	r = container_prefix(p->state, prefix, sizeof(prefix));
	r = r ?: fmt(p->cid, sizeof(p->cid), "%s%s", prefix, id);
	r = r ?: fmt(p->cgroup, sizeof(p->cgroup), "/sbx/%s", p->cid);
	r = r ?: fmt(p->dir, sizeof(p->dir), "%s/sandboxes/%s", p->state, id);
	r = r ?: fmt(p->bundle, sizeof(p->bundle), "%s/bundle", p->dir);
	r = r ?: fmt(p->rootfs, sizeof(p->rootfs), "%s/bundle/rootfs", p->dir);
	r = r ?: fmt(p->upper, sizeof(p->upper), "%s/" SUP_DISK_UPPER, p->dir);
	r = r ?: fmt(p->work, sizeof(p->work), "%s/" SUP_DISK_WORK, p->dir);
	r = r ?: fmt(p->run, sizeof(p->run), "%s/run", p->dir);
	r = r ?: fmt(p->log, sizeof(p->log), "%s/agent.log", p->dir);
	r = r ?: fmt(p->rtlog, sizeof(p->rtlog), "%s/runtime.log", p->dir);
	r = r ?: fmt(p->pidfile, sizeof(p->pidfile), "%s/init.pid", p->dir);
	if (r < 0)
		return sbx_err_set(err, r, "sandbox %s: state folder path too long", id);
	if (fmt(p->sock, sizeof(p->sock), "%s" SOCK_SUFFIX, p->dir) < 0)
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
static int runtime_run(const sup_runtime *rt, const char *const *args, char *out, size_t out_cap,
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
static int runtime_list(const sup_runtime *rt, char *out, sbx_err *err)
{
	char errout[256];
	static const char *const args[] = { "list", "--quiet", NULL };
	int r = 0;
	for (int i = 0; i < LIST_TRIES; i++) {
		r = runtime_run(rt, args, out, LIST_OUT_MAX, errout, sizeof(errout), err);
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
	int r = runtime_list(rt, out, err);
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

static int read_pid(const char *pidfile, pid_t *pid, sbx_err *err)
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
	return runtime_run(rt, args, NULL, 0, errout, cap, err);
}

/* Is pid still the container's init (a pid can be reused once it is gone)?
 * Its cgroup names the container. */
static bool is_container_pid(pid_t pid, const char *cgroup)
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
	if (read_pid(p->pidfile, &pid, &ignored) == 0) {
		pfd = pidfd_open(pid, 0);
		if (pfd >= 0 && !is_container_pid(pid, p->cgroup)) {
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
static int destroy_paths(const sup_runc_cfg *cfg, const sup_runtime *rt, const box_paths *p,
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

/* ---- create ----------------------------------------------------------- */

static int connect_path(const char *sock_path, int sock_flags, sbx_err *err)
{
	SBX_AUTO_CLOSE int opath = open(sock_path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (opath < 0)
		return sbx_err_sys(err, -errno, "agent socket %s", sock_path);
	struct stat st;
	if (fstat(opath, &st) < 0)
		return sbx_err_sys(err, -errno, "agent socket %s", sock_path);
	if (!S_ISSOCK(st.st_mode))
		return sbx_err_set(err, -ENOTSOCK, "agent socket %s: not a socket", sock_path);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", opath);
	SBX_AUTO_CLOSE int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | (sock_flags & SOCK_NONBLOCK), 0);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return sbx_err_sys(err, -errno, "connect to agent socket %s", sock_path);
	return sbx_steal_fd(&fd);
}

int sup_runc_connect_agent(const sup_runc_box *box, int sock_flags, sbx_err *err)
{
	if (sock_flags & ~(SOCK_NONBLOCK | SOCK_CLOEXEC))
		return sbx_err_set(err, -EINVAL, "connect agent: flags 0x%x", (unsigned)sock_flags);
	return connect_path(box->socket_path, sock_flags, err);
}

/* Wait until the agent's socket accepts or the agent is gone. The agent is
 * not our child (the runtime's start leaves it to the host's init or a
 * subreaper), so its end is seen through a pidfd. */
static int wait_ready(const box_paths *p, pid_t pid, unsigned timeout_ms, sbx_err *err)
{
	struct timespec t0;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	SBX_AUTO_CLOSE int pfd = pidfd_open(pid, 0);
	if (pfd < 0)
		return sbx_err_sys(err, -errno, "agent pid %d", (int)pid);
	for (;;) {
		sbx_err cerr;
		int fd = connect_path(p->sock, SOCK_NONBLOCK, &cerr);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
		/* not there yet, or bound but not listening yet */
		if (fd != -ENOENT && fd != -ECONNREFUSED && fd != -EAGAIN) {
			*err = cerr;
			return fd;
		}
		long spent = sbx_ms_since(&t0);
		if (spent >= (long)timeout_ms)
			return sbx_err_set(err, -ETIMEDOUT, "agent did not listen within %u ms", timeout_ms);
		struct pollfd pf = {.fd = pfd, .events = POLLIN};
		int r = poll(&pf, 1, 1);
		if (r > 0)
			return sbx_err_set(err, -ECHILD, "agent exited before listening");
	}
}

/* /etc/hostname, /etc/hosts (and /etc/resolv.conf when the supervisor
 * resolves for its sandboxes) of this sandbox, in its upper layer. */
static int write_etc(const box_paths *p, const sup_runc_image *img, const char *id,
		     const char *resolv_conf, sbx_err *err)
{
	SBX_AUTO_CLOSE int up = open(p->upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (up < 0)
		return sbx_err_sys(err, -errno, "open %s", p->upper);
	/* a restored layer may have its etc already */
	int r = sup_fs_mkdir(up, "etc", img->etc_mode, img->etc_uid, img->etc_gid, 1, err);
	if (r < 0)
		return r;
	SBX_AUTO_CLOSE int etc = openat(up, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (etc < 0)
		return sbx_err_sys(err, -errno, "open upper/etc");
	char buf[256];
	int n = snprintf(buf, sizeof(buf), "%s\n", id);
	r = sup_fs_write_file(etc, "hostname", buf, (size_t)n, 0644, err);
	if (r < 0)
		return r;
	n = snprintf(buf, sizeof(buf),
		     "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t%s\n", id);
	r = sup_fs_write_file(etc, "hosts", buf, (size_t)n, 0644, err);
	if (r == 0 && resolv_conf)
		r = sup_fs_write_file(etc, "resolv.conf", resolv_conf, strlen(resolv_conf), 0644, err);
	return r;
}

/* The folders of a new sandbox; its root folder (dir) already exists, and so
 * does its disk layer (the upper and work folders go there). */
static int make_dirs(const box_paths *p, const sup_runc_image *img, sbx_err *err)
{
	SBX_AUTO_CLOSE int d = open(p->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (d < 0)
		return sbx_err_sys(err, -errno, "open %s", p->dir);
	/* the root of the merged tree shows the upper folder's mode and owner */
	struct stat st;
	int r = sup_runc_image_stat(img, ".", &st);
	if (r < 0)
		return sbx_err_sys(err, r, "image %.200s", img->lower);
	r = sup_fs_mkdir(d, "bundle", 0700, 0, 0, 0, err);
	r = r ?: sup_fs_mkdir(d, "bundle/rootfs", 0755, 0, 0, 0, err);
	r = r ?: sup_fs_mkdir(d, SUP_DISK_UPPER, st.st_mode & 07777, st.st_uid, st.st_gid, 0, err);
	r = r ?: sup_fs_mkdir(d, SUP_DISK_WORK, 0700, 0, 0, 0, err);
	r = r ?: sup_fs_mkdir(d, "run", 0755, 0, 0, 0, err);
	r = r ?: sup_fs_mkdir(d, SUP_RUNC_FORK_SLOT, 0755, 0, 0, 0, err);
	if (r < 0 || img->host)
		return r;
	/* every sandbox has /workspace (the sandbox user's) and /tmp, also
	 * from an image that lacks them: they go into the upper layer */
	struct stat x;
	if (sup_runc_image_stat(img, "workspace", &x) == -ENOENT)
		r = sup_fs_mkdir(d, SUP_DISK_UPPER "/workspace", 0755, SUP_RUNC_SANDBOX_UID,
				 SUP_RUNC_SANDBOX_GID, 0, err);
	if (r == 0 && sup_runc_image_stat(img, "tmp", &x) == -ENOENT)
		r = sup_fs_mkdir(d, SUP_DISK_UPPER "/tmp", 01777, 0, 0, 0, err);
	return r;
}

static int start_container(const sup_runtime *rt, const box_paths *p, sbx_err *err)
{
	SBX_AUTO_CLOSE int log = open(p->log, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0640);
	if (log < 0)
		return sbx_err_sys(err, -errno, "open %s", p->log);
	/* -d: the runtime returns once the agent runs; the agent inherits its
	 * stdout and stderr, so both go to agent.log (a file: a pipe nobody
	 * reads could block the agent). The runtime's own error message lands
	 * there too and is quoted on failure. */
	const char *args[] = {"run", "--detach", "--pid-file", p->pidfile, "--bundle", p->bundle,
			      p->cid, NULL};
	const char *argv[SUP_RUNTIME_ARGV_MAX];
	if (sup_runtime_argv(rt, p->rtlog, args, argv) < 0)
		return sbx_err_set(err, -E2BIG, "%s run: too many arguments", rt->binary);
	sup_runc_cmd c = {.argv = argv, .stdout_fd = log, .stderr_fd = log,
			  .timeout_ms = RUN_TIMEOUT_MS};
	int r = sup_runc_cmd_run(&c, err);
	if (r < 0)
		return sbx_err_wrap(err, "%s run", rt->binary);
	if (r > 0) {
		char tail[320];
		sup_fs_log_tail(p->log, tail, sizeof(tail));
		return sbx_err_set(err, -EIO, "%s run: exit %d: %s", rt->binary, r, tail);
	}
	return 0;
}

bool sup_runc_can_protect_agent(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d) < 0)
		return false;
	return d[CAP_TO_INDEX(CAP_SYS_RESOURCE)].effective & CAP_TO_MASK(CAP_SYS_RESOURCE);
}

/* The agent must outlive its commands: out of the OOM killer's choice,
 * set from the host. Through the legacy oom_adj (-17 is -1000 in
 * oom_score_adj) because that one leaves oom_score_adj_min alone: the
 * agent's children inherit -1000, the agent raises its commands to +1000
 * (spawn.c), and none of them can go below 0 again without
 * CAP_SYS_RESOURCE. A write to oom_score_adj by a privileged writer would
 * lower that floor to -1000 for the whole sandbox. */
static int protect_agent(pid_t pid, sbx_err *err)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/oom_adj", (int)pid);
	SBX_AUTO_CLOSE int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "-17", 3) != 3)
		return sbx_err_sys(err, -errno, "exempt the agent (pid %d) from the OOM killer",
				   (int)pid);
	return 0;
}

/* A snapshot's layer into the new upper folder, held to the sandbox's
 * disk by the layer's own file system (ENOSPC). */
static int unpack_seed(uint64_t disk, const box_paths *p, const char *archive, sbx_err *err)
{
	SBX_AUTO_CLOSE int in = open(archive, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return sbx_err_sys(err, -errno, "snapshot %s", archive);
	SBX_AUTO_CLOSE int up = open(p->upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (up < 0)
		return sbx_err_sys(err, -errno, "open %s", p->upper);
	sup_layer_tar_info info;
	/* past the disk the layer's file system says ENOSPC first; the bound
	 * on bytes stops a stream that claims more than twice that */
	int r = sup_layer_tar_unpack(in, up, 2 * disk, SEED_MAX_ENTRIES, &info, err);
	if (r < 0)
		return sbx_err_wrap(err, "restore the snapshot");
	return 0;
}

static int create_in(const sup_runc_cfg *cfg, const sup_runtime *rt, const char *id,
		     const box_paths *p, const sup_runc_image *img, const sup_runc_seed *seed,
		     pid_t *pid, bool *started, sbx_err *err)
{
	uint64_t disk = seed && seed->disk ? seed->disk : cfg->res->disk;
	int r = sup_disk_make(p->state, p->dir, disk, err);
	r = r ?: make_dirs(p, img, err);
	if (r == 0 && seed && seed->archive[0])
		r = unpack_seed(disk, p, seed->archive, err);
	if (r == 0 && img->etc_dir)
		r = write_etc(p, img, id, cfg->resolv_conf, err);
	char lower[3 * PATH_MAX];
	if (r == 0 && fmt(lower, sizeof(lower), "%s/" SUP_RUNC_FORK_SLOT ":%s%s%s", p->dir,
			  seed && seed->layer[0] ? seed->layer : "", seed && seed->layer[0] ? ":" : "",
			  img->lower) < 0)
		r = sbx_err_set(err, -ENAMETOOLONG, "layers: paths too long");
	if (r == 0)
		r = sup_overlay_mount(lower, p->upper, p->work, p->rootfs, err);
	if (r < 0)
		return r;

	struct stat st;
	/* the agent serves hundreds of streams at once; the runtime cannot
	 * raise the limit past our own hard limit without CAP_SYS_RESOURCE */
	struct rlimit rl;
	unsigned long nofile = NOFILE_WANT;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max != RLIM_INFINITY && rl.rlim_max < nofile)
		nofile = (unsigned long)rl.rlim_max;
	sup_bundle_spec spec = {
		.hostname = id,
		.rootfs = "rootfs",
		.run_dir = p->run,
		.agent_path = img->agent_bundled ? NULL : cfg->agent_path,
		.cgroups_path = p->cgroup,
		.cgroup_ns = stat("/proc/self/ns/cgroup", &st) == 0,
		.nofile = nofile,
		.res = cfg->res,
		.swap_limit = cfg->cgroup->swap,
		.cpu_period_us = SUP_CGROUP_PERIOD_US,
		.binds = img->binds,
		.n_binds = img->n_binds,
	};
	r = sup_bundle_write(p->bundle, &spec, err);
	if (r < 0)
		return r;
	r = start_container(rt, p, err);
	if (r < 0)
		return r;
	*started = true;
	r = read_pid(p->pidfile, pid, err);
	if (r < 0)
		return r;
	unsigned timeout = cfg->ready_timeout_ms ? cfg->ready_timeout_ms : DEFAULT_READY_MS;
	r = wait_ready(p, *pid, timeout, err);
	if (r < 0) {
		char tail[256];
		sup_fs_log_tail(p->log, tail, sizeof(tail));
		if (tail[0])
			return sbx_err_wrap(err, "agent log '%s'", tail);
		return r;
	}
	return cfg->protect_agent ? protect_agent(*pid, err) : 0;
}

/* What the pools keep of a made sandbox (sup_runc_create, sup_runc_adopt). */
static void fill_box(sup_runc_box *box, const box_paths *p, const char *id,
		     sup_isolation isolation, pid_t pid)
{
	snprintf(box->id, sizeof(box->id), "%s", id);
	snprintf(box->container_id, sizeof(box->container_id), "%s", p->cid);
	snprintf(box->dir, sizeof(box->dir), "%s", p->dir);
	box->isolation = isolation;
	snprintf(box->socket_path, sizeof(box->socket_path), "%s", p->sock);
	snprintf(box->cgroup, sizeof(box->cgroup), "%s", p->cgroup);
	box->init_pid = pid;
}

/* The runtime of isolation, or NULL when it is not offered. */
static const sup_runtime *runtime_of(const sup_runc_cfg *cfg, sup_isolation isolation)
{
	if ((unsigned)isolation >= SUP_ISO_N || !cfg->runtimes[isolation].binary)
		return NULL;
	return &cfg->runtimes[isolation];
}

int sup_runc_create(const sup_runc_cfg *cfg, const char *id, const char *image,
		    sup_isolation isolation, sup_runc_box *box, sbx_err *err)
{
	return sup_runc_create_seeded(cfg, id, image, isolation, NULL, box, err);
}

int sup_runc_create_seeded(const sup_runc_cfg *cfg, const char *id, const char *image,
			   sup_isolation isolation, const sup_runc_seed *seed, sup_runc_box *box,
			   sbx_err *err)
{
	memset(box, 0, sizeof(*box));
	const sup_runtime *rt = runtime_of(cfg, isolation);
	if (!rt)
		return sbx_err_set(err, -EINVAL, "create sandbox %.64s: isolation %s is not offered",
				   id, (unsigned)isolation < SUP_ISO_N ? sup_isolation_names[isolation] : "?");
	SBX_AUTO_FREE box_paths *p = calloc(1, sizeof(*p));
	SBX_AUTO_FREE sup_runc_image *img = calloc(1, sizeof(*img));
	if (!p || !img)
		return sbx_err_set(err, -ENOMEM, "create sandbox");
	int r = make_paths(cfg, id, p, err);
	if (r == 0)
		r = sup_runc_image_resolve(p->state, cfg->store, image ? image : "host", img, err);
	if (r < 0)
		return sbx_err_wrap(err, "create sandbox %.64s", id);

	if (mkdir(p->dir, 0700) < 0) {
		if (errno == EEXIST)
			return sbx_err_set(err, -EEXIST, "create sandbox %s: it exists", id);
		return sbx_err_sys(err, -errno, "create sandbox %s: mkdir %s", id, p->dir);
	}
	pid_t pid = 0;
	bool started = false;
	r = create_in(cfg, rt, id, p, img, seed, &pid, &started, err);
	if (r < 0) {
		sbx_err cerr;
		if (destroy_paths(cfg, rt, p, !started, &cerr) < 0)
			sbx_err_wrap(err, "(cleanup failed too: %s)", cerr.msg);
		return sbx_err_wrap(err, "create sandbox %s", id);
	}
	fill_box(box, p, id, isolation, pid);
	return 0;
}

/* ---- destroy, leftovers, init ----------------------------------------- */

static bool kept(const char *const *keep, size_t nkeep, const char *id)
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
	const sup_runtime *rt = runtime_of(cfg, box->isolation);
	if (!rt)
		return sbx_err_set(err, -EINVAL, "destroy sandbox %.64s: its isolation is not offered",
				   box->id);
	SBX_AUTO_FREE box_paths *p = calloc(1, sizeof(*p));
	if (!p)
		return sbx_err_set(err, -ENOMEM, "destroy sandbox");
	int r = make_paths(cfg, box->id, p, err);
	if (r == 0)
		r = destroy_paths(cfg, rt, p, false, err);
	if (r < 0)
		return sbx_err_wrap(err, "destroy sandbox %.64s", box->id);
	return 0;
}

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
	int r = runtime_run(rt, args, buf, STATES_OUT_MAX, errout, sizeof(errout), err);
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
		const sup_runtime *rt = runtime_of(cfg, (sup_isolation)iso);
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
	int r = runtime_run(rt, args, out, sizeof(out), errout, sizeof(errout), err);
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
	const sup_runtime *rt = runtime_of(cfg, isolation);
	if (!rt)
		return sbx_err_set(err, -EINVAL, "sandbox %.64s: isolation %s is not offered now", id,
				   (unsigned)isolation < SUP_ISO_N ? sup_isolation_names[isolation] : "?");
	SBX_AUTO_FREE box_paths *p = calloc(1, sizeof(*p));
	if (!p)
		return sbx_err_set(err, -ENOMEM, "adopt sandbox");
	int r = make_paths(cfg, id, p, err);
	pid_t pid = 0;
	r = r ?: read_pid(p->pidfile, &pid, err);
	if (r < 0)
		return sbx_err_wrap(err, "sandbox %.64s", id);
	if (!is_container_pid(pid, p->cgroup))
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
	fill_box(box, p, id, isolation, pid);
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
		if (strncmp(a, prefix, plen) == 0 && valid_id(a + plen))
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
	int r = resolve_state(cfg->state_dir, state, err);
	if (r < 0)
		return sbx_err_wrap(err, "runtime calls of an earlier run");
	container_prefix(state, prefix, sizeof(prefix));
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
	int r = resolve_state(cfg->state_dir, state, err);
	if (r < 0)
		return sbx_err_wrap(err, "thaw");
	if (fmt(sandboxes, sizeof(sandboxes), "%s/sandboxes", state) < 0)
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
		if (!valid_id(de->d_name) || make_paths(cfg, de->d_name, p, &e) < 0)
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
	int r = resolve_state(cfg->state_dir, state, err);
	if (r < 0)
		return sbx_err_wrap(err, "remove leftovers");
	container_prefix(state, prefix, sizeof(prefix));
	if (fmt(sandboxes, sizeof(sandboxes), "%s/sandboxes", state) < 0)
		return sbx_err_set(err, -ENAMETOOLONG, "remove leftovers: path too long");

	int removed = 0;
	SBX_AUTO_FREE char *out = calloc(1, LIST_OUT_MAX);
	SBX_AUTO_FREE box_paths *p = calloc(1, sizeof(*p));
	if (!out || !p)
		return sbx_err_set(err, -ENOMEM, "remove leftovers");
	size_t plen = strlen(prefix);
	for (int iso = 0; iso < SUP_ISO_N; iso++) {
		const sup_runtime *rt = runtime_of(cfg, (sup_isolation)iso);
		if (!rt)
			continue;
		r = runtime_list(rt, out, err);
		if (r < 0)
			return sbx_err_wrap(err, "remove leftovers");
		for (char *l = out; *l;) {
			char *e = strchrnul(l, '\n');
			char *next = *e ? e + 1 : e;
			*e = '\0';
			if (strncmp(l, prefix, plen) == 0 && valid_id(l + plen) &&
			    !kept(keep, nkeep, l + plen)) {
				r = make_paths(cfg, l + plen, p, err);
				if (r == 0)
					r = destroy_paths(cfg, rt, p, false, err);
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
		if (kept(keep, nkeep, de->d_name) ||
		    fmt(path, sizeof(path), "%s/%s", sandboxes, de->d_name) < 0)
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
	if (fmt(buf, sizeof(buf), "%s", path) < 0)
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
	if (fmt(path, sizeof(path), "%s/lock", state) < 0)
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
	r = resolve_state(cfg->state_dir, state, err);
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
	if (fmt(sub, sizeof(sub), "%s/sandboxes", state) < 0 || (mkdir(sub, 0700) < 0 && errno != EEXIST))
		return sbx_err_sys(err, -errno, "runc backend: mkdir %s", sub);
	if (fmt(sub, sizeof(sub), "%s/images", state) < 0 || (mkdir(sub, 0700) < 0 && errno != EEXIST))
		return sbx_err_sys(err, -errno, "runc backend: mkdir %s", sub);

	for (int iso = 0; iso < SUP_ISO_N; iso++) {
		const sup_runtime *rt = runtime_of(cfg, (sup_isolation)iso);
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
