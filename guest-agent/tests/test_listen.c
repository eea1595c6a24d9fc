/* listen.c: --listen parsing, socket addresses, unix and vsock sockets. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/vm_sockets.h>
#include <cmocka.h>

#include <event2/event.h>

#include "listen.h"
#include "test_util.h"

static void parse_unix(void **state)
{
	agent_listen_addr a;
	sbx_err err = { 0 };
	char buf[160];

	assert_int_equal(agent_listen_parse("unix:/run/sandbox/agent.sock", &a, &err), 0);
	assert_int_equal(a.kind, AGENT_LISTEN_UNIX);
	assert_string_equal(a.path, "/run/sandbox/agent.sock");
	assert_string_equal(agent_listen_format(&a, buf, sizeof(buf)), "unix:/run/sandbox/agent.sock");
}

static void parse_vsock(void **state)
{
	agent_listen_addr a;
	sbx_err err = { 0 };
	char buf[160];

	assert_int_equal(agent_listen_parse("vsock:1024", &a, &err), 0);
	assert_int_equal(a.kind, AGENT_LISTEN_VSOCK);
	assert_int_equal(a.port, 1024);
	assert_string_equal(agent_listen_format(&a, buf, sizeof(buf)), "vsock:1024");
	assert_int_equal(agent_listen_parse("vsock:4294967294", &a, &err), 0);
	assert_int_equal(a.port, 4294967294u);
}

static void parse_bad(void **state)
{
	static const struct {
		const char *spec, *msg;
	} cases[] = {
		{ "", "expected unix:<path> or vsock:<port>" },
		{ "tcp:127.0.0.1:1", "expected unix:<path> or vsock:<port>" },
		{ "unix:", "empty unix socket path" },
		{ "vsock:", "must be a number" },
		{ "vsock:12x", "must be a number" },
		{ "vsock:-1", "must be a number" },
		{ "vsock: 5", "must be a number" },
		{ "vsock:0", "out of range" },
		{ "vsock:4294967295", "out of range" },
		{ "vsock:99999999999999999999", "must be a number" },
	};
	char longpath[200];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		agent_listen_addr a;
		sbx_err err = { 0 };
		assert_int_equal(agent_listen_parse(cases[i].spec, &a, &err), -EINVAL);
		assert_int_equal(err.code, -EINVAL);
		if (!strstr(err.msg, cases[i].msg))
			fail_msg("spec \"%s\": message \"%s\" lacks \"%s\"", cases[i].spec, err.msg, cases[i].msg);
	}
	memset(longpath, 'a', sizeof(longpath));
	memcpy(longpath, "unix:/", 6);
	longpath[sizeof(longpath) - 1] = '\0';
	{
		agent_listen_addr a;
		sbx_err err = { 0 };
		assert_int_equal(agent_listen_parse(longpath, &a, &err), -EINVAL);
		assert_non_null(strstr(err.msg, "longer than 107 bytes"));
	}
}

static void sockaddr_vsock(void **state)
{
	agent_listen_addr a;
	sbx_err err = { 0 };
	struct sockaddr_storage ss;
	socklen_t len;
	const struct sockaddr_vm *vm = (const struct sockaddr_vm *)&ss;

	assert_int_equal(agent_listen_parse("vsock:1024", &a, &err), 0);
	assert_int_equal(agent_listen_sockaddr(&a, &ss, &len, &err), 0);
	assert_int_equal(len, sizeof(struct sockaddr_vm));
	assert_int_equal(vm->svm_family, AF_VSOCK);
	assert_int_equal(vm->svm_cid, VMADDR_CID_ANY);
	assert_int_equal(vm->svm_port, 1024);
}

static void sockaddr_unix(void **state)
{
	agent_listen_addr a;
	sbx_err err = { 0 };
	struct sockaddr_storage ss;
	socklen_t len;
	const struct sockaddr_un *un = (const struct sockaddr_un *)&ss;

	assert_int_equal(agent_listen_parse("unix:/a/b.sock", &a, &err), 0);
	assert_int_equal(agent_listen_sockaddr(&a, &ss, &len, &err), 0);
	assert_int_equal(un->sun_family, AF_UNIX);
	assert_string_equal(un->sun_path, "/a/b.sock");
	assert_int_equal(len, offsetof(struct sockaddr_un, sun_path) + strlen("/a/b.sock") + 1);
}

/* A fixture per test: a temporary folder removed even when the test fails. */
static int tmpdir_setup(void **state)
{
	char *dir = strdup("/tmp/agent-listen-XXXXXX");

	if (!dir || !mkdtemp(dir)) {
		free(dir);
		return -1;
	}
	*state = dir;
	return 0;
}

static int tmpdir_teardown(void **state)
{
	test_rm_rf(*state);
	free(*state);
	return 0;
}

static void unix_socket_created(void **state)
{
	const char *dir = *state;
	char spec[300], path[256];
	agent_listen_addr a;
	sbx_err err = { 0 };
	struct stat st;
	int fd, cfd;

	/* Parent folders are created when missing. */
	snprintf(path, sizeof(path), "%s/run/sandbox/agent.sock", dir);
	snprintf(spec, sizeof(spec), "unix:%s", path);
	assert_int_equal(agent_listen_parse(spec, &a, &err), 0);
	fd = agent_listen_socket(&a, &err);
	if (fd < 0)
		fail_msg("%s", err.msg);
	assert_int_equal(stat(path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	assert_true(fcntl(fd, F_GETFL) & O_NONBLOCK);

	cfd = test_unix_connect(path);
	assert_true(cfd >= 0);
	close(cfd);
	close(fd);

	/* A stale socket (its listener gone) is replaced. */
	fd = agent_listen_socket(&a, &err);
	if (fd < 0)
		fail_msg("stale socket not replaced: %s", err.msg);
	cfd = test_unix_connect(path);
	assert_true(cfd >= 0);
	close(cfd);
	close(fd);
}

static void unix_refuses_non_socket(void **state)
{
	const char *dir = *state;
	char spec[300], path[256];
	agent_listen_addr a;
	sbx_err err = { 0 };
	int fd;

	snprintf(path, sizeof(path), "%s/plain-file", dir);
	fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	assert_true(fd >= 0);
	close(fd);
	snprintf(spec, sizeof(spec), "unix:%s", path);
	assert_int_equal(agent_listen_parse(spec, &a, &err), 0);
	assert_int_equal(agent_listen_socket(&a, &err), -EEXIST);
	assert_non_null(strstr(err.msg, "is not a socket"));
	assert_int_equal(access(path, F_OK), 0); /* left alone */
}

/* No vsock loopback here, so the test stops below connect: the socket is
 * created, bound to VMADDR_CID_ANY:port and listening. */
static void vsock_socket_created(void **state)
{
	agent_listen_addr a = { 0 };
	sbx_err err = { 0 };
	struct sockaddr_vm vm = { 0 };
	socklen_t len = sizeof(vm);
	int acc, fd = -1;
	char spec[64];

	/* A port in the dynamic range, retried if another process holds it. */
	for (int i = 0; i < 20 && fd < 0; i++) {
		snprintf(spec, sizeof(spec), "vsock:%u", 40000u + (unsigned)(getpid() % 20000) + (unsigned)i);
		assert_int_equal(agent_listen_parse(spec, &a, &err), 0);
		fd = agent_listen_socket(&a, &err);
		if (fd < 0 && err.code != -EADDRINUSE)
			fail_msg("%s", err.msg);
	}
	assert_true(fd >= 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&vm, &len), 0);
	assert_int_equal(vm.svm_family, AF_VSOCK);
	assert_int_equal(vm.svm_port, a.port);
	acc = 0;
	len = sizeof(acc);
	assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &len), 0);
	assert_int_equal(acc, 1);
	close(fd);
}

typedef struct accept_state {
	struct event_base *base;
	int accepted;
} accept_state;

static void on_accept(int fd, void *ud)
{
	accept_state *st = ud;

	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
	if (++st->accepted == 3)
		event_base_loopbreak(st->base);
}

static void listener_accepts_and_cleans_up(void **state)
{
	const char *dir = *state;
	char spec[300], path[256];
	agent_listen_addr a;
	agent_listener *l = NULL;
	sbx_err err = { 0 };
	accept_state st = { event_base_new(), 0 };
	struct timeval tv = { 5, 0 };
	int fds[3];

	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	snprintf(spec, sizeof(spec), "unix:%s", path);
	assert_int_equal(agent_listen_parse(spec, &a, &err), 0);
	assert_int_equal(agent_listener_new(st.base, &a, on_accept, &st, &l, &err), 0);
	for (int i = 0; i < 3; i++) {
		fds[i] = test_unix_connect(path);
		assert_true(fds[i] >= 0);
	}
	event_base_loopexit(st.base, &tv);
	event_base_dispatch(st.base);
	for (int i = 0; i < 3; i++)
		close(fds[i]);
	assert_int_equal(st.accepted, 3);
	agent_listener_free(l);
	assert_int_equal(access(path, F_OK), -1); /* the socket path is removed */
	event_base_free(st.base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse_unix),
		cmocka_unit_test(parse_vsock),
		cmocka_unit_test(parse_bad),
		cmocka_unit_test(sockaddr_vsock),
		cmocka_unit_test(sockaddr_unix),
		cmocka_unit_test_setup_teardown(unix_socket_created, tmpdir_setup, tmpdir_teardown),
		cmocka_unit_test_setup_teardown(unix_refuses_non_socket, tmpdir_setup, tmpdir_teardown),
		cmocka_unit_test(vsock_socket_created),
		cmocka_unit_test_setup_teardown(listener_accepts_and_cleans_up, tmpdir_setup, tmpdir_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
