"""sbx's own operations as an MCP server at /v1/mcp, through a real
sandbox-supervisor (two tenants), real runc sandboxes and the real agent,
with real clients from npm (tests/mcp-servers, installed by
scripts/install-mcp-servers): the MCP SDK's Client +
StreamableHTTPClientTransport (sbx_mcp_bridge.mjs, driven line by line) and
@modelcontextprotocol/inspector-cli. Every tool is called; a tool's
failures (an unknown sandbox, a forbidden path, another tenant's sandbox)
arrive as results with isError and the API's code and message, never as
transport errors; each tool's inputSchema and outputSchema are checked
against ones built here from node-supervisor/openapi.json by an independent
reading of it, and the SDK client (which lists the tools first) checks
every result's structuredContent against the tool's outputSchema, so a
result that does not conform fails the call. Raw
HTTP from Python where the point is the wire (sessions, versions, Origin,
bad JSON-RPC). The supervisor's SIGINT stop destroys every sandbox made;
its state folder (snapshots too) is removed at the end, also when a test
fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import base64
import copy
import hashlib
import http.client
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, mcp_inspector, mcp_npm, stop_clean  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
HERE = os.path.dirname(os.path.abspath(__file__))
BRIDGE = mcp_npm("sbx_mcp_bridge.mjs")
OPENAPI = os.path.join(HERE, "..", "..", "node-supervisor", "openapi.json")
TOK = {name: secrets.token_hex(32) for name in ("admin", "alice", "bob")}

# The tools and the operation each one is (the document's operationId),
# and the query parameter a tool does not offer.
TOOLS = {
    "create_sandbox": "createSandbox", "list_sandboxes": "listSandboxes",
    "delete_sandbox": "deleteSandbox", "run_command": "exec", "start_process": "startProcess",
    "read_process_output": "processOutput", "write_process_stdin": "processStdin",
    "kill_process": "killProcess", "read_file": "readFile",
    "write_file": "writeFile", "list_files": "list", "search_files": "search",
    "snapshot_sandbox": "snapshotSandbox", "run_code": "runCode",
}
OMIT = {"read_process_output": {"follow"}, "list_sandboxes": {"scope"}}
# The result schema (components/schemas) of a tool whose route answers no
# JSON; every other tool's is its operation's first 2xx JSON answer's.
OUT = {"delete_sandbox": "McpDeleted", "read_process_output": "McpProcessRead", "kill_process": "Process",
       "read_file": "McpFileRead"}
# The tools whose text is not their structuredContent's JSON but the output
# to read (each with a note where it was cut).
SHOWN = {"run_command", "read_process_output", "read_file", "run_code"}


def hash_token(tok):
    out = subprocess.run([SUP, "hash-token"], input=tok + "\n", capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def deref(doc, v, depth=0):
    """v with every $ref replaced by what it names (its siblings kept)."""
    assert depth < 40
    if isinstance(v, list):
        return [deref(doc, e, depth) for e in v]
    if not isinstance(v, dict):
        return v
    out = {}
    if "$ref" in v:
        t = doc
        for part in v["$ref"][2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            t = t[int(part)] if isinstance(t, list) else t[part]
        out = deref(doc, t, depth + 1)
    for k, e in v.items():
        if k != "$ref":
            out[k] = deref(doc, e, depth)
    return out


def find_op(doc, tool):
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and op.get("operationId") == TOOLS[tool]:
                return item, op
    raise AssertionError("no operation %s" % TOOLS[tool])


def expected_schema(doc, tool):
    """The inputSchema a tool must have, read from the document here: path
    and query parameters, then the JSON body's properties and required
    ($refs resolved), or content / content_b64 for a binary body."""
    item, op = find_op(doc, tool)
    props, req = {}, []
    for p in item.get("parameters", []) + op.get("parameters", []):
        p = deref(doc, p)
        if p["in"] not in ("path", "query") or p["name"] in OMIT.get(tool, ()):
            continue
        s = copy.deepcopy(p["schema"])
        if "description" in p and "description" not in s:
            s["description"] = p["description"]
        props[p["name"]] = s
        if p.get("required"):
            req.append(p["name"])
    content = op.get("requestBody", {}).get("content", {})
    if "application/octet-stream" in content:
        props["content"] = {"type": "string", "description": "the request body (the file's bytes) as text"}
        props["content_b64"] = {"type": "string", "contentEncoding": "base64",
                                "description": "the request body as base64 (instead of content)"}
    elif "application/json" in content:
        body = deref(doc, content["application/json"]["schema"])
        for k, v in body.get("properties", {}).items():
            assert k not in props, (tool, k)
            props[k] = v
        req += body.get("required", [])
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    if req:
        schema["required"] = req
    return schema


def expected_output(doc, tool):
    """The outputSchema a tool must have: the schema OUT names, else the
    operation's first 2xx answer with JSON content ($refs resolved)."""
    if tool in OUT:
        return deref(doc, doc["components"]["schemas"][OUT[tool]])
    _, op = find_op(doc, tool)
    for status in sorted(k for k in op["responses"] if k.startswith("2")):
        r = deref(doc, op["responses"][status])
        if "application/json" in r.get("content", {}):
            return r["content"]["application/json"]["schema"]
    raise AssertionError("%s answers no JSON and has no OUT entry" % tool)


class Bridge:
    """One SDK client session on /v1/mcp (sbx_mcp_bridge.mjs)."""

    def __init__(self, url, token):
        self.p = subprocess.Popen(["node", BRIDGE, url, token], cwd=mcp_npm(), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        first = self.read()
        assert first.get("ok") == "connected", first

    def read(self):
        line = self.p.stdout.readline()
        assert line, "the SDK client ended"
        return json.loads(line)

    def ask(self, req):
        self.p.stdin.write(json.dumps(req) + "\n")
        self.p.stdin.flush()
        return self.read()

    def call(self, tool, **args):
        out = self.ask({"op": "call", "name": tool, "args": args})
        assert "ok" in out, "transport/JSON-RPC failure for %s: %r" % (tool, out)
        return out["ok"]

    def ok(self, tool, **args):
        """A successful call: its structuredContent (which the SDK checked
        against the tool's outputSchema) and, but for SHOWN, that as text."""
        r = self.call(tool, **args)
        assert not r.get("isError"), (tool, r)
        assert isinstance(r.get("structuredContent"), dict), (tool, r)
        if tool not in SHOWN:
            assert js_numbers(json.loads(text(r))) == js_numbers(r["structuredContent"]), (tool, r)
        return r

    def close(self):
        if self.p.poll() is None:
            try:
                self.ask({"op": "close"})
            finally:
                self.p.stdin.close()
                self.p.wait(timeout=30)
        self.p.stdout.close()


def js_numbers(v):
    """v with integers beyond 2^53 as the doubles JavaScript reads them as
    (the bridge's JSON.parse; mtime_ns is one)."""
    if isinstance(v, dict):
        return {k: js_numbers(e) for k, e in v.items()}
    if isinstance(v, list):
        return [js_numbers(e) for e in v]
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2 ** 53:
        return float(v)
    return v


def text(r):
    return "\n".join(c["text"] for c in r["content"] if c["type"] == "text")


class McpApi(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sbx-it-mcpapi-")
        cls.addClassCleanup(shutil.rmtree, cls.dir, True)
        tenants = {"tenants": {name: {"tokens": [hash_token(tok)]} for name, tok in TOK.items()}}
        path = os.path.join(cls.dir, "tenants.json")
        with open(path, "w") as f:
            json.dump(tenants, f)
        cls.sup = Supervisor(SUP, AGENT, pool_size=1, token=TOK["admin"], extra=[
            "--tenants", path, "--mcp-allow-origin", "http://allowed.test"])
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.url = "http://127.0.0.1:%d/v1/mcp" % cls.sup.port
        with open(OPENAPI) as f:
            cls.doc = json.load(f)

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def bridge(self, who):
        b = Bridge(self.url, TOK[who])
        self.addCleanup(b.close)
        return b

    def sandbox(self, b, **args):
        r = b.ok("create_sandbox", **args)
        sid = r["structuredContent"]["id"]
        self.assertEqual(json.loads(text(r))["id"], sid)
        return sid

    def rpc(self, body, who="alice", sid=None, headers=None):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
             "Authorization": "Bearer " + TOK[who]}
        if sid:
            h["Mcp-Session-Id"] = sid
            h["MCP-Protocol-Version"] = "2025-11-25"
        h.update(headers or {})
        c = http.client.HTTPConnection("127.0.0.1", self.sup.port, timeout=60)
        try:
            c.request("POST", "/v1/mcp", body=body if isinstance(body, bytes) else json.dumps(body).encode(),
                      headers=h)
            resp = c.getresponse()
            data = resp.read()
            hdrs = {k.lower(): v for k, v in resp.getheaders()}
        finally:
            c.close()
        if hdrs.get("content-type", "").startswith("text/event-stream"):
            data = [line[5:].strip() for line in data.decode().splitlines() if line.startswith("data:")][-1]
        return resp.status, hdrs, json.loads(data) if data else None

    def init(self, who="alice", version="2025-11-25"):
        st, h, body = self.rpc({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}},
            who=who)
        self.assertEqual(st, 200, body)
        return h["mcp-session-id"], body["result"]

    # ---- the schemas ----
    def test_schemas_are_openapis(self):
        b = self.bridge("alice")
        tools = {t["name"]: t for t in b.ask({"op": "list"})["ok"]["tools"]}
        self.assertEqual(set(tools), set(TOOLS))
        for name in TOOLS:
            self.assertEqual(tools[name]["inputSchema"], expected_schema(self.doc, name), name)
            self.assertEqual(tools[name]["outputSchema"], expected_output(self.doc, name), name)
            self.assertEqual(tools[name]["outputSchema"]["type"], "object", name)
            self.assertTrue(tools[name]["description"])
            # The SDK checks each result with it, an error's too: an error
            # object is no result (so errors carry no structuredContent).
            chk = b.ask({"op": "check", "name": name,
                         "value": {"error": {"code": "not_found", "message": "no such thing"}}})["ok"]
            self.assertEqual(chk["valid"], False, (name, chk))
        # The document served is the one read here.
        st, _, served = self.sup.request("GET", "/v1/openapi.json")
        self.assertEqual((st, served), (200, self.doc))
        self.assertIn("cmd", tools["run_command"]["inputSchema"]["properties"])
        self.assertEqual(tools["read_file"]["inputSchema"]["required"], ["id", "path"])

    # ---- every tool, through the SDK ----
    def test_every_tool(self):
        b = self.bridge("alice")
        sid = self.sandbox(b, timeout=600, env={"GREETING": "hi"}, resources={"memory": "256M", "pids": 128})
        listed = b.ok("list_sandboxes")["structuredContent"]["sandboxes"]
        self.assertIn(sid, [s["id"] for s in listed])
        self.assertEqual([s for s in listed if s["id"] == sid][0]["resources"]["pids"], 128)

        r = b.ok("run_command", id=sid, cmd="echo $GREETING; echo oops >&2; exit 3")
        self.assertEqual(r["structuredContent"]["exit_code"], 3)
        self.assertEqual(r["structuredContent"]["stdout"], "hi\n")
        self.assertEqual(r["structuredContent"]["stderr"], "oops\n")
        self.assertIn("exit code 3", text(r))
        r = b.ok("run_command", id=sid, argv=["sh", "-c", "head -c 200000 /dev/zero | tr '\\0' a"])
        self.assertEqual(r["structuredContent"]["exit_code"], 0)
        self.assertTrue(r["structuredContent"]["truncated"])
        self.assertEqual(len(r["structuredContent"]["stdout"]), 65536)
        self.assertIn("stdout truncated", text(r))

        r = b.ok("write_file", id=sid, path="/workspace/a/b.txt", content="hello mcp\n", parents="true")
        self.assertEqual(r["structuredContent"], {"path": "/workspace/a/b.txt", "size": 10})
        r = b.call("write_file", id=sid, path="/workspace/a/b.txt", content="x", overwrite="false")
        self.assertTrue(r["isError"], r)
        blob = bytes(range(256)) * 4
        r = b.ok("write_file", id=sid, path="/workspace/bin.dat", content_b64=base64.b64encode(blob).decode(),
                 mode="0600")
        self.assertEqual(r["structuredContent"]["size"], 1024)
        r = b.ok("read_file", id=sid, path="/workspace/a/b.txt")
        self.assertEqual(text(r), "hello mcp\n")
        self.assertEqual(r["structuredContent"]["content"], "hello mcp\n")
        r = b.ok("read_file", id=sid, path="/workspace/bin.dat")
        self.assertEqual(base64.b64decode(r["structuredContent"]["content_b64"]), blob)
        st, _, body = self.sup.exec(sid, cmd="stat -c %a /workspace/bin.dat && sha256sum /workspace/bin.dat")
        self.assertEqual(body["stdout"].split()[:2], ["600", hashlib.sha256(blob).hexdigest()])
        b.ok("run_command", id=sid, cmd="seq 1 30000 > /workspace/big.txt")
        r = b.ok("read_file", id=sid, path="/workspace/big.txt")
        self.assertTrue(r["structuredContent"]["truncated"])
        self.assertEqual(r["structuredContent"]["length"], 65536)
        self.assertIn("truncated: the file has", text(r))

        r = b.ok("list_files", id=sid, path="/workspace", depth=2)
        paths = {e["path"]: e["type"] for e in r["structuredContent"]["entries"]}
        self.assertEqual(paths.get("/workspace/a"), "dir")
        self.assertEqual(paths.get("/workspace/a/b.txt"), "file")
        r = b.ok("search_files", id=sid, path="/workspace", glob="*.txt")
        found = sorted(e["path"] for e in r["structuredContent"]["entries"])
        self.assertEqual(found, ["/workspace/a/b.txt", "/workspace/big.txt"])

        r = b.ok("start_process", id=sid, cmd="for i in 1 2 3; do echo line$i; sleep 0.2; done; exit 4",
                 tag="mcp")
        pid = r["structuredContent"]["pid"]
        self.assertEqual(r["structuredContent"]["tag"], "mcp")
        out, off, r = self.read_output(b, sid, pid, lambda out, st: st["state"] == "exited")
        self.assertEqual(out, "line1\nline2\nline3\n")
        self.assertEqual(r["structuredContent"]["exit_code"], 4)
        self.assertIn("exited with code 4", text(r))
        r = b.call("read_process_output", id=sid, pid=pid, offset=off + 100)
        self.assertTrue(r["isError"])
        self.assertIn("beyond the end", text(r))
        r = b.ok("start_process", id=sid, cmd="sleep 60 & sleep 60")
        pid = r["structuredContent"]["pid"]
        r = b.ok("kill_process", id=sid, pid=pid)
        self.assertEqual((r["structuredContent"]["state"], r["structuredContent"]["signal"]),
                         ("exited", "KILL"), r)
        r = b.call("kill_process", id=sid, pid=999999)
        self.assertTrue(r["isError"])
        self.assertIn("not_found", text(r))

        # stdin: cat gives back what it is written, and ends at eof.
        r = b.ok("start_process", id=sid, argv=["cat"], stdin=True)
        pid = r["structuredContent"]["pid"]
        r = b.ok("write_process_stdin", id=sid, pid=pid, content="hello stdin\n")
        self.assertEqual(r["structuredContent"], {"written": 12})
        out, off, r = self.read_output(b, sid, pid, lambda out, st: "\n" in out)
        self.assertEqual((out, r["structuredContent"]["state"]), ("hello stdin\n", "running"))
        tail = "bye \u00e9\n".encode()
        r = b.ok("write_process_stdin", id=sid, pid=pid, content_b64=base64.b64encode(tail).decode(), eof="true")
        self.assertEqual(r["structuredContent"], {"written": len(tail)})
        out, off, r = self.read_output(b, sid, pid, lambda out, st: st["state"] == "exited", off)
        self.assertEqual((out, r["structuredContent"]["exit_code"]), ("bye \u00e9\n", 0))
        r = b.call("write_process_stdin", id=sid, pid=pid, content="late")
        self.assertTrue(r["isError"], r)
        self.assertTrue(text(r).startswith("not_found (404): "), r)
        pid = b.ok("start_process", id=sid, cmd="sleep 60")["structuredContent"]["pid"]
        r = b.call("write_process_stdin", id=sid, pid=pid, content="x")
        self.assertTrue(text(r).startswith("bad_request (400): "), r)
        b.ok("kill_process", id=sid, pid=pid)

        r = b.ok("snapshot_sandbox", id=sid, name="from-mcp")
        snap = r["structuredContent"]
        self.assertEqual((snap["name"], snap["sandbox"], snap["tenant"]), ("from-mcp", sid, "alice"))
        sid2 = self.sandbox(b, snapshot=snap["id"])
        self.assertEqual(text(b.ok("read_file", id=sid2, path="/workspace/a/b.txt")), "hello mcp\n")

        for s in (sid, sid2):
            r = b.ok("delete_sandbox", id=s)
            self.assertEqual(r["structuredContent"], {"id": s, "deleted": True})
        listed = b.ok("list_sandboxes")["structuredContent"]["sandboxes"]
        self.assertFalse({sid, sid2} & {s["id"] for s in listed})
        st, _, _ = self.sup.request("DELETE", "/v1/snapshots/" + snap["id"])
        self.assertEqual(st, 204)

    def read_output(self, b, sid, pid, until, off=0):
        """read_process_output from off until until(output so far, the last
        result) holds (30 s at most): the output, next_offset, the result."""
        out = ""
        deadline = time.monotonic() + 30
        while True:
            r = b.ok("read_process_output", id=sid, pid=pid, offset=off)
            out += r["structuredContent"]["output"]
            off = r["structuredContent"]["next_offset"]
            if until(out, r["structuredContent"]) or time.monotonic() > deadline:
                return out, off, r
            time.sleep(0.1)

    # ---- errors are results ----
    def test_errors_are_tool_results(self):
        alice, bob = self.bridge("alice"), self.bridge("bob")
        sid = self.sandbox(alice)
        self.addCleanup(self.sup.request, "DELETE", "/v1/sandboxes/" + sid)

        def err(b, tool, **args):
            r = b.call(tool, **args)
            self.assertTrue(r.get("isError"), r)
            self.assertNotIn("structuredContent", r)
            m = re.fullmatch(r"([a-z_]+) \((\d{3})\): (.+)", text(r), re.S)
            self.assertTrue(m, r)
            return {"code": m.group(1), "status": int(m.group(2)), "message": m.group(3)}

        # run_code in an image without the context driver (the host's root;
        # it runs in sbx/code-interpreter: test_contexts.py)
        e = err(alice, "run_code", id=sid, ctx="python", code="1")
        self.assertEqual((e["code"], e["status"]), ("unsupported_image", 422), e)
        self.assertIn("sbx/code-interpreter", e["message"])
        unknown = err(alice, "run_command", id="no-such-sandbox", cmd="true")
        self.assertEqual(unknown["code"], "not_found")
        # Another tenant's sandbox is as unknown as a missing one.
        for name, args in (("run_command", {"cmd": "true"}), ("read_file", {"path": "/workspace/x"}),
                           ("delete_sandbox", {}), ("snapshot_sandbox", {}),
                           ("run_code", {"ctx": "python", "code": "1"})):
            e = err(bob, name, id=sid, **args)
            self.assertEqual(e["code"], "not_found", (name, e))
            self.assertNotIn("alice", e["message"])
        self.assertNotIn(sid, [s["id"] for s in bob.ok("list_sandboxes")["structuredContent"]["sandboxes"]])
        # The path policy: as the files API answers.
        e = err(alice, "read_file", id=sid, path="/etc/passwd")
        self.assertEqual(e["code"], "forbidden")
        st, _, body = self.sup.request("GET", "/v1/sandboxes/%s/files?path=/etc/passwd" % sid,
                                       token="Bearer " + TOK["alice"])
        self.assertEqual((st, body["error"]["code"]), (403, "forbidden"))
        self.assertEqual(err(alice, "write_file", id=sid, path="/etc/x", content="x")["code"], "forbidden")
        self.assertEqual(err(alice, "list_files", id=sid, path="/proc")["code"], "forbidden")
        self.assertEqual(err(alice, "read_file", id=sid, path="/workspace/none")["code"], "not_found")
        # Arguments the API refuses, with its messages.
        self.assertIn("unknown argument", err(alice, "run_command", id=sid, command="ls")["message"])
        self.assertEqual(err(alice, "run_command", id=sid, cmd="true", timeout=-1)["code"], "bad_request")
        self.assertEqual(err(alice, "create_sandbox", timeout="soon")["code"], "bad_request")
        self.assertEqual(err(alice, "write_file", id=sid, path="/workspace/y")["code"], "bad_request")
        self.assertEqual(err(alice, "write_process_stdin", id=sid, pid=999999, content="x")["code"], "not_found")
        e = err(alice, "write_process_stdin", id=sid, pid=1, content="x", content_b64="eA==")
        self.assertEqual((e["code"], e["status"]), ("bad_request", 400))
        # The sandbox is still there and alice's.
        self.assertEqual(alice.ok("run_command", id=sid, cmd="echo fine")["structuredContent"]["stdout"], "fine\n")
        # An unknown tool is a JSON-RPC error (the SDK raises it).
        out = alice.ask({"op": "call", "name": "no_such_tool", "args": {}})
        self.assertEqual(out.get("code"), -32602, out)

    # ---- the wire ----
    def test_sessions_versions_and_refusals(self):
        s, res = self.init("alice")
        self.assertEqual(res["protocolVersion"], "2025-11-25")
        self.assertEqual(res["serverInfo"]["name"], "sbx")
        self.assertEqual(self.init("alice", "2025-06-18")[1]["protocolVersion"], "2025-06-18")
        self.assertEqual(self.init("alice", "1999-01-01")[1]["protocolVersion"], "2025-11-25")
        st, _, body = self.rpc({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid=s)
        self.assertEqual(st, 202)
        st, _, body = self.rpc({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid=s)
        self.assertEqual(st, 200)
        self.assertEqual(len(body["result"]["tools"]), len(TOOLS))
        # JSON answers when the client takes only JSON.
        st, h, body = self.rpc({"jsonrpc": "2.0", "id": 3, "method": "ping"}, sid=s,
                               headers={"Accept": "application/json"})
        self.assertEqual((st, h["content-type"], body["result"]), (200, "application/json", {}))
        # A session is its tenant's: another's token does not reach it.
        st, _, body = self.rpc({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, who="bob", sid=s)
        self.assertEqual(st, 404)
        self.assertEqual(body["error"]["code"], -32000)
        st, _, _ = self.rpc({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, sid="0" * 32)
        self.assertEqual(st, 404)
        st, _, body = self.rpc(b"{not json", sid=s)
        self.assertEqual((st, body["error"]["code"]), (400, -32700))
        st, _, body = self.rpc({"jsonrpc": "2.0", "id": [1], "method": "x"}, sid=s)
        self.assertEqual((st, body["error"]["code"]), (400, -32600))
        st, _, body = self.rpc({"jsonrpc": "2.0", "id": 5, "method": "resources/list"}, sid=s)
        self.assertEqual((st, body["error"]["code"]), (200, -32601))
        st, _, body = self.rpc({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {}}, sid=s)
        self.assertEqual((st, body["error"]["code"]), (200, -32602))
        st, _, body = self.rpc({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
        self.assertEqual(st, 400)  # no session
        st, _, body = self.rpc({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}, sid=s,
                               headers={"MCP-Protocol-Version": "2024-01-01"})
        self.assertEqual(st, 400)
        st, _, body = self.rpc({"jsonrpc": "2.0", "id": 9, "method": "ping"}, sid=s,
                               headers={"Origin": "http://evil.test"})
        self.assertEqual(st, 403)
        st, _, body = self.rpc({"jsonrpc": "2.0", "id": 9, "method": "ping"}, sid=s,
                               headers={"Origin": "http://allowed.test"})
        self.assertEqual(st, 200)
        st, _, body = self.rpc({"jsonrpc": "2.0", "id": 10, "method": "ping"}, sid=s, headers={"Accept": "text/html"})
        self.assertEqual(st, 406)
        st, _, _ = self.sup.request("POST", "/v1/mcp", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, token=False)
        self.assertEqual(st, 401)
        st, h, _ = self.sup.request("GET", "/v1/mcp", token="Bearer " + TOK["alice"],
                                    headers={"Accept": "text/event-stream"})
        self.assertEqual(st, 405)
        # DELETE ends it (bob cannot); then it is gone.
        hdr = {"Mcp-Session-Id": s}
        st, _, _ = self.sup.request("DELETE", "/v1/mcp", token="Bearer " + TOK["bob"], headers=hdr)
        self.assertEqual(st, 404)
        st, _, _ = self.sup.request("DELETE", "/v1/mcp", token="Bearer " + TOK["alice"], headers=hdr)
        self.assertEqual(st, 204)
        st, _, _ = self.rpc({"jsonrpc": "2.0", "id": 11, "method": "ping"}, sid=s)
        self.assertEqual(st, 404)

    # ---- the inspector's command-line client ----
    def inspector(self, *args):
        p = mcp_inspector(self.url, TOK["bob"], *args)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        return json.loads(p.stdout)

    def test_inspector_cli(self):
        names = [t["name"] for t in self.inspector("--method", "tools/list")["tools"]]
        self.assertEqual(sorted(names), sorted(TOOLS))
        r = self.inspector("--method", "tools/call", "--tool-name", "create_sandbox", "--tool-arg", "timeout=300")
        sid = r["structuredContent"]["id"]
        self.addCleanup(self.sup.request, "DELETE", "/v1/sandboxes/" + sid)
        r = self.inspector("--method", "tools/call", "--tool-name", "run_command", "--tool-arg", "id=" + sid,
                           "--tool-arg", "cmd=echo from inspector; exit 7")
        self.assertFalse(r.get("isError"), r)
        self.assertEqual((r["structuredContent"]["exit_code"], r["structuredContent"]["stdout"]),
                         (7, "from inspector\n"))
        r = self.inspector("--method", "tools/call", "--tool-name", "write_file", "--tool-arg", "id=" + sid,
                           "--tool-arg", "path=/tmp/i.txt", "--tool-arg", "content=inspected",
                           "--tool-arg", "overwrite=false")
        self.assertFalse(r.get("isError"), r)
        r = self.inspector("--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "id=" + sid,
                           "--tool-arg", "path=/tmp/i.txt")
        self.assertEqual(r["content"][0]["text"], "inspected")
        r = self.inspector("--method", "tools/call", "--tool-name", "read_file", "--tool-arg", "id=" + sid,
                           "--tool-arg", "path=/root/.profile")
        self.assertTrue(r["isError"])
        self.assertTrue(r["content"][0]["text"].startswith("forbidden (403): "), r)


if __name__ == "__main__":
    unittest.main(verbosity=2)
