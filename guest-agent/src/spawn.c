#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <linux/close_range.h>
#include <sys/syscall.h>

#include "env.h"
#include "pid1.h"

static struct rlimit child_nofile;
static bool restore_nofile;

/* ---- child side: async-signal-safe calls only, no allocation ---- */

static void child_write_error(const char *what, const char *subject, int errnum)
{
	char msg[512];
	size_t n = 0;
	const char *parts[] = { "sandbox-agent: ", what, " ", subject, ": ", strerror(errnum), "\n" };

	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		size_t len = strlen(parts[i]);
		if (len > sizeof(msg) - n)
			len = sizeof(msg) - n;
		memcpy(msg + n, parts[i], len);
		n += len;
	}
	if (write(STDERR_FILENO, msg, n) < 0) {
		/* the requester loses the message, the exit code still says it */
	}
}

static __attribute__((noreturn)) void child_fail(const char *what, const char *subject, int errnum, int code)
{
	child_write_error(what, subject, errnum);
	_exit(code);
}

static int exit_code_for(int errnum)
{
	return errnum == ENOENT || errnum == ENOTDIR ? AGENT_SPAWN_EXIT_NOT_FOUND
						     : AGENT_SPAWN_EXIT_CANNOT_RUN;
}

/* Move fd to `target`. Every fd the agent owns is close-on-exec, and the
 * agent keeps 0..2 open, so the sources are >= 3 and distinct. */
static void child_install_fd(int fd, int target)
{
	if (dup2(fd, target) < 0)
		child_fail("set up", target == 0 ? "stdin" : target == 1 ? "stdout" : "stderr", errno,
			   AGENT_SPAWN_EXIT_CANNOT_RUN);
}

/* execvp in the request's PATH: an empty entry means ".", EACCES is kept if
 * any candidate had it (as execvp), other errors stop the search. */
static int child_exec_path(const agent_exec_spec *spec)
{
	const char *file = spec->argv[0];
	const char *p = spec->path ? spec->path : AGENT_ENV_DEFAULT_PATH_VALUE;
	size_t flen = strlen(file);
	bool eacces = false;
	char buf[PATH_MAX];

	if (strchr(file, '/')) {
		execve(file, spec->argv, spec->envp);
		return errno;
	}
	for (;;) {
		const char *colon = strchrnul(p, ':');
		size_t dlen = (size_t)(colon - p);

		if (dlen + 1 + flen < sizeof(buf)) {
			if (dlen == 0) {
				buf[0] = '.';
				dlen = 1;
			} else {
				memcpy(buf, p, dlen);
			}
			buf[dlen] = '/';
			memcpy(buf + dlen + 1, file, flen + 1);
			execve(buf, spec->argv, spec->envp);
			switch (errno) {
			case EACCES:
				eacces = true;
				break;
			case ENOENT:
			case ENOTDIR:
			case ESTALE:
			case ENODEV:
			case ETIMEDOUT:
				break;
			default:
				return errno;
			}
		}
		if (*colon == '\0')
			break;
		p = colon + 1;
	}
	return eacces ? EACCES : ENOENT;
}

static __attribute__((noreturn)) void child_run(const agent_exec_spec *spec, const agent_spawn_fds *fds,
						 const sigset_t *mask)
{
	static const int reset[] = { AGENT_PID1_SIGNALS };
	int errnum;

	/* Also done by the parent: whichever runs first wins the race with a
	 * kill(-pgid) that must reach this process. */
	setpgid(0, 0);
	for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
		signal(reset[i], SIG_DFL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	if (restore_nofile)
		setrlimit(RLIMIT_NOFILE, &child_nofile);

	child_install_fd(fds->in, STDIN_FILENO);
	child_install_fd(fds->out, STDOUT_FILENO);
	child_install_fd(fds->err, STDERR_FILENO);
	/* Belt and braces: a descriptor leaked into a background grandchild
	 * would keep a client connection open forever. */
	syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC);

	if (spec->cwd) {
		if (chdir(spec->cwd) < 0)
			child_fail("cwd", spec->cwd, errno, AGENT_SPAWN_EXIT_CANNOT_RUN);
	} else if (chdir(AGENT_EXEC_DEFAULT_CWD) < 0 && chdir("/") < 0) {
		child_fail("cwd", "/", errno, AGENT_SPAWN_EXIT_CANNOT_RUN);
	}

	errnum = child_exec_path(spec);
	child_fail("exec", spec->argv[0], errnum, exit_code_for(errnum));
}

/* ---- parent side ---- */

int agent_spawn_raise_nofile(sbx_err *err)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return sbx_err_sys(err, -errno, "get open file limit");
	if (rl.rlim_cur == rl.rlim_max)
		return 0;
	child_nofile = rl;
	rl.rlim_cur = rl.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
		return sbx_err_sys(err, -errno, "raise open file limit");
	restore_nofile = true;
	return 0;
}

int agent_spawn(const agent_exec_spec *spec, const agent_spawn_fds *fds, pid_t *pid, sbx_err *err)
{
	sigset_t all, old;
	pid_t child;
	int saved;

	/* No signal handler of the agent may run in the child before it has
	 * reset them (it would write into the agent's signal socket). */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	child = fork();
	if (child == 0)
		child_run(spec, fds, &old);
	saved = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (child < 0)
		return sbx_err_sys(err, -saved, "fork %s", spec->argv[0]);
	setpgid(child, child);
	*pid = child;
	return 0;
}
