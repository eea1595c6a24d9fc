"""What the soak (test_soak.py) found, each reduced to a test of its own,
through a real sandbox-supervisor and real HTTP:
- a download read whole and closed at once is a 200 in /metrics and the
  log, not a 499: the client's close used to beat the act's end (the
  agent's last frame), which the soak's clients sometimes did on a loaded
  machine; here a stand-in agent (standin_agent.py) answers file.read
  whole and holds its end for a second, so that every close comes first;
- a restore whose container the runtime fails to make is 503
  `unavailable` (creation failed, as for any create), not 500 `internal`:
  real runc sandboxes and the real agent, the runtime the soak's wrapper
  around runc (soak_faults.RuntimeFaults) failing every call for a while.
Everything made is removed at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import RUNTIME, Supervisor, read_head, stop_clean  # noqa: E402
from soak_faults import RuntimeFaults  # noqa: E402
from standin_agent import LISTEN, PRELUDE, launcher  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")


# The stand-in: hello, ping, and file.read answered whole (its event, one
# data frame, the empty one with eof) with its end held for END_AFTER
# seconds (or its cancel answered); anything else unknown_op.
END_AFTER = 1.0
DATA = bytes(range(256)) * 256  # 64 KiB, within a stream's first credit
STANDIN = PRELUDE + r'''
import threading, time

HELLO = pack({"t": "hello", "v": 1, "max_frame": 1 << 20, "max_streams": 1024,
              "window": 1 << 20, "caps": ["exec", "file"], "agent": "sandbox-agent/0.1.0-stand-in"})
DATA = bytes(range(256)) * 256
lock = threading.Lock()
held = set()

def send(s, frame):
    with lock:
        s.sendall(pack(frame))

def finish(s, sid, frame):
    with lock:
        if sid in held:
            held.discard(sid)
            s.sendall(pack(frame))

def end_later(s, sid):
    time.sleep(%s)
    finish(s, sid, {"t": "end", "id": sid, "r": {"bytes": len(DATA)}})

def serve(s):
    s.sendall(HELLO)
    for f in frames(s):
        t, sid = f.get("t"), f.get("id")
        if t == "req" and f.get("op") == "ping":
            send(s, {"t": "end", "id": sid, "r": {}})
        elif t == "req" and f.get("op") == "file.read":
            send(s, {"t": "event", "id": sid, "a": {
                "type": "file", "size": len(DATA), "mode": 0o644, "mtime_ns": 0, "uid": 1000,
                "gid": 1000, "nlink": 1, "ino": 7, "offset": 0, "length": len(DATA)}})
            send(s, {"t": "data", "id": sid, "ch": "file", "d": DATA})
            send(s, {"t": "data", "id": sid, "ch": "file", "d": b"", "eof": True})
            with lock:
                held.add(sid)
            threading.Thread(target=end_later, args=(s, sid), daemon=True).start()
        elif t == "req":
            send(s, {"t": "err", "id": sid, "code": "unknown_op", "msg": "stand-in"})
        elif t == "cancel":
            finish(s, sid, {"t": "err", "id": sid, "code": "cancelled"})

''' % END_AFTER + LISTEN


def counted(sup, route, status):
    """sbx_http_requests_total of route and status in sup's /metrics."""
    st, _, body = sup.request("GET", "/metrics")
    assert st == 200, (st, body)
    m = re.search(r'^sbx_http_requests_total\{route="%s",status="%d"\} (\d+)$' % (route, status),
                  body.decode(), re.M)
    return int(m.group(1)) if m else 0


class DownloadClosedAtOnce(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(SUP, "/nonexistent", pool_size=1)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.agent = os.path.join(cls.sup.root, "stand-in-agent")
        with open(cls.sup.agent, "w") as f:
            f.write(launcher(STANDIN))
        os.chmod(cls.sup.agent, 0o755)
        cls.sup.start()
        cls.sup.wait_ready()

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def test_download_read_whole_then_closed_is_200(self):
        sid = self.sup.create()["id"]
        ok0, gone0 = counted(self.sup, "GET files", 200), counted(self.sup, "GET files", 499)
        n = 5
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", self.sup.port), timeout=30)
            s.sendall(("GET /v1/sandboxes/%s/files?path=/workspace/f HTTP/1.1\r\nHost: x\r\n"
                       "Authorization: Bearer %s\r\n\r\n" % (sid, self.sup.token)).encode())
            st, hdrs, got = read_head(s, timeout=30)
            while len(got) < len(DATA):
                piece = s.recv(1 << 20)
                self.assertTrue(piece, "the answer ended early")
                got += piece
            s.close()  # at once: the stand-in's end comes END_AFTER s later
            self.assertEqual((st, hdrs.get("content-length")), (200, str(len(DATA))))
            self.assertEqual(got, DATA)
        self.assertEqual(counted(self.sup, "GET files", 499) - gone0, 0, self.sup.log())
        self.assertEqual(counted(self.sup, "GET files", 200) - ok0, n)
        self.assertNotRegex(self.sup.log(), r"GET files sandbox %s: client went away" % sid)
        # the held ends (or the cancels' answers) came on a working stream
        time.sleep(END_AFTER + 0.5)
        st, _, view = self.sup.request("GET", "/v1/sandboxes/" + sid)
        self.assertEqual((st, view["state"]), (200, "running"), view)
        self.sup.request("DELETE", "/v1/sandboxes/" + sid)


class RestoreRuntimeFails(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sbx-findings-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.runtime = RuntimeFaults(cls.tmp, 1, RUNTIME)
        cls.sup = Supervisor(SUP, AGENT, pool_size=1, extra=["--runtime", cls.runtime.path])
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.runtime.share(0)
        stop_clean(cls.sup)

    def test_restore_the_runtime_fails_is_503(self):
        sid = self.sup.create()["id"]
        st, _, snap = self.sup.request("POST", "/v1/sandboxes/%s/snapshots" % sid, {})
        self.assertEqual(st, 201, snap)
        self.runtime.share(100)
        try:
            st, _, body = self.sup.request("POST", "/v1/sandboxes", {"snapshot": snap["id"]})
        finally:
            self.runtime.share(0)
        self.assertEqual(st, 503, body)
        self.assertEqual(body["error"]["code"], "unavailable", body)
        self.assertIn("injected failure", body["error"]["message"])
        self.assertGreaterEqual(self.runtime.failed().get("run", 0), 1)
        # and once the runtime works again, the same restore is made
        st, _, body = self.sup.request("POST", "/v1/sandboxes", {"snapshot": snap["id"]})
        self.assertEqual(st, 201, body)
        for x in (sid, body["id"]):
            self.sup.request("DELETE", "/v1/sandboxes/" + x)
        self.sup.request("DELETE", "/v1/snapshots/" + snap["id"])


if __name__ == "__main__":
    if not SUP or not AGENT:
        print("SBX_SUPERVISOR and SBX_AGENT must be set")
        sys.exit(2)
    if shutil.which(RUNTIME) is None:
        print("%s not installed" % RUNTIME)
        sys.exit(77)
    unittest.main(verbosity=2)
