"""sbx: the Python SDK of the sbx sandbox supervisor (stdlib only).

    from sbx import Sandbox
    with Sandbox.create(image="host", timeout=600) as sb:
        r = sb.run("echo hi")
        print(r.exit_code, r.stdout)
    with Sandbox.create(image="sbx/code-interpreter") as sb:
        print(sb.run_code("import pandas as pd; pd.DataFrame({'a': [1]})").result.html)

See sdk/python/README.md; the API is node-supervisor/API.md."""
from .errors import (AgentError, ApiError, BadArchive, BadGateway, BadRequest, Conflict, ContextDied,
                     Exists, Forbidden, Internal, MethodNotAllowed, NoSpace, NotFound, Paused,
                     PermissionDenied, ProtocolError, QuotaExceeded, RangeNotSatisfiable,
                     SbxError, Timeout, TooLarge, Unauthorized, Unavailable, Unimplemented,
                     UnsupportedImage, UnsupportedMediaType, VolumeBusy)
from .resources import Image, Secret, Snapshot, Volume, pools, set_pool
from .contexts import Context, Contexts, Execution, Result
from .sandbox import ExecResult, Files, Ports, Processes, Sandbox
from ._http import Client

__version__ = "0.2.0"

__all__ = [
    "Sandbox", "ExecResult", "Files", "Processes", "Ports", "Client",
    "Contexts", "Context", "Execution", "Result", "ContextDied",
    "Snapshot", "Volume", "Secret", "Image", "pools", "set_pool",
    "SbxError", "ApiError", "BadRequest", "Unauthorized", "Forbidden", "PermissionDenied",
    "NotFound", "MethodNotAllowed", "Timeout", "Conflict", "Exists", "TooLarge",
    "RangeNotSatisfiable", "UnsupportedMediaType", "QuotaExceeded", "Internal",
    "BadGateway", "AgentError", "Unavailable", "NoSpace", "ProtocolError",
    "Paused", "VolumeBusy", "BadArchive", "UnsupportedImage", "Unimplemented",
]
