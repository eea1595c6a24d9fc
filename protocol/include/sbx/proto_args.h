/* Argument maps of operations (the "a" of a req), built pair by pair: the
 * map's size is counted, never written by hand. Owns the encoding buffer
 * only; what keys an operation takes is its spec's (PROTOCOL.md). */
#ifndef SBX_PROTO_ARGS_H
#define SBX_PROTO_ARGS_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sbx_proto_args {
	msgpack_sbuffer pairs; /* the pairs so far */
	msgpack_sbuffer map;   /* header + pairs, once finished */
	msgpack_packer pk;     /* writes into pairs: for values of other types */
	uint32_t n;
} sbx_proto_args;

void sbx_proto_args_init(sbx_proto_args *a);
/* The key of a pair whose value the caller packs next with a->pk. */
void sbx_proto_args_key(sbx_proto_args *a, const char *key);
void sbx_proto_args_str(sbx_proto_args *a, const char *key, const char *v, size_t n);
void sbx_proto_args_uint(sbx_proto_args *a, const char *key, uint64_t v);
void sbx_proto_args_bool(sbx_proto_args *a, const char *key, bool v);
/* The encoded map (valid until destroy); NULL without memory. */
const char *sbx_proto_args_done(sbx_proto_args *a, size_t *len);
/* Frees the buffers and leaves a empty (again usable, destroyed twice safely). */
void sbx_proto_args_destroy(sbx_proto_args *a);

#endif
