/* Writing a socket bufferevent's output once per loop pass, ourselves.
 * libevent arms the bufferevent's EV_WRITE when bytes are added and disarms
 * it once they are written: two epoll_ctl and a loop pass for every answer
 * or burst of frames. Here the bytes go into the output with EV_WRITE off;
 * the first add of a pass activates the owner's event, which runs after the
 * pass's other callbacks and writes the output with one writev. Only what
 * the socket does not take (or an error) is left to libevent, EV_WRITE on
 * until the output is empty again. Owns its event and its callback on the
 * output, not the bufferevent; it must not be used on a bufferevent that is
 * not a socket's, nor with libevent's rate limits. */
#ifndef SBX_BEV_FLUSH_H
#define SBX_BEV_FLUSH_H

#include <stddef.h>

#include <event2/event.h>

struct bufferevent;
struct evbuffer_cb_entry;

typedef struct sbx_bev_flush {
	struct bufferevent *bev;
	struct event *ev;
	struct evbuffer_cb_entry *cb;
} sbx_bev_flush;

/* Take bev's writing over: its EV_WRITE off, and bytes added to its output
 * activate an event that runs fn(-1, EV_WRITE, arg) later in the same pass
 * (fn calls sbx_bev_flush_write). 0, or -ENOMEM (f holds nothing then). */
int sbx_bev_flush_init(sbx_bev_flush *f, struct bufferevent *bev, event_callback_fn fn, void *arg);
/* Before bev is freed: the event and the output's callback go. */
void sbx_bev_flush_release(sbx_bev_flush *f);
/* One writev of at most max bytes of the output, unless libevent is writing
 * (EV_WRITE on). The bytes written (0: none to write, or libevent's turn);
 * -1 when the socket took nothing now (EAGAIN or an error, which libevent's
 * own write then reports to the bufferevent's event callback). */
int sbx_bev_flush_write(sbx_bev_flush *f, size_t max);
/* From the bufferevent's write callback: once libevent wrote the output
 * whole, adds come to the flush again. */
void sbx_bev_flush_written(sbx_bev_flush *f);

#endif
