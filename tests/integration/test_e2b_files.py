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
import json
import os
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, stop_clean  # noqa: E402
from test_e2b import SDK_DIR, envelope, envelopes  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")


class E2BFiles(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
