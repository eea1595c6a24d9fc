/* Test harness for sbx_proto_conn: two ends of a socketpair on one libevent
 * loop, or one conn end and one "raw" end the test drives frame by frame to
 * play a misbehaving peer. Owns only test plumbing; no protocol logic. */
#ifndef SBX_CONN_HARNESS_H
#define SBX_CONN_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "sbx/proto.h"
#include "sbx/proto_conn.h"

/* What one conn end saw, filled by the harness callbacks. */
struct side {
	sbx_proto_conn *c;
	int ready, closed;
	sbx_err why;                    /* from on_close */
	int n[SBX_PROTO_ERR + 1];       /* frames seen per kind */
	int writable;                   /* on_writable calls */
	sbx_proto_code last_err_code;   /* of the last ERR frame */
	uint64_t last_id;
	/* test hooks, called after counting */
	void (*on_frame)(struct side *s, const sbx_proto_frame *f);
	void (*on_writable)(struct side *s, uint64_t id);
	bool free_on_close;
	void *test;                     /* per-test data */
};

extern const sbx_proto_conn_cbs harness_cbs; /* ud: struct side * */

struct event_base *harness_base(void);

/* socketpair(); a conn for each end (sv[0] server, sv[1] client). */
void harness_pair(struct event_base *base, struct side *srv, const sbx_proto_conn_opts *so,
		  struct side *cli, const sbx_proto_conn_opts *co);

/* A server conn and the raw client end, on which the test's hello is sent
 * (window and max_frame as given) and the server's hello read. */
int harness_raw_client(struct event_base *base, struct side *srv, const sbx_proto_conn_opts *so,
		       uint64_t window, bool send_hello);

/* Run the loop until *flag != 0 / *counter >= n (fails the test after timeout_ms). */
void pump_until(struct event_base *base, const int *flag, int timeout_ms);
void pump_until_n(struct event_base *base, const int *counter, int n, int timeout_ms);
/* Run the loop for ms milliseconds. */
void pump_for(struct event_base *base, int ms);

/* Raw end: send the writer's frames (and reset it); receive the next frame
 * while pumping the loop. raw_recv returns 1 with a frame, 0 on EOF. */
void raw_send(int fd, sbx_proto_writer *w);
/* Start reading a raw end afresh (a new socket may reuse an old fd's number). */
void raw_forget(int fd);
int raw_recv(struct event_base *base, int fd, sbx_proto_frame *f, int timeout_ms);
/* Expect the connection-level ERR with this code, then EOF. */
void raw_expect_conn_err(struct event_base *base, int fd, sbx_proto_code code);

#endif
