/* Internal to sup_relay*.c and sup_dir_static.c: a TCP connection to a
 * peer's supervisor (sup_relay_dial.c) and one relayed request
 * (sup_relay_pipe.c). Not for other modules. */
#ifndef SUP_RELAY_INT_H
#define SUP_RELAY_INT_H

#include <event2/bufferevent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "sup_httpin_parse.h"
#include "sup_relay.h"

struct evdns_base;
struct sup_tls;

/* "http://HOST:PORT[/]" or "https://...": HOST (brackets of a v6 address
 * dropped), PORT and whether it is https (tls may be NULL); -EINVAL for
 * anything else. */
int sup_relay_url(const char *url, char *host, size_t cap, uint16_t *port, bool *tls,
		  sbx_err *err);

/* A bufferevent connecting to url (a numeric address at once, a name
 * through dns), TCP keep-alive on (a peer whose machine vanished is seen
 * within a minute), connect_ms for the connection and, over TLS, its
 * handshake (BEV_EVENT_TIMEOUT); its callbacks ud's. tls: the node's
 * (NULL: none): with a --tls-ca only https:// peers are dialled, each
 * proving itself against that CA in its handshake (libevent's OpenSSL
 * bufferevent: BEV_EVENT_CONNECTED once it did), this node presenting its
 * own certificate; without one no https:// peer is. NULL with err. */
struct bufferevent *sup_relay_connect(struct event_base *base, struct evdns_base *dns,
				      struct sup_tls *tls, const char *url, unsigned connect_ms,
				      bufferevent_data_cb rd, bufferevent_data_cb wr,
				      bufferevent_event_cb ev, void *ud, sbx_err *err);
/* Connected (over TLS: the peer proved itself): the deadline off. */
void sup_relay_connected(struct bufferevent *bev);
/* Why a connection to a peer failed (an event with BEV_EVENT_ERROR): its
 * name not resolved, the socket's error, or TLS's (the peer's certificate
 * not signed by the cluster's CA, the handshake's reason). */
void sup_relay_dial_error(struct bufferevent *bev, char *why, size_t cap);
/* Our end of writing: over TLS a close_notify first (the output is
 * empty), then the socket's FIN; the peer still answers. */
void sup_relay_shut_write(struct bufferevent *bev);
/* A peer's answer read whole to the connection's end (Connection: close):
 * its status and JSON body (*body NULL when it is not JSON). -EBADMSG:
 * no head that can be read. */
int sup_relay_answer(struct evbuffer *in, int *status, json_t **body);

/* Connections to peers kept between requests (sup_relay_keep.c): at most
 * SUP_RELAY_KEEP_PER_NODE idle per URL and SUP_RELAY_KEEP_MAX in all, each
 * closed after SUP_RELAY_KEEP_IDLE_MS idle (below a supervisor's
 * --idle-timeout, so the peer never closes one first), or when the peer
 * closes or sends anything. */
#define SUP_RELAY_KEEP_PER_NODE 8
#define SUP_RELAY_KEEP_MAX 256
#define SUP_RELAY_KEEP_IDLE_MS 15000

typedef struct sup_relay_kept sup_relay_kept;

/* An idle connection to url that still stands (its callbacks the
 * caller's to set), or NULL. */
struct bufferevent *sup_relay_keep_take(sup_relay *x, const char *url);
/* bev (between answers: nothing read or written pending) kept for url,
 * or freed past the bounds. */
void sup_relay_keep_put(sup_relay *x, const char *url, struct bufferevent *bev);
/* Every kept connection closed. */
void sup_relay_keep_clear(sup_relay *x);

/* One relayed request (the state of sup_relay_family's route; the handle
 * of a create sent elsewhere). */
typedef struct sup_relay_pipe {
	sup_relay *x;
	sup_http_req *r;
	struct bufferevent *up;  /* to the owner */
	struct evbuffer *head;   /* the request head (and a buffered body) for it */
	struct evbuffer *out;    /* the answer's bytes on their way to the client */
	char node[SUP_NODE_NAME_MAX + 1];
	char tag[SUP_NODEID_TAG_MAX + 1];
	char url[256];           /* the owner's */
	bool body_only;          /* a buffered request: nothing more is read from the client */
	bool keep;               /* framed by its head: both connections may go on after it */
	uint64_t body_left;      /* keep: the client's body bytes still to pass on */
	bool answered;           /* the owner's first bytes went to the client */
	bool up_paused;          /* the owner is not read: SUP_RELAY_WINDOW of it waits */
	bool up_shut;            /* the client's half-close passed on (not keep) */
	bool over;
	/* the owner's answer, followed (RFC 9112 6.3) */
	int resp;                /* where in it: head, body by length or chunks, to the end, done */
	int status;              /* its (last) head's */
	uint64_t resp_left;      /* of a Content-Length body */
	sup_httpin_chunked dec;
	bool head_req;           /* a HEAD request: no body follows */
	bool resp_close;         /* the connection cannot carry another request */
	/* A kept connection the owner closed meanwhile (it restarted): an
	 * idempotent request whose every byte is in head goes again, once, on
	 * a new connection, if nothing of an answer came. */
	bool reused;             /* up is a kept connection */
	bool replay;             /* head (kept whole) is the whole request, and idempotent */
	bool retried;
} sup_relay_pipe;

/* Relay r to the node of tag (its name and url from the directory): the
 * head is built from r
 * (a buffered body after it when body_only), then bytes both ways. 0, or
 * an error for the caller to answer (nothing sent yet). */
int sup_relay_pipe_start(sup_relay_pipe *p, sup_relay *x, sup_http_req *r, const char *tag,
			 bool body_only, sbx_err *err);
void sup_relay_pipe_release(sup_relay_pipe *p);

#endif
