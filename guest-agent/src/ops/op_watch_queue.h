/* fs.watch's events waiting for the stream's credit, and where a loss
 * shows among them. A loss is one of two kinds, placed differently:
 * - at a point of the order of events (the kernel's queue overflowed:
 *   IN_Q_OVERFLOW; a watch limit was reached): an "overflow" event goes in
 *   at that point, and what came before it and what comes after it are
 *   kept (agent_watch_queue_lost_here);
 * - this queue was full: what comes while it drains is dropped, then one
 *   "overflow" goes out after everything it held, and events are taken
 *   again (push answers false meanwhile: the op stops reading inotify and
 *   the kernel's queue takes the rest).
 * So every loss is followed by an "overflow" event and no event is dropped
 * that a reader could still be given. Owns the events' buffers; sends
 * nothing itself (flush calls the op's send) and reads nothing. */
#ifndef AGENT_OP_WATCH_QUEUE_H
#define AGENT_OP_WATCH_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

#include <msgpack.h>

#define AGENT_WATCH_QUEUE_MAX 1024u

typedef struct agent_watch_queue {
	msgpack_sbuffer ev[AGENT_WATCH_QUEUE_MAX]; /* a ring */
	size_t head, count;
	bool dropping; /* it was full: an overflow is due once it drains */
} agent_watch_queue;

/* {"type": "overflow"}, as queued and sent. */
extern const char agent_watch_overflow[];
extern const size_t agent_watch_overflow_len;

void agent_watch_queue_init(agent_watch_queue *q);
void agent_watch_queue_free(agent_watch_queue *q);
/* The event queued last, or NULL. */
const msgpack_sbuffer *agent_watch_queue_last(const agent_watch_queue *q);
/* Events that can still be queued: 0 while it drains after being full. */
size_t agent_watch_queue_room(const agent_watch_queue *q);
/* Queue ev (its buffer is taken: moved into the queue, or freed when
 * dropped). false when dropped: the queue is full or drains after being
 * full; the caller stops reading. */
bool agent_watch_queue_push(agent_watch_queue *q, msgpack_sbuffer *ev);
/* Events were lost at this point: an overflow event here (one for a run
 * of losses). false when the queue is full: the loss is then this queue's
 * own (dropping), and the caller stops reading. */
bool agent_watch_queue_lost_here(agent_watch_queue *q);
/* Hand the events to send in order until it answers -EAGAIN (any other
 * answer takes the event); the overflow a full queue owes goes once the
 * queue is empty. true when the caller may read again: half the queue is
 * free and nothing is owed. */
bool agent_watch_queue_flush(agent_watch_queue *q, int (*send)(void *ud, const char *p, size_t n),
			     void *ud);

#endif
