"""What the SDK and CLI tests share: a test case class that starts a real
supervisor and removes it (and its temporary folder) whatever happens, the
SDK imported from the source tree (sdk/python), the CLI's path, a tiny stdio
MCP server to configure in a sandbox, and sha256 of files. Stdlib only."""
import hashlib
import os
import shutil
import sys
import tempfile
import unittest

from sbx_harness import Supervisor, stop_clean

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.realpath(os.path.join(HERE, "..", ".."))
SDK = os.path.join(ROOT, "sdk", "python")
CLI = os.path.join(ROOT, "cli", "sbx")
sys.path.insert(0, SDK)

# A stdio MCP server (MCP over newline-delimited JSON-RPC) for the sandbox:
# initialize, tools/list, and an "echo" tool that first sends a log
# notification (it rides on the request's SSE stream) and then answers; a
# "ready" log notification once initialized (on the session's GET stream).
MCP_ECHO = r"""
import json, sys
def out(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    meth, mid = m.get("method"), m.get("id")
    if meth == "initialize":
        out({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": m["params"]["protocolVersion"],
             "capabilities": {"tools": {}, "logging": {}}, "serverInfo": {"name": "echo", "version": "1"}}})
    elif meth == "tools/list":
        out({"jsonrpc": "2.0", "id": mid, "result": {"tools": [{"name": "echo", "description": "echo",
             "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}})
    elif meth == "tools/call":
        t = m["params"]["arguments"]["text"]
        out({"jsonrpc": "2.0", "method": "notifications/message",
             "params": {"level": "info", "data": "echoing " + t}})
        out({"jsonrpc": "2.0", "id": mid, "result": {"content": [{"type": "text", "text": "echo: " + t}]}})
    elif meth == "notifications/initialized":
        # Asked by nobody: it reaches the client on the session's GET stream.
        out({"jsonrpc": "2.0", "method": "notifications/message",
             "params": {"level": "info", "data": "ready"}})
    elif mid is not None and meth is not None:
        out({"jsonrpc": "2.0", "id": mid, "result": {}})
"""
MCP_CONFIG = {"servers": {"echo": {"command": "python3", "args": ["/workspace/mcp_echo.py"]}}}


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for piece in iter(lambda: f.read(1 << 20), b""):
            h.update(piece)
    return h.hexdigest()


def random_file(path, mib):
    with open(path, "wb") as f:
        for _ in range(mib):
            f.write(os.urandom(1 << 20))
    return sha256_file(path)


class SupervisorCase(unittest.TestCase):
    """One supervisor (pool of 2) for the class: `sup`, `tmp` (a folder of
    the test's), `env` (SBX_URL, SBX_TOKEN and a config file that does not
    exist). Subclasses make what they need in prepare() and remove it in
    release(); the supervisor must then stop clean."""

    @classmethod
    def prepare(cls):
        pass

    @classmethod
    def release(cls):
        pass

    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(os.environ.get("SBX_SUPERVISOR"), os.environ.get("SBX_AGENT"), pool_size=2)
        # secrets kept, their key beside the state folder
        cls.sup.extra = ["--secrets-key", os.path.join(cls.sup.root, "secrets.key")]
        cls.tmp = tempfile.mkdtemp(prefix="sbx-clients-")
        try:
            cls.sup.start()
            cls.url = "http://127.0.0.1:%d" % cls.sup.port
            cls.env = dict(os.environ, SBX_URL=cls.url, SBX_TOKEN=cls.sup.token,
                           SBX_CONFIG=os.path.join(cls.tmp, "none.json"))
            cls.env.pop("PYTHONPATH", None)
            cls.prepare()
        except BaseException:
            cls.sup.cleanup()
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise

    @classmethod
    def tearDownClass(cls):
        try:
            cls.release()
            stop_clean(cls.sup)
        finally:
            cls.sup.cleanup()
            shutil.rmtree(cls.tmp, ignore_errors=True)
