"""A supervisor restarted under load, with real runc sandboxes, the real
agent and real HTTP: 20 sandboxes of two tenants, 5 with background
processes writing output, files in them, a paused one, a pool size set by
PUT, and an upload and a streaming exec in flight; the supervisor is killed
(SIGKILL), started again on the same state folder, then stopped with a
plain SIGTERM and started again. After each start: all 20 listed with their
ids, tenants and expiry, their files intact (the cut upload left the old
file and no temporary one), the background output continuous by offset,
the streamed command ended with its connection, the paused one still
paused, the pool at the size PUT gave it, and no container or mount that
the catalog (read with Python's own sqlite3) does not hold. A final SIGINT
leaves nothing. Everything made is removed at the end, also on failure.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import sys
import time
import unittest
from urllib.parse import quote

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import (RUNTIME, Supervisor, containers_under, loops_under, mounts_under,  # noqa: E402
                         stop_clean)
from test_files_upload import Upload  # noqa: E402
from test_restart import TOK, StateDir, as_, sse_output  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
N, TICKERS = 20, 5


class RestartLoad(StateDir):
    def new(self):
        s = Supervisor(SUP, AGENT, state_dir=self.state, pool_size=1, token=TOK["admin"],
                       extra=["--tenants", self.tenants, "--max-sandboxes", "40",
                              "--drain-timeout", "1"])
        self.addCleanup(s.cleanup)
        return s.start()

    def req(self, s, who, method, path, body=None, **kw):
        return s.request(method, path, body, token=as_(who), **kw)

    def file_url(self, sid, path):
        return "/v1/sandboxes/%s/files?path=%s" % (sid, quote(path))

    def catalog(self):
        """(ids, container ids) the catalog holds, read by sqlite3 itself."""
        db = sqlite3.connect("file:%s?mode=ro" % os.path.join(self.state, "catalog.db"), uri=True)
        try:
            rows = db.execute("SELECT id, container_id FROM sandboxes").fetchall()
        finally:
            db.close()
        return {r[0] for r in rows}, {r[1] for r in rows if r[1]}

    # ---- the world ----
    def make_world(self, s):
        s.wait_ready()
        st, _, p = s.request("PUT", "/v1/pools/host", {"size": 2})
        self.assertEqual(st, 200, p)
        w = {"sbs": {}, "files": {}, "tickers": {}}
        for i in range(N):
            who = ("alice", "bob")[i % 2]
            st, _, b = self.req(s, who, "POST", "/v1/sandboxes", {"timeout": 1200 + i})
            self.assertEqual(st, 201, b)
            w["sbs"][b["id"]] = {"tenant": who, "expires_at": b["expires_at"]}
        ids = list(w["sbs"])
        for sid in ids[:TICKERS]:
            who = w["sbs"][sid]["tenant"]
            st, _, p = self.req(s, who, "POST", "/v1/sandboxes/%s/processes" % sid, {
                "cmd": "i=0; while :; do echo line-$i; i=$((i+1)); sleep 0.02; done"})
            self.assertEqual(st, 201, p)
            w["tickers"][sid] = {"pid": p["pid"], "data": b"", "off": 0}
        for sid in ids:
            who = w["sbs"][sid]["tenant"]
            data = os.urandom(64 << 10)
            st, _, b = self.req(s, who, "PUT", self.file_url(sid, "/workspace/f"), data)
            self.assertEqual(st, 200, b)
            w["files"][sid] = hashlib.sha256(data).hexdigest()
        w["paused"] = ids[-1]
        st, _, b = self.req(s, w["sbs"][ids[-1]]["tenant"], "POST", "/v1/sandboxes/%s/pause" % ids[-1])
        self.assertEqual(st, 200, b)
        for sid in w["tickers"]:
            self.read_ticker(s, w, sid)
        return w

    def read_ticker(self, s, w, sid):
        t = w["tickers"][sid]
        more, t["off"] = sse_output(s, sid, t["pid"], t["off"], who=w["sbs"][sid]["tenant"])
        t["data"] += more
        lines = t["data"].decode().split("\n")[:-1]
        self.assertEqual(lines, ["line-%d" % i for i in range(len(lines))])
        return len(lines)

    def in_flight(self, s, w):
        """An upload over /workspace/f of the first sandbox, cut halfway by
        the stop, and a streaming exec printing a marker."""
        sid = list(w["sbs"])[0]
        tok = s.token
        s.token = TOK[w["sbs"][sid]["tenant"]]
        try:
            up = Upload(s, self.file_url(sid, "/workspace/f"), length=8 << 20)
        finally:
            s.token = tok
        up.send(os.urandom(2 << 20))
        stream = socket.create_connection(("127.0.0.1", s.port), timeout=30)
        body = json.dumps({"cmd": "while :; do echo str-marker; sleep 0.05; done"}).encode()
        stream.sendall(("POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\n"
                        "Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n"
                        % (sid, as_(w["sbs"][sid]["tenant"]), len(body))).encode() + body)
        got = b""
        while got.count(b"str-marker") < 2 and b"c3RyLW1hcmtlcg" not in got:
            chunk = stream.recv(4096)
            self.assertTrue(chunk, "the stream ended early")
            got += chunk
        time.sleep(0.3)
        return up, stream

    def check_world(self, s, w):
        ids = list(w["sbs"])
        deadline = time.monotonic() + 30
        while True:
            st, _, b = s.request("GET", "/v1/sandboxes")
            listed = {x["id"]: x for x in b["sandboxes"]}
            if set(ids) <= set(listed) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(set(listed), set(ids))
        for sid, want in w["sbs"].items():
            self.assertEqual(listed[sid]["expires_at"], want["expires_at"], sid)
            other = "bob" if want["tenant"] == "alice" else "alice"
            self.assertEqual(self.req(s, want["tenant"], "GET", "/v1/sandboxes/" + sid)[0], 200)
            self.assertEqual(self.req(s, other, "GET", "/v1/sandboxes/" + sid)[0], 404)
        self.assertEqual(listed[w["paused"]]["state"], "paused")
        for sid in ids:
            if sid == w["paused"]:
                continue
            self.assertEqual(listed[sid]["state"], "running", listed[sid])
            st, _, data = self.req(s, w["sbs"][sid]["tenant"], "GET", self.file_url(sid, "/workspace/f"))
            self.assertEqual(st, 200)
            self.assertEqual(hashlib.sha256(data).hexdigest(), w["files"][sid], sid)
        # the cut upload left no temporary file beside the old one
        sid0 = ids[0]
        deadline = time.monotonic() + 10
        while True:
            st, _, r = self.req(s, w["sbs"][sid0]["tenant"], "POST", "/v1/sandboxes/%s/exec" % sid0,
                                {"cmd": "ls -A /workspace; grep -l str-mark[e]r /proc/[0-9]*/cmdline"})
            self.assertEqual(st, 200, r)
            if r["stdout"].split() == ["f"] or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        # only f: no temporary file, and no process of the streamed command
        self.assertEqual(r["stdout"].split(), ["f"], r)
        # the background output goes on from where it was read, no gap
        for sid in w["tickers"]:
            before = w["tickers"][sid]["data"].count(b"\n")
            time.sleep(0.05)
            self.assertGreater(self.read_ticker(s, w, sid), before, sid)
        # the pool at PUT's size, not the flag's
        deadline = time.monotonic() + 30
        while s.pools()["host"]["size"] != 2 or s.pools()["host"]["ready"] < 2:
            self.assertLess(time.monotonic(), deadline, s.pools())
            time.sleep(0.1)
        # nothing the catalog does not hold
        cat_ids, cat_cids = self.catalog()
        self.assertEqual({c for c, _ in containers_under(self.state)}, cat_cids)
        for m in mounts_under(os.path.join(self.state, "sandboxes")):
            self.assertIn(m.split("/sandboxes/")[1].split("/")[0], cat_ids, m)
        self.assertEqual(len(cat_ids), N + 2)

    def restart(self, s, w, sig):
        up, stream = self.in_flight(s, w)
        t0 = time.monotonic()
        s.signal(sig)
        rc = s.wait(60)
        self.assertEqual(rc, -signal.SIGKILL if sig == signal.SIGKILL else 0, s.log())
        stream.settimeout(10)
        try:
            while stream.recv(65536):
                pass
        except OSError:
            pass
        stream.close()
        up.close()
        s2 = self.new()
        print("%s: stopped and started again in %.2f s" % (signal.Signals(sig).name,
                                                            time.monotonic() - t0))
        return s2

    def test_restart_under_load(self):
        s = self.new()
        w = self.make_world(s)
        s = self.restart(s, w, signal.SIGKILL)
        self.check_world(s, w)
        s = self.restart(s, w, signal.SIGTERM)
        self.assertRegex(s.log(), r"earlier run: %d sandbox\(es\) kept, 0 removed" % (N + 2))
        self.check_world(s, w)
        stop_clean(s)
        self.assertEqual(containers_under(self.state), [])
        self.assertEqual(mounts_under(os.path.join(self.state, "sandboxes")), [])
        self.assertEqual(loops_under(self.state), [])
        self.assertEqual(os.listdir(os.path.join(self.state, "sandboxes")), [])


if __name__ == "__main__":
    if not SUP or not AGENT:
        print("SBX_SUPERVISOR and SBX_AGENT must be set")
        sys.exit(2)
    if shutil.which(RUNTIME) is None:
        print("%s not installed" % RUNTIME)
        sys.exit(77)
    unittest.main(verbosity=2)
