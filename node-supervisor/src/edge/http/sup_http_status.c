/* The one errno -> HTTP status table. Every route family answers an errno
 * the same way; a family's own row (family set) comes first for it. The
 * convention behind it: EPERM is the supervisor's own refusal (a policy, a
 * root exec), EACCES the sandbox's (its kernel or agent); ENAMETOOLONG is a
 * bad request everywhere. Three waits: ETIME is the agent's (it let the
 * supervisor's deadline pass: 504 agent_timeout), ENOLINK the client's (its
 * body went quiet: 408), ETIMEDOUT any other (504 timeout). */
#include "sup_http.h"

#include <errno.h>
#include <string.h>

static const struct status_row {
	int neg_errno;
	int status;
	const char *code;
	const char *family; /* NULL: every family */
} rows[] = {
	/* images: an archive or pulled image refused, a body of another kind,
	 * a pull that failed (its source's fault, not the client's) */
	{ -EBADMSG, 400, "bad_image", "images" },
	{ -EPROTONOSUPPORT, 415, "unsupported_media_type", "images" },
	{ -EREMOTEIO, 502, "pull_failed", "images" },
	/* relay: the node holding the sandbox cannot be reached (refused,
	 * no connection in time, gone before its answer); a relayed request
	 * that would be relayed again (-ENETUNREACH: -EHOSTUNREACH is the
	 * snapshot store's, below) */
	{ -ENETUNREACH, 502, "node_unreachable", NULL },
	{ -ELOOP, 508, "loop_detected", NULL },
	/* a peer's node token missing, or not authenticated by the cluster's
	 * API server (its TokenReview) */
	{ -ENOKEY, 401, "unauthorized", NULL },
	{ -EINVAL, 400, "bad_request", NULL },
	{ -ENAMETOOLONG, 400, "bad_request", NULL },
	{ -ENODATA, 400, "bad_request", NULL }, /* a request body cut short */
	{ -EPERM, 403, "forbidden", NULL },
	{ -EACCES, 403, "permission_denied", NULL },
	{ -ENOENT, 404, "not_found", NULL },
	{ -ENOLINK, 408, "request_timeout", NULL },
	{ -EBUSY, 409, "conflict", NULL },
	{ -EHOSTDOWN, 409, "paused", NULL }, /* the sandbox is paused: resume it first */
	{ -EEXIST, 409, "exists", NULL },
	{ -ETXTBSY, 409, "volume_busy", NULL }, /* a volume in use (sup_volumes.h) */
	{ -EOWNERDEAD, 409, "context_died", NULL }, /* a code context's interpreter ended (sup_ctx.h) */
	{ -E2BIG, 413, "too_large", NULL },
	{ -EMSGSIZE, 413, "too_large", NULL },
	{ -ERANGE, 416, "range_not_satisfiable", NULL },
	{ -EDQUOT, 429, "quota_exceeded", NULL },
	{ -ECANCELED, 499, "cancelled", NULL },
	{ -ENOSYS, 501, "not_implemented", NULL },
	{ -EHOSTDOWN, 502, "paused", "e2b" },         /* their SDK: 502 is "not running" */
	{ -ECONNREFUSED, 502, "port_closed", "ports" }, /* nothing listens on the port */
	{ -EBADMSG, 502, "bad_gateway", "ports" },     /* the server's answer is unusable */
	{ -ECONNRESET, 502, "agent_error", NULL },
	{ -ECONNREFUSED, 502, "agent_error", NULL },
	{ -ECONNABORTED, 502, "agent_error", NULL },
	{ -EPIPE, 502, "agent_error", NULL },
	{ -EPROTO, 502, "agent_error", NULL },
	{ -EBADMSG, 502, "agent_error", NULL },
	{ -EAGAIN, 503, "unavailable", NULL },
	{ -ESHUTDOWN, 503, "shutting_down", NULL },
	{ -ETIMEDOUT, 504, "timeout", NULL },
	{ -ETIME, 504, "agent_timeout", NULL },
	{ -ENOSPC, 507, "no_space", NULL },
	/* the snapshot store (sup_snap_store.h): it cannot be reached, or it
	 * refused or failed */
	{ -EHOSTUNREACH, 503, "store_unavailable", NULL },
	{ -EBADE, 502, "store_error", NULL },
	/* a snapshot archive refused: corrupt or hostile */
	{ -EILSEQ, 422, "bad_archive", NULL },
	/* the sandbox's image cannot do it: a code context in an image without
	 * the context driver (sup_ctx.h) */
	{ -ENOEXEC, 422, "unsupported_image", NULL },
};

int sup_http_status(const char *family, int neg_errno, const char **code)
{
	const struct status_row *shared = NULL;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct status_row *r = &rows[i];
		if (r->neg_errno != neg_errno)
			continue;
		if (r->family && family && strcmp(r->family, family) == 0) {
			*code = r->code;
			return r->status;
		}
		if (!r->family && !shared)
			shared = r;
	}
	*code = shared ? shared->code : "internal";
	return shared ? shared->status : 500;
}
