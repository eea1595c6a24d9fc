"""The E2B layer's filesystem side (envd's filesystem.Filesystem and its
/files routes) through a real sandbox-supervisor and real runc sandboxes:
E2B's own npm SDK (e2b, pinned in tests/e2b/) runs every call of
sandbox.files through its public API (tests/e2b/files_flows.mjs: text and
bytes, a 10 MiB file's sha256 both ways, several files in one write, ~ and
relative paths, list with symlinks, exists, getInfo, makeDir twice, rename,
remove, watchDir, and the errors as the SDK's typed errors), configured
only by E2B_API_URL, E2B_SANDBOX_URL and E2B_API_KEY; and the wire is
checked here with Python's stdlib client: their Connect error bodies
(already_exists, not_found, invalid_argument, permission_denied), /files'
{"code": <status>, "message"}, a multipart body with hostile parts refused
and nothing written, an octet-stream upload, and a WatchDir stream that
starts with {"start":{}} and ends with its end-stream envelope. Every
sandbox is removed at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, read_head, small_asan_quarantine, stop_clean  # noqa: E402
from test_e2b import SDK_DIR, envelope, envelopes  # noqa: E402
from test_exec_stream import sanitized  # noqa: E402
from test_files_upload import DISK_MARGIN, RSS_LIMIT_KB, PeakRss  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
BIG_MB = int(os.environ.get("SBX_E2B_UPLOAD_MB", "100"))


class E2BFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.asan = small_asan_quarantine(SUP)
        cls.sup = Supervisor(SUP, AGENT, pool_size=1)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def tearDown(self):
        st, _, body = self.sup.request("GET", "/v1/sandboxes")
        for sb in body.get("sandboxes", []):
            self.sup.request("DELETE", "/v1/sandboxes/" + sb["id"])

    def create(self):
        st, _, sb = self.sup.request("POST", "/e2b/v2/sandboxes", {"templateID": "base", "timeout": 120},
                                     token=False, headers={"X-API-KEY": self.sup.token,
                                                           "Content-Type": "application/json"})
        self.assertEqual(st, 201, sb)
        return sb

    def headers(self, sb, ctype=None):
        h = {"E2b-Sandbox-Id": sb["sandboxID"], "E2b-Sandbox-Port": "49983",
             "X-Access-Token": sb["envdAccessToken"]}
        if ctype:
            h["Content-Type"] = ctype
        return h

    def rpc(self, sb, method, msg, stream=False):
        h = self.headers(sb, "application/connect+json" if stream else "application/json")
        h["Connect-Protocol-Version"] = "1"
        body = envelope(msg) if stream else json.dumps(msg).encode()
        return self.sup.request("POST", "/e2b/envd/filesystem.Filesystem/" + method, body,
                                token=False, headers=h)

    def files(self, sb, method, query, body=None, ctype=None, extra=None):
        h = self.headers(sb, ctype)
        h.update(extra or {})
        return self.sup.request(method, "/e2b/envd/files?" + query, body, token=False, headers=h)

    def test_sdk_flows(self):
        if not shutil.which("node") or not os.path.isdir(os.path.join(SDK_DIR, "node_modules")):
            self.fail("node or the pinned SDK is missing: run scripts/install-deps")
        base = "http://127.0.0.1:%d" % self.sup.port
        env = dict(os.environ, E2B_API_URL=base + "/e2b", E2B_SANDBOX_URL=base + "/e2b/envd",
                   E2B_API_KEY=self.sup.token)
        env.pop("E2B_DOMAIN", None)
        p = subprocess.run(["node", os.path.join(SDK_DIR, "files_flows.mjs")], cwd=SDK_DIR, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=200)
        out = p.stdout.decode(errors="replace")
        print(out)
        self.assertEqual(p.returncode, 0, out + "\n" + self.sup.log())
        self.assertIn("all passed", out)

    def test_wire_shapes(self):
        sb = self.create()
        # MakeDir: the entry; again: already_exists (409)
        st, _, body = self.rpc(sb, "MakeDir", {"path": "/tmp/wire/d"})
        self.assertEqual(st, 200, body)
        e = body["entry"]
        self.assertEqual((e["name"], e["type"], e["path"], e["mode"], e["permissions"]),
                         ("d", "FILE_TYPE_DIRECTORY", "/tmp/wire/d", 0o755, "drwxr-xr-x"))
        self.assertIsInstance(e["size"], str)
        self.assertRegex(e["modifiedTime"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
        st, _, body = self.rpc(sb, "MakeDir", {"path": "/tmp/wire/d"})
        self.assertEqual((st, body["code"]), (409, "already_exists"), body)
        # Stat of nothing: not_found; a bad message: invalid_argument
        st, _, body = self.rpc(sb, "Stat", {"path": "/tmp/wire/none"})
        self.assertEqual((st, body["code"]), (404, "not_found"), body)
        self.assertIn("message", body)
        st, _, body = self.rpc(sb, "Stat", {"path": 7})
        self.assertEqual((st, body["code"]), (400, "invalid_argument"), body)
        st, _, body = self.rpc(sb, "ListDir", {"path": "/tmp", "depth": 99})
        self.assertEqual((st, body["code"]), (400, "invalid_argument"), body)
        # outside the policy: permission_denied, before the agent is asked
        st, _, body = self.rpc(sb, "Remove", {"path": "/etc/passwd"})
        self.assertEqual((st, body["code"]), (403, "permission_denied"), body)
        st, _, body = self.rpc(sb, "Move", {"source": "/tmp", "destination": "/tmp/x"})
        self.assertEqual((st, body["code"]), (403, "permission_denied"), body)
        # /files: a 404 as their JSON, a plain upload, a refused encoding
        st, _, body = self.files(sb, "GET", "path=/tmp/wire/none")
        self.assertEqual(st, 404)
        self.assertEqual(body["code"], 404, body)
        st, _, body = self.files(sb, "POST", "path=/tmp/wire/octet", b"raw bytes\r\n--x--",
                                 "application/octet-stream")
        self.assertEqual((st, body), (200, [{"name": "octet", "type": "file", "path": "/tmp/wire/octet"}]))
        st, _, data = self.files(sb, "GET", "path=/tmp/wire/octet")
        self.assertEqual((st, data), (200, b"raw bytes\r\n--x--"))
        st, _, body = self.files(sb, "POST", "path=/tmp/wire/gz", b"\x1f\x8b", "application/octet-stream",
                                 {"Content-Encoding": "gzip"})
        self.assertEqual((st, body["code"]), (400, 400), body)
        # multipart: a good part then a hostile one: refused, the first written
        # (as envd, one file after the other), the second not
        ct = "multipart/form-data; boundary=XyZ"
        good = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/wire/m1\"\r\n\r\n"
                b"one\r\n")
        for bad in (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/etc/evil\"\r\n\r\n"
                    b"evil\r\n--XyZ--\r\n",
                    b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n folded: x\r\n\r\nx\r\n--XyZ--",
                    b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/wire/m2\"\r\n\r\n"
                    b"cut short"):
            st, _, body = self.files(sb, "POST", "", good + bad, ct)
            self.assertIn(st, (400, 403), body)
            self.assertEqual(body["code"], st, body)
        st, _, data = self.files(sb, "GET", "path=/tmp/wire/m1")
        self.assertEqual((st, data), (200, b"one"))
        st, _, body = self.files(sb, "GET", "path=/tmp/wire/m2")
        self.assertEqual(st, 404, body)
        st, _, body = self.files(sb, "POST", "", b"--XyZ--\r\n", ct)
        self.assertEqual(st, 400, body)
        st, _, body = self.files(sb, "POST", "", b"no boundary", "multipart/form-data")
        self.assertEqual(st, 400, body)
        # WatchDir: start first; a missing folder: a 200 whose end-stream says not_found
        st, _, data = self.rpc(sb, "WatchDir", {"path": "/tmp/wire/none"}, stream=True)
        self.assertEqual(st, 200)
        ev = envelopes(data)
        self.assertEqual(ev[-1][0], 2, ev)
        self.assertEqual(ev[-1][1]["error"]["code"], "not_found", ev)

    def test_big_multipart_bounded_memory(self):
        """A 100 MiB file in a multipart body (as their SDK's files.write
        sends it) goes into the sandbox while the supervisor's RSS stays
        bounded (the body is read only as fast as the agent writes), and
        comes back by GET /files with its sha256 intact."""
        size = BIG_MB << 20
        fs = os.statvfs(self.sup.state_dir)
        if fs.f_bavail * fs.f_frsize < size + DISK_MARGIN:
            self.skipTest("needs %d MiB free under %s" % ((size + DISK_MARGIN) >> 20, self.sup.state_dir))
        sb = self.create()
        head = (b"--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"/tmp/big.bin\"\r\n"
                b"Content-Type: application/octet-stream\r\n\r\n")
        tail = b"\r\n--XyZ--\r\n"
        block = os.urandom(1 << 20)
        up = hashlib.sha256()
        rss = PeakRss({"supervisor": self.sup.proc.pid})
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=300)
        try:
            h = self.headers(sb, "multipart/form-data; boundary=XyZ")
            req = ("POST /e2b/envd/files HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n" %
                   (len(head) + size + len(tail)) + "".join("%s: %s\r\n" % kv for kv in h.items()) + "\r\n")
            t0 = time.monotonic()
            with rss:
                s.sendall(req.encode() + head)
                for i in range(BIG_MB):
                    piece = i.to_bytes(8, "little") + block[8:]  # every MiB differs
                    up.update(piece)
                    s.sendall(piece)
                s.sendall(tail)
                st, hdrs, rest = read_head(s, 300)
            dt = time.monotonic() - t0
            n = int(hdrs.get("content-length", "0"))
            while len(rest) < n:
                rest += s.recv(65536)
            self.assertEqual((st, json.loads(rest[:n])),
                             (200, [{"name": "big.bin", "type": "file", "path": "/tmp/big.bin"}]))
        finally:
            s.close()
        # back, hashed as it arrives
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=300)
        down, got = hashlib.sha256(), 0
        try:
            req = "GET /e2b/envd/files?path=/tmp/big.bin HTTP/1.1\r\nHost: x\r\n" + "".join(
                "%s: %s\r\n" % kv for kv in self.headers(sb).items()) + "\r\n"
            s.sendall(req.encode())
            st, hdrs, rest = read_head(s, 300)
            self.assertEqual((st, int(hdrs["content-length"])), (200, size))
            down.update(rest)
            got = len(rest)
            while got < size:
                c = s.recv(1 << 20)
                if not c:
                    break
                down.update(c)
                got += len(c)
        finally:
            s.close()
        self.assertEqual((got, down.hexdigest()), (size, up.hexdigest()))
        print("e2b multipart upload %d MiB: %.0f MB/s; supervisor RSS KiB before/peak: %s%s" %
              (BIG_MB, size / dt / 1e6, rss.report(), " (ASan)" if self.asan else ""), file=sys.stderr)
        rss0, peak = rss.before["supervisor"], rss.peak["supervisor"]
        if sanitized(SUP):
            self.assertLess(peak - rss0, 24 << 10, "supervisor RSS grew to %d KiB" % peak)
        else:
            self.assertLess(peak, RSS_LIMIT_KB, "supervisor RSS peaked at %d KiB" % peak)


if __name__ == "__main__":
    unittest.main(verbosity=2)
