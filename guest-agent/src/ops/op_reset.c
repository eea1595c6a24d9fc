/* reset: the sandbox back to what a fresh one is, without a new container
 * (PROTOCOL.md "reset"), so that a pool can hand it to the next tenant.
 *
 * In order: new requests are refused; every other stream of every
 * connection ends (err cancelled), which kills what its commands run; the
 * MCP servers and their spares are forgotten; then, as PID 1, SIGKILL to
 * every process of the namespace (kill(-1): whatever escaped a tree too,
 * setsid and double-forked daemons, terminals' sessions), again every tick
 * until /proc lists no process but the agent and every holder and command
 * was reaped. Only then, with nothing left to write, the background
 * registry is emptied, the System V IPC objects of the namespace are
 * removed and the requested folders are emptied (hidden entries too, no
 * mount crossed); the seccomp profile is read again by the next command.
 * The answer comes when all of it is done; a process that outlives the
 * timeout or a folder that cannot be emptied is an err, and the requester
 * must then not trust the sandbox (the supervisor replaces it).
 *
 * A cancel or a lost connection does not stop a reset half-way (that would
 * leave a sandbox neither clean nor as it was): it runs to its end and
 * answers no one. This file must not parse other operations' arguments or
 * decide which folders are the sandbox's writable ones (the requester
 * names them). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "sbx/proto.h"
#include "sbx/proto_reset.h"
#include "agent_fsconf.h"
#include "agent_fsconf_ops.h"
#include "agent_seccomp.h"
#include "bg.h"
#include "log.h"
#include "mcp_server.h"
#include "numdir.h"
#include "op_fs_util.h"
#include "ops.h"
#include "pid1.h"
#include "proc.h"
#include "session.h"
#include "tree.h"

/* How often the kill is repeated and the namespace looked at. */
#define RESET_TICK_US 2000

typedef struct reset_op {
	agent_op op;
	agent_ctx *ctx;
	struct event *tick;
	char *paths[SBX_RESET_MAX_PATHS];
	size_t npaths;
	uint64_t t0_ns, deadline_ns;
	sbx_proto_reset_result r;
	bool orphaned; /* the requester went away: answer no one */
} reset_op;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void count_other(unsigned pid, void *arg)
{
	if (pid != (unsigned)getpid())
		(*(unsigned *)arg)++;
}

/* Processes of the namespace but the agent, zombies included. */
static unsigned others(void)
{
	unsigned n = 0;

	agent_numdir_each("/proc", count_other, &n);
	return n;
}

static void finish(reset_op *r, sbx_proto_code code, const char *msg)
{
	agent_session *s = r->op.session;
	sbx_err err = { 0 };

	r->ctx->resetting = false;
	if (!r->orphaned) {
		agent_session_detach(s, &r->op);
		if (code) {
			if (sbx_proto_conn_fail(agent_session_conn(s), r->op.id, code, msg, &err) < 0)
				agent_log_debug("reset: answer: %s", err.msg);
		} else {
			msgpack_sbuffer buf;
			msgpack_packer pk;

			msgpack_sbuffer_init(&buf);
			msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
			sbx_proto_reset_pack_result(&pk, &r->r);
			if (sbx_proto_conn_end(agent_session_conn(s), r->op.id, buf.data, buf.size, &err) < 0)
				agent_log_debug("reset: answer: %s", err.msg);
			msgpack_sbuffer_destroy(&buf);
		}
	}
	if (code)
		agent_log_warn("reset failed: %s", msg);
	else
		agent_log_info("reset: %llu processes killed, %llu entries and %llu IPC objects removed in %llu us",
			       (unsigned long long)r->r.killed, (unsigned long long)r->r.removed,
			       (unsigned long long)r->r.ipc_removed, (unsigned long long)r->r.duration_us);
	event_free(r->tick);
	for (size_t i = 0; i < r->npaths; i++)
		free(r->paths[i]);
	free(r);
}

/* Remove every System V IPC object listed in /proc/sysvipc/<file> (the
 * namespace's own): the id is each line's second column, the owner's uid
 * column uid_col (1-based). IPC_RMID wants the owner or CAP_SYS_ADMIN,
 * which a sandbox's agent lacks, so the agent takes the owner's uid as
 * its effective one for the call (its saved uid stays 0, and with it the
 * way back). */
static int ipc_remove(const char *file, unsigned uid_col, int (*rm)(int id), uint64_t *n, sbx_err *err)
{
	char path[64], line[512];
	FILE *f;
	int ret = 0;

	snprintf(path, sizeof(path), "/proc/sysvipc/%s", file);
	f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : sbx_err_sys(err, -errno, "reset: open %s", path);
	if (!fgets(line, sizeof(line), f)) { /* the header */
		fclose(f);
		return 0;
	}
	while (ret == 0 && fgets(line, sizeof(line), f)) {
		long col[16];
		unsigned ncol = 0;
		char *p = line, *end;

		while (ncol < 16) {
			col[ncol] = strtol(p, &end, 10);
			if (end == p)
				break;
			ncol++;
			p = end;
		}
		if (ncol < uid_col || col[1] < 0 || col[uid_col - 1] < 0) {
			ret = sbx_err_set(err, -EPROTO, "reset: %s: a line without an id or owner", path);
			break;
		}
		uid_t owner = (uid_t)col[uid_col - 1];
		if (owner != 0 && syscall(SYS_setresuid, -1, owner, -1) < 0) {
			ret = sbx_err_sys(err, -errno, "reset: become uid %u", (unsigned)owner);
			break;
		}
		if (rm((int)col[1]) < 0 && errno != EINVAL && errno != EIDRM)
			ret = sbx_err_sys(err, -errno, "reset: remove %s %ld", file, col[1]);
		else
			(*n)++;
		if (owner != 0 && syscall(SYS_setresuid, -1, 0, -1) < 0) {
			/* the agent cannot go on as another user */
			agent_log_error("reset: back to uid 0: %s", strerror(errno));
			abort();
		}
	}
	fclose(f);
	return ret;
}

static int rm_shm(int id)
{
	return shmctl(id, IPC_RMID, NULL);
}

static int rm_msg(int id)
{
	return msgctl(id, IPC_RMID, NULL);
}

static int rm_sem(int id)
{
	return semctl(id, 0, IPC_RMID);
}

/* Nothing runs any more: empty what the processes left. */
static int clean(reset_op *r, sbx_err *err)
{
	int ret;

	if ((ret = agent_bg_forget_all()) < 0)
		return sbx_err_set(err, ret, "reset: a background process still runs");
	/* the owner's uid: shm's and msg's 8th column, sem's 5th */
	if ((ret = ipc_remove("shm", 8, rm_shm, &r->r.ipc_removed, err)) < 0 ||
	    (ret = ipc_remove("msg", 8, rm_msg, &r->r.ipc_removed, err)) < 0 ||
	    (ret = ipc_remove("sem", 5, rm_sem, &r->r.ipc_removed, err)) < 0)
		return ret;
	for (size_t i = 0; i < r->npaths; i++) {
		AGENT_FSCONF_AUTO_ROOT agent_fsconf_root root = { .fd = -1 };

		ret = agent_fsconf_root_open(&root, r->paths[i], err);
		if (ret == -ENOENT)
			continue; /* nothing to empty; the requester checks what must exist */
		if (ret < 0 || (ret = agent_fsconf_empty(&root, &r->r.removed, err)) < 0)
			return ret;
	}
	/* An operator profile changed meanwhile (by a root command) is read
	 * anew rather than served from the cache. */
	agent_seccomp_cache_clear();
	return 0;
}

static void tick_cb(evutil_socket_t fd, short what, void *ud)
{
	reset_op *r = ud;
	sbx_err err = { 0 };
	unsigned left;

	agent_pid1_reap();
	left = others();
	if (left || agent_proc_count() || agent_tree_holders()) {
		if (now_ns() < r->deadline_ns) {
			if (kill(-1, SIGKILL) < 0 && errno != ESRCH)
				agent_log_warn("reset: kill(-1): %s", strerror(errno));
			return;
		}
		char msg[160];
		snprintf(msg, sizeof(msg), "%u processes (%zu commands) outlived SIGKILL for %llu ms", left,
			 agent_proc_count(), (unsigned long long)((r->deadline_ns - r->t0_ns) / 1000000u));
		finish(r, SBX_PROTO_E_TIMEOUT, msg);
		return;
	}
	if (clean(r, &err) < 0) {
		finish(r, agent_fs_code(err.code), err.msg);
		return;
	}
	r->r.duration_us = (now_ns() - r->t0_ns) / 1000u;
	finish(r, 0, NULL);
}

static void reset_frame(agent_op *op, const sbx_proto_frame *f)
{
	/* Nothing to take: data is credited back, a cancel waits for the
	 * end (see the top of this file). */
	if (f->kind == SBX_PROTO_DATA)
		sbx_proto_conn_consumed(agent_session_conn(op->session), op->id, f->body_len);
}

static void reset_writable(agent_op *op)
{
}

static void reset_abort(agent_op *op)
{
	((reset_op *)op)->orphaned = true;
}

static const agent_op_vtbl reset_vtbl = {
	.frame = reset_frame,
	.writable = reset_writable,
	.abort = reset_abort,
};

void agent_op_reset(agent_session *s, uint64_t id, const msgpack_object *args)
{
	static const struct timeval tick = { 0, RESET_TICK_US };
	sbx_proto_reset_args a;
	sbx_err err = { 0 };
	reset_op *r;

	if (!agent_pid1_is_init()) {
		sbx_proto_conn_fail(agent_session_conn(s), id, SBX_PROTO_E_UNSUPPORTED,
				    "reset needs the agent as PID 1 of the sandbox", &err);
		return;
	}
	if (sbx_proto_reset_parse_args(args, &a, &err) < 0) {
		sbx_err e2 = { 0 };
		sbx_proto_conn_fail(agent_session_conn(s), id, SBX_PROTO_E_BAD_REQUEST, err.msg, &e2);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (r)
		r->tick = event_new(agent_session_ctx(s)->base, -1, EV_PERSIST, tick_cb, r);
	for (size_t i = 0; r && r->tick && i < a.npaths; i++, r->npaths++)
		if (!(r->paths[i] = strndup(a.paths[i], a.lens[i])))
			break;
	if (!r || !r->tick || r->npaths < a.npaths) {
		for (size_t i = 0; r && i < r->npaths; i++)
			free(r->paths[i]);
		if (r && r->tick)
			event_free(r->tick);
		free(r);
		sbx_proto_conn_fail(agent_session_conn(s), id, SBX_PROTO_E_INTERNAL, "reset: out of memory", &err);
		return;
	}
	r->op.vt = &reset_vtbl;
	r->op.id = id;
	r->ctx = agent_session_ctx(s);
	r->t0_ns = now_ns();
	r->deadline_ns = r->t0_ns + a.timeout_ms * 1000000u;
	r->ctx->resetting = true;
	agent_session_attach(s, &r->op);
	agent_session_end_ops(&r->op, SBX_PROTO_E_CANCELLED, "the sandbox is being reset");
	agent_mcp_discard_all();
	r->r.killed = others();
	agent_tree_kill_all();
	if (kill(-1, SIGKILL) < 0 && errno != ESRCH)
		agent_log_warn("reset: kill(-1): %s", strerror(errno));
	event_add(r->tick, &tick);
	agent_log_info("reset: %llu processes to kill", (unsigned long long)r->r.killed);
}
