#include "sbx/bev_fill.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <sys/uio.h>

size_t sbx_bev_fill(struct bufferevent *bev, size_t cap, size_t max, bool *more)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	size_t len = evbuffer_get_length(in);
	*more = false;
	if (len >= cap || max == 0)
		return 0;
	size_t room = cap - len < max ? cap - len : max;
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	/* the bufferevent keeps its input's end frozen between its reads */
	evbuffer_unfreeze(in, 0);
	int nv = evbuffer_reserve_space(in, (ev_ssize_t)room, v, 2);
	if (nv < 1) {
		evbuffer_freeze(in, 0);
		return 0;
	}
	if (nv > 2)
		nv = 2;
	size_t asked = 0;
	for (int i = 0; i < nv; i++) {
		if (v[i].iov_len > room - asked)
			v[i].iov_len = room - asked;
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len;
		asked += v[i].iov_len;
	}
	ssize_t n = readv(bufferevent_getfd(bev), iov, nv);
	size_t got = n > 0 ? (size_t)n : 0, left = got;
	*more = got == asked;
	int used = 0;
	for (; used < nv && left > 0; used++) {
		if (v[used].iov_len > left)
			v[used].iov_len = left;
		left -= v[used].iov_len;
	}
	evbuffer_commit_space(in, v, used);
	evbuffer_freeze(in, 0);
	return got;
}
