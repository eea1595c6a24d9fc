/* sbx wire protocol: the reset operation (PROTOCOL.md "reset").
 *
 * Every key of reset's arguments and result is spelled here and nowhere
 * else: the supervisor packs what the agent parses with these functions,
 * and the reverse. Parsers check types and bounds (the agent trusts no
 * argument, the supervisor no result) and borrow strings from the decoded
 * map. No I/O, no processes. */
#ifndef SBX_PROTO_RESET_H
#define SBX_PROTO_RESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <msgpack.h>

#include "sbx/err.h"

/* Folders one reset may empty, and the longest path of one. */
#define SBX_RESET_MAX_PATHS 16u
#define SBX_RESET_PATH_MAX 1024u
/* How long the agent waits for the last process to be gone. */
#define SBX_RESET_DEFAULT_TIMEOUT_MS 5000u
#define SBX_RESET_MAX_TIMEOUT_MS 60000u

typedef struct sbx_proto_reset_args {
	const char *paths[SBX_RESET_MAX_PATHS]; /* absolute, normalised; borrowed, not
						 * NUL-terminated once parsed */
	size_t lens[SBX_RESET_MAX_PATHS];
	size_t npaths;
	uint64_t timeout_ms;                    /* 0: SBX_RESET_DEFAULT_TIMEOUT_MS */
} sbx_proto_reset_args;

/* A folder reset may empty: absolute, 2..SBX_RESET_PATH_MAX-1 bytes, no
 * NUL, no empty, "." or ".." component, no trailing '/' ("/" itself is
 * refused: emptying the root is never what a template means). */
bool sbx_proto_reset_path_ok(const char *s, size_t len);

/* Pack a as one map (paths are NUL-terminated C strings here; lens
 * ignored). -EINVAL with a message for a bad path, count or timeout. */
int sbx_proto_reset_pack_args(msgpack_packer *pk, const sbx_proto_reset_args *a, sbx_err *err);
/* Check reset's arguments: a map of only paths (1..SBX_RESET_MAX_PATHS
 * valid paths) and timeout_ms (absent: the default; at most the max). */
int sbx_proto_reset_parse_args(const msgpack_object *m, sbx_proto_reset_args *a, sbx_err *err);

/* reset's result. */
typedef struct sbx_proto_reset_result {
	uint64_t killed;      /* processes the agent killed */
	uint64_t removed;     /* entries removed from the paths */
	uint64_t ipc_removed; /* System V IPC objects removed */
	uint64_t duration_us;
} sbx_proto_reset_result;

void sbx_proto_reset_pack_result(msgpack_packer *pk, const sbx_proto_reset_result *r);
int sbx_proto_reset_parse_result(const msgpack_object *m, sbx_proto_reset_result *r, sbx_err *err);

#endif
