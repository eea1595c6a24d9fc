/* Internal to sup_http*.c: the server, a connection and a request, and the
 * calls between the server (routing, dispatch, request lifetime), the
 * connection (bytes in: heads, bodies, timers, closing) and the replies
 * (bytes out). Not for other modules. */
#ifndef SUP_HTTP_INT_H
#define SUP_HTTP_INT_H

#include <stdbool.h>
#include <sys/queue.h>
#include <time.h>

#include "sbx/bev_flush.h"
#include "sup_http.h"
#include "sup_httpin_parse.h"

struct bufferevent;
struct event;
struct evconnlistener;

/* Socket bytes of a streamed body buffered before reading stops. */
#define SUP_HTTP_BODY_HWM (256 * 1024)
/* How long a closing connection reads and drops what the client still
 * sends, so it sees our answer rather than a reset. */
#define SUP_HTTP_LINGER_S 2
/* Without the watch (out of descriptors), a client that ended its side
 * while its request is in flight is looked at again after this long,
 * doubling up to SUP_HTTP_PROBE_MAX_MS: long enough for its stack's reset
 * to come back over a slow link, short enough that a command of a client
 * that went away is cancelled at once on loopback. */
#define SUP_HTTP_PROBE_MS 5
#define SUP_HTTP_PROBE_MAX_MS 1000

typedef struct sup_conn sup_conn;

struct sup_http {
	struct event_base *base;
	sup_http_cfg cfg;
	struct evconnlistener *lis;
	struct event *resume; /* accepting again after running out of fds */
	struct event *drain;  /* the drain timeout of a graceful stop */
	uint16_t port;
	TAILQ_HEAD(, sup_conn) conns;
	unsigned nconns;
	unsigned refused;     /* connections refused since the last log line */
	time_t refused_at;
	bool stopping;
	void (*done)(void *ud);
	void *done_ud;
	time_t date_at;
	char date[40];        /* the Date header of this second */
	/* requests in flight per caller (sup_http_share.c) */
	struct sup_http_share_ent *shares;
	size_t nshares, shares_cap;
};

typedef enum {
	C_IDLE,    /* between requests (keep-alive) */
	C_HEAD,    /* a head is arriving */
	C_BODY,    /* a buffered body is arriving */
	C_ACTIVE,  /* a route's act owns the request */
	C_CLOSING, /* flushing the last answer, then dropping input until the end */
} sup_conn_state;

struct sup_conn {
	sup_http *h;
	struct bufferevent *bev;
	int fd;
	TAILQ_ENTRY(sup_conn) link;
	sup_conn_state st;
	sup_httpin_headscan scan;
	struct event *timer;  /* the current state's deadline */
	struct event *watch;  /* a reset or the end, while a request is in
			       * flight and reading is off (sup_http_conn.c) */
	int wfd;              /* the socket's second descriptor, the watch's */
	struct event *kick;   /* deferred work: finish a request, the next head */
	sbx_bev_flush out;    /* the output written once this loop pass is done */
	struct event *probe;  /* is a client that ended its side still there?
			       * (without the watch only; made then) */
	sup_http_req *req;
	unsigned probe_ms;    /* the probe's next delay; 0: not looking */
	bool asked;           /* the request in flight got the interim answer
			       * that a gone client's reset answers */
	bool close_after;     /* no keep-alive after the current answer */
	bool tls;             /* bev is libevent's OpenSSL one: no raw socket I/O */
	bool handshaken;      /* its handshake is over */
	bool rd_eof;          /* the client's end arrived (read) */
	bool shut;            /* our side is shut, lingering */
};

struct sup_http_req {
	sup_conn *c;
	const sup_http_route *route;
	const sup_http_mount *mount;
	void *state;
	char *head;                    /* our copy, NULs written after parsing */
	char *vpath;                   /* the path the gate routes by, or NULL */
	sup_httpin_head ph;
	sup_http_hdr hdrs[SUP_HTTPIN_MAX_HEADERS];
	sup_http_in in;
	char id[SUP_HTTP_ID_MAX], pid[SUP_HTTP_SEG_MAX];
	struct timespec t0;
	/* checks: what routing said, for the answer once authenticated */
	bool vouched;                  /* by the gate */
	bool body_unclaimed;           /* a body no route has taken yet: a refusal now
					* ends the connection, and says so */
	int why;                       /* no route: -EPERM (another method) or -ENOENT */
	char allow[64];
	void (*hold_cancel)(void *ud); /* held by the relay (sup_http_hold) */
	void *hold_ud;
	/* the body */
	bool chunked, body_done, cont_owed, timed_out, ready_pending;
	uint64_t body_left;
	sup_httpin_chunked dec;
	struct evbuffer *body;         /* buffered */
	size_t body_max;
	void (*on_ready)(void *ud);    /* streamed body, or raw input */
	void *ready_ud;
	/* the reply */
	struct evbuffer *hdr_out;      /* headers the act added */
	int status;
	bool started, chunked_out, raw, done, cut, gone;
	bool raw_half;                 /* raw: the client's end of input is not the end */
	bool close_asked;              /* a takeover: the client's own Connection: close */
	uint64_t out_len, out_sent;
	void (*on_drained)(void *ud);
	void *drained_ud;
	void (*on_credit)(size_t cost, void *ud);
	void *credit_ud;
	size_t owed;
	char tag[48];
	char note[96];
	void (*release)(const struct sup_tenant *who); /* in.who's */
	bool shared;                   /* counted in in.who's share */
};

/* sup_http_share.c: a request of who's begins (0, or -EDQUOT: who has
 * cfg.max_per_who in flight; -ENOMEM) or ends. */
int sup_http_share_take(sup_http *h, const void *who);
void sup_http_share_give(sup_http *h, const void *who);
unsigned sup_http_share_held(const sup_http *h, const void *who);

/* sup_http.c */
void sup_http_dispatch(sup_http_req *r);
void sup_http_run(sup_http_req *r);
void sup_http_log(const sup_http_req *r);
void sup_http_req_free(sup_http_req *r);
const char *sup_http_date(sup_http *h);
void sup_http_conn_gone(sup_http *h);
/* A connection refused or dropped before a request (one log line a
 * second at most, with the count). */
void sup_http_refused(sup_http *h, const char *why);
/* The request is over: log it, finish it from the loop. */
void sup_http_done(sup_http_req *r);
/* An answer of the framework itself (before or instead of an act). */
void sup_http_refuse(sup_http_req *r, int status, const char *code, const char *msg);

/* sup_http_conn.c */
void sup_conn_new(sup_http *h, int fd);
void sup_conn_close(sup_conn *c, const char *why);
void sup_conn_kick(sup_conn *c);
/* Reading on or off (never on after the client's end); off with a request
 * in flight, the watch comes on until the request ends. */
void sup_conn_reading(sup_conn *c, bool on);
void sup_conn_timer(sup_conn *c, unsigned secs);
/* The client's end came (read, or seen by the watch) while r is in flight. */
void sup_conn_peer_ended(sup_conn *c);
struct evbuffer *sup_conn_output(const sup_conn *c);
struct evbuffer *sup_conn_input(const sup_conn *c);

/* sup_http_body.c */
/* Read what a buffered body has arrived; runs the request once complete. */
void sup_conn_body(sup_http_req *r);
int sup_conn_body_next(sup_http_req *r, size_t max, sbx_err *err);
void sup_conn_body_took(sup_http_req *r, size_t n);

/* sup_http_tls_conn.c */
/* A TLS listener's bufferevent on fd (BEV_OPT_CLOSE_ON_FREE), made with
 * the server context in force; NULL if it could not be made. */
struct bufferevent *sup_conn_tls_bev(sup_http *h, int fd);
/* close_notify, once the handshake is over (before linger's FIN). */
void sup_conn_tls_close_notify(sup_conn *c);
/* An event of a TLS connection before its handshake is over: its end
 * (the idle deadline from there), or its failure or the client's going
 * (logged, bounded; a plain HTTP client answered 400 in clear; c closed). */
void sup_conn_tls_handshake(sup_conn *c, short what);

/* sup_http_reply.c */
void sup_http_give_credit(sup_http_req *r);

#endif
