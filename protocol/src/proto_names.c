/* Wire names of frame kinds and error codes, and errno mapping. */
#include <errno.h>
#include <string.h>

#include "sbx/proto.h"

static const char *const kind_names[] = {
	[SBX_PROTO_HELLO] = "hello", [SBX_PROTO_REQ] = "req",
	[SBX_PROTO_DATA] = "data",   [SBX_PROTO_EVENT] = "event",
	[SBX_PROTO_CREDIT] = "credit", [SBX_PROTO_CTL] = "ctl",
	[SBX_PROTO_CANCEL] = "cancel", [SBX_PROTO_END] = "end",
	[SBX_PROTO_ERR] = "err",
};

static const char *const code_names[] = {
	[SBX_PROTO_E_BAD_FRAME] = "bad_frame",
	[SBX_PROTO_E_BAD_REQUEST] = "bad_request",
	[SBX_PROTO_E_UNKNOWN_OP] = "unknown_op",
	[SBX_PROTO_E_UNSUPPORTED] = "unsupported",
	[SBX_PROTO_E_TOO_LARGE] = "too_large",
	[SBX_PROTO_E_TOO_MANY_STREAMS] = "too_many_streams",
	[SBX_PROTO_E_FLOW_CONTROL] = "flow_control",
	[SBX_PROTO_E_PROTOCOL] = "protocol",
	[SBX_PROTO_E_CANCELLED] = "cancelled",
	[SBX_PROTO_E_NOT_FOUND] = "not_found",
	[SBX_PROTO_E_PERMISSION] = "permission_denied",
	[SBX_PROTO_E_EXISTS] = "exists",
	[SBX_PROTO_E_NO_SPACE] = "no_space",
	[SBX_PROTO_E_EXEC_FAILED] = "exec_failed",
	[SBX_PROTO_E_TIMEOUT] = "timeout",
	[SBX_PROTO_E_SHUTTING_DOWN] = "shutting_down",
	[SBX_PROTO_E_INTERNAL] = "internal",
	[SBX_PROTO_E_BAD_OUTPUT] = "bad_output",
	[SBX_PROTO_E_CRASHED] = "crashed",
};

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const char *name_at(const char *const *names, size_t n, size_t i, const char *dflt)
{
	return i < n && names[i] ? names[i] : dflt;
}

static size_t index_of(const char *const *names, size_t n, const char *name, size_t len)
{
	for (size_t i = 1; i < n; i++)
		if (names[i] && strlen(names[i]) == len && memcmp(names[i], name, len) == 0)
			return i;
	return 0;
}

const char *sbx_proto_kind_name(sbx_proto_kind kind)
{
	return name_at(kind_names, NELEM(kind_names), (size_t)kind, "unknown");
}

sbx_proto_kind sbx_proto_kind_from_name(const char *name, size_t len)
{
	return (sbx_proto_kind)index_of(kind_names, NELEM(kind_names), name, len);
}

const char *sbx_proto_code_name(sbx_proto_code code)
{
	return name_at(code_names, NELEM(code_names), (size_t)code, "internal");
}

sbx_proto_code sbx_proto_code_from_name(const char *name, size_t len)
{
	return (sbx_proto_code)index_of(code_names, NELEM(code_names), name, len);
}

sbx_proto_code sbx_proto_code_from_errno(int neg_errno)
{
	switch (-neg_errno) {
	case ENOENT: case ENOTDIR: case ESRCH: return SBX_PROTO_E_NOT_FOUND;
	case EACCES: case EPERM: case EROFS: return SBX_PROTO_E_PERMISSION;
	case EEXIST: case ENOTEMPTY: return SBX_PROTO_E_EXISTS;
	case ENOSPC: case EDQUOT: return SBX_PROTO_E_NO_SPACE;
	case EMSGSIZE: case E2BIG: case EFBIG: case ENAMETOOLONG: return SBX_PROTO_E_TOO_LARGE;
	case ETIMEDOUT: return SBX_PROTO_E_TIMEOUT;
	case ECANCELED: return SBX_PROTO_E_CANCELLED;
	case EINVAL: return SBX_PROTO_E_BAD_REQUEST;
	case EBADMSG: return SBX_PROTO_E_BAD_FRAME;
	case EBUSY: return SBX_PROTO_E_TOO_MANY_STREAMS;
	case ENOSYS: case EOPNOTSUPP: case EPROTONOSUPPORT: return SBX_PROTO_E_UNSUPPORTED;
	case EPROTO: return SBX_PROTO_E_PROTOCOL;
	case ESHUTDOWN: return SBX_PROTO_E_SHUTTING_DOWN;
	case ENOEXEC: return SBX_PROTO_E_EXEC_FAILED;
	default: return SBX_PROTO_E_INTERNAL;
	}
}
