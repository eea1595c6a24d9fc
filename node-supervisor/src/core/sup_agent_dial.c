/* sup_agent_dial: addresses and connects for unix, vsock and hybrid vsock
 * (see sup_agent_dial.h). */
#include "sup_agent_dial.h"

#include <errno.h>
#include <event2/event.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/vm_sockets.h>

#include "sbx/cleanup.h"

/* "OK " and at most ten digits and "\n": a longer answer is not one. */
#define HV_LINE_MAX 16

typedef enum { DIAL_CONNECTING, DIAL_SENDING, DIAL_READING } dial_phase;

struct sup_agent_dial {
	struct event_base *base;
	struct event *ev;
	int fd;
	dial_phase phase;
	sup_agent_dial_cb cb;
	void *ud;
	char name[sizeof(((struct sockaddr_un *)0)->sun_path) + 32]; /* the address, for messages */
	uint32_t port;
	char out[32];
	size_t out_len, out_off;
	char line[HV_LINE_MAX];
	size_t line_len;
};

/* ---- addresses ---- */

/* Decimal, 1 to 10 digits, below 2^32 - 1 (the kernel's "any"). */
static int parse_u32(const char *s, size_t n, uint32_t *out)
{
	if (n == 0 || n > 10)
		return -EINVAL;
	uint64_t v = 0;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v >= UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

static int set_path(sup_agent_addr *a, const char *p, size_t n, const char *s, sbx_err *err)
{
	if (n == 0)
		return sbx_err_set(err, -EINVAL, "agent address %.200s: no socket path", s);
	if (n >= sizeof(a->path))
		return sbx_err_set(err, -ENAMETOOLONG, "agent address %.200s: the path is over %zu bytes",
				   s, sizeof(a->path) - 1);
	memcpy(a->path, p, n);
	a->path[n] = '\0';
	return 0;
}

static int set_port(sup_agent_addr *a, const char *p, size_t n, const char *s, sbx_err *err)
{
	if (parse_u32(p, n, &a->port) < 0 || a->port == 0)
		return sbx_err_set(err, -EINVAL,
				   "agent address %.200s: the port must be a number from 1 to 4294967294",
				   s);
	return 0;
}

int sup_agent_addr_parse(const char *s, sup_agent_addr *out, sbx_err *err)
{
	memset(out, 0, sizeof(*out));
	if (strncmp(s, "vsock:", 6) == 0) {
		const char *cid = s + 6, *colon = strchr(cid, ':');
		out->kind = SUP_AGENT_VSOCK;
		if (!colon)
			return sbx_err_set(err, -EINVAL, "agent address %.200s: want vsock:CID:PORT", s);
		/* 0 is the hypervisor, 2 the host (ourselves): a guest is 3 or
		 * more; 1 is the local loopback transport. */
		if (parse_u32(cid, (size_t)(colon - cid), &out->cid) < 0 || out->cid == 0 ||
		    out->cid == VMADDR_CID_HOST)
			return sbx_err_set(err, -EINVAL,
					   "agent address %.200s: the CID must be 1 (local) or a guest's, "
					   "3 to 4294967294", s);
		return set_port(out, colon + 1, strlen(colon + 1), s, err);
	}
	if (strncmp(s, "hvsock:", 7) == 0) {
		const char *path = s + 7, *colon = strrchr(path, ':');
		out->kind = SUP_AGENT_HVSOCK;
		if (!colon)
			return sbx_err_set(err, -EINVAL, "agent address %.200s: want hvsock:PATH:PORT", s);
		int rc = set_path(out, path, (size_t)(colon - path), s, err);
		if (rc < 0)
			return rc;
		return set_port(out, colon + 1, strlen(colon + 1), s, err);
	}
	out->kind = SUP_AGENT_UNIX;
	if (strncmp(s, "unix:", 5) == 0)
		s += 5;
	return set_path(out, s, strlen(s), s, err);
}

/* ---- connects ---- */

static int unix_connect(const char *path, int *fd, sbx_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	SBX_AUTO_CLOSE int s = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return sbx_err_sys(err, -errno, "socket");
	/* A unix stream connect completes at once or fails (EAGAIN: backlog full). */
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return sbx_err_sys(err, -errno, "connect %s", path);
	*fd = sbx_steal_fd(&s);
	return 0;
}

static void dial_free(sup_agent_dial *d)
{
	if (d->ev)
		event_free(d->ev);
	if (d->fd >= 0)
		close(d->fd);
	free(d);
}

const char *sup_agent_dial_name(const sup_agent_dial *d)
{
	return d->name;
}

void sup_agent_dial_cancel(sup_agent_dial *d)
{
	if (d)
		dial_free(d);
}

/* The end, either way: the dial is gone before the callback runs (which may
 * free whoever started it). */
static void dial_done(sup_agent_dial *d, int code, const sbx_err *why)
{
	sup_agent_dial_cb cb = d->cb;
	void *ud = d->ud;
	int fd = -1;
	if (code == 0) {
		fd = d->fd;
		d->fd = -1;
	}
	dial_free(d);
	cb(fd, code == 0 ? NULL : why, ud);
}

static void dial_fail(sup_agent_dial *d, int code, const char *fmt, const char *detail)
{
	sbx_err e;
	sbx_err_set(&e, code, "agent connection %s: %s%s", d->name, fmt, detail ? detail : "");
	dial_done(d, code, &e);
}

/* What the VMM said, printable, for the message. */
static void show_line(const char *p, size_t n, char *out, size_t size)
{
	size_t o = 0;
	for (size_t i = 0; i < n && o + 5 < size; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c >= 0x20 && c < 0x7f && c != '\\')
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
	}
	out[o] = '\0';
}

/* "OK " then 1 to 10 digits: the VMM's own end of the connection. */
static bool answer_ok(const char *p, size_t n)
{
	uint32_t v;
	return n > 3 && memcmp(p, "OK ", 3) == 0 && parse_u32(p + 3, n - 3, &v) == 0;
}

/* Byte by byte up to the newline: what follows is the agent's (it may speak
 * at once) and must stay in the socket for the protocol. */
static void hv_read(sup_agent_dial *d)
{
	for (;;) {
		char c;
		ssize_t k = recv(d->fd, &c, 1, 0);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (k < 0) {
			char why[128];
			snprintf(why, sizeof(why), "%s", strerror(errno));
			dial_fail(d, -errno, "reading the VMM's answer: ", why);
			return;
		}
		if (k == 0) {
			char why[64];
			snprintf(why, sizeof(why), " (nothing listens on port %u in the guest?)", d->port);
			dial_fail(d, -ECONNREFUSED, "the VMM closed the connection before answering CONNECT",
				  why);
			return;
		}
		if (c == '\n') {
			if (answer_ok(d->line, d->line_len)) {
				dial_done(d, 0, NULL);
				return;
			}
			char shown[4 * HV_LINE_MAX + 8];
			show_line(d->line, d->line_len, shown, sizeof(shown));
			dial_fail(d, -EPROTO, "the VMM answered CONNECT with ", shown);
			return;
		}
		if (d->line_len == sizeof(d->line)) {
			char shown[4 * HV_LINE_MAX + 8];
			show_line(d->line, d->line_len, shown, sizeof(shown));
			dial_fail(d, -EPROTO, "the VMM's answer to CONNECT is no \"OK <port>\" line: ", shown);
			return;
		}
		d->line[d->line_len++] = c;
	}
}

static int arm(sup_agent_dial *d, short what);

static void on_event(evutil_socket_t fd, short what, void *ud)
{
	sup_agent_dial *d = ud;
	(void)fd;
	(void)what;
	if (d->phase == DIAL_CONNECTING) {
		int soerr = 0;
		socklen_t len = sizeof(soerr);
		if (getsockopt(d->fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
			soerr = errno;
		if (soerr) {
			dial_fail(d, -soerr, "connect: ", strerror(soerr));
			return;
		}
		dial_done(d, 0, NULL);
		return;
	}
	if (d->phase == DIAL_SENDING) {
		while (d->out_off < d->out_len) {
			ssize_t k = send(d->fd, d->out + d->out_off, d->out_len - d->out_off, MSG_NOSIGNAL);
			if (k < 0 && (errno == EAGAIN || errno == EINTR))
				return; /* the event persists */
			if (k < 0) {
				dial_fail(d, -errno, "sending CONNECT: ", strerror(errno));
				return;
			}
			d->out_off += (size_t)k;
		}
		d->phase = DIAL_READING;
		if (arm(d, EV_READ) < 0)
			dial_fail(d, -ENOMEM, "out of memory", NULL);
		return;
	}
	hv_read(d);
}

static int arm(sup_agent_dial *d, short what)
{
	if (d->ev)
		event_free(d->ev);
	d->ev = event_new(d->base, d->fd, what | EV_PERSIST, on_event, d);
	return d->ev && event_add(d->ev, NULL) == 0 ? 0 : -ENOMEM;
}

int sup_agent_dial_start(struct event_base *base, const sup_agent_addr *addr,
			 sup_agent_dial_cb cb, void *ud, int *fd, sup_agent_dial **out,
			 sbx_err *err)
{
	*out = NULL;
	*fd = -1;
	if (addr->kind == SUP_AGENT_UNIX)
		return unix_connect(addr->path, fd, err);

	sup_agent_dial *d = calloc(1, sizeof(*d));
	if (!d)
		return sbx_err_set(err, -ENOMEM, "agent connection");
	d->fd = -1;
	d->cb = cb;
	d->ud = ud;
	d->base = base;
	d->port = addr->port;
	int rc;
	if (addr->kind == SUP_AGENT_VSOCK) {
		snprintf(d->name, sizeof(d->name), "vsock:%u:%u", addr->cid, addr->port);
		struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = addr->cid,
					  .svm_port = addr->port };
		d->fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (d->fd < 0) {
			rc = sbx_err_sys(err, -errno, "socket(AF_VSOCK)");
			goto fail;
		}
		if (connect(d->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
			*fd = d->fd;
			d->fd = -1;
			dial_free(d);
			return 0;
		}
		if (errno != EINPROGRESS) {
			rc = sbx_err_sys(err, -errno, "connect");
			goto fail;
		}
		d->phase = DIAL_CONNECTING;
		rc = arm(d, EV_WRITE);
	} else {
		snprintf(d->name, sizeof(d->name), "hvsock:%s:%u", addr->path, addr->port);
		rc = unix_connect(addr->path, &d->fd, err);
		if (rc < 0)
			goto fail;
		d->out_len = (size_t)snprintf(d->out, sizeof(d->out), "CONNECT %u\n", addr->port);
		d->phase = DIAL_SENDING;
		rc = arm(d, EV_WRITE);
	}
	if (rc < 0) {
		rc = sbx_err_set(err, -ENOMEM, "event");
		goto fail;
	}
	*out = d;
	return 1;
fail:
	dial_free(d);
	return rc;
}
