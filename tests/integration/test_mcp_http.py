"""MCP Streamable HTTP at /v1/sandboxes/{id}/mcp/{name}, through a real
sandbox-supervisor, real runc sandboxes and the real agent, with real
clients from npm (tests/mcp-servers, installed by scripts/install-mcp-servers):
the MCP SDK's Client + StreamableHTTPClientTransport (sdk_client.mjs) and
@modelcontextprotocol/inspector-cli, against @modelcontextprotocol/server-
everything and server-filesystem running inside the sandbox (their
node_modules copied in through the files API), plus small Python servers
that crash, print garbage or flood. Raw HTTP from Python where the point is
the wire: transport errors, a cut SSE stream resumed with Last-Event-ID, a
client that stops reading. Everything made is removed at the end, also when
a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import http.client
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import (MCP_SANDBOX_MODULES as NM, Supervisor, mcp_inspector,  # noqa: E402
                         mcp_modules_into, mcp_npm, rss_kb, sanitized, stop_clean)

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
CLIENT = mcp_npm("sdk_client.mjs")
IDLE_S = 2.0
SANITIZED = bool(SUP) and sanitized(SUP)

# A stdio MCP server that misbehaves on request (tools crash, garbage,
# huge, flood); it answers initialize and tools/list properly.
BAD = r"""
import json, os, sys
def out(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
for line in sys.stdin:
    m = json.loads(line)
    meth, mid = m.get("method"), m.get("id")
    if meth == "initialize":
        out({"jsonrpc": "2.0", "id": mid, "result": {"protocolVersion": m["params"]["protocolVersion"],
             "capabilities": {"tools": {}}, "serverInfo": {"name": "bad", "version": "1"}}})
    elif meth == "tools/list":
        out({"jsonrpc": "2.0", "id": mid, "result": {"tools": [
            {"name": n, "inputSchema": {"type": "object"}} for n in ("crash", "garbage", "huge", "flood")]}})
    elif meth == "tools/call":
        n = m["params"]["name"]
        if n == "crash":
            sys.stderr.write("bad server: crashing on purpose\n"); sys.stderr.flush()
            os._exit(3)
        if n == "garbage":
            sys.stdout.write("this is not JSON\n"); sys.stdout.flush()
        if n == "huge":
            sys.stdout.write('{"jsonrpc":"2.0","method":"x","params":{"p":"' + "a" * (5 << 20) + '"}}\n')
            sys.stdout.flush()
        if n == "flood":
            note = json.dumps({"jsonrpc": "2.0", "method": "notifications/message",
                               "params": {"level": "info", "data": "f" * 4000}}) + "\n"
            while True:
                sys.stdout.write(note)
    elif mid is not None:
        out({"jsonrpc": "2.0", "id": mid, "result": {}})
"""


class McpHttp(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(SUP, AGENT, pool_size=1,
                             extra=["--mcp-idle-timeout", str(IDLE_S),
                                    "--mcp-allow-origin", "http://allowed.test"])
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        sb = cls.sup.create()
        cls.sid = sb["id"]
        mcp_modules_into(cls.sup, cls.sid, "mkdir -p data && echo hello > data/hello.txt && ln -s /etc data/link")
        for name, server in {
            "everything": {"command": "node", "args": [NM + "server-everything/dist/index.js"]},
            "fs": {"command": "node", "args": [NM + "server-filesystem/dist/index.js", "/workspace/data"]},
            "bad": {"command": "python3", "args": ["-c", BAD]},
        }.items():
            st, _, body = cls.sup.request("PUT", cls.mcp_path(name), server)
            assert st == 200, body
        for name in ("everything", "fs", "bad"):
            cls.wait_state(name, "ready")

    @classmethod
    def tearDownClass(cls):
        st, _, body = cls.sup.request("DELETE", "/v1/sandboxes/%s" % cls.sid)
        assert st in (200, 204), body
        stop_clean(cls.sup)

    # ---- helpers ----
    @classmethod
    def mcp_path(cls, name=None):
        return "/v1/sandboxes/%s/mcp%s" % (cls.sid, "/" + name if name else "")

    @classmethod
    def servers(cls):
        st, _, body = cls.sup.request("GET", cls.mcp_path())
        assert st == 200, body
        return {s["name"]: s for s in body["servers"]}

    @classmethod
    def wait_state(cls, name, state, timeout=30, **want):
        deadline = time.monotonic() + timeout
        while True:
            s = cls.servers().get(name)
            if s and s["state"] == state and all(s.get(k) == v for k, v in want.items()):
                return s
            if time.monotonic() > deadline:
                raise AssertionError("server %s never %s %r: %r" % (name, state, want, s))
            time.sleep(0.1)

    def url(self, name):
        return "http://127.0.0.1:%d%s" % (self.sup.port, self.mcp_path(name))

    def client(self, *args, name="everything", timeout=90):
        p = subprocess.run(["node", CLIENT, self.url(name), self.sup.token] + list(args),
                           capture_output=True, text=True, timeout=timeout)
        lines = p.stdout.strip().splitlines()
        out = json.loads(lines[-1]) if lines else {"error": p.stderr}
        self.assertEqual(p.returncode, 0, (out, p.stderr[-2000:]))
        return out

    def rpc(self, name, msg, sid=None, accept="application/json, text/event-stream", extra=None, conn=None):
        h = {"Accept": accept, "Content-Type": "application/json"}
        if sid:
            h["Mcp-Session-Id"] = sid
        h.update(extra or {})
        body = msg if isinstance(msg, (bytes, str)) else json.dumps(msg)
        return self.sup.request("POST", self.mcp_path(name), body, headers=h, conn=conn)

    def initialize(self, name="everything", version="2025-11-25"):
        st, hdrs, body = self.rpc(name, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}},
            accept="application/json")
        self.assertEqual(st, 200, body)
        self.assertEqual(body["result"]["protocolVersion"], version)
        sid = hdrs["mcp-session-id"]
        self.assertRegex(sid, r"^[0-9a-f]{32}$")
        st, _, _ = self.rpc(name, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid=sid)
        self.assertEqual(st, 202)
        return sid

    def end(self, name, sid):
        st, _, _ = self.sup.request("DELETE", self.mcp_path(name), headers={"Mcp-Session-Id": sid})
        self.assertEqual(st, 204)

    # ---- real clients ----
    def test_sdk_client_every_tool(self):
        out = self.client("everything")
        for tool in ("echo", "get-sum", "trigger-long-running-operation", "trigger-sampling-request",
                     "trigger-elicitation-request", "get-roots-list", "gzip-file-as-resource"):
            self.assertIn(tool, out["called"])
        self.assertGreaterEqual(out["progress"], 4)
        self.assertEqual(out["seen"]["sampling"], 1)
        self.assertEqual(out["seen"]["elicitation"], 1)
        self.assertLess(out["cancel_ms"], 5000)

    def test_inspector_cli_lists_tools(self):
        p = mcp_inspector(self.url("everything"), self.sup.token, "--method", "tools/list", timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr[-2000:])
        names = [t["name"] for t in json.loads(p.stdout)["tools"]]
        self.assertIn("echo", names)
        self.assertIn("get-sum", names)

    def test_two_sessions_isolated(self):
        out = self.client("isolation")
        self.assertNotEqual(out["a"], out["b"])
        self.assertGreater(out["logs"]["a"], 0)
        self.assertEqual(out["logs"]["b"], 0)

    def test_404_after_delete(self):
        out = self.client("deleted")
        self.assertEqual(out["status"], 404)

    def test_idle_session_ends_and_its_process_dies(self):
        before = self.servers()["everything"]["sessions_opened"]
        out = self.client("open")
        self.wait_state("everything", "ready", sessions_opened=before + 1)
        # Abandoned (no DELETE): ended after --mcp-idle-timeout, its server
        # killed with its tree.
        try:
            self.wait_state("everything", "ready", timeout=IDLE_S + 10, sessions=0, processes=0)
        except AssertionError:
            print(self.sup.log()[-6000:])
            raise
        st, _, b = self.sup.exec(self.sid, argv=["pgrep", "-fc", "server-everything/dist"])
        self.assertEqual(b["stdout"].strip(), "1", b)  # only the next spare
        self.assertEqual(self.client("gone", out["session"])["status"], 404)

    def test_paused_time_is_not_idle_time(self):
        # Paused for twice the idle timeout: the session waits with the
        # sandbox and answers after the resume (pause, API.md).
        sid = self.initialize()
        st, _, b = self.sup.request("POST", "/v1/sandboxes/%s/pause" % self.sid)
        self.assertEqual(st, 200, b)
        try:
            time.sleep(IDLE_S * 2)
        finally:
            st, _, b = self.sup.request("POST", "/v1/sandboxes/%s/resume" % self.sid)
            self.assertEqual(st, 200, b)
        st, _, body = self.rpc("everything", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid=sid,
                               accept="application/json")
        self.assertEqual(st, 200, body)
        self.assertEqual(body.get("result"), {}, body)
        self.end("everything", sid)

    def test_filesystem_server_confined(self):
        out = self.client("roots", "/workspace/data", name="fs")
        self.assertGreaterEqual(out["roots_asked"], 1)
        self.assertIn("/workspace/data", out["allowed"])
        self.assertFalse(out["inside"]["isError"], out)
        self.assertEqual(out["inside"]["text"].strip(), "hello")
        for k in ("outside", "proc1", "escape", "link"):
            self.assertTrue(out[k]["isError"], (k, out[k]))
            self.assertNotIn("root:", out[k]["text"])
        # Even a server that tries /proc/1/root itself gets nothing: PID 1
        # is the sandbox's agent, and the sandbox user may not enter it.
        st, _, b = self.sup.exec(self.sid, cmd="cat /proc/1/root/etc/hostname; ls /proc/1/root/")
        self.assertEqual(b["stdout"], "", b)
        self.assertIn("Permission denied", b["stderr"])

    # ---- servers that misbehave ----
    def test_crash_mid_call(self):
        before = self.servers()["bad"]["restarts"]
        out = self.client("call", "crash", name="bad")
        self.assertFalse(out["ok"], out)
        self.assertIn("crashing on purpose", out["error"])
        s = self.wait_state("bad", "ready", restarts=before + 1)
        self.assertIn("crashing on purpose", s["stderr_tail"])

    def test_garbage_and_huge_lines_fail_the_session(self):
        for tool in ("garbage", "huge"):
            before = self.servers()["bad"]["bad_output"]
            out = self.client("call", tool, name="bad")
            self.assertFalse(out["ok"], (tool, out))
            self.wait_state("bad", "ready", bad_output=before + 1)
        self.assertTrue(self.sup.alive())

    def test_flood_to_a_client_that_does_not_read(self):
        sid = self.initialize("bad")
        rss0 = self.rss()
        c = http.client.HTTPConnection("127.0.0.1", self.sup.port, timeout=30)
        try:
            c.putrequest("POST", self.mcp_path("bad"))
            body = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "flood"}})
            for k, v in {"Authorization": "Bearer " + self.sup.token, "Accept": "text/event-stream",
                         "Content-Type": "application/json", "Mcp-Session-Id": sid,
                         "Content-Length": str(len(body))}.items():
                c.putheader(k, v)
            c.endheaders(body.encode())
            resp = c.getresponse()
            self.assertEqual(resp.status, 200)
            # Not reading: the server is held back (its lines stop being
            # taken from it once the sockets' buffers and ours are full),
            # and the supervisor does not grow.
            deadline, last, n = time.monotonic() + 30, -1, 0
            while n != last and time.monotonic() < deadline:
                last = n
                time.sleep(1.5)
                n = self.servers()["bad"]["msgs_out"]
            self.assertEqual(n, last, "the flooding server was not held back")
            self.assertLess(n * 4096, 48 << 20, "taken from the server: %d lines of 4 KiB" % n)
            print("\n  flood held back after %d lines of 4 KiB; supervisor RSS +%d KiB"
                  % (n, (self.rss() - rss0) >> 10), file=sys.stderr)
            if not SANITIZED:  # ASan's quarantine keeps freed memory in RSS
                grew = self.rss() - rss0
                self.assertLess(grew, 24 << 20, "supervisor grew %d bytes" % grew)
            st, _, _ = self.sup.request("GET", "/healthz")
            self.assertEqual(st, 200)
            got = resp.read1(65536)
            self.assertIn(b"notifications/message", got)
        finally:
            c.close()
            self.end("bad", sid)

    def rss(self):
        return rss_kb(self.sup.proc.pid) * 1024

    # ---- the wire ----
    def test_transport_refusals(self):
        sid = self.initialize()
        cases = [
            # (what, status, JSON-RPC code or None, kwargs of rpc)
            ("bad JSON", 400, -32700, dict(msg="{\"jsonrpc\":", sid=sid)),
            ("not JSON-RPC", 400, -32600, dict(msg={"jsonrpc": "1.0", "id": 1, "method": "x"}, sid=sid)),
            ("a batch", 400, -32600, dict(msg=[{"jsonrpc": "2.0", "id": 1, "method": "ping"}], sid=sid)),
            ("the agent's own id", 400, -32600,
             dict(msg={"jsonrpc": "2.0", "id": "sbx-agent-warmup-1", "method": "ping"}, sid=sid)),
            ("unsupported version", 400, -32000, dict(msg={"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid=sid,
                                                      extra={"MCP-Protocol-Version": "2024-11-05"})),
            ("no session", 400, -32000, dict(msg={"jsonrpc": "2.0", "id": 1, "method": "ping"})),
            ("unknown session", 404, -32000, dict(msg={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                                  sid="0" * 32)),
            ("origin not allowed", 403, -32000, dict(msg={"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid=sid,
                                                     extra={"Origin": "http://evil.test"})),
            ("accept", 406, -32000, dict(msg={"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid=sid,
                                         accept="text/html")),
            ("initialize in a session", 400, -32000, dict(msg={"jsonrpc": "2.0", "id": 9, "method": "initialize",
                                                              "params": {}}, sid=sid)),
        ]
        for what, status, code, kw in cases:
            name = kw.pop("name", "everything")
            st, _, body = self.rpc(name, **kw)
            self.assertEqual(st, status, (what, body))
            self.assertEqual(body["jsonrpc"], "2.0", what)
            self.assertEqual(body["error"]["code"], code, (what, body))
        # The allowed Origin passes; 2025-06-18 is served too.
        st, _, body = self.rpc("everything", {"jsonrpc": "2.0", "id": 2, "method": "ping"}, sid=sid,
                               accept="application/json",
                               extra={"Origin": "http://allowed.test", "MCP-Protocol-Version": "2025-06-18"})
        self.assertEqual(st, 200, body)
        self.assertEqual(body["id"], 2)
        # No token: 401 as on every route; the unknown server: 404 at initialize.
        st, _, _ = self.sup.request("POST", self.mcp_path("everything"), "{}", token=False)
        self.assertEqual(st, 401)
        st, _, body = self.rpc("nosuch", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "r", "version": "1"}}})
        self.assertEqual(st, 404, body)
        # One GET stream per session.
        c = self.sup.conn()
        c.request("GET", self.mcp_path("everything"), headers={
            "Authorization": "Bearer " + self.sup.token, "Accept": "text/event-stream", "Mcp-Session-Id": sid})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        self.assertEqual(r.getheader("Content-Type"), "text/event-stream")
        st, _, body = self.sup.request("GET", self.mcp_path("everything"), headers={
            "Accept": "text/event-stream", "Mcp-Session-Id": sid})
        self.assertEqual(st, 409, body)
        c.close()
        self.end("everything", sid)
        st, _, _ = self.sup.request("DELETE", self.mcp_path("everything"), headers={"Mcp-Session-Id": sid})
        self.assertEqual(st, 404)

    def test_cut_stream_resumed_with_last_event_id(self):
        sid = self.initialize()
        c = http.client.HTTPConnection("127.0.0.1", self.sup.port, timeout=30)
        body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "trigger-long-running-operation", "arguments": {"duration": 2, "steps": 8},
            "_meta": {"progressToken": "p7"}}})
        c.request("POST", self.mcp_path("everything"), body, headers={
            "Authorization": "Bearer " + self.sup.token, "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json", "Mcp-Session-Id": sid})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        first = []
        while not any(m.get("method") == "notifications/progress" for _, m in first):
            got = self.events(r, 1)
            self.assertTrue(got, first)
            first += got
        c.close()  # cut after the first progress event
        self.assertEqual(first[-1][1]["params"]["progress"], 1)
        time.sleep(3)  # the rest happened while nobody listened
        c = http.client.HTTPConnection("127.0.0.1", self.sup.port, timeout=30)
        c.request("GET", self.mcp_path("everything"), headers={
            "Authorization": "Bearer " + self.sup.token, "Accept": "text/event-stream",
            "Mcp-Session-Id": sid, "Last-Event-ID": first[-1][0]})
        r = c.getresponse()
        self.assertEqual(r.status, 200)
        rest = self.events(r, None)
        c.close()
        progress = [m["params"]["progress"] for _, m in first + rest if m.get("method") == "notifications/progress"]
        self.assertEqual(progress, list(range(1, 9)), progress)
        self.assertEqual(rest[-1][1]["id"], 7)
        self.assertIn("result", rest[-1][1])
        ids = [i for i, _ in first + rest if i]
        self.assertEqual(len(set(ids)), len(ids))
        # Events of the same stream, in order.
        seqs = [int(i.split("-")[1]) for i in ids]
        self.assertEqual(seqs, sorted(seqs))
        self.assertEqual(len({i.split("-")[0] for i in ids}), 1)
        # An id that is not ours is refused.
        st, _, body = self.sup.request("GET", self.mcp_path("everything"), headers={
            "Accept": "text/event-stream", "Mcp-Session-Id": sid, "Last-Event-ID": "nonsense"})
        self.assertEqual(st, 400, body)
        self.end("everything", sid)

    @staticmethod
    def events(resp, n):
        """(id, message) of SSE events until n were read or the stream ended."""
        out, cur_id, data = [], None, []
        while n is None or len(out) < n:
            line = resp.readline()
            if not line:
                break
            line = line.decode().rstrip("\n")
            if line.startswith("id: "):
                cur_id = line[4:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "" and data:
                out.append((cur_id, json.loads("\n".join(data))))
                cur_id, data = None, []
        return out

    # ---- managing the servers ----
    def test_put_list_delete_servers(self):
        st, _, body = self.sup.request("PUT", self.mcp_path("tmp"), {"command": "python3", "args": ["-c", BAD],
                                                                     "shell": True})
        self.assertEqual(st, 400, body)
        self.assertIn("unknown field", json.dumps(body))
        st, _, body = self.sup.request("PUT", self.mcp_path("bad..x!"), {"command": "x"})
        self.assertEqual(st, 400, body)
        st, _, body = self.sup.request("PUT", self.mcp_path("tmp"), {"command": "python3", "args": ["-c", BAD]})
        self.assertEqual(st, 200, body)
        self.assertEqual(body["name"], "tmp")
        s = self.wait_state("tmp", "ready")
        self.assertGreater(s["spare_pid"], 0)
        sid = self.initialize("tmp")
        self.assertEqual(self.servers()["tmp"]["sessions"], 1)
        # DELETE without Mcp-Session-Id removes the server, its sessions end.
        st, _, _ = self.sup.request("DELETE", self.mcp_path("tmp"))
        self.assertEqual(st, 204)
        self.assertNotIn("tmp", self.servers())
        st, _, _ = self.rpc("tmp", {"jsonrpc": "2.0", "id": 1, "method": "ping"}, sid=sid)
        self.assertEqual(st, 404)
        st, _, _ = self.sup.request("DELETE", self.mcp_path("tmp"))
        self.assertEqual(st, 404)
        st, _, _ = self.sup.request("GET", "/v1/sandboxes/sb-000000000000/mcp")
        self.assertEqual(st, 404)


if __name__ == "__main__":
    unittest.main(verbosity=2)
