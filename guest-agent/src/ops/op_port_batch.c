/* op_port_batch: see op_port_batch.h. */
#include "op_port_batch.h"

#include <errno.h>
#include <sys/socket.h>

/* A wake that moved at least this much counts towards a streak; less (an
 * event, a message) ends it. Loopback TCP hands on up to 64 KiB a segment. */
#define PORT_BATCH_PIECE (32u * 1024)
/* Bytes of large pieces in a row, each within PORT_BATCH_GAP_US of the
 * last, before the mark goes up: a single answer of a few pieces never
 * raises it, so its tail is never held. */
#define PORT_BATCH_STREAK (256u * 1024)
#define PORT_BATCH_GAP_US 1000L
/* The mark while bulk flows (a quarter of the agent's window towards the
 * supervisor), and the longest wait for it: what comes after a burst and
 * is less than the mark (its tail, a small message behind it) is held at
 * most this long. */
#define PORT_BATCH_MARK (256 * 1024)
#define PORT_BATCH_WAIT_US 1000

static void set_mark(const agent_port_batch *b, int mark)
{
	/* Best effort: without it the socket is read per segment as before. */
	(void)setsockopt(b->fd, SOL_SOCKET, SO_RCVLOWAT, &mark, sizeof(mark));
}

static void on_quiet_timer(evutil_socket_t fd, short what, void *arg)
{
	agent_port_batch *b = arg;

	(void)fd;
	(void)what;
	b->raised = false;
	b->streak = 0;
	set_mark(b, 1);
	b->on_quiet(b->ud);
}

int agent_port_batch_init(agent_port_batch *b, struct event_base *base, int fd,
			  void (*on_quiet)(void *ud), void *ud)
{
	b->fd = fd;
	b->raised = false;
	b->streak = 0;
	b->last.tv_sec = 0;
	b->last.tv_usec = 0;
	b->on_quiet = on_quiet;
	b->ud = ud;
	b->quiet = evtimer_new(base, on_quiet_timer, b);
	return b->quiet ? 0 : -ENOMEM;
}

void agent_port_batch_free(agent_port_batch *b)
{
	if (b->quiet)
		event_free(b->quiet);
	b->quiet = NULL;
}

void agent_port_batch_waiting(agent_port_batch *b, size_t moved)
{
	if (moved > 0) {
		struct timeval now;
		long gap;

		/* the loop's cached time: no clock read per wake */
		event_base_gettimeofday_cached(event_get_base(b->quiet), &now);
		gap = (long)(now.tv_sec - b->last.tv_sec) * 1000000L + (now.tv_usec - b->last.tv_usec);
		b->last = now;
		if (moved < PORT_BATCH_PIECE)
			b->streak = 0;
		else if (gap >= 0 && gap < PORT_BATCH_GAP_US)
			b->streak += moved;
		else
			b->streak = moved;
	}
	if (!b->raised && b->streak >= PORT_BATCH_STREAK) {
		b->raised = true;
		set_mark(b, PORT_BATCH_MARK);
	}
	if (b->raised) {
		struct timeval tv = { 0, PORT_BATCH_WAIT_US };
		evtimer_add(b->quiet, &tv);
	}
}

void agent_port_batch_paused(agent_port_batch *b)
{
	evtimer_del(b->quiet);
}
