#include "bench_sys.h"

#include <errno.h>
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double tv_s(struct timeval tv)
{
	return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

static void write_all(int fd, size_t total, size_t chunk)
{
	uint8_t *buf = calloc(1, chunk);
	size_t left = total;
	while (buf && left > 0) {
		size_t n = left < chunk ? left : chunk;
		ssize_t w = write(fd, buf, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		left -= (size_t)w;
	}
	free(buf);
	_exit(left == 0 ? 0 : 1);
}

double bench_socketpair_mbs(size_t total, size_t chunk, double *cpu_s)
{
	int sv[2];
	if (chunk == 0 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return -1;
	uint8_t *buf = malloc(chunk);
	double cpu0 = bench_cpu_self(), t0 = now_s();
	pid_t pid = buf ? fork() : -1;
	if (pid == 0) {
		close(sv[0]);
		write_all(sv[1], total, chunk);
	}
	close(sv[1]);
	size_t got = 0;
	while (pid > 0) {
		ssize_t r = read(sv[0], buf, chunk);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	double dt = now_s() - t0;
	close(sv[0]);
	free(buf);
	int status = 1;
	struct rusage ru = { 0 };
	if (pid > 0 && wait4(pid, &status, 0, &ru) < 0)
		status = 1;
	if (got != total || status != 0 || dt <= 0)
		return -1;
	if (cpu_s)
		*cpu_s = bench_cpu_self() - cpu0 + tv_s(ru.ru_utime) + tv_s(ru.ru_stime);
	return (double)total / dt / 1e6;
}

double bench_cpu_of(pid_t pid)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char *ok = fgets(line, sizeof(line), f);
	fclose(f);
	/* the command name may hold spaces and ')': fields follow the last ')' */
	char *p = ok ? strrchr(line, ')') : NULL;
	unsigned long long ut = 0, st = 0;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &st) != 2)
		return -1;
	long hz = sysconf(_SC_CLK_TCK);
	return (double)(ut + st) / (double)(hz > 0 ? hz : 100);
}

double bench_cpu_self(void)
{
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) < 0)
		return -1;
	return tv_s(ru.ru_utime) + tv_s(ru.ru_stime);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
	if (rc < 0 && errno != ENOENT)
		fprintf(stderr, "bench: cannot remove %s: %s\n", path, strerror(errno));
	return 0; /* go on: remove what can be removed */
}

int bench_rm_tree(const char *path)
{
	if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0 && errno != ENOENT)
		return -1;
	return access(path, F_OK) == 0 ? -1 : 0;
}
