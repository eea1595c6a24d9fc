/* Internals of sbx_proto_conn shared by its source files (not installed).
 *
 * proto_conn.c owns the lifecycle, the read path and the handshake;
 * proto_conn_send.c the owner's sending calls; proto_conn_table.c the stream
 * table and the list of streams waiting to write. Nothing here does I/O
 * except emit(). */
#ifndef SBX_PROTO_CONN_INT_H
#define SBX_PROTO_CONN_INT_H

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "sbx/bev_flush.h"
#include "sbx/proto_conn.h"

struct conn_stream {
	uint64_t id;
	struct conn_stream *hnext;               /* hash chain */
	struct conn_stream *bprev, *bnext;       /* waiting-to-write list */
	bool blocked;
	bool local;                              /* we opened it (we are the requester) */
	bool cancelled;                          /* local: we sent cancel */
	void *user;
	uint64_t send_credit;                    /* body bytes we may still send */
	uint64_t recv_credit;                    /* body bytes the peer may still send */
	uint64_t owed;                           /* consumed, not yet returned */
};

/* Mutable through a const conn: data_room() records who waits for room. */
struct conn_table {
	struct conn_stream **buckets;
	size_t nbuckets;                         /* power of two */
	size_t count;
	struct conn_stream *blocked;             /* head of the waiting list */
	size_t nblocked;
};

struct sbx_proto_conn {
	struct bufferevent *bev;
	sbx_proto_conn_cbs cbs;
	void *ud;
	bool is_client;
	uint32_t max_frame, max_streams, window; /* ours */

	bool ready, closed, freed, read_paused;
	bool peer_held;                          /* sbx_proto_conn_peer_held: no frame deadline */
	unsigned in_dispatch;                    /* >0: inside a libevent callback */

	uint64_t version;
	uint32_t peer_max_frame, peer_max_streams, peer_window;
	char **peer_caps;
	size_t peer_ncaps;
	char *peer_agent;

	struct conn_table *t;
	size_t n_local, n_remote;                /* open streams by opener */
	uint64_t next_local_id, highest_remote_id;

	struct evbuffer *pending;                /* frames sent before ready */
	sbx_proto_writer w;                      /* scratch encoder */
	struct {                                 /* data_begin .. data_commit */
		bool active;                     /* cleared by any other output */
		uint64_t id;
		char ch[SBX_PROTO_MAX_CH_LEN + 1];
		size_t max, head;                /* payload asked, header bytes before it */
		struct evbuffer_iovec v;
	} resv;
	size_t out_high;                         /* DATA/EVENT wait beyond this output */
	uint32_t frame_timeout_ms;               /* 0: none */
	struct event *frame_timer;               /* a frame begun must be whole in time */
	uint64_t frames_in;                      /* frames decoded */
	struct event *resume;                    /* go on with frames left after a slice */
	bool input_yielded;                      /* frames wait in the input for resume */
	struct conn_block *blk;                  /* a large frame being read into its block */
	struct conn_block *cur;                  /* the block of the frame being delivered */
	bool blk_last;                           /* the last frame had one: read little past it */
	sbx_bev_flush out;                       /* the output written once this loop pass is done */
};

/* proto_conn_table.c */
int conn_table_init(struct conn_table **t);
void conn_table_destroy(struct conn_table *t);
struct conn_stream *conn_find(const sbx_proto_conn *c, uint64_t id);
struct conn_stream *conn_open_stream(sbx_proto_conn *c, uint64_t id, bool local);
void conn_close_stream(sbx_proto_conn *c, struct conn_stream *s);
void conn_close_all_streams(sbx_proto_conn *c);
void conn_block(const sbx_proto_conn *c, struct conn_stream *s);
void conn_unblock(const sbx_proto_conn *c, struct conn_stream *s);
/* Hand the waiting list to on_writable; safe against frees in the callback. */
void conn_notify_blocked(sbx_proto_conn *c);
void conn_foreach(const sbx_proto_conn *c, void (*fn)(struct conn_stream *s, void *arg), void *arg);

/* proto_conn_block.c: a frame whose body is at least CONN_BLOCK_MIN bytes is
 * read into a block of its own (the bytes the input already holds moved in,
 * the rest read from the socket straight into it), decoded in place, and
 * its payload handed on by reference (sbx_proto_conn_add_data). */
#define CONN_BLOCK_MIN (16u * 1024u)
/* What is read past a block's frame while the next header is unknown: a
 * stream of large frames then copies at most this much of each. */
#define CONN_BLOCK_PEEK 4096u
/* The smallest piece of a block's payload handed on by reference. */
#define CONN_REF_MIN 4096u
struct conn_block;
bool conn_block_wanted(size_t body_len);
/* c->blk for a frame of want bytes (header included); -ENOMEM. */
int conn_block_begin(sbx_proto_conn *c, size_t want);
void conn_block_unref(struct conn_block *b);
/* The input's bytes (up to the frame's end) into c->blk; whether it is whole. */
bool conn_block_take_input(sbx_proto_conn *c);
/* One read(2) from the socket into c->blk, as sbx_bev_fill does for the input. */
size_t conn_block_read(sbx_proto_conn *c, bool *more);
const uint8_t *conn_block_bytes(const struct conn_block *b, size_t *len, size_t *have);

/* proto_conn_send.c */
/* Move the scratch writer's frames to the socket (or the pre-handshake queue). */
int conn_emit(sbx_proto_conn *c, sbx_err *err);
/* Largest body a frame we send may have now. */
size_t conn_out_max_frame(const sbx_proto_conn *c);
bool conn_id_is_local(const sbx_proto_conn *c, uint64_t id);

#endif
