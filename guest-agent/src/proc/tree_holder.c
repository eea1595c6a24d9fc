/* The holder: system calls on stack buffers only (see tree_holder.h). */
#include "tree_holder.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "numdir.h"
#include "pid1.h"

/* Processes one sweep visits at most; what does not fit is found by the
 * next sweep (their parents are dead by then, so they are our children). */
#define SWEEP_MAX 4096
/* While a killed tree is not gone yet, sweep again this often. */
#define SWEEP_PAUSE_NS 1000000L

static volatile sig_atomic_t kill_requested;

static void on_kill(int sig)
{
	kill_requested = 1;
}

static void on_chld(int sig)
{
	/* Only wakes ppoll; the loop reaps. */
}

static void report(int fd, int32_t kind, int32_t value, int32_t flags, const struct rusage *ru)
{
	agent_tree_msg m;

	memset(&m, 0, sizeof(m));
	m.kind = kind;
	m.value = value;
	m.flags = flags;
	if (ru)
		m.ru = *ru;
	/* The agent gone (EPIPE): nobody left to tell. */
	while (write(fd, &m, sizeof(m)) < 0 && errno == EINTR) {
	}
}

/* "/proc/<a>/task" or "/proc/<a>/task/<b>/children" without stdio. */
static char *put_str(char *p, const char *s)
{
	while (*s)
		*p++ = *s++;
	return p;
}

static char *put_uint(char *p, unsigned v)
{
	char tmp[16];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

/* Push the children of thread tid of pid onto stack. */
static void push_children(pid_t pid, unsigned tid, pid_t *stack, size_t *sp)
{
	char path[64], buf[1024], *p = path;
	unsigned long cur = 0;
	bool in_num = false;
	ssize_t n;
	int fd;

	p = put_str(p, "/proc/");
	p = put_uint(p, (unsigned)pid);
	p = put_str(p, "/task/");
	p = put_uint(p, tid);
	p = put_str(p, "/children");
	*p = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	while ((n = read(fd, buf, sizeof(buf))) > 0) {
		for (ssize_t i = 0; i < n; i++) {
			if (buf[i] >= '0' && buf[i] <= '9') {
				cur = cur * 10 + (unsigned long)(buf[i] - '0');
				in_num = true;
			} else if (in_num) {
				if (*sp < SWEEP_MAX)
					stack[(*sp)++] = (pid_t)cur;
				cur = 0;
				in_num = false;
			}
		}
	}
	if (in_num && *sp < SWEEP_MAX)
		stack[(*sp)++] = (pid_t)cur;
	close(fd);
}

typedef struct push_ctx {
	pid_t pid;
	pid_t *stack;
	size_t *sp;
} push_ctx;

static void push_thread_children(unsigned tid, void *arg)
{
	push_ctx *c = arg;

	push_children(c->pid, tid, c->stack, c->sp);
}

/* Where /proc/<pid>/task/<tid>/children is missing (gVisor): every process
 * with its parent, from the 4th field of /proc/<pid>/stat, read once per
 * sweep. What forks after the scan is found by the next sweep. */
static bool scan_parents;
static pid_t scan_pid[SWEEP_MAX], scan_ppid[SWEEP_MAX];
static size_t scan_n;

/* /proc/<pid>/<file> into buf (at most cap - 1 bytes, NUL-terminated):
 * the bytes read, or <= 0 (gone, empty). */
static ssize_t read_proc(unsigned pid, const char *file, char *buf, size_t cap)
{
	char path[48], *p = path;
	ssize_t n;
	int fd;

	p = put_str(p, "/proc/");
	p = put_uint(p, pid);
	p = put_str(p, "/");
	p = put_str(p, file);
	*p = '\0';
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = read(fd, buf, cap - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return n;
}

static void scan_one(unsigned pid, void *arg)
{
	char buf[256], *p, *close_paren = NULL;
	unsigned long ppid = 0;
	ssize_t n = read_proc(pid, "stat", buf, sizeof(buf));

	/* "pid (comm) S ppid ...": comm may hold ')' and spaces. */
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == ')')
			close_paren = buf + i;
	if (!close_paren || close_paren + 4 >= buf + n || close_paren[1] != ' ' || close_paren[3] != ' ')
		return;
	for (p = close_paren + 4; *p >= '0' && *p <= '9'; p++)
		ppid = ppid * 10 + (unsigned long)(*p - '0');
	if (p == close_paren + 4 || scan_n == SWEEP_MAX)
		return;
	scan_pid[scan_n] = (pid_t)pid;
	scan_ppid[scan_n++] = (pid_t)ppid;
}

/* Push the children of pid (of every thread of it). */
static void push_all_children(pid_t pid, pid_t *stack, size_t *sp)
{
	char path[48], *p = path;
	push_ctx c = { pid, stack, sp };

	if (scan_parents) {
		for (size_t i = 0; i < scan_n; i++)
			if (scan_ppid[i] == pid && *sp < SWEEP_MAX)
				stack[(*sp)++] = scan_pid[i];
		return;
	}
	p = put_str(p, "/proc/");
	p = put_uint(p, (unsigned)pid);
	p = put_str(p, "/task");
	*p = '\0';
	agent_numdir_each(path, push_thread_children, &c);
}

int agent_tree_sweep_init(const char **how)
{
	char path[64], *p = path;

	p = put_str(p, "/proc/self/task/");
	p = put_uint(p, (unsigned)syscall(SYS_gettid));
	p = put_str(p, "/children");
	*p = '\0';
	if (access(path, R_OK) == 0) {
		scan_parents = false;
		*how = "/proc/<pid>/task/<tid>/children";
		return 0;
	}
	if (access("/proc/self/stat", R_OK) == 0) {
		scan_parents = true;
		*how = "the parent field of every /proc/<pid>/stat (no task/<tid>/children here)";
		return 0;
	}
	*how = "nothing: /proc cannot be read";
	return -errno;
}

/* SIGKILL every descendant, parents before their children: once a process
 * is killed it cannot fork any more, so the children read after the kill
 * are all it will ever have. A process that exits by itself before it is
 * reached leaves its children to us; the next sweep finds them. */
size_t agent_tree_sweep(pid_t root, bool (*spare)(pid_t pid, void *ud), void *ud)
{
	static pid_t stack[SWEEP_MAX];
	size_t sp = 0, killed = 0;

	if (scan_parents) {
		scan_n = 0;
		agent_numdir_each("/proc", scan_one, NULL);
	}
	push_all_children(root, stack, &sp);
	while (sp > 0) {
		pid_t p = stack[--sp];

		if ((spare && spare(p, ud)) || kill(p, SIGKILL) < 0)
			continue;
		killed++;
		push_all_children(p, stack, &sp);
	}
	return killed;
}

/* ---- marked trees: where a holder cannot be a subreaper (gVisor) ---- */

typedef struct mark_ctx {
	gid_t mark;
	pid_t spare;
	bool kill;
	size_t found;
} mark_ctx;

/* Does /proc/<pid>/status list mark among its supplementary groups? */
static bool has_mark(unsigned pid, gid_t mark)
{
	char buf[8192], *p;

	if (read_proc(pid, "status", buf, sizeof(buf)) <= 0)
		return false; /* gone */
	p = strstr(buf, "\nGroups:");
	if (!p)
		return false;
	for (p += 8; *p && *p != '\n';) {
		unsigned long v = 0;
		bool num = false;

		while (*p == ' ' || *p == '\t')
			p++;
		while (*p >= '0' && *p <= '9') {
			v = v * 10 + (unsigned long)(*p++ - '0');
			num = true;
		}
		if (num && v == (unsigned long)mark)
			return true;
		if (!num && *p && *p != '\n')
			p++;
	}
	return false;
}

static void mark_one(unsigned pid, void *arg)
{
	mark_ctx *c = arg;

	if ((pid_t)pid == c->spare || !has_mark(pid, c->mark))
		return;
	c->found++;
	if (c->kill)
		kill((pid_t)pid, SIGKILL);
}

size_t agent_tree_sweep_mark(gid_t mark, bool kill_them)
{
	mark_ctx c = { .mark = mark, .spare = getpid(), .kill = kill_them };

	agent_numdir_each("/proc", mark_one, &c);
	return c.found;
}

/* The command cannot be started: say why on its stderr, end it as a shell
 * would end a command it cannot run. */
static __attribute__((noreturn)) void fail(const agent_tree_cmd *cmd, int report_fd, const char *what, int errnum)
{
	if (cmd->err_fd >= 0) {
		char msg[256], *p = msg;
		const char *e = strerror(errnum);
		size_t n = strlen(e);

		p = put_str(p, "sandbox-agent: ");
		p = put_str(p, what);
		p = put_str(p, ": ");
		if (n > sizeof(msg) - (size_t)(p - msg) - 1)
			n = sizeof(msg) - (size_t)(p - msg) - 1;
		memcpy(p, e, n);
		p += n;
		*p++ = '\n';
		if (write(cmd->err_fd, msg, (size_t)(p - msg)) < 0) {
			/* the exit status still says it */
		}
	}
	report(report_fd, AGENT_TREE_MSG_EXITED, (cmd->fail_exit & 0xff) << 8, AGENT_TREE_MSG_LAST, NULL);
	_exit(0);
}

/* Close every fd except report_fd and the command's. */
static void close_others(const agent_tree_cmd *cmd, int report_fd)
{
	int keep[5];
	size_t n = 0;
	unsigned from = 0;

	keep[n++] = report_fd;
	for (size_t i = 0; i < cmd->nkeep && i < 4; i++)
		if (cmd->keep[i] >= 0)
			keep[n++] = cmd->keep[i];
	/* Ascending, for the gaps between them. */
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
			int t = keep[j];
			keep[j] = keep[j - 1];
			keep[j - 1] = t;
		}
	for (size_t i = 0; i < n; i++) {
		if ((unsigned)keep[i] > from)
			syscall(SYS_close_range, from, (unsigned)keep[i] - 1, 0U);
		if ((unsigned)keep[i] + 1 > from)
			from = (unsigned)keep[i] + 1;
	}
	syscall(SYS_close_range, from, ~0U, 0U);
}

void agent_tree_holder_run(const agent_tree_cmd *cmd, int report_fd)
{
	static const int reset[] = { AGENT_PID1_SIGNALS };
	struct sigaction sa;
	sigset_t wait_mask;
	pid_t self = getpid(), cmd_pid;

	prctl(PR_SET_NAME, "sbx-holder", 0, 0, 0);
	/* The agent gone (not PID 1: tests, a host run), the tree goes too. */
	prctl(PR_SET_PDEATHSIG, AGENT_TREE_SIG_KILL, 0, 0, 0);
	/* Hold nothing of the agent's: other commands' pipes would not see
	 * EOF, client sockets would not close. */
	close_others(cmd, report_fd);
	if (!cmd->mark && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
		fail(cmd, report_fd, "subreaper", errno);
	/* Every signal stays blocked (the agent blocked them for the fork)
	 * until ppoll; the command starts with the defaults. */
	for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
		signal(reset[i], SIG_DFL);
	/* vfork: no copy of the holder's memory to make and tear down again,
	 * the holder waits until the command has exec'd (or failed). cmd->fn
	 * writes only its own stack frames (below this one) and never
	 * returns; credentials change by raw syscalls for that task alone
	 * (agent_jail.h). */
	cmd_pid = vfork();
	if (cmd_pid == 0) {
		cmd->fn(cmd->arg);
		_exit(127);
	}
	if (cmd_pid < 0)
		fail(cmd, report_fd, "fork", errno);
	for (size_t i = 0; i < cmd->nkeep && i < 4; i++)
		if (cmd->keep[i] >= 0 && cmd->keep[i] != report_fd)
			close(cmd->keep[i]);

	signal(SIGPIPE, SIG_IGN);
	memset(&sa, 0, sizeof(sa));
	sigemptyset(&sa.sa_mask);
	sa.sa_handler = on_chld;
	sigaction(SIGCHLD, &sa, NULL);
	sa.sa_handler = on_kill;
	sigaction(AGENT_TREE_SIG_KILL, &sa, NULL);
	sigfillset(&wait_mask);
	sigdelset(&wait_mask, SIGCHLD);
	sigdelset(&wait_mask, AGENT_TREE_SIG_KILL);
	report(report_fd, AGENT_TREE_MSG_STARTED, cmd_pid, 0, NULL);

	/* Marked (no subreaper): orphans go to the agent, so the holder cannot
	 * wait for them; it leaves once it has no child, and what the command
	 * left is the agent's to sweep by the mark (agent_tree_kill). Only a
	 * kill waits here until no process has the mark. */
	for (;;) {
		struct timespec pause = { 0, SWEEP_PAUSE_NS };
		struct rusage ru, cmd_ru = { 0 };
		int status, cmd_status = 0;
		bool cmd_reaped = false, childless, empty;
		pid_t p;

		while ((p = wait4(-1, &status, WNOHANG | __WALL, &ru)) > 0) {
			if (p == cmd_pid) {
				cmd_reaped = true;
				cmd_status = status;
				cmd_ru = ru;
			}
		}
		childless = p < 0 && errno == ECHILD;
		empty = childless &&
			(!cmd->mark || !kill_requested || agent_tree_sweep_mark(cmd->mark, false) == 0);
		/* Said after the reaping, so that the agent knows whether the
		 * holder goes too (nothing left: it waits for that, and its
		 * answer finds no process of the command). */
		if (cmd_reaped)
			report(report_fd, AGENT_TREE_MSG_EXITED, cmd_status,
			       empty ? AGENT_TREE_MSG_LAST : 0, &cmd_ru);
		if (empty)
			_exit(0);
		if (kill_requested && cmd->mark)
			agent_tree_sweep_mark(cmd->mark, true);
		else if (kill_requested)
			agent_tree_sweep(self, NULL, NULL);
		/* A pending SIGCHLD or kill request ends the wait at once. */
		ppoll(NULL, 0, kill_requested ? &pause : NULL, &wait_mask);
	}
}
