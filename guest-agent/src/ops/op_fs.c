/* fs.stat, fs.list, fs.mkdir, fs.move, fs.remove, fs.chmod, fs.search:
 * answered at once with END or ERR (PROTOCOL.md), nothing kept.
 *
 * fs.list and fs.search walk beneath the resolved folder one fd per level
 * (agent_fsconf_open_child: no symlink followed, no mount crossed), depth-
 * bounded, and put what they find into the END result, bounded by an entry
 * count, by the peer's max_frame and by how many entries they examine: a
 * walk that hits a bound says "truncated" instead of growing memory or
 * holding the loop. Paths are resolved by agent_fsconf only. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx/cleanup.h"
#include "sbx/proto.h"
#include "agent_fsconf_ops.h"
#include "log.h"
#include "ops.h"
#include "op_fs_util.h"
#include "session.h"

#define LIST_DEFAULT_MAX 10000u
#define LIST_HARD_MAX 100000u
#define WALK_MAX_DEPTH 32u
#define WALK_MAX_VISIT 200000u /* entries examined by one walk */
#define ENTRY_FIXED_BYTES 192u /* an entry's keys and numbers, at most */

/* Packer into a fresh buffer, for a result map. */
#define RESULT(buf, pk)                                             \
	msgpack_sbuffer buf;                                        \
	msgpack_packer pk;                                          \
	msgpack_sbuffer_init(&buf);                                 \
	msgpack_packer_init(&pk, &buf, msgpack_sbuffer_write)

/* END {} when ret >= 0, else ERR with err's message. */
static void answer(agent_session *s, uint64_t id, int ret, const sbx_err *err)
{
	if (ret < 0) {
		agent_fs_fail(s, id, ret, err->msg);
		return;
	}
	RESULT(buf, pk);
	msgpack_pack_map(&pk, 0);
	agent_fs_end(s, id, &buf);
	msgpack_sbuffer_destroy(&buf);
}

/* ---- fs.stat ---- */

void agent_op_fs_stat(agent_session *s, uint64_t id, const msgpack_object *args)
{
	AGENT_FS_AUTO_PATH agent_fs_path p = AGENT_FS_PATH_INIT;
	sbx_err err = { 0 };
	bool follow = false;
	struct stat st;
	char target[PATH_MAX];
	ssize_t tlen = -1;
	int ret;

	ret = agent_fs_path_get(args, "root", "path", "fs.stat", &p, &err);
	if (ret >= 0)
		ret = agent_fs_get_bool(args, "follow", &follow, &err);
	if (ret >= 0)
		ret = agent_fsconf_stat(&p.root, p.rel, follow, &st, &err);
	if (ret >= 0 && S_ISLNK(st.st_mode)) {
		tlen = agent_fsconf_readlink(&p.root, p.rel, target, sizeof(target), &err);
		ret = tlen < 0 ? (int)tlen : 0;
	}
	if (ret < 0) {
		agent_fs_fail(s, id, ret, err.msg);
		return;
	}
	RESULT(buf, pk);
	msgpack_pack_map(&pk, AGENT_FS_STAT_PAIRS + (tlen >= 0));
	agent_fs_pack_stat(&pk, &st);
	if (tlen >= 0) {
		sbx_proto_pack_str(&pk, "target");
		sbx_proto_pack_strn(&pk, target, (size_t)tlen);
	}
	agent_fs_end(s, id, &buf);
	msgpack_sbuffer_destroy(&buf);
}

/* ---- walks: fs.list and fs.search ---- */

typedef struct walk {
	const char *glob;   /* NULL: every entry (list) */
	bool glob_path;     /* the glob has a '/': match the relative path */
	unsigned max_depth; /* 1: the folder's own entries */
	size_t max_entries, max_bytes;
	size_t count, visited;
	bool truncated;
	msgpack_sbuffer items;
	msgpack_packer pk;
	char path[PATH_MAX]; /* of the entry, relative to the walked folder */
} walk;

static void pack_entry(walk *w, int dirfd, const char *name, const struct stat *st)
{
	char target[PATH_MAX];
	ssize_t tlen = -1;

	if (S_ISLNK(st->st_mode)) {
		tlen = readlinkat(dirfd, name, target, sizeof(target) - 1);
		if (tlen < 0)
			tlen = 0;
	}
	msgpack_pack_map(&w->pk, 2 + AGENT_FS_STAT_PAIRS + (tlen >= 0));
	sbx_proto_pack_str(&w->pk, "path");
	sbx_proto_pack_str(&w->pk, w->path);
	sbx_proto_pack_str(&w->pk, "name");
	sbx_proto_pack_str(&w->pk, name);
	agent_fs_pack_stat(&w->pk, st);
	if (tlen >= 0) {
		sbx_proto_pack_str(&w->pk, "target");
		sbx_proto_pack_strn(&w->pk, target, (size_t)tlen);
	}
	w->count++;
}

/* Takes dirfd. Returns 1 when a bound stopped the walk, 0 when done. */
static int walk_dir(walk *w, int dirfd, size_t plen, unsigned depth)
{
	SBX_AUTO_CLOSEDIR DIR *d = fdopendir(dirfd);
	struct dirent *de;

	if (!d) {
		close(dirfd);
		return 0;
	}
	while ((de = readdir(d))) {
		const char *name = de->d_name;
		size_t nlen = strlen(name);
		struct stat st;

		if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
			continue;
		if (++w->visited > WALK_MAX_VISIT) {
			w->truncated = true;
			return 1;
		}
		if (plen + 1 + nlen >= sizeof(w->path))
			continue; /* deeper than a path can say: not reported */
		if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue; /* gone since readdir */
		if (plen)
			w->path[plen] = '/';
		memcpy(w->path + plen + (plen ? 1 : 0), name, nlen + 1);
		size_t clen = plen + (plen ? 1 : 0) + nlen;

		if (!w->glob || fnmatch(w->glob, w->glob_path ? w->path : name,
					w->glob_path ? FNM_PATHNAME : 0) == 0) {
			if (w->count >= w->max_entries ||
			    w->items.size + ENTRY_FIXED_BYTES + 2 * clen + PATH_MAX > w->max_bytes) {
				w->truncated = true;
				return 1;
			}
			pack_entry(w, dirfd, name, &st);
		}
		if (S_ISDIR(st.st_mode) && depth + 1 < w->max_depth) {
			sbx_err err = { 0 };
			int child = agent_fsconf_open_child(dirfd, name, O_RDONLY | O_DIRECTORY, &err);

			/* A mount point or a folder gone meanwhile: not entered. */
			if (child >= 0 && walk_dir(w, child, clen, depth + 1))
				return 1;
		}
		w->path[plen] = '\0';
	}
	return 0;
}

static void walk_answer(agent_session *s, uint64_t id, const msgpack_object *args,
			const char *what, bool search)
{
	AGENT_FS_AUTO_PATH agent_fs_path p = AGENT_FS_PATH_INIT;
	sbx_err err = { 0 };
	uint64_t depth = search ? WALK_MAX_DEPTH : 1, max = search ? 1000 : LIST_DEFAULT_MAX;
	SBX_AUTO_FREE char *glob = NULL;
	SBX_AUTO_FREE walk *w = NULL;
	size_t frame = sbx_proto_conn_peer_max_frame(agent_session_conn(s));
	int ret, fd = -1;

	ret = agent_fs_path_get(args, "root", "path", what, &p, &err);
	if (ret >= 0)
		ret = agent_fs_get_uint(args, "depth", WALK_MAX_DEPTH, &depth, &err);
	if (ret >= 0)
		ret = agent_fs_get_uint(args, "max", LIST_HARD_MAX, &max, &err);
	if (ret >= 0 && depth == 0)
		ret = sbx_err_set(&err, -EINVAL, "%s: \"depth\" must be at least 1", what);
	if (ret >= 0 && search) {
		const msgpack_object *g = args->type == MSGPACK_OBJECT_MAP ?
			sbx_proto_map_get(args, "glob") : NULL;
		glob = g ? sbx_proto_strdup(g) : NULL;
		if (!glob || !glob[0] || strlen(glob) > NAME_MAX * 4)
			ret = agent_fsconf_fail(&err, -EINVAL, &p.root, p.rel, what,
						"\"glob\" must be a non-empty string without NUL");
	}
	if (ret >= 0)
		ret = fd = agent_fsconf_open_dir(&p.root, p.rel, what, &err);
	if (ret < 0) {
		agent_fs_fail(s, id, ret, err.msg);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		close(fd);
		agent_fs_fail(s, id, -ENOMEM, "out of memory");
		return;
	}
	w->glob = glob;
	w->glob_path = glob && strchr(glob, '/');
	w->max_depth = (unsigned)depth;
	w->max_entries = max;
	w->max_bytes = frame > 8192 ? frame - 4096 : 4096;
	msgpack_sbuffer_init(&w->items);
	msgpack_packer_init(&w->pk, &w->items, msgpack_sbuffer_write);
	walk_dir(w, fd, 0, 0);

	RESULT(buf, pk);
	msgpack_pack_map(&pk, 3);
	sbx_proto_pack_str(&pk, "entries");
	msgpack_pack_array(&pk, w->count);
	msgpack_sbuffer_write(&buf, w->items.data, w->items.size);
	sbx_proto_pack_str(&pk, "count");
	msgpack_pack_uint64(&pk, w->count);
	sbx_proto_pack_str(&pk, "truncated");
	if (w->truncated)
		msgpack_pack_true(&pk);
	else
		msgpack_pack_false(&pk);
	agent_fs_end(s, id, &buf);
	msgpack_sbuffer_destroy(&buf);
	msgpack_sbuffer_destroy(&w->items);
}

void agent_op_fs_list(agent_session *s, uint64_t id, const msgpack_object *args)
{
	walk_answer(s, id, args, "fs.list", false);
}

void agent_op_fs_search(agent_session *s, uint64_t id, const msgpack_object *args)
{
	walk_answer(s, id, args, "fs.search", true);
}

/* ---- fs.mkdir, fs.move, fs.remove, fs.chmod ---- */

void agent_op_fs_mkdir(agent_session *s, uint64_t id, const msgpack_object *args)
{
	AGENT_FS_AUTO_PATH agent_fs_path p = AGENT_FS_PATH_INIT;
	sbx_err err = { 0 };
	/* New folders belong to the sandbox user, like new files. */
	agent_fsconf_dirs opt = { .mode = 0755, .uid = AGENT_FS_OWNER_UID(),
				  .gid = AGENT_FS_OWNER_GID() };
	int ret;

	ret = agent_fs_path_get(args, "root", "path", "fs.mkdir", &p, &err);
	if (ret >= 0)
		ret = agent_fs_get_bool(args, "parents", &opt.parents, &err);
	if (ret >= 0)
		ret = agent_fs_get_mode(args, "mode", &opt.mode, &err);
	if (ret >= 0)
		ret = agent_fsconf_mkdir_as(&p.root, p.rel, &opt, &err);
	answer(s, id, ret, &err);
}

void agent_op_fs_move(agent_session *s, uint64_t id, const msgpack_object *args)
{
	AGENT_FS_AUTO_PATH agent_fs_path from = AGENT_FS_PATH_INIT;
	AGENT_FS_AUTO_PATH agent_fs_path to = AGENT_FS_PATH_INIT;
	sbx_err err = { 0 };
	bool overwrite = false;
	const char *to_root = "to_root";
	int ret;

	ret = agent_fs_path_get(args, "root", "path", "fs.move", &from, &err);
	if (ret >= 0) {
		const msgpack_object *tr = args->type == MSGPACK_OBJECT_MAP ?
			sbx_proto_map_get(args, "to_root") : NULL;
		if (!tr || tr->type == MSGPACK_OBJECT_NIL)
			to_root = "root";
		ret = agent_fs_path_get(args, to_root, "to", "fs.move", &to, &err);
	}
	if (ret >= 0)
		ret = agent_fs_get_bool(args, "overwrite", &overwrite, &err);
	if (ret >= 0)
		ret = agent_fsconf_rename(&from.root, from.rel, &to.root, to.rel, overwrite, &err);
	answer(s, id, ret, &err);
}

void agent_op_fs_remove(agent_session *s, uint64_t id, const msgpack_object *args)
{
	AGENT_FS_AUTO_PATH agent_fs_path p = AGENT_FS_PATH_INIT;
	sbx_err err = { 0 };
	bool recursive = false;
	int ret;

	ret = agent_fs_path_get(args, "root", "path", "fs.remove", &p, &err);
	if (ret >= 0)
		ret = agent_fs_get_bool(args, "recursive", &recursive, &err);
	if (ret >= 0)
		ret = agent_fsconf_remove(&p.root, p.rel, recursive, &err);
	answer(s, id, ret, &err);
}

void agent_op_fs_chmod(agent_session *s, uint64_t id, const msgpack_object *args)
{
	AGENT_FS_AUTO_PATH agent_fs_path p = AGENT_FS_PATH_INIT;
	sbx_err err = { 0 };
	mode_t mode = (mode_t)-1;
	int ret;

	ret = agent_fs_path_get(args, "root", "path", "fs.chmod", &p, &err);
	if (ret >= 0)
		ret = agent_fs_get_mode(args, "mode", &mode, &err);
	if (ret >= 0 && mode == (mode_t)-1)
		ret = agent_fsconf_fail(&err, -EINVAL, &p.root, p.rel, "fs.chmod",
					"\"mode\" is required");
	if (ret >= 0)
		ret = agent_fsconf_chmod(&p.root, p.rel, mode, &err);
	answer(s, id, ret, &err);
}
