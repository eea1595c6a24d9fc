/* proc.c + spawn.c + pid1.c reaping, in-process on a real event loop with
 * real commands: output, exit status, exec failures, timeout, stdin,
 * backpressure, pipes held by background processes, detach, terminals.
 * Commands run under their tree's holder (tree.c) and in the jail as the
 * sandbox user, as in the agent; whole-tree kills are tested with the real
 * agent (test_agent_exec.c). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include <event2/event.h>

#include "agent_seccomp.h"
#include "children.h"
#include "env.h"
#include "pid1.h"
#include "proc.h"
#include "test_util.h"
#include "tree.h"

#define OUT_MAX (4u << 20)

typedef struct tsink {
	struct event_base *base;
	char *out[2];
	size_t len[2];
	size_t room;          /* bytes the sink still takes; 0 pauses */
	size_t stdin_done;
	bool finished;
	agent_proc_result r;
	agent_proc *proc;
	pid_t pid;            /* from started() */
} tsink;

static struct event_base *base;
static char tmpdir[64];
/* Buffers of sinks a failed test did not free; teardown frees them. */
static char *live[8];

static void live_put(char *p)
{
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++) {
		if (!live[i]) {
			live[i] = p;
			return;
		}
	}
	fail_msg("too many live test buffers");
}

static void live_free(char *p)
{
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (live[i] == p)
			live[i] = NULL;
	free(p);
}

static size_t s_room(void *ud, agent_proc_stream s)
{
	tsink *t = ud;
	size_t left = OUT_MAX - t->len[s];

	return t->room < left ? t->room : left;
}

static void s_output(void *ud, agent_proc_stream s, const void *data, size_t len)
{
	tsink *t = ud;

	assert_true(len <= OUT_MAX - t->len[s]);
	assert_true(len <= t->room);
	memcpy(t->out[s] + t->len[s], data, len);
	t->len[s] += len;
	if (t->room != SIZE_MAX)
		t->room -= len;
}

static void s_stdin_done(void *ud, size_t n)
{
	((tsink *)ud)->stdin_done += n;
}

static void s_finished(void *ud, const agent_proc_result *r)
{
	tsink *t = ud;

	t->finished = true;
	t->r = *r;
	t->proc = NULL;
}

static void s_started(void *ud, pid_t pid)
{
	((tsink *)ud)->pid = pid;
}

static const agent_proc_sink sink = {
	.started = s_started,
	.room = s_room,
	.output = s_output,
	.stdin_done = s_stdin_done,
	.finished = s_finished,
};

static char *clean_env[] = { "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", NULL };

static void nop(void *ud) {}
static void nop_sig(int sig, void *ud) {}
static bool never_idle(void *ud) { return false; }

static int setup(void **state)
{
	static const agent_pid1_hooks hooks = { nop, nop_sig, nop, never_idle, nop };
	sbx_err err = { 0 };

	base = event_base_new();
	if (!base || agent_pid1_setup(base, NULL, &hooks, NULL, &err) < 0)
		return -1;
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/agent-proc-XXXXXX");
	if (!mkdtemp(tmpdir) || chmod(tmpdir, 0755) < 0)
		return -1;
	/* A container's environment, not the runner's (whose PATH may name
	 * folders the sandbox user cannot search). */
	return agent_env_init(clean_env, &err);
}

/* Whatever a failed test left running is killed and reaped. */
static int teardown(void **state)
{
	uint64_t deadline = test_now_ms() + 5000;

	/* Detached: no sink call may reach a failed test's stack. Lingering
	 * leftovers (a holder with orphans) are killed too. */
	agent_proc_detach_all();
	agent_tree_kill_all();
	while ((agent_proc_count() > 0 || agent_tree_holders() > 0) && test_now_ms() < deadline)
		event_base_loop(base, EVLOOP_ONCE);
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		live_free(live[i]);
	agent_pid1_teardown();
	event_base_free(base);
	agent_env_free();
	agent_seccomp_cache_clear();
	test_rm_rf(tmpdir);
	return agent_proc_count() == 0 && agent_tree_holders() == 0 ? 0 : -1;
}

static void tsink_free(tsink *t)
{
	live_free(t->out[0]);
	live_free(t->out[1]);
	t->out[0] = t->out[1] = NULL;
}

static void tsink_init(tsink *t)
{
	memset(t, 0, sizeof(*t));
	t->out[0] = malloc(OUT_MAX);
	t->out[1] = malloc(OUT_MAX);
	t->room = SIZE_MAX;
	assert_non_null(t->out[0]);
	assert_non_null(t->out[1]);
	live_put(t->out[0]);
	live_put(t->out[1]);
}

static void run_until(bool *flag, unsigned ms)
{
	uint64_t deadline = test_now_ms() + ms;
	struct timeval tick = { 0, 10000 };

	while (!*flag && test_now_ms() < deadline) {
		event_base_loopexit(base, &tick);
		event_base_loop(base, EVLOOP_ONCE);
	}
}

static void run_for(unsigned ms)
{
	bool never = false;

	run_until(&never, ms);
}

/* Start argv (NULL-terminated) with the default environment. */
static void start(tsink *t, char **argv, const char *cwd, uint64_t timeout_ms, bool stdin_pipe)
{
	agent_exec_spec spec = { 0 };
	sbx_err err = { 0 };

	spec.argv = argv;
	spec.envp = (char **)agent_env_base();
	for (char **e = spec.envp; *e; e++)
		if (strncmp(*e, "PATH=", 5) == 0)
			spec.path = *e + 5;
	spec.cwd = (char *)cwd;
	spec.timeout_ms = timeout_ms;
	spec.stdin_pipe = stdin_pipe;
	if (agent_proc_start(base, &spec, &sink, t, &t->proc, &err) < 0)
		fail_msg("start: %s", err.msg);
}

static void sh(tsink *t, const char *cmd, uint64_t timeout_ms)
{
	char *argv[] = { "/bin/sh", "-c", (char *)cmd, NULL };

	start(t, argv, NULL, timeout_ms, false);
}

static void out_is(tsink *t, agent_proc_stream s, const char *want)
{
	if (t->len[s] != strlen(want) || memcmp(t->out[s], want, t->len[s]) != 0)
		fail_msg("%s is \"%.*s\", want \"%s\"", s ? "stderr" : "stdout", (int)t->len[s], t->out[s], want);
}

static void echo_both_streams(void **state)
{
	tsink t;

	tsink_init(&t);
	sh(&t, "echo out; echo err >&2; exit 3", 0);
	run_until(&t.finished, 5000);
	assert_true(t.finished);
	out_is(&t, AGENT_PROC_STDOUT, "out\n");
	out_is(&t, AGENT_PROC_STDERR, "err\n");
	assert_true(WIFEXITED(t.r.status));
	assert_int_equal(WEXITSTATUS(t.r.status), 3);
	assert_false(t.r.timed_out);
	assert_true(t.r.duration_us > 0);
	tsink_free(&t);
}

static void path_lookup_and_killed_by_signal(void **state)
{
	char *argv[] = { "sh", "-c", "kill -9 $$", NULL };
	tsink t;

	tsink_init(&t);
	start(&t, argv, NULL, 0, false);
	run_until(&t.finished, 5000);
	assert_true(t.finished);
	assert_true(WIFSIGNALED(t.r.status));
	assert_int_equal(WTERMSIG(t.r.status), SIGKILL);
	tsink_free(&t);
}

static void cwd_is_used(void **state)
{
	char *argv[] = { "pwd", NULL };
	char want[128];
	tsink t;

	tsink_init(&t);
	start(&t, argv, tmpdir, 0, false);
	run_until(&t.finished, 5000);
	snprintf(want, sizeof(want), "%s\n", tmpdir);
	out_is(&t, AGENT_PROC_STDOUT, want);
	tsink_free(&t);
}

static void exec_failures(void **state)
{
	char noexec[128], garbage[128], missing_cwd[128];
	char *argv_missing[] = { "no-such-program-sbx", NULL };
	char *argv_noexec[] = { noexec, NULL };
	char *argv_garbage[] = { garbage, NULL };
	char *argv_true[] = { "true", NULL };
	const struct {
		char **argv;
		const char *cwd;
		int code;
		const char *msg;
	} cases[] = {
		{ argv_missing, NULL, 127, "sandbox-agent: exec no-such-program-sbx: No such file or directory\n" },
		{ argv_noexec, NULL, 126, "Permission denied\n" },
		{ argv_garbage, NULL, 126, "Exec format error\n" },
		{ argv_true, missing_cwd, 126, "No such file or directory\n" },
	};
	int fd;

	snprintf(noexec, sizeof(noexec), "%s/noexec", tmpdir);
	snprintf(garbage, sizeof(garbage), "%s/garbage", tmpdir);
	snprintf(missing_cwd, sizeof(missing_cwd), "%s/missing", tmpdir);
	fd = open(noexec, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	fd = open(garbage, O_CREAT | O_WRONLY | O_CLOEXEC, 0755);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "\x01\x02\x03\x04garbage", 11), 11);
	close(fd);

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tsink t;
		tsink_init(&t);
		start(&t, cases[i].argv, cases[i].cwd, 0, false);
		run_until(&t.finished, 5000);
		assert_true(t.finished);
		if (!WIFEXITED(t.r.status) || WEXITSTATUS(t.r.status) != cases[i].code)
			fail_msg("case %zu: status 0x%x, want exit %d", i, t.r.status, cases[i].code);
		t.out[1][t.len[1] < OUT_MAX ? t.len[1] : OUT_MAX - 1] = '\0';
		if (strncmp(t.out[1], "sandbox-agent: ", 15) != 0 || !strstr(t.out[1], cases[i].msg))
			fail_msg("case %zu: stderr \"%s\", want \"%s\"", i, t.out[1], cases[i].msg);
		assert_int_equal(t.len[0], 0);
		tsink_free(&t);
	}
}

static void timeout_kills_group(void **state)
{
	tsink t;
	uint64_t t0 = test_now_ms();

	tsink_init(&t);
	/* The sleep is a child of sh in the same group: both must die. */
	sh(&t, "sleep 30; echo not reached", 200);
	run_until(&t.finished, 5000);
	assert_true(t.finished);
	assert_true(t.r.timed_out);
	assert_true(WIFSIGNALED(t.r.status));
	assert_int_equal(WTERMSIG(t.r.status), SIGKILL);
	assert_true(test_now_ms() - t0 < 3000);
	assert_int_equal(t.len[0], 0);
	tsink_free(&t);
}

static void stdin_round_trip(void **state)
{
	char *argv[] = { "cat", NULL };
	size_t n = 1u << 20;
	char *in = malloc(n);
	sbx_err err = { 0 };
	tsink t;

	assert_non_null(in);
	for (size_t i = 0; i < n; i++)
		in[i] = (char)('a' + i % 26);
	tsink_init(&t);
	start(&t, argv, NULL, 0, true);
	/* Larger than a pipe: part of it waits in the bounded buffer. */
	assert_int_equal(agent_proc_write_stdin(t.proc, in, n / 2, &err), 0);
	assert_int_equal(agent_proc_write_stdin(t.proc, in + n / 2, n - n / 2, &err), 0);
	agent_proc_close_stdin(t.proc);
	run_until(&t.finished, 10000);
	assert_true(t.finished);
	assert_int_equal(t.len[0], n);
	assert_memory_equal(t.out[0], in, n);
	assert_int_equal(t.stdin_done, n);
	assert_int_equal(WEXITSTATUS(t.r.status), 0);
	free(in);
	tsink_free(&t);
}

static void stdin_after_reader_left(void **state)
{
	sbx_err err = { 0 };
	char *argv[] = { "sh", "-c", "exec 0<&-; sleep 0.2", NULL };
	tsink t;

	/* The command closed its stdin: bytes sent later are dropped, but
	 * accounted, so the requester's credit comes back. */
	tsink_init(&t);
	start(&t, argv, NULL, 0, true);
	run_for(50);
	assert_int_equal(agent_proc_write_stdin(t.proc, "abc", 3, &err), 0);
	run_until(&t.finished, 5000);
	assert_true(t.finished);
	assert_int_equal(t.stdin_done, 3);
	tsink_free(&t);
}

static void backpressure_blocks_the_writer(void **state)
{
	tsink t;

	tsink_init(&t);
	t.room = 0;
	sh(&t, "head -c 3000000 /dev/zero", 0);
	run_for(400);
	/* Nothing read, the writer is blocked on a full pipe. */
	assert_false(t.finished);
	assert_int_equal(t.len[0], 0);
	t.room = 1000;
	agent_proc_resume(t.proc, AGENT_PROC_STDOUT);
	run_for(100);
	assert_false(t.finished);
	t.room = SIZE_MAX;
	agent_proc_resume(t.proc, AGENT_PROC_STDOUT);
	run_until(&t.finished, 10000);
	assert_true(t.finished);
	assert_int_equal(t.len[0], 3000000);
	tsink_free(&t);
}

/* A sink that reads into its own buffer (the buffer hook, as the exec
 * stream does) and asks for a large stdout pipe. */
#define BIG_OUT 900000u
#define BIG_CMDS ((AGENT_PROC_PIPE_BUDGET >> 20) + 1)

typedef struct bsink {
	size_t room[2];
	size_t got[2];
	size_t bad;           /* bytes not from the pattern, or not in our buffer */
	bool finished;
	agent_proc *proc;
} bsink;

static uint8_t bsink_buf[1u << 20];

static size_t b_room(void *ud, agent_proc_stream s)
{
	size_t room = ((bsink *)ud)->room[s];

	return room < sizeof(bsink_buf) ? room : sizeof(bsink_buf);
}

static void *b_buffer(void *ud, agent_proc_stream s, size_t len)
{
	assert_true(len <= b_room(ud, s));
	return bsink_buf;
}

static void b_output(void *ud, agent_proc_stream s, const void *data, size_t len)
{
	bsink *b = ud;

	if (data != (const void *)bsink_buf)
		b->bad += len;
	/* stdout is "abcdefg\n" over and over */
	for (size_t i = 0; s == AGENT_PROC_STDOUT && i < len; i++)
		if (((const uint8_t *)data)[i] != (uint8_t)"abcdefg\n"[(b->got[s] + i) % 8])
			b->bad++;
	b->got[s] += len;
}

static void b_finished(void *ud, const agent_proc_result *r)
{
	((bsink *)ud)->finished = true;
	((bsink *)ud)->proc = NULL;
}

static void b_stdin_done(void *ud, size_t n) {}

static const agent_proc_sink big_sink = {
	.room = b_room,
	.buffer = b_buffer,
	.output = b_output,
	.stdin_done = b_stdin_done,
	.finished = b_finished,
	.pipe_size = 1u << 20,
};

/* With stdout paused, a command with a grown pipe writes all of BIG_OUT
 * and goes on (says so on stderr); the budget grows only so many pipes,
 * the next command blocks in a default one. Then everything arrives
 * through the owner's buffer. */
static void pipe_size_within_budget(void **state)
{
	static bsink b[BIG_CMDS];
	char cmd[96];
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	agent_exec_spec spec = { 0 };
	sbx_err err = { 0 };
	uint64_t deadline;
	size_t passed;

	snprintf(cmd, sizeof(cmd), "yes abcdefg | head -c %u; echo done >&2", BIG_OUT);
	spec.argv = argv;
	spec.envp = (char **)agent_env_base();
	for (size_t i = 0; i < BIG_CMDS; i++) {
		memset(&b[i], 0, sizeof(b[i]));
		b[i].room[AGENT_PROC_STDERR] = SIZE_MAX;
		if (agent_proc_start(base, &spec, &big_sink, &b[i], &b[i].proc, &err) < 0)
			fail_msg("start: %s", err.msg);
	}
	deadline = test_now_ms() + 10000;
	do {
		run_for(50);
		passed = 0;
		for (size_t i = 0; i < BIG_CMDS; i++)
			passed += b[i].got[AGENT_PROC_STDERR] > 0;
	} while (passed < BIG_CMDS - 1 && test_now_ms() < deadline);
	run_for(300);
	for (size_t i = 0; i < BIG_CMDS; i++) {
		assert_int_equal(b[i].got[AGENT_PROC_STDOUT], 0);
		/* the first ones had the budget */
		assert_int_equal(b[i].got[AGENT_PROC_STDERR], i < BIG_CMDS - 1 ? 5 : 0);
		b[i].room[AGENT_PROC_STDOUT] = SIZE_MAX;
		agent_proc_resume(b[i].proc, AGENT_PROC_STDOUT);
	}
	deadline = test_now_ms() + 10000;
	for (size_t i = 0; i < BIG_CMDS; i++) {
		while (!b[i].finished && test_now_ms() < deadline)
			run_for(20);
		assert_true(b[i].finished);
		assert_int_equal(b[i].got[AGENT_PROC_STDOUT], BIG_OUT);
		assert_int_equal(b[i].got[AGENT_PROC_STDERR], 5);
		assert_int_equal(b[i].bad, 0);
	}
}

static void background_holder_does_not_block_end(void **state)
{
	tsink t;
	uint64_t t0 = test_now_ms();
	long bg;

	tsink_init(&t);
	/* setsid: the holder is outside the command's group as well. */
	sh(&t, "setsid sleep 30 & echo $!; echo done", 0);
	run_until(&t.finished, 5000);
	assert_true(t.finished);
	assert_true(test_now_ms() - t0 < 2000);
	assert_int_equal(WEXITSTATUS(t.r.status), 0);
	t.out[0][t.len[0]] = '\0';
	assert_non_null(strstr(t.out[0], "done\n"));
	bg = strtol(t.out[0], NULL, 10);
	assert_true(bg > 1);
	kill((pid_t)bg, SIGKILL);
	tsink_free(&t);
}

static void detach_kills_and_reaps(void **state)
{
	tsink t;
	pid_t pid;
	uint64_t deadline = test_now_ms() + 5000;

	tsink_init(&t);
	sh(&t, "sleep 30", 0);
	/* The start is asynchronous: the pid comes from the holder. */
	assert_int_equal(agent_proc_pid(t.proc), 0);
	while (t.pid == 0 && test_now_ms() < deadline)
		run_for(5);
	pid = agent_proc_pid(t.proc);
	assert_true(pid > 1);
	assert_int_equal(pid, t.pid);
	assert_int_equal(kill(pid, 0), 0);
	assert_int_equal(agent_proc_count(), 1);
	agent_proc_detach(t.proc);
	while ((agent_proc_count() > 0 || agent_tree_holders() > 0) && test_now_ms() < deadline)
		run_for(10);
	assert_int_equal(agent_proc_count(), 0);
	assert_int_equal(agent_tree_holders(), 0);
	assert_int_equal(agent_children_count(), 0);
	assert_false(t.finished); /* no sink call after detach */
	assert_int_equal(kill(pid, 0), -1);
	tsink_free(&t);
}

static void signal_reaches_group(void **state)
{
	sbx_err err = { 0 };
	tsink t;

	tsink_init(&t);
	sh(&t, "sleep 30", 0);
	run_for(50);
	assert_int_equal(agent_proc_signal(t.proc, SIGTERM, &err), 0);
	run_until(&t.finished, 5000);
	assert_true(t.finished);
	/* sh may exec sleep or wait for it: either way SIGTERM ended it. */
	assert_true(WIFSIGNALED(t.r.status));
	assert_int_equal(WTERMSIG(t.r.status), SIGTERM);
	tsink_free(&t);
}

static void orphans_are_reaped(void **state)
{
	tsink t;
	char path[160], buf[64];
	long orphan;
	uint64_t deadline;

	tsink_init(&t);
	/* The grandchild outlives sh, is reparented to us (subreaper) and
	 * must be reaped without an owner. */
	sh(&t, "sleep 0.2 >/dev/null 2>&1 & echo $!", 0);
	run_until(&t.finished, 5000);
	assert_true(t.finished);
	orphan = strtol(t.out[0], NULL, 10);
	assert_true(orphan > 1);
	snprintf(path, sizeof(path), "/proc/%ld/stat", orphan);
	deadline = test_now_ms() + 5000;
	for (;;) {
		FILE *f = fopen(path, "re");
		if (!f)
			break; /* reaped */
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		if (test_now_ms() > deadline)
			fail_msg("orphan %ld not reaped: %s", orphan, buf);
		run_for(20);
	}
	tsink_free(&t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(echo_both_streams, setup, teardown),
		cmocka_unit_test_setup_teardown(path_lookup_and_killed_by_signal, setup, teardown),
		cmocka_unit_test_setup_teardown(cwd_is_used, setup, teardown),
		cmocka_unit_test_setup_teardown(exec_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(timeout_kills_group, setup, teardown),
		cmocka_unit_test_setup_teardown(stdin_round_trip, setup, teardown),
		cmocka_unit_test_setup_teardown(stdin_after_reader_left, setup, teardown),
		cmocka_unit_test_setup_teardown(backpressure_blocks_the_writer, setup, teardown),
		cmocka_unit_test_setup_teardown(pipe_size_within_budget, setup, teardown),
		cmocka_unit_test_setup_teardown(background_holder_does_not_block_end, setup, teardown),
		cmocka_unit_test_setup_teardown(detach_kills_and_reaps, setup, teardown),
		cmocka_unit_test_setup_teardown(signal_reaches_group, setup, teardown),
		cmocka_unit_test_setup_teardown(orphans_are_reaped, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
