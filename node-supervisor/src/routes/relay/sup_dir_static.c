/* The static node directory (--peer NAME=URL): the URLs as given, and each
 * peer's ready sandboxes as its relay door last said (GET
 * /relay/v1/capacity, every SUP_DIR_POLL_MS, one connection a poll,
 * bounded answer). A peer whose poll failed is picked for nothing until
 * one succeeds; a pick counts against the figures until the next poll, so
 * a burst of creates spreads over the peers instead of piling on one. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sup_dir_static.h"
#include "sup_httpin_parse.h"
#include "sup_log.h"
#include "sup_relay_int.h"
#include "sup_tls.h"

#define POLL_ANSWER_MAX (64u * 1024)
#define IMAGES_MAX 64

typedef struct peer_image {
	char *image;
	int ready; /* as polled, less the picks since */
} peer_image;

typedef struct peer {
	struct sup_dir_static *d;
	char name[SUP_NODE_NAME_MAX + 1];
	char tag[SUP_NODEID_TAG_MAX + 1];
	char url[256];
	struct bufferevent *poll; /* in flight */
	bool up;                  /* its last poll answered */
	bool warned;              /* its being down is logged once */
	peer_image images[IMAGES_MAX];
	size_t nimages;
} peer;

struct sup_dir_static {
	struct event_base *base;
	struct evdns_base *dns;
	char self[SUP_NODE_NAME_MAX + 1];
	char *key;
	struct sup_tls *tls;
	peer *peers;
	size_t npeers;
	struct event *tick;
};

static void images_clear(peer *pr)
{
	for (size_t i = 0; i < pr->nimages; i++)
		free(pr->images[i].image);
	pr->nimages = 0;
}

static void poll_over(peer *pr, bool ok, const char *why)
{
	if (pr->poll)
		bufferevent_free(pr->poll);
	pr->poll = NULL;
	pr->up = ok;
	if (ok) {
		if (pr->warned)
			sup_info("relay: node %s answers again", pr->name);
		pr->warned = false;
		return;
	}
	images_clear(pr);
	if (!pr->warned)
		sup_warn("relay: node %s (%s) does not answer its door: %s", pr->name, pr->url, why);
	pr->warned = true;
}

/* The whole answer is in: its head, then {"node","pools":[...]}. */
static void poll_answer(peer *pr, struct evbuffer *in)
{
	json_t *j = NULL, *pools, *v;
	int status;
	size_t i;
	if (sup_relay_answer(in, &status, &j) < 0 || status != 200) {
		json_decref(j);
		poll_over(pr, false, status ? "not a 200" : "no answer");
		return;
	}
	pools = json_object_get(j, "pools");
	if (!json_is_array(pools) ||
	    strcmp(json_string_value(json_object_get(j, "node")) ?: "", pr->name) != 0) {
		json_decref(j);
		poll_over(pr, false, "its answer is not a capacity of that node");
		return;
	}
	images_clear(pr);
	json_array_foreach(pools, i, v) {
		const char *image = json_string_value(json_object_get(v, "image"));
		json_int_t ready = json_integer_value(json_object_get(v, "ready"));
		size_t k;
		if (!image || ready <= 0)
			continue;
		for (k = 0; k < pr->nimages && strcmp(pr->images[k].image, image) != 0; k++)
			;
		if (k == pr->nimages) {
			if (k == IMAGES_MAX || !(pr->images[k].image = strdup(image)))
				continue;
			pr->images[k].ready = 0;
			pr->nimages++;
		}
		pr->images[k].ready += ready > 100000 ? 100000 : (int)ready;
	}
	json_decref(j);
	poll_over(pr, true, NULL);
}

static void poll_read(struct bufferevent *bev, void *ud)
{
	peer *pr = ud;
	if (evbuffer_get_length(bufferevent_get_input(bev)) > POLL_ANSWER_MAX)
		poll_over(pr, false, "an answer over 64 KiB");
}

static void poll_event(struct bufferevent *bev, short what, void *ud)
{
	peer *pr = ud;
	sup_dir_static *d = pr->d;
	if (what & BEV_EVENT_CONNECTED) {
		sup_relay_connected(bev);
		/* The whole poll is due within the tick's period. */
		struct timeval tv = { SUP_DIR_POLL_MS / 1000, (SUP_DIR_POLL_MS % 1000) * 1000 };
		bufferevent_set_timeouts(bev, &tv, NULL);
		bufferevent_enable(bev, EV_READ);
		bufferevent_write(bev, "GET /relay/v1/capacity HTTP/1.1\r\nHost: ", 39);
		bufferevent_write(bev, pr->name, strlen(pr->name));
		evbuffer_add_printf(bufferevent_get_output(bev),
				    "\r\nConnection: close\r\n%s: %s\r\n%s: %s\r\n\r\n",
				    SUP_HTTP_CLUSTER_KEY, d->key, SUP_HTTP_RELAY_FROM, d->self);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		poll_answer(pr, bufferevent_get_input(bev));
		return;
	}
	char why[200] = "no answer in time";
	if (!(what & BEV_EVENT_TIMEOUT))
		sup_relay_dial_error(bev, why, sizeof(why));
	poll_over(pr, false, why);
}

static void on_tick(evutil_socket_t fd, short what, void *ud)
{
	sup_dir_static *d = ud;
	for (size_t i = 0; i < d->npeers; i++) {
		peer *pr = &d->peers[i];
		sbx_err e;
		if (pr->poll)
			poll_over(pr, false, "no answer in time");
		pr->poll = sup_relay_connect(d->base, d->dns, d->tls, pr->url, SUP_DIR_POLL_MS, poll_read,
					     NULL, poll_event, pr, &e);
		if (!pr->poll)
			poll_over(pr, false, e.msg);
	}
}

/* Tags are told apart at start: one peer at most has this one. */
static int dir_find(void *ud, const char *tag, char *name, size_t name_cap, char *url,
		    size_t url_cap)
{
	sup_dir_static *d = ud;
	for (size_t i = 0; i < d->npeers; i++)
		if (strcmp(d->peers[i].tag, tag) == 0)
			return (size_t)snprintf(name, name_cap, "%s", d->peers[i].name) < name_cap &&
					       (size_t)snprintf(url, url_cap, "%s", d->peers[i].url) < url_cap
				       ? 0
				       : -ENAMETOOLONG;
	return -ENOENT;
}

static int dir_pick(void *ud, const char *image, char *node, size_t cap)
{
	sup_dir_static *d = ud;
	peer_image *best = NULL;
	const peer *at = NULL;
	for (size_t i = 0; i < d->npeers; i++) {
		peer *pr = &d->peers[i];
		for (size_t k = 0; pr->up && k < pr->nimages; k++)
			if (strcmp(pr->images[k].image, image) == 0 && pr->images[k].ready > 0 &&
			    (!best || pr->images[k].ready > best->ready)) {
				best = &pr->images[k];
				at = pr;
			}
	}
	if (!best || (size_t)snprintf(node, cap, "%s", at->name) >= cap)
		return -ENOENT;
	best->ready--;
	return 0;
}

/* Every peer given (one whose door does not answer is asked too: its
 * caller says it did not answer). */
static void dir_each(void *ud, void (*fn)(void *fn_ud, const char *name, const char *url),
		     void *fn_ud)
{
	sup_dir_static *d = ud;
	for (size_t i = 0; i < d->npeers; i++)
		fn(fn_ud, d->peers[i].name, d->peers[i].url);
}

const sup_directory_ops sup_dir_static_ops = {
	.find = dir_find,
	.each = dir_each,
	.pick = dir_pick,
};

sup_dir_static *sup_dir_static_new(struct event_base *base, const char *self,
				   const char *const *peers, size_t npeers, const char *key,
				   struct sup_tls *tls, sbx_err *err)
{
	bool verify = tls && sup_tls_client_ctx(tls);
	sup_dir_static *d = calloc(1, sizeof(*d));
	if (!d || !(d->peers = calloc(npeers ? npeers : 1, sizeof(*d->peers))) ||
	    !(d->key = strdup(key ? key : ""))) {
		sbx_err_set(err, -ENOMEM, "--peer");
		sup_dir_static_free(d);
		return NULL;
	}
	d->base = base;
	d->tls = tls;
	snprintf(d->self, sizeof(d->self), "%s", self);
	char self_tag[SUP_NODEID_TAG_MAX + 1];
	sup_nodeid_tag(self, self_tag);
	for (size_t i = 0; i < npeers; i++) {
		peer *pr = &d->peers[i];
		const char *eq = strchr(peers[i], '=');
		char host[256];
		uint16_t port = 0;
		bool https = false;
		pr->d = d;
		snprintf(pr->name, sizeof(pr->name), "%.*s", eq ? (int)(eq - peers[i]) : 0, peers[i]);
		if (!eq || sup_relay_url(eq + 1, host, sizeof(host), &port, &https, err) < 0 ||
		    strlen(eq + 1) >= sizeof(pr->url)) {
			sbx_err_set(err, -EINVAL, "--peer %.128s: want NAME=http(s)://HOST:PORT", peers[i]);
			sup_dir_static_free(d);
			return NULL;
		}
		/* nodes speak TLS to each other when they can verify each
		 * other (--tls-ca), and then only */
		if (https != verify) {
			sbx_err_set(err, -EINVAL, "--peer %.128s: %s", peers[i],
				    verify ? "with --tls-ca, peers are https://"
					   : "an https:// peer needs --tls-ca (the cluster's CA) to be verified");
			sup_dir_static_free(d);
			return NULL;
		}
		snprintf(pr->url, sizeof(pr->url), "%s", eq + 1);
		sup_nodeid_tag(pr->name, pr->tag);
		/* The same name twice, or two names whose ids would look alike. */
		const char *clash = strcmp(pr->tag, self_tag) == 0 ? self : NULL;
		for (size_t k = 0; !clash && k < i; k++)
			if (strcmp(d->peers[k].tag, pr->tag) == 0)
				clash = d->peers[k].name;
		if (clash) {
			sbx_err_set(err, -EINVAL, "--peer %.100s: %s", pr->name,
				    strcmp(clash, pr->name) == 0
					    ? "given twice, or this node"
					    : "its id tag is another node's (rename one of them)");
			sup_dir_static_free(d);
			return NULL;
		}
		d->npeers++;
	}
	d->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
					      EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (d->dns)
		evdns_base_load_hosts(d->dns, NULL);
	d->tick = event_new(base, -1, EV_PERSIST, on_tick, d);
	struct timeval tv = { SUP_DIR_POLL_MS / 1000, (SUP_DIR_POLL_MS % 1000) * 1000 };
	if (!d->tick || event_add(d->tick, &tv) < 0) {
		sbx_err_set(err, -ENOMEM, "--peer");
		sup_dir_static_free(d);
		return NULL;
	}
	event_active(d->tick, EV_TIMEOUT, 0); /* the first poll now */
	return d;
}

void sup_dir_static_free(sup_dir_static *d)
{
	if (!d)
		return;
	for (size_t i = 0; d->peers && i < d->npeers; i++) {
		if (d->peers[i].poll)
			bufferevent_free(d->peers[i].poll);
		images_clear(&d->peers[i]);
	}
	if (d->tick)
		event_free(d->tick);
	if (d->dns)
		evdns_base_free(d->dns, 0);
	if (d->key) {
		explicit_bzero(d->key, strlen(d->key));
		free(d->key);
	}
	free(d->peers);
	free(d);
}
