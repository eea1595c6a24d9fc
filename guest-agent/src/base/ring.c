#include "ring.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A record is a 4-byte header (length, channel in the top bit) and its
 * bytes. Positions count storage bytes ever written (headers included) and
 * map to buf modulo alloc; offsets count output bytes only. */
#define HDR 4u
#define CH_BIT 0x80000000u
#define LEN_MASK 0x7fffffffu
#define FIRST_ALLOC (16u << 10)
#define APPEND_MAX (64u << 10)

struct agent_ring {
	uint8_t *buf;
	size_t cap, alloc;
	uint64_t tail_pos, head_pos; /* [tail_pos, head_pos) is in use */
	uint64_t start_off, end_off;
	uint64_t last_pos;           /* header of the newest record */
	bool has_last;
};

int agent_ring_new(size_t cap, agent_ring **out, sbx_err *err)
{
	agent_ring *r;

	if (cap < AGENT_RING_MIN || cap > AGENT_RING_MAX)
		return sbx_err_set(err, -EINVAL, "output buffer must be %u..%u bytes", AGENT_RING_MIN, AGENT_RING_MAX);
	r = calloc(1, sizeof(*r));
	if (!r)
		return sbx_err_sys(err, -ENOMEM, "output buffer");
	r->cap = cap;
	r->alloc = cap < FIRST_ALLOC ? cap : FIRST_ALLOC;
	r->buf = malloc(r->alloc);
	if (!r->buf) {
		free(r);
		return sbx_err_sys(err, -ENOMEM, "output buffer");
	}
	*out = r;
	return 0;
}

void agent_ring_free(agent_ring *r)
{
	if (!r)
		return;
	free(r->buf);
	free(r);
}

size_t agent_ring_cap(const agent_ring *r)
{
	return r->cap;
}

size_t agent_ring_max_append(const agent_ring *r)
{
	return r->cap / 4 < APPEND_MAX ? r->cap / 4 : APPEND_MAX;
}

uint64_t agent_ring_start(const agent_ring *r)
{
	return r->start_off;
}

uint64_t agent_ring_end(const agent_ring *r)
{
	return r->end_off;
}

static void put(agent_ring *r, uint64_t pos, const void *src, size_t n)
{
	size_t i = (size_t)(pos % r->alloc), first = r->alloc - i < n ? r->alloc - i : n;

	memcpy(r->buf + i, src, first);
	memcpy(r->buf, (const uint8_t *)src + first, n - first);
}

static void get(const agent_ring *r, uint64_t pos, void *dst, size_t n)
{
	size_t i = (size_t)(pos % r->alloc), first = r->alloc - i < n ? r->alloc - i : n;

	memcpy(dst, r->buf + i, first);
	memcpy((uint8_t *)dst + first, r->buf, n - first);
}

static uint32_t hdr_at(const agent_ring *r, uint64_t pos)
{
	uint8_t b[HDR];

	get(r, pos, b, HDR);
	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static void put_hdr(agent_ring *r, uint64_t pos, uint32_t h)
{
	uint8_t b[HDR] = { (uint8_t)(h >> 24), (uint8_t)(h >> 16), (uint8_t)(h >> 8), (uint8_t)h };

	put(r, pos, b, HDR);
}

/* Before the first eviction the bytes lie in [0, head_pos) without wrap, so
 * a realloc keeps every position where it was. */
static int grow(agent_ring *r, size_t need)
{
	size_t want = r->alloc;
	uint8_t *nb;

	while (want < r->cap && r->head_pos + need > want)
		want = want * 2 < r->cap ? want * 2 : r->cap;
	if (want == r->alloc)
		return 0;
	nb = realloc(r->buf, want);
	if (!nb)
		return -ENOMEM;
	r->buf = nb;
	r->alloc = want;
	return 0;
}

static void evict_oldest(agent_ring *r)
{
	uint32_t len = hdr_at(r, r->tail_pos) & LEN_MASK;

	r->tail_pos += HDR + len;
	r->start_off += len;
	if (r->tail_pos == r->head_pos)
		r->has_last = false;
}

int agent_ring_append(agent_ring *r, int ch, const void *data, size_t len)
{
	uint32_t chbit = ch ? CH_BIT : 0;

	if (len == 0)
		return 0;
	/* Growth failing is not fatal: older records make room instead. */
	if (r->tail_pos == 0 && r->head_pos + HDR + len > r->alloc)
		(void)grow(r, HDR + len);
	if (HDR + len > r->alloc) {
		/* Cannot hold it at all: lose it like evicted bytes. */
		r->tail_pos = r->head_pos;
		r->has_last = false;
		r->end_off += len;
		r->start_off = r->end_off;
		return -ENOMEM;
	}
	/* Same channel as the newest record and room without evicting:
	 * one longer record (readers at it see the new length). Records stay
	 * at most max_append long, so that evicting one drops little. */
	if (r->has_last) {
		uint32_t h = hdr_at(r, r->last_pos);

		if ((h & CH_BIT) == chbit && (h & LEN_MASK) + len <= agent_ring_max_append(r) &&
		    r->head_pos - r->tail_pos + len <= r->alloc) {
			put(r, r->head_pos, data, len);
			put_hdr(r, r->last_pos, h + (uint32_t)len);
			r->head_pos += len;
			r->end_off += len;
			return 0;
		}
	}
	while (r->head_pos - r->tail_pos + HDR + len > r->alloc)
		evict_oldest(r);
	put_hdr(r, r->head_pos, chbit | (uint32_t)len);
	put(r, r->head_pos + HDR, data, len);
	r->last_pos = r->head_pos;
	r->has_last = true;
	r->head_pos += HDR + len;
	r->end_off += len;
	return 0;
}

size_t agent_ring_read(const agent_ring *r, agent_ring_cursor *c, uint64_t off, int *ch, void *buf, size_t max)
{
	uint64_t pos, rec_off;
	uint32_t h, len;
	size_t within, n;

	if (off < r->start_off || off >= r->end_off || max == 0)
		return 0;
	if (c->valid && c->pos >= r->tail_pos && c->rec_off <= off) {
		pos = c->pos;
		rec_off = c->rec_off;
	} else {
		pos = r->tail_pos;
		rec_off = r->start_off;
	}
	for (;;) {
		h = hdr_at(r, pos);
		len = h & LEN_MASK;
		if (off < rec_off + len)
			break;
		pos += HDR + len;
		rec_off += len;
	}
	within = (size_t)(off - rec_off);
	n = len - within < max ? len - within : max;
	get(r, pos + HDR + within, buf, n);
	*ch = (h & CH_BIT) ? 1 : 0;
	c->pos = pos;
	c->rec_off = rec_off;
	c->valid = 1;
	return n;
}
