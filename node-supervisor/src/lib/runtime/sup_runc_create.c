/* A sandbox made: its folders, disk and overlay, the OCI bundle, the
 * writable layer seeded from an archive (a restore) or empty, the container
 * started by its runtime and its agent's socket waited for; anything made
 * goes again on a failure. Blocking: worker threads only. */
#include "sup_runc.h"

#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <linux/capability.h>
#include <sys/pidfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
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
#include "sup_bundle.h"
#include "sup_cgroup.h"
#include "sup_disk.h"
#include "sup_fsutil.h"
#include "sup_layer_tar.h"
#include "sup_overlay.h"
#include "sup_runc_cmd.h"
#include "sup_runc_image.h"
#include "sup_runc_int.h"

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
	if (r == 0 && sup_runc_fmt(lower, sizeof(lower), "%s/" SUP_RUNC_FORK_SLOT ":%s%s%s", p->dir,
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
	r = sup_runc_read_pid(p->pidfile, pid, err);
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
void sup_runc_fill_box(sup_runc_box *box, const box_paths *p, const char *id,
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
const sup_runtime *sup_runc_runtime_of(const sup_runc_cfg *cfg, sup_isolation isolation)
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
	const sup_runtime *rt = sup_runc_runtime_of(cfg, isolation);
	if (!rt)
		return sbx_err_set(err, -EINVAL, "create sandbox %.64s: isolation %s is not offered",
				   id, (unsigned)isolation < SUP_ISO_N ? sup_isolation_names[isolation] : "?");
	SBX_AUTO_FREE box_paths *p = calloc(1, sizeof(*p));
	SBX_AUTO_FREE sup_runc_image *img = calloc(1, sizeof(*img));
	if (!p || !img)
		return sbx_err_set(err, -ENOMEM, "create sandbox");
	int r = sup_runc_make_paths(cfg, id, p, err);
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
		if (sup_runc_destroy_paths(cfg, rt, p, !started, &cerr) < 0)
			sbx_err_wrap(err, "(cleanup failed too: %s)", cerr.msg);
		return sbx_err_wrap(err, "create sandbox %s", id);
	}
	sup_runc_fill_box(box, p, id, isolation, pid);
	return 0;
}
