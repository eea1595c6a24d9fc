/* Test client for the file operations: one blocking connection to the agent
 * speaking raw frames (the library's codec), so a test can upload within
 * credit (the blocking sbx_proto_client sends no data), cut an upload at any
 * byte, and look at every frame of a download. One call at a time. Test
 * code only. */
#ifndef AGENT_FS_CLIENT_H
#define AGENT_FS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

#include "sbx/proto.h"

typedef struct fc {
	int fd;
	uint8_t *buf; /* received; buf[off..len) not yet decoded */
	size_t off, len, cap;
	uint64_t next_id;
	uint64_t window;    /* the agent's: our credit on a new stream */
	uint64_t max_frame; /* the agent's */
} fc;

/* What one call returned. */
typedef struct fc_result {
	bool failed;                  /* ERR (else END) */
	char code[32], msg[600];
	msgpack_sbuffer result;       /* END's r, or the first EVENT's a (read) */
	msgpack_sbuffer event;        /* the first EVENT's a */
	size_t nevents;
	uint64_t data_bytes;          /* DATA payload received */
	bool data_eof;
	bool data_first;              /* a DATA frame came before any EVENT */
} fc_result;

void fc_result_init(fc_result *r);
void fc_result_free(fc_result *r);

int fc_connect(fc *c, const char *sock);
/* The same, granting the agent window bytes of credit per stream (the
 * supervisor chooses its window; 0: the library default). */
int fc_connect_window(fc *c, const char *sock, uint32_t window);
void fc_close(fc *c);

/* Send req op with args (an encoded map or NULL), return its id. */
int fc_request(fc *c, const char *op, const msgpack_sbuffer *args, uint64_t *id);
/* Read frames of stream id until END/ERR, returning credit for DATA and
 * EVENT at once; on_data (may be NULL) gets each DATA payload, returning
 * < 0 stops reading: the connection is then unusable. */
typedef int (*fc_data_fn)(const uint8_t *p, size_t len, void *ud);
int fc_finish(fc *c, uint64_t id, fc_data_fn on_data, void *ud, fc_result *r);
/* fc_finish for the n streams ids[] at once, their frames in whatever order
 * they come: stream i's DATA to on_data with ud[i], its result in r[i]. */
int fc_finish_all(fc *c, size_t n, const uint64_t *ids, fc_data_fn on_data, void *const *ud,
		  fc_result *r);
/* fc_request + fc_finish. */
int fc_call(fc *c, const char *op, const msgpack_sbuffer *args, fc_result *r);

/* The next frame of stream id within timeout_ms: 1 an EVENT (its map in
 * ev, credit returned), 2 the final END/ERR (in r), 0 nothing in time, or a
 * negative errno. Other streams' frames are dropped. */
int fc_next_event(fc *c, uint64_t id, int timeout_ms, msgpack_sbuffer *ev, fc_result *r);
/* Send cancel for stream id. */
int fc_cancel(fc *c, uint64_t id);

/* Upload: send what next() gives (returns bytes put in buf, 0 at the end)
 * as DATA on "file" within credit, then eof, then read to END/ERR. cut > 0:
 * stop after about cut bytes and close the socket without eof (returns 1).
 * An ERR from the agent mid-way ends the upload (r->failed). */
typedef size_t (*fc_source_fn)(void *buf, size_t cap, void *ud);
int fc_upload(fc *c, uint64_t id, fc_source_fn next, void *ud, uint64_t cut, fc_result *r);

/* Args builders: a map of n pairs starting with root and path. */
void fc_args_begin(msgpack_sbuffer *b, msgpack_packer *pk, size_t pairs, const char *root,
		   const char *path, size_t path_len);

/* Values of an encoded map (r->result): false when absent or other type. */
bool fc_get_uint(const msgpack_sbuffer *map, const char *key, uint64_t *v);
bool fc_get_bool(const msgpack_sbuffer *map, const char *key, bool *v);
bool fc_get_str(const msgpack_sbuffer *map, const char *key, char *buf, size_t cap);

#endif
