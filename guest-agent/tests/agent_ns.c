#include "agent_ns.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/capability.h>

#include "test_util.h"

const char *agent_ns_binary(void)
{
	const char *b = getenv("AGENT_BINARY");

	return b && *b ? b : "sandbox-agent";
}

static __attribute__((noreturn)) void child(const agent_ns *ns, unsigned grace_ms, unsigned flags)
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
	/* As in a sandbox's container: the bounding set limits what the
	 * agent (root) has after exec. */
	if (flags & AGENT_NS_CONTAINER_CAPS) {
		static const int keep[] = { CAP_CHOWN, CAP_DAC_OVERRIDE, CAP_FSETID, CAP_FOWNER, CAP_MKNOD,
					    CAP_NET_RAW, CAP_SETGID, CAP_SETUID, CAP_SETFCAP, CAP_SETPCAP,
					    CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT, CAP_KILL, CAP_AUDIT_WRITE,
					    CAP_NET_ADMIN };
		for (int cap = 0; cap < 64; cap++) {
			bool kept = false;
			for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
				kept = kept || keep[i] == cap;
			if (!kept && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL) {
				perror("agent_ns: drop a capability");
				_exit(122);
			}
		}
	}
	snprintf(listen, sizeof(listen), "unix:%s", ns->sock);
	snprintf(grace, sizeof(grace), "%u", grace_ms);
	/* A container's environment, not the test runner's (whose PATH may
	 * name folders the sandbox user cannot search). */
	{
		char *env[8] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root" };
		char kv[3][512];
		const char *pass[] = { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS" };
		size_t n = 2;

		for (size_t i = 0; i < 3; i++) {
			const char *v = getenv(pass[i]);
			if (v) {
				snprintf(kv[i], sizeof(kv[i]), "%s=%s", pass[i], v);
				env[n++] = kv[i];
			}
		}
		env[n] = NULL;
		/* AGENT_FS_RESOLVE=walk: the agent's file operations through
		 * the component walk, as under gVisor. */
		const char *argv[10] = { bin, "--listen", listen, "--grace-ms", grace };
		size_t a = 5;
		const char *resolve = getenv("AGENT_FS_RESOLVE");
		if (resolve) {
			argv[a++] = "--fs-resolve";
			argv[a++] = resolve;
		}
		/* AGENT_MARK_TREES=1: process trees held as under gVisor. */
		if (getenv("AGENT_MARK_TREES"))
			argv[a++] = "--mark-trees";
		if (getenv("AGENT_VERBOSE"))
			argv[a++] = "--verbose";
		argv[a] = NULL;
		execve(bin, (char *const *)argv, env);
	}
	perror("agent_ns: exec agent");
	_exit(121);
}

/* /proc/<pid>/stat read into buf: its fields after the name (the state
 * letter first), or NULL. */
static const char *proc_stat_fields(pid_t pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;
	size_t n;
	char *p;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return NULL;
	n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p + 2 : NULL;
}

/* /proc/<pid>/stat's start time (clock ticks since boot) of a live
 * process, or 0 when pid is gone or a zombie: with the pid, it names one
 * process, not whichever later gets its number. */
static unsigned long long proc_start_time(pid_t pid)
{
	char buf[1024];
	unsigned long long start = 0;
	const char *f = proc_stat_fields(pid, buf, sizeof(buf));

	/* state (field 3) ... starttime (field 22) */
	if (!f || f[0] == 'Z' || f[0] == 'X' ||
	    sscanf(f, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu",
		   &start) != 1)
		return 0;
	return start;
}

#define AGENT_NS_PREFIX "agent-ns-"

/* A test killed with SIGKILL runs no agent_ns_stop: its agent dies with it
 * (PR_SET_PDEATHSIG) but its folder stays. Each folder names its owner
 * (pid and start time, in "owner"); a start removes the folders whose owner
 * is gone, and none of a live test (other tests run at once) nor one
 * without a readable owner (a folder being made). The dead-owner rule is
 * also the integration harness's (tests/integration/sbx_harness.py,
 * run_alive), in Python for its runs: these C tests run without Python,
 * so both exist; a change to one is a change to both. */
static void sweep_dead_folders(void)
{
	DIR *d = opendir("/tmp");
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d))) {
		char dir[300], owner[320];
		unsigned long long start;
		int pid;
		FILE *f;

		if (strncmp(de->d_name, AGENT_NS_PREFIX, strlen(AGENT_NS_PREFIX)) != 0)
			continue;
		snprintf(dir, sizeof(dir), "/tmp/%s", de->d_name);
		snprintf(owner, sizeof(owner), "%s/owner", dir);
		f = fopen(owner, "re");
		if (!f)
			continue;
		if (fscanf(f, "%d %llu", &pid, &start) == 2 && pid > 0 && start > 0 &&
		    proc_start_time((pid_t)pid) != start)
			test_rm_rf(dir);
		fclose(f);
	}
	closedir(d);
}

/* The owner file: this process, as sweep_dead_folders reads it. */
static int write_owner(const char *dir)
{
	char path[128];
	FILE *f;
	int r;

	snprintf(path, sizeof(path), "%s/owner", dir);
	f = fopen(path, "we");
	if (!f)
		return -errno;
	r = fprintf(f, "%d %llu\n", (int)getpid(), proc_start_time(getpid())) < 0 ? -EIO : 0;
	if (fclose(f) != 0 && r == 0)
		r = -errno;
	return r;
}

int agent_ns_start(agent_ns *ns, unsigned grace_ms)
{
	return agent_ns_start_ex(ns, grace_ms, 0);
}

int agent_ns_start_ex(agent_ns *ns, unsigned grace_ms, unsigned flags)
{
	uint64_t deadline;
	long pid;

	memset(ns, 0, sizeof(*ns));
	sweep_dead_folders();
	snprintf(ns->dir, sizeof(ns->dir), "/tmp/" AGENT_NS_PREFIX "XXXXXX");
	if (!mkdtemp(ns->dir))
		return -errno;
	{
		int r = write_owner(ns->dir);
		if (r < 0) {
			test_rm_rf(ns->dir);
			return r;
		}
	}
	snprintf(ns->sock, sizeof(ns->sock), "%s/run/agent.sock", ns->dir);
	/* Like fork(), into new PID, mount, network and IPC namespaces (as a
	 * sandbox's: a reset removes the System V IPC objects of its own): the
	 * child is PID 1 of its namespace. */
	pid = syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | SIGCHLD, NULL, NULL,
		      NULL, 0);
	if (pid < 0) {
		int e = -errno;
		test_rm_rf(ns->dir);
		return e;
	}
	if (pid == 0)
		child(ns, grace_ms, flags);
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

/* State letter and parent of pid (from /proc/<pid>/stat). */
static char proc_state(pid_t pid, long *ppid)
{
	char buf[1024];
	const char *f = proc_stat_fields(pid, buf, sizeof(buf));

	*ppid = -1;
	if (!f)
		return '?';
	sscanf(f, "%*c %ld", ppid);
	return f[0];
}

/* Whether pid descends from (or is) root, by parent links. As PID 1 of its
 * namespace the agent is an ancestor of every process in it, also of those
 * in the per-command namespaces below it (their holders are its children). */
static bool descends_from(pid_t pid, pid_t root)
{
	for (int depth = 0; depth < 64 && pid > 1; depth++) {
		long ppid;

		if (pid == root)
			return true;
		if (proc_state(pid, &ppid) == '?')
			return false;
		pid = (pid_t)ppid;
	}
	return pid == root;
}

/* The command line of pid with NULs as spaces, or "". */
static void read_cmdline(pid_t pid, char *buf, size_t len)
{
	char path[64];
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	f = fopen(path, "re");
	if (f) {
		n = fread(buf, 1, len - 1, f);
		fclose(f);
	}
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
	while (n > 0 && buf[n - 1] == ' ')
		n--;
	buf[n] = '\0';
}

int agent_ns_scan(const agent_ns *ns, const char *cmdline, int *total, int *zombies)
{
	DIR *d;
	struct dirent *de;

	*total = 0;
	if (zombies)
		*zombies = 0;
	if (ns->pid <= 0)
		return -ESRCH;
	d = opendir("/proc");
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		char *end, cl[256];
		long pid = strtol(de->d_name, &end, 10), ppid;
		char st;

		if (*end || pid <= 0)
			continue;
		st = proc_state((pid_t)pid, &ppid);
		if (st == '?' || !descends_from((pid_t)pid, ns->pid))
			continue;
		if (cmdline) {
			read_cmdline((pid_t)pid, cl, sizeof(cl));
			if (strcmp(cl, cmdline) != 0)
				continue;
		}
		(*total)++;
		if (zombies && st == 'Z')
			(*zombies)++;
	}
	closedir(d);
	return 0;
}

int agent_ns_procs(const agent_ns *ns, int *total, int *zombies)
{
	return agent_ns_scan(ns, NULL, total, zombies);
}

int agent_ns_children(const agent_ns *ns)
{
	char path[64], buf[4096];
	int n = 0, fd;
	ssize_t len;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)ns->pid, (int)ns->pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len < 0)
		return -errno;
	for (ssize_t i = 0; i < len; i++)
		n += buf[i] == ' ';
	return n;
}

int agent_ns_fds(const agent_ns *ns)
{
	char path[64];
	struct dirent *de;
	int n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)ns->pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
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
