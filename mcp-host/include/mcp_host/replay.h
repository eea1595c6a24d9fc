/* A session's bounded replay buffer of SSE events, for Last-Event-ID.
 *
 * Every event a session sends on one of its SSE streams gets an id
 * "<stream>-<seq>": seq counts the session's events (1, 2, ...), stream
 * names the SSE stream (0: the GET stream; each POST answered with SSE gets
 * its own number), so a client resuming with Last-Event-ID gets exactly the
 * later events of the stream it lost, and never another stream's. The
 * buffer keeps the newest events within max_events and max_bytes, dropping
 * the oldest; a resumption that would need a dropped event is refused
 * (the caller answers so that the client starts over) rather than served
 * with a hole. No I/O, no HTTP. */
#ifndef MCP_HOST_REPLAY_H
#define MCP_HOST_REPLAY_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"

/* "<stream>-<seq>" fits this, NUL included. */
#define MCP_REPLAY_ID_MAX 32

typedef struct mcp_replay mcp_replay;

int mcp_replay_new(size_t max_bytes, unsigned max_events, mcp_replay **out, sbx_err *err);
void mcp_replay_free(mcp_replay *r);

/* Keep one event's data for stream; its id goes to id (MCP_REPLAY_ID_MAX).
 * An event larger than max_bytes is not kept (it still gets its id, and a
 * resumption past it is refused). -ENOMEM leaves nothing changed. */
int mcp_replay_push(mcp_replay *r, uint32_t stream, const char *data, size_t len, char *id, sbx_err *err);

/* Replay what followed event last_id on its stream: cb for each, oldest
 * first (cb < 0 stops and is returned). *stream is last_id's stream.
 * -EINVAL: not an id of ours; -ENOENT: an event after it was dropped, or
 * it is from the future. */
typedef int (*mcp_replay_cb)(const char *id, const char *data, size_t len, void *ud);
int mcp_replay_after(const mcp_replay *r, const char *last_id, uint32_t *stream, mcp_replay_cb cb, void *ud,
		     sbx_err *err);

/* The events of stream kept with a sequence number above after_seq,
 * oldest first (cb < 0 stops and is returned): what a stream that was not
 * open yet is owed (the GET stream's backlog). */
int mcp_replay_since(const mcp_replay *r, uint32_t stream, uint64_t after_seq, mcp_replay_cb cb, void *ud);
/* The sequence number of an id of ours (0: not one). */
uint64_t mcp_replay_id_seq(const char *id);

/* Events and data bytes kept. */
unsigned mcp_replay_events(const mcp_replay *r);
size_t mcp_replay_bytes(const mcp_replay *r);

#endif
