#include "bench_edge.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

double bench_wrk(const char *url, const char *token, int conns, int secs, double *p50_ms)
{
	char cmd[1024], line[256];
	snprintf(cmd, sizeof(cmd), "wrk -t2 -c%d -d%ds --latency -H 'Authorization: Bearer %s' '%s' 2>&1",
		 conns, secs, token, url);
	FILE *p = popen(cmd, "r");
	double rps = -1, v;
	char unit[8];
	*p50_ms = -1;
	while (p && fgets(line, sizeof(line), p)) {
		if (sscanf(line, " Requests/sec: %lf", &v) == 1)
			rps = v;
		if (sscanf(line, " 50%% %lf%7s", &v, unit) == 2)
			*p50_ms = strcmp(unit, "us") == 0 ? v / 1e3 : strcmp(unit, "s") == 0 ? v * 1e3 : v;
		if (strstr(line, "Non-2xx"))
			rps = -1; /* errors: not a figure */
	}
	if (p)
		pclose(p);
	return rps;
}

long bench_rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

/* One answer to GET /healthz on fd, waited for (up to 10 s). */
static bool answered(int fd)
{
	char buf[512];
	size_t got = 0;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	while (poll(&p, 1, 10000) == 1) {
		ssize_t r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);
		if (r <= 0)
			return false;
		got += (size_t)r;
		buf[got] = '\0';
		if (strstr(buf, "{\"status\":\"ok\"}\n"))
			return true;
	}
	return false;
}

int bench_idle_open(int port, int n, int **fds)
{
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: bench\r\n\r\n";
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	*fds = calloc((size_t)n, sizeof(int));
	int held = 0;
	while (*fds && held < n) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
		    send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(req) - 1) ||
		    !answered(fd)) {
			fprintf(stderr, "idle connection %d: %s\n", held, strerror(errno));
			if (fd >= 0)
				close(fd);
			break;
		}
		(*fds)[held++] = fd;
	}
	return held;
}

void bench_idle_close(int *fds, int n)
{
	for (int i = 0; i < n; i++)
		close(fds[i]);
	free(fds);
}
