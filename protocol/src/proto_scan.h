/* Structural pre-check of msgpack bytes, internal to the protocol library.
 *
 * msgpack-c allocates a container's element array from its announced count
 * before reading the elements, so five hostile bytes could ask for gigabytes.
 * This walk runs first and bounds the work and memory of the real decode by
 * the bytes actually present. It only checks structure: it never allocates
 * and never interprets values. */
#ifndef SBX_PROTO_SCAN_H
#define SBX_PROTO_SCAN_H

#include <stddef.h>
#include <stdint.h>

/* Nesting of arrays and maps accepted anywhere in a frame (msgpack-c's own
 * unpacker stops at 32). */
#define SBX_PROTO_MAX_DEPTH 32

enum sbx_proto_scan_result {
	SBX_SCAN_OK = 0,        /* one whole object, *consumed bytes */
	SBX_SCAN_TRUNCATED = 1, /* the object runs past len */
	SBX_SCAN_INVALID = 2,   /* reserved byte 0xc1 */
	SBX_SCAN_TOO_DEEP = 3,  /* nesting beyond SBX_PROTO_MAX_DEPTH */
};

/* Walk one msgpack object at buf[0..len). */
enum sbx_proto_scan_result sbx_proto_scan(const uint8_t *buf, size_t len, size_t *consumed);

/* True when buf[0..len) is exactly one map (the shape of args and results). */
int sbx_proto_scan_is_map(const void *buf, size_t len);

#endif
