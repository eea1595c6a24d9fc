/* sbx wire protocol: a small blocking client (plain sockets, no event loop).
 *
 * For tests, benchmarks and tools that want one answer at a time from an
 * agent socket: it does the handshake, sends one request, reads its stream
 * until END or ERR and returns credit as it hands data on. It runs one call
 * at a time, never sends data, and must not be used inside an event loop:
 * sbx_proto_conn is the asynchronous, many-streams side. */
#ifndef SBX_PROTO_CLIENT_H
#define SBX_PROTO_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"
#include "sbx/proto.h"

typedef struct sbx_proto_client sbx_proto_client;

/* Connect to a unix socket path and exchange hello. timeout_ms bounds every
 * wait for the peer (connect, each read, each write); 0: no bound. */
int sbx_proto_client_connect(const char *path, int timeout_ms, sbx_proto_client **out,
			     sbx_err *err);
/* The same over an already connected stream socket; takes ownership of fd. */
int sbx_proto_client_from_fd(int fd, int timeout_ms, sbx_proto_client **out, sbx_err *err);
void sbx_proto_client_free(sbx_proto_client *c);

/* The peer's hello: its software name (NULL if none) and capabilities. */
const char *sbx_proto_client_peer_agent(const sbx_proto_client *c);
bool sbx_proto_client_peer_has_cap(const sbx_proto_client *c, const char *cap);

/* Gets each DATA and EVENT frame of the call's stream (valid during the
 * call). Returning < 0 cancels the request: the call still reads to its
 * END/ERR, then returns that value. */
typedef int (*sbx_proto_client_frame_cb)(const sbx_proto_frame *f, void *ud);

/* Send req op with args (one encoded msgpack map, or NULL) and read its
 * stream. Returns 0 and the final END or ERR frame in *final (release it;
 * final may be NULL); a negative errno on transport or protocol failure, an
 * ERR id 0 from the peer, or the callback's error. cb may be NULL. */
int sbx_proto_client_call(sbx_proto_client *c, const char *op, const void *args,
			  size_t args_len, sbx_proto_client_frame_cb cb, void *ud,
			  sbx_proto_frame *final, sbx_err *err);

/* Result of sbx_proto_client_exec (PROTOCOL.md "exec"). */
typedef struct sbx_proto_exec_result {
	bool exited;          /* exit_code is valid */
	int64_t exit_code;
	bool signaled;        /* signal is valid */
	int64_t signal;
	bool timed_out;
	uint64_t duration_us;
	char *out, *err;      /* NUL-terminated, at most max_output bytes each */
	size_t out_len, err_len;
	bool out_truncated, err_truncated;
} sbx_proto_exec_result;

/* Run argv (NULL-terminated) or, if argv is NULL, the shell command cmd;
 * collect stdout and stderr (each up to max_output bytes, 0: 1 MiB; the rest
 * is read and dropped) and the exit result. timeout_ms is passed to the
 * agent (0: none). An ERR from the agent gives -EREMOTEIO with its code and
 * message in err. Free *res with sbx_proto_exec_result_free also on failure. */
int sbx_proto_client_exec(sbx_proto_client *c, const char *const *argv, const char *cmd,
			  uint32_t timeout_ms, size_t max_output, sbx_proto_exec_result *res,
			  sbx_err *err);
void sbx_proto_exec_result_free(sbx_proto_exec_result *r);

#endif
