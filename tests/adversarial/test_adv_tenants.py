"""Tenant from tenant (SECURITY.md): bob, holding a token of his own,
attacks what alice has on the same node: every route under her sandbox's
id (files, fs.*, watch, processes and their streams, MCP servers, ports,
snapshots, fork, pause, network), her snapshot (get, delete, restore from
it), her volume (mount it), the OpenSandbox layer's routes on her sandbox,
her port through signed URLs (his token with her URL, her proof on his
sandbox, a proof moved to another id or port, an expiry moved forward, a
URL of a deleted sandbox) and the node's /v1/mcp sessions (his sessions
bounded so hers still open). Each attempt gets exactly what an unknown id
gets (a 404 that says nothing of hers) or a 403 for a proof that does not
hold, and after each alice's sandbox, file, process, port, snapshot and
volume are as they were. Also bounded for one tenant: many watch streams
on one sandbox (each a stream or a clear error, the other tenant's exec
answered meanwhile, the supervisor's memory bounded, the agent's watches
freed). test_tenants.py holds the sandbox routes it lists (exec, get,
delete, files read, processes list); they are not repeated here.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import http.client
import json
import os
import re
import secrets
import socket
import sys
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from adv_tenants_pair import start_pair  # noqa: E402
from sbx_harness import rss_kb  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
DOMAIN = "ports.adv.test"  # never resolved: requests carry it as Host
TOK = {n: secrets.token_hex(24) for n in ("admin", "alice", "bob")}
SECRET = "alice's secret %s\n" % secrets.token_hex(8)
MCP_TENANT_SESSIONS = 64  # sup_mcp_api.c
WATCHES_PER_SANDBOX = 8   # guest-agent/src/ops/op_watch.c


class TenantWalls(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        start_pair(cls, SUP, AGENT, TOK, extra=["--ports-domain", DOMAIN])
        cls.unknown = cls.a[:-8] + ("00000000" if not cls.a.endswith("00000000") else "11111111")
        st, _, r = cls.req("alice", "PUT", "/v1/sandboxes/%s/files?path=/workspace/secret.txt" % cls.a,
                           SECRET.encode())
        assert st in (200, 201), r
        for who, sid in (("alice", cls.a), ("bob", cls.b)):
            st, _, p = cls.req(who, "POST", "/v1/sandboxes/%s/processes" % sid, {
                "cmd": "cd /workspace && exec python3 -m http.server --bind 127.0.0.1 8000",
                "tag": "web"})
            assert st == 201, p
        st, _, lst = cls.req("alice", "GET", "/v1/sandboxes/%s/processes" % cls.a)
        cls.pid = lst["processes"][0]["pid"]
        st, _, snap = cls.req("alice", "POST", "/v1/sandboxes/%s/snapshots" % cls.a, {"name": "mine"})
        assert st == 201, snap
        cls.snap = snap["id"]
        st, _, vol = cls.req("alice", "POST", "/v1/volumes", {"name": "proj", "size": "64M"})
        assert st == 201, vol
        for sid, who in ((cls.a, "alice"), (cls.b, "bob")):
            cls.wait_port(who, sid)

    @classmethod
    def req(cls, who, method, path, body=None, headers=None, timeout=30):
        return cls.sup.request(method, path, body, token="Bearer " + TOK[who] if who else False,
                               headers=headers, timeout=timeout)

    @classmethod
    def wait_port(cls, who, sid):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            st, _, body = cls.req(who, "GET", "/v1/sandboxes/%s/ports/8000/secret.txt" % sid)
            if st in (200, 404) and not isinstance(body, dict):
                return
            time.sleep(0.1)
        raise AssertionError("port 8000 of %s never answered" % sid)

    # ---- what must hold after every attempt ----

    def alice_untouched(self):
        st, _, v = self.req("alice", "GET", "/v1/sandboxes/" + self.a)
        self.assertEqual((st, v.get("state")), (200, "running"), v)
        st, _, body = self.req("alice", "GET", "/v1/sandboxes/%s/files?path=/workspace/secret.txt" % self.a)
        self.assertEqual((st, body), (200, SECRET.encode()))
        st, _, p = self.req("alice", "GET", "/v1/sandboxes/%s/processes/%d" % (self.a, self.pid))
        self.assertEqual((st, p.get("state")), (200, "running"), p)
        st, _, body = self.req("alice", "GET", "/v1/sandboxes/%s/ports/8000/secret.txt" % self.a)
        self.assertEqual((st, body), (200, SECRET.encode()))
        st, _, s = self.req("alice", "GET", "/v1/snapshots/" + self.snap)
        self.assertEqual(st, 200, s)
        st, _, vol = self.req("alice", "GET", "/v1/volumes/proj")
        self.assertEqual(st, 200, vol)

    def same_as_unknown(self, method, suffix, body=None, headers=None, who="bob", base="/v1/sandboxes/"):
        got = self.req(who, method, base + self.a + suffix, body, headers)
        ref = self.req(who, method, base + self.unknown + suffix, body, headers)
        self.assertEqual(got[0], 404, (method, suffix, got))
        self.assertEqual(ref[0], got[0], (method, suffix, ref))
        text = json.dumps(got[2]) if isinstance(got[2], (dict, list)) else got[2].decode("latin-1")
        ref_text = json.dumps(ref[2]) if isinstance(ref[2], (dict, list)) else ref[2].decode("latin-1")
        self.assertEqual(text.replace(self.a, self.unknown), ref_text, (method, suffix))
        self.assertNotIn("secret", text)

    # ---- the tests ----

    def test_every_sandbox_route_by_id(self):
        pid = self.pid
        routes = [
            ("PUT", "/files?path=/workspace/secret.txt", b"bob was here"),
            ("DELETE", "/files?path=/workspace/secret.txt", None),
            ("GET", "/fs/stat?path=/workspace/secret.txt", None),
            ("GET", "/fs/list?path=/workspace", None),
            ("POST", "/fs/mkdir", {"path": "/workspace/bob"}),
            ("POST", "/fs/move", {"from": "/workspace/secret.txt", "to": "/workspace/gone"}),
            ("POST", "/fs/chmod", {"path": "/workspace/secret.txt", "mode": 0o777}),
            ("POST", "/fs/search", {"path": "/workspace", "glob": "*"}),
            ("GET", "/fs/watch?path=/workspace", None),
            ("POST", "/processes", {"cmd": "cat /workspace/secret.txt"}),
            ("GET", "/processes/%d" % pid, None),
            ("GET", "/processes/%d/output" % pid, None),
            ("POST", "/processes/%d/signal" % pid, {"signal": "KILL"}),
            ("POST", "/processes/%d/stdin" % pid, b"x"),
            ("POST", "/processes/%d/resize" % pid, {"cols": 10, "rows": 10}),
            ("DELETE", "/processes/%d" % pid, None),
            ("GET", "/mcp", None),
            ("PUT", "/mcp/evil", {"command": "sh", "args": ["-c", "cat /workspace/secret.txt"]}),
            ("DELETE", "/mcp/evil", None),
            ("GET", "/ports", None),
            ("GET", "/ports/8000/secret.txt", None),
            ("GET", "/ports/8000/url", None),
            ("POST", "/snapshots", {"name": "stolen"}),
            ("POST", "/fork", {"count": 1}),
            ("POST", "/pause", None),
            ("POST", "/resume", None),
            ("POST", "/timeout", {"timeout": 1}),
            ("PATCH", "/network", {"default_action": "allow"}),
            ("GET", "/contexts", None),
            ("POST", "/contexts", {"language": "bash"}),
            ("GET", "/contexts/bash", None),
            ("POST", "/contexts/bash/run", {"code": "cat /workspace/secret.txt"}),
            ("POST", "/contexts/bash/interrupt", None),
            ("POST", "/contexts/bash/restart", None),
            ("DELETE", "/contexts/bash", None),
        ]
        for method, suffix, body in routes:
            with self.subTest(method=method, route=suffix):
                self.same_as_unknown(method, suffix, body)
        # the terminal's WebSocket: refused before any upgrade
        for sid in (self.a, self.unknown):
            st, _, body = self.req("bob", "GET", "/v1/sandboxes/%s/processes/%d/ws" % (sid, pid),
                                   headers={"Connection": "Upgrade", "Upgrade": "websocket",
                                            "Sec-WebSocket-Version": "13",
                                            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ=="})
            self.assertEqual(st, 404, body)
        # the port by Host: his token on her sandbox's host
        st, _, body = self.req("bob", "GET", "/secret.txt", headers={"Host": "8000-%s.%s" % (self.a, DOMAIN)})
        self.assertEqual(st, 404, body)
        self.assertNotIn(b"secret", body if isinstance(body, bytes) else json.dumps(body).encode())
        self.alice_untouched()

    def test_snapshots_and_volumes_of_another(self):
        for method, path, body in (("GET", "/v1/snapshots/" + self.snap, None),
                                   ("DELETE", "/v1/snapshots/" + self.snap, None),
                                   ("POST", "/v1/sandboxes", {"snapshot": self.snap})):
            with self.subTest(method=method, path=path):
                st, _, got = self.req("bob", method, path, body)
                self.assertEqual(st, 404, got)
                self.assertNotIn("mine", json.dumps(got))
        st, _, lst = self.req("bob", "GET", "/v1/snapshots")
        self.assertEqual((st, [s for s in lst["snapshots"] if s["id"] == self.snap]), (200, []))
        # her volume's name in his create: his own namespace, where it is not
        st, _, got = self.req("bob", "POST", "/v1/sandboxes",
                              {"volumes": [{"name": "proj", "mount": "/data"}]})
        self.assertEqual(st, 404, got)
        st, _, got = self.req("bob", "DELETE", "/v1/volumes/proj")
        self.assertEqual(st, 404, got)
        st, _, lst = self.req("bob", "GET", "/v1/volumes")
        self.assertEqual(lst["volumes"], [], lst)
        self.alice_untouched()

    def test_opensandbox_layer(self):
        key = {"OPEN-SANDBOX-API-KEY": TOK["bob"]}
        for method, suffix, body in (
                ("GET", "", None), ("DELETE", "", None),
                ("POST", "/renew-expiration", {"expiresAt": "2099-01-01T00:00:00Z"}),
                ("GET", "/endpoints/8000", None), ("POST", "/pause", None),
                ("POST", "/snapshots", {"name": "stolen"})):
            with self.subTest(method=method, route=suffix):
                self.same_as_unknown(method, suffix, body, headers=key, who=None,
                                     base="/opensandbox/v1/sandboxes/")
        for method, suffix, body in (
                ("GET", "/files/info?path=/workspace/secret.txt", None),
                ("GET", "/files/download?path=/workspace/secret.txt", None),
                ("GET", "/directories/list?path=/workspace", None),
                ("GET", "/files/search?path=/workspace&pattern=*", None),
                ("DELETE", "/files?path=/workspace/secret.txt", None),
                ("POST", "/files/mv", [{"src": "/workspace/secret.txt", "dest": "/workspace/x"}]),
                ("POST", "/command", {"command": "cat /workspace/secret.txt"}),
                ("POST", "/session", {}),
                ("GET", "/metrics", None)):
            with self.subTest(method=method, route=suffix):
                self.same_as_unknown(method, suffix, body, headers=key, who=None,
                                     base="/opensandbox/execd/")
        st, _, lst = self.sup.request("GET", "/opensandbox/v1/sandboxes", token=False, headers=key)
        self.assertEqual(st, 200, lst)
        self.assertNotIn(self.a, json.dumps(lst))
        self.alice_untouched()

    def signed(self, who, sid, port=8000, expires=600):
        st, _, b = self.req(who, "GET", "/v1/sandboxes/%s/ports/%d/url?expires=%d" % (sid, port, expires))
        self.assertEqual(st, 200, b)
        q = urllib.parse.urlsplit(b["url"]).query
        exp = re.search(r"sbx_exp=(\d+)", q).group(1)
        sig = re.search(r"sbx_sig=([0-9a-f]+)", q).group(1)
        return q, exp, sig

    def test_signed_urls_across_tenants(self):
        q, exp, sig = self.signed("alice", self.a)
        host_a = {"Host": "8000-%s.%s" % (self.a, DOMAIN)}
        # her URL works alone, as a browser would use it
        st, _, body = self.req(None, "GET", "/secret.txt?" + q, headers=host_a)
        self.assertEqual((st, body), (200, SECRET.encode()))
        # with his token it is judged by his token: her sandbox is unknown to him
        st, _, body = self.req("bob", "GET", "/secret.txt?" + q, headers=host_a)
        self.assertEqual(st, 404, body)
        st, _, body = self.req("bob", "GET", "/v1/signed/%s/8000/%s/%s/secret.txt" % (self.a, exp, sig))
        self.assertEqual(st, 404, body)
        # her proof moved onto his sandbox, another port, a later expiry: 403
        bq, bexp, bsig = self.signed("bob", self.b)
        for path, hdr in (
                ("/secret.txt?" + q, {"Host": "8000-%s.%s" % (self.b, DOMAIN)}),
                ("/v1/sandboxes/%s/ports/8000/secret.txt?%s" % (self.b, q), None),
                ("/v1/signed/%s/8000/%s/%s/secret.txt" % (self.b, exp, sig), None),
                ("/v1/signed/%s/8001/%s/%s/secret.txt" % (self.a, exp, sig), None),
                ("/v1/signed/%s/8000/%d/%s/secret.txt" % (self.a, int(exp) + 3600, sig), None),
                # his proof on her sandbox, and his cookie on her port
                ("/v1/signed/%s/8000/%s/%s/secret.txt" % (self.a, bexp, bsig), None),
                ("/secret.txt?" + bq, host_a),
                ("/secret.txt", dict(host_a, Cookie="sbx_port=%s.%s" % (bexp, bsig)))):
            with self.subTest(path=path, headers=hdr):
                st, _, body = self.req(None, "GET", path, headers=hdr)
                self.assertIn(st, (401, 403), body)
                self.assertNotIn(b"secret", body if isinstance(body, bytes) else json.dumps(body).encode())
        # a URL outlives nothing: its sandbox deleted, the same URL is refused
        st, _, c = self.req("bob", "POST", "/v1/sandboxes", {})
        self.assertEqual(st, 201, c)
        cq, cexp, csig = self.signed("bob", c["id"], port=8000)
        self.assertEqual(self.req("bob", "DELETE", "/v1/sandboxes/" + c["id"])[0], 204)
        st, _, body = self.req(None, "GET", "/v1/signed/%s/8000/%s/%s/" % (c["id"], cexp, csig))
        self.assertEqual(st, 404, body)
        self.alice_untouched()

    def mcp_init(self, who):
        h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
        st, hdrs, body = self.req(who, "POST", "/v1/mcp", {
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "adv", "version": "1"}}}, headers=h)
        return st, hdrs.get("mcp-session-id"), body

    def test_mcp_sessions_bounded_per_tenant(self):
        mine = []
        try:
            for _ in range(MCP_TENANT_SESSIONS):
                st, sid, body = self.mcp_init("bob")
                self.assertEqual(st, 200, body)
                mine.append(sid)
            st, sid, body = self.mcp_init("bob")
            self.assertEqual(st, 429, body)
            self.assertEqual(body["error"]["code"], "quota_exceeded", body)
            self.assertIn("MCP sessions", body["error"]["message"])
            # hers still open, and his session ids are not hers
            st, hers, body = self.mcp_init("alice")
            self.assertEqual(st, 200, body)
            st, _, body = self.req("bob", "DELETE", "/v1/mcp", headers={"Mcp-Session-Id": hers})
            self.assertEqual(st, 404, body)
            self.assertEqual(self.req("alice", "DELETE", "/v1/mcp", headers={"Mcp-Session-Id": hers})[0], 204)
        finally:
            for sid in mine:
                self.req("bob", "DELETE", "/v1/mcp", headers={"Mcp-Session-Id": sid})
        # one ended, one more opens
        st, sid, body = self.mcp_init("bob")
        self.assertEqual(st, 200, body)
        self.req("bob", "DELETE", "/v1/mcp", headers={"Mcp-Session-Id": sid})

    def test_many_watch_streams_of_one_tenant(self):
        rss0 = rss_kb(self.sup.proc.pid)
        socks, streams, refused = [], 0, {}
        try:
            for _ in range(160):
                s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=30)
                socks.append(s)
                s.sendall(("GET /v1/sandboxes/%s/fs/watch?path=/workspace HTTP/1.1\r\nHost: t\r\n"
                           "Authorization: Bearer %s\r\n\r\n" % (self.b, TOK["bob"])).encode())
            # every one answers: a stream that starts, or a JSON error
            for s in socks:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = s.recv(4096)
                    self.assertTrue(chunk, head)
                    head += chunk
                status = int(head.split()[1])
                if status == 200:
                    streams += 1
                else:
                    body = head.split(b"\r\n\r\n", 1)[1]
                    n = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
                    while len(body) < n:
                        body += s.recv(4096)
                    code = json.loads(body)["error"]["code"]
                    refused[(status, code)] = refused.get((status, code), 0) + 1
                    self.assertNotEqual(status // 100, 4, body)  # not the client's fault
            print("\n160 watches of one sandbox: %d streams, refused %r" % (streams, refused),
                  file=sys.stderr)
            # a sandbox holds at most 8 (op_watch.c: inotify's budget is the
            # host user's, shared by every sandbox), the rest "try later"
            self.assertEqual(streams, WATCHES_PER_SANDBOX)
            self.assertEqual(list(refused), [(503, "unavailable")], refused)
            # the other tenant is served meanwhile, at once
            t0 = time.monotonic()
            st, _, r = self.req("alice", "POST", "/v1/sandboxes/%s/exec" % self.a,
                                {"argv": ["cat", "/workspace/secret.txt"]})
            self.assertEqual((st, r.get("stdout")), (200, SECRET), r)
            self.assertLess(time.monotonic() - t0, 15)  # not behind his streams; a loaded machine's room
            c = http.client.HTTPConnection("127.0.0.1", self.sup.port, timeout=10)
            c.request("GET", "/v1/sandboxes/%s/fs/watch?path=/workspace" % self.a,
                      headers={"Authorization": "Bearer " + TOK["alice"]})
            resp = c.getresponse()
            hers = resp.status, (resp.read(2000) if resp.status != 200 else b"")
            c.close()
            self.assertEqual(hers[0], 200, "her watch while his are held: %r" % (hers,))
        finally:
            for s in socks:
                s.close()
        grown = (rss_kb(self.sup.proc.pid) - rss0) / 1024
        self.assertLess(grown, 64, "supervisor RSS grew %.1f MiB" % grown)
        # the agent let them go: a watch of his starts again
        deadline = time.monotonic() + 20
        while True:
            c = http.client.HTTPConnection("127.0.0.1", self.sup.port, timeout=10)
            c.request("GET", "/v1/sandboxes/%s/fs/watch?path=/workspace" % self.b,
                      headers={"Authorization": "Bearer " + TOK["bob"]})
            status = c.getresponse().status
            c.close()
            if status == 200:
                break
            self.assertLess(time.monotonic(), deadline, status)
            time.sleep(0.2)
        self.alice_untouched()

    def test_zz_tokens_nowhere(self):
        """After all of the above: no token in the supervisor's log, in a
        command's environment, in any file of the state folder (catalog,
        snapshots, volumes' records), in a view."""
        st, _, r = self.req("alice", "POST", "/v1/sandboxes/%s/exec" % self.a,
                            {"cmd": "env; cat /proc/self/environ"})
        self.assertEqual(st, 200, r)
        views = [self.req("admin", "GET", p)[2] for p in (
            "/v1/sandboxes", "/v1/sandboxes/" + self.a, "/v1/snapshots", "/v1/volumes",
            "/v1/pools")]
        texts = {"log": self.sup.log(), "exec": json.dumps(r), "views": json.dumps(views)}
        for name, text in texts.items():
            for who, tok in TOK.items():
                self.assertNotIn(tok, text, "%s's token in the %s" % (who, name))
        needles = [t.encode() for t in TOK.values()]
        for dirpath, dirs, files in os.walk(self.sup.state_dir):
            dirs[:] = [d for d in dirs if not os.path.ismount(os.path.join(dirpath, d))]
            for n in files:
                path = os.path.join(dirpath, n)
                try:
                    if not os.path.isfile(path) or os.path.islink(path) or \
                            os.path.getsize(path) > (256 << 20):
                        continue
                    with open(path, "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                for tok in needles:
                    self.assertNotIn(tok, data, path)


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)
