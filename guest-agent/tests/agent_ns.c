#include "agent_ns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

const char *agent_ns_binary(void)
{
	const char *b = getenv("AGENT_BINARY");

	return b && *b ? b : "sandbox-agent";
}

static __attribute__((noreturn)) void child(const agent_ns *ns, unsigned grace_ms)
{
	char listen[160], grace[32];
	const char *bin = agent_ns_binary();

	/* If the test dies, its agent (and so the namespace) dies too. */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		perror("agent_ns: mount");
		_exit(120);
	}
	/* A soft open-file limit below the hard one, as containers get: the
	 * agent raises its own and gives commands this one back. */
	{
		struct rlimit rl;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_max > AGENT_NS_NOFILE) {
			rl.rlim_cur = AGENT_NS_NOFILE;
			setrlimit(RLIMIT_NOFILE, &rl);
		}
	}
	snprintf(listen, sizeof(listen), "unix:%s", ns->sock);
	snprintf(grace, sizeof(grace), "%u", grace_ms);
	if (getenv("AGENT_VERBOSE"))
		execl(bin, bin, "--listen", listen, "--grace-ms", grace, "--verbose", (char *)NULL);
	else
		execl(bin, bin, "--listen", listen, "--grace-ms", grace, (char *)NULL);
	perror("agent_ns: exec agent");
	_exit(121);
}

int agent_ns_start(agent_ns *ns, unsigned grace_ms)
{
	uint64_t deadline;
	long pid;

	memset(ns, 0, sizeof(*ns));
	snprintf(ns->dir, sizeof(ns->dir), "/tmp/agent-ns-XXXXXX");
	if (!mkdtemp(ns->dir))
		return -errno;
	snprintf(ns->sock, sizeof(ns->sock), "%s/run/agent.sock", ns->dir);
	/* Like fork(), into new PID, mount and network namespaces: the child
	 * is PID 1 of its namespace. */
	pid = syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | SIGCHLD, NULL, NULL, NULL, 0);
	if (pid < 0) {
		int e = -errno;
		test_rm_rf(ns->dir);
		return e;
	}
	if (pid == 0)
		child(ns, grace_ms);
	ns->pid = (pid_t)pid;
	deadline = test_now_ms() + 10000;
	while (test_now_ms() < deadline) {
		int fd = test_unix_connect(ns->sock);
		if (fd >= 0) {
			close(fd);
			return 0;
		}
		if (waitpid(ns->pid, NULL, WNOHANG) == ns->pid) {
			ns->pid = 0;
			agent_ns_stop(ns);
			return -ECHILD;
		}
		usleep(2000);
	}
	agent_ns_stop(ns);
	return -ETIMEDOUT;
}

int agent_ns_wait_exit(agent_ns *ns, unsigned ms, int *status)
{
	uint64_t deadline = test_now_ms() + ms;

	while (ns->pid) {
		pid_t r = waitpid(ns->pid, status, WNOHANG);
		if (r == ns->pid) {
			ns->pid = 0;
			return 0;
		}
		if (r < 0)
			return -errno;
		if (test_now_ms() >= deadline)
			return -ETIMEDOUT;
		usleep(2000);
	}
	return -ECHILD;
}

void agent_ns_stop(agent_ns *ns)
{
	if (ns->pid > 0) {
		kill(ns->pid, SIGKILL);
		waitpid(ns->pid, NULL, 0);
		ns->pid = 0;
	}
	if (ns->dir[0]) {
		test_rm_rf(ns->dir);
		ns->dir[0] = '\0';
	}
}

static int read_link(pid_t pid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	n = readlink(path, buf, len - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* State letter of pid and its parent (from /proc/<pid>/stat). */
static char proc_state(pid_t pid, long *ppid)
{
	char path[64], buf[512];
	FILE *f;
	size_t n;
	char *p;

	*ppid = -1;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return '?';
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return '?';
	sscanf(p + 2, "%*c %ld", ppid);
	return p[2];
}

int agent_ns_procs(const agent_ns *ns, int *total, int *zombies)
{
	char want[64], got[64];
	DIR *d;
	struct dirent *de;
	int ret;

	*total = *zombies = 0;
	ret = read_link(ns->pid, want, sizeof(want));
	if (ret < 0)
		return ret;
	d = opendir("/proc");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		long ppid;
		char st = proc_state((pid_t)pid, &ppid);
		/* A zombie may no longer show its namespace; its parent does. */
		bool in_ns = read_link((pid_t)pid, got, sizeof(got)) == 0 ? strcmp(got, want) == 0
									  : ppid == (long)ns->pid;
		if (!in_ns)
			continue;
		(*total)++;
		if (st == 'Z')
			(*zombies)++;
	}
	closedir(d);
	return 0;
}

long agent_ns_nofile(const agent_ns *ns)
{
	char path[64], line[256];
	long soft = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/limits", (int)ns->pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "Max open files %ld", &soft) == 1)
			break;
	fclose(f);
	return soft;
}

long agent_ns_rss_kb(const agent_ns *ns)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)ns->pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}
