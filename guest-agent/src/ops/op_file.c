/* file.read and file.write: a file's bytes over a stream, in either
 * direction, within the stream's credit (PROTOCOL.md).
 *
 * file.read sends the file's stat as an EVENT first (the supervisor sets
 * Content-Length, ETag and Last-Modified from it), then sends the file only
 * while data_room allows and resumes on writable: nothing waits in the agent
 * beyond one chunk and the connection's bounded output buffer. The bytes go
 * by splice(2) from the page cache through a pipe to the connection's
 * socket (op_splice.c), at the op's own offset; without a pipe, or from a
 * file system that cannot splice, they are read into the output. Pages go
 * by reference, so a file written or cut while read may show its new bytes
 * (a cut page's zeros) in what was already sent, as a read racing a writer
 * would show some; nothing past the size at open is sent, and a file that
 * shrinks ends early (read_of_a_shrinking_file).
 * file.write writes each DATA frame to a temporary file in the target's
 * folder (agent_fsconf_tmp_open) and returns its credit once the bytes are
 * written, so the requester can have at most one window in flight; on eof
 * the file is renamed into place. Cancel, an error or a lost connection
 * removes the temporary file: the old file stays as it was.
 * Paths are resolved by agent_fsconf only; this file must not look up paths. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/proto.h"
#include "agent_fsconf_ops.h"
#include "log.h"
#include "ops.h"
#include "op_fs_util.h"
#include "op_splice.h"
#include "session.h"

#define FILE_CH SBX_CH_FILE
/* Largest DATA frame; data_room, and the pipe's size when spliced, bound it
 * further. */
#define READ_CHUNK (1u << 20)

/* ---- file.read ---- */

typedef struct read_op {
	agent_op op;
	int fd;
	uint64_t pos, end; /* next offset; stop before end */
	uint64_t sent;
	agent_splice sp; /* fd's way to the session; no pipe: read */
} read_op;

static void read_free(read_op *r)
{
	if (r->fd >= 0)
		close(r->fd);
	agent_splice_close(&r->sp);
	free(r);
}

static void read_finish(read_op *r, int neg_errno, const char *msg)
{
	agent_session *s = r->op.session;
	sbx_err err = { 0 };

	agent_session_detach(s, &r->op);
	if (neg_errno < 0) {
		agent_fs_fail(s, r->op.id, neg_errno, msg);
	} else {
		msgpack_sbuffer buf;
		msgpack_packer pk;

		if (sbx_proto_conn_send_data(agent_session_conn(s), r->op.id, FILE_CH, NULL, 0, true,
					     &err) < 0)
			agent_log_debug("file.read: eof: %s", err.msg);
		msgpack_sbuffer_init(&buf);
		msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 1);
		sbx_proto_pack_str(&pk, "bytes");
		msgpack_pack_uint64(&pk, r->sent);
		agent_fs_end(s, r->op.id, &buf);
		msgpack_sbuffer_destroy(&buf);
	}
	read_free(r);
}

static void read_writable(agent_op *op)
{
	read_op *r = (read_op *)op;
	sbx_proto_conn *c = agent_session_conn(op->session);
	sbx_err err = { 0 };
	size_t room;

	while ((room = sbx_proto_conn_data_room(c, op->id)) > 0) {
		uint64_t want = r->end - r->pos;
		off_t off = (off_t)r->pos;
		ssize_t n;

		if (want == 0) {
			read_finish(r, 0, NULL);
			return;
		}
		if (want > room)
			want = room;
		if (want > READ_CHUNK)
			want = READ_CHUNK;
		n = agent_splice_move(&r->sp, c, op->id, FILE_CH, r->fd, &off, (size_t)want, &err);
		if (n == -2) {
			read_finish(r, -EIO, err.msg);
			return;
		}
		if (n < 0) {
			int e = errno;
			char msg[128];
			snprintf(msg, sizeof(msg), "file.read: read at %llu: %s",
				 (unsigned long long)r->pos, strerror(e));
			read_finish(r, -e, msg);
			return;
		}
		if (n == 0) { /* shorter than it was at open: what there is */
			read_finish(r, 0, NULL);
			return;
		}
		r->pos += (uint64_t)n;
		r->sent += (uint64_t)n;
	}
}

static void read_frame(agent_op *op, const sbx_proto_frame *f)
{
	read_op *r = (read_op *)op;

	if (f->kind == SBX_PROTO_CANCEL) {
		read_finish(r, -ECANCELED, "file.read: cancelled");
		return;
	}
	if (f->kind == SBX_PROTO_DATA)
		sbx_proto_conn_consumed(agent_session_conn(op->session), op->id, f->body_len);
	/* ctl and data mean nothing to a read; ignored. */
}

static void read_abort(agent_op *op)
{
	read_free((read_op *)op);
}

static const agent_op_vtbl read_vtbl = {
	.frame = read_frame,
	.writable = read_writable,
	.abort = read_abort,
};

void agent_op_file_read(agent_session *s, uint64_t id, const msgpack_object *args)
{
	AGENT_FS_AUTO_PATH agent_fs_path p = AGENT_FS_PATH_INIT;
	sbx_err err = { 0 };
	uint64_t offset = 0, length = UINT64_MAX;
	struct stat st;
	read_op *r;
	msgpack_sbuffer buf;
	msgpack_packer pk;
	int ret;

	ret = agent_fs_path_get(args, "root", "path", "file.read", &p, &err);
	if (ret >= 0)
		ret = agent_fs_get_uint(args, "offset", INT64_MAX, &offset, &err);
	if (ret >= 0)
		ret = agent_fs_get_uint(args, "length", UINT64_MAX, &length, &err);
	if (ret >= 0)
		ret = agent_fsconf_open_read(&p.root, p.rel, &st, &err);
	if (ret < 0) {
		agent_fs_fail(s, id, ret, err.msg);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		close(ret);
		agent_fs_fail(s, id, -ENOMEM, "file.read: out of memory");
		return;
	}
	r->fd = ret;
	r->sp = (agent_splice)AGENT_SPLICE_NONE;
	r->op.vt = &read_vtbl;
	r->op.id = id;
	r->pos = offset < (uint64_t)st.st_size ? offset : (uint64_t)st.st_size;
	r->end = (uint64_t)st.st_size - r->pos > length ? r->pos + length : (uint64_t)st.st_size;
	posix_fadvise(r->fd, (off_t)r->pos, (off_t)(r->end - r->pos), POSIX_FADV_SEQUENTIAL);
	if (r->end > r->pos)
		agent_splice_open(&r->sp, READ_CHUNK);

	/* The stat first: an EVENT fits any window (>= 1024 bytes). */
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, AGENT_FS_STAT_PAIRS + 2);
	agent_fs_pack_stat(&pk, &st);
	sbx_proto_pack_str(&pk, "offset");
	msgpack_pack_uint64(&pk, r->pos);
	sbx_proto_pack_str(&pk, "length");
	msgpack_pack_uint64(&pk, r->end - r->pos);
	ret = sbx_proto_conn_send_event(agent_session_conn(s), id, buf.data, buf.size, &err);
	msgpack_sbuffer_destroy(&buf);
	if (ret < 0) {
		read_free(r);
		agent_fs_fail(s, id, -EIO, err.msg);
		return;
	}
	agent_session_attach(s, &r->op);
	read_writable(&r->op);
}

/* ---- file.write ---- */

typedef struct write_op {
	agent_op op;
	agent_fsconf_tmp tmp;
	char root[PATH_MAX];
	uint64_t size, max_bytes;
} write_op;

static void write_finish(write_op *w, int neg_errno, const char *msg)
{
	agent_session *s = w->op.session;

	agent_session_detach(s, &w->op);
	agent_fsconf_tmp_abort(&w->tmp);
	agent_fs_fail(s, w->op.id, neg_errno, msg);
	free(w);
}

static void write_commit(write_op *w)
{
	agent_session *s = w->op.session;
	AGENT_FSCONF_AUTO_ROOT agent_fsconf_root root = { .fd = -1 };
	sbx_err err = { 0 };
	msgpack_sbuffer buf;
	msgpack_packer pk;
	int ret;

	/* Reopened: commit checks the folder is still where the path leads. */
	ret = agent_fsconf_root_open(&root, w->root, &err);
	if (ret >= 0)
		ret = agent_fsconf_tmp_commit(&root, &w->tmp, &err);
	if (ret < 0) {
		write_finish(w, ret, err.msg);
		return;
	}
	agent_session_detach(s, &w->op);
	msgpack_sbuffer_init(&buf);
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 1);
	sbx_proto_pack_str(&pk, "size");
	msgpack_pack_uint64(&pk, w->size);
	agent_fs_end(s, w->op.id, &buf);
	msgpack_sbuffer_destroy(&buf);
	free(w);
}

static void write_data(write_op *w, const sbx_proto_frame *f)
{
	sbx_proto_conn *c = agent_session_conn(w->op.session);
	const uint8_t *p = f->data;
	size_t left = f->data_len;
	sbx_err err = { 0 };

	if (f->ch_len != strlen(FILE_CH) || memcmp(f->ch, FILE_CH, f->ch_len) != 0) {
		write_finish(w, -EINVAL, "file.write: data only on channel \"file\"");
		return;
	}
	if (w->max_bytes && f->data_len > w->max_bytes - w->size) {
		sbx_err_set(&err, -EFBIG, "file.write %s/%s: more than max_bytes (%llu bytes)",
			    w->root, w->tmp.rel, (unsigned long long)w->max_bytes);
		write_finish(w, -EFBIG, err.msg);
		return;
	}
	while (left > 0) {
		ssize_t n = write(w->tmp.fd, p, left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			sbx_err_sys(&err, -e, "file.write %s/%s", w->root, w->tmp.rel);
			write_finish(w, -e, err.msg);
			return;
		}
		p += n;
		left -= (size_t)n;
	}
	w->size += f->data_len;
	/* The bytes are in the file: the requester may send more. */
	sbx_proto_conn_consumed(c, w->op.id, f->body_len);
	if (f->eof)
		write_commit(w);
}

static void write_frame(agent_op *op, const sbx_proto_frame *f)
{
	write_op *w = (write_op *)op;

	if (f->kind == SBX_PROTO_CANCEL)
		write_finish(w, -ECANCELED, "file.write: cancelled, nothing written");
	else if (f->kind == SBX_PROTO_DATA)
		write_data(w, f);
}

static void write_writable(agent_op *op)
{
}

static void write_abort(agent_op *op)
{
	write_op *w = (write_op *)op;

	agent_fsconf_tmp_abort(&w->tmp);
	free(w);
}

static const agent_op_vtbl write_vtbl = {
	.frame = write_frame,
	.writable = write_writable,
	.abort = write_abort,
};

void agent_op_file_write(agent_session *s, uint64_t id, const msgpack_object *args)
{
	AGENT_FS_AUTO_PATH agent_fs_path p = AGENT_FS_PATH_INIT;
	sbx_err err = { 0 };
	agent_fsconf_create opt = {
		.mode = 0644,
		.uid = AGENT_FS_OWNER_UID(),
		.gid = AGENT_FS_OWNER_GID(),
		.overwrite = true,
	};
	bool parents = false;
	write_op *w;
	int ret;

	w = calloc(1, sizeof(*w));
	if (!w) {
		agent_fs_fail(s, id, -ENOMEM, "file.write: out of memory");
		return;
	}
	w->tmp.fd = w->tmp.dirfd = -1;
	ret = agent_fs_path_get(args, "root", "path", "file.write", &p, &err);
	if (ret >= 0 && p.rel[0] == '\0')
		ret = sbx_err_set(&err, -EINVAL, "file.write: \"path\" must name a file");
	if (ret >= 0)
		ret = agent_fs_get_mode(args, "mode", &opt.mode, &err);
	if (ret >= 0)
		ret = agent_fs_get_bool(args, "parents", &parents, &err);
	if (ret >= 0)
		ret = agent_fs_get_bool(args, "overwrite", &opt.overwrite, &err);
	if (ret >= 0)
		ret = agent_fs_get_uint(args, "max_bytes", UINT64_MAX, &w->max_bytes, &err);
	if (ret >= 0 && parents) {
		char dir[PATH_MAX];
		char *slash;

		snprintf(dir, sizeof(dir), "%s", p.rel);
		slash = strrchr(dir, '/');
		if (slash) {
			agent_fsconf_dirs dopt = { .mode = AGENT_FSCONF_PARENT_MODE, .uid = opt.uid,
						   .gid = opt.gid, .parents = true };
			*slash = '\0';
			ret = agent_fsconf_mkdir_as(&p.root, dir, &dopt, &err);
		}
	}
	if (ret >= 0)
		ret = agent_fsconf_tmp_open(&p.root, p.rel, &opt, &w->tmp, &err);
	if (ret < 0) {
		agent_fsconf_tmp_abort(&w->tmp);
		free(w);
		agent_fs_fail(s, id, ret, err.msg);
		return;
	}
	snprintf(w->root, sizeof(w->root), "%s", p.root.path);
	w->op.vt = &write_vtbl;
	w->op.id = id;
	agent_session_attach(s, &w->op);
}
