#include "mcp_server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <event2/event.h>

#include "env.h"
#include "exec_spec.h"
#include "log.h"

struct agent_mcp_server {
	agent_mcp_server *prev, *next;
	agent_ctx *ctx;
	agent_exec_spec spec;
	agent_mcp_proc *spare;
	struct event *restart_ev;
	unsigned backoff_ms;
	agent_mcp_link *sessions;
	sbx_proto_mcp_status st;   /* counters and the last crash; state and
				    * spare_pid are filled in when asked */
};

static agent_mcp_server *servers;
static size_t nservers, nsessions;

static void start_spare(agent_mcp_server *s);

static agent_mcp_server *find(const char *name, size_t len)
{
	for (agent_mcp_server *s = servers; s; s = s->next)
		if (strlen(s->st.name) == len && memcmp(s->st.name, name, len) == 0)
			return s;
	return NULL;
}

static void note_exit(agent_mcp_server *s, const agent_proc_result *r, const char *tail)
{
	s->st.crashes++;
	s->st.has_exit = true;
	s->st.exit_code = WIFEXITED(r->status) ? WEXITSTATUS(r->status) : -1;
	s->st.exit_signal = WIFSIGNALED(r->status) ? WTERMSIG(r->status) : 0;
	snprintf(s->st.stderr_tail, sizeof(s->st.stderr_tail), "%s", tail ? tail : "");
}

/* The spare failed: try again later, each time later. */
static void spare_lost(agent_mcp_server *s)
{
	struct timeval tv;

	s->spare = NULL;
	if (s->ctx->shutting_down)
		return;
	s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : AGENT_MCP_BACKOFF_MIN_MS;
	if (s->backoff_ms > AGENT_MCP_BACKOFF_MAX_MS)
		s->backoff_ms = AGENT_MCP_BACKOFF_MAX_MS;
	tv.tv_sec = s->backoff_ms / 1000;
	tv.tv_usec = (suseconds_t)(s->backoff_ms % 1000) * 1000;
	evtimer_add(s->restart_ev, &tv);
}

/* ---- the spare's owner: the server ---- */

static void spare_bad(void *ud, sbx_proto_code code, const char *msg)
{
	agent_mcp_server *s = ud;
	char tail[SBX_MCP_STDERR_TAIL + 1];

	agent_log_warn("mcp server %s: spare process: %s", s->st.name, msg);
	agent_mcp_proc_stderr_tail(s->spare, tail, sizeof(tail));
	s->st.bad_output++;
	s->st.crashes++;
	s->st.has_exit = false;
	snprintf(s->st.stderr_tail, sizeof(s->st.stderr_tail), "%s", tail);
	agent_mcp_proc_detach(s->spare);
	spare_lost(s);
}

static void spare_finished(void *ud, const agent_proc_result *r, const char *tail)
{
	agent_mcp_server *s = ud;

	note_exit(s, r, tail);
	agent_log_warn("mcp server %s: spare process ended (exit %lld, signal %lld)", s->st.name,
		       (long long)s->st.exit_code, (long long)s->st.exit_signal);
	spare_lost(s);
}

/* Lines a spare writes before any session wait for the session. */
static const agent_mcp_proc_owner spare_owner = {
	.bad_output = spare_bad,
	.finished = spare_finished,
};

static void start_spare(agent_mcp_server *s)
{
	sbx_err err = { 0 };

	if (s->spare || s->ctx->shutting_down)
		return;
	if (agent_mcp_proc_start(s->ctx->base, &s->spec, s->st.max_line, &spare_owner, s, &s->spare, &err) < 0) {
		agent_log_warn("mcp server %s: start: %s", s->st.name, err.msg);
		s->spare = NULL;
		spare_lost(s);
		return;
	}
	s->st.started++;
	/* A spare that cannot be pinged is still a spare, only a cold one. */
	if (agent_mcp_proc_warm(s->spare, AGENT_MCP_WARM_MS, &err) < 0)
		agent_log_warn("mcp server %s: warm-up: %s", s->st.name, err.msg);
}

static void restart_cb(evutil_socket_t fd, short what, void *ud)
{
	start_spare(ud);
}

/* ---- configure, remove, list ---- */

static void server_free(agent_mcp_server *s, const char *why)
{
	while (s->sessions) {
		agent_mcp_link *l = s->sessions;

		s->sessions = l->next;
		if (s->sessions)
			s->sessions->prev = NULL;
		l->prev = l->next = NULL;
		nsessions--;
		l->end(l, why);
	}
	if (s->spare)
		agent_mcp_proc_detach(s->spare);
	if (s->prev)
		s->prev->next = s->next;
	else
		servers = s->next;
	if (s->next)
		s->next->prev = s->prev;
	nservers--;
	event_free(s->restart_ev);
	agent_exec_spec_free(&s->spec);
	free(s);
}

static void fill_status(const agent_mcp_server *s, sbx_proto_mcp_status *st)
{
	*st = s->st;
	st->spare_pid = s->spare ? agent_mcp_proc_pid(s->spare) : 0;
	st->state = !s->spare ? SBX_MCP_CRASHED
		    : !st->spare_pid ? SBX_MCP_STARTING
		    : agent_mcp_proc_warming(s->spare) ? SBX_MCP_WARMING
		    : SBX_MCP_READY;
}

int agent_mcp_configure(agent_ctx *ctx, const msgpack_object *args, sbx_proto_mcp_status *st, sbx_err *err)
{
	agent_mcp_server *s, *old;
	const char *name;
	size_t len;
	uint64_t max_line;
	int ret;

	if (ctx->shutting_down)
		return sbx_err_set(err, -ESHUTDOWN, "the agent is shutting down");
	ret = sbx_proto_mcp_parse_config(args, &name, &len, &max_line, err);
	if (ret < 0)
		return ret;
	old = find(name, len);
	if (!old && nservers >= SBX_MCP_MAX_SERVERS)
		return sbx_err_set(err, -ENOSPC, "mcp.configure: at most %u servers", SBX_MCP_MAX_SERVERS);
	s = calloc(1, sizeof(*s));
	if (!s)
		return sbx_err_set(err, -ENOMEM, "mcp.configure: out of memory");
	ret = agent_exec_spec_parse(args, agent_env_base(), &s->spec, err);
	if (ret < 0) {
		free(s);
		return sbx_err_wrap(err, "mcp.configure %.*s", (int)len, name);
	}
	s->spec.stdin_pipe = true;
	s->ctx = ctx;
	s->restart_ev = evtimer_new(ctx->base, restart_cb, s);
	if (!s->restart_ev) {
		agent_exec_spec_free(&s->spec);
		free(s);
		return sbx_err_set(err, -ENOMEM, "mcp.configure: event");
	}
	memcpy(s->st.name, name, len);
	s->st.max_line = max_line;
	if (old)
		server_free(old, "the server was configured again");
	s->next = servers;
	if (servers)
		servers->prev = s;
	servers = s;
	nservers++;
	start_spare(s);
	fill_status(s, st);
	return 0;
}

int agent_mcp_remove(const char *name, size_t len, sbx_err *err)
{
	agent_mcp_server *s = find(name, len);

	if (!s)
		return sbx_err_set(err, -ENOENT, "no MCP server %.*s", (int)len, name);
	server_free(s, "the server was removed");
	return 0;
}

size_t agent_mcp_list(sbx_proto_mcp_status *sts, size_t max)
{
	size_t n = 0;

	for (agent_mcp_server *s = servers; s && n < max; s = s->next)
		fill_status(s, &sts[n++]);
	return n;
}

/* ---- sessions ---- */

int agent_mcp_take(const char *name, size_t len, const agent_mcp_proc_owner *owner, void *ud,
		   agent_mcp_link *link, agent_mcp_server **srv, agent_mcp_proc **mp, bool *spare,
		   sbx_err *err)
{
	agent_mcp_server *s = find(name, len);
	int ret;

	if (!s)
		return sbx_err_set(err, -ENOENT, "no MCP server %.*s", (int)len, name);
	if (nsessions >= AGENT_MCP_MAX_SESSIONS)
		return sbx_err_set(err, -EBUSY, "at most %u MCP sessions at once", AGENT_MCP_MAX_SESSIONS);
	*spare = s->spare != NULL;
	if (s->spare) {
		*mp = s->spare;
		s->spare = NULL;
		agent_mcp_proc_set_owner(*mp, owner, ud);
		s->backoff_ms = 0;
		start_spare(s);
	} else {
		ret = agent_mcp_proc_start(s->ctx->base, &s->spec, s->st.max_line, owner, ud, mp, err);
		if (ret < 0)
			return sbx_err_wrap(err, "mcp server %s", s->st.name);
		s->st.started++;
	}
	link->prev = NULL;
	link->next = s->sessions;
	if (s->sessions)
		s->sessions->prev = link;
	s->sessions = link;
	nsessions++;
	s->st.sessions++;
	s->st.opened++;
	*srv = s;
	return 0;
}

void agent_mcp_session_end(agent_mcp_server *s, agent_mcp_link *link, bool crashed, bool bad,
			   const agent_proc_result *r, const char *tail)
{
	if (link->prev)
		link->prev->next = link->next;
	else
		s->sessions = link->next;
	if (link->next)
		link->next->prev = link->prev;
	link->prev = link->next = NULL;
	nsessions--;
	s->st.sessions--;
	if (bad)
		s->st.bad_output++;
	if (crashed)
		note_exit(s, r, tail);
}

void agent_mcp_count(agent_mcp_server *s, uint64_t in, uint64_t out)
{
	s->st.msgs_in += in;
	s->st.msgs_out += out;
}

size_t agent_mcp_sessions(void)
{
	return nsessions;
}

void agent_mcp_discard_all(void)
{
	while (servers) {
		agent_mcp_server *s = servers;

		servers = s->next;
		/* Sessions were aborted with their connections already. */
		if (s->spare)
			agent_mcp_proc_detach(s->spare);
		event_free(s->restart_ev);
		agent_exec_spec_free(&s->spec);
		free(s);
	}
	nservers = 0;
}
