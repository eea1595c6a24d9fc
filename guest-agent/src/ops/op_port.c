/* port.open and port.list: a byte stream to a TCP port on the sandbox's own
 * loopback, and the TCP ports something listens on (PROTOCOL.md).
 *
 * port.open connects from the agent, which lives in the sandbox's network
 * namespace, so it works for sandboxes with no network but loopback. The
 * connect is non-blocking; a refused one is not_found. Bytes flow both ways
 * on channel "tcp" within the stream's credit: the socket is read only
 * while the requester has credit (a slow reader stops the server inside on
 * its own socket), and the requester's bytes are credited back only once
 * written to the socket, so what waits here is at most one window.
 * The server's bytes go through a pipe by splice(2) (op_splice.c), so the
 * agent copies none of them (half of its CPU per byte when it read and
 * wrote them); without the pipe (pipe limits reached) they are read.
 * While a bulk answer flows, the socket is read in larger turns
 * (op_port_batch.c: a raised SO_RCVLOWAT and a 1 ms timer), so a frame and
 * the supervisor's write carry a quarter MiB rather than one TCP segment.
 * port.list reads /proc/net/tcp and tcp6 (the namespace's tables).
 * This file must not resolve paths or run commands. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "sbx/proto.h"
#include "log.h"
#include "ops.h"
#include "op_port_batch.h"
#include "op_splice.h"
#include "op_util.h"
#include "session.h"

/* Largest read per DATA frame; data_room bounds it further. With splice
 * the pipe's size, asked for as this much, bounds it too. */
#define PORT_READ_CHUNK (1024u * 1024)
/* A connect on loopback answers at once; this only bounds a full backlog. */
#define PORT_CONNECT_MS 10000u
/* Most entries port.list answers. */
#define PORT_LIST_MAX 1024

typedef struct port_op {
	agent_op op;
	int fd;
	agent_splice sp;     /* fd's way to the session; no pipe: read() */
	agent_port_batch batch; /* when fd is worth reading */
	uint16_t port;
	int addr;            /* index in addrs[] being tried */
	bool one_addr;       /* the requester named the address */
	bool connected;
	bool in_eof;         /* the requester's eof came */
	bool shut;           /* our side's write end is shut */
	bool wr_dead;        /* the server stopped taking bytes: drop them */
	struct event *rd, *wr; /* wr: the connect's, then the socket's room */
	struct evbuffer *out; /* the requester's bytes not yet written */
	uint64_t sent, received;
} port_op;

static const struct {
	int af;
	const char *text;
} addrs[] = { { AF_INET, "127.0.0.1" }, { AF_INET6, "::1" } };

static void port_free(port_op *p)
{
	if (p->rd)
		event_free(p->rd);
	if (p->wr)
		event_free(p->wr);
	if (p->out)
		evbuffer_free(p->out);
	agent_port_batch_free(&p->batch);
	if (p->fd >= 0)
		close(p->fd);
	agent_splice_close(&p->sp);
	free(p);
}

static void port_fail(port_op *p, sbx_proto_code code, const char *msg)
{
	agent_session *s = p->op.session;
	sbx_err err = { 0 };

	agent_session_detach(s, &p->op);
	if (sbx_proto_conn_fail(agent_session_conn(s), p->op.id, code, msg, &err) < 0)
		agent_log_debug("port.open: answer: %s", err.msg);
	port_free(p);
}

/* The server's side ended: eof, then the counts. */
static void port_end(port_op *p, bool reset)
{
	agent_session *s = p->op.session;
	sbx_proto_conn *c = agent_session_conn(s);
	sbx_err err = { 0 };
	msgpack_sbuffer buf;
	msgpack_packer pk;

	agent_session_detach(s, &p->op);
	if (sbx_proto_conn_send_data(c, p->op.id, SBX_CH_TCP, NULL, 0, true, &err) < 0)
		agent_log_debug("port.open: eof: %s", err.msg);
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 3);
	sbx_proto_pack_str(&pk, "sent");
	msgpack_pack_uint64(&pk, p->sent);
	sbx_proto_pack_str(&pk, "received");
	msgpack_pack_uint64(&pk, p->received);
	sbx_proto_pack_str(&pk, "reset");
	if (reset)
		msgpack_pack_true(&pk);
	else
		msgpack_pack_false(&pk);
	if (sbx_proto_conn_end(c, p->op.id, buf.data, buf.size, &err) < 0)
		agent_log_debug("port.open: end: %s", err.msg);
	msgpack_sbuffer_destroy(&buf);
	port_free(p);
}

/* The server's bytes into DATA frames while the requester has credit;
 * without credit the socket is left unread until writable says so. */
static void port_pump_read(port_op *p)
{
	sbx_proto_conn *c = agent_session_conn(p->op.session);
	sbx_err err = { 0 };
	size_t room, moved = 0;

	while ((room = sbx_proto_conn_data_room(c, p->op.id)) > 0) {
		ssize_t n = agent_splice_move(&p->sp, c, p->op.id, SBX_CH_TCP, p->fd, NULL,
					      room < PORT_READ_CHUNK ? room : PORT_READ_CHUNK, &err);

		if (n > 0) {
			p->sent += (uint64_t)n;
			moved += (size_t)n;
			continue;
		}
		if (n == -2) {
			port_fail(p, SBX_PROTO_E_INTERNAL, err.msg);
			return;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			agent_port_batch_waiting(&p->batch, moved);
			event_add(p->rd, NULL);
			return;
		}
		port_end(p, n < 0);
		return;
	}
	agent_port_batch_paused(&p->batch);
	event_del(p->rd);
}

static void port_on_quiet(void *ud)
{
	port_pump_read(ud);
}

static void port_shut_if_done(port_op *p)
{
	if (p->connected && p->in_eof && !p->shut && evbuffer_get_length(p->out) == 0) {
		p->shut = true;
		shutdown(p->fd, SHUT_WR);
	}
}

/* Write what the requester sent; credit goes back as it is written. */
static void port_flush(port_op *p)
{
	sbx_proto_conn *c = agent_session_conn(p->op.session);
	size_t left = evbuffer_get_length(p->out);

	if (!p->connected)
		return;
	while (left > 0 && !p->wr_dead) {
		int n = evbuffer_write(p->out, p->fd);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			event_add(p->wr, NULL);
			return;
		}
		if (n <= 0) {
			/* The server closed its reading side: what it does not
			 * read is dropped, as a socket would; its answer may
			 * still come. */
			p->wr_dead = true;
			break;
		}
		p->received += (uint64_t)n;
		sbx_proto_conn_consumed(c, p->op.id, (size_t)n);
		left -= (size_t)n;
	}
	if (p->wr_dead && left > 0) {
		evbuffer_drain(p->out, left);
		sbx_proto_conn_consumed(c, p->op.id, left);
	}
	event_del(p->wr);
	port_shut_if_done(p);
}

static void port_on_read(evutil_socket_t fd, short what, void *ud)
{
	port_pump_read(ud);
}

static void port_on_write(evutil_socket_t fd, short what, void *ud)
{
	port_flush(ud);
}

static void port_connected(port_op *p)
{
	sbx_proto_conn *c = agent_session_conn(p->op.session);
	sbx_err err = { 0 };
	msgpack_sbuffer buf;
	msgpack_packer pk;
	int ret;

	p->connected = true;
	agent_splice_open(&p->sp, PORT_READ_CHUNK);
	event_free(p->wr);
	p->wr = event_new(agent_session_ctx(p->op.session)->base, p->fd, EV_WRITE, port_on_write, p);
	p->rd = event_new(agent_session_ctx(p->op.session)->base, p->fd, EV_READ | EV_PERSIST,
			  port_on_read, p);
	if (!p->wr || !p->rd ||
	    agent_port_batch_init(&p->batch, agent_session_ctx(p->op.session)->base, p->fd,
				  port_on_quiet, p) < 0) {
		port_fail(p, SBX_PROTO_E_INTERNAL, "port.open: out of memory");
		return;
	}
	/* Which address answered, first: an EVENT fits any window. */
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 2);
	sbx_proto_pack_str(&pk, "addr");
	sbx_proto_pack_str(&pk, addrs[p->addr].text);
	sbx_proto_pack_str(&pk, "port");
	msgpack_pack_uint16(&pk, p->port);
	ret = sbx_proto_conn_send_event(c, p->op.id, buf.data, buf.size, &err);
	msgpack_sbuffer_destroy(&buf);
	if (ret < 0) {
		port_fail(p, SBX_PROTO_E_INTERNAL, err.msg);
		return;
	}
	port_flush(p);
	port_pump_read(p);
}

static void port_try(port_op *p);

/* The address at hand did not take the connection: the next one, or the
 * answer nothing listens. */
static void port_refused(port_op *p, int e)
{
	char msg[160];

	if (!p->one_addr && (size_t)p->addr + 1 < sizeof(addrs) / sizeof(addrs[0])) {
		close(p->fd);
		p->fd = -1;
		p->addr++;
		port_try(p);
		return;
	}
	snprintf(msg, sizeof(msg), "port.open: nothing listens on port %u (%s)", p->port,
		 strerror(e));
	port_fail(p, SBX_PROTO_E_NOT_FOUND, msg);
}

static void port_on_connect(evutil_socket_t fd, short what, void *ud)
{
	port_op *p = ud;
	int e = 0;
	socklen_t len = sizeof(e);
	char msg[128];

	if (what & EV_TIMEOUT) {
		snprintf(msg, sizeof(msg), "port.open: connect to port %u took over %u ms", p->port,
			 PORT_CONNECT_MS);
		port_fail(p, SBX_PROTO_E_TIMEOUT, msg);
		return;
	}
	if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
		e = errno;
	if (e) {
		port_refused(p, e);
		return;
	}
	port_connected(p);
}

static void port_try(port_op *p)
{
	struct sockaddr_storage ss;
	socklen_t sl;
	char msg[128];
	int af = addrs[p->addr].af;

	memset(&ss, 0, sizeof(ss));
	if (af == AF_INET) {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(p->port);
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sl = sizeof(*a);
	} else {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(p->port);
		a->sin6_addr = in6addr_loopback;
		sl = sizeof(*a);
	}
	p->fd = socket(af, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (p->fd < 0) {
		if (errno == EAFNOSUPPORT) {
			port_refused(p, errno);
			return;
		}
		snprintf(msg, sizeof(msg), "port.open: socket: %s", strerror(errno));
		port_fail(p, SBX_PROTO_E_INTERNAL, msg);
		return;
	}
	if (connect(p->fd, (struct sockaddr *)&ss, sl) == 0) {
		port_connected(p);
		return;
	}
	if (errno != EINPROGRESS) {
		/* Refused, or no such address here (no IPv6 on lo). */
		port_refused(p, errno);
		return;
	}
	struct timeval tv = { PORT_CONNECT_MS / 1000, 0 };
	if (p->wr)
		event_free(p->wr);
	p->wr = event_new(agent_session_ctx(p->op.session)->base, p->fd, EV_WRITE, port_on_connect, p);
	if (!p->wr || event_add(p->wr, &tv) < 0)
		port_fail(p, SBX_PROTO_E_INTERNAL, "port.open: out of memory");
}

static void port_frame(agent_op *op, const sbx_proto_frame *f)
{
	port_op *p = (port_op *)op;
	sbx_proto_conn *c = agent_session_conn(op->session);

	if (f->kind == SBX_PROTO_CANCEL) {
		port_fail(p, SBX_PROTO_E_CANCELLED, "port.open: cancelled");
		return;
	}
	if (f->kind != SBX_PROTO_DATA)
		return; /* ctl means nothing here */
	if (f->ch_len != strlen(SBX_CH_TCP) || memcmp(f->ch, SBX_CH_TCP, f->ch_len) != 0) {
		port_fail(p, SBX_PROTO_E_BAD_REQUEST, "port.open: data only on channel \"tcp\"");
		return;
	}
	if (p->in_eof) {
		port_fail(p, SBX_PROTO_E_BAD_REQUEST, "port.open: data after eof");
		return;
	}
	/* The frame's overhead now, its bytes once written. */
	sbx_proto_conn_consumed(c, op->id, f->body_len - f->data_len);
	if (p->wr_dead) {
		sbx_proto_conn_consumed(c, op->id, f->data_len);
	} else if (f->data_len && evbuffer_add(p->out, f->data, f->data_len) < 0) {
		port_fail(p, SBX_PROTO_E_INTERNAL, "port.open: out of memory");
		return;
	}
	p->in_eof = f->eof;
	if (evbuffer_get_length(p->out) > 0 && !event_pending(p->wr, EV_WRITE, NULL))
		port_flush(p);
	else
		port_shut_if_done(p);
}

static void port_writable(agent_op *op)
{
	port_op *p = (port_op *)op;

	if (p->connected)
		port_pump_read(p);
}

static void port_abort(agent_op *op)
{
	port_free((port_op *)op);
}

static const agent_op_vtbl port_vtbl = {
	.frame = port_frame,
	.writable = port_writable,
	.abort = port_abort,
};

/* args["port"] as 1..65535. */
static int port_arg(const msgpack_object *args, uint16_t *port, sbx_err *err)
{
	const msgpack_object *o = agent_op_arg(args, "port");

	if (!o || o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 < 1 ||
	    o->via.u64 > 65535)
		return sbx_err_set(err, -EINVAL, "port.open: \"port\" must be an integer 1..65535");
	*port = (uint16_t)o->via.u64;
	return 0;
}

void agent_op_port_open(agent_session *s, uint64_t id, const msgpack_object *args)
{
	sbx_err err = { 0 };
	const msgpack_object *h = agent_op_arg(args, "addr");
	uint16_t port = 0;
	int addr = 0;
	bool one = false;
	port_op *p;

	if (port_arg(args, &port, &err) < 0) {
		sbx_err e2 = { 0 };
		sbx_proto_conn_fail(agent_session_conn(s), id, SBX_PROTO_E_BAD_REQUEST, err.msg, &e2);
		return;
	}
	if (h) {
		size_t i;
		for (i = 0; i < sizeof(addrs) / sizeof(addrs[0]); i++)
			if (h->type == MSGPACK_OBJECT_STR && h->via.str.size == strlen(addrs[i].text) &&
			    memcmp(h->via.str.ptr, addrs[i].text, h->via.str.size) == 0)
				break;
		if (i == sizeof(addrs) / sizeof(addrs[0])) {
			sbx_proto_conn_fail(agent_session_conn(s), id, SBX_PROTO_E_BAD_REQUEST,
					    "port.open: \"addr\" must be \"127.0.0.1\" or \"::1\"", &err);
			return;
		}
		addr = (int)i;
		one = true;
	}
	p = calloc(1, sizeof(*p));
	if (p) {
		p->fd = -1;
		p->sp = (agent_splice)AGENT_SPLICE_NONE;
		p->out = evbuffer_new();
	}
	if (!p || !p->out) {
		if (p)
			port_free(p);
		sbx_proto_conn_fail(agent_session_conn(s), id, SBX_PROTO_E_INTERNAL,
				    "port.open: out of memory", &err);
		return;
	}
	p->port = port;
	p->addr = addr;
	p->one_addr = one;
	p->op.vt = &port_vtbl;
	p->op.id = id;
	agent_session_attach(s, &p->op);
	port_try(p);
}

/* ---- port.list ---- */

typedef struct port_entry {
	char addr[INET6_ADDRSTRLEN];
	uint16_t port;
} port_entry;

/* The LISTEN rows of one /proc/net table into e[*n..max). */
static void port_scan(const char *path, int af, port_entry *e, size_t *n, size_t max)
{
	FILE *f = fopen(path, "re");
	char line[512];

	if (!f)
		return; /* no IPv6 in this kernel: nothing listens there */
	while (fgets(line, sizeof(line), f) && *n < max) {
		char local[64];
		unsigned st, port;
		union {
			struct in_addr v4;
			struct in6_addr v6;
			uint32_t w[4];
		} a;

		if (sscanf(line, " %*u: %63[0-9A-Fa-f]:%x %*[0-9A-Fa-f]:%*x %x", local, &port, &st) !=
			    3 ||
		    st != 0x0A || port > 65535)
			continue;
		/* The kernel prints each address word as a native-endian u32. */
		memset(&a, 0, sizeof(a));
		if (af == AF_INET && strlen(local) == 8) {
			a.w[0] = (uint32_t)strtoul(local, NULL, 16);
		} else if (af == AF_INET6 && strlen(local) == 32) {
			for (int i = 0; i < 4; i++) {
				char word[9];
				memcpy(word, local + 8 * i, 8);
				word[8] = '\0';
				a.w[i] = (uint32_t)strtoul(word, NULL, 16);
			}
		} else {
			continue;
		}
		if (!inet_ntop(af, &a, e[*n].addr, sizeof(e[*n].addr)))
			continue;
		e[*n].port = (uint16_t)port;
		bool dup = false;
		for (size_t i = 0; i < *n && !dup; i++)
			dup = e[i].port == e[*n].port && strcmp(e[i].addr, e[*n].addr) == 0;
		if (!dup)
			(*n)++;
	}
	fclose(f);
}

void agent_op_port_list(agent_session *s, uint64_t id, const msgpack_object *args)
{
	port_entry *e = calloc(PORT_LIST_MAX, sizeof(*e));
	sbx_err err = { 0 };
	msgpack_sbuffer buf;
	msgpack_packer pk;
	size_t n = 0;

	if (!e) {
		sbx_proto_conn_fail(agent_session_conn(s), id, SBX_PROTO_E_INTERNAL,
				    "port.list: out of memory", &err);
		return;
	}
	port_scan("/proc/net/tcp", AF_INET, e, &n, PORT_LIST_MAX);
	port_scan("/proc/net/tcp6", AF_INET6, e, &n, PORT_LIST_MAX);
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 2);
	sbx_proto_pack_str(&pk, "ports");
	msgpack_pack_array(&pk, (uint32_t)n);
	for (size_t i = 0; i < n; i++) {
		msgpack_pack_map(&pk, 2);
		sbx_proto_pack_str(&pk, "port");
		msgpack_pack_uint16(&pk, e[i].port);
		sbx_proto_pack_str(&pk, "addr");
		sbx_proto_pack_str(&pk, e[i].addr);
	}
	sbx_proto_pack_str(&pk, "truncated");
	if (n == PORT_LIST_MAX)
		msgpack_pack_true(&pk);
	else
		msgpack_pack_false(&pk);
	if (sbx_proto_conn_end(agent_session_conn(s), id, buf.data, buf.size, &err) < 0)
		agent_log_debug("port.list: answer: %s", err.msg);
	msgpack_sbuffer_destroy(&buf);
	free(e);
}
