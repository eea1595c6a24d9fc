#include "bench_proc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int spawn_with_output(pid_t *pid, char *const argv[], const char *out_path, int flags)
{
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, out_path, flags, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	int rc = posix_spawnp(pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	return rc;
}

int bench_spawn_wait(char *const argv[])
{
	pid_t pid;
	if (spawn_with_output(&pid, argv, "/dev/null", O_WRONLY) != 0)
		return -1;
	int status;
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	return status;
}

int bench_spawn_io(char *const argv[], size_t feed, size_t *got)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	/* feed: we write its stdin; else we read its stdout. */
	int child_end = feed ? p[0] : p[1], ours = feed ? p[1] : p[0];
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, child_end, feed ? 0 : 1);
	posix_spawn_file_actions_addopen(&fa, feed ? 1 : 0, "/dev/null", feed ? O_WRONLY : O_RDONLY,
					 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(child_end);
	if (rc != 0) {
		close(ours);
		return -1;
	}
	size_t chunk = 1u << 20, done = 0;
	char *buf = calloc(1, chunk);
	while (buf) {
		ssize_t n = feed ? write(ours, buf, feed - done < chunk ? feed - done : chunk)
				 : read(ours, buf, chunk);
		if (n <= 0)
			break;
		done += (size_t)n;
		if (feed && done == feed)
			break;
	}
	free(buf);
	close(ours);
	if (got)
		*got = done;
	int status;
	if (waitpid(pid, &status, 0) < 0)
		return -1;
	return status;
}

pid_t bench_spawn_bg(char *const argv[], const char *log_path)
{
	pid_t pid;
	if (spawn_with_output(&pid, argv, log_path, O_WRONLY | O_CREAT | O_APPEND) != 0)
		return -1;
	return pid;
}

void bench_stop(pid_t pid, int sig, int timeout_ms)
{
	if (pid <= 0)
		return;
	kill(pid, sig);
	for (int waited = 0; waited < timeout_ms; waited += 10) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

pid_t bench_netns_holder(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		char ok = unshare(CLONE_NEWNET) == 0 && prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 &&
			  getppid() != 1;
		if (write(p[1], &ok, 1) != 1 || !ok)
			_exit(1);
		close(p[1]);
		for (;;)
			pause();
	}
	close(p[1]);
	char ok = 0;
	if (pid < 0 || read(p[0], &ok, 1) != 1 || !ok) {
		if (pid > 0) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
		}
		pid = -1;
	}
	close(p[0]);
	return pid;
}

int bench_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t len = sizeof(a);
	int port = -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0)
		port = ntohs(a.sin_port);
	close(fd);
	return port;
}
