/* The replay buffer (mcp_host/replay.h): a ring of events, each one
 * allocation. */
#include "mcp_host/replay.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ev {
	uint64_t seq;
	uint32_t stream;
	size_t len;
	char *data;
} ev;

struct mcp_replay {
	size_t max_bytes, bytes;
	unsigned max_events;
	ev *ring;          /* max_events slots */
	unsigned head, n;  /* oldest at head */
	uint64_t seq;      /* last given */
	uint64_t dropped;  /* highest seq not kept (dropped or never kept) */
};

int mcp_replay_new(size_t max_bytes, unsigned max_events, mcp_replay **out, sbx_err *err)
{
	mcp_replay *r;

	if (max_events == 0)
		return sbx_err_set(err, -EINVAL, "replay: at least one event");
	r = calloc(1, sizeof(*r));
	if (r)
		r->ring = calloc(max_events, sizeof(*r->ring));
	if (!r || !r->ring) {
		free(r);
		return sbx_err_set(err, -ENOMEM, "replay: out of memory");
	}
	r->max_bytes = max_bytes;
	r->max_events = max_events;
	*out = r;
	return 0;
}

void mcp_replay_free(mcp_replay *r)
{
	if (!r)
		return;
	for (unsigned i = 0; i < r->n; i++)
		free(r->ring[(r->head + i) % r->max_events].data);
	free(r->ring);
	free(r);
}

static void drop_oldest(mcp_replay *r)
{
	ev *e = &r->ring[r->head];

	r->dropped = e->seq;
	r->bytes -= e->len;
	free(e->data);
	memset(e, 0, sizeof(*e));
	r->head = (r->head + 1) % r->max_events;
	r->n--;
}

int mcp_replay_push(mcp_replay *r, uint32_t stream, const char *data, size_t len, char *id, sbx_err *err)
{
	char *copy = NULL;
	ev *e;

	if (len <= r->max_bytes) {
		copy = malloc(len ? len : 1);
		if (!copy)
			return sbx_err_set(err, -ENOMEM, "replay: out of memory");
		memcpy(copy, data, len);
	}
	r->seq++;
	snprintf(id, MCP_REPLAY_ID_MAX, "%" PRIu32 "-%" PRIu64, stream, r->seq);
	if (!copy) {
		while (r->n)
			drop_oldest(r);
		r->dropped = r->seq;
		return 0;
	}
	while (r->n && (r->n == r->max_events || r->bytes + len > r->max_bytes))
		drop_oldest(r);
	e = &r->ring[(r->head + r->n) % r->max_events];
	e->seq = r->seq;
	e->stream = stream;
	e->len = len;
	e->data = copy;
	r->bytes += len;
	r->n++;
	return 0;
}

/* "<stream>-<seq>", decimal, no sign, no leading zeros beyond "0". */
static bool parse_id(const char *s, uint32_t *stream, uint64_t *seq)
{
	char *end;
	unsigned long long a, b;

	if (*s < '0' || *s > '9' || (s[0] == '0' && s[1] != '-'))
		return false;
	errno = 0;
	a = strtoull(s, &end, 10);
	if (errno || *end != '-' || a > UINT32_MAX)
		return false;
	s = end + 1;
	if (*s < '1' || *s > '9')
		return false;
	b = strtoull(s, &end, 10);
	if (errno || *end != '\0')
		return false;
	*stream = (uint32_t)a;
	*seq = b;
	return true;
}

uint64_t mcp_replay_id_seq(const char *id)
{
	uint32_t stream;
	uint64_t seq;

	return strlen(id) < MCP_REPLAY_ID_MAX && parse_id(id, &stream, &seq) ? seq : 0;
}

int mcp_replay_after(const mcp_replay *r, const char *last_id, uint32_t *stream, mcp_replay_cb cb, void *ud,
		     sbx_err *err)
{
	uint64_t seq;

	if (strlen(last_id) >= MCP_REPLAY_ID_MAX || !parse_id(last_id, stream, &seq))
		return sbx_err_set(err, -EINVAL, "Last-Event-ID %.40s is not an event id of this session", last_id);
	if (seq > r->seq)
		return sbx_err_set(err, -ENOENT, "Last-Event-ID %s was never sent", last_id);
	if (r->dropped > seq)
		return sbx_err_set(err, -ENOENT, "events after %s are no longer kept", last_id);
	return mcp_replay_since(r, *stream, seq, cb, ud);
}

int mcp_replay_since(const mcp_replay *r, uint32_t stream, uint64_t seq, mcp_replay_cb cb, void *ud)
{
	char id[MCP_REPLAY_ID_MAX];

	for (unsigned i = 0; i < r->n; i++) {
		const ev *e = &r->ring[(r->head + i) % r->max_events];
		int ret;

		if (e->seq <= seq || e->stream != stream)
			continue;
		snprintf(id, sizeof(id), "%" PRIu32 "-%" PRIu64, e->stream, e->seq);
		ret = cb(id, e->data, e->len, ud);
		if (ret < 0)
			return ret;
	}
	return 0;
}

unsigned mcp_replay_events(const mcp_replay *r)
{
	return r->n;
}

size_t mcp_replay_bytes(const mcp_replay *r)
{
	return r->bytes;
}
