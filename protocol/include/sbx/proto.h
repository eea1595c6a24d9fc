/* sbx wire protocol: frame codec (see protocol/PROTOCOL.md).
 *
 * A frame is a 4-byte big-endian body length followed by one msgpack map.
 * This module owns encoding and decoding of single frames and the protocol's
 * constants (frame kinds, error codes, limits, capability names). It does no
 * I/O and keeps no per-connection state: that is proto_conn.h. */
#ifndef SBX_PROTO_H
#define SBX_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#include "sbx/err.h"

#define SBX_PROTO_VERSION 1
#define SBX_PROTO_HEADER_LEN 4
/* Defaults; each side announces its own in hello and the peer honours it. */
#define SBX_PROTO_DEFAULT_MAX_FRAME (1u << 20)      /* body bytes */
#define SBX_PROTO_DEFAULT_MAX_STREAMS 1024u         /* open streams per peer */
#define SBX_PROTO_DEFAULT_WINDOW (256u * 1024u)     /* initial credit per stream and direction */
#define SBX_PROTO_MIN_MAX_FRAME 4096u               /* a peer may not announce less */
#define SBX_PROTO_HARD_MAX_FRAME (16u << 20)        /* never accepted beyond this */
/* Largest data payload that always fits in a frame of max_frame bytes. */
#define SBX_PROTO_DATA_OVERHEAD 64u
/* Longest channel name of a data frame (keeps DATA_OVERHEAD true). */
#define SBX_PROTO_MAX_CH_LEN 24u
/* Smallest window a peer may announce. */
#define SBX_PROTO_MIN_WINDOW 1024u

/* Frame kinds; the wire name is the "t" key's string value. */
typedef enum sbx_proto_kind {
	SBX_PROTO_HELLO = 1, /* "hello": version, capabilities, limits; first frame each way */
	SBX_PROTO_REQ,       /* "req": opens stream id with an operation and args */
	SBX_PROTO_DATA,      /* "data": bytes on a channel of a stream, either direction */
	SBX_PROTO_EVENT,     /* "event": a structured item on a stream (watch event, process state) */
	SBX_PROTO_CREDIT,    /* "credit": grants the peer n more bytes on stream id */
	SBX_PROTO_CTL,       /* "ctl": control of a running request (signal, resize, ...) */
	SBX_PROTO_CANCEL,    /* "cancel": the requester abandons stream id */
	SBX_PROTO_END,       /* "end": final frame of a stream, with a result map */
	SBX_PROTO_ERR,       /* "err": final frame of a stream (or id 0: of the connection) */
} sbx_proto_kind;

const char *sbx_proto_kind_name(sbx_proto_kind kind);
/* Returns 0 for an unknown name. */
sbx_proto_kind sbx_proto_kind_from_name(const char *name, size_t len);

/* Stable error codes carried in "err" frames. Never renumber or rename. */
typedef enum sbx_proto_code {
	SBX_PROTO_E_BAD_FRAME = 1,      /* "bad_frame": undecodable or malformed frame */
	SBX_PROTO_E_BAD_REQUEST,        /* "bad_request": args missing or of the wrong type */
	SBX_PROTO_E_UNKNOWN_OP,         /* "unknown_op" */
	SBX_PROTO_E_UNSUPPORTED,        /* "unsupported": version or capability mismatch */
	SBX_PROTO_E_TOO_LARGE,          /* "too_large": frame or field over a limit */
	SBX_PROTO_E_TOO_MANY_STREAMS,   /* "too_many_streams" */
	SBX_PROTO_E_FLOW_CONTROL,       /* "flow_control": sent beyond granted credit */
	SBX_PROTO_E_PROTOCOL,           /* "protocol": frame not valid in this state (unknown id, reused id) */
	SBX_PROTO_E_CANCELLED,          /* "cancelled" */
	SBX_PROTO_E_NOT_FOUND,          /* "not_found" */
	SBX_PROTO_E_PERMISSION,         /* "permission_denied" */
	SBX_PROTO_E_EXISTS,             /* "exists" */
	SBX_PROTO_E_NO_SPACE,           /* "no_space" */
	SBX_PROTO_E_EXEC_FAILED,        /* "exec_failed": could not start the command */
	SBX_PROTO_E_TIMEOUT,            /* "timeout" */
	SBX_PROTO_E_SHUTTING_DOWN,      /* "shutting_down" */
	SBX_PROTO_E_INTERNAL,           /* "internal" */
	SBX_PROTO_E_BAD_OUTPUT,         /* "bad_output": a program wrote what its stream's contract forbids
					 * (an MCP server: a line that is not JSON, or over its limit) */
	SBX_PROTO_E_CRASHED,            /* "crashed": a long-lived program (an MCP server) ended while in use */
} sbx_proto_code;

const char *sbx_proto_code_name(sbx_proto_code code);
/* Returns 0 for an unknown name (callers map it to internal). */
sbx_proto_code sbx_proto_code_from_name(const char *name, size_t len);
/* Map a negative errno to the closest protocol code. */
sbx_proto_code sbx_proto_code_from_errno(int neg_errno);

/* Operation names (the "op" of a req). Later ones are reserved now so that
 * both sides agree on spelling; an agent answers unknown_op for what it lacks. */
#define SBX_OP_PING "ping"
#define SBX_OP_INFO "info"
#define SBX_OP_EXEC "exec"
#define SBX_OP_FILE_READ "file.read"
#define SBX_OP_FILE_WRITE "file.write"
#define SBX_OP_FS_STAT "fs.stat"
#define SBX_OP_FS_LIST "fs.list"
#define SBX_OP_FS_MKDIR "fs.mkdir"
#define SBX_OP_FS_MOVE "fs.move"
#define SBX_OP_FS_REMOVE "fs.remove"
#define SBX_OP_FS_CHMOD "fs.chmod"
#define SBX_OP_FS_SEARCH "fs.search"
#define SBX_OP_FS_WATCH "fs.watch"
#define SBX_OP_PROC_START "proc.start"
#define SBX_OP_PROC_LIST "proc.list"
#define SBX_OP_PROC_GET "proc.get"
#define SBX_OP_PROC_OUTPUT "proc.output"
#define SBX_OP_PROC_STDIN "proc.stdin"
#define SBX_OP_PROC_SIGNAL "proc.signal"
#define SBX_OP_PROC_KILL "proc.kill"
#define SBX_OP_PROC_RESIZE "proc.resize"
/* MCP servers (sbx/proto_mcp.h has their keys). */
#define SBX_OP_MCP_CONFIGURE "mcp.configure"
#define SBX_OP_MCP_REMOVE "mcp.remove"
#define SBX_OP_MCP_LIST "mcp.list"
#define SBX_OP_MCP_OPEN "mcp.open"
/* TCP ports inside the sandbox: a byte stream to one, the listening ones. */
#define SBX_OP_PORT_OPEN "port.open"
#define SBX_OP_PORT_LIST "port.list"
/* Back to a fresh sandbox (sbx/proto_reset.h has its keys). */
#define SBX_OP_RESET "reset"
/* Channel of file.read and file.write data frames. */
#define SBX_CH_FILE "file"

/* Channel of port.open's bytes, both ways. */
#define SBX_CH_TCP "tcp"

/* Channel names of data frames. */
#define SBX_CH_STDIN "stdin"
#define SBX_CH_STDOUT "stdout"
#define SBX_CH_STDERR "stderr"

/* A decoded frame. Pointers point into the frame's own msgpack zone (or, in
 * place, into the bytes decoded) and are valid until sbx_proto_frame_release(). Absent optional fields are zero /
 * NULL / MSGPACK_OBJECT_NIL. */
typedef struct sbx_proto_frame {
	sbx_proto_kind kind;
	uint64_t id;               /* stream id; 0 for hello and connection errors */

	/* hello */
	uint64_t version;
	uint64_t max_frame;
	uint64_t max_streams;
	uint64_t window;
	msgpack_object caps;       /* array of str */
	const char *agent;         /* software name/version, not NUL-terminated */
	size_t agent_len;

	/* req */
	const char *op;            /* not NUL-terminated */
	size_t op_len;
	msgpack_object args;       /* req "a", ctl "a", event "a", end "r": a map or NIL */

	/* data */
	const char *ch;            /* channel name, not NUL-terminated */
	size_t ch_len;
	const uint8_t *data;
	size_t data_len;
	bool eof;                  /* data: no more bytes on this channel */

	/* credit */
	uint64_t credit;

	/* err */
	sbx_proto_code code;       /* 0 if the peer sent a code we do not know */
	const char *code_name;
	size_t code_name_len;
	const char *msg;
	size_t msg_len;

	size_t body_len;           /* msgpack body length, what credit is charged for */
	msgpack_unpacked unpacked; /* owns the memory above */
} sbx_proto_frame;

/* Decode one frame from buf[0..len).
 * Returns 1 and fills *out (release it) when a whole frame was read, setting
 * *consumed to its size including the header; 0 when more bytes are needed
 * (*consumed = 0); a negative errno with err filled and *proto_code set when
 * the bytes are not a valid frame or exceed max_frame (-EMSGSIZE). */
int sbx_proto_frame_decode(const uint8_t *buf, size_t len, size_t max_frame,
			   sbx_proto_frame *out, size_t *consumed,
			   sbx_proto_code *proto_code, sbx_err *err);
/* The same without copying the body: the frame's str and bin pointers
 * (data, ch, msg...) point into buf, valid while buf is and until the
 * release. */
int sbx_proto_frame_decode_in_place(const uint8_t *buf, size_t len, size_t max_frame,
				    sbx_proto_frame *out, size_t *consumed,
				    sbx_proto_code *proto_code, sbx_err *err);
void sbx_proto_frame_release(sbx_proto_frame *f);

/* Typed access to msgpack maps (args, results). Return false when the key is
 * absent or of another type. Strings are not NUL-terminated. */
const msgpack_object *sbx_proto_map_get(const msgpack_object *map, const char *key);
bool sbx_proto_get_str(const msgpack_object *map, const char *key, const char **s, size_t *len);
bool sbx_proto_get_uint(const msgpack_object *map, const char *key, uint64_t *v);
bool sbx_proto_get_int(const msgpack_object *map, const char *key, int64_t *v);
bool sbx_proto_get_bool(const msgpack_object *map, const char *key, bool *v);
bool sbx_proto_get_bin(const msgpack_object *map, const char *key, const uint8_t **p, size_t *len);
/* Copy a str object into a new NUL-terminated string; NULL if it contains NUL
 * or is not a str. */
char *sbx_proto_strdup(const msgpack_object *o);

/* Frame encoder. Usage:
 *   sbx_proto_writer w; sbx_proto_writer_init(&w);
 *   sbx_proto_begin(&w, SBX_PROTO_END, id, 1);      // 1 extra key/value pair
 *   sbx_proto_pack_key(&w, "r"); msgpack_pack_map(&w.pk, ...); ...
 *   sbx_proto_finish(&w, max_frame, &err);          // patches the length header
 *   send(w.buf.data, w.buf.size); sbx_proto_writer_reset(&w) or _destroy(&w)
 * The begin call writes "t" and (unless kind is hello) "id". max_frame 0 means
 * SBX_PROTO_HARD_MAX_FRAME. A failed finish removes the partial frame. The
 * packer points at the writer: do not copy an initialised writer. */
typedef struct sbx_proto_writer {
	msgpack_sbuffer buf;
	msgpack_packer pk;
	size_t frame_start; /* offset of the frame being composed */
	bool failed;        /* out of memory while packing: finish reports -ENOMEM */
} sbx_proto_writer;

void sbx_proto_writer_init(sbx_proto_writer *w);
void sbx_proto_writer_reset(sbx_proto_writer *w);
void sbx_proto_writer_destroy(sbx_proto_writer *w);
void sbx_proto_begin(sbx_proto_writer *w, sbx_proto_kind kind, uint64_t id, uint32_t extra_pairs);
void sbx_proto_pack_key(sbx_proto_writer *w, const char *key);
void sbx_proto_pack_str(msgpack_packer *pk, const char *s);
void sbx_proto_pack_strn(msgpack_packer *pk, const char *s, size_t len);
void sbx_proto_pack_kv_str(sbx_proto_writer *w, const char *key, const char *val);
void sbx_proto_pack_kv_uint(sbx_proto_writer *w, const char *key, uint64_t val);
void sbx_proto_pack_kv_bool(sbx_proto_writer *w, const char *key, bool val);
/* Returns 0, or -EMSGSIZE when the body exceeds max_frame. */
int sbx_proto_finish(sbx_proto_writer *w, size_t max_frame, sbx_err *err);

/* Whole-frame helpers for the fixed-shape kinds. Each appends one complete
 * frame to w (which may already hold frames). */
int sbx_proto_encode_hello(sbx_proto_writer *w, uint64_t max_frame, uint64_t max_streams,
			   uint64_t window, const char *const *caps, size_t ncaps,
			   const char *agent, sbx_err *err);
int sbx_proto_encode_data(sbx_proto_writer *w, uint64_t id, const char *ch,
			  const void *data, size_t len, bool eof, size_t max_frame, sbx_err *err);
/* A DATA frame without eof up to its payload: the caller puts the len
 * payload bytes right after what this appends (the frame's length counts
 * them), e.g. read straight into the output buffer. */
int sbx_proto_encode_data_head(sbx_proto_writer *w, uint64_t id, const char *ch, size_t len,
			       size_t max_frame, sbx_err *err);
int sbx_proto_encode_credit(sbx_proto_writer *w, uint64_t id, uint64_t n, sbx_err *err);
int sbx_proto_encode_cancel(sbx_proto_writer *w, uint64_t id, sbx_err *err);
int sbx_proto_encode_err(sbx_proto_writer *w, uint64_t id, sbx_proto_code code,
			 const char *msg, size_t max_frame, sbx_err *err);
/* Kinds that carry a map ("a" of req/event/ctl, "r" of end) take it already
 * encoded (one msgpack map, checked: else -EINVAL). NULL: a req omits "a",
 * the others send {}. */
int sbx_proto_encode_req(sbx_proto_writer *w, uint64_t id, const char *op, const void *args,
			 size_t args_len, size_t max_frame, sbx_err *err);
int sbx_proto_encode_event(sbx_proto_writer *w, uint64_t id, const void *map, size_t len,
			   size_t max_frame, sbx_err *err);
int sbx_proto_encode_ctl(sbx_proto_writer *w, uint64_t id, const void *map, size_t len,
			 size_t max_frame, sbx_err *err);
int sbx_proto_encode_end(sbx_proto_writer *w, uint64_t id, const void *result_map, size_t len,
			 size_t max_frame, sbx_err *err);
/* Re-encode a decoded frame in canonical form (PROTOCOL.md "Canonical
 * encoding"): what a decode of canonical bytes gives back encodes to the same
 * bytes. */
int sbx_proto_encode_frame(sbx_proto_writer *w, const sbx_proto_frame *f, size_t max_frame,
			   sbx_err *err);

#endif
