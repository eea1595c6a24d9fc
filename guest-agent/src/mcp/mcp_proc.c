#include "mcp_proc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <jansson.h>

#include "sbx/proto_mcp.h"
#include "log.h"
#include "ring.h"

/* Most read from stdout at once. */
#define MCP_READ_CHUNK (64u << 10)
/* A line buffer that grew past this for a big message shrinks back. */
#define MCP_BUF_KEEP (64u << 10)

struct agent_mcp_proc {
	agent_proc *proc;       /* NULL once it finished */
	const agent_mcp_proc_owner *owner;
	void *ud;
	size_t max_line;
	pid_t pid;

	/* buf[taken, ready): checked lines not yet taken; buf[ready, len): the
	 * line being read. Only read while taken == ready. */
	uint8_t *buf;
	size_t cap, len, ready, taken;
	bool bad;               /* bad_output was reported: read no more */

	sbx_proto_code bad_code; /* to report, with bad_msg */
	char bad_msg[320];
	bool bad_told;

	agent_ring *err_ring;
	bool ended;             /* the process finished; waits for lines taken */
	agent_proc_result result;
	/* Owner calls that may end the session (lines, bad_output, finished)
	 * are made from the loop, never under proc's or the owner's own call
	 * stack: an owner may detach (free this) inside any of them. */
	struct event *notify_ev;

	/* The warm-up ping (agent_mcp_proc_warm): its id, its answer still
	 * awaited, until when it counts as warming, and its stdin bytes not yet
	 * reported (they are no owner's credit). */
	char warm_id[48];
	bool warm_wait;
	struct timespec warm_until;
	size_t warm_unacked;
};

static void mp_free(agent_mcp_proc *m)
{
	if (m->notify_ev)
		event_free(m->notify_ev);
	agent_ring_free(m->err_ring);
	free(m->buf);
	free(m);
}

static bool blank(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
			return false;
	return true;
}

static void notify(agent_mcp_proc *m)
{
	event_active(m->notify_ev, EV_TIMEOUT, 0);
}

/* Bytes of the valid UTF-8 sequence at p (at most n), 0 if none starts
 * there: the tail goes into str fields, and on to JSON. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	size_t len;
	uint32_t cp;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xc2 && p[0] <= 0xdf)
		len = 2, cp = p[0] & 0x1f;
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
		len = 3, cp = p[0] & 0x0f;
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
		len = 4, cp = p[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	/* Overlong forms, surrogates, beyond U+10FFFF. */
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Control bytes (but newline and tab) and what is not UTF-8 as '?'. */
static void printable(char *buf, size_t n)
{
	for (size_t i = 0; i < n;) {
		size_t len = utf8_len((const unsigned char *)buf + i, n - i);

		if (len == 0 || (len == 1 && (unsigned char)buf[i] < 0x20 && buf[i] != '\n' && buf[i] != '\t')) {
			buf[i++] = '?';
			continue;
		}
		i += len;
	}
}

static void report_bad(agent_mcp_proc *m, sbx_proto_code code, const char *msg)
{
	m->bad = true;
	m->bad_code = code;
	snprintf(m->bad_msg, sizeof(m->bad_msg), "%s", msg);
	notify(m);
}

/* j answers the warm-up ping (a result or an error with its id). */
static bool warm_answer(const agent_mcp_proc *m, const json_t *j)
{
	const json_t *id = json_object_get(j, "id");

	return m->warm_wait && json_is_string(id) && strcmp(json_string_value(id), m->warm_id) == 0 &&
	       !json_object_get(j, "method") && (json_object_get(j, "result") || json_object_get(j, "error"));
}

typedef enum { LINE_KEEP, LINE_DROP, LINE_BAD } line_verdict;

/* Check the line buf[ready, nl) (nl at its '\n'): kept, dropped (the
 * warm-up's answer) or bad (reported). */
static line_verdict check_line(agent_mcp_proc *m, size_t nl)
{
	size_t n = nl - m->ready;
	json_error_t jerr;
	json_t *j;
	char msg[256 + 64];

	if (n > m->max_line) {
		snprintf(msg, sizeof(msg), "the server wrote a line of %zu bytes, over the limit of %zu", n,
			 m->max_line);
		report_bad(m, SBX_PROTO_E_TOO_LARGE, msg);
		return LINE_BAD;
	}
	j = json_loadb((const char *)m->buf + m->ready, n, 0, &jerr);
	if (!j) {
		int shown = n < 40 ? (int)n : 40;

		if (snprintf(msg, sizeof(msg), "the server wrote a line that is not a JSON message (%.160s at byte %d): %.*s",
			     jerr.text, jerr.position, shown, (const char *)m->buf + m->ready) < 0)
			msg[0] = '\0';
		printable(msg, strlen(msg));
		report_bad(m, SBX_PROTO_E_BAD_OUTPUT, msg);
		return LINE_BAD;
	}
	if (warm_answer(m, j)) {
		m->warm_wait = false;
		json_decref(j);
		return LINE_DROP;
	}
	json_decref(j);
	return LINE_KEEP;
}

/* Move the whole lines among buf[ready, len) to the checked part. */
static void scan(agent_mcp_proc *m)
{
	while (!m->bad) {
		uint8_t *nl = memchr(m->buf + m->ready, '\n', m->len - m->ready);
		line_verdict verdict;
		size_t at;

		if (!nl)
			break;
		at = (size_t)(nl - m->buf);
		verdict = blank(m->buf + m->ready, at - m->ready) ? LINE_DROP : check_line(m, at);
		if (verdict == LINE_BAD)
			return;
		if (verdict == LINE_DROP) {
			memmove(m->buf + m->ready, nl + 1, m->len - at - 1);
			m->len -= at + 1 - m->ready;
			continue;
		}
		m->ready = at + 1;
	}
	if (!m->bad && m->len - m->ready > m->max_line) {
		char msg[160];

		snprintf(msg, sizeof(msg), "the server wrote more than %zu bytes without a newline", m->max_line);
		report_bad(m, SBX_PROTO_E_TOO_LARGE, msg);
	}
}

static int grow(agent_mcp_proc *m, size_t need)
{
	size_t cap = m->cap ? m->cap : 4096;
	uint8_t *nb;

	if (need <= m->cap)
		return 0;
	while (cap < need)
		cap *= 2;
	nb = realloc(m->buf, cap);
	if (!nb)
		return -ENOMEM;
	m->buf = nb;
	m->cap = cap;
	return 0;
}

/* The owner's turn: one call, the last thing done here (it may detach). */
static void notify_cb(evutil_socket_t fd, short what, void *ud)
{
	agent_mcp_proc *m = ud;
	const agent_mcp_proc_owner *o = m->owner;
	agent_proc_result r;
	char tail[SBX_MCP_STDERR_TAIL + 1];
	char msg[sizeof(m->bad_msg)];

	if (m->bad && !m->bad_told) {
		m->bad_told = true;
		/* A copy: the owner may detach (free m) before it is done with it. */
		memcpy(msg, m->bad_msg, sizeof(msg));
		if (o->bad_output)
			o->bad_output(m->ud, m->bad_code, msg);
		return;
	}
	/* An owner without a lines call (the server, for its spare) leaves
	 * them for the next owner; once the process ended they are dropped
	 * with it (a spare that wrote and left is a crash). */
	if (m->ready > m->taken && !m->bad && o->lines) {
		o->lines(m->ud);
		return;
	}
	if (m->ended) {
		r = m->result;
		ud = m->ud;
		agent_mcp_proc_stderr_tail(m, tail, sizeof(tail));
		mp_free(m);
		if (o->finished)
			o->finished(ud, &r, tail);
	}
}

/* ---- proc sink ---- */

static void sink_started(void *ud, pid_t pid)
{
	agent_mcp_proc *m = ud;

	m->pid = pid;
	if (m->owner->started)
		m->owner->started(m->ud, pid);
}

static size_t sink_room(void *ud, agent_proc_stream s)
{
	agent_mcp_proc *m = ud;
	size_t room;

	if (s == AGENT_PROC_STDERR)
		return agent_ring_max_append(m->err_ring);
	if (m->bad || m->taken != m->ready)
		return 0;
	/* One byte past the limit is enough to know a line is too long. */
	room = m->max_line + 1 - (m->len - m->ready);
	return room < MCP_READ_CHUNK ? room : MCP_READ_CHUNK;
}

static void *sink_buffer(void *ud, agent_proc_stream s, size_t len)
{
	agent_mcp_proc *m = ud;

	if (s == AGENT_PROC_STDERR || grow(m, m->len + len) < 0)
		return NULL;
	return m->buf + m->len;
}

static void sink_output(void *ud, agent_proc_stream s, const void *data, size_t len)
{
	agent_mcp_proc *m = ud;

	if (s == AGENT_PROC_STDERR) {
		agent_ring_append(m->err_ring, 0, data, len);
		return;
	}
	if (data != m->buf + m->len) {
		if (grow(m, m->len + len) < 0) {
			report_bad(m, SBX_PROTO_E_INTERNAL, "out of memory for the server's output");
			return;
		}
		memcpy(m->buf + m->len, data, len);
	}
	m->len += len;
	scan(m);
	if (m->ready > m->taken)
		notify(m);
}

static void sink_stdin_done(void *ud, size_t n)
{
	agent_mcp_proc *m = ud;
	/* The pipe takes bytes in order: the warm-up's go first. */
	size_t warm = n < m->warm_unacked ? n : m->warm_unacked;

	m->warm_unacked -= warm;
	n -= warm;
	if (n && m->owner->stdin_done)
		m->owner->stdin_done(m->ud, n);
}

static void sink_finished(void *ud, const agent_proc_result *r)
{
	agent_mcp_proc *m = ud;

	m->proc = NULL;
	m->ended = true;
	m->result = *r;
	/* A last message without its newline still counts. */
	if (!m->bad && m->len > m->ready && grow(m, m->len + 1) == 0) {
		m->buf[m->len++] = '\n';
		scan(m);
	}
	notify(m);
}

static const agent_proc_sink mcp_sink = {
	.started = sink_started,
	.room = sink_room,
	.buffer = sink_buffer,
	.output = sink_output,
	.stdin_done = sink_stdin_done,
	.finished = sink_finished,
};

/* ---- owner side ---- */

int agent_mcp_proc_start(struct event_base *base, const agent_exec_spec *spec, size_t max_line,
			 const agent_mcp_proc_owner *owner, void *ud, agent_mcp_proc **out, sbx_err *err)
{
	agent_mcp_proc *m = calloc(1, sizeof(*m));
	int ret;

	if (!m)
		return sbx_err_set(err, -ENOMEM, "mcp server: out of memory");
	m->owner = owner;
	m->ud = ud;
	m->max_line = max_line;
	m->notify_ev = event_new(base, -1, 0, notify_cb, m);
	if (!m->notify_ev) {
		free(m);
		return sbx_err_set(err, -ENOMEM, "mcp server: event");
	}
	ret = agent_ring_new(AGENT_MCP_STDERR_RING, &m->err_ring, err);
	if (ret < 0) {
		mp_free(m);
		return ret;
	}
	ret = agent_proc_start(base, spec, &mcp_sink, m, &m->proc, err);
	if (ret < 0) {
		mp_free(m);
		return ret;
	}
	*out = m;
	return 0;
}

void agent_mcp_proc_set_owner(agent_mcp_proc *m, const agent_mcp_proc_owner *owner, void *ud)
{
	m->owner = owner;
	m->ud = ud;
	/* What the last owner left (lines of a spare) is the new one's. */
	if (m->ready > m->taken || m->ended || (m->bad && !m->bad_told))
		notify(m);
}

pid_t agent_mcp_proc_pid(const agent_mcp_proc *m)
{
	return m->pid;
}

bool agent_mcp_proc_ended(const agent_mcp_proc *m)
{
	return m->ended;
}

size_t agent_mcp_proc_pending(const agent_mcp_proc *m, const uint8_t **p)
{
	*p = m->buf + m->taken;
	return m->ready - m->taken;
}

void agent_mcp_proc_taken(agent_mcp_proc *m, size_t n)
{
	m->taken += n;
	if (m->taken < m->ready)
		return;
	memmove(m->buf, m->buf + m->ready, m->len - m->ready);
	m->len -= m->ready;
	m->ready = m->taken = 0;
	if (m->cap > MCP_BUF_KEEP && m->len <= MCP_BUF_KEEP / 2) {
		uint8_t *nb = realloc(m->buf, MCP_BUF_KEEP);
		if (nb) {
			m->buf = nb;
			m->cap = MCP_BUF_KEEP;
		}
	}
	/* The line being read may be whole already (read with the last ones). */
	scan(m);
	if (m->ready > 0 || m->ended || m->bad) {
		notify(m);
		return;
	}
	agent_proc_resume(m->proc, AGENT_PROC_STDOUT);
}

int agent_mcp_proc_warm(agent_mcp_proc *m, unsigned timeout_ms, sbx_err *err)
{
	static uint64_t seq;
	char line[sizeof(m->warm_id) + 64];
	int n, ret;

	snprintf(m->warm_id, sizeof(m->warm_id), "%s%llu", AGENT_MCP_WARM_ID_PREFIX, (unsigned long long)++seq);
	n = snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"ping\"}\n", m->warm_id);
	/* Counted first: a pipe already closed reports the bytes at once. */
	m->warm_unacked += (size_t)n;
	ret = agent_mcp_proc_write(m, line, (size_t)n, err);
	if (ret < 0) {
		m->warm_unacked -= (size_t)n;
		return ret;
	}
	m->warm_wait = true;
	clock_gettime(CLOCK_MONOTONIC, &m->warm_until);
	m->warm_until.tv_sec += timeout_ms / 1000;
	m->warm_until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (m->warm_until.tv_nsec >= 1000000000L) {
		m->warm_until.tv_sec++;
		m->warm_until.tv_nsec -= 1000000000L;
	}
	return 0;
}

bool agent_mcp_proc_warming(const agent_mcp_proc *m)
{
	struct timespec now;

	if (!m->warm_wait)
		return false;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return now.tv_sec < m->warm_until.tv_sec ||
	       (now.tv_sec == m->warm_until.tv_sec && now.tv_nsec < m->warm_until.tv_nsec);
}

int agent_mcp_proc_write(agent_mcp_proc *m, const void *p, size_t n, sbx_err *err)
{
	if (!m->proc) {
		/* Ended: dropped, as a pipe without reader would, credit back. */
		if (n && m->owner->stdin_done)
			m->owner->stdin_done(m->ud, n);
		return 0;
	}
	return agent_proc_write_stdin(m->proc, p, n, err);
}

void agent_mcp_proc_close_stdin(agent_mcp_proc *m)
{
	if (m->proc)
		agent_proc_close_stdin(m->proc);
}

void agent_mcp_proc_stderr_tail(const agent_mcp_proc *m, char *buf, size_t cap)
{
	uint64_t end = agent_ring_end(m->err_ring), off = agent_ring_start(m->err_ring);
	agent_ring_cursor cur = { 0 };
	size_t n = 0, skip = 0;
	int ch;

	if (cap == 0)
		return;
	if (end - off > cap - 1)
		off = end - (cap - 1);
	while (n < cap - 1) {
		size_t got = agent_ring_read(m->err_ring, &cur, off + n, &ch, buf + n, cap - 1 - n);
		if (got == 0)
			break;
		n += got;
	}
	buf[n] = '\0';
	/* Whole lines only: drop a first line cut by the ring or the cap. */
	if (off > 0) {
		char *nl = memchr(buf, '\n', n);
		skip = nl ? (size_t)(nl - buf) + 1 : n;
	}
	memmove(buf, buf + skip, n - skip + 1);
	n -= skip;
	while (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	printable(buf, n);
}

void agent_mcp_proc_detach(agent_mcp_proc *m)
{
	/* proc kills the tree and frees itself once reaped; m goes now. */
	if (m->proc)
		agent_proc_detach(m->proc);
	mp_free(m);
}
