/* DATA frames from a file descriptor, for the ops that stream one (port.open:
 * the server's socket; file.read: the file at an offset).
 *
 * The bytes go by splice(2) through the op's pipe into the connection's
 * socket (sbx_proto_conn_data_splice), so the agent copies none of them:
 * socket buffers and page-cache pages go by reference (read and written,
 * each byte was copied twice, half of the agent's CPU per byte). Without a
 * pipe (fd or pipe limits), or from a file system that cannot splice
 * (EINVAL: some /proc files), they are read into the connection's output.
 * Nothing here decides when to send (data_room does, as for every DATA
 * frame) or what the source's end or an error means: the op does. */
#ifndef AGENT_OP_SPLICE_H
#define AGENT_OP_SPLICE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sbx/err.h"
#include "sbx/proto_conn.h"

typedef struct agent_splice {
	int fd[2];   /* read, write end; -1: no pipe, the bytes are read */
	size_t size; /* the pipe's capacity: the most one spliced frame takes */
} agent_splice;

#define AGENT_SPLICE_NONE { { -1, -1 }, 0 }

/* A pipe of want bytes (fewer when the pipe quota refuses). Without one
 * the fds stay -1 and agent_splice_move reads instead. */
void agent_splice_open(agent_splice *sp, size_t want);
void agent_splice_close(agent_splice *sp);

/* Up to room (1..data_room) of src's next bytes into one DATA frame on
 * id/ch (no eof): at *off when off is not NULL (it advances; src's own
 * position is left alone), else at src's position. Answers as read(2):
 * bytes sent, 0 at src's end, -1 with errno (EAGAIN: nothing to read yet;
 * nothing was sent), or -2 with err set when the connection could not take
 * them (the frame may be cut: it is shut down then). */
ssize_t agent_splice_move(agent_splice *sp, sbx_proto_conn *c, uint64_t id, const char *ch,
			  int src, off_t *off, size_t room, sbx_err *err);

#endif
