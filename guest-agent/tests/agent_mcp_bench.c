/* MCP through the real agent beside the same server spoken to directly:
 * @modelcontextprotocol/server-everything (tests/mcp-servers) run
 *  - directly by this tool over pipes (the floor: the server's own stdio),
 *  - by the agent as PID 1 of new namespaces (agent_ns.h), one session on
 *    a spare, over the agent's socket (agent_client.h).
 * Prints tools/call echo round trips (p50/p99) both ways, and initialize
 * on a spare against a cold start (spawn + initialize) and against the
 * server's own answer once it had as long to start as the spare had. A measuring tool,
 * not a test: run it by hand (root), e.g.
 *   AGENT_BINARY=build/release/guest-agent/sandbox-agent agent_mcp_bench 1000 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "sbx/proto_mcp.h"
#include "agent_client.h"
#include "agent_ns.h"
#include "test_util.h"

#define EVERYTHING MCP_NPM_DIR "/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
#define INIT                                                                                          \
	"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\"," \
	"\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"0\"}}}\n"                  \
	"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
#define SETTLE_MS 6000

static void report(const char *what, double *s, int n)
{
	test_sort_ms(s, (size_t)n);
	printf("| %-46s | %6d | %8.3f | %8.3f |\n", what, n, s[n / 2], s[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1]);
}

static int call_line(char *buf, size_t cap, int id)
{
	return snprintf(buf, cap,
			"{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
			"\"arguments\":{\"message\":\"hello %d\"}}}\n",
			id, id);
}

/* ---- directly over pipes ---- */

typedef struct direct {
	pid_t pid;
	int in, out;
	char buf[1 << 16];
	size_t len;
} direct;

static int direct_start(direct *d)
{
	int to[2], from[2];

	if (pipe(to) < 0 || pipe(from) < 0)
		return -1;
	d->pid = fork();
	if (d->pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(to[0], 0);
		dup2(from[1], 1);
		dup2(null, 2);
		execl("/usr/bin/node", "node", EVERYTHING, "stdio", (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	d->in = to[1];
	d->out = from[0];
	d->len = 0;
	return d->pid > 0 ? 0 : -1;
}

/* Read until a whole line holding "\"id\":id" came; drop what was read. */
static int direct_wait(direct *d, int id)
{
	char want[32];

	snprintf(want, sizeof(want), "\"id\":%d", id);
	for (;;) {
		char *nl;
		ssize_t n;

		while ((nl = memchr(d->buf, '\n', d->len)) != NULL) {
			size_t l = (size_t)(nl - d->buf) + 1;
			bool hit = memmem(d->buf, l, want, strlen(want)) != NULL;
			memmove(d->buf, d->buf + l, d->len - l);
			d->len -= l;
			if (hit)
				return 0;
		}
		if (d->len == sizeof(d->buf))
			d->len = 0;
		n = read(d->out, d->buf + d->len, sizeof(d->buf) - d->len);
		if (n <= 0)
			return -1;
		d->len += (size_t)n;
	}
}

static void direct_stop(direct *d)
{
	close(d->in);
	close(d->out);
	kill(d->pid, SIGKILL);
	waitpid(d->pid, NULL, 0);
}

/* ---- through the agent ---- */

static void wait_line(tc_client *c, tc_stream *s, size_t from, const char *want)
{
	double deadline = test_now_ms_f() + 30000;

	while (!(s->out_len > from && memmem(s->out + from, s->out_len - from, want, strlen(want)) &&
		 s->out[s->out_len - 1] == '\n')) {
		if (s->done || test_now_ms_f() > deadline) {
			fprintf(stderr, "no %s (%s %s)\n", want, s->code, s->msg);
			exit(1);
		}
		event_base_loop(c->base, EVLOOP_ONCE);
	}
}

static tc_stream *open_session(tc_client *c)
{
	msgpack_sbuffer buf;
	msgpack_packer pk;
	tc_stream *s;

	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	sbx_proto_mcp_pack_open(&pk, "everything", 0);
	s = tc_request(c, SBX_OP_MCP_OPEN, buf.data, buf.size);
	msgpack_sbuffer_destroy(&buf);
	return s;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1000, k = argc > 2 ? atoi(argv[2]) : 5;
	const char *node_argv[] = { "/usr/bin/node", EVERYTHING, "stdio", NULL };
	sbx_proto_mcp_config cfg = { .name = "everything", .argv = node_argv, .cwd = "/" };
	double *s = calloc((size_t)(n > k ? n : k), sizeof(*s));
	struct event_base *base;
	msgpack_sbuffer buf;
	msgpack_packer pk;
	tc_client c;
	tc_stream *st;
	agent_ns ns;
	char line[256];
	direct d;

	if (!s || n < 10 || k < 1 || access(EVERYTHING, R_OK) != 0) {
		fprintf(stderr, "usage: agent_mcp_bench [calls >= 10] [initializes >= 1] (needs %s)\n", EVERYTHING);
		return 2;
	}
	printf("| what | n | p50 ms | p99 ms |\n|---|---|---|---|\n");

	/* The floor: the server's own stdio. */
	for (int i = 0; i < k; i++) {
		double t = test_now_ms_f();
		if (direct_start(&d) < 0 || write(d.in, INIT, strlen(INIT)) < 0 || direct_wait(&d, 0) < 0)
			return 1;
		s[i] = test_now_ms_f() - t;
		if (i < k - 1)
			direct_stop(&d);
	}
	report("initialize, cold: spawn node + answer (stdio)", s, k);
	/* What a spare can save at most: the server started SETTLE_MS before. */
	for (int i = 0; i < k; i++) {
		direct w;
		double t;

		if (direct_start(&w) < 0)
			return 1;
		usleep(SETTLE_MS * 1000);
		t = test_now_ms_f();
		if (write(w.in, INIT, strlen(INIT)) < 0 || direct_wait(&w, 0) < 0)
			return 1;
		s[i] = test_now_ms_f() - t;
		direct_stop(&w);
	}
	report("initialize, started 6 s before (stdio)", s, k);
	for (int i = 0; i < n + n / 10; i++) {
		int len = call_line(line, sizeof(line), i + 1);
		double t = test_now_ms_f();
		if (write(d.in, line, (size_t)len) != len || direct_wait(&d, i + 1) < 0)
			return 1;
		if (i >= n / 10)
			s[i - n / 10] = test_now_ms_f() - t;
	}
	direct_stop(&d);
	report("tools/call echo: the server's own stdio", s, n);

	/* Through the agent. */
	if (agent_ns_start(&ns, 1000) < 0)
		return 1;
	base = event_base_new();
	if (tc_connect(&c, base, ns.sock) < 0)
		return 1;
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	sbx_proto_mcp_pack_config(&pk, &cfg, NULL);
	st = tc_request(&c, SBX_OP_MCP_CONFIGURE, buf.data, buf.size);
	msgpack_sbuffer_destroy(&buf);
	tc_wait(&c, st, 10000);
	if (st->failed) {
		fprintf(stderr, "configure: %s %s\n", st->code, st->msg);
		return 1;
	}
	for (int i = 0; i < k; i++) {
		double t;

		tc_run(base, SETTLE_MS); /* the spare starts up meanwhile */
		t = test_now_ms_f();
		st = open_session(&c);
		tc_send_stdin(&c, st, INIT, strlen(INIT), false, 10000);
		wait_line(&c, st, 0, "\"id\":0");
		s[i] = test_now_ms_f() - t;
		if (i < k - 1) {
			tc_cancel(&c, st);
			tc_wait(&c, st, 10000);
			tc_forget(&c, st);
		}
	}
	report("initialize on a spare: open + answer (agent)", s, k);
	for (int i = 0; i < n + n / 10; i++) {
		int len = call_line(line, sizeof(line), i + 1);
		size_t from = st->out_len;
		char want[32];
		double t = test_now_ms_f();

		snprintf(want, sizeof(want), "\"id\":%d", i + 1);
		tc_send_stdin(&c, st, line, (size_t)len, false, 10000);
		wait_line(&c, st, from, want);
		if (i >= n / 10)
			s[i - n / 10] = test_now_ms_f() - t;
		if (st->out_len > (8u << 20)) {
			st->out_len = 0;
		}
	}
	report("tools/call echo: agent socket, one session", s, n);
	printf("agent RSS after: %ld KiB\n", agent_ns_rss_kb(&ns));
	tc_close(&c);
	agent_ns_stop(&ns);
	event_base_free(base);
	free(s);
	return 0;
}
