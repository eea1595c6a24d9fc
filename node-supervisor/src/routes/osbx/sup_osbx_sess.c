/* OpenSandbox's bash sessions (their createSession, runInSession,
 * deleteSession) on sbx's background processes, in the supervisor (the
 * agent has no shell of its own to keep).
 *
 * A session is one bash (--noprofile --norc, as the sandbox's user, with
 * its env) started as a background process with stdin, its input kept
 * open (proc.stdin) and its output followed (proc.output) for its whole
 * life: cd, exports, variables and functions stay as a real shell keeps
 * them. A run writes one line to the shell: the command single-quoted into
 * an eval (its syntax cannot break out) inside a one-pass loop with stdin
 * from /dev/null (it cannot read the next run's input), then an end
 * marker on stdout carrying its exit status and one on stderr (the two
 * pipes are read apart: the run ends when both came). A marker is the
 * session's secret (128 random bits the sandbox sees no earlier than the
 * line that prints it) and the run's number, so neither an old run's
 * marker nor the command's output ends a run; what a command could learn
 * of it only lies to its own session. Output goes out as their event
 * stream, one event per line (empty lines left out, as their execd does),
 * the agent's credit coming back as the client reads.
 *
 * Bounds: SESS_MAX sessions per sandbox; a line's length
 * (SUP_OSBX_LINE_MAX, longer ones in pieces); one run at a time per
 * session (a second is 409); a run's time (its timeout, else RUN_MAX_MS).
 * At the deadline, on their interrupt, or when the client goes, the
 * shell's process group gets SIGINT: the command dies and the shell, which
 * traps it with `break 1000`, leaves the run's loop and prints the
 * markers; a run still going GRACE_MS later ends the session
 * (proc.kill). A session ends with its shell (an `exit`, a kill), its
 * delete, its sandbox (deleted, expired, reset: the followed output ends)
 * and the supervisor. */
#include "sup_osbx_int.h"

#include <errno.h>
#include <event2/event.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/proto.h"
#include "sup_agent.h"
#include "sup_api.h"
#include "sup_log.h"
#include "sup_token.h"

#define SESS_MAX 8
#define RUN_MAX_MS (24u * 3600u * 1000u) /* their execd's own bound */
#define GRACE_MS 2000
#define SESS_RING (256u * 1024u)
#define SESS_TAG "opensandbox-session"
#define SESS_ID_BYTES 12
#define TOK_BYTES 16

typedef struct osbx_sess {
	struct osbx_sess *next;
	sup_osbx_ctx *x;
	char sid[SUP_ID_MAX];   /* its sandbox */
	char tenant[SUP_TENANT_NAME_MAX + 1];
	char id[8 + 2 * SESS_ID_BYTES];
	char tok[2 * TOK_BYTES + 1];
	long pid;
	sup_op *start_op, *out_op, *in_op, *sig_op, *kill_op;
	sup_oq *creator;        /* the create, until it is answered */
	struct evbuffer *typed; /* input the agent has not taken yet */
	struct evbuffer *line[2];
	/* the run */
	uint64_t seq;           /* runs so far: the marker's number */
	bool busy;              /* its markers not both seen */
	bool began;             /* the shell is in the run's loop (its "go") */
	int seen;               /* 1: stdout's marker, 2: stderr's */
	int rc;                 /* the status stdout's marker carried */
	bool interrupted, timed_out;
	sup_oq *run;            /* its request, NULL once it went */
	size_t held;            /* cost charged to run's reply, not back yet */
	uint64_t started_ms;
	struct event *timer;
} osbx_sess;

/* ---- the table ---- */

static osbx_sess *find(sup_osbx_ctx *x, const sup_oq *q, const char *id)
{
	const sup_tenant *who = sup_http_input(q->r)->who;
	for (osbx_sess *s = x->sessions; s; s = s->next)
		if (!s->creator && strcmp(s->id, id) == 0 && strcmp(s->sid, q->id) == 0 &&
		    (!who || strcmp(who->name, s->tenant) == 0))
			return s;
	return NULL;
}

static void unlink_sess(osbx_sess *s)
{
	for (osbx_sess **p = &s->x->sessions; *p; p = &(*p)->next)
		if (*p == s) {
			*p = s->next;
			return;
		}
}

/* The run's request lets go of the session: what its reply still holds
 * of the agent's credit goes back (the client has it, or is gone). */
static void detach_run(osbx_sess *s)
{
	if (s->run)
		s->run->sess = NULL;
	s->run = NULL;
	if (s->held && s->out_op)
		sup_op_consumed(s->out_op, s->held);
	s->held = 0;
}

/* Everything of s goes; its run's stream and its creator were answered. */
static void sess_free(osbx_sess *s)
{
	unlink_sess(s);
	detach_run(s);
	if (s->creator)
		s->creator->sess = NULL;
	sup_op *ops[] = { s->start_op, s->out_op, s->in_op, s->sig_op, s->kill_op };
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		if (ops[i])
			sup_op_cancel(ops[i]);
	if (s->timer)
		event_free(s->timer);
	if (s->typed)
		evbuffer_free(s->typed);
	for (int i = 0; i < 2; i++)
		if (s->line[i])
			evbuffer_free(s->line[i]);
	free(s);
}

void sup_osbx_sess_free_all(sup_osbx_ctx *x)
{
	while (x->sessions)
		sess_free(x->sessions);
}

/* ---- the run's stream ---- */

static void run_credit(size_t cost, void *ud)
{
	sup_oq *q = ud;
	osbx_sess *s = q->sess;
	if (!s)
		return;
	s->held -= cost < s->held ? cost : s->held;
	if (s->out_op)
		sup_op_consumed(s->out_op, cost);
}

/* The run's last event: its stream ends, the session is free again. */
static void run_end(osbx_sess *s, json_t *last)
{
	s->busy = false;
	if (s->timer)
		evtimer_del(s->timer);
	for (int i = 0; i < 2; i++)
		if (s->line[i])
			evbuffer_drain(s->line[i], evbuffer_get_length(s->line[i]));
	sup_oq *q = s->run;
	if (q && q->s) {
		sup_stream_json(q->s, "", last); /* taken */
		sup_stream_end(q->s);
		q->s = NULL;
	} else {
		json_decref(last);
	}
	detach_run(s);
}

static json_t *end_event(osbx_sess *s)
{
	char v[24];
	if (s->rc == 0 && !s->interrupted) {
		json_t *o = sup_osbx_event("execution_complete");
		if (o)
			json_object_set_new(o, "execution_time",
					    json_integer((json_int_t)(sup_osbx_now_ms() - s->started_ms)));
		return o;
	}
	/* an interrupted loop's status is break's */
	snprintf(v, sizeof(v), "%d", s->interrupted && s->rc == 0 ? 130 : s->rc);
	return sup_osbx_error_event(s->timed_out     ? "CommandTimeout"
				    : s->interrupted ? "CommandInterrupted"
						     : "CommandExecError",
				    v);
}

typedef struct sess_lines {
	osbx_sess *s;
	int ch;
	json_t *pend; /* the last event to send, which takes the cost */
} sess_lines;

static void send_sigint(osbx_sess *s);

/* A marker of this run: "<tok>:<seq>:go" on stdout as it begins,
 * "<tok>:<seq>:<status>" on stdout and "<tok>:<seq>" on stderr as it
 * ends. */
static bool marker(sess_lines *l, const char *p, size_t n)
{
	osbx_sess *s = l->s;
	char want[80];
	int k = snprintf(want, sizeof(want), "%s:%llu", s->tok, (unsigned long long)s->seq);
	if (!s->busy || n < (size_t)k || memcmp(p, want, (size_t)k) != 0)
		return false;
	if (l->ch == 1) {
		if (n != (size_t)k)
			return false;
		s->seen |= 2;
		return true;
	}
	if (n < (size_t)k + 2 || n > (size_t)k + 4 || p[k] != ':')
		return false;
	if (n == (size_t)k + 3 && memcmp(p + k + 1, "go", 2) == 0) {
		s->began = true;
		if (s->interrupted)
			send_sigint(s); /* asked for before it began */
		return true;
	}
	int rc = 0;
	for (size_t i = (size_t)k + 1; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		rc = rc * 10 + (p[i] - '0');
	}
	s->rc = rc;
	s->seen |= 1;
	return true;
}

static void sess_line(void *ud, const char *p, size_t n, bool last)
{
	sess_lines *l = ud;
	osbx_sess *s = l->s;
	(void)last;
	if (n == 0 || marker(l, p, n) || !s->busy || !s->run || !s->run->s)
		return;
	if (l->pend)
		sup_stream_json(s->run->s, "", l->pend); /* taken */
	l->pend = sup_osbx_text_event(l->ch, p, n);
}

static void out_data(sup_chan ch, const uint8_t *p, size_t n, size_t cost, void *ud)
{
	osbx_sess *s = ud;
	int i = ch == SUP_CH_STDERR;
	if (ch != SUP_CH_STDOUT && ch != SUP_CH_STDERR) {
		sup_op_consumed(s->out_op, cost);
		return;
	}
	if (!s->line[i] && !(s->line[i] = evbuffer_new())) {
		sup_op_consumed(s->out_op, cost);
		return;
	}
	evbuffer_add(s->line[i], p, n);
	sess_lines l = { .s = s, .ch = i };
	sup_osbx_lines(s->line[i], false, sess_line, &l);
	if (l.pend) {
		s->held += cost;
		sup_stream_json_cost(s->run->s, "", l.pend, cost); /* taken */
	} else {
		sup_op_consumed(s->out_op, cost);
	}
	if (s->busy && s->seen == 3)
		run_end(s, end_event(s));
}

/* A gap: output the ring dropped while the client was behind. The lines
 * cut by it start again. */
static void out_event(const msgpack_object *map, size_t cost, void *ud)
{
	osbx_sess *s = ud;
	for (int i = 0; i < 2; i++)
		if (s->line[i])
			evbuffer_drain(s->line[i], evbuffer_get_length(s->line[i]));
	sup_op_consumed(s->out_op, cost);
}

/* The shell is gone (exit, kill, its sandbox gone): so is the session; a
 * run still going ends with the shell's status. */
static void out_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	osbx_sess *s = ud;
	int64_t code = -1, sig = 0;
	s->out_op = NULL;
	if (rc == 0 && !sbx_proto_get_int(res, "exit_code", &code) && sbx_proto_get_int(res, "signal", &sig))
		code = 128 + sig;
	if (s->busy) {
		char v[24];
		snprintf(v, sizeof(v), "%lld", (long long)code);
		run_end(s, rc < 0 ? sup_osbx_error_event("SessionEnded", err->msg)
				  : sup_osbx_error_event(s->timed_out ? "CommandTimeout" : "CommandExecError", v));
	}
	sess_free(s);
}

static const sup_core_call_cbs out_cbs = {
	.on_output = out_data, .on_event = out_event, .on_done = out_done,
	.wait = SUP_AGENT_WAIT_QUIET
};

/* ---- input ---- */

static void in_pump(void *ud)
{
	osbx_sess *s = ud;
	while (s->in_op && evbuffer_get_length(s->typed)) {
		sbx_err e;
		size_t n = evbuffer_get_length(s->typed);
		int k = sup_core_call_send(s->in_op, SBX_CH_STDIN, evbuffer_pullup(s->typed, -1), n, false, &e);
		if (k <= 0)
			return; /* 0: on_writable; < 0: in_done tells */
		evbuffer_drain(s->typed, (size_t)k);
	}
}

/* Its input broke: the shell takes no more runs (a run waiting for it
 * ends by its deadline). */
static void in_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	osbx_sess *s = ud;
	s->in_op = NULL;
	if (rc < 0 && err->code != -ENOENT)
		sup_warn("osbx: sandbox %s: session %s: its input ended: %s", s->sid, s->id, err->msg);
}

/* Kept open for the session's life: only bytes waiting for the agent's
 * credit have a deadline. */
static const sup_core_call_cbs in_cbs = {
	.on_done = in_done, .on_writable = in_pump, .wait = SUP_AGENT_WAIT_SENDS
};

/* ---- interrupt, deadline, kill ---- */

static void sig_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	osbx_sess *s = ud;
	s->sig_op = NULL;
}

static const sup_core_call_cbs sig_cbs = { .on_done = sig_done };

static void kill_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	osbx_sess *s = ud;
	s->kill_op = NULL;
}

static const sup_core_call_cbs kill_cbs = { .on_done = kill_done };

static void forget(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	(void)rc;
	(void)res;
	(void)err;
	(void)ud;
}

static const sup_core_call_cbs forget_cbs = { .on_done = forget };

static void call_pid(osbx_sess *s, const char *op, int sig, const sup_core_call_cbs *cbs, sup_op **slot)
{
	sbx_proto_args a;
	sbx_err e;
	if (*slot)
		return;
	sbx_proto_args_init(&a);
	sbx_proto_args_uint(&a, "pid", (uint64_t)s->pid);
	if (sig)
		sbx_proto_args_uint(&a, "signal", (uint64_t)sig);
	if (sup_core_call(s->x->core, s->sid, op, &a, cbs, s, slot, &e) < 0)
		sup_warn("osbx: sandbox %s: session %s: %s: %s", s->sid, s->id, op, e.msg);
}

static void send_sigint(osbx_sess *s)
{
	call_pid(s, SBX_OP_PROC_SIGNAL, 2, &sig_cbs, &s->sig_op);
}

/* SIGINT to the shell's group: the command ends, the shell (which traps
 * it) prints the markers; GRACE_MS for that, then the session ends. A
 * SIGINT before the shell is in the run's loop would be lost (the shell
 * reading the line ignores it): it waits for the run's "go". */
static void interrupt(osbx_sess *s)
{
	if (!s->busy || s->interrupted)
		return;
	s->interrupted = true;
	if (s->began)
		send_sigint(s);
	struct timeval tv = { GRACE_MS / 1000, (GRACE_MS % 1000) * 1000 };
	evtimer_add(s->timer, &tv);
}

static void on_timer(evutil_socket_t fd, short what, void *ud)
{
	osbx_sess *s = ud;
	(void)fd;
	(void)what;
	if (!s->busy)
		return;
	if (!s->interrupted) {
		s->timed_out = true;
		interrupt(s);
		return;
	}
	/* still running GRACE_MS after SIGINT: the shell goes, out_done ends
	 * the run and the session */
	call_pid(s, SBX_OP_PROC_KILL, 0, &kill_cbs, &s->kill_op);
}

/* ---- create ---- */

int sup_osbx_parse_sess_create(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "cwd", NULL };
	sup_oq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	q->x = ctx;
	q->id = in->id;
	sbx_proto_args_init(&q->args);
	if (in->body_len && sup_http_in_json(in, keys, &j, err) < 0)
		return err->code;
	json_t *cwd = json_object_get(j, "cwd");
	if (cwd && !json_is_null(cwd) && !json_is_string(cwd))
		return sbx_err_set(err, -EINVAL, "field \"cwd\": want a folder's path");
	json_t *p = json_pack("{s:[s,s,s], s:b, s:s, s:i}", "argv", "bash", "--noprofile", "--norc", "stdin",
			      1, "tag", SESS_TAG, "buffer", (int)SESS_RING);
	if (p && json_is_string(cwd) && json_string_length(cwd))
		json_object_set(p, "cwd", cwd);
	int rc = p ? sup_api_parse_process_start(p, &q->spec, &q->args, err)
		   : sbx_err_set(err, -ENOMEM, "out of memory");
	json_decref(p);
	return rc;
}

static void start_done(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	osbx_sess *s = ud;
	sup_oq *q = s->creator;
	sbx_err e;
	uint64_t pid = 0;
	const char *st;
	size_t sl;
	int64_t code = 0;
	sbx_err_clear(&e);
	s->start_op = NULL;
	if (rc < 0)
		e = *err;
	else if (!sbx_proto_get_uint(res, "pid", &pid) || pid < 1 || pid > INT_MAX)
		sbx_err_set(&e, -EPROTO, "agent: proc.start without a pid");
	else if (sbx_proto_get_str(res, "state", &st, &sl) && sl == 6 && memcmp(st, "exited", 6) == 0)
		sbx_err_set(&e, -EINVAL, "the session's bash exited at once (exit code %lld): is bash in the image?",
			    sbx_proto_get_int(res, "exit_code", &code) ? (long long)code : -1LL);
	s->pid = (long)pid;
	if (!e.code) {
		sbx_proto_args a;
		sbx_proto_args_init(&a);
		sbx_proto_args_uint(&a, "pid", pid);
		sbx_proto_args_bool(&a, "eof", false);
		if (sup_core_call(s->x->core, s->sid, SBX_OP_PROC_STDIN, &a, &in_cbs, s, &s->in_op, &e) == 0) {
			sbx_proto_args_init(&a);
			sbx_proto_args_uint(&a, "pid", pid);
			sbx_proto_args_uint(&a, "offset", 0);
			sbx_proto_args_bool(&a, "follow", true);
			sup_core_call(s->x->core, s->sid, SBX_OP_PROC_OUTPUT, &a, &out_cbs, s, &s->out_op, &e);
		}
	}
	if (e.code) {
		if (e.code == -EPROTO)
			sup_core_blame(s->x->core, s->sid, &e);
		if (pid) {
			/* the shell started: it goes, answered to nobody */
			sup_op *op;
			sbx_err ke;
			sbx_proto_args a;
			sbx_proto_args_init(&a);
			sbx_proto_args_uint(&a, "pid", pid);
			sup_core_call(s->x->core, s->sid, SBX_OP_PROC_KILL, &a, &forget_cbs, NULL, &op, &ke);
		}
		sess_free(s);
		sup_http_fail(q->r, &e);
		return;
	}
	/* a SIGINT ends the run's loop (and the command), not the shell */
	evbuffer_add_printf(s->typed, "trap 'break 1000 2>/dev/null' INT\n");
	in_pump(s);
	s->creator = NULL;
	q->sess = NULL;
	sup_http_log_tag(q->r, " %s pid %ld", s->id, s->pid);
	sup_http_json(q->r, 200, json_pack("{s:s}", "session_id", s->id));
}

static const sup_core_call_cbs start_cbs = { .on_done = start_done };

int sup_osbx_act_sess_create(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	sup_osbx_ctx *x = q->x;
	const sup_tenant *who = sup_http_input(r)->who;
	const sup_env *env = NULL;
	char rnd[2 * SESS_ID_BYTES + 1];
	unsigned n = 0;
	q->r = r;
	for (osbx_sess *s = x->sessions; s; s = s->next)
		n += strcmp(s->sid, q->id) == 0;
	if (n >= SESS_MAX)
		return sbx_err_set(err, -EBUSY, "sandbox %s has %d sessions: delete one first", q->id, SESS_MAX);
	int rc = sup_core_command_prepare(x->core, q->id, &q->spec, &env, err);
	if (rc == 0)
		rc = sup_agent_encode_exec_args(&q->spec, env, &q->args, err);
	if (rc < 0)
		return rc;
	osbx_sess *s = calloc(1, sizeof(*s));
	if (!s || !(s->typed = evbuffer_new()) ||
	    !(s->timer = evtimer_new(sup_http_base(r), on_timer, s))) {
		if (s && s->typed)
			evbuffer_free(s->typed);
		free(s);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	s->x = x;
	snprintf(s->sid, sizeof(s->sid), "%s", q->id);
	snprintf(s->tenant, sizeof(s->tenant), "%s", who ? who->name : "");
	rc = sup_random_hex(rnd, SESS_ID_BYTES, err);
	if (rc == 0)
		rc = sup_random_hex(s->tok, TOK_BYTES, err);
	snprintf(s->id, sizeof(s->id), "sess-%s", rnd);
	s->next = x->sessions;
	x->sessions = s;
	s->creator = q;
	q->sess = s;
	if (rc == 0)
		rc = sup_core_call(x->core, q->id, SBX_OP_PROC_START, &q->args, &start_cbs, s, &s->start_op, err);
	if (rc < 0) {
		sess_free(s);
		q->sess = NULL;
	}
	return rc;
}

/* ---- run ---- */

int sup_osbx_parse_sess_run(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	static const char *const keys[] = { "command", "cwd", "timeout", NULL };
	sup_oq *q = state;
	SBX_AUTO_JSON json_t *j = NULL;
	q->x = ctx;
	q->id = in->id;
	sbx_proto_args_init(&q->args);
	if (sup_http_in_json(in, keys, &j, err) < 0)
		return err->code;
	json_t *c = json_object_get(j, "command"), *d = json_object_get(j, "cwd");
	json_t *t = json_object_get(j, "timeout");
	if (!json_is_string(c) || !json_string_length(c) ||
	    strlen(json_string_value(c)) != json_string_length(c))
		return sbx_err_set(err, -EINVAL, "field \"command\": want a non-empty string without NUL");
	if (d && !json_is_null(d) &&
	    (!json_is_string(d) || strlen(json_string_value(d)) != json_string_length(d)))
		return sbx_err_set(err, -EINVAL, "field \"cwd\": want a folder's path");
	if (t && !json_is_null(t) &&
	    (!json_is_integer(t) || json_integer_value(t) < 0 || json_integer_value(t) > RUN_MAX_MS))
		return sbx_err_set(err, -EINVAL, "field \"timeout\": want milliseconds, 0..%u", RUN_MAX_MS);
	q->timeout_ms = json_is_integer(t) && json_integer_value(t) ? (uint64_t)json_integer_value(t) : RUN_MAX_MS;
	q->command = strdup(json_string_value(c));
	if (json_is_string(d) && json_string_length(d))
		q->cwd = strdup(json_string_value(d));
	if (!q->command || (json_is_string(d) && json_string_length(d) && !q->cwd))
		return sbx_err_set(err, -ENOMEM, "out of memory");
	return 0;
}

/* s as one shell word: '...' with each ' as '\'' */
static void quote(struct evbuffer *b, const char *s)
{
	evbuffer_add(b, "'", 1);
	for (const char *q; (q = strchr(s, '\'')); s = q + 1) {
		evbuffer_add(b, s, (size_t)(q - s));
		evbuffer_add(b, "'\\''", 4);
	}
	evbuffer_add(b, s, strlen(s));
	evbuffer_add(b, "'", 1);
}

int sup_osbx_act_sess_run(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	q->r = r;
	osbx_sess *s = find(q->x, q, sup_http_input(r)->pid);
	if (!s || !s->in_op)
		return sbx_err_set(err, -ENOENT, "session %.64s not found", sup_http_input(r)->pid);
	if (s->busy)
		return sbx_err_set(err, -EBUSY, "session %s is running a command: one at a time", s->id);
	q->s = sup_stream_start(r, SUP_STREAM_BARE, run_credit, q);
	if (!q->s)
		return sbx_err_set(err, -ENOMEM, "out of memory starting the stream");
	sup_http_log_tag(r, " %s", s->id);
	sup_stream_keepalive_text(q->s, SUP_OSBX_PING);
	sup_stream_keepalive(q->s, SUP_OSBX_PING_S);
	s->seq++;
	s->busy = true;
	s->began = false;
	s->seen = 0;
	s->rc = 0;
	s->interrupted = s->timed_out = false;
	s->run = q;
	q->sess = s;
	s->started_ms = sup_osbx_now_ms();
	/* for once; do go; [cd -- 'cwd' &&] eval 'command'; done </dev/null;
	 * then the end markers */
	evbuffer_add_printf(s->typed, "for __sbx_once in 1; do builtin printf '%%s:go\\n' '%s:%llu'; ",
			    s->tok, (unsigned long long)s->seq);
	if (q->cwd) {
		evbuffer_add_printf(s->typed, "cd -- ");
		quote(s->typed, q->cwd);
		evbuffer_add_printf(s->typed, " && ");
	}
	evbuffer_add_printf(s->typed, "eval ");
	quote(s->typed, q->command);
	evbuffer_add_printf(s->typed,
			    "; done </dev/null; builtin printf '\\n%%s:%%d\\n' '%s:%llu' \"$?\"; "
			    "builtin printf '\\n%%s\\n' '%s:%llu' >&2\n",
			    s->tok, (unsigned long long)s->seq, s->tok, (unsigned long long)s->seq);
	struct timeval tv = { (time_t)(q->timeout_ms / 1000), (suseconds_t)(q->timeout_ms % 1000) * 1000 };
	evtimer_add(s->timer, &tv);
	json_t *o = sup_osbx_event("init");
	if (o)
		json_object_set_new(o, "text", json_string(s->id));
	sup_stream_json(q->s, "", o);
	in_pump(s);
	return 0;
}

/* ---- delete, interrupt ---- */

int sup_osbx_parse_sess_delete(const sup_http_in *in, void *ctx, void *state, sbx_err *err)
{
	sup_oq *q = state;
	q->x = ctx;
	q->id = in->id;
	sbx_proto_args_init(&q->args);
	return 0;
}

static void deleted(int rc, const msgpack_object *res, const sbx_err *err, void *ud)
{
	sup_oq *q = ud;
	q->op = NULL;
	/* -ENOENT: the shell had exited already */
	if (rc < 0 && err->code != -ENOENT)
		sup_http_fail(q->r, err);
	else
		sup_http_json(q->r, 200, NULL);
}

static const sup_core_call_cbs deleted_cbs = { .on_done = deleted };

/* The session goes from the table at once (a run on it is then 404); its
 * shell is killed before the answer. */
int sup_osbx_act_sess_delete(sup_http_req *r, void *state, sbx_err *err)
{
	sup_oq *q = state;
	q->r = r;
	osbx_sess *s = find(q->x, q, sup_http_input(r)->pid);
	if (!s)
		return sbx_err_set(err, -ENOENT, "session %.64s not found", sup_http_input(r)->pid);
	sup_http_log_tag(r, " %s", s->id);
	long pid = s->pid;
	if (s->busy)
		run_end(s, sup_osbx_error_event("SessionDeleted", "137"));
	sess_free(s);
	sbx_proto_args_uint(&q->args, "pid", (uint64_t)pid);
	return sup_core_call(q->x->core, q->id, SBX_OP_PROC_KILL, &q->args, &deleted_cbs, q, &q->op, err);
}

int sup_osbx_sess_interrupt(sup_oq *q, sbx_err *err)
{
	osbx_sess *s = find(q->x, q, q->target);
	if (!s)
		return sbx_err_set(err, -ENOENT, "session %s not found", q->target);
	interrupt(s);
	sup_http_json(q->r, 200, NULL);
	return 0;
}

/* The request goes (answered, or the client left): a create still
 * starting is withdrawn (the agent kills what it started), a run still
 * going is interrupted. */
void sup_osbx_sess_release(sup_oq *q)
{
	osbx_sess *s = q->sess;
	free(q->command);
	free(q->cwd);
	q->command = q->cwd = NULL;
	if (!s)
		return;
	q->sess = NULL;
	if (s->creator == q) {
		s->creator = NULL;
		sess_free(s);
		return;
	}
	if (s->run == q) {
		detach_run(s);
		interrupt(s);
	}
}
