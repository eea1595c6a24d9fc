/* Reading a bufferevent's socket past libevent 2.1's 4 KiB per read event.
 * evbuffer_read caps each read at EVBUFFER_MAX_READ (4096 bytes) whatever
 * max_single_read says, so a 256 KiB frame or upload piece would cost 64
 * wake-ups (epoll_wait, ioctl, readv each). Owners that know more bytes are
 * due read them into the input themselves, within their own bound. Owns
 * nothing; it must not be used on a bufferevent that is not a socket's. */
#ifndef SBX_BEV_FILL_H
#define SBX_BEV_FILL_H

#include <stdbool.h>
#include <stddef.h>

struct bufferevent;

/* One readv from bev's socket into its input, so that the input holds at
 * most cap bytes, and at most max bytes in this call. Returns the bytes read
 * (*more: as many as asked, the socket may hold more); 0 when the input is
 * full, at EAGAIN, EOF or an error, which libevent's next read reports. */
size_t sbx_bev_fill(struct bufferevent *bev, size_t cap, size_t max, bool *more);

#endif
