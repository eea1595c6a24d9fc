/* op_splice: see op_splice.h. */
#include "op_splice.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

void agent_splice_open(agent_splice *sp, size_t want)
{
	int sz;

	if (pipe2(sp->fd, O_NONBLOCK | O_CLOEXEC) < 0) {
		sp->fd[0] = sp->fd[1] = -1;
		sp->size = 0;
		return;
	}
	/* Over the user's pipe quota the size is refused: the pipe's own
	 * (a page at least) still serves. */
	sz = fcntl(sp->fd[1], F_SETPIPE_SZ, (int)want);
	if (sz < 0)
		sz = fcntl(sp->fd[1], F_GETPIPE_SZ);
	sp->size = sz > 0 ? (size_t)sz : 4096;
}

void agent_splice_close(agent_splice *sp)
{
	for (int i = 0; i < 2; i++) {
		if (sp->fd[i] >= 0)
			close(sp->fd[i]);
		sp->fd[i] = -1;
	}
}

/* By splice: -1 with EINVAL when src's file system cannot (nothing moved). */
static ssize_t move_spliced(agent_splice *sp, sbx_proto_conn *c, uint64_t id, const char *ch,
			    int src, off_t *off, size_t room, sbx_err *err)
{
	ssize_t n;

	/* The pipe is empty here: each call hands on all it took. */
	if (room > sp->size)
		room = sp->size;
	do
		n = splice(src, off, sp->fd[1], NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	while (n < 0 && errno == EINTR);
	if (n > 0 && sbx_proto_conn_data_splice(c, id, ch, sp->fd[0], (size_t)n, err) < 0)
		return -2;
	return n;
}

ssize_t agent_splice_move(agent_splice *sp, sbx_proto_conn *c, uint64_t id, const char *ch,
			  int src, off_t *off, size_t room, sbx_err *err)
{
	void *buf;
	ssize_t n;
	int e;

	if (sp->fd[0] >= 0) {
		n = move_spliced(sp, c, id, ch, src, off, room, err);
		if (n != -1 || errno != EINVAL)
			return n;
		/* No splice_read in src's file system: read from now on. */
		agent_splice_close(sp);
	}
	if (sbx_proto_conn_data_begin(c, id, ch, room, &buf, err) < 0)
		return -2;
	do
		n = off ? pread(src, buf, room, *off) : read(src, buf, room);
	while (n < 0 && errno == EINTR);
	e = errno;
	if (sbx_proto_conn_data_commit(c, n > 0 ? (size_t)n : 0, err) < 0 && n > 0)
		return -2;
	if (n > 0 && off)
		*off += n;
	errno = e; /* the read's, for the caller */
	return n;
}
