/* Test client: many streams on one sbx_proto_conn over a libevent loop, to
 * drive the agent the way the supervisor does (concurrent execs, stdin,
 * ctl, cancel, a reader that holds back credit). Test code only. */
#ifndef AGENT_CLIENT_H
#define AGENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "sbx/proto_conn.h"

struct event_base;

#define TC_MAX_STREAMS 256
#define TC_OUT_MAX (64u << 20)

#define TC_MAX_EVENTS 64

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
	bool has_rusage;
	uint64_t max_rss_kb, user_ms, sys_ms;
	/* The END's result and the EVENT maps, as msgpack (tc_get_*). */
	msgpack_sbuffer result;
	msgpack_sbuffer events[TC_MAX_EVENTS];
	size_t nevents;
	/* stdout and stderr in arrival order, channel by channel: "o"/"e"
	 * per data frame (bounded; for interleaving checks). */
	char order[256];
	size_t norder;
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
	const char *user;
	bool allow_root;
	const char *const *rlimits; /* "name=value", NULL-terminated */
	bool pty;
	uint16_t cols, rows;      /* of the pty; 0: the agent's default */
	/* proc.start only */
	const char *tag;
	uint64_t buffer;          /* ring size; 0: default */
} tc_exec_opts;

int tc_connect(tc_client *c, struct event_base *base, const char *path);
/* Free every stream and the connection. */
void tc_close(tc_client *c);

tc_stream *tc_request(tc_client *c, const char *op, const void *args, size_t len);
tc_stream *tc_exec(tc_client *c, const tc_exec_opts *o);
/* The same arguments as proc.start. */
tc_stream *tc_proc_start(tc_client *c, const tc_exec_opts *o);
/* The exec/proc.start argument map of o. */
void tc_pack_exec_args(msgpack_packer *pk, const tc_exec_opts *o);
/* ctl {"resize": {"cols", "rows"}}. */
int tc_resize(tc_client *c, tc_stream *s, unsigned cols, unsigned rows);

/* Values of the END result (or of event i): false when absent or of
 * another type. Strings are copied NUL-terminated into buf. */
bool tc_result_uint(const tc_stream *s, const char *key, uint64_t *v);
bool tc_result_str(const tc_stream *s, const char *key, char *buf, size_t len);
/* Decode the END result into *out (msgpack_unpacked_destroy it). */
bool tc_result_unpack(const tc_stream *s, msgpack_unpacked *out);
bool tc_event_unpack(const tc_stream *s, size_t i, msgpack_unpacked *out);
/* Send stdin bytes as credit allows (runs the loop while waiting). */
int tc_send_stdin(tc_client *c, tc_stream *s, const void *data, size_t len, bool eof, unsigned ms);
/* The same on another channel (port.open's "tcp"). */
int tc_send_data(tc_client *c, tc_stream *s, const char *ch, const void *data, size_t len, bool eof,
		 unsigned ms);
int tc_signal(tc_client *c, tc_stream *s, int sig);
int tc_cancel(tc_client *c, tc_stream *s);
/* Give back the credit held by a slow reader and stop holding. */
void tc_release(tc_client *c, tc_stream *s);
/* Free a finished stream (its slot is reused). */
void tc_forget(tc_client *c, tc_stream *s);

/* Run the loop until s is done (s NULL: every stream) or ms pass. */
bool tc_wait(tc_client *c, tc_stream *s, unsigned ms);
/* Run the loop for ms. */
void tc_run(struct event_base *base, unsigned ms);

#endif
