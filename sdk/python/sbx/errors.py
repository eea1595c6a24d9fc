"""Typed exceptions for the API's errors: one class per error `code` of
API.md's table, chosen from the JSON error body (`{"error":{"code",
"message"[,"path"]}}`) and, when a body has no code, from the HTTP status.
This module only names errors; it does no I/O."""


class SbxError(Exception):
    """Base of every error this SDK raises on purpose."""


class ApiError(SbxError):
    """The API answered with an error. `status` the HTTP status, `code` the
    body's error code (or None), `message` its message, `path` the file
    path a file error names (or None), `body` the parsed body."""

    def __init__(self, status, code, message, path=None, body=None):
        self.status = status
        self.code = code
        self.message = message
        self.path = path
        self.body = body
        text = "%s %s: %s" % (status, code or "error", message)
        if path is not None:
            text += " (path %s)" % path
        super().__init__(text)


class BadRequest(ApiError):
    """400: malformed request, bad field, bad image (`bad_image`)."""


class Unauthorized(ApiError):
    """401: no or wrong token."""


class Forbidden(ApiError):
    """403 `forbidden`: the supervisor's policy refuses (a path outside the
    tenant's roots, root without allow_root, an image not allowed)."""


class PermissionDenied(Forbidden):
    """403 `permission_denied`: the sandbox (its kernel or agent) refused."""


class NotFound(ApiError):
    """404: unknown sandbox, process, file or route."""


class MethodNotAllowed(ApiError):
    """405."""


class Timeout(ApiError):
    """408 `request_timeout`, 504 `agent_timeout` / `timeout`."""


class Conflict(ApiError):
    """409 `conflict`: the sandbox is being destroyed, or similar."""


class Exists(Conflict):
    """409 `exists`: the target exists (move, mkdir, overwrite=0, a second
    terminal session)."""


class Paused(Conflict):
    """409 `paused`: exec, files, processes, ports or MCP on a paused
    sandbox (`resume()` it first)."""


class VolumeBusy(Conflict):
    """409 `volume_busy`: a volume mounted in a way that excludes the
    request (one writer or many readers), or deleted while mounted."""


class ContextDied(Conflict):
    """409 `context_died`: a code context's interpreter ended (killed for
    the sandbox's memory limit, exited, crashed; the message says which):
    `restart()` it."""


class TooLarge(ApiError):
    """413 / 431 `too_large`."""


class RangeNotSatisfiable(ApiError):
    """416."""


class UnsupportedMediaType(ApiError):
    """415."""


class UnsupportedImage(ApiError):
    """422 `unsupported_image`: the sandbox's image cannot do it (a code
    context in an image without sbx's context driver: use
    sbx/code-interpreter)."""


class BadArchive(ApiError):
    """422 `bad_archive`: a restore whose snapshot archive is refused
    (corrupt or hostile; the message names the member)."""


class QuotaExceeded(ApiError):
    """429 `quota_exceeded`: a create over the tenant's quota."""


class Internal(ApiError):
    """500 `internal`."""


class Unimplemented(ApiError):
    """501 `not_implemented`: a call sbx does not serve (the OpenSandbox
    layer's few)."""


class BadGateway(ApiError):
    """502 `port_closed` / `bad_gateway` / `pull_failed`."""


class AgentError(BadGateway):
    """502 `agent_error`: the sandbox's agent broke its promises; the
    sandbox is failed and should be deleted."""


class Unavailable(ApiError):
    """503 `unavailable` / `shutting_down`: try again later."""


class NoSpace(ApiError):
    """507 `no_space`: the sandbox's file system is full."""


class ProtocolError(SbxError):
    """The server's answer could not be understood (a stream cut short, a
    WebSocket frame out of the protocol)."""


_BY_CODE = {
    "bad_request": BadRequest, "bad_image": BadRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden, "permission_denied": PermissionDenied,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "request_timeout": Timeout, "agent_timeout": Timeout, "timeout": Timeout,
    "conflict": Conflict, "exists": Exists, "context_died": ContextDied, "paused": Paused, "volume_busy": VolumeBusy,
    "bad_archive": BadArchive, "unsupported_image": UnsupportedImage, "not_implemented": Unimplemented,
    "too_large": TooLarge,
    "range_not_satisfiable": RangeNotSatisfiable,
    "unsupported_media_type": UnsupportedMediaType,
    "quota_exceeded": QuotaExceeded,
    "internal": Internal,
    "agent_error": AgentError,
    "port_closed": BadGateway, "bad_gateway": BadGateway, "pull_failed": BadGateway,
    "unavailable": Unavailable, "shutting_down": Unavailable,
    "no_space": NoSpace,
}

_BY_STATUS = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound,
    405: MethodNotAllowed, 408: Timeout, 409: Conflict, 413: TooLarge,
    415: UnsupportedMediaType, 416: RangeNotSatisfiable, 422: BadArchive, 429: QuotaExceeded,
    431: TooLarge, 500: Internal, 501: Unimplemented, 502: BadGateway, 503: Unavailable,
    504: Timeout, 507: NoSpace,
}


def error_from(status, body):
    """The exception for an error answer: `body` the parsed JSON (or raw
    bytes, or None)."""
    code = message = path = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        err = body["error"]
        code = err.get("code") if isinstance(err.get("code"), str) else None
        message = err.get("message")
        path = err.get("path")
    if message is None:
        if isinstance(body, (bytes, bytearray)):
            message = bytes(body[:200]).decode("utf-8", "replace")
        else:
            message = "HTTP %d" % status
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status, ApiError)
    return cls(status, code, message, path, body)
