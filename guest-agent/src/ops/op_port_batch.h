/* When to read a port's socket: larger turns while a bulk answer flows.
 *
 * Woken for each segment loopback TCP delivers (64 KiB), the agent sent a
 * frame, and the supervisor wrote a piece to its client, per segment: 6,000
 * turns a GiB on each side. While bytes keep coming in large pieces, the
 * socket's SO_RCVLOWAT goes up, so epoll reports it only once a larger
 * piece waits; a short timer takes whatever is there when no such piece
 * comes, and the mark goes back to one byte. Small pieces (an SSE event, a
 * WebSocket message, a short answer) never raise it, so they go at once.
 * This module owns the mark and its timer; it must not read the socket or
 * send anything: the op does, when the socket is readable or the timer
 * says so. */
#ifndef AGENT_OP_PORT_BATCH_H
#define AGENT_OP_PORT_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

typedef struct agent_port_batch {
	int fd;              /* the server's socket (not owned) */
	bool raised;         /* the mark is up: a timer runs while we wait */
	uint64_t streak;     /* bytes of the last large pieces in quick succession */
	struct timeval last; /* the last wake that moved bytes */
	struct event *quiet; /* no large piece came in time: take what is there */
	void (*on_quiet)(void *ud);
	void *ud;
} agent_port_batch;

/* on_quiet(ud) runs when the mark was up and no large piece came in time;
 * the mark is down again by then. -ENOMEM. */
int agent_port_batch_init(agent_port_batch *b, struct event_base *base, int fd,
			  void (*on_quiet)(void *ud), void *ud);
void agent_port_batch_free(agent_port_batch *b);
/* One wake moved `moved` bytes and emptied the socket; the op waits for
 * the socket again. Raises the mark when bulk flows, (re)starts the timer
 * while it is up. */
void agent_port_batch_waiting(agent_port_batch *b, size_t moved);
/* The op stopped reading (no credit): no timer while it waits for the
 * requester, not the server. */
void agent_port_batch_paused(agent_port_batch *b);

#endif
