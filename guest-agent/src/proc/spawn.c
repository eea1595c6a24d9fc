#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <linux/close_range.h>
#include <sys/syscall.h>

#include "agent_jail.h"
#include "env.h"
#include "numdir.h"
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
static int child_exec_path(const agent_exec_spec *spec, char *const *envp)
{
	const char *file = spec->argv[0];
	const char *p = spec->path ? spec->path : AGENT_ENV_DEFAULT_PATH_VALUE;
	size_t flen = strlen(file);
	bool eacces = false;
	char buf[PATH_MAX];

	if (strchr(file, '/')) {
		execve(file, spec->argv, envp);
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
			execve(buf, spec->argv, envp);
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

/* The terminal becomes the controlling tty of a new session, and stdio.
 * It belongs to the command's user, so that programs which open /dev/tty
 * (editors, pagers, password prompts) can. */
static void child_install_tty(int tty, uid_t uid)
{
	if (setsid() < 0)
		child_fail("set up", "session", errno, AGENT_SPAWN_EXIT_CANNOT_RUN);
	if (ioctl(tty, TIOCSCTTY, 0) < 0)
		child_fail("set up", "controlling terminal", errno, AGENT_SPAWN_EXIT_CANNOT_RUN);
	if (fchown(tty, uid, (gid_t)-1) < 0)
		child_fail("set up", "terminal owner", errno, AGENT_SPAWN_EXIT_CANNOT_RUN);
	child_install_fd(tty, STDIN_FILENO);
	child_install_fd(tty, STDOUT_FILENO);
	child_install_fd(tty, STDERR_FILENO);
}

static void child_set_cloexec(unsigned fd, void *arg)
{
	if (fd > 2)
		fcntl((int)fd, F_SETFD, FD_CLOEXEC);
}

/* The command is the OOM killer's first choice, never the agent: the
 * supervisor exempts the agent (and so its holders, which inherit it) where
 * it may (-1000), and the command raises its own score to the most, which
 * is always allowed; lowering it again needs CAP_SYS_RESOURCE, which nothing
 * in a sandbox has. Without /proc nothing changes. */
static void child_oom_score_raise(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	if (write(fd, "1000", 4) < 0) {
		/* left as inherited */
	}
	close(fd);
}

static __attribute__((noreturn)) void child_run(const agent_exec_spec *spec, const agent_spawn_fds *fds,
						 const agent_jail *jail, char *const *envp, const sigset_t *mask)
{
	static const int reset[] = { AGENT_PID1_SIGNALS };
	const char *step = NULL;
	int errnum;

	/* Before the exec, so the group exists once the agent knows the pid
	 * (the holder vforks: it reports the pid after the exec). A
	 * terminal's session leader makes its own group. */
	if (fds->tty < 0)
		setpgid(0, 0);
	for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
		signal(reset[i], SIG_DFL);
	sigprocmask(SIG_SETMASK, mask, NULL);
	child_oom_score_raise();
	setpriority(PRIO_PROCESS, 0, AGENT_SPAWN_NICE);
	if (restore_nofile)
		setrlimit(RLIMIT_NOFILE, &child_nofile);

	if (fds->tty >= 0) {
		child_install_tty(fds->tty, jail->user.uid);
	} else {
		child_install_fd(fds->in, STDIN_FILENO);
		child_install_fd(fds->out, STDOUT_FILENO);
		child_install_fd(fds->err, STDERR_FILENO);
	}
	/* Belt and braces: a descriptor leaked into a background grandchild
	 * would keep a client connection open forever. */
	if (syscall(SYS_close_range, 3U, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
		/* No CLOSE_RANGE_CLOEXEC (gVisor answers EINVAL; Linux
		 * before 5.11): one fd at a time. */
		agent_numdir_each("/proc/self/fd", child_set_cloexec, NULL);

	errnum = -agent_jail_enter(jail, &step);
	if (errnum)
		child_fail("jail", step ? step : "?", errnum, AGENT_SPAWN_EXIT_CANNOT_RUN);

	if (spec->cwd) {
		if (chdir(spec->cwd) < 0)
			child_fail("cwd", spec->cwd, errno, AGENT_SPAWN_EXIT_CANNOT_RUN);
	} else if (chdir(AGENT_EXEC_DEFAULT_CWD) < 0 && chdir("/") < 0) {
		child_fail("cwd", "/", errno, AGENT_SPAWN_EXIT_CANNOT_RUN);
	}

	errnum = child_exec_path(spec, envp);
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

static void free_strv(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

/* The user's HOME, USER and LOGNAME over the base environment, under the
 * request's own variables. *out borrows from spec->envp and *user_vars. */
static int user_env(const agent_exec_spec *spec, const agent_jail_user *u, char ***user_vars, char ***out,
		    sbx_err *err)
{
	const char *names[] = { "HOME", "USER", "LOGNAME" };
	const char *values[] = { u->home, u->name, u->name };
	char **vars = calloc(4, sizeof(*vars));
	size_t n = 0;
	int ret;

	if (!vars)
		return sbx_err_sys(err, -ENOMEM, "exec: environment");
	for (size_t i = 0; i < 3; i++) {
		bool requested = false;

		for (char **e = spec->env_over; e && *e && !requested; e++)
			requested = agent_env_name_len(*e) == strlen(names[i]) &&
				    strncmp(*e, names[i], strlen(names[i])) == 0;
		if (requested)
			continue;
		if (asprintf(&vars[n], "%s=%s", names[i], values[i]) < 0) {
			vars[n] = NULL;
			free_strv(vars);
			return sbx_err_sys(err, -ENOMEM, "exec: environment");
		}
		n++;
	}
	ret = agent_env_merge(spec->envp, vars, out, err);
	if (ret < 0) {
		free_strv(vars);
		return ret;
	}
	*user_vars = vars;
	return 0;
}

static int jail_prepare(const agent_exec_spec *spec, agent_jail *jail, sbx_err *err)
{
	agent_jail_spec js = { .user = spec->user, .allow_root = spec->allow_root };
	agent_seccomp_filter *f = NULL;
	int ret;

	/* The profile first: its errors are the operator's (-EIO here), the
	 * rest of the jail's are the requester's. It is cached, so the
	 * prepare below takes the same program without compiling again. */
	memset(jail, 0, sizeof(*jail));
	ret = agent_seccomp_get(NULL, &f, err);
	if (ret < 0) {
		sbx_err_wrap(err, "exec");
		err->code = -EIO;
		return -EIO;
	}
	agent_seccomp_unref(f);
	memcpy(js.rlimits, spec->rlimits, sizeof(js.rlimits));
	return agent_jail_prepare(&js, jail, err);
}

typedef struct child_args {
	const agent_exec_spec *spec;
	const agent_spawn_fds *fds;
	const agent_jail *jail;
	char *const *envp;
	sigset_t mask;
} child_args;

static void child_entry(void *arg)
{
	const child_args *a = arg;

	child_run(a->spec, a->fds, a->jail, a->envp, &a->mask);
}

int agent_spawn(struct event_base *base, const agent_exec_spec *spec, const agent_spawn_fds *fds,
		const agent_tree_cbs *cbs, void *ud, agent_tree **tree, sbx_err *err)
{
	agent_jail jail;
	char **user_vars = NULL, **envp = NULL;
	child_args args = { .spec = spec, .fds = fds, .jail = &jail };
	agent_tree_cmd cmd = {
		.fn = child_entry,
		.arg = &args,
		.err_fd = fds->tty >= 0 ? fds->tty : fds->err,
		.fail_exit = AGENT_SPAWN_EXIT_CANNOT_RUN,
	};
	int ret;

	ret = jail_prepare(spec, &jail, err);
	if (ret < 0)
		goto out;
	cmd.mark = agent_tree_next_mark();
	if (cmd.mark && (ret = agent_jail_mark(&jail, cmd.mark, err)) < 0)
		goto out;
	ret = user_env(spec, &jail.user, &user_vars, &envp, err);
	if (ret < 0)
		goto out;
	args.envp = envp;
	/* The mask the command gets back (the fork happens with all blocked). */
	sigprocmask(SIG_SETMASK, NULL, &args.mask);
	if (fds->tty >= 0) {
		cmd.keep[cmd.nkeep++] = fds->tty;
	} else {
		cmd.keep[cmd.nkeep++] = fds->in;
		cmd.keep[cmd.nkeep++] = fds->out;
		cmd.keep[cmd.nkeep++] = fds->err;
	}
	ret = agent_tree_spawn(base, &cmd, cbs, ud, tree, err);
	if (ret < 0)
		sbx_err_wrap(err, "exec %s", spec->argv[0]);
out:
	agent_jail_release(&jail);
	free(envp);
	free_strv(user_vars);
	return ret;
}
