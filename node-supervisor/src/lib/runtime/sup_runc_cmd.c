/* sup_runc_cmd: see sup_runc_cmd.h. */
#include "sup_runc_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sbx/cleanup.h"

extern char **environ;

#define DEFAULT_TIMEOUT_MS 30000u

static void spawnattr_cleanup(posix_spawnattr_t **a)
{
	if (*a)
		posix_spawnattr_destroy(*a);
}
static void actions_cleanup(posix_spawn_file_actions_t **a)
{
	if (*a)
		posix_spawn_file_actions_destroy(*a);
}

/* Output goes to a memfd rather than a pipe: the runtime never blocks on a
 * full pipe, nothing of ours has to read while it runs, and a grandchild
 * that keeps the descriptor cannot make us wait for an EOF. */
static int capture_fd(const char *name, sbx_err *err)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "memfd_create");
	return fd;
}

/* Read the first cap - 1 bytes of a memfd; returns its full size. */
static off_t read_capture(int fd, char *buf, size_t cap)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		st.st_size = 0;
	if (!buf || cap == 0)
		return st.st_size;
	ssize_t n = pread(fd, buf, cap - 1, 0);
	buf[n > 0 ? n : 0] = '\0';
	return st.st_size;
}

/* runc's error ends up as the last line(s) of stderr: keep one trimmed line. */
static void one_line(char *s)
{
	size_t n = strlen(s);
	while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == ' ' || s[n - 1] == '\r'))
		s[--n] = '\0';
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			s[i] = s[i] == '\n' ? '|' : '?';
}

/* With cancel: looked at every CANCEL_SLICE_MS, the child killed once set. */
#define CANCEL_SLICE_MS 100

static int wait_child(pid_t pid, unsigned timeout_ms, const atomic_bool *cancel, int *status,
		      sbx_err *err)
{
	SBX_AUTO_CLOSE int pfd = pidfd_open(pid, 0);
	if (pfd >= 0) {
		struct timespec start, now;
		clock_gettime(CLOCK_MONOTONIC, &start);
		for (;;) {
			clock_gettime(CLOCK_MONOTONIC, &now);
			long spent = (now.tv_sec - start.tv_sec) * 1000 +
				     (now.tv_nsec - start.tv_nsec) / 1000000;
			bool cancelled = cancel && atomic_load(cancel);
			if (spent >= (long)timeout_ms || cancelled) {
				kill(pid, SIGKILL);
				while (waitpid(pid, status, 0) < 0 && errno == EINTR)
					;
				if (cancelled)
					return sbx_err_set(err, -ECANCELED, "cancelled, killed");
				return sbx_err_set(err, -ETIMEDOUT, "no answer within %u ms, killed",
						   timeout_ms);
			}
			struct pollfd p = {.fd = pfd, .events = POLLIN};
			long left = (long)timeout_ms - spent;
			int r = poll(&p, 1, (int)(cancel && left > CANCEL_SLICE_MS ? CANCEL_SLICE_MS : left));
			if (r == 0)
				continue;
			if (r > 0)
				break;
			if (r < 0 && errno != EINTR)
				break; /* fall back to a plain wait */
		}
	}
	for (;;) {
		if (waitpid(pid, status, 0) == pid)
			return 0;
		if (errno != EINTR)
			return sbx_err_sys(err, -errno, "waitpid");
	}
}

int sup_runtime_argv(const sup_runtime *rt, const char *log, const char *const *args,
		     const char **argv)
{
	size_t n = 0;
	argv[n++] = rt->binary;
	if (rt->root) {
		argv[n++] = "--root";
		argv[n++] = rt->root;
	}
	if (log) {
		argv[n++] = "--log";
		argv[n++] = log;
	}
	if (rt->platform) {
		static const char *const gvisor[] = { "--host-uds", "create", "--oci-seccomp" };
		argv[n++] = "--platform";
		argv[n++] = rt->platform;
		argv[n++] = "--network";
		argv[n++] = rt->network ? rt->network : "none";
		for (size_t i = 0; i < sizeof(gvisor) / sizeof(gvisor[0]); i++)
			argv[n++] = gvisor[i];
	}
	for (size_t i = 0; args[i]; i++) {
		if (n + 1 >= SUP_RUNTIME_ARGV_MAX)
			return -E2BIG;
		argv[n++] = args[i];
	}
	argv[n] = NULL;
	return 0;
}

int sup_runc_cmd_run(sup_runc_cmd *c, sbx_err *err)
{
	if (c->out && c->out_cap)
		c->out[0] = '\0';
	if (c->errout && c->errout_cap)
		c->errout[0] = '\0';
	const char *prog = c->argv[0];

	SBX_AUTO_CLOSE int outfd = -1;
	SBX_AUTO_CLOSE int errfd = -1;
	if (c->stdout_fd < 0 && (outfd = capture_fd("runtime-stdout", err)) < 0)
		return outfd;
	if (c->stderr_fd < 0 && (errfd = capture_fd("runtime-stderr", err)) < 0)
		return errfd;

	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	__attribute__((cleanup(actions_cleanup))) posix_spawn_file_actions_t *fap = NULL;
	__attribute__((cleanup(spawnattr_cleanup))) posix_spawnattr_t *atp = NULL;
	int r = posix_spawn_file_actions_init(&fa);
	if (r)
		return sbx_err_sys(err, -r, "spawn %s", prog);
	fap = &fa; // NOLINT(clang-analyzer-deadcode.DeadStores): read by its cleanup
	r = posix_spawnattr_init(&at);
	if (r)
		return sbx_err_sys(err, -r, "spawn %s", prog);
	atp = &at; // NOLINT(clang-analyzer-deadcode.DeadStores): read by its cleanup

	sigset_t none, all;
	sigemptyset(&none);
	sigfillset(&all);
	r = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	if (!r)
		r = posix_spawn_file_actions_adddup2(&fa, c->stdout_fd >= 0 ? c->stdout_fd : outfd, 1);
	if (!r)
		r = posix_spawn_file_actions_adddup2(&fa, c->stderr_fd >= 0 ? c->stderr_fd : errfd, 2);
	if (!r)
		r = posix_spawnattr_setsigmask(&at, &none);
	if (!r)
		r = posix_spawnattr_setsigdefault(&at, &all);
	if (!r)
		r = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
						      POSIX_SPAWN_SETSID);
	if (r)
		return sbx_err_sys(err, -r, "spawn %s", prog);

	pid_t pid;
	r = strchr(prog, '/') ? posix_spawn(&pid, prog, &fa, &at, (char *const *)c->argv, environ)
			      : posix_spawnp(&pid, prog, &fa, &at, (char *const *)c->argv, environ);
	if (r)
		return sbx_err_sys(err, -r, "run %s", prog);

	int status = 0;
	r = wait_child(pid, c->timeout_ms ? c->timeout_ms : DEFAULT_TIMEOUT_MS, c->cancel, &status, err);
	if (errfd >= 0) {
		read_capture(errfd, c->errout, c->errout_cap);
		if (c->errout)
			one_line(c->errout);
	}
	if (r < 0)
		return sbx_err_wrap(err, "%s", prog);
	if (outfd >= 0) {
		off_t size = read_capture(outfd, c->out, c->out_cap);
		if (c->out && size >= (off_t)c->out_cap)
			return sbx_err_set(err, -E2BIG, "%s: more than %zu bytes of output", prog,
					   c->out_cap - 1);
	}
	if (WIFSIGNALED(status))
		return sbx_err_set(err, -EINTR, "%s: killed by signal %d", prog, WTERMSIG(status));
	return WEXITSTATUS(status);
}
