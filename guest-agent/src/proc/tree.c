#include "tree.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "children.h"
#include "log.h"
#include "tree_holder.h"

/* A holder asked to kill that is still there after this long is killed
 * itself (a root command may have stopped it); its tree then goes to the
 * agent, which sweeps it (sweep_escaped). */
#define KILL_DEADLINE_MS 1000
/* How often, and at most how many times, what escaped is swept again. */
#define ESCAPED_PAUSE_MS 5
#define ESCAPED_ROUNDS_MAX 400

struct agent_tree {
	agent_tree *prev, *next;   /* holders list, while the holder lives */
	unsigned refs;
	pid_t holder;              /* 0 once reaped */
	pid_t cmd;
	gid_t mark;                /* 0: held by a subreaper */
	int report_fd;             /* -1 once the holder closed it */
	struct event *report_ev;
	bool cmd_done;             /* exited had its call */
	bool stashed;              /* the end, held until the leaving holder is reaped */
	bool broken;               /* the holder was killed: its tree went to the agent */
	int stash_status;
	struct rusage stash_ru;
	agent_tree_cbs cbs;        /* zeroed when the owner leaves */
	void *ud;
	struct event_base *base;
	struct event *deadline;    /* armed by a kill, until the holder is reaped */
};

static agent_tree *holders;
static size_t nholders;
static struct event *escaped_ev;
static unsigned escaped_rounds;
static bool marking; /* trees are marked, not held by subreapers */
/* Marked trees whose holder was killed: swept by mark until none is left
 * (with subreapers, what escaped is every child of the agent but holders). */
#define ESCAPED_MARKS_MAX 64
static gid_t escaped_marks[ESCAPED_MARKS_MAX];
static size_t nescaped_marks;

static void list_add(agent_tree *t)
{
	t->next = holders;
	if (holders)
		holders->prev = t;
	holders = t;
	nholders++;
}

static void list_del(agent_tree *t)
{
	if (t->prev)
		t->prev->next = t->next;
	else
		holders = t->next;
	if (t->next)
		t->next->prev = t->prev;
	t->prev = t->next = NULL;
	nholders--;
}

static void close_report(agent_tree *t)
{
	if (t->report_ev) {
		event_free(t->report_ev);
		t->report_ev = NULL;
	}
	if (t->report_fd >= 0) {
		close(t->report_fd);
		t->report_fd = -1;
	}
}

static void deliver(agent_tree *t, int status, const struct rusage *ru)
{
	void (*fn)(pid_t, int, const struct rusage *, void *) = t->cbs.exited;

	if (t->cmd_done)
		return;
	t->cmd_done = true;
	memset(&t->cbs, 0, sizeof(t->cbs));
	if (fn)
		fn(t->cmd, status, ru, t->ud);
}

static void started(agent_tree *t, pid_t pid)
{
	if (t->cmd || t->cmd_done || pid <= 0)
		return;
	t->cmd = pid;
	if (t->cbs.started)
		t->cbs.started(pid, t->ud);
}

/* Read what the holder wrote (whole messages: each is written at once). */
static void drain_report(agent_tree *t)
{
	while (t->report_fd >= 0) {
		agent_tree_msg m;
		ssize_t n = read(t->report_fd, &m, sizeof(m));

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n != (ssize_t)sizeof(m)) {
			close_report(t); /* EOF: the holder is gone */
			return;
		}
		if (m.kind == AGENT_TREE_MSG_STARTED) {
			started(t, (pid_t)m.value);
		} else if (m.kind == AGENT_TREE_MSG_EXITED && (m.flags & AGENT_TREE_MSG_LAST) && t->holder > 0) {
			/* The end goes out once the holder is reaped too: then
			 * nothing of the command is left when it is answered. */
			t->stashed = true;
			t->stash_status = m.value;
			t->stash_ru = m.ru;
		} else if (m.kind == AGENT_TREE_MSG_EXITED) {
			deliver(t, m.value, &m.ru);
		}
	}
}

static void report_cb(evutil_socket_t fd, short what, void *ud)
{
	agent_tree *t = ud;

	agent_tree_ref(t);
	drain_report(t);
	agent_tree_unref(t);
}

static bool is_holder(pid_t pid, void *ud)
{
	for (agent_tree *t = holders; t; t = t->next)
		if (t->holder == pid)
			return true;
	return false;
}

/* A holder only ever leaves by _exit once its tree is empty. One that was
 * killed (by a root command, or by the agent past KILL_DEADLINE_MS) left
 * its tree to its nearest subreaper: the agent. The agent's only other
 * children are holders, so every child that is not one, and everything
 * below it, is what escaped: killed at once, then swept again (as a holder
 * sweeps) until nothing is left, so that killing its holder only ends a
 * command sooner. */
static size_t sweep_escaped_marks(void)
{
	size_t n = 0;

	for (size_t i = 0; i < nescaped_marks;) {
		size_t k = agent_tree_sweep_mark(escaped_marks[i], true);

		n += k;
		if (k == 0)
			escaped_marks[i] = escaped_marks[--nescaped_marks];
		else
			i++;
	}
	return n;
}

static void sweep_escaped(evutil_socket_t fd, short what, void *ud)
{
	struct timeval pause = { 0, ESCAPED_PAUSE_MS * 1000 };
	size_t n = marking ? sweep_escaped_marks() : agent_tree_sweep(getpid(), is_holder, NULL);

	if (n == 0 || !escaped_ev) {
		escaped_rounds = 0;
		return;
	}
	if (++escaped_rounds > ESCAPED_ROUNDS_MAX) {
		agent_log_warn("%zu processes of killed holders' trees are still there", n);
		escaped_rounds = 0;
		return;
	}
	evtimer_add(escaped_ev, &pause);
}

static void escaped_start(struct event_base *base, gid_t mark)
{
	bool listed = false;

	for (size_t i = 0; i < nescaped_marks; i++)
		listed = listed || escaped_marks[i] == mark;
	if (mark && !listed && nescaped_marks < ESCAPED_MARKS_MAX)
		escaped_marks[nescaped_marks++] = mark;
	else if (mark && !listed)
		/* No room to follow it: at least this round now. */
		agent_tree_sweep_mark(mark, true);
	if (!escaped_ev)
		escaped_ev = evtimer_new(base, sweep_escaped, NULL);
	escaped_rounds = 0;
	sweep_escaped(-1, 0, NULL);
}

/* The holder was reaped: its tree is over. If it died before reporting
 * the command (a root command killed it), the command is ended as killed. */
static void holder_exit(pid_t pid, int status, const struct rusage *ru, void *ud)
{
	agent_tree *t = ud;

	t->holder = 0;
	list_del(t);
	if (t->deadline)
		event_del(t->deadline);
	drain_report(t);
	close_report(t);
	if (t->stashed)
		deliver(t, t->stash_status, &t->stash_ru);
	if (WIFSIGNALED(status)) {
		agent_log_warn("the holder of %d was killed (signal %d)%s", (int)t->cmd, WTERMSIG(status),
			       t->cmd_done ? "" : " before its command");
		t->broken = true;
		escaped_start(t->base, t->mark);
	}
	if (!t->cmd_done) {
		struct rusage none;

		memset(&none, 0, sizeof(none));
		deliver(t, SIGKILL, &none); /* as WIFSIGNALED with SIGKILL */
	}
	agent_tree_unref(t);
}

static void kill_deadline(evutil_socket_t fd, short what, void *ud)
{
	agent_tree *t = ud;

	if (t->holder <= 0)
		return;
	agent_log_warn("the holder of %d did not end its tree within %d ms: killing it", (int)t->cmd,
		       KILL_DEADLINE_MS);
	if (kill(t->holder, SIGKILL) < 0 && errno != ESRCH)
		agent_log_warn("kill holder %d: %s", (int)t->holder, strerror(errno));
}

/* agent_tree_probe found no way to sweep a tree. */
static bool sweep_unavailable;
static unsigned next_mark;

/* Can a process other than init be a child subreaper here? */
static bool subreapers_work(void)
{
	int status = 0;
	pid_t pid = fork();

	if (pid == 0)
		_exit(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0 ? 0 : 1);
	if (pid < 0)
		return false;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
	}
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int agent_tree_probe(bool force_mark, const char **how)
{
	static char note[256];
	const char *sweep;
	int r = agent_tree_sweep_init(&sweep);

	sweep_unavailable = r < 0;
	marking = force_mark || !subreapers_work();
	snprintf(note, sizeof(note), "%s; children found through %s",
		 !marking ? "holders are subreapers"
		 : force_mark ? "marked by a supplementary group (forced)"
			      : "marked by a supplementary group (no PR_SET_CHILD_SUBREAPER here)",
		 sweep);
	*how = note;
	return r;
}

gid_t agent_tree_next_mark(void)
{
	if (!marking)
		return 0;
	/* Never the mark of a tree still held or still being swept; once the
	 * marks went round, none a process still has (what a command left
	 * lives on after its holder). */
	for (unsigned tries = 0; tries < AGENT_TREE_MARK_COUNT; tries++) {
		bool wrapped = next_mark >= AGENT_TREE_MARK_COUNT;
		gid_t g = (gid_t)(AGENT_TREE_MARK_BASE + next_mark++ % AGENT_TREE_MARK_COUNT);
		bool used = false;

		if (next_mark == 2 * AGENT_TREE_MARK_COUNT)
			next_mark = AGENT_TREE_MARK_COUNT;
		for (agent_tree *t = holders; t && !used; t = t->next)
			used = t->mark == g;
		for (size_t i = 0; i < nescaped_marks && !used; i++)
			used = escaped_marks[i] == g;
		if (!used && wrapped)
			used = agent_tree_sweep_mark(g, false) > 0;
		if (!used)
			return g;
	}
	return 0;
}

int agent_tree_spawn(struct event_base *base, const agent_tree_cmd *cmd, const agent_tree_cbs *cbs, void *ud,
		     agent_tree **out, sbx_err *err)
{
	int report[2], ret, saved;
	sigset_t all, old;
	agent_tree *t;
	pid_t h;

	if (sweep_unavailable)
		return sbx_err_set(err, -ENOSYS, "commands are refused: their process trees could not be "
				   "killed whole here (/proc cannot be read)");
	if (marking && !cmd->mark)
		return sbx_err_set(err, -EINVAL, "commands are refused: no mark left for a process tree");

	t = calloc(1, sizeof(*t));
	if (!t)
		return sbx_err_sys(err, -ENOMEM, "process tree");
	t->refs = 1;
	t->mark = cmd->mark;
	t->cbs = *cbs;
	t->ud = ud;
	t->base = base;
	if (pipe2(report, O_CLOEXEC | O_NONBLOCK) < 0) {
		free(t);
		return sbx_err_sys(err, -errno, "pipe for the command's holder");
	}
	t->report_fd = report[0];
	t->report_ev = event_new(base, t->report_fd, EV_READ | EV_PERSIST, report_cb, t);
	if (!t->report_ev) {
		close(report[1]);
		close_report(t);
		free(t);
		return sbx_err_set(err, -ENOMEM, "the command's holder: event");
	}
	/* The holder writes blocking (it has nothing else to do); the
	 * O_NONBLOCK of pipe2 is for the agent's end only. */
	if (fcntl(report[1], F_SETFL, 0) < 0) {
		ret = sbx_err_sys(err, -errno, "pipe for the command's holder");
		close(report[1]);
		close_report(t);
		free(t);
		return ret;
	}
	/* No handler of the agent may run in the holder or the command
	 * before they reset them (it would write into the agent's signal
	 * socket). */
	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, &old);
	h = fork();
	if (h == 0) {
		close(report[0]);
		agent_tree_holder_run(cmd, report[1]);
	}
	saved = errno;
	sigprocmask(SIG_SETMASK, &old, NULL);
	close(report[1]);
	if (h < 0) {
		close_report(t);
		free(t);
		return sbx_err_sys(err, -saved, "fork the command's holder");
	}
	t->holder = h;
	/* From here the reaper owns the holder's exit (and its reference). */
	ret = agent_children_add(h, holder_exit, t, err);
	if (ret < 0) {
		kill(h, SIGKILL);
		close_report(t);
		free(t);
		return ret; /* reaped as an orphan */
	}
	t->refs++;
	list_add(t);
	event_add(t->report_ev, NULL);
	*out = t;
	return 0;
}

agent_tree *agent_tree_ref(agent_tree *t)
{
	t->refs++;
	return t;
}

void agent_tree_forget_owner(agent_tree *t)
{
	if (!t)
		return;
	memset(&t->cbs, 0, sizeof(t->cbs));
	t->ud = NULL;
}

void agent_tree_unref(agent_tree *t)
{
	if (!t || --t->refs > 0)
		return;
	close_report(t);
	if (t->deadline)
		event_free(t->deadline);
	free(t);
}

int agent_tree_kill(agent_tree *t, sbx_err *err)
{
	struct timeval tv = { KILL_DEADLINE_MS / 1000, (KILL_DEADLINE_MS % 1000) * 1000 };

	if (t->holder <= 0) {
		/* A killed holder's tree was swept when it was reaped;
		 * again, for what may have been missed. A marked tree's
		 * holder leaves without waiting for what the command left:
		 * that is swept by the mark. */
		if (t->broken || t->mark)
			escaped_start(t->base, t->mark);
		return 0;
	}
	if (kill(t->holder, AGENT_TREE_SIG_KILL) < 0 && errno != ESRCH)
		return sbx_err_sys(err, -errno, "kill the tree of %d", (int)t->cmd);
	/* A stopped holder acts only once continued. */
	(void)kill(t->holder, SIGCONT);
	if (!t->deadline)
		t->deadline = evtimer_new(t->base, kill_deadline, t);
	if (t->deadline && !evtimer_pending(t->deadline, NULL))
		evtimer_add(t->deadline, &tv);
	return 0;
}

bool agent_tree_alive(const agent_tree *t)
{
	return t->holder > 0 || !t->cmd_done;
}

void agent_tree_kill_all(void)
{
	for (agent_tree *t = holders; t; t = t->next)
		if (kill(t->holder, AGENT_TREE_SIG_KILL) < 0 && errno != ESRCH)
			agent_log_warn("kill the tree of %d: %s", (int)t->cmd, strerror(errno));
}

size_t agent_tree_holders(void)
{
	return nholders;
}

void agent_tree_discard_all(void)
{
	while (holders) {
		agent_tree *t = holders;

		agent_children_forget(t->holder);
		t->holder = 0;
		memset(&t->cbs, 0, sizeof(t->cbs));
		list_del(t);
		close_report(t);
		if (t->deadline)
			event_del(t->deadline);
		agent_tree_unref(t);
	}
	if (escaped_ev) {
		event_free(escaped_ev);
		escaped_ev = NULL;
	}
}
