"""Sandboxes survive the supervisor, with real runc containers, the real
agent and real HTTP: a supervisor killed (SIGKILL) or stopped for an upgrade
(SIGUSR2, then another copy of the binary started) on the same state folder
gives back the same sandboxes: listed with their ids, tenants, limits and
expiry, exec works, a background process's output goes on by offset, a
short lifetime still ends, the pool is refilled without duplicates, and
after a final DELETE and stop nothing is left (containers, mounts, loop
devices, runtime processes). A runtime `run` left going by a dead
supervisor is killed and its container removed, never left to finish after
the sweep. A catalog file that is no database is refused at start.
Everything made is removed at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import base64
import hashlib
import json
import os
import secrets
import shutil
import signal
import stat
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import (RUNTIME, Supervisor, containers_under, loops_under, mounts_under,  # noqa: E402
                         remove_everything_under, runtime_calls, stop_clean)
from test_processes import Output  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
MB = 1 << 20
TOK = {name: secrets.token_hex(32) for name in ("admin", "alice", "bob")}


def tenants_doc():
    def h(t):
        return "sha256:" + hashlib.sha256(t.encode()).hexdigest()
    return {"tenants": {
        "admin": {"tokens": [h(TOK["admin"])]},
        "alice": {"tokens": [h(TOK["alice"])], "max_timeout": 3600},
        "bob": {"tokens": [h(TOK["bob"])]},
    }}


def as_(who):
    return "Bearer " + TOK[who]


def sse_output(sup, sid, pid, offset, who="alice"):
    """(bytes, next offset) of a background process's output from offset,
    checking every event starts where the last ended (follow=0: what is
    there now). who: the tenant asking (None: sup's own token)."""
    tok = sup.token
    sup.token = TOK[who] if who else tok
    try:
        o = Output(sup, "/v1/sandboxes/%s/processes/%d/output?offset=%d&follow=0" % (sid, pid, offset))
    finally:
        sup.token = tok
    data = b""
    try:
        assert o.resp.status == 200, o.resp.status
        for ev, d in o.events():
            if ev in ("stdout", "stderr"):
                assert d["offset"] == offset + len(data), (d["offset"], offset, len(data))
                data += base64.b64decode(d["data"])
            elif ev == "gap":
                raise AssertionError("output lost across the restart: %r" % d)
    finally:
        o.close()
    return data, offset + len(data)


class StateDir(unittest.TestCase):
    """A state folder of the test's own and a tenants file for alice, bob
    and admin, removed with everything below it at the end."""

    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="sbx-it-restart-")
        self.state = os.path.join(self.root, "state")
        self.tenants = os.path.join(self.root, "tenants.json")
        with open(self.tenants, "w") as f:
            json.dump(tenants_doc(), f)
        self.addCleanup(shutil.rmtree, self.root, True)
        self.addCleanup(remove_everything_under, self.state)


class Restart(StateDir):
    def new(self, binary=SUP, pool_size=1, extra=()):
        s = Supervisor(binary, AGENT, state_dir=self.state, pool_size=pool_size, token=TOK["admin"],
                       extra=["--tenants", self.tenants] + list(extra))
        self.addCleanup(s.cleanup)
        return s.start()

    def listed(self, sup, want, who="admin", timeout=20):
        """The ids sup lists once every id of want is among them (their
        agents answer a few milliseconds after the start)."""
        deadline = time.monotonic() + timeout
        while True:
            st, _, b = sup.request("GET", "/v1/sandboxes", token=as_(who))
            self.assertEqual(st, 200, b)
            ids = {x["id"]: x for x in b["sandboxes"]}
            if set(want) <= set(ids) or time.monotonic() > deadline:
                return ids
            time.sleep(0.05)

    def make_world(self, s):
        """alice's sandbox with limits, env and a background process writing
        output; bob's with a short lifetime. Returns what to check later."""
        s.wait_ready()
        st, _, a = s.request("POST", "/v1/sandboxes", {
            "timeout": 1800, "env": {"WHO": "alice"},
            "resources": {"cpus": 0.5, "memory": "256M", "pids": 200}}, token=as_("alice"))
        self.assertEqual(st, 201, a)
        st, _, b = s.request("POST", "/v1/sandboxes", {"timeout": 12}, token=as_("bob"))
        self.assertEqual(st, 201, b)
        st, _, p = s.request("POST", "/v1/sandboxes/%s/processes" % a["id"], {
            "cmd": "i=0; while :; do echo line-$i; i=$((i+1)); sleep 0.02; done", "tag": "ticker"},
            token=as_("alice"))
        self.assertEqual(st, 201, p)
        # some output before the restart, read up to a known offset
        deadline = time.monotonic() + 10
        data, off = b"", 0
        while data.count(b"\n") < 5 and time.monotonic() < deadline:
            more, off = sse_output(s, a["id"], p["pid"], off)
            data += more
            time.sleep(0.05)
        self.assertGreaterEqual(data.count(b"\n"), 5, data)
        s.wait_ready()
        st, _, got_a = s.request("GET", "/v1/sandboxes/" + a["id"], token=as_("alice"))
        self.assertEqual(st, 200, got_a)
        return {"a": got_a, "b": b, "pid": p["pid"], "data": data, "off": off,
                "pooled": {c for c, _ in containers_under(self.state)}}

    def check_world(self, s, w):
        a, b = w["a"], w["b"]
        ids = self.listed(s, [a["id"], b["id"]])
        self.assertIn(a["id"], ids)
        self.assertIn(b["id"], ids)
        # tenants: each sees its own, another's is 404
        self.assertEqual(set(self.listed(s, [a["id"]], who="alice")), {a["id"]})
        self.assertEqual(s.request("GET", "/v1/sandboxes/" + a["id"], token=as_("bob"))[0], 404)
        st, _, got = s.request("GET", "/v1/sandboxes/" + a["id"], token=as_("alice"))
        self.assertEqual(st, 200, got)
        for k in ("id", "image", "isolation", "created_at", "expires_at", "resources", "state"):
            self.assertEqual(got[k], a[k], k)
        self.assertEqual(got["resources"]["memory"], 256 * MB)
        # exec, with the create's env, and the limits still in the cgroup
        st, _, r = s.request("POST", "/v1/sandboxes/%s/exec" % a["id"], {
            "cmd": "echo $WHO; cat /sys/fs/cgroup/memory/memory.limit_in_bytes"}, token=as_("alice"))
        self.assertEqual(st, 200, r)
        self.assertEqual(r["stdout"].split(), ["alice", str(256 * MB)])
        # the background process ran on: its output continues from the
        # offset read before, with no gap
        time.sleep(0.3)
        more, _ = sse_output(s, a["id"], w["pid"], w["off"])
        whole = w["data"] + more
        lines = whole.decode().split("\n")[:-1]
        self.assertEqual(lines, ["line-%d" % i for i in range(len(lines))])
        self.assertGreater(len(lines), w["data"].count(b"\n"))
        # the pool came back full, no duplicate made beside what it kept
        s.wait_ready()
        now = {c for c, _ in containers_under(self.state)}
        self.assertEqual(len(now), 3, now)
        return ids

    def finish(self, s, w):
        """bob's sandbox expires on time; then DELETE the rest and stop:
        nothing is left."""
        b = w["b"]
        left = time.mktime(time.strptime(b["expires_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.mktime(time.gmtime())
        deadline = time.monotonic() + max(left, 0) + 15
        while time.monotonic() < deadline:
            if s.request("GET", "/v1/sandboxes/" + b["id"])[0] == 404:
                break
            time.sleep(0.2)
        self.assertEqual(s.request("GET", "/v1/sandboxes/" + b["id"])[0], 404,
                         "the lifetime did not end after the restart")
        self.assertEqual(s.request("DELETE", "/v1/sandboxes/" + w["a"]["id"], token=as_("alice"))[0], 204)
        stop_clean(s)
        self.assertEqual(containers_under(self.state), [])
        self.assertEqual(mounts_under(os.path.join(self.state, "sandboxes")), [])
        self.assertEqual(loops_under(self.state), [])
        self.assertEqual(runtime_calls(self.state), [])
        self.assertEqual(os.listdir(os.path.join(self.state, "sandboxes")), [])

    def test_sigkill_keeps_every_sandbox(self):
        s1 = self.new()
        w = self.make_world(s1)
        s1.signal(signal.SIGKILL)
        s1.wait(30)
        s2 = self.new()
        self.check_world(s2, w)
        # the ones it kept are the ones there were: the pool was not made anew
        self.assertEqual({c for c, _ in containers_under(self.state)}, w["pooled"])
        self.assertRegex(s2.log(), r"earlier run: 3 sandbox\(es\) kept, 0 removed")
        self.finish(s2, w)

    def test_rolling_upgrade(self):
        s1 = self.new()
        w = self.make_world(s1)
        s1.signal(signal.SIGUSR2)
        self.assertEqual(s1.wait(60), 0, s1.log())
        self.assertNotRegex(s1.log(), "Sanitizer|runtime error")
        self.assertEqual({c for c, _ in containers_under(self.state)}, w["pooled"])
        # "the new binary": another file, started on the same folder
        new_bin = os.path.join(self.root, "sandbox-supervisor.new")
        shutil.copy2(SUP, new_bin)
        s2 = self.new(binary=new_bin)
        self.check_world(s2, w)
        self.assertEqual({c for c, _ in containers_under(self.state)}, w["pooled"])
        self.finish(s2, w)

    def runs(self):
        """Pids of `<runtime> run` calls for this state folder."""
        res = []
        for pid in runtime_calls(self.state):
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    if b"\0run\0" in f.read():
                        res.append(pid)
            except OSError:
                pass
        return res

    def test_runtime_run_of_a_dead_supervisor_is_removed(self):
        # A runtime that takes 3 s before it runs a container: the window
        # in which the supervisor dies. The call leads its own session and
        # outlives the supervisor; the next start must kill it.
        slow = os.path.join(self.root, "slow-runc")
        with open(slow, "w") as f:
            f.write("#!/bin/sh\n"
                    "for a in \"$@\"; do [ \"$a\" = run ] && sleep 3; done\n"
                    "exec %s \"$@\"\n" % shutil.which(RUNTIME))
        os.chmod(slow, stat.S_IRWXU)
        s1 = self.new(pool_size=0, extra=["--runtime", slow])
        c = s1.conn(30)
        c.request("POST", "/v1/sandboxes", body=b"{}", headers={"Authorization": as_("alice")})
        deadline = time.monotonic() + 20
        while not self.runs() and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertTrue(self.runs(), "the create never called the runtime's run")
        s1.signal(signal.SIGKILL)
        s1.wait(30)
        c.close()
        self.assertTrue(self.runs(), "the runtime call died with the supervisor")
        s2 = self.new(pool_size=0)
        self.assertRegex(s2.log(), r"killed \d+ runtime call")
        self.assertEqual(self.runs(), [])
        self.assertEqual([p for p in runtime_calls(self.state) if p != s2.proc.pid], [])
        # past the moment the killed `run` would have made its container
        time.sleep(4)
        self.assertEqual(containers_under(self.state), [])
        self.assertEqual(s2.request("GET", "/v1/sandboxes")[2]["sandboxes"], [])
        stop_clean(s2)
        self.assertEqual(mounts_under(os.path.join(self.state, "sandboxes")), [])
        self.assertEqual(os.listdir(os.path.join(self.state, "sandboxes")), [])

    def test_renew_survives_a_restart(self):
        s1 = self.new(pool_size=0)
        st, _, sb = s1.request("POST", "/v1/sandboxes", {"timeout": 4}, token=as_("alice"))
        self.assertEqual(st, 201, sb)
        path = "/v1/sandboxes/%s/timeout" % sb["id"]
        # refused: another tenant's (404, as an unknown id), bad bodies, over
        # alice's most (3600)
        self.assertEqual(s1.request("POST", path, {"timeout": 60}, token=as_("bob"))[0], 404)
        for body, frag in (({"timeout": 0}, "want 1.."), ({"timeout": 3601}, "tenant alice's most"),
                           ({"timeout": 60, "x": 1}, "only field"), ("[", "malformed JSON")):
            st, _, b = s1.request("POST", path, body, token=as_("alice"))
            self.assertEqual(st, 400, b)
            self.assertIn(frag, b["error"]["message"] if isinstance(b.get("error"), dict)
                          else json.dumps(b))
        t0 = time.time()
        st, _, got = s1.request("POST", path, {"timeout": 120}, token=as_("alice"))
        self.assertEqual(st, 200, got)
        exp = time.mktime(time.strptime(got["expires_at"], "%Y-%m-%dT%H:%M:%SZ")) - time.mktime(time.gmtime(0))
        self.assertLessEqual(abs(exp - (t0 + 120)), 2, got)
        self.assertEqual(s1.request("GET", "/v1/sandboxes/" + sb["id"], token=as_("alice"))[2]["expires_at"],
                         got["expires_at"])
        time.sleep(5)  # past the first lifetime
        self.assertEqual(s1.request("GET", "/v1/sandboxes/" + sb["id"], token=as_("alice"))[0], 200)
        # the new lifetime is in the catalog: a restart keeps it
        s1.signal(signal.SIGKILL)
        s1.wait(30)
        s2 = self.new(pool_size=0)
        ids = self.listed(s2, [sb["id"]], who="alice")
        self.assertEqual(ids[sb["id"]]["expires_at"], got["expires_at"])
        # shortened: it ends on the new time
        st, _, got = s2.request("POST", path, {"timeout": 1}, token=as_("alice"))
        self.assertEqual(st, 200, got)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and s2.request("GET", "/v1/sandboxes/" + sb["id"])[0] != 404:
            time.sleep(0.1)
        self.assertEqual(s2.request("GET", "/v1/sandboxes/" + sb["id"])[0], 404)
        self.assertEqual(s2.request("POST", path, {"timeout": 60}, token=as_("alice"))[0], 404)
        stop_clean(s2)

    def test_catalog_not_a_database_refused(self):
        os.makedirs(self.state)
        with open(os.path.join(self.state, "catalog.db"), "wb") as f:
            f.write(b"garbage, not SQLite" * 64)
        s = Supervisor(SUP, AGENT, state_dir=self.state, pool_size=0)
        self.addCleanup(s.cleanup)
        with self.assertRaises(RuntimeError) as cm:
            s.start()
        self.assertIn("is not a readable catalog", str(cm.exception))
        self.assertIn("move it away", str(cm.exception))
        self.assertEqual(s.wait(10), 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
