/* The MCP sessions of one sandbox: ids, idle expiry, replay, counters.
 *
 * A session is one MCP client talking to one server process in the
 * sandbox. Its Mcp-Session-Id is 32 hex digits from the kernel's CSPRNG
 * (getrandom), so it can be neither guessed nor enumerated; lookups compare
 * in constant time. A session not in use (no stream open: see mcp_session_hold; no request
 * of the client's in flight) for idle_ms expires; mcp_session_expire hands expired
 * ones to the caller, who ends their server process. Each keeps a replay
 * buffer (replay.h) and counters. The table is bounded (max_sessions) and
 * knows nothing of HTTP or of the agent: the owner hangs its own state on a
 * session (mcp_session_set_data) and passes the time in (ms, any
 * monotonic clock). */
#ifndef MCP_HOST_SESSION_H
#define MCP_HOST_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "mcp_host/replay.h"

#define MCP_SESSION_ID_LEN 32u
#define MCP_SESSION_VERSION_MAX 31u
/* The client's requests a session waits to answer, at most. */
#define MCP_SESSION_MAX_PENDING 256u
/* Longest request id key (mcp_rpc_id_key) kept, NUL included. */
#define MCP_SESSION_KEY_MAX 128u

typedef struct mcp_session mcp_session;
typedef struct mcp_session_table mcp_session_table;

typedef struct mcp_session_opts {
	unsigned max_sessions;   /* open at once */
	uint64_t idle_ms;        /* unused this long: expired (0: never) */
	size_t replay_bytes;     /* per session */
	unsigned replay_events;  /* per session */
} mcp_session_opts;

typedef struct mcp_session_counters {
	uint64_t msgs_in, msgs_out;   /* client -> server, server -> client */
	uint64_t bytes_in, bytes_out;
	uint64_t created_ms, active_ms; /* opened, last used */
} mcp_session_counters;

typedef struct mcp_session_stats {
	unsigned open;
	uint64_t opened, closed, expired, refused; /* refused: the table was full */
} mcp_session_stats;

int mcp_session_table_new(const mcp_session_opts *o, mcp_session_table **out, sbx_err *err);
/* Free the table; drop (optional) sees each session still open first. */
void mcp_session_table_free(mcp_session_table *t, void (*drop)(mcp_session *s, void *ud), void *ud);

/* A new session on server (name copied); -EBUSY when max_sessions are open. */
int mcp_session_open(mcp_session_table *t, const char *server, uint64_t now_ms, mcp_session **out, sbx_err *err);
/* The session of this Mcp-Session-Id (len bytes, not NUL-terminated), or NULL. */
mcp_session *mcp_session_find(const mcp_session_table *t, const char *id, size_t len);
/* End and free a session (the owner has released its data). */
void mcp_session_close(mcp_session_table *t, mcp_session *s);

/* In use: a request or stream open on it holds it from expiring. */
void mcp_session_hold(mcp_session *s, uint64_t now_ms);
void mcp_session_release(mcp_session *s, uint64_t now_ms);
void mcp_session_touch(mcp_session *s, uint64_t now_ms);
/* Every session used now: time its owner stood frozen is not idle time. */
void mcp_session_touch_all(mcp_session_table *t, uint64_t now_ms);
/* Hand each session idle past idle_ms to cb (which must release its data;
 * the session is freed after cb returns); returns how many. */
size_t mcp_session_expire(mcp_session_table *t, uint64_t now_ms, void (*cb)(mcp_session *s, void *ud), void *ud);
/* When the next session would expire (0: none can now). */
uint64_t mcp_session_next_expiry(const mcp_session_table *t);

const char *mcp_session_id(const mcp_session *s);
const char *mcp_session_server(const mcp_session *s);
/* The protocol version agreed at initialize ("" before). -EINVAL if too long. */
int mcp_session_set_version(mcp_session *s, const char *v);
const char *mcp_session_version(const mcp_session *s);
void mcp_session_set_data(mcp_session *s, void *data);
void *mcp_session_data(const mcp_session *s);
mcp_replay *mcp_session_replay(const mcp_session *s);
/* A new SSE stream number for this session (1, 2, ...; 0 is the GET stream). */
uint32_t mcp_session_new_stream(mcp_session *s);
void mcp_session_count(mcp_session *s, bool in, size_t bytes, uint64_t now_ms);

/* The client's requests in flight, by id key (mcp_rpc_id_key), each with
 * the SSE stream its answer belongs on. add: -EEXIST for an id already in
 * flight (JSON-RPC ids must be unique among them), -ENOSPC beyond
 * MCP_SESSION_MAX_PENDING, -ENAMETOOLONG for a key of MCP_SESSION_KEY_MAX
 * or more. take: the stream, and the id is no longer in flight; -ENOENT
 * for an id not in flight (a server answering what nobody asked). */
int mcp_session_pending_add(mcp_session *s, const char *key, uint32_t stream);
int mcp_session_pending_take(mcp_session *s, const char *key, uint32_t *stream);
size_t mcp_session_pending(const mcp_session *s);
/* Whether a request in flight has its answer owed on stream. */
bool mcp_session_stream_pending(const mcp_session *s, uint32_t stream);
const mcp_session_counters *mcp_session_counters_get(const mcp_session *s);

void mcp_session_stats_get(const mcp_session_table *t, mcp_session_stats *st);
/* Visit every open session (cb must not close any). */
void mcp_session_each(const mcp_session_table *t, void (*cb)(const mcp_session *s, void *ud), void *ud);

#endif
