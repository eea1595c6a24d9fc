/* Internal to sup_relay*.c and sup_dir_static.c: a TCP connection to a
 * peer's supervisor (sup_relay_dial.c) and one relayed request
 * (sup_relay_pipe.c). Not for other modules. */
#ifndef SUP_RELAY_INT_H
#define SUP_RELAY_INT_H

#include <event2/bufferevent.h>
#include <stdbool.h>
#include <stdint.h>

#include "sup_relay.h"

struct evdns_base;

/* "http://HOST:PORT[/]": HOST (brackets of a v6 address dropped) and PORT;
 * -EINVAL for anything else (https included: the cluster's network is the
 * Kubernetes one, its encryption the CNI's). */
int sup_relay_url(const char *url, char *host, size_t cap, uint16_t *port, sbx_err *err);

/* A bufferevent connecting to url (a numeric address at once, a name
 * through dns), TCP keep-alive on (a peer whose machine vanished is seen
 * within a minute), connect_ms for the connection (BEV_EVENT_TIMEOUT);
 * its callbacks ud's. NULL with err. */
struct bufferevent *sup_relay_connect(struct event_base *base, struct evdns_base *dns,
				      const char *url, unsigned connect_ms, bufferevent_data_cb rd,
				      bufferevent_data_cb wr, bufferevent_event_cb ev, void *ud,
				      sbx_err *err);
/* Connected: the connect deadline off. */
void sup_relay_connected(struct bufferevent *bev);

/* One relayed request (the state of sup_relay_family's route; the handle
 * of a create sent elsewhere). */
typedef struct sup_relay_pipe {
	sup_relay *x;
	sup_http_req *r;
	struct bufferevent *up;  /* to the owner */
	struct evbuffer *head;   /* the request head (and a buffered body) for it */
	char node[SUP_NODE_NAME_MAX + 1];
	bool body_only;          /* a buffered request: nothing more is read from the client */
	bool answered;           /* the owner's first bytes went to the client */
	bool up_shut;            /* the client's half-close passed on */
	bool over;
} sup_relay_pipe;

/* Relay r to node (its url from the directory): the head is built from r
 * (a buffered body after it when body_only), then bytes both ways. 0, or
 * an error for the caller to answer (nothing sent yet). */
int sup_relay_pipe_start(sup_relay_pipe *p, sup_relay *x, sup_http_req *r, const char *node,
			 bool body_only, sbx_err *err);
void sup_relay_pipe_release(sup_relay_pipe *p);

#endif
