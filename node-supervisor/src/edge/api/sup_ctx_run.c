/* The contexts' cells (sup_ctx.h): one run at a time per context, its
 * output to the caller as it comes (with credit) or collected up to
 * max_output, its timeout, then the grace before its context's restart. */
#include "sup_ctx_engine_int.h"

#include <errno.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sbx/clock.h"
#include "sbx/grow.h"
#include "sup_log.h"

/* n more bytes of a collected stream, kept NUL-terminated; bound: the
 * engine's max_output (collect checks it first). */
static bool text_add(ctx_text *b, const char *p, size_t n, size_t max)
{
	if (sbx_grow(&b->p, &b->cap, b->n + n, 1, 256, max + 1) < 0)
		return false;
	memcpy(b->p + b->n, p, n);
	b->n += n;
	b->p[b->n] = '\0';
	return true;
}

void sup_ctx_run_free(sup_ctx_run *r)
{
	if (r->timer)
		event_free(r->timer);
	sup_ctx_cell_free(&r->cell);
	json_decref(r->results);
	json_decref(r->error);
	free(r->out.p);
	free(r->err.p);
	free(r);
}

/* The run's end: detached from its context, then its caller's on_done. */
void sup_ctx_run_end(sup_ctx_run *r, int rc, json_t *extra, const sbx_err *err)
{
	context *c = r->c;
	json_t *ans = NULL;

	if (c && c->run == r)
		c->run = NULL;
	if (c && c->sess && r->paused)
		sup_agent_mcp_resume(c->sess);
	if (rc == 0) {
		ans = json_pack("{s:I,s:I,s:b}", "execution_count", (json_int_t)(c ? c->executions : 0),
				"duration_ms", (json_int_t)(sbx_now_ms() - r->started_ms), "timed_out", r->timed_out);
		if (ans && !r->cbs.on_event) {
			json_object_set(ans, "results", r->results);
			json_object_set_new(ans, "stdout", json_stringn(r->out.p ? r->out.p : "", r->out.n));
			json_object_set_new(ans, "stderr", json_stringn(r->err.p ? r->err.p : "", r->err.n));
			json_object_set(ans, "error", r->error ? r->error : json_null());
			json_object_set_new(ans, "truncated", json_boolean(r->truncated));
		}
		if (ans && extra)
			json_object_update(ans, extra);
	}
	if (!r->cancelled)
		r->cbs.on_done(rc, ans, err, r->ud);
	json_decref(ans);
	sup_ctx_run_free(r);
}

static void run_fail(sup_ctx_run *r, int code, const char *why)
{
	sbx_err err = { 0 };

	sbx_err_set(&err, code, "%s", why);
	sup_ctx_run_end(r, code, NULL, &err);
}

/* Collected: output past max_output is dropped (truncated). */
static void collect(sup_ctx_run *r, sup_ctx_msg_kind kind, json_t *ev)
{
	size_t cost = 0;
	json_t *text = json_object_get(ev, "text");

	if (kind == SUP_CTX_MSG_STDOUT || kind == SUP_CTX_MSG_STDERR)
		cost = json_string_length(text);
	else if (kind == SUP_CTX_MSG_RESULT) {
		const char *k;
		json_t *v;
		json_object_foreach (json_object_get(ev, "data"), k, v)
			cost += strlen(k) + json_string_length(v);
	} else if (kind == SUP_CTX_MSG_ERROR) {
		/* the cell's one error is always kept (the driver bounds it) */
		json_decref(r->error);
		r->error = json_incref(ev);
		return;
	}
	if (r->bytes + cost > r->c->e->max_output) {
		r->truncated = true;
		return;
	}
	r->bytes += cost;
	if (kind == SUP_CTX_MSG_RESULT)
		json_array_append(r->results, ev);
	else if (!text_add(kind == SUP_CTX_MSG_STDOUT ? &r->out : &r->err, json_string_value(text), cost,
			  r->c->e->max_output))
		r->truncated = true;
}

static const char *event_name(sup_ctx_msg_kind k)
{
	switch (k) {
	case SUP_CTX_MSG_STDOUT:
		return "stdout";
	case SUP_CTX_MSG_STDERR:
		return "stderr";
	case SUP_CTX_MSG_RESULT:
		return "result";
	default:
		return "error";
	}
}

void sup_ctx_deliver(sup_ctx_run *r, sup_ctx_msg_kind kind, json_t *ev, size_t len)
{
	if (r->cancelled)
		return;
	if (!r->cbs.on_event) {
		collect(r, kind, ev);
		return;
	}
	r->outstanding += len;
	r->cbs.on_event(event_name(kind), json_incref(ev), len, r->ud);
	if (r->outstanding > PAUSE_AT && !r->paused && r->c && r->c->sess) {
		r->paused = true;
		sup_agent_mcp_pause(r->c->sess);
	}
}

void sup_ctx_run_consumed(sup_ctx_run *r, size_t cost)
{
	r->outstanding = cost > r->outstanding ? 0 : r->outstanding - cost;
	if (r->paused && r->outstanding < RESUME_AT) {
		r->paused = false;
		if (r->c && r->c->sess)
			sup_agent_mcp_resume(r->c->sess);
	}
}

static void run_timer(evutil_socket_t fd, short what, void *ud)
{
	sup_ctx_run *r = ud;
	context *c = r->c;
	struct timeval tv = { SUP_CTX_GRACE_MS / 1000, (SUP_CTX_GRACE_MS % 1000) * 1000 };

	if (!r->in_grace) {
		/* Past its timeout: interrupted, with a grace to stop. */
		r->timed_out = !r->cancelled;
		r->in_grace = true;
		if (sup_ctx_send(c, 0, "interrupt", NULL) < 0)
			sup_warn("sandbox %s: context %s: the interrupt could not be sent", c->sid, c->id);
		evtimer_add(r->timer, &tv);
		return;
	}
	sup_info("sandbox %s: context %s: a cell did not stop %u ms after its interrupt: restarted", c->sid,
		 c->id, SUP_CTX_GRACE_MS);
	sup_ctx_restart_now(c, true);
}

void sup_ctx_run_send(context *c)
{
	sup_ctx_run *r = c->run;
	struct timeval tv;

	if (!r || r->req || c->state != ST_READY)
		return;
	r->req = ++c->next_req;
	r->started_ms = sbx_now_ms();
	if (sup_ctx_send(c, r->req, "run", json_pack("{s:s}", "code", r->cell.code)) < 0) {
		run_fail(r, -ENOMEM, "the cell could not be sent");
		return;
	}
	tv.tv_sec = (time_t)(r->cell.timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)(r->cell.timeout_ms % 1000) * 1000;
	evtimer_add(r->timer, &tv);
}

void sup_ctx_run_answer(context *c, sup_ctx_msg *m)
{
	sup_ctx_run *r = c->run;
	json_t *n = m->result ? json_object_get(m->result, "execution_count") : NULL;
	json_t *extra = NULL;

	if (json_is_integer(n) && json_integer_value(n) >= 0)
		c->executions = (uint64_t)json_integer_value(n);
	if (r->timed_out) {
		char msg[128];
		snprintf(msg, sizeof(msg), "the cell ran past its timeout of %.3g s and was interrupted",
			 (double)r->cell.timeout_ms / 1000);
		json_decref(r->error);
		r->error = json_pack("{s:s,s:s,s:[]}", "name", "TimeoutError", "value", msg, "traceback");
		if (r->cbs.on_event)
			sup_ctx_deliver(r, SUP_CTX_MSG_ERROR, r->error, strlen(msg));
	}
	if (!m->result)
		extra = json_pack("{s:s}", "driver_error", m->failed);
	sup_ctx_run_end(r, 0, extra, NULL);
	json_decref(extra);
	sup_ctx_run_send(c);
}

int sup_ctx_run_start(sup_ctx_engine *e, const char *sid, const char *id, sup_ctx_cell *cell,
		      const sup_ctx_run_cbs *cbs, void *ud, sup_ctx_run **out, sbx_err *err)
{
	context *c = sup_ctx_find(e, sid, id);
	int lang = sup_ctx_lang_of(id);
	sup_ctx_run *r;
	bool made = false;

	if (!c && lang < 0)
		return sbx_err_set(err, -ENOENT, "context %s: not found", id);
	if (!c) {
		if (sup_ctx_check_sandbox(e, sid, err) < 0)
			return err->code;
		if (!(c = sup_ctx_new(e, sid, (sup_ctx_lang)lang, id, err)))
			return err->code;
		made = true;
	}
	if (c->run)
		return sbx_err_set(err, -EBUSY, "context %s is running a cell (interrupt it, or wait)", id);
	if (c->state == ST_DEAD)
		return sbx_err_set(err, -EOWNERDEAD, "context %s died: %s (restart it)", id, c->reason);
	r = calloc(1, sizeof(*r));
	if (r) {
		r->timer = evtimer_new(e->base, run_timer, r);
		r->results = json_array();
	}
	if (!r || !r->timer || !r->results) {
		if (r)
			sup_ctx_run_free(r);
		if (made)
			sup_ctx_free(c, -ENOMEM, err);
		return sbx_err_set(err, -ENOMEM, "out of memory");
	}
	r->c = c;
	r->cbs = *cbs;
	r->ud = ud;
	r->cell = *cell;
	memset(cell, 0, sizeof(*cell));
	r->started_ms = sbx_now_ms();
	c->run = r;
	*out = r;
	if (made)
		sup_ctx_start(c); /* may end r at once: it is the caller's on_done */
	else
		sup_ctx_run_send(c);
	return 0;
}

void sup_ctx_run_cancel(sup_ctx_run *r)
{
	context *c;

	if (!r)
		return;
	c = r->c;
	r->cancelled = true;
	if (!r->req) {
		c->run = NULL;
		sup_ctx_run_free(r);
		return;
	}
	/* The cell stops; its end (or the grace's restart) frees r. */
	if (!r->in_grace)
		event_active(r->timer, EV_TIMEOUT, 0);
	if (r->paused && c->sess) {
		r->paused = false;
		sup_agent_mcp_resume(c->sess);
	}
}
