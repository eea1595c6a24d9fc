/* DATA frames whose payload waits in a pipe (sbx_proto_conn_data_splice).
 *
 * The agent's port streams move bytes from a TCP socket to the supervisor:
 * read into the output and written on, each byte was copied twice, half of
 * the agent's CPU per GiB. Spliced (socket -> pipe -> connection socket),
 * the pages go by reference. Only while the output is empty may the frame
 * go to the socket directly (nothing queued may come after it); what the
 * socket does not take is copied into the output and written by the
 * bufferevent as any frame. Nothing here decides when to send: that stays
 * with data_room, as for every DATA frame. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto_conn_int.h"

/* head[0..hlen) and the pipe's next n bytes to the end of the output, read
 * in one piece (evbuffer_read would take 4 KiB a call). */
static int queue_rest(struct evbuffer *out, const void *head, size_t hlen, int pipe_fd, size_t n)
{
	struct evbuffer_iovec v;
	size_t got = 0;
	if (hlen > 0 && evbuffer_add(out, head, hlen) < 0)
		return -ENOMEM;
	if (n == 0)
		return 0;
	if (evbuffer_reserve_space(out, (ev_ssize_t)n, &v, 1) < 1)
		return -ENOMEM;
	while (got < n) {
		ssize_t k = read(pipe_fd, (uint8_t *)v.iov_base + got, n - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return k < 0 ? -errno : -EPIPE;
		got += (size_t)k;
	}
	v.iov_len = n;
	return evbuffer_commit_space(out, &v, 1) < 0 ? -ENOMEM : 0;
}

int sbx_proto_conn_data_splice(sbx_proto_conn *c, uint64_t id, const char *ch, int pipe_fd,
			       size_t n, sbx_err *err)
{
	struct conn_stream *s = conn_find(c, id);
	if (!s || n == 0 || n > sbx_proto_conn_data_room(c, id))
		return sbx_err_set(err, -EAGAIN, "send data on %llu: %zu bytes over room",
				   (unsigned long long)id, n);
	int rc = sbx_proto_encode_data_head(&c->w, id, ch, n, conn_out_max_frame(c), err);
	if (rc < 0)
		return rc;
	struct evbuffer *out = bufferevent_get_output(c->bev);
	const char *head = c->w.buf.data;
	size_t hlen = c->w.buf.size;
	c->resv.active = false;
	s->send_credit -= hlen - SBX_PROTO_HEADER_LEN + n;
	if (evbuffer_get_length(out) == 0) {
		int fd = bufferevent_getfd(c->bev);
		ssize_t k = send(fd, head, hlen, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k > 0) {
			head += k;
			hlen -= (size_t)k;
		}
		while (hlen == 0 && n > 0 &&
		       (k = splice(pipe_fd, NULL, fd, NULL, n, SPLICE_F_MOVE | SPLICE_F_NONBLOCK)) > 0)
			n -= (size_t)k;
	}
	rc = queue_rest(out, head, hlen, pipe_fd, n);
	sbx_proto_writer_reset(&c->w);
	if (rc < 0) {
		/* part of the frame may be out: nothing valid can follow it */
		shutdown(bufferevent_getfd(c->bev), SHUT_RDWR);
		return sbx_err_set(err, rc, "send data on %llu: the payload could not be queued",
				   (unsigned long long)id);
	}
	return 0;
}
