/* op_fs_util: see op_fs_util.h. */
#include "op_fs_util.h"

#include <errno.h>
#include <string.h>

#include "log.h"
#include "session.h"

/* Absent and nil both mean "not given". */
static const msgpack_object *arg(const msgpack_object *args, const char *key)
{
	const msgpack_object *o;

	if (!args || args->type != MSGPACK_OBJECT_MAP)
		return NULL;
	o = sbx_proto_map_get(args, key);
	return o && o->type != MSGPACK_OBJECT_NIL ? o : NULL;
}

int agent_fs_path_get(const msgpack_object *args, const char *root_key, const char *path_key,
		      const char *what, agent_fs_path *p, sbx_err *err)
{
	const msgpack_object *r = arg(args, root_key);
	const msgpack_object *o = arg(args, path_key);
	char root[PATH_MAX];
	int ret;

	p->root.fd = -1;
	p->rel[0] = '\0';
	if (!r || r->type != MSGPACK_OBJECT_STR)
		return sbx_err_set(err, -EINVAL, "%s: \"%s\" must be a string (an allowed root)",
				   what, root_key);
	if (r->via.str.size == 0 || r->via.str.size >= sizeof(root) ||
	    memchr(r->via.str.ptr, '\0', r->via.str.size))
		return sbx_err_set(err, -EINVAL, "%s: \"%s\" is empty, too long or holds a NUL byte",
				   what, root_key);
	memcpy(root, r->via.str.ptr, r->via.str.size);
	root[r->via.str.size] = '\0';
	if (!o || o->type != MSGPACK_OBJECT_STR)
		return sbx_err_set(err, -EINVAL, "%s: \"%s\" must be a string (\"\" is the root)",
				   what, path_key);
	ret = agent_fsconf_check_rel(o->via.str.ptr, o->via.str.size, err);
	if (ret < 0)
		return sbx_err_wrap(err, "%s %s", what, root);
	memcpy(p->rel, o->via.str.ptr, o->via.str.size);
	p->rel[o->via.str.size] = '\0';
	ret = agent_fsconf_root_open(&p->root, root, err);
	if (ret < 0)
		return sbx_err_wrap(err, "%s", what);
	return 0;
}

void agent_fs_path_close(agent_fs_path *p)
{
	agent_fsconf_root_close(&p->root);
}

int agent_fs_get_bool(const msgpack_object *args, const char *key, bool *v, sbx_err *err)
{
	const msgpack_object *o = arg(args, key);

	if (!o)
		return 0;
	if (o->type != MSGPACK_OBJECT_BOOLEAN)
		return sbx_err_set(err, -EINVAL, "\"%s\" must be a boolean", key);
	*v = o->via.boolean;
	return 0;
}

int agent_fs_get_uint(const msgpack_object *args, const char *key, uint64_t max, uint64_t *v,
		      sbx_err *err)
{
	const msgpack_object *o = arg(args, key);

	if (!o)
		return 0;
	if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
		return sbx_err_set(err, -EINVAL, "\"%s\" must be a non-negative integer", key);
	if (o->via.u64 > max)
		return sbx_err_set(err, -EINVAL, "\"%s\" is %llu, at most %llu allowed", key,
				   (unsigned long long)o->via.u64, (unsigned long long)max);
	*v = o->via.u64;
	return 0;
}

int agent_fs_get_mode(const msgpack_object *args, const char *key, mode_t *v, sbx_err *err)
{
	uint64_t m = *v;
	int ret = agent_fs_get_uint(args, key, 07777, &m, err);

	if (ret < 0)
		return ret;
	*v = (mode_t)m;
	return 0;
}

sbx_proto_code agent_fs_code(int neg_errno)
{
	switch (-neg_errno) {
	case ENOENT: case ENOTDIR:
		return SBX_PROTO_E_NOT_FOUND;
	case EACCES: case EPERM: case EROFS: case EXDEV: case ELOOP: case EBUSY: case EMLINK:
		return SBX_PROTO_E_PERMISSION;
	case EEXIST: case ENOTEMPTY:
		return SBX_PROTO_E_EXISTS;
	case ENOSPC: case EDQUOT:
		return SBX_PROTO_E_NO_SPACE;
	case EFBIG:
		return SBX_PROTO_E_TOO_LARGE;
	case EINVAL: case EISDIR: case ENAMETOOLONG:
		return SBX_PROTO_E_BAD_REQUEST;
	case ECANCELED:
		return SBX_PROTO_E_CANCELLED;
	case ENOSYS:
		return SBX_PROTO_E_UNSUPPORTED;
	case EAGAIN: /* a bound of the agent's (fs.watch streams): try later */
		return SBX_PROTO_E_TOO_MANY_STREAMS;
	default:
		return SBX_PROTO_E_INTERNAL;
	}
}

const char *agent_fs_type_name(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "file";
	case S_IFDIR: return "dir";
	case S_IFLNK: return "symlink";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	case S_IFCHR: return "char";
	case S_IFBLK: return "block";
	default: return "other";
	}
}

void agent_fs_pack_stat(msgpack_packer *pk, const struct stat *st)
{
	sbx_proto_pack_str(pk, "type");
	sbx_proto_pack_str(pk, agent_fs_type_name(st->st_mode));
	sbx_proto_pack_str(pk, "size");
	msgpack_pack_uint64(pk, (uint64_t)st->st_size);
	sbx_proto_pack_str(pk, "mode");
	msgpack_pack_uint32(pk, st->st_mode & 07777);
	sbx_proto_pack_str(pk, "mtime_ns");
	msgpack_pack_int64(pk, (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec);
	sbx_proto_pack_str(pk, "uid");
	msgpack_pack_uint32(pk, st->st_uid);
	sbx_proto_pack_str(pk, "gid");
	msgpack_pack_uint32(pk, st->st_gid);
	sbx_proto_pack_str(pk, "nlink");
	msgpack_pack_uint64(pk, st->st_nlink);
	sbx_proto_pack_str(pk, "ino");
	msgpack_pack_uint64(pk, st->st_ino);
}

void agent_fs_end(agent_session *s, uint64_t id, const msgpack_sbuffer *map)
{
	sbx_err err = { 0 };

	if (sbx_proto_conn_end(agent_session_conn(s), id, map ? map->data : NULL,
			       map ? map->size : 0, &err) < 0)
		agent_log_debug("answer stream %llu: %s", (unsigned long long)id, err.msg);
}

void agent_fs_fail(agent_session *s, uint64_t id, int neg_errno, const char *msg)
{
	sbx_err err = { 0 };

	if (sbx_proto_conn_fail(agent_session_conn(s), id, agent_fs_code(neg_errno), msg, &err) < 0)
		agent_log_debug("answer stream %llu: %s", (unsigned long long)id, err.msg);
}
