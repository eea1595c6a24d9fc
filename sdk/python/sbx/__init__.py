"""sbx: the Python SDK of the sbx sandbox supervisor (stdlib only).

    from sbx import Sandbox
    with Sandbox.create(image="host", timeout=600) as sb:
        r = sb.run("echo hi")
        print(r.exit_code, r.stdout)

See sdk/python/README.md; the API is node-supervisor/API.md."""
from .errors import (AgentError, ApiError, BadArchive, BadGateway, BadRequest, Conflict,
                     Exists, Forbidden, Internal, MethodNotAllowed, NoSpace, NotFound, Paused,
                     PermissionDenied, ProtocolError, QuotaExceeded, RangeNotSatisfiable,
                     SbxError, Timeout, TooLarge, Unauthorized, Unavailable, Unimplemented,
                     UnsupportedMediaType, VolumeBusy)
from .resources import Image, Secret, Snapshot, Volume, pools, set_pool
from .sandbox import ExecResult, Files, Ports, Processes, Sandbox
from ._http import Client

__version__ = "0.2.0"

__all__ = [
    "Sandbox", "ExecResult", "Files", "Processes", "Ports", "Client",
    "Snapshot", "Volume", "Secret", "Image", "pools", "set_pool",
    "SbxError", "ApiError", "BadRequest", "Unauthorized", "Forbidden", "PermissionDenied",
    "NotFound", "MethodNotAllowed", "Timeout", "Conflict", "Exists", "TooLarge",
    "RangeNotSatisfiable", "UnsupportedMediaType", "QuotaExceeded", "Internal",
    "BadGateway", "AgentError", "Unavailable", "NoSpace", "ProtocolError",
    "Paused", "VolumeBusy", "BadArchive", "Unimplemented",
]
