/* libFuzzer target: the connection's input path.
 *
 * The input is what a peer sends, byte for byte, then EOF. It is fed to a
 * server conn and to a client conn that has three requests open (ids 1, 3,
 * 5), each with small limits so that stream, credit and size limits are
 * reachable. The owner callbacks answer, consume, cancel and finally free the
 * conn inside on_close, as real owners do. ASan/UBSan and the conn's own
 * checks are the oracle; the conn must also finish (close) on EOF. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "sbx/proto_conn.h"

struct state {
	sbx_proto_conn *c;
	int closed;
};

static void on_frame(sbx_proto_conn *c, const sbx_proto_frame *f, void *ud)
{
	static const uint8_t chunk[1500];
	switch (f->kind) {
	case SBX_PROTO_REQ:
		if (f->id % 3 == 0) {
			sbx_proto_conn_fail(c, f->id, SBX_PROTO_E_UNKNOWN_OP, "no", NULL);
		} else if (f->id % 3 == 1) {
			size_t room = sbx_proto_conn_data_room(c, f->id);
			sbx_proto_conn_send_data(c, f->id, SBX_CH_STDOUT, chunk,
						 room < sizeof(chunk) ? room : sizeof(chunk), true, NULL);
			sbx_proto_conn_end(c, f->id, NULL, 0, NULL);
		}
		break; /* id % 3 == 2: stays open */
	case SBX_PROTO_DATA:
	case SBX_PROTO_EVENT:
		sbx_proto_conn_consumed(c, f->id, f->body_len);
		if (f->eof && sbx_proto_conn_stream_data(c, f->id) == NULL)
			sbx_proto_conn_cancel(c, f->id, NULL);
		break;
	case SBX_PROTO_CTL:
	case SBX_PROTO_CANCEL:
		sbx_proto_conn_fail(c, f->id, SBX_PROTO_E_CANCELLED, "cancelled", NULL);
		break;
	default:
		break;
	}
}

static void on_writable(sbx_proto_conn *c, uint64_t id, void *ud)
{
	if (sbx_proto_conn_data_room(c, id) > 10)
		sbx_proto_conn_send_data(c, id, SBX_CH_STDOUT, "more", 4, false, NULL);
}

static void on_close(sbx_proto_conn *c, const sbx_err *why, void *ud)
{
	struct state *st = ud;
	st->closed = 1;
	sbx_proto_conn_free(c);
	st->c = NULL;
}

static const sbx_proto_conn_cbs cbs = { NULL, on_frame, on_writable, on_close };

static void drain(int fd)
{
	char buf[65536];
	while (read(fd, buf, sizeof(buf)) > 0)
		;
}

static void run(struct event_base *base, const uint8_t *data, size_t size, bool is_client)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	fcntl(sv[1], F_SETFL, O_NONBLOCK);
	struct state st = { 0 };
	sbx_proto_conn_opts o = { .is_client = is_client, .max_frame = 4096, .max_streams = 4,
				  .window = 2048, .agent = "fuzz" };
	sbx_err err;
	st.c = sbx_proto_conn_new(base, sv[0], &o, &cbs, &st, &err);
	if (!st.c)
		abort();
	if (is_client) {
		uint64_t id;
		for (int i = 0; i < 3; i++)
			if (sbx_proto_conn_request(st.c, "exec", NULL, 0, &id, &err) < 0)
				abort();
	}
	size_t off = 0;
	for (int spins = 0; !st.closed && spins < 10000; spins++) {
		if (off < size) {
			ssize_t n = write(sv[1], data + off, size - off);
			if (n > 0)
				off += (size_t)n;
			if (off == size)
				shutdown(sv[1], SHUT_WR);
		} else if (size == 0 && spins == 0) {
			shutdown(sv[1], SHUT_WR);
		}
		event_base_loop(base, EVLOOP_NONBLOCK);
		drain(sv[1]);
	}
	if (!st.closed) /* EOF always ends a connection */
		abort();
	close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct event_base *base;
	if (!base)
		base = event_base_new();
	run(base, data, size, false);
	run(base, data, size, true);
	return 0;
}
