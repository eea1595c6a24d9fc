#include "op_watch_queue.h"

#include <errno.h>
#include <string.h>

const char agent_watch_overflow[] = "\x81\xa4type\xa8overflow";
const size_t agent_watch_overflow_len = sizeof(agent_watch_overflow) - 1;

void agent_watch_queue_init(agent_watch_queue *q)
{
	q->head = q->count = 0;
	q->dropping = false;
}

void agent_watch_queue_free(agent_watch_queue *q)
{
	for (size_t i = 0; i < q->count; i++)
		msgpack_sbuffer_destroy(&q->ev[(q->head + i) % AGENT_WATCH_QUEUE_MAX]);
	q->count = 0;
}

const msgpack_sbuffer *agent_watch_queue_last(const agent_watch_queue *q)
{
	return q->count ? &q->ev[(q->head + q->count - 1) % AGENT_WATCH_QUEUE_MAX] : NULL;
}

size_t agent_watch_queue_room(const agent_watch_queue *q)
{
	return q->dropping ? 0 : AGENT_WATCH_QUEUE_MAX - q->count;
}

bool agent_watch_queue_push(agent_watch_queue *q, msgpack_sbuffer *ev)
{
	if (q->count == AGENT_WATCH_QUEUE_MAX)
		q->dropping = true;
	if (q->dropping) {
		msgpack_sbuffer_destroy(ev);
		msgpack_sbuffer_init(ev);
		return false;
	}
	q->ev[(q->head + q->count) % AGENT_WATCH_QUEUE_MAX] = *ev;
	q->count++;
	msgpack_sbuffer_init(ev);
	return true;
}

static bool is_overflow(const msgpack_sbuffer *b)
{
	return b && b->size == agent_watch_overflow_len &&
	       memcmp(b->data, agent_watch_overflow, agent_watch_overflow_len) == 0;
}

bool agent_watch_queue_lost_here(agent_watch_queue *q)
{
	/* an overflow is owed after all that waits, or was just queued */
	if (q->dropping || is_overflow(agent_watch_queue_last(q)))
		return !q->dropping;
	msgpack_sbuffer b;
	msgpack_sbuffer_init(&b);
	if (msgpack_sbuffer_write(&b, agent_watch_overflow, agent_watch_overflow_len) != 0) {
		msgpack_sbuffer_destroy(&b);
		q->dropping = true; /* out of memory: the marker goes once drained */
		return false;
	}
	return agent_watch_queue_push(q, &b);
}

bool agent_watch_queue_flush(agent_watch_queue *q, int (*send)(void *ud, const char *p, size_t n),
			     void *ud)
{
	while (q->count > 0) {
		msgpack_sbuffer *e = &q->ev[q->head];
		if (send(ud, e->data, e->size) == -EAGAIN)
			break;
		msgpack_sbuffer_destroy(e);
		q->head = (q->head + 1) % AGENT_WATCH_QUEUE_MAX;
		q->count--;
	}
	if (q->count == 0 && q->dropping && send(ud, agent_watch_overflow, agent_watch_overflow_len) != -EAGAIN)
		q->dropping = false;
	return !q->dropping && q->count <= AGENT_WATCH_QUEUE_MAX / 2;
}
