/* The session table (mcp_host/session.h): a list; tables are small (a
 * sandbox's sessions, bounded), so a scan is what a lookup costs. */
#include "mcp_host/session.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "sbx/grow.h"

typedef struct pending {
	char key[MCP_SESSION_KEY_MAX];
	uint32_t stream;
} pending;

struct mcp_session {
	mcp_session *prev, *next;
	char id[MCP_SESSION_ID_LEN + 1];
	char *server;
	char version[MCP_SESSION_VERSION_MAX + 1];
	void *data;
	mcp_replay *replay;
	unsigned holds;
	uint32_t streams;
	mcp_session_counters c;
	pending *pend;          /* grown on demand up to MCP_SESSION_MAX_PENDING */
	size_t npend, pend_cap;
};

struct mcp_session_table {
	mcp_session_opts o;
	mcp_session *all;
	mcp_session_stats st;
};

int mcp_session_table_new(const mcp_session_opts *o, mcp_session_table **out, sbx_err *err)
{
	mcp_session_table *t;

	if (o->max_sessions == 0 || o->replay_events == 0)
		return sbx_err_set(err, -EINVAL, "mcp sessions: max_sessions and replay_events must be positive");
	t = calloc(1, sizeof(*t));
	if (!t)
		return sbx_err_set(err, -ENOMEM, "mcp sessions: out of memory");
	t->o = *o;
	*out = t;
	return 0;
}

static void unlink_session(mcp_session_table *t, mcp_session *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		t->all = s->next;
	if (s->next)
		s->next->prev = s->prev;
	t->st.open--;
}

static void session_free(mcp_session *s)
{
	free(s->pend);
	mcp_replay_free(s->replay);
	free(s->server);
	free(s);
}

void mcp_session_table_free(mcp_session_table *t, void (*drop)(mcp_session *s, void *ud), void *ud)
{
	if (!t)
		return;
	while (t->all) {
		mcp_session *s = t->all;

		if (drop)
			drop(s, ud);
		unlink_session(t, s);
		session_free(s);
	}
	free(t);
}

/* 128 bits from the CSPRNG as 32 lowercase hex digits: visible ASCII, as
 * the transport's spec asks of a session id. */
static int new_id(char *id, sbx_err *err)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[MCP_SESSION_ID_LEN / 2];
	size_t got = 0;

	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return sbx_err_set(err, -errno, "getrandom");
		}
		got += (size_t)n;
	}
	for (size_t i = 0; i < sizeof(raw); i++) {
		id[2 * i] = hex[raw[i] >> 4];
		id[2 * i + 1] = hex[raw[i] & 15];
	}
	id[MCP_SESSION_ID_LEN] = '\0';
	return 0;
}

int mcp_session_open(mcp_session_table *t, const char *server, uint64_t now_ms, mcp_session **out, sbx_err *err)
{
	mcp_session *s;
	int ret;

	if (t->st.open >= t->o.max_sessions) {
		t->st.refused++;
		return sbx_err_set(err, -EBUSY, "at most %u MCP sessions at once", t->o.max_sessions);
	}
	s = calloc(1, sizeof(*s));
	if (!s || !(s->server = strdup(server))) {
		free(s);
		return sbx_err_set(err, -ENOMEM, "mcp session: out of memory");
	}
	ret = mcp_replay_new(t->o.replay_bytes, t->o.replay_events, &s->replay, err);
	if (ret == 0)
		ret = new_id(s->id, err);
	if (ret < 0) {
		session_free(s);
		return ret;
	}
	s->c.created_ms = s->c.active_ms = now_ms;
	s->next = t->all;
	if (t->all)
		t->all->prev = s;
	t->all = s;
	t->st.open++;
	t->st.opened++;
	*out = s;
	return 0;
}

/* Every byte compared whatever differs first: the time a lookup takes
 * tells nothing about how much of an id was right. */
static bool id_equal(const char *a, const char *b, size_t len)
{
	unsigned char d = 0;

	for (size_t i = 0; i < len; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

mcp_session *mcp_session_find(const mcp_session_table *t, const char *id, size_t len)
{
	mcp_session *found = NULL;

	if (len != MCP_SESSION_ID_LEN)
		return NULL;
	for (mcp_session *s = t->all; s; s = s->next)
		if (id_equal(s->id, id, len))
			found = s;
	return found;
}

void mcp_session_close(mcp_session_table *t, mcp_session *s)
{
	unlink_session(t, s);
	t->st.closed++;
	session_free(s);
}

void mcp_session_hold(mcp_session *s, uint64_t now_ms)
{
	s->holds++;
	s->c.active_ms = now_ms;
}

void mcp_session_release(mcp_session *s, uint64_t now_ms)
{
	if (s->holds)
		s->holds--;
	s->c.active_ms = now_ms;
}

void mcp_session_touch(mcp_session *s, uint64_t now_ms)
{
	s->c.active_ms = now_ms;
}

void mcp_session_touch_all(mcp_session_table *t, uint64_t now_ms)
{
	for (mcp_session *s = t->all; s; s = s->next)
		s->c.active_ms = now_ms;
}

size_t mcp_session_expire(mcp_session_table *t, uint64_t now_ms, void (*cb)(mcp_session *s, void *ud), void *ud)
{
	size_t n = 0;

	if (t->o.idle_ms == 0)
		return 0;
	for (mcp_session *s = t->all, *next; s; s = next) {
		next = s->next;
		if (s->holds || s->npend || now_ms < s->c.active_ms + t->o.idle_ms)
			continue;
		unlink_session(t, s);
		t->st.expired++;
		if (cb)
			cb(s, ud);
		session_free(s);
		n++;
	}
	return n;
}

uint64_t mcp_session_next_expiry(const mcp_session_table *t)
{
	uint64_t next = 0;

	if (t->o.idle_ms == 0)
		return 0;
	for (const mcp_session *s = t->all; s; s = s->next) {
		uint64_t at = s->c.active_ms + t->o.idle_ms;
		if (!s->holds && !s->npend && (next == 0 || at < next))
			next = at;
	}
	return next;
}

const char *mcp_session_id(const mcp_session *s)
{
	return s->id;
}

const char *mcp_session_server(const mcp_session *s)
{
	return s->server;
}

int mcp_session_set_version(mcp_session *s, const char *v)
{
	if (strlen(v) > MCP_SESSION_VERSION_MAX)
		return -EINVAL;
	snprintf(s->version, sizeof(s->version), "%s", v);
	return 0;
}

const char *mcp_session_version(const mcp_session *s)
{
	return s->version;
}

void mcp_session_set_data(mcp_session *s, void *data)
{
	s->data = data;
}

void *mcp_session_data(const mcp_session *s)
{
	return s->data;
}

mcp_replay *mcp_session_replay(const mcp_session *s)
{
	return s->replay;
}

uint32_t mcp_session_new_stream(mcp_session *s)
{
	return ++s->streams;
}

void mcp_session_count(mcp_session *s, bool in, size_t bytes, uint64_t now_ms)
{
	if (in) {
		s->c.msgs_in++;
		s->c.bytes_in += bytes;
	} else {
		s->c.msgs_out++;
		s->c.bytes_out += bytes;
	}
	s->c.active_ms = now_ms;
}

const mcp_session_counters *mcp_session_counters_get(const mcp_session *s)
{
	return &s->c;
}

void mcp_session_stats_get(const mcp_session_table *t, mcp_session_stats *st)
{
	*st = t->st;
}

void mcp_session_each(const mcp_session_table *t, void (*cb)(const mcp_session *s, void *ud), void *ud)
{
	for (const mcp_session *s = t->all; s; s = s->next)
		cb(s, ud);
}

static pending *pending_find(const mcp_session *s, const char *key)
{
	for (size_t i = 0; i < s->npend; i++)
		if (strcmp(s->pend[i].key, key) == 0)
			return &s->pend[i];
	return NULL;
}

int mcp_session_pending_add(mcp_session *s, const char *key, uint32_t stream)
{
	if (strlen(key) >= MCP_SESSION_KEY_MAX)
		return -ENAMETOOLONG;
	if (pending_find(s, key))
		return -EEXIST;
	int rc = sbx_grow(&s->pend, &s->pend_cap, s->npend, sizeof(*s->pend), 4, MCP_SESSION_MAX_PENDING);

	if (rc < 0)
		return rc;
	snprintf(s->pend[s->npend].key, MCP_SESSION_KEY_MAX, "%s", key);
	s->pend[s->npend++].stream = stream;
	return 0;
}

int mcp_session_pending_take(mcp_session *s, const char *key, uint32_t *stream)
{
	pending *p = pending_find(s, key);

	if (!p)
		return -ENOENT;
	*stream = p->stream;
	*p = s->pend[--s->npend];
	return 0;
}

size_t mcp_session_pending(const mcp_session *s)
{
	return s->npend;
}

bool mcp_session_stream_pending(const mcp_session *s, uint32_t stream)
{
	for (size_t i = 0; i < s->npend; i++)
		if (s->pend[i].stream == stream)
			return true;
	return false;
}
