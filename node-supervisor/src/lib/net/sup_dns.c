/* sup_dns: see sup_dns.h. */
#include "sup_dns.h"

#include <errno.h>
#include <event2/dns.h>
#include <event2/dns_struct.h>
#include <event2/event.h>
#include <event2/util.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include "sup_log.h"

typedef struct pending pending;
struct pending {
	sup_dns *d;
	struct evdns_server_request *req; /* NULL once answered or dropped */
	struct evdns_request *up;         /* the upstream query, until its callback */
	struct sockaddr_storage from;
	uint64_t who;
	int family;
	sup_netpol_name_verdict v;
	TAILQ_ENTRY(pending) link;
};

struct sup_dns {
	struct event_base *base;
	struct evdns_base *upstream;
	struct evdns_server_port *port;
	sup_dns_cfg cfg;
	sup_dns_hooks hooks;
	TAILQ_HEAD(, pending) pending;
	unsigned npending;
	bool stopped;
	sup_dns_stats st;
};

/* Libevent 2.1's server port dereferences NULL on a datagram shorter than a
 * DNS header (its request_parse takes its error path before it allocates
 * the request, and reads through the NULL there; libevent issue 1231,
 * fixed in 2.2): one byte from any
 * sandbox would end the supervisor. The kernel drops such datagrams before
 * libevent reads them: a UDP socket's filter sees the UDP header (8 bytes)
 * and then the payload, so the filter keeps lengths of 8 + 12 and more.
 * What was queued before the filter came (a sandbox restored may ask as
 * soon as the socket is bound) is dropped unread: clients ask again. */
static int drop_short(int fd, sbx_err *err)
{
	static struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_LEN, 0),
		BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 8 + 12, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, 0xffffffffu),
		BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct sock_fprog prog = { .len = sizeof(code) / sizeof(code[0]), .filter = code };
	if (setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &prog, sizeof(prog)) < 0)
		return sbx_err_sys(err, -errno, "resolver: the filter of short datagrams");
	char b;
	while (recv(fd, &b, 1, MSG_DONTWAIT | MSG_TRUNC) >= 0)
		;
	return 0;
}

static bool same_sender(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	return evutil_sockaddr_cmp((const struct sockaddr *)a, (const struct sockaddr *)b, 0) == 0;
}

static unsigned clamp_ttl(const sup_dns *d, int ttl)
{
	if (ttl < (int)d->cfg.min_ttl)
		return d->cfg.min_ttl;
	if ((unsigned)ttl > d->cfg.max_ttl)
		return d->cfg.max_ttl;
	return (unsigned)ttl;
}

static void respond(sup_dns *d, struct evdns_server_request *req, int code)
{
	if (code == DNS_ERR_NONE)
		d->st.answered++;
	else if (code == DNS_ERR_NOTEXIST || code == DNS_ERR_REFUSED || code == DNS_ERR_NOTIMPL)
		d->st.refused++;
	else
		d->st.failed++;
	/* RA: we recurse for the client */
	evdns_server_request_set_flags(req, 0x80);
	if (evdns_server_request_respond(req, code) < 0)
		evdns_server_request_drop(req);
}

static void pending_free(pending *p)
{
	TAILQ_REMOVE(&p->d->pending, p, link);
	p->d->npending--;
	free(p);
}

/* One answer record per address: libevent's add_a_reply (and
 * add_aaaa_reply) with n addresses writes a single record of n times the
 * address's length, which resolvers refuse, so a name with several
 * addresses did not resolve at all. */
static int add_replies(struct evdns_server_request *req, const char *qname, int family, int count,
		       const void *addrs, unsigned ttl)
{
	const uint8_t *a = addrs;
	size_t len = family == 4 ? 4 : 16;
	for (int i = 0; i < count; i++) {
		int rc = family == 4 ? evdns_server_request_add_a_reply(req, qname, 1, a + i * len, (int)ttl)
				     : evdns_server_request_add_aaaa_reply(req, qname, 1, a + i * len,
									   (int)ttl);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void on_upstream(int result, char type, int count, int ttl, void *addrs, void *arg)
{
	pending *p = arg;
	sup_dns *d = p->d;
	struct evdns_server_request *req = p->req;
	p->up = NULL;
	if (!req) {
		pending_free(p);
		return;
	}
	if (result == DNS_ERR_CANCEL || result == DNS_ERR_SHUTDOWN) {
		evdns_server_request_drop(req);
		pending_free(p);
		return;
	}
	const char *qname = req->questions[0]->name;
	int code;
	if (result == DNS_ERR_NONE && count > 0 &&
	    (type == DNS_IPv4_A || type == DNS_IPv6_AAAA)) {
		int family = type == DNS_IPv4_A ? 4 : 6;
		unsigned t = clamp_ttl(d, ttl);
		if (family != p->family ||
		    d->hooks.admit(p->who, family, addrs, (size_t)count, &p->v, t, d->hooks.ud) < 0) {
			code = DNS_ERR_SERVERFAILED;
		} else {
			code = add_replies(req, qname, family, count, addrs, t) < 0 ? DNS_ERR_SERVERFAILED
										 : DNS_ERR_NONE;
		}
	} else if (result == DNS_ERR_NONE || result == DNS_ERR_NODATA) {
		code = DNS_ERR_NONE; /* the name exists without addresses of this type */
	} else if (result == DNS_ERR_NOTEXIST) {
		code = DNS_ERR_NOTEXIST;
	} else {
		code = DNS_ERR_SERVERFAILED;
	}
	respond(d, req, code);
	p->req = NULL;
	pending_free(p);
}

static unsigned pending_of(const sup_dns *d, const struct sockaddr_storage *from)
{
	unsigned n = 0;
	const pending *p;
	TAILQ_FOREACH(p, &d->pending, link)
	if (same_sender(&p->from, from))
		n++;
	return n;
}

static void on_query(struct evdns_server_request *req, void *ud)
{
	sup_dns *d = ud;
	if (d->stopped) {
		evdns_server_request_drop(req);
		return;
	}
	struct sockaddr_storage from;
	memset(&from, 0, sizeof(from));
	if (evdns_server_request_get_requesting_addr(req, (struct sockaddr *)&from, sizeof(from)) < 0) {
		evdns_server_request_drop(req);
		return;
	}
	if (req->nquestions != 1) {
		respond(d, req, DNS_ERR_FORMAT);
		return;
	}
	const struct evdns_server_question *q = req->questions[0];
	char name[SUP_NETPOL_NAME_MAX + 2];
	if (q->dns_question_class != EVDNS_CLASS_INET ||
	    sup_netpol_norm_name(q->name, name, sizeof(name)) < 0) {
		respond(d, req, DNS_ERR_NOTEXIST);
		return;
	}
	pending *p = calloc(1, sizeof(*p));
	if (!p) {
		respond(d, req, DNS_ERR_SERVERFAILED);
		return;
	}
	int rc = d->hooks.decide((const struct sockaddr *)&from, name, &p->v, &p->who, d->hooks.ud);
	if (rc <= 0) {
		free(p);
		if (rc < 0)
			sup_warn("dns: a query from an unknown sender dropped");
		respond(d, req, rc < 0 ? DNS_ERR_REFUSED : DNS_ERR_NOTEXIST);
		return;
	}
	if (q->type != EVDNS_TYPE_A && q->type != EVDNS_TYPE_AAAA) {
		free(p);
		respond(d, req, DNS_ERR_NOTIMPL);
		return;
	}
	if (d->npending >= d->cfg.max_pending || pending_of(d, &from) >= d->cfg.max_pending_each) {
		free(p);
		respond(d, req, DNS_ERR_SERVERFAILED);
		return;
	}
	p->d = d;
	p->req = req;
	p->from = from;
	p->family = q->type == EVDNS_TYPE_A ? 4 : 6;
	TAILQ_INSERT_TAIL(&d->pending, p, link);
	d->npending++;
	p->up = p->family == 4
			? evdns_base_resolve_ipv4(d->upstream, name, DNS_QUERY_NO_SEARCH, on_upstream, p)
			: evdns_base_resolve_ipv6(d->upstream, name, DNS_QUERY_NO_SEARCH, on_upstream, p);
	if (!p->up) {
		respond(d, req, DNS_ERR_SERVERFAILED);
		p->req = NULL;
		pending_free(p);
	}
}

sup_dns *sup_dns_new(struct event_base *base, int server_fd, const struct sockaddr *upstream,
		     socklen_t upstream_len, const sup_dns_cfg *cfg, const sup_dns_hooks *hooks,
		     sbx_err *err)
{
	sup_dns *d = calloc(1, sizeof(*d));
	if (!d) {
		close(server_fd);
		sbx_err_set(err, -ENOMEM, "resolver");
		return NULL;
	}
	d->base = base;
	d->cfg = *cfg;
	d->hooks = *hooks;
	TAILQ_INIT(&d->pending);
	if (drop_short(server_fd, err) < 0) {
		close(server_fd);
		sup_dns_free(d);
		return NULL;
	}
	evutil_make_socket_nonblocking(server_fd);
	/* the upstream's socket is made here, in the thread's namespace, and
	 * kept (evdns 2.1 makes a nameserver's UDP socket once) */
	d->upstream = evdns_base_new(base, 0);
	char t[16], a[16];
	snprintf(t, sizeof(t), "%u", (cfg->timeout_ms + 999) / 1000);
	snprintf(a, sizeof(a), "%u", cfg->attempts);
	if (!d->upstream || evdns_base_set_option(d->upstream, "timeout:", t) < 0 ||
	    evdns_base_set_option(d->upstream, "attempts:", a) < 0 ||
	    evdns_base_set_option(d->upstream, "randomize-case:", "0") < 0 ||
	    evdns_base_nameserver_sockaddr_add(d->upstream, upstream, upstream_len, 0) != 0) {
		close(server_fd);
		sbx_err_set(err, -EINVAL, "resolver: the upstream resolver could not be set");
		sup_dns_free(d);
		return NULL;
	}
	d->port = evdns_add_server_port_with_base(base, server_fd, 0, on_query, d);
	if (!d->port) {
		close(server_fd);
		sbx_err_set(err, -ENOMEM, "resolver: server port");
		sup_dns_free(d);
		return NULL;
	}
	return d;
}

void sup_dns_stop(sup_dns *d)
{
	if (!d || d->stopped)
		return;
	d->stopped = true;
	pending *p;
	TAILQ_FOREACH(p, &d->pending, link)
	if (p->up)
		evdns_cancel_request(d->upstream, p->up);
	if (d->port) {
		/* freed once the requests still held are dropped */
		evdns_close_server_port(d->port);
		d->port = NULL;
	}
}

void sup_dns_free(sup_dns *d)
{
	if (!d)
		return;
	sup_dns_stop(d);
	if (d->upstream)
		evdns_base_free(d->upstream, 0);
	pending *p;
	while ((p = TAILQ_FIRST(&d->pending)) != NULL) {
		/* NOLINTNEXTLINE(clang-analyzer-unix.Malloc): the callee unlinks it first; the analyzer cannot follow sys/queue.h */
		if (p->req)
			evdns_server_request_drop(p->req);
		pending_free(p);
	}
	free(d);
}

void sup_dns_stats_get(const sup_dns *d, sup_dns_stats *out)
{
	*out = d->st;
	out->pending = d->npending;
}
