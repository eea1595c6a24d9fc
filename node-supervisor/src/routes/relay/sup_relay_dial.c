/* A connection to a peer's supervisor: the URL read, the address numeric
 * or resolved off the loop (evdns), TLS when it is https:// (the peer
 * verified against the cluster's CA, sup_tls.h), keep-alive and a
 * deadline for the connection and its handshake, so an unreachable peer
 * is an answer, never a hang; and a peer's whole JSON answer read back. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "sup_httpin_parse.h"
#include "sup_relay_int.h"
#include "sup_tls.h"

int sup_relay_url(const char *url, char *host, size_t cap, uint16_t *port, bool *tls,
		  sbx_err *err)
{
	const char *h = url, *end, *colon;
	bool https = strncmp(url, "https://", 8) == 0;
	if (!https && strncmp(url, "http://", 7) != 0)
		return sbx_err_set(err, -EINVAL, "%.128s: want http(s)://HOST:PORT", url);
	h += https ? 8 : 7;
	if (*h == '[') {
		end = strchr(h, ']');
		if (!end || end[1] != ':')
			return sbx_err_set(err, -EINVAL, "%.128s: want http(s)://[V6]:PORT", url);
		colon = end + 1;
		h++;
	} else {
		colon = strchr(h, ':');
		end = colon;
	}
	if (!colon || end == h || (size_t)(end - h) >= cap)
		return sbx_err_set(err, -EINVAL, "%.128s: want http(s)://HOST:PORT", url);
	char *stop = NULL;
	unsigned long p = strtoul(colon + 1, &stop, 10);
	if (stop == colon + 1 || p == 0 || p > 65535 || (*stop && strcmp(stop, "/") != 0))
		return sbx_err_set(err, -EINVAL, "%.128s: want http(s)://HOST:PORT", url);
	memcpy(host, h, (size_t)(end - h));
	host[end - h] = '\0';
	*port = (uint16_t)p;
	if (tls)
		*tls = https;
	return 0;
}

static void keepalive(evutil_socket_t fd)
{
	int on = 1, idle = 10, intvl = 5, cnt = 3;
	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
}

/* The bufferevent for a peer: a socket's, or (https://) libevent's
 * OpenSSL one on the socket, which verifies the peer in its handshake. */
static struct bufferevent *dial_bev(struct event_base *base, struct sup_tls *tls, const char *url,
				    const char *host, bool https, sbx_err *err)
{
	SSL_CTX *ctx = tls ? sup_tls_client_ctx(tls) : NULL;
	if (https && !ctx) {
		sbx_err_set(err, -ENETUNREACH, "relay: %.128s is https:// and this node has no "
					       "--tls-ca to verify it by", url);
		return NULL;
	}
	if (!https && ctx) {
		sbx_err_set(err, -ENETUNREACH, "relay: %.128s is plain http:// and this node (with "
					       "--tls-ca) relays only over HTTPS", url);
		return NULL;
	}
	if (!https)
		return bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	SSL *ssl = SSL_new(ctx);
	if (!ssl)
		return NULL;
	/* the name for a peer's virtual hosting; its certificate is judged
	 * by its chain alone (sup_tls.c) */
	struct in6_addr a;
	if (!inet_pton(AF_INET, host, &a) && !inet_pton(AF_INET6, host, &a))
		SSL_set_tlsext_host_name(ssl, host);
	struct bufferevent *bev = bufferevent_openssl_socket_new(base, -1, ssl,
								 BUFFEREVENT_SSL_CONNECTING,
								 BEV_OPT_CLOSE_ON_FREE);
	if (bev)
		bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

struct bufferevent *sup_relay_connect(struct event_base *base, struct evdns_base *dns,
				      struct sup_tls *tls, const char *url, unsigned connect_ms,
				      bufferevent_data_cb rd, bufferevent_data_cb wr,
				      bufferevent_event_cb ev, void *ud, sbx_err *err)
{
	char host[256];
	uint16_t port = 0;
	bool https = false;
	if (sup_relay_url(url, host, sizeof(host), &port, &https, err) < 0)
		return NULL;
	sbx_err_clear(err);
	struct bufferevent *bev = dial_bev(base, tls, url, host, https, err);
	if (!bev) {
		if (!err->code)
			sbx_err_set(err, -ENOMEM, "relay: out of memory");
		return NULL;
	}
	bufferevent_setcb(bev, rd, wr, ev, ud);
	/* A connect in flight waits on writing, a handshake on both: their
	 * deadline. */
	struct timeval tv = { (time_t)(connect_ms / 1000), (suseconds_t)(connect_ms % 1000) * 1000 };
	bufferevent_set_timeouts(bev, &tv, &tv);
	struct sockaddr_storage ss;
	int sl = (int)sizeof(ss);
	char spec[300];
	snprintf(spec, sizeof(spec), strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, (unsigned)port);
	int rc;
	if (evutil_parse_sockaddr_port(spec, (struct sockaddr *)&ss, &sl) == 0)
		rc = bufferevent_socket_connect(bev, (struct sockaddr *)&ss, sl);
	else if (dns)
		rc = bufferevent_socket_connect_hostname(bev, dns, AF_UNSPEC, host, port);
	else
		rc = -1;
	if (rc < 0) {
		bufferevent_free(bev);
		sbx_err_set(err, -ENETUNREACH, "relay: cannot connect to %.128s", url);
		return NULL;
	}
	keepalive(bufferevent_getfd(bev));
	return bev;
}

void sup_relay_connected(struct bufferevent *bev)
{
	/* A name resolved meanwhile: the socket is new. */
	keepalive(bufferevent_getfd(bev));
	bufferevent_set_timeouts(bev, NULL, NULL);
}

void sup_relay_dial_error(struct bufferevent *bev, char *why, size_t cap)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	unsigned long e = ssl ? bufferevent_get_openssl_error(bev) : 0, more;
	while (ssl && (more = bufferevent_get_openssl_error(bev)))
		(void)more;
	int dns = bufferevent_socket_get_dns_error(bev);
	if (dns)
		snprintf(why, cap, "%s", evutil_gai_strerror(dns));
	else if (ssl && (e || SSL_get_verify_result(ssl) != X509_V_OK))
		sup_tls_dial_error(ssl, e, why, cap);
	else
		snprintf(why, cap, "%s", evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
}

void sup_relay_shut_write(struct bufferevent *bev)
{
	SSL *ssl = bufferevent_openssl_get_ssl(bev);
	if (ssl) {
		ERR_clear_error();
		SSL_shutdown(ssl);
		ERR_clear_error();
	}
	shutdown(bufferevent_getfd(bev), SHUT_WR);
}

int sup_relay_answer(struct evbuffer *in, int *status, json_t **body)
{
	size_t n = evbuffer_get_length(in);
	const char *b = (const char *)evbuffer_pullup(in, -1);
	const char *end = b ? memmem(b, n, "\r\n\r\n", 4) : NULL;
	*status = 0;
	*body = NULL;
	sup_httpin_head *h = end ? calloc(1, sizeof(*h)) : NULL;
	if (!h || sup_httpin_parse_response(b, (size_t)(end - b) + 4, h) < 0) {
		free(h);
		return -EBADMSG;
	}
	*status = h->status;
	free(h);
	*body = json_loadb(end + 4, n - (size_t)(end + 4 - b), 0, NULL);
	return 0;
}
