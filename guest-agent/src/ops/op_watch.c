/* fs.watch: file-system events beneath a folder as EVENT frames
 * (PROTOCOL.md), until the requester cancels or the folder goes away.
 *
 * Raw inotify rather than libinotifytools, which the project otherwise
 * prefers, because the library does not fit a multi-client agent: it keeps
 * one process-wide inotify instance and watch table (inotifytools_init), so
 * two streams watching the same folder would share watch descriptors,
 * removals and overflows, and one stream's cancel would remove the other's
 * watch; it adds watches and walks trees by path name, which cannot be
 * confined beneath a root (a folder swapped for a symlink mid-walk would be
 * followed out); it offers no descriptor for the event loop, only blocking
 * or polling reads; and its single object pulls regex and printf code into
 * the size-capped static agent. Here every stream owns an inotify instance;
 * every folder is opened with agent_fsconf (beneath the root, no symlink)
 * and watched through /proc/self/fd/N of that fd, so the watch is on exactly
 * the inode that was resolved.
 *
 * Folders created (or moved in) later are watched as they appear, and what
 * they already hold by then is reported as created. Events go out within
 * the stream's credit; up to AGENT_WATCH_QUEUE_MAX wait (op_watch_queue.h);
 * when the queue is full the agent stops reading the inotify fd, the
 * kernel's queue takes the rest and its overflow (IN_Q_OVERFLOW) is
 * reported as an "overflow" event where it happened, as is a watch limit
 * reached: never hidden, never unbounded memory, and what follows a loss
 * still reported. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "agent_fsconf_ops.h"
#include "log.h"
#include "ops.h"
#include "op_fs_util.h"
#include "op_watch_queue.h"
#include "session.h"

#define WATCH_MAX 4096u    /* folders one stream watches */
/* Streams open at once in one sandbox. inotify's instances and watches are
 * counted per user of the host (fs.inotify.max_user_instances, 128 by
 * default), and every runc sandbox's agent is the same user: without a
 * bound, one sandbox's watches would use up what the others (and the
 * host's own services) have. */
#define STREAMS_MAX 8u
#define WALK_DEPTH 32u
#define READ_BUF (64u << 10)
/* What one inotify event costs in a read at least (a nameless one) and
 * at most (a name of NAME_MAX: a read needs room for it or fails), and
 * the events one can put in the queue (a move's unpaired half and the
 * event itself; a new folder's walk reports its own losses). */
#define IEV_MIN sizeof(struct inotify_event)
#define IEV_MAX (sizeof(struct inotify_event) + NAME_MAX + 1)
#define EMITS_PER_IEV 2u
/* No IN_DONT_FOLLOW: the path is /proc/self/fd/N, a link to the folder. */
#define MASK (IN_CREATE | IN_DELETE | IN_MODIFY | IN_MOVED_FROM | IN_MOVED_TO | \
	      IN_DELETE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

typedef struct wdir {
	int wd;
	char *rel; /* below the watched folder; "" is the folder */
} wdir;

typedef struct pending_move {
	uint32_t cookie;
	bool dir;
	char path[PATH_MAX];
} pending_move;

typedef struct watch_op {
	agent_op op;
	agent_ctx *ctx; /* counted in its watches once set */
	int ifd;
	struct event *ev;
	bool reading;
	bool recursive;
	char root[PATH_MAX];
	char base[PATH_MAX]; /* the watched folder below the root */
	wdir *dirs;
	size_t ndirs, cap;
	agent_watch_queue queue;
	/* A move's first half at the end of a read, while the kernel holds
	 * more: its other half is likely the next event (a read sized by the
	 * queue's room can fall between them). */
	pending_move pending;
	uint8_t *buf;
} watch_op;

static sbx_proto_conn *conn_of(watch_op *w)
{
	return agent_session_conn(w->op.session);
}

static void watch_free(watch_op *w)
{
	if (w->ctx)
		w->ctx->watches--;
	if (w->ev)
		event_free(w->ev);
	if (w->ifd >= 0)
		close(w->ifd);
	for (size_t i = 0; i < w->ndirs; i++)
		free(w->dirs[i].rel);
	free(w->dirs);
	agent_watch_queue_free(&w->queue);
	free(w->buf);
	free(w);
}

static void watch_end(watch_op *w, int neg_errno, const char *msg)
{
	agent_session *s = w->op.session;

	agent_session_detach(s, &w->op);
	if (neg_errno < 0) {
		agent_fs_fail(s, w->op.id, neg_errno, msg);
	} else {
		msgpack_sbuffer b;
		msgpack_packer pk;

		msgpack_sbuffer_init(&b);
		msgpack_packer_init(&pk, &b, msgpack_sbuffer_write);
		msgpack_pack_map(&pk, 1);
		sbx_proto_pack_str(&pk, "reason");
		sbx_proto_pack_str(&pk, msg);
		agent_fs_end(s, w->op.id, &b);
		msgpack_sbuffer_destroy(&b);
	}
	watch_free(w);
}

static void set_reading(watch_op *w, bool on)
{
	if (on == w->reading)
		return;
	if (on)
		event_add(w->ev, NULL);
	else
		event_del(w->ev);
	w->reading = on;
}

static int send_event(void *ud, const char *p, size_t n)
{
	watch_op *w = ud;
	sbx_err err = { 0 };
	int ret = sbx_proto_conn_send_event(conn_of(w), w->op.id, p, n, &err);

	if (ret < 0 && ret != -EAGAIN)
		agent_log_debug("fs.watch: send: %s", err.msg);
	return ret;
}

/* Send what waits while credit allows; read again once the queue has
 * room and owes nothing. */
static void flush(watch_op *w)
{
	if (agent_watch_queue_flush(&w->queue, send_event, w))
		set_reading(w, true);
}

/* Events were lost here (the kernel's queue, a watch limit). */
static void lost_here(watch_op *w)
{
	if (!agent_watch_queue_lost_here(&w->queue))
		set_reading(w, false);
}

/* Queue {"type", "path", "dir", ["from", "to"]}; NULL path: none. */
static void emit(watch_op *w, const char *type, const char *path, bool dir, const char *from,
		 const char *to)
{
	const msgpack_sbuffer *last = agent_watch_queue_last(&w->queue);
	msgpack_sbuffer map;
	msgpack_packer pk;

	if (w->queue.dropping) {
		set_reading(w, false);
		return;
	}
	/* A burst of writes to one file is one modify while it waits. */
	if (strcmp(type, "modify") == 0 && last) {
		msgpack_sbuffer probe;
		msgpack_packer pp;

		msgpack_sbuffer_init(&probe);
		msgpack_packer_init(&pp, &probe, msgpack_sbuffer_write);
		msgpack_pack_map(&pp, 3);
		sbx_proto_pack_str(&pp, "type");
		sbx_proto_pack_str(&pp, type);
		sbx_proto_pack_str(&pp, "path");
		sbx_proto_pack_str(&pp, path);
		bool same = probe.size <= last->size &&
			    memcmp(probe.data, last->data, probe.size) == 0;
		msgpack_sbuffer_destroy(&probe);
		if (same)
			return;
	}
	msgpack_sbuffer_init(&map);
	msgpack_packer_init(&pk, &map, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, from || to ? 5 : 3);
	sbx_proto_pack_str(&pk, "type");
	sbx_proto_pack_str(&pk, type);
	sbx_proto_pack_str(&pk, "path");
	sbx_proto_pack_str(&pk, path);
	sbx_proto_pack_str(&pk, "dir");
	if (dir)
		msgpack_pack_true(&pk);
	else
		msgpack_pack_false(&pk);
	if (from || to) {
		sbx_proto_pack_str(&pk, "from");
		if (from)
			sbx_proto_pack_str(&pk, from);
		else
			msgpack_pack_nil(&pk);
		sbx_proto_pack_str(&pk, "to");
		if (to)
			sbx_proto_pack_str(&pk, to);
		else
			msgpack_pack_nil(&pk);
	}
	if (!agent_watch_queue_push(&w->queue, &map))
		set_reading(w, false);
}

static wdir *find_wd(watch_op *w, int wd)
{
	for (size_t i = 0; i < w->ndirs; i++)
		if (w->dirs[i].wd == wd)
			return &w->dirs[i];
	return NULL;
}

/* false when a/b does not fit in PATH_MAX: the caller skips that name
 * rather than report a cut path. */
static bool join(char *out, const char *a, const char *b)
{
	int n;
	if (!a[0])
		n = snprintf(out, PATH_MAX, "%s", b);
	else if (!b[0])
		n = snprintf(out, PATH_MAX, "%s", a);
	else
		n = snprintf(out, PATH_MAX, "%s/%s", a, b);
	return n >= 0 && n < PATH_MAX;
}

/* Watch the folder open as fd, known as rel below the watched folder.
 * Returns 0, 1 when the watch limit stopped it (the caller reports the
 * loss where it stands), or a negative errno. */
static int add_watch(watch_op *w, int fd, const char *rel, sbx_err *err)
{
	char proc[64];
	int wd;
	wdir *d;

	if (w->ndirs >= WATCH_MAX)
		return 1;
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	wd = inotify_add_watch(w->ifd, proc, MASK);
	if (wd < 0) {
		if (errno == ENOSPC) /* the user's watch limit */
			return 1;
		return sbx_err_sys(err, -errno, "fs.watch %s/%s: inotify_add_watch", w->root, rel);
	}
	d = find_wd(w, wd); /* the same folder twice (a hard-linked bind): keep one */
	if (d)
		return 0;
	if (w->ndirs == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 16;
		wdir *n = realloc(w->dirs, cap * sizeof(*n));
		if (!n)
			return sbx_err_sys(err, -ENOMEM, "fs.watch");
		w->dirs = n;
		w->cap = cap;
	}
	w->dirs[w->ndirs].wd = wd;
	w->dirs[w->ndirs].rel = strdup(rel);
	if (!w->dirs[w->ndirs].rel)
		return sbx_err_sys(err, -ENOMEM, "fs.watch");
	w->ndirs++;
	return 0;
}

/* Watch fd's folder (taken) and, recursively, its subfolders; report what
 * they hold as created when announce. */
static int watch_tree(watch_op *w, int fd, const char *rel, unsigned depth, bool announce,
		      sbx_err *err)
{
	SBX_AUTO_CLOSEDIR DIR *d = NULL;
	struct dirent *de;
	int ret = add_watch(w, fd, rel, err);

	if (ret != 0 || !w->recursive || depth >= WALK_DEPTH) {
		close(fd);
		return ret;
	}
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return 0;
	}
	while ((de = readdir(d))) {
		char child[PATH_MAX];
		bool isdir = de->d_type == DT_DIR;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (!join(child, rel, de->d_name))
			continue;
		if (announce)
			emit(w, "create", child, isdir, NULL, NULL);
		if (isdir && w->recursive && depth < WALK_DEPTH) {
			sbx_err e2 = { 0 };
			int cfd = agent_fsconf_open_child(dirfd(d), de->d_name,
							  O_RDONLY | O_DIRECTORY, &e2);
			/* a mount point or gone meanwhile: not watched */
			if (cfd >= 0 && (ret = watch_tree(w, cfd, child, depth + 1, announce, err)) != 0)
				return ret;
		}
	}
	return 0;
}

/* A folder that appeared at rel: resolve it again beneath the root. */
static void watch_new_dir(watch_op *w, const char *rel)
{
	AGENT_FSCONF_AUTO_ROOT agent_fsconf_root root = { .fd = -1 };
	char full[PATH_MAX];
	sbx_err err = { 0 };
	unsigned depth = 0;
	int fd;

	if (!join(full, w->base, rel))
		return;
	for (const char *p = rel; *p; p++)
		depth += *p == '/';
	if (agent_fsconf_root_open(&root, w->root, &err) < 0)
		return;
	fd = agent_fsconf_open(&root, full, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0, "fs.watch",
			       &err);
	if (fd < 0)
		return; /* gone again, or a symlink now: nothing to watch */
	int ret = watch_tree(w, fd, rel, depth + 1, true, &err);
	if (ret == 1)
		lost_here(w);
	else if (ret < 0)
		agent_log_debug("%s", err.msg);
}

/* Forget the watches at or below rel (moved out of the tree). */
static void forget(watch_op *w, const char *rel)
{
	size_t len = strlen(rel);

	for (size_t i = 0; i < w->ndirs;) {
		const char *r = w->dirs[i].rel;
		if (strncmp(r, rel, len) == 0 && (r[len] == '\0' || r[len] == '/')) {
			inotify_rm_watch(w->ifd, w->dirs[i].wd);
			free(w->dirs[i].rel);
			w->dirs[i] = w->dirs[--w->ndirs];
		} else {
			i++;
		}
	}
}

/* A folder moved inside the tree: its watches now go by the new name. */
static void rename_prefix(watch_op *w, const char *from, const char *to)
{
	size_t flen = strlen(from);

	for (size_t i = 0; i < w->ndirs; i++) {
		const char *r = w->dirs[i].rel;
		char n[PATH_MAX];
		if (strncmp(r, from, flen) != 0 || (r[flen] != '\0' && r[flen] != '/'))
			continue;
		if ((size_t)snprintf(n, sizeof(n), "%s%s", to, r + flen) >= sizeof(n))
			continue;
		char *dup = strdup(n);
		if (dup) {
			free(w->dirs[i].rel);
			w->dirs[i].rel = dup;
		}
	}
}

static void moved_out(watch_op *w, pending_move *m)
{
	if (!m->cookie)
		return;
	if (m->dir)
		forget(w, m->path);
	emit(w, "move", m->path, m->dir, m->path, NULL);
	m->cookie = 0;
}

/* Returns true when the stream ended. */
static bool handle(watch_op *w, const struct inotify_event *ie, pending_move *m)
{
	wdir *d;
	char path[PATH_MAX];
	bool dir = ie->mask & IN_ISDIR;

	if (ie->mask & IN_Q_OVERFLOW) { /* what follows it is kept */
		lost_here(w);
		return false;
	}
	d = find_wd(w, ie->wd);
	if (!d)
		return false; /* a watch we dropped; its last events */
	if (ie->mask & (IN_IGNORED | IN_DELETE_SELF)) {
		if (d->rel[0] == '\0') {
			flush(w);
			watch_end(w, 0, "deleted");
			return true;
		}
		if (ie->mask & IN_IGNORED) { /* the kernel dropped it: so do we */
			free(d->rel);
			*d = w->dirs[--w->ndirs];
		}
		return false;
	}
	if (!ie->len || !join(path, d->rel, ie->name))
		return false;
	if (ie->mask & IN_MOVED_TO) {
		if (m->cookie && m->cookie == ie->cookie) {
			if (m->dir)
				rename_prefix(w, m->path, path);
			emit(w, "move", path, dir, m->path, path);
			m->cookie = 0;
			return false;
		}
		moved_out(w, m);
		emit(w, "create", path, dir, NULL, NULL);
		if (dir && w->recursive)
			watch_new_dir(w, path);
		return false;
	}
	moved_out(w, m);
	if (ie->mask & IN_MOVED_FROM) {
		m->cookie = ie->cookie;
		m->dir = dir;
		snprintf(m->path, sizeof(m->path), "%s", path);
	} else if (ie->mask & IN_CREATE) {
		emit(w, "create", path, dir, NULL, NULL);
		if (dir && w->recursive)
			watch_new_dir(w, path);
	} else if (ie->mask & IN_DELETE) {
		emit(w, "delete", path, dir, NULL, NULL);
	} else if (ie->mask & IN_MODIFY) {
		emit(w, "modify", path, dir, NULL, NULL);
	}
	return false;
}

/* A read takes only the events the queue has room for: what the kernel
 * still holds stays in its queue, where it waits without a loss; a read of
 * more would drop the rest here (once 2,000 events a read against 512
 * free places: an overflow every read while a backlog drained). */
static size_t read_size(const watch_op *w)
{
	size_t bytes = agent_watch_queue_room(&w->queue) / EMITS_PER_IEV * IEV_MIN;
	return bytes < READ_BUF ? bytes : READ_BUF;
}

static void on_inotify(evutil_socket_t fd, short what, void *ud)
{
	watch_op *w = ud;
	pending_move *m = &w->pending;
	size_t want = read_size(w);
	int more = 0;

	if (want < IEV_MAX) { /* waits for the queue to drain (flush reads again) */
		set_reading(w, false);
		return;
	}
	ssize_t n = read(fd, w->buf, want);

	if (n < 0) {
		if (errno != EAGAIN && errno != EINTR)
			watch_end(w, -errno, "fs.watch: read inotify");
		return;
	}
	for (ssize_t off = 0; off < n;) {
		const struct inotify_event *ie = (const struct inotify_event *)(w->buf + off);
		if (handle(w, ie, m))
			return;
		off += (ssize_t)(sizeof(*ie) + ie->len);
	}
	/* A move whose other half did not come and is not waiting in the
	 * kernel's queue either: out of the tree. */
	if (m->cookie && (ioctl(fd, FIONREAD, &more) < 0 || more <= 0))
		moved_out(w, m);
	flush(w);
}

static void watch_frame(agent_op *op, const sbx_proto_frame *f)
{
	watch_op *w = (watch_op *)op;

	if (f->kind == SBX_PROTO_CANCEL)
		watch_end(w, -ECANCELED, "fs.watch: cancelled");
	else if (f->kind == SBX_PROTO_DATA)
		sbx_proto_conn_consumed(conn_of(w), op->id, f->body_len);
}

static void watch_writable(agent_op *op)
{
	flush((watch_op *)op);
}

static void watch_abort(agent_op *op)
{
	watch_free((watch_op *)op);
}

static const agent_op_vtbl watch_vtbl = {
	.frame = watch_frame,
	.writable = watch_writable,
	.abort = watch_abort,
};

void agent_op_fs_watch(agent_session *s, uint64_t id, const msgpack_object *args)
{
	AGENT_FS_AUTO_PATH agent_fs_path p = AGENT_FS_PATH_INIT;
	sbx_err err = { 0 };
	watch_op *w = calloc(1, sizeof(*w));
	int ret, fd = -1;
	bool limited = false;

	if (!w) {
		agent_fs_fail(s, id, -ENOMEM, "fs.watch: out of memory");
		return;
	}
	w->ifd = -1;
	agent_watch_queue_init(&w->queue);
	w->op.vt = &watch_vtbl;
	w->op.id = id;
	w->op.session = s;
	if (agent_session_ctx(s)->watches >= STREAMS_MAX) {
		char msg[96];
		snprintf(msg, sizeof(msg), "fs.watch: %u watches are open in this sandbox, its most: "
			 "end one first", STREAMS_MAX);
		free(w);
		agent_fs_fail(s, id, -EAGAIN, msg);
		return;
	}
	w->ctx = agent_session_ctx(s);
	w->ctx->watches++;
	ret = agent_fs_path_get(args, "root", "path", "fs.watch", &p, &err);
	if (ret >= 0)
		ret = agent_fs_get_bool(args, "recursive", &w->recursive, &err);
	if (ret >= 0)
		ret = fd = agent_fsconf_open_dir(&p.root, p.rel, "fs.watch", &err);
	if (ret >= 0) {
		w->buf = malloc(READ_BUF);
		w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
		/* the host user's instances used up: as the bound above */
		int e = !w->buf ? -ENOMEM : errno == EMFILE || errno == ENFILE ? -EAGAIN : -errno;
		if (!w->buf || w->ifd < 0)
			ret = agent_fsconf_fail(&err, e, &p.root, p.rel, "fs.watch",
						"inotify (the node's limit of watches)");
	}
	if (ret >= 0) {
		snprintf(w->root, sizeof(w->root), "%s", p.root.path);
		snprintf(w->base, sizeof(w->base), "%s", p.rel);
		w->ev = event_new(agent_session_ctx(s)->base, w->ifd, EV_READ | EV_PERSIST,
				  on_inotify, w);
		if (!w->ev)
			ret = sbx_err_set(&err, -ENOMEM, "fs.watch: event");
	}
	if (ret >= 0) {
		ret = watch_tree(w, fd, "", 0, false, &err);
		fd = -1;
		limited = ret == 1;
	}
	if (ret < 0) {
		if (fd >= 0)
			close(fd);
		watch_free(w);
		agent_fs_fail(s, id, ret, err.msg);
		return;
	}
	agent_session_attach(s, &w->op);
	set_reading(w, true);
	/* Ready: the requester may change the tree from now on. */
	emit(w, "ready", "", true, NULL, NULL);
	if (limited) /* some folders are not watched */
		lost_here(w);
	flush(w);
}
