"""Path escapes (SECURITY.md, "Tenant from tenant" and "Node from
sandbox"): alice's tenant may touch /workspace only; she tries to reach
the rest of her sandbox (its /etc) through every layer that takes a path
besides sbx's files routes (test_files_api.py's hostile corpus holds
those): the OpenSandbox layer (info, download, listing, search, upload,
move, make folders), the /v1/mcp tools (read_file, write_file,
list_files), each with encoded climbs ("..", %2e%2e, double encoding, an
overlong UTF-8 dot, NUL, a bare /etc), with symlinks she plants inside
/workspace (to /etc, to .., to /etc/passwd), and with an upload racing a
symlink swap (a folder of /workspace exchanged, many times a second, with
a symlink to /etc while her uploads land in it). Each is refused (4xx, or
a tool error), no answer carries /etc/passwd's content, and nothing lands
outside /workspace: the test looks for what she tried to write in the
whole sandbox afterwards, as root.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import secrets
import sys
import threading
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from sbx_harness import end_clean, tenants_supervisor  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
TOK = {n: secrets.token_hex(24) for n in ("admin", "alice")}
MARK = "pwned-" + secrets.token_hex(4)
PASSWD = b"root:x:0:0"

# Raw query values (already encoded as a client would send them).
CLIMBS = ["/workspace/../etc/passwd", "/workspace/%2e%2e/etc/passwd",
          "/workspace/%252e%252e/etc/passwd", "/workspace/..%2fetc%2fpasswd",
          "/workspace/a/../../etc/passwd", "/workspace%00/../etc/passwd",
          "/workspace/%c0%ae%c0%ae/etc/passwd", "/etc/passwd", "//etc/passwd",
          "/workspace/../../../../../etc/passwd", "/workspace/./../etc/passwd"]

# renameat2(RENAME_EXCHANGE) of a folder and a symlink to /etc, in a loop
SWAPPER = r"""
import ctypes, os, time
libc = ctypes.CDLL(None, use_errno=True)
os.chdir("/workspace")
os.makedirs("race", exist_ok=True)
if not os.path.lexists("race.l"):
    os.symlink("/etc", "race.l")
open("/workspace/swapping", "w").close()
end = time.monotonic() + 60
while time.monotonic() < end and os.path.exists("/workspace/swapping"):
    libc.renameat2(-100, b"race", -100, b"race.l", 2)
"""


class PathEscapes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        # root inside is hers (the test's set-up and its look around run as
        # root); what she tries through the API stays within her paths
        tenants = {"admin": {"token": TOK["admin"]},
                   "alice": {"token": TOK["alice"], "allow_root": True,
                             "paths": [{"root": "/workspace", "mode": "rw"}]}}
        cls.sup = tenants_supervisor(SUP, AGENT, tenants, TOK["admin"], pool_size=1)
        cls.addClassCleanup(end_clean, cls.sup)
        st, _, sb = cls.req("alice", "POST", "/v1/sandboxes", {"timeout": 600})
        assert st == 201, sb
        cls.sid = sb["id"]
        cls.root_sh("mkdir -p /workspace/d && echo mine > /workspace/d/ok.txt && "
                    "ln -s /etc /workspace/l && ln -s .. /workspace/up && "
                    "ln -s /etc/passwd /workspace/abs && ln -s ../../etc /workspace/d/l2 && "
                    "chown -h 1000:1000 /workspace/l /workspace/up /workspace/abs /workspace/d/l2")

    @classmethod
    def req(cls, who, method, path, body=None, headers=None):
        return cls.sup.request(method, path, body, token="Bearer " + TOK[who] if who else False,
                               headers=headers)

    @classmethod
    def root_sh(cls, cmd):
        st, _, r = cls.req("admin", "POST", "/v1/sandboxes/%s/exec" % cls.sid,
                           {"cmd": cmd, "user": "root", "timeout": 60})
        assert st == 200 and r["exit_code"] == 0, r
        return r["stdout"]

    def osbx(self, method, route, body=None, headers=None):
        h = dict(headers or {}, **{"OPEN-SANDBOX-API-KEY": TOK["alice"]})
        return self.req(None, method, "/opensandbox/execd/%s/%s" % (self.sid, route), body, h)

    def refused(self, got, what):
        st, _, body = got
        text = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.assertIn(st // 100, (4,), (what, st, text[:300]))
        self.assertNotIn(PASSWD, text, what)

    def mcp(self, tool, **args):
        h = {"Content-Type": "application/json", "Accept": "application/json"}
        if not getattr(self, "mcp_sid", None):
            st, hd, body = self.req("alice", "POST", "/v1/mcp", {
                "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": {"name": "adv", "version": "1"}}}, headers=h)
            self.assertEqual(st, 200, body)
            type(self).mcp_sid = hd["mcp-session-id"]
        h.update({"Mcp-Session-Id": self.mcp_sid, "MCP-Protocol-Version": "2025-11-25"})
        st, _, body = self.req("alice", "POST", "/v1/mcp", {
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": tool, "arguments": dict(args, id=self.sid)}}, headers=h)
        return st, body

    def mcp_refused(self, tool, **args):
        """A tool's error result, or (a NUL in JSON) the transport's 400."""
        st, body = self.mcp(tool, **args)
        self.assertNotIn(PASSWD, json.dumps(body).encode())
        if st == 400:
            self.assertIn("error", body)
            return
        self.assertEqual(st, 200, body)
        self.assertTrue(body["result"].get("isError"), (tool, args, body))

    def nothing_landed(self):
        found = self.root_sh("find / -xdev -name '%s*' 2>/dev/null | grep -v '^/workspace/' || true"
                             % MARK)
        self.assertEqual(found, "", "written outside /workspace")

    def multipart(self, path, data=b"evil"):
        boundary = "advbound"
        meta = json.dumps({"path": path, "mode": 644}).encode()
        body = (b"--advbound\r\nContent-Disposition: form-data; name=\"metadata\"\r\n"
                b"Content-Type: application/json\r\n\r\n" + meta +
                b"\r\n--advbound\r\nContent-Disposition: form-data; name=\"file\"; filename=\"x\"\r\n"
                b"Content-Type: application/octet-stream\r\n\r\n" + data + b"\r\n--advbound--\r\n")
        return body, {"Content-Type": "multipart/form-data; boundary=" + boundary}

    # ---- the tests ----

    def test_encoded_climbs_through_every_layer(self):
        for raw in CLIMBS:
            for route in ("files/info?path=%s", "files/download?path=%s",
                          "directories/list?path=%s", "files/search?path=%s&pattern=*",
                          "files?path=%s"):
                with self.subTest(layer="opensandbox", route=route, path=raw):
                    self.refused(self.osbx("DELETE" if route.startswith("files?") else "GET",
                                           route % raw), route % raw)
            plain = urllib.parse.unquote(raw)
            for tool, extra in (("read_file", {}), ("list_files", {}),
                                ("write_file", {"content": "evil"})):
                path = plain.replace("passwd", MARK) if tool == "write_file" else plain
                with self.subTest(layer="mcp", tool=tool, path=path):
                    self.mcp_refused(tool, path=path, **extra)
        for dest in ("/workspace/../etc/" + MARK, "/etc/" + MARK, "/workspace/d/../../etc/" + MARK):
            with self.subTest(layer="opensandbox writes", dest=dest):
                body, h = self.multipart(dest)
                self.refused(self.osbx("POST", "files/upload", body, h), dest)
                self.refused(self.osbx("POST", "files/mv", [{"src": "/workspace/d/ok.txt",
                                                              "dest": dest}]), dest)
                self.refused(self.osbx("POST", "directories", {dest: {"mode": 755}}), dest)
        self.nothing_landed()
        st, _, body = self.req("alice", "GET", "/v1/sandboxes/%s/files?path=/workspace/d/ok.txt" % self.sid)
        self.assertEqual((st, body), (200, b"mine\n"))

    def test_symlinks_she_planted(self):
        reads = ["/workspace/l/passwd", "/workspace/up/etc/passwd", "/workspace/abs",
                 "/workspace/d/l2/passwd"]
        for p in reads:
            q = urllib.parse.quote(p)
            with self.subTest(path=p):
                self.refused(self.req("alice", "GET", "/v1/sandboxes/%s/files?path=%s" % (self.sid, q)), p)
                self.refused(self.osbx("GET", "files/download?path=" + q), p)
                self.mcp_refused("read_file", path=p)
        # info follows a symlink only while it stays inside: /etc's stat is not shown
        for p in ("/workspace/l", "/workspace/abs"):
            st, _, body = self.osbx("GET", "files/info?path=" + urllib.parse.quote(p))
            if st == 200:
                self.assertEqual(body[p]["type"], "symlink", body)
            else:
                self.refused((st, None, body), p)
        for p in ("/workspace/l", "/workspace/up"):
            self.refused(self.osbx("GET", "directories/list?path=" + p), p)
            self.mcp_refused("list_files", path=p)
        for p in ("/workspace/l/" + MARK, "/workspace/up/etc/" + MARK, "/workspace/d/l2/" + MARK):
            with self.subTest(write=p):
                self.refused(self.req("alice", "PUT", "/v1/sandboxes/%s/files?path=%s"
                                      % (self.sid, urllib.parse.quote(p)), b"evil"), p)
                body, h = self.multipart(p)
                self.refused(self.osbx("POST", "files/upload", body, h), p)
                self.mcp_refused("write_file", path=p, content="evil")
        self.nothing_landed()

    def test_upload_racing_a_symlink_swap(self):
        st, _, p = self.req("alice", "POST", "/v1/sandboxes/%s/processes" % self.sid,
                            {"argv": ["python3", "-c", SWAPPER], "tag": "swapper"})
        self.assertEqual(st, 201, p)
        try:
            deadline = time.monotonic() + 20
            while self.req("alice", "GET", "/v1/sandboxes/%s/fs/stat?path=/workspace/swapping"
                           % self.sid)[0] != 200:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.05)
            answers = {}

            def put(i):
                if i % 4 == 3:
                    body, h = self.multipart("/workspace/race/%s-%d" % (MARK, i), b"x" * 1000)
                    st = self.osbx("POST", "files/upload", body, h)[0]
                else:
                    st = self.req("alice", "PUT", "/v1/sandboxes/%s/files?path=/workspace/race/%s-%d"
                                  % (self.sid, MARK, i), b"x" * 1000)[0]
                answers[st] = answers.get(st, 0) + 1

            for batch in range(4):
                ts = [threading.Thread(target=put, args=(batch * 16 + i,)) for i in range(16)]
                for t in ts:
                    t.start()
                for t in ts:
                    t.join()
        finally:
            self.root_sh("rm -f /workspace/swapping")
            self.req("alice", "DELETE", "/v1/sandboxes/%s/processes/%d" % (self.sid, p["pid"]))
        print("\nuploads racing the swap: %r" % answers, file=sys.stderr)
        # each answered: landed (in the folder) or refused, never a 5xx of
        # the supervisor's own
        self.assertTrue(set(answers) <= {200, 201, 403, 404, 409, 502}, answers)
        self.nothing_landed()
        st, _, v = self.req("alice", "GET", "/v1/sandboxes/" + self.sid)
        self.assertEqual((st, v["state"]), (200, "running"), v)


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)
