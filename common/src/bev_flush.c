#include "sbx/bev_flush.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>

/* Bytes were added: written once this pass is done, unless libevent is
 * writing (EV_WRITE on). */
static void added(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	sbx_bev_flush *f = arg;
	(void)buf;
	if (info->n_added && !(bufferevent_get_enabled(f->bev) & EV_WRITE))
		event_active(f->ev, EV_WRITE, 0);
}

int sbx_bev_flush_init(sbx_bev_flush *f, struct bufferevent *bev, event_callback_fn fn, void *arg)
{
	f->bev = bev;
	f->cb = NULL;
	f->ev = event_new(bufferevent_get_base(bev), -1, 0, fn, arg);
	if (f->ev)
		f->cb = evbuffer_add_cb(bufferevent_get_output(bev), added, f);
	if (!f->cb) {
		sbx_bev_flush_release(f);
		return -ENOMEM;
	}
	bufferevent_disable(bev, EV_WRITE);
	return 0;
}

void sbx_bev_flush_release(sbx_bev_flush *f)
{
	if (f->cb)
		evbuffer_remove_cb_entry(bufferevent_get_output(f->bev), f->cb);
	if (f->ev)
		event_free(f->ev);
	f->cb = NULL;
	f->ev = NULL;
}

int sbx_bev_flush_write(sbx_bev_flush *f, size_t max)
{
	struct evbuffer *out = bufferevent_get_output(f->bev);
	if (!evbuffer_get_length(out) || (bufferevent_get_enabled(f->bev) & EV_WRITE))
		return 0;
	/* as bufferevent's own write callback does: the output's front is
	 * frozen between its writes */
	evbuffer_unfreeze(out, 1);
	int n = evbuffer_write_atmost(out, bufferevent_getfd(f->bev), (ev_ssize_t)max);
	evbuffer_freeze(out, 1);
	if (n < 0 || evbuffer_get_length(out))
		bufferevent_enable(f->bev, EV_WRITE);
	return n;
}

void sbx_bev_flush_written(sbx_bev_flush *f)
{
	if (!evbuffer_get_length(bufferevent_get_output(f->bev)))
		bufferevent_disable(f->bev, EV_WRITE);
}
