#include "bench_proc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
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

pid_t bench_spawn_bg(char *const argv[], const char *log_path)
{
	pid_t pid;
	if (spawn_with_output(&pid, argv, log_path, O_WRONLY | O_CREAT | O_APPEND) != 0)
		return -1;
	return pid;
}

void bench_stop(pid_t pid, int timeout_ms)
{
	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (int waited = 0; waited < timeout_ms; waited += 10) {
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return;
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
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
