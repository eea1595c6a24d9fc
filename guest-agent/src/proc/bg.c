#include "bg.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "tree.h"

struct agent_bg {
	agent_bg *prev, *next; /* registry, newest first */
	pid_t pid;
	char *tag;
	char **argv;
	agent_proc *proc;      /* NULL once finished */
	agent_tree *tree;      /* kept past the end: leftovers can be killed */
	agent_ring *ring;
	agent_bg_state state;
	agent_proc_result result;
	uint64_t started_ms, ended_ms;
	bool pty, has_stdin, stdin_closed;
	agent_bg_watch *watchers;
	void (*stdin_done)(void *ud, size_t n);
	void *stdin_ud;
};

static agent_bg *all;
static size_t nall, nrunning, nexited;
static uint64_t ring_total;

static uint64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void free_strv(char **v)
{
	for (char **p = v; p && *p; p++)
		free(*p);
	free(v);
}

static char **dup_strv(char *const *v)
{
	size_t n = 0;
	char **out;

	while (v[n])
		n++;
	out = calloc(n + 1, sizeof(*out));
	for (size_t i = 0; out && i < n; i++) {
		out[i] = strdup(v[i]);
		if (!out[i]) {
			free_strv(out);
			return NULL;
		}
	}
	return out;
}

static void notify(agent_bg *b)
{
	for (agent_bg_watch *w = b->watchers, *next; w; w = next) {
		next = w->next;
		w->changed(w->ud);
	}
}

static void entry_free(agent_bg *b)
{
	agent_ring_free(b->ring);
	free_strv(b->argv);
	free(b->tag);
	agent_tree_unref(b->tree);
	free(b);
}

/* Out of the registry; its watchers hear of it last. Only exited ones. */
static void drop(agent_bg *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		all = b->next;
	if (b->next)
		b->next->prev = b->prev;
	nall--;
	nexited--;
	ring_total -= agent_ring_cap(b->ring);
	while (b->watchers) {
		agent_bg_watch *w = b->watchers;

		agent_bg_watch_del(b, w);
		w->gone(w->ud);
	}
	entry_free(b);
}

/* Keep the newest AGENT_BG_KEEP_EXITED exited ones. */
static void trim_exited(void)
{
	while (nexited > AGENT_BG_KEEP_EXITED) {
		agent_bg *oldest = NULL;

		for (agent_bg *b = all; b; b = b->next)
			if (b->state == AGENT_BG_EXITED)
				oldest = b;
		if (!oldest)
			return;
		drop(oldest);
	}
}

/* ---- the proc's sink ---- */

static void sink_started(void *ud, pid_t pid)
{
	agent_bg *b = ud;

	/* An exited one with this pid is history now: the pid means this. */
	for (agent_bg *e = all, *next; e; e = next) {
		next = e->next;
		if (e != b && e->pid == pid && e->state == AGENT_BG_EXITED)
			drop(e);
	}
	b->pid = pid;
	b->state = AGENT_BG_RUNNING;
	notify(b);
}

static size_t sink_room(void *ud, agent_proc_stream s)
{
	agent_bg *b = ud;

	return agent_ring_max_append(b->ring);
}

static void sink_output(void *ud, agent_proc_stream s, const void *data, size_t len)
{
	agent_bg *b = ud;

	if (agent_ring_append(b->ring, (int)s, data, len) < 0)
		agent_log_warn("background %d: out of memory, %zu bytes of output lost", (int)b->pid, len);
	notify(b);
}

static void sink_stdin_done(void *ud, size_t n)
{
	agent_bg *b = ud;

	if (b->stdin_done)
		b->stdin_done(b->stdin_ud, n);
}

static void sink_finished(void *ud, const agent_proc_result *r)
{
	agent_bg *b = ud;

	b->result = *r;
	b->proc = NULL;
	b->state = AGENT_BG_EXITED;
	b->ended_ms = wall_ms();
	nrunning--;
	nexited++;
	notify(b);
	/* Never started (the holder could not fork): nothing to address. */
	if (b->pid == 0)
		drop(b);
	else
		trim_exited();
}

static const agent_proc_sink bg_sink = {
	.started = sink_started,
	.room = sink_room,
	.output = sink_output,
	.stdin_done = sink_stdin_done,
	.finished = sink_finished,
};

/* ---- registry ---- */

int agent_bg_start(struct event_base *base, const agent_exec_spec *spec, const char *tag, size_t ring_cap,
		   agent_bg **out, sbx_err *err)
{
	agent_bg *b;
	int ret;

	if (nrunning >= AGENT_BG_MAX_RUNNING)
		return sbx_err_set(err, -EAGAIN, "at most %u background processes run at once", AGENT_BG_MAX_RUNNING);
	if (ring_total + ring_cap > AGENT_BG_MAX_RING_TOTAL)
		return sbx_err_set(err, -ENOSPC, "the output buffers of background processes would exceed %u MiB",
				   AGENT_BG_MAX_RING_TOTAL >> 20);
	b = calloc(1, sizeof(*b));
	if (!b)
		return sbx_err_sys(err, -ENOMEM, "background process");
	ret = agent_ring_new(ring_cap, &b->ring, err);
	if (ret < 0)
		goto fail;
	b->argv = dup_strv(spec->argv);
	b->tag = tag ? strdup(tag) : NULL;
	if (!b->argv || (tag && !b->tag)) {
		ret = sbx_err_sys(err, -ENOMEM, "background process");
		goto fail;
	}
	b->pty = spec->pty;
	b->has_stdin = spec->pty || spec->stdin_pipe;
	b->state = AGENT_BG_STARTING;
	b->started_ms = wall_ms();
	ret = agent_proc_start(base, spec, &bg_sink, b, &b->proc, err);
	if (ret < 0)
		goto fail;
	b->tree = agent_tree_ref(agent_proc_tree(b->proc));
	b->next = all;
	if (all)
		all->prev = b;
	all = b;
	nall++;
	nrunning++;
	ring_total += ring_cap;
	*out = b;
	return 0;
fail:
	entry_free(b);
	return ret;
}

agent_bg *agent_bg_find(pid_t pid)
{
	agent_bg *exited = NULL;

	if (pid <= 0)
		return NULL;
	for (agent_bg *b = all; b; b = b->next) {
		if (b->pid != pid)
			continue;
		if (b->state != AGENT_BG_EXITED)
			return b;
		if (!exited)
			exited = b;
	}
	return exited;
}

agent_bg *agent_bg_first(void)
{
	return all;
}

agent_bg *agent_bg_next(const agent_bg *b)
{
	return b->next;
}

pid_t agent_bg_pid(const agent_bg *b)
{
	return b->pid;
}

const char *agent_bg_tag(const agent_bg *b)
{
	return b->tag;
}

char *const *agent_bg_argv(const agent_bg *b)
{
	return b->argv;
}

agent_bg_state agent_bg_get_state(const agent_bg *b)
{
	return b->state;
}

const char *agent_bg_state_name(agent_bg_state s)
{
	switch (s) {
	case AGENT_BG_STARTING:
		return "starting";
	case AGENT_BG_RUNNING:
		return "running";
	default:
		return "exited";
	}
}

uint64_t agent_bg_started_ms(const agent_bg *b)
{
	return b->started_ms;
}

uint64_t agent_bg_ended_ms(const agent_bg *b)
{
	return b->ended_ms;
}

const agent_proc_result *agent_bg_result(const agent_bg *b)
{
	return &b->result;
}

bool agent_bg_has_pty(const agent_bg *b)
{
	return b->pty;
}

bool agent_bg_has_stdin(const agent_bg *b)
{
	return b->has_stdin;
}

const agent_ring *agent_bg_ring(const agent_bg *b)
{
	return b->ring;
}

void agent_bg_watch_add(agent_bg *b, agent_bg_watch *w)
{
	w->prev = NULL;
	w->next = b->watchers;
	if (b->watchers)
		b->watchers->prev = w;
	b->watchers = w;
}

void agent_bg_watch_del(agent_bg *b, agent_bg_watch *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else if (b->watchers == w)
		b->watchers = w->next;
	if (w->next)
		w->next->prev = w->prev;
	w->prev = w->next = NULL;
}

static int not_running(const agent_bg *b, sbx_err *err)
{
	return sbx_err_set(err, -ESRCH, "background process %d has exited", (int)b->pid);
}

int agent_bg_signal(agent_bg *b, int sig, sbx_err *err)
{
	if (!b->proc)
		return not_running(b, err);
	return agent_proc_signal(b->proc, sig, err);
}

int agent_bg_kill(agent_bg *b, sbx_err *err)
{
	return agent_tree_kill(b->tree, err);
}

int agent_bg_resize(agent_bg *b, uint16_t cols, uint16_t rows, sbx_err *err)
{
	if (!b->proc)
		return not_running(b, err);
	return agent_proc_resize(b->proc, cols, rows, err);
}

int agent_bg_stdin_claim(agent_bg *b, void (*done)(void *ud, size_t n), void *ud, sbx_err *err)
{
	if (!b->proc)
		return not_running(b, err);
	if (!b->has_stdin)
		return sbx_err_set(err, -EPIPE, "background process %d was started without stdin", (int)b->pid);
	if (b->stdin_closed)
		return sbx_err_set(err, -EPIPE, "the stdin of background process %d is closed", (int)b->pid);
	if (b->stdin_done)
		return sbx_err_set(err, -EBUSY, "another proc.stdin is writing to background process %d", (int)b->pid);
	b->stdin_done = done;
	b->stdin_ud = ud;
	return 0;
}

void agent_bg_stdin_release(agent_bg *b, void *ud)
{
	if (b->stdin_ud != ud)
		return;
	b->stdin_done = NULL;
	b->stdin_ud = NULL;
}

int agent_bg_stdin_write(agent_bg *b, const void *data, size_t len, sbx_err *err)
{
	if (!b->proc)
		return not_running(b, err);
	if (b->stdin_closed)
		return sbx_err_set(err, -EPIPE, "the stdin of background process %d is closed", (int)b->pid);
	return agent_proc_write_stdin(b->proc, data, len, err);
}

void agent_bg_stdin_close(agent_bg *b)
{
	b->stdin_closed = true;
	if (b->proc)
		agent_proc_close_stdin(b->proc);
}

size_t agent_bg_count(void)
{
	return nall;
}

int agent_bg_forget_all(void)
{
	if (nrunning)
		return -EBUSY;
	while (all)
		drop(all);
	return 0;
}

void agent_bg_discard_all(void)
{
	while (all) {
		agent_bg *b = all;

		all = b->next;
		entry_free(b);
	}
	nall = nrunning = nexited = 0;
	ring_total = 0;
}
