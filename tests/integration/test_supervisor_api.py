"""HTTP API of a real sandbox-supervisor over loopback, with real runc
containers and the real static agent. One supervisor serves the whole
class; every container, mount and process is removed at the end, also
when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT (paths of the built binaries).
"""
import base64
import os
import re
import socket
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import (Supervisor, containers_under, mounts_under, percentile,  # noqa: E402
                         stop_clean)

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def rfc3339_to_epoch(s):
    return time.mktime(time.strptime(s, "%Y-%m-%dT%H:%M:%SZ"))


class SupervisorAPI(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(SUP, AGENT, pool_size=2, extra=["--max-output", "64K"])
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=600, env={"FOO": "from-create", "BAR": "b"})

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def exec(self, **kw):
        st, _, body = self.sup.exec(self.sb["id"], **kw)
        self.assertEqual(st, 200, body)
        return body

    def assert_error(self, resp, status, code=None):
        st, hdrs, body = resp
        self.assertEqual(st, status, body)
        self.assertTrue(hdrs.get("content-type", "").startswith("application/json"), hdrs)
        self.assertIsInstance(body["error"]["message"], str)
        self.assertTrue(body["error"]["message"])
        if code:
            self.assertEqual(body["error"]["code"], code)
        return body

    # ---- basics ----
    def test_healthz_needs_no_token(self):
        st, _, body = self.sup.request("GET", "/healthz", token=None)
        self.assertEqual((st, body), (200, {"status": "ok"}))

    def test_401_without_or_with_wrong_token(self):
        for path in ("/v1/sandboxes", "/v1/sandboxes/" + self.sb["id"], "/v1/unknown"):
            r = self.sup.request("GET", path, token=None)
            self.assert_error(r, 401, "unauthorized")
            self.assertEqual(r[1].get("www-authenticate", "")[:6], "Bearer")
        self.assert_error(self.sup.request("GET", "/v1/sandboxes", token="Bearer " + "0" * 64),
                          401, "unauthorized")
        self.assert_error(self.sup.request("GET", "/v1/sandboxes", token=self.sup.token), 401)
        self.assert_error(self.sup.request("POST", "/v1/sandboxes/%s/exec" % self.sb["id"],
                                           {"argv": ["true"]}, token="Bearer x"), 401)
        st, _, _ = self.sup.request("GET", "/v1/sandboxes", token="bearer " + self.sup.token)
        self.assertEqual(st, 200)

    def test_create_fields(self):
        sb = self.sup.create(image="host", timeout=120, env={})
        self.assertRegex(sb["id"], r"^sb-[a-z0-9]([a-z0-9-]*[a-z0-9])?-[0-9a-f]{12}$")
        self.assertEqual(sb["state"], "running")
        self.assertEqual(sb["image"], "host")
        self.assertRegex(sb["created_at"], RFC3339)
        self.assertRegex(sb["expires_at"], RFC3339)
        self.assertEqual(rfc3339_to_epoch(sb["expires_at"]) - rfc3339_to_epoch(sb["created_at"]), 120)
        self.assertLess(abs(rfc3339_to_epoch(sb["created_at"]) - time.mktime(time.gmtime())), 30)
        st, _, _ = self.sup.request("DELETE", "/v1/sandboxes/" + sb["id"])
        self.assertEqual(st, 204)
        # Defaults: empty body.
        st, _, sb2 = self.sup.request("POST", "/v1/sandboxes", b"")
        self.assertEqual(st, 201, sb2)
        self.assertEqual(rfc3339_to_epoch(sb2["expires_at"]) - rfc3339_to_epoch(sb2["created_at"]), 3600)
        self.assertEqual(self.sup.request("DELETE", "/v1/sandboxes/" + sb2["id"])[0], 204)

    # ---- exec ----
    def test_exec_argv_echo(self):
        r = self.exec(argv=["echo", "hi"])
        self.assertEqual(r["stdout"], "hi\n")
        self.assertEqual(r["stderr"], "")
        self.assertEqual(r["exit_code"], 0)
        self.assertIsNone(r["signal"])
        self.assertIsInstance(r["duration_ms"], int)
        self.assertFalse(r["timed_out"])

    def test_exec_cmd_with_pipe(self):
        r = self.exec(cmd="echo hi | tr a-z A-Z; echo err >&2")
        self.assertEqual((r["stdout"], r["stderr"], r["exit_code"]), ("HI\n", "err\n", 0))

    def test_exit_codes_and_signals(self):
        self.assertEqual(self.exec(cmd="exit 3")["exit_code"], 3)
        self.assertEqual(self.exec(argv=["false"])["exit_code"], 1)
        r = self.exec(cmd="kill -TERM $$")
        self.assertEqual((r["exit_code"], r["signal"]), (None, "TERM"))
        r = self.exec(cmd="kill -9 $$")
        self.assertEqual((r["exit_code"], r["signal"]), (None, "KILL"))
        r = self.exec(argv=["/no/such/program"])
        self.assertEqual(r["exit_code"], 127)
        self.assertIn("/no/such/program", r["stderr"])

    def test_env_and_cwd(self):
        r = self.exec(cmd='echo "$FOO $BAR $NEW"; pwd', env={"BAR": "over", "NEW": "n"}, cwd="/tmp")
        self.assertEqual(r["stdout"], "from-create over n\n/tmp\n")
        r = self.exec(cmd='echo "$FOO $BAR"')
        self.assertEqual(r["stdout"], "from-create b\n")

    def test_timeout_kills(self):
        t0 = time.monotonic()
        r = self.exec(cmd="sleep 30", timeout=0.5)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertTrue(r["timed_out"])
        self.assertEqual(r["signal"], "KILL")
        self.assertIsNone(r["exit_code"])
        self.assertGreaterEqual(r["duration_ms"], 400)

    def test_output_not_utf8(self):
        r = self.exec(cmd=r"printf 'ok\377\n'")
        self.assertEqual(r["stdout"], "ok\ufffd\n")
        self.assertEqual(base64.b64decode(r["stdout_b64"]), b"ok\xff\n")
        self.assertNotIn("stderr_b64", r)

    def test_output_cap_truncates_without_blocking(self):
        r = self.exec(cmd="head -c 300000 /dev/zero | tr '\\0' x; echo done >&2")
        self.assertEqual(r["exit_code"], 0)
        self.assertTrue(r["truncated"])
        self.assertEqual(len(r["stdout"]), 64 * 1024)
        self.assertEqual(r["stderr"], "done\n")

    def test_concurrent_execs(self):
        results = {}

        def one(i):
            c = self.sup.conn()
            try:
                results[i] = self.sup.exec(self.sb["id"], conn=c, cmd="echo %d; sleep 0.2" % i)
            finally:
                c.close()
        threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertLess(time.monotonic() - t0, 10)  # in parallel, not 12 x 0.2 s serially... plus slack
        for i in range(12):
            st, _, body = results[i]
            self.assertEqual((st, body["stdout"]), (200, "%d\n" % i))

    def test_client_gone_cancels_exec(self):
        marker = "61.%d" % (os.getpid() % 100000)  # a sleep no one else runs
        body = ('{"argv":["sleep","%s"]}' % marker).encode()
        s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=10)
        self.addCleanup(s.close)
        s.sendall(b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                  b"Content-Length: %d\r\n\r\n" % (self.sb["id"].encode(), self.sup.token.encode(),
                                                   len(body)) + body)
        probe = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"
        deadline = time.monotonic() + 10
        while marker not in self.exec(cmd=probe)["stdout"]:
            self.assertLess(time.monotonic(), deadline, "the command never started")
            time.sleep(0.05)
        s.close()
        deadline = time.monotonic() + 10
        while marker in self.exec(cmd=probe)["stdout"]:
            self.assertLess(time.monotonic(), deadline, "the command outlived its client")
            time.sleep(0.05)

    # ---- errors ----
    def test_404(self):
        self.assert_error(self.sup.request("GET", "/v1/sandboxes/sb-000000000000"), 404, "not_found")
        self.assert_error(self.sup.request("DELETE", "/v1/sandboxes/sb-000000000000"), 404, "not_found")
        self.assert_error(self.sup.request("POST", "/v1/sandboxes/sb-000000000000/exec",
                                           {"argv": ["true"]}), 404, "not_found")
        self.assert_error(self.sup.request("GET", "/v1/sandboxes/..%2f..%2fetc"), 404)
        self.assert_error(self.sup.request("GET", "/v1/nothing"), 404, "not_found")
        self.assert_error(self.sup.request("GET", "/nothing", token=None), 404, "not_found")

    def test_405(self):
        r = self.assert_error(self.sup.request("PUT", "/v1/sandboxes", b"{}"), 405,
                              "method_not_allowed")
        self.assertIsNotNone(r)
        st, hdrs, _ = self.sup.request("PATCH", "/v1/sandboxes/" + self.sb["id"], b"{}")
        self.assertEqual(st, 405)
        self.assertEqual(hdrs.get("allow"), "GET, DELETE")

    def test_400_malformed_and_wrong_types(self):
        sid = self.sb["id"]
        cases = [
            ("POST", "/v1/sandboxes", b"{"),
            ("POST", "/v1/sandboxes", b"[]"),
            ("POST", "/v1/sandboxes", {"image": 5}),
            ("POST", "/v1/sandboxes", {"timeout": "60"}),
            ("POST", "/v1/sandboxes", {"timeout": -1}),
            ("POST", "/v1/sandboxes", {"timeout": 10 ** 12}),
            ("POST", "/v1/sandboxes", {"env": {"A": 1}}),
            ("POST", "/v1/sandboxes", {"imagee": "host"}),
            ("POST", "/v1/sandboxes", {"image": "no-such-image"}),
            ("POST", "/v1/sandboxes/%s/exec" % sid, b""),
            ("POST", "/v1/sandboxes/%s/exec" % sid, b"not json"),
            ("POST", "/v1/sandboxes/%s/exec" % sid, {"argv": "echo hi"}),
            ("POST", "/v1/sandboxes/%s/exec" % sid, {"argv": ["echo", 1]}),
            ("POST", "/v1/sandboxes/%s/exec" % sid, {"argv": []}),
            ("POST", "/v1/sandboxes/%s/exec" % sid, {"argv": ["a"], "cmd": "b"}),
            ("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "true", "timeout": -1}),
            ("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "true", "timeout": "1"}),
            ("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "true", "cwd": "relative"}),
            ("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "true", "env": ["A=1"]}),
            ("POST", "/v1/sandboxes/%s/exec" % sid, {"cmd": "true", "bogus": 1}),
        ]
        for method, path, body in cases:
            with self.subTest(body=body):
                self.assert_error(self.sup.request(method, path, body), 400, "bad_request")

    def test_413_body_too_large(self):
        # Over the limit but within what evhttp reads: our JSON error.
        big = b'{"cmd":"' + b"a" * (1536 * 1024) + b'"}'
        self.assert_error(self.sup.request("POST", "/v1/sandboxes/%s/exec" % self.sb["id"], big),
                          413, "too_large")
        # Far over: evhttp refuses it itself (status only is ours to promise).
        huge = b"a" * (8 << 20)
        st, _, _ = self.sup.request("POST", "/v1/sandboxes", huge)
        self.assertEqual(st, 413)
        # The server is fine afterwards.
        self.assertEqual(self.exec(argv=["echo", "still"])["stdout"], "still\n")

    # ---- lifecycle ----
    def test_list_get_delete_and_container_gone(self):
        sb = self.sup.create(timeout=300)
        sid = sb["id"]
        st, _, body = self.sup.request("GET", "/v1/sandboxes")
        self.assertEqual(st, 200)
        self.assertIn(sid, [s["id"] for s in body["sandboxes"]])
        st, _, got = self.sup.request("GET", "/v1/sandboxes/" + sid)
        # GET of one sandbox adds its usage, read at request time
        self.assertEqual(st, 200)
        self.assertEqual(got.pop("usage")["oom_kills"], 0)
        self.assertEqual(got, sb)
        ours = [c for c, _ in containers_under(self.sup.state_dir) if c.endswith(sid)]
        self.assertEqual(len(ours), 1, containers_under(self.sup.state_dir))
        st, _, body = self.sup.request("DELETE", "/v1/sandboxes/" + sid)
        self.assertEqual((st, body), (204, b""))
        self.assert_error(self.sup.request("GET", "/v1/sandboxes/" + sid), 404)
        self.assert_error(self.sup.request("POST", "/v1/sandboxes/%s/exec" % sid, {"argv": ["true"]}), 404)
        st, _, body = self.sup.request("GET", "/v1/sandboxes")
        self.assertNotIn(sid, [s["id"] for s in body["sandboxes"]])
        self.assertEqual([c for c, _ in containers_under(self.sup.state_dir) if c.endswith(sid)], [])
        self.assertEqual([m for m in mounts_under(self.sup.state_dir) if sid in m], [])
        self.assertFalse(os.path.exists(os.path.join(self.sup.state_dir, "sandboxes", sid)))

    def test_acquire_from_warm_pool(self):
        # A create with a ready pool is given one of the pool's sandboxes
        # (a container that was there before the create), not a cold
        # create. Its time is printed, not judged: the target (p50 <= 2 ms)
        # is sbx-bench's row "acquire from a warm pool", which a test
        # beside other work cannot measure.
        times = []
        ids = []
        c = self.sup.conn()
        try:
            for _ in range(3):
                self.sup.wait_ready(n=2)
                pooled = [cid for cid, _ in containers_under(self.sup.state_dir)]
                t0 = time.perf_counter()
                st, _, sb = self.sup.request("POST", "/v1/sandboxes", {}, conn=c)
                times.append((time.perf_counter() - t0) * 1000)
                self.assertEqual(st, 201, sb)
                ids.append(sb["id"])
                self.assertTrue([cid for cid in pooled if cid.endswith("-" + sb["id"])],
                                (sb["id"], pooled))
        finally:
            c.close()
        for sid in ids:
            self.assertEqual(self.sup.request("DELETE", "/v1/sandboxes/" + sid)[0], 204)
        print("\nacquire through the API (ms): %s" % ", ".join("%.2f" % t for t in times),
              file=sys.stderr)

    def test_exec_latency(self):
        c = self.sup.conn()
        times = []
        try:
            for _ in range(30):
                t0 = time.perf_counter()
                st, _, r = self.sup.exec(self.sb["id"], conn=c, argv=["true"])
                times.append((time.perf_counter() - t0) * 1000)
                self.assertEqual((st, r["exit_code"]), (200, 0))
        finally:
            c.close()
        # Printed, not judged: the figure is sbx-bench's row "exec `true`:
        # HTTP API (POST .../exec)", which a test beside other work cannot
        # measure.
        print("\nexec true through the API: p50 %.2f ms, p99 %.2f ms" %
              (percentile(times, 50), percentile(times, 99)), file=sys.stderr)


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)
