#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "sbx/cleanup.h"
#include "log.h"
#include "oom.h"
#include "pty.h"
#include "spawn.h"
#include "tree.h"

#define READ_CHUNK (64u * 1024u)

typedef struct proc_out {
	int fd;              /* -1 once closed */
	struct event *ev;
	bool paused;         /* the owner had no room */
	bool final;          /* grace over: read at most final_left more, then close */
	size_t final_left;
	size_t grown;        /* pipe bytes taken from the budget (pipe_size) */
} proc_out;

struct agent_proc {
	struct agent_proc *prev, *next;
	struct event_base *base;
	pid_t pid;              /* == pgid; 0 until the holder said it */
	sigset_t pending;       /* signals asked for before the pid was known */
	agent_tree *tree;
	bool pty;               /* out[0] is a terminal's master, in_fd a dup of it */
	agent_proc_sink sink;
	void *ud;

	proc_out out[2];

	int in_fd;              /* -1: none, closed, or the reader went away */
	struct event *in_ev;
	uint8_t *in_buf;
	size_t in_off, in_len, in_cap;
	bool in_eof;            /* close once in_buf is written */

	struct event *timeout_ev;
	struct event *grace_ev;
	struct event *free_ev;  /* frees a finished proc from the loop */

	uint64_t start_ns;
	uint64_t oom_at_start;  /* the sandbox's OOM kill count at the start */
	bool oom_known;         /* ... if it has one */
	bool killed;            /* the agent sent SIGKILL (timeout, kill, detach) */
	bool reaped;
	bool detached;
	bool done;              /* finished; freed by free_ev */
	agent_proc_result result;
};

static agent_proc *procs;
static size_t nprocs;
static int devnull = -1;
/* Output lands here when the owner has no buffer of its own (sink->buffer). */
static uint8_t read_buf[READ_CHUNK];
static size_t pipe_budget_used;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void list_add(agent_proc *p)
{
	p->next = procs;
	if (procs)
		procs->prev = p;
	procs = p;
	nprocs++;
}

static void list_del(agent_proc *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		procs = p->next;
	if (p->next)
		p->next->prev = p->prev;
	p->prev = p->next = NULL;
	nprocs--;
}

static void free_event(struct event **ev)
{
	if (*ev) {
		event_free(*ev);
		*ev = NULL;
	}
}

static void close_out(agent_proc *p, agent_proc_stream s)
{
	proc_out *o = &p->out[s];

	free_event(&o->ev);
	if (o->fd >= 0) {
		close(o->fd);
		o->fd = -1;
	}
	pipe_budget_used -= o->grown;
	o->grown = 0;
}

static void close_in(agent_proc *p)
{
	free_event(&p->in_ev);
	if (p->in_fd >= 0) {
		close(p->in_fd);
		p->in_fd = -1;
	}
	free(p->in_buf);
	p->in_buf = NULL;
	p->in_off = p->in_len = p->in_cap = 0;
}

static void proc_free(agent_proc *p)
{
	close_out(p, AGENT_PROC_STDOUT);
	close_out(p, AGENT_PROC_STDERR);
	close_in(p);
	free_event(&p->timeout_ev);
	free_event(&p->grace_ev);
	free_event(&p->free_ev);
	agent_tree_forget_owner(p->tree);
	agent_tree_unref(p->tree);
	list_del(p);
	free(p);
}

static void free_cb(evutil_socket_t fd, short what, void *ud)
{
	proc_free(ud);
}

/* Reaped and both pipes closed: report once. The memory is released from
 * the loop, never under a caller's feet: sink calls may re-enter (an owner
 * detaching from inside output()), and every caller may still look at p
 * after this returns. */
static void maybe_finish(agent_proc *p)
{
	if (p->done || !p->reaped || p->out[0].fd >= 0 || p->out[1].fd >= 0)
		return;
	p->done = true;
	close_in(p);
	event_del(p->grace_ev);
	if (p->timeout_ev)
		event_del(p->timeout_ev);
	event_active(p->free_ev, EV_TIMEOUT, 0);
	if (!p->detached)
		p->sink.finished(p->ud, &p->result);
}

static void read_cb(evutil_socket_t fd, short what, void *ud);

static void finish_stream(agent_proc *p, agent_proc_stream s)
{
	close_out(p, s);
	maybe_finish(p);
}

static void read_stream(agent_proc *p, agent_proc_stream s)
{
	proc_out *o = &p->out[s];
	size_t room, want;
	uint8_t *buf = NULL;
	ssize_t n;

	if (p->detached) {
		finish_stream(p, s);
		return;
	}
	room = p->sink.room(p->ud, s);
	if (room == 0) {
		event_del(o->ev);
		o->paused = true;
		return;
	}
	want = room;
	if (o->final && o->final_left < want)
		want = o->final_left;
	/* Straight into the owner's buffer (the exec stream's socket
	 * output) saves two copies per byte: memcpy was about a quarter of
	 * the agent's CPU on a bulk stream. */
	if (p->sink.buffer)
		buf = p->sink.buffer(p->ud, s, want);
	if (!buf) {
		buf = read_buf;
		if (want > sizeof(read_buf))
			want = sizeof(read_buf);
	}
	n = read(o->fd, buf, want);
	if (n < 0) {
		if (errno == EINTR)
			return;
		/* A terminal's master reads EIO once no process holds the
		 * slave any more: that is its EOF. */
		if (errno == EIO && p->pty) {
			finish_stream(p, s);
			return;
		}
		if (errno != EAGAIN)
			agent_log_warn("read output of %d: %s", (int)p->pid, strerror(errno));
		else if (!o->final)
			return;
		finish_stream(p, s);
		return;
	}
	if (n == 0) {
		finish_stream(p, s);
		return;
	}
	p->sink.output(p->ud, s, buf, (size_t)n);
	if (p->done || o->fd < 0)
		return; /* the owner detached */
	if (o->final) {
		o->final_left -= (size_t)n;
		if (o->final_left == 0)
			finish_stream(p, s);
	}
}

static void read_cb(evutil_socket_t fd, short what, void *ud)
{
	agent_proc *p = ud;
	agent_proc_stream s = p->out[AGENT_PROC_STDOUT].fd == fd ? AGENT_PROC_STDOUT : AGENT_PROC_STDERR;

	read_stream(p, s);
}

void agent_proc_resume(agent_proc *p, agent_proc_stream s)
{
	proc_out *o = &p->out[s];

	if (o->fd < 0 || !o->paused)
		return;
	o->paused = false;
	event_add(o->ev, NULL);
}

/* The main process is gone; background holders of the pipes get the grace,
 * then only the bytes already in each pipe are passed on. */
static void grace_cb(evutil_socket_t fd, short what, void *ud)
{
	agent_proc *p = ud;

	for (int s = 0; s < 2 && !p->done; s++) {
		proc_out *o = &p->out[s];
		int avail = 0;

		if (o->fd < 0)
			continue;
		if (ioctl(o->fd, FIONREAD, &avail) < 0 || avail <= 0) {
			finish_stream(p, (agent_proc_stream)s);
			continue;
		}
		o->final = true;
		o->final_left = (size_t)avail;
	}
}

static void started_cb(pid_t pid, void *ud)
{
	agent_proc *p = ud;
	sbx_err err = { 0 };

	p->pid = pid;
	for (int sig = 1; sig < NSIG; sig++)
		if (sigismember(&p->pending, sig) == 1 && agent_proc_signal(p, sig, &err) < 0)
			agent_log_warn("%s", err.msg);
	sigemptyset(&p->pending);
	if (!p->detached && p->sink.started)
		p->sink.started(p->ud, pid);
}

static void exit_cb(pid_t pid, int status, const struct rusage *ru, void *ud)
{
	agent_proc *p = ud;
	uint64_t ooms;

	p->reaped = true;
	p->result.status = status;
	p->result.rusage = *ru;
	/* Killed (or, from a shell, its child killed: exit 128 + 9) without
	 * the agent's doing while the sandbox's OOM kill count rose. The kernel
	 * counts its kill before the victim dies, so the count is final by
	 * the time the victim is reaped. */
	if (((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
	     (WIFEXITED(status) && WEXITSTATUS(status) == 128 + SIGKILL)) &&
	    !p->killed && p->oom_known && agent_oom_kills(&ooms) && ooms > p->oom_at_start)
		p->result.oom_killed = true;
	p->result.duration_us = (now_ns() - p->start_ns) / 1000u;
	if (p->timeout_ev)
		event_del(p->timeout_ev);
	if (p->out[0].fd >= 0 || p->out[1].fd >= 0) {
		struct timeval tv = { 0, AGENT_PROC_PIPE_GRACE_MS * 1000 };
		evtimer_add(p->grace_ev, &tv);
	}
	maybe_finish(p);
}

static void timeout_cb(evutil_socket_t fd, short what, void *ud)
{
	agent_proc *p = ud;
	sbx_err err = { 0 };

	p->result.timed_out = true;
	p->killed = true;
	if (agent_tree_kill(p->tree, &err) < 0)
		agent_log_warn("timeout: %s", err.msg);
}

/* ---- stdin ---- */

/* Write what is queued; *written counts what went in. -1 when the reader
 * left (EPIPE): the rest can never be written. */
static int flush_stdin(agent_proc *p, size_t *written)
{
	*written = 0;
	while (p->in_len > 0) {
		ssize_t n = write(p->in_fd, p->in_buf + p->in_off, p->in_len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			if (errno != EPIPE && !(errno == EIO && p->pty))
				agent_log_warn("write stdin of %d: %s", (int)p->pid, strerror(errno));
			return -1;
		}
		p->in_off += (size_t)n;
		p->in_len -= (size_t)n;
		*written += (size_t)n;
	}
	if (p->in_len == 0)
		p->in_off = 0;
	return 0;
}

/* Write queued bytes, report them, close on eof, (un)arm the write event. */
static void pump_stdin(agent_proc *p)
{
	size_t written, dropped = 0;

	if (p->in_fd < 0)
		return;
	if (flush_stdin(p, &written) < 0) {
		dropped = p->in_len;
		close_in(p);
	} else if (p->in_len == 0) {
		event_del(p->in_ev);
		if (p->in_eof)
			close_in(p);
	} else {
		event_add(p->in_ev, NULL);
	}
	if (written + dropped > 0 && !p->detached)
		p->sink.stdin_done(p->ud, written + dropped);
}

static void write_cb(evutil_socket_t fd, short what, void *ud)
{
	pump_stdin(ud);
}

int agent_proc_write_stdin(agent_proc *p, const void *data, size_t len, sbx_err *err)
{
	if (p->in_fd < 0) {
		if (p->in_eof)
			return sbx_err_set(err, -EPIPE, "stdin already closed");
		/* The command closed its stdin or exited: drop, as a pipe would
		 * (with EPIPE), but give the credit back. */
		if (len && !p->detached)
			p->sink.stdin_done(p->ud, len);
		return 0;
	}
	if (len > AGENT_PROC_STDIN_MAX - p->in_len)
		return sbx_err_set(err, -ENOBUFS, "stdin: more than %u bytes pending", AGENT_PROC_STDIN_MAX);
	if (p->in_off + p->in_len + len > p->in_cap) {
		if (p->in_off) {
			memmove(p->in_buf, p->in_buf + p->in_off, p->in_len);
			p->in_off = 0;
		}
		if (p->in_len + len > p->in_cap) {
			size_t cap = p->in_cap ? p->in_cap : 16384;
			while (cap < p->in_len + len)
				cap *= 2;
			uint8_t *nb = realloc(p->in_buf, cap);
			if (!nb)
				return sbx_err_sys(err, -ENOMEM, "stdin buffer");
			p->in_buf = nb;
			p->in_cap = cap;
		}
	}
	memcpy(p->in_buf + p->in_off + p->in_len, data, len);
	p->in_len += len;
	pump_stdin(p);
	return 0;
}

void agent_proc_close_stdin(agent_proc *p)
{
	p->in_eof = true;
	if (p->in_fd >= 0 && p->in_len == 0)
		close_in(p);
}

/* ---- lifecycle ---- */

pid_t agent_proc_pid(const agent_proc *p)
{
	return p->pid;
}

bool agent_proc_reaped(const agent_proc *p)
{
	return p->reaped;
}

agent_tree *agent_proc_tree(const agent_proc *p)
{
	return p->tree;
}

int agent_proc_signal(agent_proc *p, int sig, sbx_err *err)
{
	/* Once reaped, the group id may belong to someone else; before the
	 * start it is not known yet. */
	if (p->reaped)
		return 0;
	if (sig == SIGKILL)
		p->killed = true;
	if (p->pid == 0) {
		sigaddset(&p->pending, sig);
		return 0;
	}
	if (kill(-p->pid, sig) < 0 && errno != ESRCH)
		return sbx_err_sys(err, -errno, "signal %d to process group %d", sig, (int)p->pid);
	return 0;
}

int agent_proc_kill(agent_proc *p, sbx_err *err)
{
	p->killed = true;
	return agent_tree_kill(p->tree, err);
}

int agent_proc_resize(agent_proc *p, uint16_t cols, uint16_t rows, sbx_err *err)
{
	int fd = p->out[AGENT_PROC_STDOUT].fd >= 0 ? p->out[AGENT_PROC_STDOUT].fd : p->in_fd;

	if (!p->pty)
		return sbx_err_set(err, -ENOTTY, "process %d has no terminal", (int)p->pid);
	if (fd < 0)
		return sbx_err_set(err, -ENOTTY, "the terminal of process %d is closed", (int)p->pid);
	return agent_pty_resize(fd, cols, rows, err);
}

void agent_proc_detach(agent_proc *p)
{
	sbx_err err = { 0 };

	if (p->detached)
		return;
	p->detached = true;
	p->killed = true;
	if (!p->done && agent_tree_kill(p->tree, &err) < 0)
		agent_log_warn("%s", err.msg);
	close_out(p, AGENT_PROC_STDOUT);
	close_out(p, AGENT_PROC_STDERR);
	close_in(p);
	maybe_finish(p);
}

void agent_proc_signal_all(int sig)
{
	for (agent_proc *p = procs; p; p = p->next) {
		sbx_err err = { 0 };

		if (p->done)
			continue;
		if (sig == SIGKILL ? agent_proc_kill(p, &err) < 0 : agent_proc_signal(p, sig, &err) < 0)
			agent_log_warn("%s", err.msg);
	}
}

void agent_proc_detach_all(void)
{
	for (agent_proc *p = procs; p; p = p->next)
		agent_proc_detach(p);
}

void agent_proc_discard_all(void)
{
	for (agent_proc *p = procs, *next; p; p = next) {
		next = p->next;
		proc_free(p);
	}
}

size_t agent_proc_count(void)
{
	return nprocs;
}

/* A pipe whose parent end (the agent's) is non-blocking and the child's end
 * blocking: O_NONBLOCK belongs to the open file, so it cannot be set by
 * pipe2 for one end only. */
static int make_pipe(int fds[2], int parent_end, sbx_err *err)
{
	if (pipe2(fds, O_CLOEXEC) < 0)
		return sbx_err_sys(err, -errno, "pipe");
	if (fcntl(fds[parent_end], F_SETFL, O_NONBLOCK) < 0) {
		int ret = sbx_err_sys(err, -errno, "pipe: set non-blocking");
		close(fds[0]);
		close(fds[1]);
		return ret;
	}
	return 0;
}

static int open_devnull(sbx_err *err)
{
	if (devnull < 0) {
		devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
		if (devnull < 0)
			return sbx_err_sys(err, -errno, "open /dev/null");
	}
	return devnull;
}

/* The kernel's pipe-max-size (what an unprivileged F_SETPIPE_SZ may ask),
 * read once; 0 when unknown (the kernel then judges alone). */
static size_t pipe_max_size(void)
{
	static long max = -1;

	if (max < 0) {
		char buf[32] = "";
		int fd = open("/proc/sys/fs/pipe-max-size", O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;

		if (fd >= 0)
			close(fd);
		max = n > 0 ? strtol(buf, NULL, 10) : 0;
		if (max < 0)
			max = 0;
	}
	return (size_t)max;
}

/* Best effort: a larger stdout pipe, within the budget. The kernel refuses
 * (EPERM) past pipe-user-pages-soft; the default pipe then does. */
static void grow_pipe(proc_out *o, size_t want)
{
	size_t max = pipe_max_size();
	int got;

	if (max && want > max)
		want = max;
	if (want == 0 || want > INT_MAX || pipe_budget_used >= AGENT_PROC_PIPE_BUDGET ||
	    want > AGENT_PROC_PIPE_BUDGET - pipe_budget_used)
		return;
	got = fcntl(o->fd, F_SETPIPE_SZ, (int)want);
	if (got <= 0)
		return;
	o->grown = (size_t)got;
	pipe_budget_used += o->grown;
}

/* Pipes for stdout, stderr and (if asked) stdin; or one terminal. On
 * success the agent's ends are in p and the child's in *child (closed by
 * the caller after the fork). */
static int open_stdio(agent_proc *p, const agent_exec_spec *spec, agent_spawn_fds *child, int *child_fds,
		      sbx_err *err)
{
	int fds[2], ret;

	if (spec->pty) {
		int master, slave;

		ret = agent_pty_open(spec->cols, spec->rows, &master, &slave, err);
		if (ret < 0)
			return ret;
		p->pty = true;
		p->out[0].fd = master;
		child_fds[0] = slave;
		child->tty = slave;
		/* The write side apart, so that stdin eof closes only it. */
		p->in_fd = fcntl(master, F_DUPFD_CLOEXEC, 3);
		if (p->in_fd < 0)
			return sbx_err_sys(err, -errno, "pseudo-terminal: dup");
		return 0;
	}
	child->tty = -1;
	ret = make_pipe(fds, 0, err);
	if (ret < 0)
		return ret;
	p->out[0].fd = fds[0];
	child_fds[0] = child->out = fds[1];
	if (p->sink.pipe_size)
		grow_pipe(&p->out[0], p->sink.pipe_size);
	ret = make_pipe(fds, 0, err);
	if (ret < 0)
		return ret;
	p->out[1].fd = fds[0];
	child_fds[1] = child->err = fds[1];
	if (spec->stdin_pipe) {
		ret = make_pipe(fds, 1, err);
		if (ret < 0)
			return ret;
		child_fds[2] = child->in = fds[0];
		p->in_fd = fds[1];
	} else {
		child->in = open_devnull(err);
		if (child->in < 0)
			return child->in;
	}
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int agent_proc_start(struct event_base *base, const agent_exec_spec *spec,
		     const agent_proc_sink *sink, void *ud, agent_proc **out, sbx_err *err)
{
	int child_fds[3] = { -1, -1, -1 };
	agent_spawn_fds child = { .in = -1, .out = -1, .err = -1, .tty = -1 };
	static const agent_tree_cbs tree_cbs = { .started = started_cb, .exited = exit_cb };
	SBX_AUTO_FREE agent_proc *p = NULL;
	int ret;

	p = calloc(1, sizeof(*p));
	if (!p)
		return sbx_err_sys(err, -ENOMEM, "exec");
	p->base = base;
	p->sink = *sink;
	p->ud = ud;
	p->in_fd = -1;
	p->out[0].fd = p->out[1].fd = -1;
	sigemptyset(&p->pending);
	ret = open_stdio(p, spec, &child, child_fds, err);
	if (ret < 0)
		goto fail;
	for (int s = 0; s < 2; s++)
		if (p->out[s].fd >= 0 && !(p->out[s].ev = event_new(base, p->out[s].fd, EV_READ | EV_PERSIST, read_cb, p)))
			goto fail_oom;
	p->grace_ev = evtimer_new(base, grace_cb, p);
	p->free_ev = event_new(base, -1, 0, free_cb, p);
	if (spec->timeout_ms)
		p->timeout_ev = evtimer_new(base, timeout_cb, p);
	if (p->in_fd >= 0)
		p->in_ev = event_new(base, p->in_fd, EV_WRITE | EV_PERSIST, write_cb, p);
	if (!p->grace_ev || !p->free_ev || (spec->timeout_ms && !p->timeout_ev) || (p->in_fd >= 0 && !p->in_ev))
		goto fail_oom;

	p->start_ns = now_ns();
	p->oom_known = agent_oom_kills(&p->oom_at_start);
	ret = agent_spawn(base, spec, &child, &tree_cbs, p, &p->tree, err);
	for (int i = 0; i < 3; i++)
		close_fd(&child_fds[i]);
	if (ret < 0)
		goto fail;
	for (int s = 0; s < 2; s++)
		if (p->out[s].ev)
			event_add(p->out[s].ev, NULL);
	if (p->timeout_ev) {
		struct timeval tv = { (time_t)(spec->timeout_ms / 1000), (suseconds_t)(spec->timeout_ms % 1000) * 1000 };
		evtimer_add(p->timeout_ev, &tv);
	}
	list_add(p);
	*out = sbx_steal_ptr(&p);
	return 0;

fail_oom:
	ret = sbx_err_set(err, -ENOMEM, "exec: events");
fail:
	for (int i = 0; i < 3; i++)
		close_fd(&child_fds[i]);
	free_event(&p->grace_ev);
	free_event(&p->free_ev);
	free_event(&p->timeout_ev);
	free_event(&p->in_ev);
	close_out(p, AGENT_PROC_STDOUT);
	close_out(p, AGENT_PROC_STDERR);
	close_fd(&p->in_fd);
	return ret;
}
