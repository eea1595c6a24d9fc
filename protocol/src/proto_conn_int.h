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

/* proto_conn_send.c */
/* Move the scratch writer's frames to the socket (or the pre-handshake queue). */
int conn_emit(sbx_proto_conn *c, sbx_err *err);
/* Largest body a frame we send may have now. */
size_t conn_out_max_frame(const sbx_proto_conn *c);
bool conn_id_is_local(const sbx_proto_conn *c, uint64_t id);

#endif
