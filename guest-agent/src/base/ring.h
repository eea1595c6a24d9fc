/* The output ring of a background process: the last `cap` bytes of its
 * stdout and stderr, in the order they were read, as records of one channel
 * each, addressed by absolute byte offset (the first byte the process ever
 * wrote is offset 0; stdout and stderr share the count).
 *
 * Appending never blocks and never fails: the oldest records are dropped to
 * make room, and start() moves past them, so a reader that asks for an
 * offset below start() knows exactly which bytes it lost. Records are at
 * most max_append() long, so one eviction never drops much more than the
 * room the new bytes need. Storage grows on
 * demand up to cap, so a quiet process costs little. A reader keeps a
 * cursor, which makes sequential reading O(1) per record.
 *
 * Plain data structure: no I/O, no events; it must not know the protocol. */
#ifndef AGENT_RING_H
#define AGENT_RING_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/err.h"

#define AGENT_RING_MIN (4u << 10)
#define AGENT_RING_MAX (64u << 20)
#define AGENT_RING_DEFAULT (1u << 20)

typedef struct agent_ring agent_ring;

/* Where a reader is: opaque, zero-initialised before the first read. */
typedef struct agent_ring_cursor {
	uint64_t pos;     /* storage position of the record's header */
	uint64_t rec_off; /* offset of the record's first byte */
	int valid;
} agent_ring_cursor;

/* cap: AGENT_RING_MIN..AGENT_RING_MAX bytes of storage (headers count). */
int agent_ring_new(size_t cap, agent_ring **out, sbx_err *err);
void agent_ring_free(agent_ring *r);

size_t agent_ring_cap(const agent_ring *r);
/* Largest len one append takes (a quarter of cap, at most 64 KiB). */
size_t agent_ring_max_append(const agent_ring *r);
/* Append len (<= max_append) bytes of channel ch (0 or 1). -ENOMEM only if
 * the storage could not grow (the bytes are then dropped, as if evicted). */
int agent_ring_append(agent_ring *r, int ch, const void *data, size_t len);

/* Offsets: [start, end) is what is kept; end is every byte ever appended. */
uint64_t agent_ring_start(const agent_ring *r);
uint64_t agent_ring_end(const agent_ring *r);

/* Copy up to max bytes from offset off (start <= off <= end) into buf, all
 * of one channel (*ch); returns the count, 0 at end. */
size_t agent_ring_read(const agent_ring *r, agent_ring_cursor *c, uint64_t off, int *ch, void *buf,
		       size_t max);

#endif
