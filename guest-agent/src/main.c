/* sandbox-agent: PID 1 of a sandbox. Flags, start-up, the event loop. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "sbx/err.h"
#include "sbx/proto_conn.h"
#include "agent.h"
#include "agent_fsconf.h"
#include "env.h"
#include "listen.h"
#include "log.h"
#include "mcp_server.h"
#include "netif.h"
#include "pid1.h"
#include "proc.h"
#include "session.h"
#include "agent_seccomp.h"
#include "bg.h"
#include "spawn.h"
#include "tree.h"

#define MAX_LISTEN 8

typedef struct agent_main {
	agent_ctx ctx;
	agent_listen_addr addrs[MAX_LISTEN];
	agent_listener *listeners[MAX_LISTEN];
	size_t naddrs;
	unsigned grace_ms;
	const char *fs_resolve; /* "auto" (NULL), "openat2" or "walk" */
	bool mark_trees;        /* --mark-trees */
} agent_main;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sandbox-agent --listen ADDR [--listen ADDR...] [options]\n"
		"  --listen unix:PATH | vsock:PORT  where the supervisor connects (repeatable)\n"
		"  --grace-ms N   on SIGTERM/SIGINT, wait this long for commands (default %u)\n"
		"  --fs-resolve auto|openat2|walk  how file paths are kept beneath their root\n"
		"                 (default auto: openat2 where it works, else the component walk)\n"
		"  --mark-trees   hold process trees by a supplementary group, as where holders\n"
		"                 cannot be subreapers (gVisor), also where they can (tests)\n"
		"  --verbose      debug logging\n"
		"  --version      print the version\n",
		AGENT_PID1_DEFAULT_GRACE_MS);
}

static int parse_flags(agent_main *m, int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "grace-ms", required_argument, NULL, 'g' },
		{ "fs-resolve", required_argument, NULL, 'r' },
		{ "mark-trees", no_argument, NULL, 'm' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	sbx_err err = { 0 };
	int opt;

	while ((opt = getopt_long(argc, argv, "l:g:vh", longopts, NULL)) != -1) {
		switch (opt) {
		case 'l':
			if (m->naddrs == MAX_LISTEN) {
				fprintf(stderr, "sandbox-agent: at most %d --listen\n", MAX_LISTEN);
				return 2;
			}
			if (agent_listen_parse(optarg, &m->addrs[m->naddrs], &err) < 0) {
				fprintf(stderr, "sandbox-agent: %s\n", err.msg);
				return 2;
			}
			m->naddrs++;
			break;
		case 'g': {
			char *end;
			unsigned long v = strtoul(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || v == 0 || v > 3600000) {
				fprintf(stderr, "sandbox-agent: --grace-ms must be 1..3600000\n");
				return 2;
			}
			m->grace_ms = (unsigned)v;
			break;
		}
		case 'r':
			if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "openat2") != 0 &&
			    strcmp(optarg, "walk") != 0) {
				fprintf(stderr, "sandbox-agent: --fs-resolve wants auto, openat2 or walk\n");
				return 2;
			}
			m->fs_resolve = strcmp(optarg, "auto") != 0 ? optarg : NULL;
			break;
		case 'm':
			m->mark_trees = true;
			break;
		case 'v':
			agent_log_set_level(AGENT_LOG_DEBUG);
			break;
		case 'V':
			printf("%s\n", AGENT_NAME);
			return 1;
		case 'h':
			usage(stdout);
			return 1;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || m->naddrs == 0) {
		usage(stderr);
		return 2;
	}
	return 0;
}

/* Spawned children get pipes as 0..2 via dup2; an fd the agent opens must
 * never land on 0..2 itself, or dup2 would not clear its close-on-exec. */
static void ensure_stdio(void)
{
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) >= 0)
			continue;
		int n = open("/dev/null", O_RDWR);
		if (n >= 0 && n != fd)
			close(n);
	}
}

static void on_accept(int fd, void *ud)
{
	agent_main *m = ud;
	sbx_err err = { 0 };

	if (agent_session_new(&m->ctx, fd, &err) < 0)
		agent_log_warn("accept: %s", err.msg);
}

static void stop_listening(agent_main *m)
{
	for (size_t i = 0; i < m->naddrs; i++) {
		agent_listener_free(m->listeners[i]);
		m->listeners[i] = NULL;
	}
}

static void hook_stop_accepting(void *ud)
{
	agent_main *m = ud;

	m->ctx.shutting_down = true;
	stop_listening(m);
}

static void hook_forward(int sig, void *ud)
{
	agent_proc_signal_all(sig);
}

static void hook_kill_all(void *ud)
{
	agent_proc_signal_all(SIGKILL);
	agent_tree_kill_all();
}

static bool hook_idle(void *ud)
{
	return agent_proc_count() == 0 && agent_session_all_flushed();
}

static void hook_done(void *ud)
{
	agent_main *m = ud;

	event_base_loopbreak(m->ctx.base);
}

static int run(agent_main *m)
{
	static const agent_pid1_hooks hooks = {
		.stop_accepting = hook_stop_accepting,
		.forward = hook_forward,
		.kill_all = hook_kill_all,
		.idle = hook_idle,
		.done = hook_done,
	};
	agent_pid1_opts popts = { .grace_ms = m->grace_ms };
	sbx_err err = { 0 };
	struct timespec ts;
	char name[160];

	clock_gettime(CLOCK_MONOTONIC, &ts);
	m->ctx.start_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	if (agent_env_init(environ, &err) < 0) {
		agent_log_error("%s", err.msg);
		return 1;
	}
	if (agent_pid1_setup(m->ctx.base, &popts, &hooks, m, &err) < 0) {
		agent_log_error("%s", err.msg);
		return 1;
	}
	if (agent_spawn_raise_nofile(&err) < 0)
		agent_log_warn("%s", err.msg);
	if (agent_pid1_is_init() && agent_netif_loopback_up(&err) < 0)
		agent_log_warn("%s (continuing without loopback)", err.msg);
	for (size_t i = 0; i < m->naddrs; i++) {
		if (agent_listener_new(m->ctx.base, &m->addrs[i], on_accept, m, &m->listeners[i], &err) < 0) {
			agent_log_error("%s", err.msg);
			stop_listening(m);
			return 1;
		}
		agent_log_info("listening on %s%s", agent_listen_format(&m->addrs[i], name, sizeof(name)),
			       agent_pid1_is_init() ? " as PID 1" : "");
	}
	if (event_base_dispatch(m->ctx.base) < 0) {
		agent_log_error("event loop failed");
		return 1;
	}
	return 0;
}

/* What this kernel offers is known once, at start, and said in the log:
 * gVisor lacks openat2, /proc/<pid>/task/<tid>/children and
 * SECCOMP_RET_KILL_PROCESS, and each has its own answer (README.md). */
static void probe_kernel(const agent_main *m)
{
	char note[256];
	const char *how;
	sbx_err err = { 0 };

	if (m->fs_resolve) {
		agent_fsconf_use(strcmp(m->fs_resolve, "walk") == 0 ? AGENT_FSCONF_WALK
								    : AGENT_FSCONF_OPENAT2);
		agent_log_info("file confinement: %s (--fs-resolve)", m->fs_resolve);
	} else if (agent_fsconf_probe(note, sizeof(note), &err) < 0) {
		agent_log_error("file confinement: %s", err.msg);
	} else {
		agent_log_info("file confinement: %s", note);
	}
	if (agent_tree_probe(m->mark_trees, &how) < 0)
		agent_log_error("process trees: %s: commands are refused", how);
	else
		agent_log_info("process trees: %s", how);
	if (!agent_seccomp_kill_process_ok())
		agent_log_info("seccomp: no SECCOMP_RET_KILL_PROCESS here: a call from a foreign "
			       "architecture kills the calling thread");
}

/* Compile the seccomp profile at start, not on the first command: a pooled
 * sandbox then pays it during warm-up instead of in its first exec, and a
 * broken operator profile is in the log before anyone runs anything (execs
 * still fail with its error until it is fixed). */
static void warm_seccomp(void)
{
	agent_seccomp_filter *f = NULL;
	sbx_err err = { 0 };

	if (agent_seccomp_get(NULL, &f, &err) < 0)
		agent_log_error("seccomp profile: %s", err.msg);
	else
		agent_seccomp_unref(f);
}

int main(int argc, char **argv)
{
	agent_main m = { 0 };
	int ret;

	ret = parse_flags(&m, argc, argv);
	if (ret)
		return ret == 1 ? 0 : ret;
	ensure_stdio();
	sbx_proto_tune_allocator();
	probe_kernel(&m);
	warm_seccomp();
	m.ctx.base = event_base_new();
	if (!m.ctx.base) {
		agent_log_error("cannot create the event loop");
		return 1;
	}
	ret = run(&m);
	stop_listening(&m);
	agent_session_close_all();
	agent_bg_discard_all();
	agent_mcp_discard_all();
	agent_proc_discard_all();
	agent_tree_discard_all();
	agent_seccomp_cache_clear();
	agent_pid1_teardown();
	agent_env_free();
	event_base_free(m.ctx.base);
	if (ret == 0)
		agent_log_info("shut down");
	return ret;
}
