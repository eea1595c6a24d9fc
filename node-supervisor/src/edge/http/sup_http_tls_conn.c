/* A connection's TLS (sup_http_cfg.tls): the OpenSSL bufferevent a TLS
 * listener's connection is made of, its handshake's end and failure (a
 * plain HTTP client gets a 400 in clear), its close_notify, and what an act
 * may ask of a request's TLS. sup_http_conn.c calls these at its points
 * and keeps the connection's states, timers and closing; nothing here
 * reads or writes the socket once the handshake is over (the bufferevent
 * carries records, not the output's bytes).
 *
 * The bufferevent is libevent's OpenSSL one over the socket, so its input
 * and output hold plaintext and everything built on them (framing, bounds,
 * backpressure, the watch, upgrades) is the same as in clear; a client's
 * end without close_notify is its end as in clear
 * (SSL_OP_IGNORE_UNEXPECTED_EOF, sup_tls.c). DESIGN.md, "TLS", says why
 * this and not OpenSSL under our own loop. */
#include "sup_http_int.h"

#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "sup_tls.h"

struct bufferevent *sup_conn_tls_bev(sup_http *h, int fd)
{
	/* the context in force now: a reload swaps it for later ones */
	SSL *ssl = SSL_new(sup_tls_server_ctx(h->cfg.tls));
	struct bufferevent *bev =
		ssl ? bufferevent_openssl_socket_new(h->base, fd, ssl, BUFFEREVENT_SSL_ACCEPTING,
						     BEV_OPT_CLOSE_ON_FREE)
		    : NULL; /* the SSL is freed with it, or on its failure */
	if (bev)
		bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

/* TLS: our close_notify before our FIN, so a client reading to the end
 * sees a whole answer (the output is empty: SSL_write took it all). */
void sup_conn_tls_close_notify(sup_conn *c)
{
	SSL *ssl = c->tls && c->handshaken ? bufferevent_openssl_get_ssl(c->bev) : NULL;
	if (!ssl)
		return;
	ERR_clear_error();
	SSL_shutdown(ssl); /* a socket that cannot take it now: the FIN alone */
	ERR_clear_error();
}

/* The bytes of a client that speaks plain HTTP to a TLS port (OpenSSL
 * saw "GET ", "POST "... where a handshake starts) get a plain answer:
 * what it sent read and dropped (bounded), the answer, our end. */
static void plain_refusal(sup_conn *c)
{
	static const char body[] = "{\"error\":{\"code\":\"tls_required\",\"message\":\"this "
				   "port speaks HTTPS: call it with https://\"}}";
	char head[160], sink[4096];
	int n = snprintf(head, sizeof(head),
			 "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
			 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
			 sizeof(body) - 1);
	for (int i = 0; i < 16 && recv(c->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; i++)
		;
	struct iovec iov[2] = { { head, (size_t)n }, { (void *)body, sizeof(body) - 1 } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	if (sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) > 0)
		shutdown(c->fd, SHUT_WR);
}

/* The handshake failed, or the client went before it was over: a bounded
 * cost (one log line a second at most), nothing else touched. */
static void handshake_failed(sup_conn *c, short what)
{
	unsigned long e = bufferevent_get_openssl_error(c->bev), first = e;
	char why[200];
	while (e)
		e = bufferevent_get_openssl_error(c->bev);
	if (first && ERR_GET_REASON(first) == SSL_R_HTTP_REQUEST) {
		plain_refusal(c);
		sup_http_refused(c->h, "plain HTTP to the TLS port (answered 400)");
	} else if (first) {
		char r[160];
		ERR_error_string_n(first, r, sizeof(r));
		snprintf(why, sizeof(why), "TLS handshake failed: %s", r);
		sup_http_refused(c->h, why);
	} else if (what & BEV_EVENT_ERROR) {
		snprintf(why, sizeof(why), "TLS handshake: %s",
			 evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		sup_http_refused(c->h, why);
	} /* the client's end before a handshake: nothing to say */
	sup_conn_close(c, NULL);
}

void sup_conn_tls_handshake(sup_conn *c, short what)
{
	if (what & BEV_EVENT_CONNECTED) {
		/* a TLS handshake is over: the idle deadline from here */
		c->handshaken = true;
		if (c->st == C_IDLE)
			sup_conn_timer(c, c->h->cfg.idle_timeout_s);
		return;
	}
	handshake_failed(c, what);
}

/* ---- TLS, for acts ---- */

bool sup_http_tls(const sup_http_req *r)
{
	return r->c && r->c->tls;
}

int sup_http_tls_peer(const sup_http_req *r, char *why, size_t cap)
{
	if (!sup_http_tls(r)) {
		snprintf(why, cap, "it came in clear, not over TLS");
		return 0;
	}
	switch (sup_tls_peer_of(bufferevent_openssl_get_ssl(r->c->bev), why, cap)) {
	case SUP_TLS_PEER_OK:
		return 1;
	case SUP_TLS_PEER_BAD:
		return -1;
	default:
		return 0;
	}
}
