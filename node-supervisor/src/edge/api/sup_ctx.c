/* The contexts' engine (sup_ctx.h): contexts, their sessions on the
 * context driver, their start, death and restart. Their cells are
 * sup_ctx_run.c's. */
#include "sup_ctx_engine_int.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include "sbx/clock.h"
#include "sbx/proto_mcp.h"
#include "sup_core_mcp.h"
#include "sup_log.h"
#include "sup_token.h"

/* ---- small things ---- */

static void server_name(sup_ctx_lang l, char *out, size_t cap)
{
	snprintf(out, cap, "sbx-ctx-%s", sup_ctx_lang_name(l));
}

context *sup_ctx_find(sup_ctx_engine *e, const char *sid, const char *id)
{
	context *c;

	TAILQ_FOREACH (c, &e->all, link)
		if (strcmp(c->sid, sid) == 0 && strcmp(c->id, id) == 0)
			return c;
	return NULL;
}

static size_t count(sup_ctx_engine *e, const char *sid, int lang, const context *but)
{
	size_t n = 0;
	context *c;

	TAILQ_FOREACH (c, &e->all, link)
		if (c != but && strcmp(c->sid, sid) == 0 && (lang < 0 || (int)c->lang == lang))
			n++;
	return n;
}

/* ---- lines to the driver ---- */

static void pump(context *c)
{
	while (!c->busy && c->nout > 0 && c->sess) {
		sbx_err err = { 0 };
		char *line = c->outq[0];
		size_t n = c->outn[0];

		memmove(c->outq, c->outq + 1, sizeof(c->outq[0]) * (size_t)(c->nout - 1));
		memmove(c->outn, c->outn + 1, sizeof(c->outn[0]) * (size_t)(c->nout - 1));
		c->nout--;
		/* busy before the send: a line that goes at once calls
		 * on_writable from inside it, which clears busy again */
		c->busy = true;
		if (sup_agent_mcp_send(c->sess, line, n, &err) < 0) {
			c->busy = false;
			sup_warn("sandbox %s: context %s: a line to the driver: %s", c->sid, c->id, err.msg);
		}
		free(line);
	}
}

/* obj (reference stolen) as one JSON-RPC line; id 0: a notification. */
int sup_ctx_send(context *c, uint64_t id, const char *method, json_t *params)
{
	json_t *m = json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", method, "params",
			      params ? params : json_object());
	char *line;

	if (m && id)
		json_object_set_new(m, "id", json_integer((json_int_t)id));
	line = m ? json_dumps(m, JSON_COMPACT) : NULL;
	json_decref(m);
	if (!line || c->nout == OUTQ) {
		free(line);
		return -ENOBUFS;
	}
	c->outq[c->nout] = line;
	c->outn[c->nout++] = strlen(line);
	pump(c);
	return 0;
}

static void drop_outq(context *c)
{
	for (int i = 0; i < c->nout; i++)
		free(c->outq[i]);
	c->nout = 0;
	c->busy = false;
}

/* ---- rendering ---- */

static const char *state_name(const context *c)
{
	if (c->state == ST_STARTING)
		return "starting";
	if (c->state == ST_DEAD)
		return "dead";
	return c->run && c->run->req ? "running" : "ready";
}

static json_t *render(const context *c)
{
	char when[32];
	struct tm tm;
	json_t *o;

	gmtime_r(&c->created_at, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	o = json_pack("{s:s,s:s,s:b,s:s,s:s?,s:I,s:s}", "id", c->id, "language", sup_ctx_lang_name(c->lang),
		      "default", c->is_default, "state", state_name(c), "cwd", c->cwd, "executions",
		      (json_int_t)c->executions, "created_at", when);
	if (!o)
		return NULL;
	if (c->pid > 0)
		json_object_set_new(o, "pid", json_integer(c->pid));
	if (c->version[0])
		json_object_set_new(o, "version", json_string(c->version));
	if (c->env)
		json_object_set(o, "env", c->env);
	if (c->state == ST_DEAD)
		json_object_set_new(o, "error", json_pack("{s:s,s:s,s:b}", "code", "context_died", "message",
							   c->reason, "oom", c->oom));
	return o;
}

/* ---- waiters ---- */

static void answer_waits(context *c, int rc, const sbx_err *err)
{
	sup_ctx_wait *w;

	while ((w = TAILQ_FIRST(&c->waits))) {
		TAILQ_REMOVE(&c->waits, w, link);
		json_t *o = rc == 0 ? render(c) : NULL;
		w->cb(rc, o, err, w->ud);
		json_decref(o);
		free(w);
	}
}

static int add_wait(context *c, sup_ctx_ready_cb cb, void *ud, sup_ctx_wait **out, sbx_err *err)
{
	sup_ctx_wait *w = calloc(1, sizeof(*w));

	if (!w)
		return sbx_err_set(err, -ENOMEM, "out of memory");
	w->c = c;
	w->cb = cb;
	w->ud = ud;
	TAILQ_INSERT_TAIL(&c->waits, w, link);
	*out = w;
	return 0;
}

void sup_ctx_wait_cancel(sup_ctx_wait *w)
{
	if (!w)
		return;
	TAILQ_REMOVE(&w->c->waits, w, link);
	free(w);
}

/* ---- the context's end and death ---- */

static void removed(int rc, const sbx_proto_mcp_status *st, size_t n, const sbx_err *err, void *ud)
{
	if (rc < 0 && rc != -ENOENT)
		sup_debug("context server not removed: %s", err ? err->msg : "");
}

/* Forget c: its session killed, its waiters and run answered with err. */
void sup_ctx_free(context *c, int rc, const sbx_err *err)
{
	sup_ctx_engine *e = c->e;
	char name[SBX_MCP_NAME_MAX + 1];
	sbx_err e2 = { 0 };

	TAILQ_REMOVE(&e->all, c, link);
	if (c->tk)
		c->tk->c = NULL;
	if (c->sess)
		sup_agent_mcp_cancel(c->sess);
	c->sess = NULL;
	if (c->start_timer)
		event_free(c->start_timer);
	drop_outq(c);
	if (c->run)
		sup_ctx_run_end(c->run, rc, NULL, err);
	answer_waits(c, rc, err);
	/* The last context of its language here: its server (and the warm
	 * spare the agent keeps) goes too. */
	if (rc != -ENOENT && count(e, c->sid, (int)c->lang, NULL) == 0) {
		server_name(c->lang, name, sizeof(name));
		if (sup_core_mcp_remove(e->core, c->sid, name, removed, NULL, &e2) < 0)
			sup_debug("sandbox %s: context server %s not removed: %s", c->sid, name, e2.msg);
	}
	free(c->cwd);
	json_decref(c->env);
	free(c);
}

static void ctx_die(context *c, const char *reason, bool oom)
{
	sbx_err err = { 0 };

	if (c->sess)
		sup_agent_mcp_cancel(c->sess);
	c->sess = NULL;
	drop_outq(c);
	evtimer_del(c->start_timer);
	c->state = ST_DEAD;
	snprintf(c->reason, sizeof(c->reason), "%s", reason);
	c->oom = oom;
	sup_info("sandbox %s: context %s died: %s", c->sid, c->id, reason);
	sbx_err_set(&err, -EOWNERDEAD, "context %s died: %s", c->id, reason);
	if (c->run)
		sup_ctx_run_end(c->run, -EOWNERDEAD, NULL, &err);
	answer_waits(c, -EOWNERDEAD, &err);
}

/* ---- the session ---- */

static void on_opened(sup_mcp_session *s, int64_t pid, bool spare, void *ud)
{
	context *c = ud;
	json_t *p = json_pack("{s:s?,s:O?}", "cwd", c->cwd, "env", c->env);

	c->init_req = ++c->next_req;
	if (sup_ctx_send(c, c->init_req, "init", p) < 0)
		ctx_die(c, "the context's init could not be sent", false);
}

static void init_answer(context *c, sup_ctx_msg *m)
{
	sbx_err err = { 0 };

	c->init_req = 0;
	if (!m->result) {
		/* cwd or env refused inside (a folder that is not there) */
		sbx_err_set(&err, -EINVAL, "context %s: %s", c->id, m->failed);
		if (!c->was_ready)
			sup_ctx_free(c, -EINVAL, &err);
		else
			ctx_die(c, m->failed, false);
		return;
	}
	json_t *pid = json_object_get(m->result, "pid"), *ver = json_object_get(m->result, "version");
	c->pid = json_is_integer(pid) && json_integer_value(pid) > 0 ? json_integer_value(pid) : 0;
	snprintf(c->version, sizeof(c->version), "%s", json_is_string(ver) ? json_string_value(ver) : "");
	for (char *p = c->version; *p; p++)
		if ((unsigned char)*p < 0x20)
			*p = '?';
	evtimer_del(c->start_timer);
	c->state = ST_READY;
	c->was_ready = true;
	answer_waits(c, 0, NULL);
	sup_ctx_run_send(c);
}

static void on_message(sup_mcp_session *s, const char *line, size_t len, void *ud)
{
	context *c = ud;
	sup_ctx_msg m;
	sbx_err err = { 0 };

	if (sup_ctx_msg_parse(line, len, &m, &err) < 0) {
		sup_debug("sandbox %s: context %s: a line of the driver ignored: %s", c->sid, c->id, err.msg);
		return;
	}
	switch (m.kind) {
	case SUP_CTX_MSG_ANSWER:
		if (c->init_req && m.id == c->init_req)
			init_answer(c, &m);
		else if (c->run && c->run->req && m.id == c->run->req)
			sup_ctx_run_answer(c, &m);
		break;
	case SUP_CTX_MSG_STDOUT:
	case SUP_CTX_MSG_STDERR:
	case SUP_CTX_MSG_RESULT:
	case SUP_CTX_MSG_ERROR:
		if (c->run && c->run->req)
			sup_ctx_deliver(c->run, m.kind, m.event, len);
		break;
	case SUP_CTX_MSG_DIED:
		snprintf(c->reason, sizeof(c->reason), "%s", m.reason);
		c->oom = m.oom;
		break;
	default:
		break;
	}
	sup_ctx_msg_free(&m);
}

static void on_writable(sup_mcp_session *s, void *ud)
{
	context *c = ud;

	c->busy = false;
	pump(c);
}

static void on_done(sup_mcp_session *s, int rc, const sup_exec_status *st, const sbx_err *err, void *ud)
{
	context *c = ud;
	sbx_err e = { 0 };
	char why[SUP_CTX_REASON_MAX];

	c->sess = NULL;
	c->busy = false;
	if (!sup_core_agent(c->e->core, c->sid, &e) && e.code != -EHOSTDOWN) {
		sbx_err_set(&e, -ENOENT, "sandbox %s is gone", c->sid);
		sup_ctx_free(c, -ENOENT, &e);
		return;
	}
	if (rc == -ENOENT && c->state == ST_STARTING && !c->reopened) {
		/* its server was removed under it (an MCP route): made again */
		c->reopened = true;
		c->configure = true;
		sup_ctx_start(c);
		return;
	}
	if (c->reason[0])
		snprintf(why, sizeof(why), "%s", c->reason);
	else if (rc < 0)
		snprintf(why, sizeof(why), "%s", err ? err->msg : "the driver's session ended");
	else
		snprintf(why, sizeof(why), "the context driver exited");
	if (c->state == ST_STARTING && !c->was_ready) {
		sbx_err_set(&e, -ENOEXEC,
			    "this sandbox cannot run %s contexts (its image needs %s; sbx/code-interpreter has it): %s",
			    sup_ctx_lang_name(c->lang), SUP_CTX_DRIVER, why);
		sup_ctx_free(c, -ENOEXEC, &e);
		return;
	}
	ctx_die(c, why, c->oom);
}

static const sup_mcp_session_cbs session_cbs = {
	.on_opened = on_opened,
	.on_message = on_message,
	.on_writable = on_writable,
	.on_done = on_done,
};

/* ---- starting ---- */

static void start_timeout(evutil_socket_t fd, short what, void *ud)
{
	context *c = ud;
	sbx_err err = { 0 };

	sbx_err_set(&err, -ETIMEDOUT, "context %s: its interpreter was not ready within %u s", c->id,
		    SUP_CTX_START_MS / 1000);
	if (!c->was_ready)
		sup_ctx_free(c, -ETIMEDOUT, &err);
	else
		ctx_die(c, "its interpreter was not ready in time after a restart", false);
}

static void open_session(context *c)
{
	char name[SBX_MCP_NAME_MAX + 1];
	sbx_err err = { 0 };

	server_name(c->lang, name, sizeof(name));
	if (sup_core_mcp_open(c->e->core, c->sid, name, 0, &session_cbs, c, &c->sess, &err) < 0) {
		c->sess = NULL;
		if (!c->was_ready)
			sup_ctx_free(c, err.code, &err);
		else
			ctx_die(c, err.msg, false);
	}
}

static void configured(int rc, const sbx_proto_mcp_status *st, size_t n, const sbx_err *err, void *ud)
{
	ctx_ticket *tk = ud;
	context *c = tk->c;

	free(tk);
	if (!c)
		return;
	c->tk = NULL;
	if (rc < 0) {
		if (!c->was_ready)
			sup_ctx_free(c, rc, err);
		else
			ctx_die(c, err ? err->msg : "its server could not be configured", false);
		return;
	}
	open_session(c);
}

void sup_ctx_start(context *c)
{
	struct timeval tv = { SUP_CTX_START_MS / 1000, 0 };
	sup_mcp_server srv = { 0 };
	char name[SBX_MCP_NAME_MAX + 1];
	char *argv[3];
	sbx_err err = { 0 };

	c->state = ST_STARTING;
	c->reason[0] = '\0';
	c->oom = false;
	c->pid = 0;
	c->init_req = 0;
	evtimer_add(c->start_timer, &tv);
	if (!c->configure) {
		open_session(c);
		return;
	}
	c->configure = false;
	server_name(c->lang, name, sizeof(name));
	argv[0] = (char *)SUP_CTX_DRIVER;
	argv[1] = (char *)sup_ctx_lang_name(c->lang);
	argv[2] = NULL;
	srv = (sup_mcp_server){ .name = name, .argv = argv, .argc = 2, .max_line = SBX_MCP_MAX_MAX_LINE };
	c->tk = calloc(1, sizeof(*c->tk));
	if (!c->tk) {
		sbx_err_set(&err, -ENOMEM, "out of memory");
		sup_ctx_free(c, -ENOMEM, &err);
		return;
	}
	c->tk->c = c;
	if (sup_core_mcp_configure(c->e->core, c->sid, &srv, configured, c->tk, &err) < 0) {
		free(c->tk);
		c->tk = NULL;
		sup_ctx_free(c, err.code, &err);
	}
}

context *sup_ctx_new(sup_ctx_engine *e, const char *sid, sup_ctx_lang lang, const char *id, sbx_err *err)
{
	context *c = calloc(1, sizeof(*c));

	if (!c) {
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	c->e = e;
	c->lang = lang;
	snprintf(c->sid, sizeof(c->sid), "%s", sid);
	if (id) {
		snprintf(c->id, sizeof(c->id), "%s", id);
		c->is_default = true;
	} else {
		memcpy(c->id, "ctx-", 4);
		if (sup_random_hex(c->id + 4, 12, err) < 0) {
			free(c);
			return NULL;
		}
	}
	c->start_timer = evtimer_new(e->base, start_timeout, c);
	if (!c->start_timer) {
		free(c);
		sbx_err_set(err, -ENOMEM, "out of memory");
		return NULL;
	}
	c->created_at = time(NULL);
	c->configure = count(e, sid, (int)lang, NULL) == 0;
	TAILQ_INIT(&c->waits);
	TAILQ_INSERT_TAIL(&e->all, c, link);
	return c;
}

int sup_ctx_check_sandbox(sup_ctx_engine *e, const char *sid, sbx_err *err)
{
	if (!sup_core_agent(e->core, sid, err))
		return err->code ? err->code : sbx_err_set(err, -ENOENT, "sandbox %s: not found", sid);
	if (count(e, sid, -1, NULL) >= SUP_CTX_MAX)
		return sbx_err_set(err, -EBUSY, "sandbox %s has %d contexts, the most it may: delete one first", sid,
				   SUP_CTX_MAX);
	return 0;
}

/* ---- the engine's calls ---- */

sup_ctx_engine *sup_ctx_engine_new(struct event_base *base, sup_core *core, size_t max_output)
{
	sup_ctx_engine *e = calloc(1, sizeof(*e));

	if (!e)
		return NULL;
	e->base = base;
	e->core = core;
	e->max_output = max_output ? max_output : DEFAULT_MAX_OUTPUT;
	TAILQ_INIT(&e->all);
	return e;
}

void sup_ctx_engine_free(sup_ctx_engine *e)
{
	context *c;

	if (!e)
		return;
	while ((c = TAILQ_FIRST(&e->all))) {
		sup_ctx_wait *w;
		TAILQ_REMOVE(&e->all, c, link);
		if (c->tk)
			c->tk->c = NULL;
		if (c->sess)
			sup_agent_mcp_cancel(c->sess);
		event_free(c->start_timer);
		drop_outq(c);
		if (c->run)
			sup_ctx_run_free(c->run);
		while ((w = TAILQ_FIRST(&c->waits))) {
			TAILQ_REMOVE(&c->waits, w, link);
			free(w);
		}
		free(c->cwd);
		json_decref(c->env);
		free(c);
	}
	free(e);
}

int sup_ctx_create(sup_ctx_engine *e, const char *sid, sup_ctx_spec *spec, sup_ctx_ready_cb cb, void *ud,
		   sup_ctx_wait **w, sbx_err *err)
{
	context *c = NULL;
	int rc = sup_ctx_check_sandbox(e, sid, err);

	if (rc == 0 && !(c = sup_ctx_new(e, sid, spec->lang, NULL, err)))
		rc = err->code;
	if (rc < 0 || !c) {
		sup_ctx_spec_free(spec);
		return rc;
	}
	c->cwd = spec->cwd;
	c->env = spec->env;
	spec->cwd = NULL;
	spec->env = NULL;
	if (add_wait(c, cb, ud, w, err) < 0) {
		sup_ctx_free(c, err->code, err);
		return -ENOMEM;
	}
	sup_ctx_start(c);
	return 0;
}

/* Kill c's interpreter and start another (same cwd and env). */
void sup_ctx_restart_now(context *c, bool for_timeout)
{
	sup_ctx_run *r = c->run;
	sbx_err err = { 0 };

	if (c->sess)
		sup_agent_mcp_cancel(c->sess);
	c->sess = NULL;
	drop_outq(c);
	if (r && for_timeout) {
		json_t *extra = json_pack("{s:b}", "restarted", true);
		char msg[160];
		snprintf(msg, sizeof(msg),
			 "the cell ran past its timeout of %.3g s and did not stop when interrupted: its context was restarted (its state is lost)",
			 (double)r->cell.timeout_ms / 1000);
		json_decref(r->error);
		r->error = json_pack("{s:s,s:s,s:[]}", "name", "TimeoutError", "value", msg, "traceback");
		if (r->cbs.on_event && !r->cancelled)
			sup_ctx_deliver(r, SUP_CTX_MSG_ERROR, r->error, strlen(msg));
		sup_ctx_run_end(r, 0, extra, NULL);
		json_decref(extra);
	} else if (r) {
		sbx_err_set(&err, -ECANCELED, "context %s was restarted", c->id);
		sup_ctx_run_end(r, -ECANCELED, NULL, &err);
	}
	sup_ctx_start(c);
}

int sup_ctx_restart(sup_ctx_engine *e, const char *sid, const char *id, sup_ctx_ready_cb cb, void *ud,
		    sup_ctx_wait **w, sbx_err *err)
{
	context *c = sup_ctx_find(e, sid, id);

	if (!c)
		return sbx_err_set(err, -ENOENT, "context %s: not found", id);
	if (add_wait(c, cb, ud, w, err) < 0)
		return err->code;
	if (c->state == ST_STARTING && !c->sess && c->tk)
		return 0; /* its server is being configured: that start serves */
	sup_ctx_restart_now(c, false);
	return 0;
}

json_t *sup_ctx_list(sup_ctx_engine *e, const char *sid)
{
	json_t *arr = json_array();
	context *c;

	TAILQ_FOREACH (c, &e->all, link)
		if (strcmp(c->sid, sid) == 0)
			json_array_append_new(arr, render(c));
	return json_pack("{s:o}", "contexts", arr);
}

json_t *sup_ctx_get(sup_ctx_engine *e, const char *sid, const char *id, sbx_err *err)
{
	context *c = sup_ctx_find(e, sid, id);

	if (!c) {
		sbx_err_set(err, -ENOENT, "context %s: not found", id);
		return NULL;
	}
	return render(c);
}

int sup_ctx_delete(sup_ctx_engine *e, const char *sid, const char *id, sbx_err *err)
{
	context *c = sup_ctx_find(e, sid, id);
	sbx_err gone = { 0 };

	if (!c)
		return sbx_err_set(err, -ENOENT, "context %s: not found", id);
	sbx_err_set(&gone, -ECANCELED, "context %s was deleted", id);
	sup_ctx_free(c, -ECANCELED, &gone);
	return 0;
}

int sup_ctx_interrupt(sup_ctx_engine *e, const char *sid, const char *id, bool *running, sbx_err *err)
{
	context *c = sup_ctx_find(e, sid, id);

	if (!c)
		return sbx_err_set(err, -ENOENT, "context %s: not found", id);
	*running = c->run && c->run->req;
	if (*running && sup_ctx_send(c, 0, "interrupt", NULL) < 0)
		return sbx_err_set(err, -EBUSY, "context %s: too many lines waiting for its driver", id);
	return 0;
}

