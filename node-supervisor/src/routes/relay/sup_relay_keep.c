/* Connections to peers kept between relayed requests (sup_relay_int.h):
 * a request to a node takes one that still stands instead of connecting
 * (and the peer accepting) again. Idle, a connection is only watched: the
 * peer closing it, or sending anything (no request asked for it), or
 * SUP_RELAY_KEEP_IDLE_MS passing ends it. Loop thread only. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include "sup_relay_int.h"

struct sup_relay_kept {
	sup_relay *x;
	char url[256];
	struct bufferevent *bev;
	struct event *idle;
	TAILQ_ENTRY(sup_relay_kept) link;
};

static void drop(sup_relay_kept *k, bool close)
{
	sup_relay *x = k->x;
	TAILQ_REMOVE(&x->kept, k, link);
	x->nkept--;
	if (close)
		bufferevent_free(k->bev);
	event_free(k->idle);
	free(k);
}

static void on_idle_read(struct bufferevent *bev, void *ud)
{
	drop(ud, true);
}

static void on_idle_event(struct bufferevent *bev, short what, void *ud)
{
	drop(ud, true);
}

static void on_idle_timeout(evutil_socket_t fd, short what, void *ud)
{
	drop(ud, true);
}

/* Still open with nothing to read: a FIN or bytes waiting mean it is not. */
static bool stands(struct bufferevent *bev)
{
	char b;
	evutil_socket_t fd = bufferevent_getfd(bev);
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	if (fd < 0 || evbuffer_get_length(bufferevent_get_input(bev)) || (ssl && SSL_has_pending(ssl)))
		return false;
	ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
	return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

struct bufferevent *sup_relay_keep_take(sup_relay *x, const char *url)
{
	sup_relay_kept *k, *next;
	for (k = TAILQ_FIRST(&x->kept); k; k = next) {
		next = TAILQ_NEXT(k, link);
		if (strcmp(k->url, url) != 0)
			continue;
		if (!stands(k->bev)) {
			drop(k, true);
			continue;
		}
		struct bufferevent *bev = k->bev;
		drop(k, false);
		return bev;
	}
	return NULL;
}

void sup_relay_keep_put(sup_relay *x, const char *url, struct bufferevent *bev)
{
	size_t same = 0;
	sup_relay_kept *k;
	TAILQ_FOREACH(k, &x->kept, link)
	same += strcmp(k->url, url) == 0;
	if (same >= SUP_RELAY_KEEP_PER_NODE || x->nkept >= SUP_RELAY_KEEP_MAX ||
	    strlen(url) >= sizeof(k->url) || evbuffer_get_length(bufferevent_get_output(bev)) ||
	    !(k = calloc(1, sizeof(*k)))) {
		bufferevent_free(bev);
		return;
	}
	k->x = x;
	k->bev = bev;
	snprintf(k->url, sizeof(k->url), "%s", url);
	k->idle = evtimer_new(x->base, on_idle_timeout, k);
	struct timeval tv = { SUP_RELAY_KEEP_IDLE_MS / 1000, (SUP_RELAY_KEEP_IDLE_MS % 1000) * 1000 };
	if (!k->idle || evtimer_add(k->idle, &tv) < 0) {
		if (k->idle)
			event_free(k->idle);
		free(k);
		bufferevent_free(bev);
		return;
	}
	/* Newest first: the one most surely still open is taken next. */
	TAILQ_INSERT_HEAD(&x->kept, k, link);
	x->nkept++;
	bufferevent_setwatermark(bev, EV_READ, 0, 0);
	bufferevent_setcb(bev, on_idle_read, NULL, on_idle_event, k);
	bufferevent_enable(bev, EV_READ);
}

void sup_relay_keep_clear(sup_relay *x)
{
	while (!TAILQ_EMPTY(&x->kept))
		drop(TAILQ_FIRST(&x->kept), true);
}
