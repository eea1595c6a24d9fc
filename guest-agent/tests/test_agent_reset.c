/* reset against the real agent binary as PID 1 of new namespaces: what a
 * tenant leaves (a command still streaming on another connection, a
 * background process, a nohup leftover, a double-forked setsid daemon, a
 * terminal session, an abstract unix socket listener, System V shared
 * memory, hidden files and folders in the folders to empty) is gone after
 * one reset, checked from the host's /proc and from a fresh command; bad
 * arguments are refused with the agent still serving; and a process the
 * agent cannot kill (frozen by the host's v1 freezer) makes the reset
 * answer timeout, after which a second reset succeeds once it is thawed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include <msgpack.h>

#include "sbx/proto.h"
#include "sbx/proto_reset.h"
#include "agent_fixture.h"
#include "test_util.h"

static tc_stream *reset(tc_client *c, const char *const *paths, size_t n, uint64_t timeout_ms)
{
	sbx_proto_reset_args a = { .npaths = n, .timeout_ms = timeout_ms };
	msgpack_sbuffer buf;
	msgpack_packer pk;
	sbx_err err = { 0 };

	for (size_t i = 0; i < n; i++)
		a.paths[i] = paths[i];
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	if (sbx_proto_reset_pack_args(&pk, &a, &err) < 0)
		fail_msg("%s", err.msg);
	tc_stream *s = tc_request(c, SBX_OP_RESET, buf.data, buf.size);
	msgpack_sbuffer_destroy(&buf);
	assert_non_null(s);
	assert_true(tc_wait(c, s, 20000));
	return s;
}

/* Entries of path but . and .. (-1: cannot open). */
static int entries(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

/* Does the namespace's /proc/net/unix (seen through the agent) list name? */
static bool unix_listed(pid_t agent, const char *name)
{
	char path[64], line[512];
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%d/net/unix", (int)agent);
	FILE *f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, name))
			found = true;
	fclose(f);
	return found;
}

static void leaves_nothing(void **state)
{
	fixture *fx = *state;
	tc_client *c0 = fx_client(fx, 0), *c1 = fx_client(fx, 1);
	char ws[128], shm[128], cmd[1024];

	snprintf(ws, sizeof(ws), "%s/ws", fx->ns.dir);
	snprintf(shm, sizeof(shm), "%s/shm", fx->ns.dir);
	assert_int_equal(chmod(fx->ns.dir, 0711), 0); /* the sandbox user reaches them */
	assert_int_equal(mkdir(ws, 0777), 0);
	assert_int_equal(mkdir(shm, 01777), 0);
	assert_int_equal(chmod(ws, 0777), 0);
	assert_int_equal(chmod(shm, 01777), 0);

	/* files, hidden ones and deep ones, a fifo, a symlink out */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && mkdir -p .cache/a/b sub && echo s > .hidden && echo x > .cache/a/b/.deep && "
		 "mkfifo sub/fifo && ln -s / sub/root && echo 'export LEAK=1' > .bashrc && "
		 "echo z > %s/segment",
		 ws, shm);
	assert_int_equal(fx_run_cmd(fx, cmd)->exit_code, 0);
	/* what keeps running: a nohup leftover, a double-forked setsid
	 * daemon, an abstract socket listener, a System V segment */
	assert_int_equal(fx_run_cmd(fx, "nohup sleep 901 >/dev/null 2>&1 &")->exit_code, 0);
	assert_int_equal(fx_run_cmd(fx, "(setsid sleep 902 </dev/null >/dev/null 2>&1 &) &")->exit_code, 0);
	assert_int_equal(fx_run_cmd(fx, "/usr/bin/python3 -c 'import socket,time; s=socket.socket(socket.AF_UNIX); "
					"s.bind(\"\\0sbx-reset-leak\"); s.listen(); time.sleep(903)' "
					"</dev/null >/dev/null 2>&1 &")->exit_code,
			 0);
	assert_int_equal(fx_run_cmd(fx, "ipcmk -M 4096 >/dev/null")->exit_code, 0);
	/* a background process, a command streaming on another connection, a
	 * terminal */
	tc_exec_opts bg = { .cmd = "sleep 904" };
	tc_stream *b = tc_proc_start(c0, &bg);
	assert_true(tc_wait(c0, b, FX_WAIT_MS));
	assert_false(b->failed);
	tc_exec_opts fg = { .cmd = "echo up; sleep 905" };
	tc_stream *open = tc_exec(c1, &fg);
	fx_wait_output(c1, open, "up");
	tc_exec_opts tty = { .cmd = "echo tty; sleep 906", .pty = true };
	tc_stream *t = tc_exec(c1, &tty);
	fx_wait_output(c1, t, "tty");
	fx_wait_procs(fx, "sleep 902", 1);
	fx_wait_procs(fx, "sleep 906", 1);
	uint64_t deadline = test_now_ms() + FX_WAIT_MS;
	while (!unix_listed(fx->ns.pid, "@sbx-reset-leak") && test_now_ms() < deadline)
		tc_run(fx->base, 20);
	assert_true(unix_listed(fx->ns.pid, "@sbx-reset-leak"));

	const char *paths[] = { ws, shm, "/nonexistent-folder" };
	tc_stream *r = reset(c0, paths, 3, 0);
	if (r->failed)
		fail_msg("reset: %s: %s", r->code, r->msg);
	uint64_t killed = 0, removed = 0, ipc = 0;
	assert_true(tc_result_uint(r, "killed", &killed));
	assert_true(tc_result_uint(r, "removed", &removed));
	assert_true(tc_result_uint(r, "ipc_removed", &ipc));
	assert_true(killed >= 6);
	assert_int_equal(removed, 10); /* .hidden .bashrc .cache a b .deep sub fifo root segment */
	assert_int_equal(ipc, 1);

	/* the other connection's streams ended as cancelled */
	assert_true(tc_wait(c1, NULL, FX_WAIT_MS));
	assert_true(open->failed);
	assert_string_equal(open->code, "cancelled");
	assert_true(t->failed);

	/* from the host: only the agent is left, the folders are empty and
	 * still there, no socket listens */
	fx_wait_no_zombies(fx, 1);
	assert_int_equal(entries(ws), 0);
	assert_int_equal(entries(shm), 0);
	assert_false(unix_listed(fx->ns.pid, "@sbx-reset-leak"));

	/* from a fresh command: no segment, no background process */
	tc_stream *ipcs = fx_run_cmd(fx, "ipcs -m | grep -c '^0x' || true");
	assert_string_equal(fx_str(ipcs->out), "0\n");
	tc_stream *list = tc_request(c0, SBX_OP_PROC_LIST, NULL, 0);
	assert_true(tc_wait(c0, list, FX_WAIT_MS));
	assert_false(list->failed);
	msgpack_unpacked u;
	assert_true(tc_result_unpack(list, &u));
	const msgpack_object *procs = sbx_proto_map_get(&u.data, "processes");
	assert_non_null(procs);
	assert_int_equal(procs->via.array.size, 0);
	msgpack_unpacked_destroy(&u);
}

static void bad_arguments(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	static const uint8_t root_only[] = { 0x81, 0xa5, 'p', 'a', 't', 'h', 's', 0x91, 0xa1, '/' };
	static const uint8_t not_array[] = { 0x81, 0xa5, 'p', 'a', 't', 'h', 's', 0xa4, '/', 't', 'm', 'p' };
	const struct {
		const uint8_t *p;
		size_t n;
	} bad[] = { { root_only, sizeof(root_only) }, { not_array, sizeof(not_array) }, { NULL, 0 } };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		tc_stream *s = tc_request(c, SBX_OP_RESET, bad[i].p, bad[i].n);
		assert_true(tc_wait(c, s, FX_WAIT_MS));
		assert_true(s->failed);
		assert_string_equal(s->code, "bad_request");
	}
	assert_int_equal(fx_run_cmd(fx, "true")->exit_code, 0);
}

/* The host pid of the only process whose command line is cmdline. */
static pid_t host_pid_of(const char *cmdline)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	pid_t found = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		char path[64], buf[256];
		int pid = atoi(de->d_name);
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/cmdline", pid);
		int fd = open(path, O_RDONLY);
		if (fd < 0)
			continue;
		ssize_t n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			continue;
		for (ssize_t i = 0; i < n - 1; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		buf[n] = '\0';
		if (strcmp(buf, cmdline) == 0)
			found = pid;
	}
	closedir(d);
	return found;
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY);
	if (fd < 0)
		return -errno;
	ssize_t n = write(fd, s, strlen(s));
	int e = n < 0 ? -errno : 0;
	close(fd);
	return e;
}

static void unkillable_times_out(void **state)
{
	fixture *fx = *state;
	tc_client *c = fx_client(fx, 0);
	char cg[128], procs[160], freeze[160], pid[24], ws[128];

	snprintf(cg, sizeof(cg), "/sys/fs/cgroup/freezer/sbx-test-reset-%d", (int)getpid());
	if (mkdir(cg, 0755) < 0 && errno != EEXIST) {
		/* the freezer is v1's; without it there is no way to hold a
		 * process from the host here */
		skip();
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", cg);
	snprintf(freeze, sizeof(freeze), "%s/freezer.state", cg);
	snprintf(ws, sizeof(ws), "%s", fx->ns.dir);
	/* A sleep of this test's own: the static agent's run of this test
	 * may go on beside it, and the host is searched by command line. */
	char cmd[64], sleeper[32];
	snprintf(sleeper, sizeof(sleeper), "sleep %d", 100000 + (int)getpid());
	snprintf(cmd, sizeof(cmd), "nohup %s >/dev/null 2>&1 &", sleeper);
	assert_int_equal(fx_run_cmd(fx, cmd)->exit_code, 0);
	fx_wait_procs(fx, sleeper, 1);
	pid_t p = host_pid_of(sleeper);
	assert_true(p > 0);
	snprintf(pid, sizeof(pid), "%d", (int)p);
	int rc = write_file(procs, pid);
	if (rc == 0)
		rc = write_file(freeze, "FROZEN");
	tc_stream *r = rc == 0 ? reset(c, (const char *[]){ ws }, 1, 300) : NULL;
	/* thaw and clean up before any assertion, so that nothing stays
	 * frozen or behind: thawed, its SIGKILL lands, the cgroup empties,
	 * and the next reset is clean */
	write_file(freeze, "THAWED");
	const char *none[] = { "/nonexistent-folder" };
	tc_stream *again = reset(c, none, 1, 0);
	for (int i = 0; i < 100 && rmdir(cg) < 0; i++)
		usleep(10000);
	assert_int_equal(access(cg, F_OK), -1);
	assert_int_equal(rc, 0);
	assert_true(r->failed);
	assert_string_equal(r->code, "timeout");
	assert_non_null(strstr(r->msg, "outlived SIGKILL"));
	if (again->failed)
		fail_msg("reset: %s: %s", again->code, again->msg);
	fx_wait_no_zombies(fx, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(leaves_nothing, fx_setup_container_caps, fx_teardown),
		cmocka_unit_test_setup_teardown(bad_arguments, fx_setup, fx_teardown),
		cmocka_unit_test_setup_teardown(unkillable_times_out, fx_setup, fx_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
