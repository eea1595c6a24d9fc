/* Blocking protocol client: handshake and one call at a time (see proto_client.h). */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/proto_client.h"

#define CLIENT_MAX_FRAME SBX_PROTO_DEFAULT_MAX_FRAME
#define CLIENT_WINDOW SBX_PROTO_DEFAULT_WINDOW
#define CLIENT_INITIAL_BUF (64u * 1024u)

struct sbx_proto_client {
	int fd;
	int timeout_ms;
	uint8_t *buf; /* received, not yet decoded: buf[0..len) */
	size_t len, cap;
	uint32_t peer_max_frame;
	uint64_t next_id;
	char *peer_agent;
	char **peer_caps;
	size_t peer_ncaps;
	sbx_proto_writer w;
};

static int wait_fd(sbx_proto_client *c, short ev, sbx_err *err)
{
	struct pollfd p = { .fd = c->fd, .events = ev };
	int rc;
	do
		rc = poll(&p, 1, c->timeout_ms > 0 ? c->timeout_ms : -1);
	while (rc < 0 && errno == EINTR);
	if (rc < 0)
		return sbx_err_sys(err, -errno, "poll");
	if (rc == 0)
		return sbx_err_set(err, -ETIMEDOUT, "no answer from the peer within %d ms", c->timeout_ms);
	return 0;
}

/* Send and clear the writer's frames. */
static int flush(sbx_proto_client *c, sbx_err *err)
{
	const char *p = c->w.buf.data;
	size_t left = c->w.buf.size;
	int rc = 0;
	while (left && rc == 0) {
		ssize_t n = send(c->fd, p, left, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			left -= (size_t)n;
		} else if (errno == EAGAIN) {
			rc = wait_fd(c, POLLOUT, err);
		} else if (errno != EINTR) {
			rc = sbx_err_sys(err, -errno, "send");
		}
	}
	sbx_proto_writer_reset(&c->w);
	return rc;
}

/* Read the next frame into *f (release it). */
static int read_frame(sbx_proto_client *c, sbx_proto_frame *f, sbx_err *err)
{
	for (;;) {
		size_t used;
		sbx_proto_code pc;
		int rc = sbx_proto_frame_decode(c->buf, c->len, CLIENT_MAX_FRAME, f, &used, &pc, err);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			memmove(c->buf, c->buf + used, c->len - used);
			c->len -= used;
			return 0;
		}
		if (c->len == c->cap) { /* a frame (<= max_frame, checked above) longer than buf */
			size_t cap = c->cap * 2;
			if (cap > SBX_PROTO_HEADER_LEN + CLIENT_MAX_FRAME)
				cap = SBX_PROTO_HEADER_LEN + CLIENT_MAX_FRAME;
			uint8_t *nb = realloc(c->buf, cap);
			if (!nb)
				return sbx_err_set(err, -ENOMEM, "read frame: out of memory");
			c->buf = nb;
			c->cap = cap;
		}
		rc = wait_fd(c, POLLIN, err);
		if (rc < 0)
			return rc;
		ssize_t n = recv(c->fd, c->buf + c->len, c->cap - c->len, MSG_DONTWAIT);
		if (n == 0)
			return sbx_err_set(err, -ECONNRESET, "peer closed the connection");
		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return sbx_err_sys(err, -errno, "recv");
		if (n > 0)
			c->len += (size_t)n;
	}
}

static int peer_error(const sbx_proto_frame *f, sbx_err *err)
{
	return sbx_err_set(err, -ECONNABORTED, "peer closed the connection with %.*s: %.*s",
			   (int)f->code_name_len, f->code_name, (int)f->msg_len, f->msg ? f->msg : "");
}

static int handshake(sbx_proto_client *c, sbx_err *err)
{
	int rc = sbx_proto_encode_hello(&c->w, CLIENT_MAX_FRAME, 1, CLIENT_WINDOW, NULL, 0,
					"sbx-proto-client", err);
	if (rc < 0 || (rc = flush(c, err)) < 0)
		return rc;
	sbx_proto_frame f;
	rc = read_frame(c, &f, err);
	if (rc < 0)
		return rc;
	if (f.kind == SBX_PROTO_ERR && f.id == 0)
		rc = peer_error(&f, err);
	else if (f.kind != SBX_PROTO_HELLO)
		rc = sbx_err_set(err, -EPROTO, "expected hello, got %s", sbx_proto_kind_name(f.kind));
	else if (f.version < 1 || f.max_frame < SBX_PROTO_MIN_MAX_FRAME)
		rc = sbx_err_set(err, -EPROTONOSUPPORT, "peer hello: version %llu, max_frame %llu",
				 (unsigned long long)f.version, (unsigned long long)f.max_frame);
	if (rc == 0) {
		c->peer_max_frame = f.max_frame > SBX_PROTO_HARD_MAX_FRAME ? SBX_PROTO_HARD_MAX_FRAME
									   : (uint32_t)f.max_frame;
		c->peer_agent = f.agent ? strndup(f.agent, f.agent_len) : NULL;
		uint32_t n = f.caps.type == MSGPACK_OBJECT_ARRAY ? f.caps.via.array.size : 0;
		c->peer_caps = n ? calloc(n, sizeof(char *)) : NULL;
		for (uint32_t i = 0; c->peer_caps && i < n; i++)
			if ((c->peer_caps[c->peer_ncaps] = sbx_proto_strdup(&f.caps.via.array.ptr[i])))
				c->peer_ncaps++;
	}
	sbx_proto_frame_release(&f);
	return rc;
}

int sbx_proto_client_from_fd(int fd, int timeout_ms, sbx_proto_client **out, sbx_err *err)
{
	sbx_proto_client *c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return sbx_err_set(err, -ENOMEM, "client: out of memory");
	}
	c->fd = fd;
	c->timeout_ms = timeout_ms;
	c->next_id = 1;
	sbx_proto_writer_init(&c->w);
	c->cap = CLIENT_INITIAL_BUF;
	c->buf = malloc(c->cap);
	int rc = c->buf ? handshake(c, err) : sbx_err_set(err, -ENOMEM, "client: out of memory");
	if (rc < 0) {
		sbx_proto_client_free(c);
		return sbx_err_wrap(err, "handshake");
	}
	*out = c;
	return 0;
}

int sbx_proto_client_connect(const char *path, int timeout_ms, sbx_proto_client **out,
			     sbx_err *err)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path))
		return sbx_err_set(err, -ENAMETOOLONG, "connect %s: path too long", path);
	strcpy(sa.sun_path, path);
	SBX_AUTO_CLOSE int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return sbx_err_sys(err, -errno, "connect %s: socket", path);
	/* a unix connect does not block for long, except on a full backlog */
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return sbx_err_sys(err, -errno, "connect %s", path);
	int rc = sbx_proto_client_from_fd(sbx_steal_fd(&fd), timeout_ms, out, err);
	return rc < 0 ? sbx_err_wrap(err, "connect %s", path) : 0;
}

void sbx_proto_client_free(sbx_proto_client *c)
{
	if (!c)
		return;
	if (c->fd >= 0)
		close(c->fd);
	free(c->buf);
	free(c->peer_agent);
	for (size_t i = 0; i < c->peer_ncaps; i++)
		free(c->peer_caps[i]);
	free(c->peer_caps);
	sbx_proto_writer_destroy(&c->w);
	free(c);
}

const char *sbx_proto_client_peer_agent(const sbx_proto_client *c)
{
	return c->peer_agent;
}

bool sbx_proto_client_peer_has_cap(const sbx_proto_client *c, const char *cap)
{
	for (size_t i = 0; i < c->peer_ncaps; i++)
		if (strcmp(c->peer_caps[i], cap) == 0)
			return true;
	return false;
}

/* One frame of the call's stream; 1 when it was the final one. */
static int on_stream_frame(sbx_proto_client *c, uint64_t id, sbx_proto_frame *f,
			   sbx_proto_client_frame_cb cb, void *ud, int *cb_rc, uint64_t *owed,
			   sbx_err *err)
{
	switch (f->kind) {
	case SBX_PROTO_DATA:
	case SBX_PROTO_EVENT:
		if (f->kind == SBX_PROTO_EVENT || f->data_len)
			*owed += f->body_len;
		if (cb && *cb_rc == 0 && (*cb_rc = cb(f, ud)) < 0) {
			int rc = sbx_proto_encode_cancel(&c->w, id, err);
			if (rc < 0 || (rc = flush(c, err)) < 0)
				return rc;
		}
		if (*owed >= CLIENT_WINDOW / 2) {
			int rc = sbx_proto_encode_credit(&c->w, id, *owed, err);
			if (rc < 0 || (rc = flush(c, err)) < 0)
				return rc;
			*owed = 0;
		}
		return 0;
	case SBX_PROTO_CREDIT:
		return 0;
	case SBX_PROTO_END:
	case SBX_PROTO_ERR:
		return 1;
	default:
		return sbx_err_set(err, -EPROTO, "unexpected %s on stream %llu",
				   sbx_proto_kind_name(f->kind), (unsigned long long)id);
	}
}

int sbx_proto_client_call(sbx_proto_client *c, const char *op, const void *args,
			  size_t args_len, sbx_proto_client_frame_cb cb, void *ud,
			  sbx_proto_frame *final, sbx_err *err)
{
	uint64_t id = c->next_id;
	c->next_id += 2;
	int rc = sbx_proto_encode_req(&c->w, id, op, args, args_len, c->peer_max_frame, err);
	if (rc < 0 || flush(c, err) < 0)
		return sbx_err_wrap(err, "call %s", op);
	int cb_rc = 0;
	uint64_t owed = 0;
	for (;;) {
		sbx_proto_frame f;
		rc = read_frame(c, &f, err);
		if (rc < 0)
			return sbx_err_wrap(err, "call %s", op);
		if (f.kind == SBX_PROTO_ERR && f.id == 0)
			rc = peer_error(&f, err);
		else if (f.id == id)
			rc = on_stream_frame(c, id, &f, cb, ud, &cb_rc, &owed, err);
		else
			rc = 0; /* a late frame of an earlier call */
		if (rc == 1 && cb_rc == 0 && final) {
			*final = f;
			return 0;
		}
		sbx_proto_frame_release(&f);
		if (rc < 0)
			return sbx_err_wrap(err, "call %s", op);
		if (rc == 1)
			return sbx_err_set(err, cb_rc, "call %s: cancelled by its frame callback", op);
	}
}
