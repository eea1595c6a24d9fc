/* Test client: many streams on one sbx_proto_conn over a libevent loop, to
 * drive the agent the way the supervisor does (concurrent execs, stdin,
 * ctl, cancel, a reader that holds back credit). Test code only. */
#ifndef AGENT_CLIENT_H
#define AGENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/proto_conn.h"

struct event_base;

#define TC_MAX_STREAMS 256
#define TC_OUT_MAX (64u << 20)

typedef struct tc_stream {
	uint64_t id;
	char *out, *err;          /* collected stdout / stderr (NUL-terminated) */
	size_t out_len, err_len;
	size_t out_cap, err_cap;
	bool hold_credit;         /* slow reader: keep the credit */
	size_t held;              /* bytes received, credit not returned */
	bool done;                /* END or ERR arrived */
	bool failed;              /* it was ERR */
	char code[32], msg[256];  /* of the ERR */
	bool exited, signaled, timed_out;
	int64_t exit_code, signal;
	uint64_t duration_us;
} tc_stream;

typedef struct tc_client {
	struct event_base *base;
	sbx_proto_conn *conn;
	bool ready, closed;
	tc_stream *streams[TC_MAX_STREAMS];
	size_t nstreams;
} tc_client;

typedef struct tc_exec_opts {
	const char *const *argv;  /* or cmd */
	const char *cmd;
	const char *const *env;   /* "K=V", NULL-terminated */
	const char *cwd;
	uint64_t timeout_ms;
	bool stdin_pipe;
} tc_exec_opts;

int tc_connect(tc_client *c, struct event_base *base, const char *path);
/* Free every stream and the connection. */
void tc_close(tc_client *c);

tc_stream *tc_request(tc_client *c, const char *op, const void *args, size_t len);
tc_stream *tc_exec(tc_client *c, const tc_exec_opts *o);
/* Send stdin bytes as credit allows (runs the loop while waiting). */
int tc_send_stdin(tc_client *c, tc_stream *s, const void *data, size_t len, bool eof, unsigned ms);
int tc_signal(tc_client *c, tc_stream *s, int sig);
int tc_cancel(tc_client *c, tc_stream *s);
/* Give back the credit held by a slow reader and stop holding. */
void tc_release(tc_client *c, tc_stream *s);

/* Run the loop until s is done (s NULL: every stream) or ms pass. */
bool tc_wait(tc_client *c, tc_stream *s, unsigned ms);
/* Run the loop for ms. */
void tc_run(struct event_base *base, unsigned ms);

#endif
