/* Large frames read into a buffer of their own (see proto_conn_int.h).
 *
 * A DATA frame of hundreds of KiB read through the bufferevent's input was
 * copied three times on its way on: pulled up into one piece, copied into
 * its msgpack zone, copied again by the owner into its own buffers. Read
 * into a block, it is decoded in place and its payload can be handed on
 * by reference (sbx_proto_conn_add_data): the block lives until the last
 * evbuffer holding a part of it lets go. The bound is the input's: a block
 * holds one frame, and the input holds no more than one while it fills. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto_conn_int.h"

struct conn_block {
	size_t refs;
	size_t want, have; /* the frame's bytes (its header included), those read */
	uint8_t buf[];
};

bool conn_block_wanted(size_t body_len)
{
	return body_len >= CONN_BLOCK_MIN;
}

int conn_block_begin(sbx_proto_conn *c, size_t want)
{
	struct conn_block *b = malloc(sizeof(*b) + want);
	if (!b)
		return -ENOMEM;
	b->refs = 1;
	b->want = want;
	b->have = 0;
	c->blk = b;
	return 0;
}

void conn_block_unref(struct conn_block *b)
{
	if (b && --b->refs == 0)
		free(b);
}

bool conn_block_take_input(sbx_proto_conn *c)
{
	struct conn_block *b = c->blk;
	struct evbuffer *in = bufferevent_get_input(c->bev);
	size_t n = evbuffer_get_length(in);
	if (n > b->want - b->have)
		n = b->want - b->have;
	if (n > 0 && evbuffer_remove(in, b->buf + b->have, n) == (int)n)
		b->have += n;
	return b->have == b->want;
}

size_t conn_block_read(sbx_proto_conn *c, bool *more)
{
	struct conn_block *b = c->blk;
	size_t asked = b->want - b->have;
	ssize_t n;
	*more = false;
	if (asked == 0)
		return 0;
	do
		n = read(bufferevent_getfd(c->bev), b->buf + b->have, asked);
	while (n < 0 && errno == EINTR);
	/* 0 at EAGAIN, EOF or an error: libevent's next read reports the
	 * last two (the socket stays readable) */
	if (n <= 0)
		return 0;
	b->have += (size_t)n;
	*more = (size_t)n == asked;
	return (size_t)n;
}

const uint8_t *conn_block_bytes(const struct conn_block *b, size_t *len, size_t *have)
{
	*len = b->want;
	*have = b->have;
	return b->buf;
}

static void block_let_go(const void *data, size_t len, void *extra)
{
	(void)data;
	(void)len;
	conn_block_unref(extra);
}

int sbx_proto_conn_add_data(sbx_proto_conn *c, const void *p, size_t n, struct evbuffer *dst)
{
	struct conn_block *b = c->cur;
	const uint8_t *q = p;
	if (n == 0)
		return 0;
	/* a piece too small to be worth an evbuffer chain of its own (about
	 * 100 bytes, and the next small add starts another) is copied */
	if (b && n >= CONN_REF_MIN && q >= b->buf && q <= b->buf + b->want &&
	    n <= (size_t)(b->buf + b->want - q)) {
		b->refs++;
		if (evbuffer_add_reference(dst, p, n, block_let_go, b) == 0)
			return 0;
		b->refs--;
		return -ENOMEM;
	}
	return evbuffer_add(dst, p, n) == 0 ? 0 : -ENOMEM;
}
