/* Test helpers of the jail's tests (see test_jail_util.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_jail_util.h"

static long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Child side: write() only. */
static void child_say(const char *a, const char *b, int errnum)
{
	char num[16];
	size_t k = sizeof(num);
	unsigned v = (unsigned)errnum;

	do {
		num[--k] = (char)('0' + v % 10);
		v /= 10;
	} while (v && k > 0);
	if (write(2, a, strlen(a)) < 0 || write(2, b, strlen(b)) < 0 || write(2, ": errno ", 8) < 0 ||
	    write(2, num + k, sizeof(num) - k) < 0 || write(2, "\n", 1) < 0)
		_exit(125);
}

static __attribute__((noreturn)) void child(const agent_jail *j, const char *cwd, char *const argv[],
					      char *const envp[], int out, int in)
{
	const char *step = "";
	int rc;

	setpgid(0, 0);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(out, 2) < 0)
		_exit(125);
	rc = agent_jail_enter(j, &step);
	if (rc < 0) {
		child_say("jail: ", step, -rc);
		_exit(126);
	}
	if (cwd && chdir(cwd) < 0) {
		child_say("chdir ", cwd, errno);
		_exit(126);
	}
	execve(argv[0], argv, envp);
	child_say("execve ", argv[0], errno);
	_exit(127);
}

int jail_run(const agent_jail *j, const char *cwd, char *const argv[], char *const envp[], int timeout_ms,
	     jail_result *r)
{
	int p[2], in, st = 0;
	long deadline = now_ms() + timeout_ms;
	pid_t pid;
	siginfo_t si;

	r->len = 0;
	r->out[0] = '\0';
	r->timed_out = false;
	r->status = -1;
	in = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (in < 0)
		return -errno;
	if (pipe2(p, O_CLOEXEC) < 0) {
		close(in);
		return -errno;
	}
	pid = fork();
	if (pid == 0)
		child(j, cwd, argv, envp, p[1], in);
	close(p[1]);
	close(in);
	if (pid < 0) {
		close(p[0]);
		return -errno;
	}
	setpgid(pid, pid);
	for (;;) {
		struct pollfd pfd = { .fd = p[0], .events = POLLIN };
		long left = deadline - now_ms();
		char buf[4096];
		ssize_t n;

		if (left <= 0) {
			r->timed_out = true;
			break;
		}
		if (poll(&pfd, 1, (int)left) < 0 && errno != EINTR)
			break;
		if (!pfd.revents)
			continue;
		n = read(p[0], buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if ((size_t)n > JAIL_OUT_MAX - r->len)
			n = (ssize_t)(JAIL_OUT_MAX - r->len);
		memcpy(r->out + r->len, buf, (size_t)n);
		r->len += (size_t)n;
	}
	close(p[0]);
	r->out[r->len] = '\0';
	/* Wait without reaping, so the group id stays the leader's while the
	 * rest of the group is killed. */
	for (;;) {
		memset(&si, 0, sizeof(si));
		if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid)
			break;
		if (r->timed_out || now_ms() >= deadline) {
			r->timed_out = true;
			kill(-pid, SIGKILL);
			kill(pid, SIGKILL);
		}
		usleep(2000);
	}
	kill(-pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	r->status = st;
	return 0;
}

char *jail_tmpdir(void)
{
	char tmpl[] = "/tmp/sbx-jail-XXXXXX";

	if (!mkdtemp(tmpl))
		return NULL;
	if (chown(tmpl, JAIL_TEST_UID, JAIL_TEST_GID) < 0 || chmod(tmpl, 0755) < 0) {
		rmdir(tmpl);
		return NULL;
	}
	return strdup(tmpl);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

void jail_rm_rf(const char *path)
{
	if (path)
		nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int jail_write_file(const char *path, const char *content, bool sandbox_owned)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	size_t len = strlen(content);
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, content, len) != (ssize_t)len)
		rc = -EIO;
	if (rc == 0 && sandbox_owned && fchown(fd, JAIL_TEST_UID, JAIL_TEST_GID) < 0)
		rc = -errno;
	close(fd);
	return rc;
}

bool jail_field(const char *out, const char *key, char *val, size_t cap)
{
	size_t klen = strlen(key);

	for (const char *l = out; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, key, klen) == 0 && (l[klen] == ' ' || l[klen] == '\t')) {
			const char *v = l + klen;
			size_t n;

			while (*v == ' ' || *v == '\t')
				v++;
			n = strcspn(v, "\n");
			if (n >= cap)
				n = cap - 1;
			memcpy(val, v, n);
			val[n] = '\0';
			return true;
		}
	}
	return false;
}
