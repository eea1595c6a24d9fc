"""The E2B compatibility layer (/e2b/...) through a real sandbox-supervisor
and real runc sandboxes: E2B's own npm SDK (e2b, pinned in tests/e2b/,
installed by scripts/install-npm-pinned) runs its flows through its public
API (tests/e2b/sdk_flows.mjs), unchanged, configured only by E2B_API_URL,
E2B_SANDBOX_URL and E2B_API_KEY; and the wire it parses is checked here
with Python's stdlib client: X-API-KEY as the token, their {"code",
"message"} errors (the code a number on the control plane, a Connect code
on envd's calls), the Connect protocol's envelopes (a stream's first event
the start with its pid, its end-stream envelope last, a stream's error in
it), the envdAccessToken that speaks for one sandbox and no other, and the
metadata and the token kept across a SIGKILL of the supervisor. Every
sandbox is removed at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import base64
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, remove_everything_under, stop_clean  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
HERE = os.path.dirname(os.path.abspath(__file__))
SDK_DIR = os.path.normpath(os.path.join(HERE, "..", "e2b"))


def envelope(msg, flags=0):
    b = json.dumps(msg).encode()
    return struct.pack(">BI", flags, len(b)) + b


def envelopes(data):
    """[(flags, message)] of a Connect stream's body, whole."""
    out = []
    while data:
        assert len(data) >= 5, data
        flags, n = struct.unpack(">BI", data[:5])
        out.append((flags, json.loads(data[5:5 + n])))
        data = data[5 + n:]
    return out


class E2B(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(SUP, AGENT, pool_size=2)
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

    def api(self, method, path, body=None, key=True, sup=None):
        sup = sup or self.sup
        h = {"X-API-KEY": sup.token} if key else {}
        if body is not None:
            h["Content-Type"] = "application/json"
        return sup.request(method, "/e2b" + path, body, token=False, headers=h)

    def create(self, sup=None, **kw):
        body = {"templateID": "base", "timeout": 120}
        body.update(kw)
        st, _, sb = self.api("POST", "/v2/sandboxes", body, sup=sup)
        self.assertEqual(st, 201, sb)
        return sb

    def envd(self, sb, method, msg, stream=False, token=None, sup=None, raw=None):
        sup = sup or self.sup
        h = {"E2b-Sandbox-Id": sb["sandboxID"], "E2b-Sandbox-Port": "49983",
             "X-Access-Token": token if token is not None else sb["envdAccessToken"],
             "Connect-Protocol-Version": "1",
             "Content-Type": "application/connect+json" if stream else "application/json"}
        body = raw if raw is not None else (envelope(msg) if stream else json.dumps(msg).encode())
        return sup.request("POST", "/e2b/envd/" + method, body, token=False, headers=h)

    def test_sdk_flows(self):
        if not shutil.which("node") or not os.path.isdir(os.path.join(SDK_DIR, "node_modules")):
            self.fail("node or the pinned SDK is missing: run scripts/install-deps")
        base = "http://127.0.0.1:%d" % self.sup.port
        env = dict(os.environ, E2B_API_URL=base + "/e2b", E2B_SANDBOX_URL=base + "/e2b/envd",
                   E2B_API_KEY=self.sup.token)
        env.pop("E2B_DOMAIN", None)
        p = subprocess.run(["node", os.path.join(SDK_DIR, "sdk_flows.mjs")], cwd=SDK_DIR, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=240)
        out = p.stdout.decode(errors="replace")
        print(out)
        self.assertEqual(p.returncode, 0, out + "\n" + self.sup.log())
        self.assertIn("all passed", out)

    def test_control_plane_shapes(self):
        # the Python SDK's create: POST /sandboxes with "secure"
        st, _, sb = self.api("POST", "/sandboxes", {"templateID": "base", "timeout": 60,
                                                    "secure": True, "metadata": {"m": "1"},
                                                    "envVars": {"V": "2"}})
        self.assertEqual(st, 201, sb)
        for k in ("sandboxID", "templateID", "clientID", "envdVersion", "envdAccessToken"):
            self.assertIn(k, sb)
        self.assertRegex(sb["envdVersion"], r"^\d+\.\d+\.\d+$")
        st, _, info = self.api("GET", "/sandboxes/" + sb["sandboxID"])
        self.assertEqual((st, info["metadata"], info["state"]), (200, {"m": "1"}, "running"))
        self.assertNotIn("envdAccessToken", info)
        # not found: a JSON body saying 404 (their kill() returns false on it)
        st, _, err = self.api("DELETE", "/sandboxes/nosuchsandbox")
        self.assertEqual((st, err.get("code")), (404, 404), err)
        self.assertIn("message", err)
        # no key, a wrong key: 401 in their shape
        st, _, err = self.api("GET", "/v2/sandboxes", key=False)
        self.assertEqual((st, err.get("code")), (401, 401), err)
        st, _, err = self.sup.request("GET", "/e2b/v2/sandboxes", token=False,
                                      headers={"X-API-KEY": "e2b_" + "0" * 40})
        self.assertEqual((st, err.get("code")), (401, 401), err)
        # what sbx cannot do is said, never silently dropped
        for bad, word in (({"autoPause": True}, "autoPause"), ({"bogus": 1}, "bogus"),
                          ({"templateID": ""}, "templateID"), ({"timeout": -1}, "timeout"),
                          ({"metadata": {"a": 1}}, "metadata")):
            st, _, err = self.api("POST", "/v2/sandboxes", dict({"templateID": "base"}, **bad))
            self.assertEqual((st, err.get("code")), (400, 400), (bad, err))
            self.assertIn(word, err["message"])
        st, _, err = self.api("POST", "/v2/sandboxes", "{not json")
        self.assertEqual(st, 400, err)
        # pause twice: 409 the second time (their pause() returns false)
        st, _, _ = self.api("POST", "/sandboxes/%s/pause" % sb["sandboxID"], {})
        self.assertEqual(st, 204)
        st, _, err = self.api("POST", "/sandboxes/%s/pause" % sb["sandboxID"], {})
        self.assertEqual((st, err.get("code")), (409, 409), err)
        st, _, again = self.api("POST", "/sandboxes/%s/connect" % sb["sandboxID"], {"timeout": 30})
        self.assertEqual(st, 201, again)  # resumed
        st, _, again = self.api("POST", "/v2/sandboxes/%s/connect" % sb["sandboxID"], {})
        self.assertEqual(st, 200, again)  # running already
        st, _, m = self.api("GET", "/sandboxes/%s/metrics" % sb["sandboxID"])
        self.assertEqual(st, 200, m)
        self.assertEqual(sorted(m[0]), sorted(["timestamp", "timestampUnix", "cpuCount", "cpuUsedPct",
                                               "memUsed", "memTotal", "memCache", "diskUsed",
                                               "diskTotal"]))

    def test_list_pages(self):
        ids = [self.create(metadata={"page": "yes"})["sandboxID"] for _ in range(3)]
        got, token = [], None
        for _ in range(4):
            q = "?metadata=%s&limit=2" % "page%3Dyes"
            if token:
                q += "&nextToken=" + token
            st, h, items = self.api("GET", "/v2/sandboxes" + q)
            self.assertEqual(st, 200, items)
            got += [i["sandboxID"] for i in items]
            token = h.get("x-next-token")
            if not token:
                break
        self.assertEqual(got, ids)
        st, _, err = self.api("GET", "/v2/sandboxes?state=sleeping")
        self.assertEqual((st, err.get("code")), (400, 400), err)

    def test_connect_protocol(self):
        sb = self.create()
        st, h, body = self.envd(sb, "process.Process/Start",
                                {"process": {"cmd": "/bin/sh", "args": ["-c", "echo hi; exit 3"]},
                                 "stdin": False}, stream=True)
        self.assertEqual(st, 200, body)
        self.assertEqual(h["content-type"], "application/connect+json")
        ev = envelopes(body)
        self.assertEqual(ev[0][0], 0)
        pid = ev[0][1]["event"]["start"]["pid"]
        self.assertGreater(pid, 0)
        out = b"".join(base64.b64decode(m["event"]["data"]["stdout"])
                       for f, m in ev if "data" in m.get("event", {}))
        self.assertEqual(out, b"hi\n")
        self.assertEqual(ev[-2][1]["event"]["end"],
                         {"exitCode": 3, "exited": True, "status": "exit status 3",
                          "error": "exit status 3"})
        self.assertEqual(ev[-1], (2, {}))
        # a stream's error: 200 and the end-stream envelope says it
        st, _, body = self.envd(sb, "process.Process/Connect", {"process": {"pid": 999999}},
                                stream=True)
        self.assertEqual(st, 200, body)
        ev = envelopes(body)
        self.assertEqual(ev[-1][0], 2)
        self.assertEqual(ev[-1][1]["error"]["code"], "not_found", ev)
        st, _, body = self.envd(sb, "process.Process/Start", None, stream=True, raw=b"\x01\x00\x00")
        self.assertEqual(envelopes(body)[-1][1]["error"]["code"], "invalid_argument", body)
        # unary errors: a Connect code in JSON
        st, _, err = self.envd(sb, "process.Process/SendSignal",
                               {"process": {"pid": 999999}, "signal": "SIGNAL_SIGKILL"})
        self.assertEqual((st, err.get("code")), (404, "not_found"), err)
        st, _, err = self.envd(sb, "process.Process/List", {}, raw=b"\x00")
        self.assertEqual((st, err.get("code")), (400, "invalid_argument"), err)
        st, _, lst = self.envd(sb, "process.Process/List", {})
        self.assertEqual((st, lst), (200, {"processes": []}))

    def test_access_token_is_one_sandboxs(self):
        a, b = self.create(), self.create()
        st, _, _ = self.envd(a, "process.Process/List", {})
        self.assertEqual(st, 200)
        # a's token for b, a forged one, none: 401
        for tok in (a["envdAccessToken"], "0" * 64 + ".default", ""):
            st, _, err = self.envd(b, "process.Process/List", {}, token=tok)
            self.assertEqual((st, err.get("code")), (401, "unauthenticated"), (tok, err))
        # the tenant's key works on any of its sandboxes' envd
        st, _, _ = self.sup.request("POST", "/e2b/sandboxes/%s/envd/process.Process/List" % b["sandboxID"],
                                    "{}", token=False, headers={"X-API-KEY": self.sup.token,
                                                                "Content-Type": "application/json"})
        self.assertEqual(st, 200)
        # another port at envd's URL is not served there
        h = {"E2b-Sandbox-Id": a["sandboxID"], "E2b-Sandbox-Port": "8080",
             "X-Access-Token": a["envdAccessToken"]}
        st, _, err = self.sup.request("GET", "/e2b/envd/health", token=False, headers=h)
        self.assertEqual(st, 404, err)

    def test_kept_across_a_restart(self):
        root = tempfile.mkdtemp(prefix="sbx-it-e2b-")
        state = os.path.join(root, "state")
        self.addCleanup(shutil.rmtree, root, True)
        self.addCleanup(remove_everything_under, state)

        def start():
            s = Supervisor(SUP, AGENT, state_dir=state, pool_size=0)
            self.addCleanup(s.cleanup)
            return s.start()
        s1 = start()
        sb = self.create(sup=s1, metadata={"team": "a"})
        s1.signal(signal.SIGKILL)
        s1.wait(30)
        s2 = start()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            st, _, got = self.api("GET", "/sandboxes/" + sb["sandboxID"], sup=s2)
            if st == 200:
                break
            time.sleep(0.05)
        self.assertEqual((st, got.get("metadata")), (200, {"team": "a"}), got)
        # the old envdAccessToken still speaks for it
        st, _, lst = self.envd(sb, "process.Process/List", {}, sup=s2)
        self.assertEqual(st, 200, lst)
        st, _, _ = self.api("DELETE", "/sandboxes/" + sb["sandboxID"], sup=s2)
        self.assertEqual(st, 204)
        stop_clean(s2)


if __name__ == "__main__":
    unittest.main()
