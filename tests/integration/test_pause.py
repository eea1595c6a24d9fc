"""Pause and resume with real runc sandboxes, the real agent and real HTTP:
a paused sandbox's CPU-spinning process uses no CPU (its cgroup's
cpuacct.usage stands still, read on the host), the kernel says frozen,
exec, files and processes answer 409 "paused", GET and the list show
"paused", pause and resume are idempotent, liveness pings shorter than the
pause do not take it for dead, resume answers (its time through the API
printed; the figure is bench/bench_pause.py's, which a loaded machine cannot
judge), a background process's output goes on by offset without a gap
after the resume, a restarted supervisor (SIGKILL) gives it back paused, and
a paused sandbox's lifetime still ends (its container removed). Everything
made is removed at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import os
import shutil
import signal
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import (RUNTIME, Supervisor, containers_under, percentile,  # noqa: E402
                         remove_everything_under, state_tag, stop_clean)
from test_restart import sse_output  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
# pings far shorter than the pauses below: a paused agent must not count as dead
PING = ["--agent-ping-interval", "0.2", "--agent-ping-timeout", "0.3"]


class Pause(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="sbx-it-pause-")
        self.state = os.path.join(self.root, "state")
        self.addCleanup(shutil.rmtree, self.root, True)
        self.addCleanup(remove_everything_under, self.state)

    def new(self):
        s = Supervisor(SUP, AGENT, state_dir=self.state, pool_size=1, extra=PING)
        self.addCleanup(s.cleanup)
        return s.start()

    def cid(self, sid):
        return "sbx-%s-%s" % (state_tag(self.state), sid)

    def cpu_ns(self, sid):
        with open("/sys/fs/cgroup/cpuacct/sbx/%s/cpuacct.usage" % self.cid(sid)) as f:
            return int(f.read())

    def assert_spins(self, sid, what):
        """20 ms of CPU for the sandbox's spinner: waited for (a loaded
        machine gives it less than a core), up to 10 s."""
        u0 = self.cpu_ns(sid)
        deadline = time.monotonic() + 10
        while self.cpu_ns(sid) - u0 <= 20_000_000:
            self.assertLess(time.monotonic(), deadline, what)
            time.sleep(0.05)

    def runc_status(self, sid):
        st = dict(containers_under(self.state))
        return st.get(self.cid(sid))

    def frozen(self, sid):
        """The kernel's word (the hybrid unified mount's cgroup.events, or
        v1's freezer.state): True, False, or None when the cgroup is gone."""
        try:
            with open("/sys/fs/cgroup/unified/sbx/%s/cgroup.events" % self.cid(sid)) as f:
                return "frozen 1" in f.read()
        except FileNotFoundError:
            pass
        try:
            with open("/sys/fs/cgroup/freezer/sbx/%s/freezer.state" % self.cid(sid)) as f:
                return f.read().strip() == "FROZEN"
        except FileNotFoundError:
            return None

    def post(self, s, sid, what):
        return s.request("POST", "/v1/sandboxes/%s/%s" % (sid, what))

    def world(self, s):
        """A sandbox with a CPU spinner and a ticker writing output."""
        s.wait_ready()
        sb = s.create(timeout=600)
        sid = sb["id"]
        for cmd, tag in (("while :; do :; done", "spin"),
                         ("i=0; while :; do echo line-$i; i=$((i+1)); sleep 0.02; done", "tick")):
            st, _, p = s.request("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": cmd, "tag": tag})
            self.assertEqual(st, 201, p)
            if tag == "tick":
                tick = p["pid"]
        # the spinner spins
        self.assert_spins(sid, "the spinner did not spin")
        return sid, tick

    def assert_frozen(self, s, sid, seconds=1.0, ask_runtime=True):
        u0 = self.cpu_ns(sid)
        time.sleep(seconds)
        grew = self.cpu_ns(sid) - u0
        self.assertLess(grew, 1_000_000, "a paused sandbox used %d ns of CPU in %.1f s" % (grew, seconds))
        self.assertIs(self.frozen(sid), True)
        if ask_runtime:  # runsc asks the frozen Sentry, which cannot answer
            self.assertIn(self.runc_status(sid), ("running", "paused"))

    def assert_refused(self, s, sid):
        for method, path, body in (("POST", "exec", {"cmd": "true"}),
                                   ("GET", "files?path=/tmp/x", None),
                                   ("GET", "processes", None)):
            st, _, b = s.request(method, "/v1/sandboxes/%s/%s" % (sid, path), body)
            self.assertEqual(st, 409, (path, b))
            self.assertEqual(b["error"]["code"], "paused", b)

    def read_all(self, s, sid, pid, off, data):
        more, off = sse_output(s, sid, pid, off, who=None)
        data += more
        lines = data.decode().split("\n")[:-1]
        self.assertEqual(lines, ["line-%d" % i for i in range(len(lines))])
        return off, data

    def test_pause_freezes_and_resume_goes_on(self):
        s = self.new()
        sid, tick = self.world(s)
        time.sleep(0.2)
        off, data = self.read_all(s, sid, tick, 0, b"")
        st, _, b = self.post(s, sid, "pause")
        self.assertEqual(st, 200, b)
        self.assertEqual(b["state"], "paused")
        # idempotent: the same answer again
        st, _, b = self.post(s, sid, "pause")
        self.assertEqual((st, b["state"]), (200, "paused"), b)
        # longer than ping interval + timeout: still there, still paused
        self.assert_frozen(s, sid, 1.0)
        self.assert_refused(s, sid)
        st, _, got = s.request("GET", "/v1/sandboxes/" + sid)
        self.assertEqual((st, got["state"]), (200, "paused"), got)
        st, _, lst = s.request("GET", "/v1/sandboxes")
        self.assertEqual([x["state"] for x in lst["sandboxes"] if x["id"] == sid], ["paused"])
        # resume, timed as the client sees it (HTTP on a kept connection)
        conn = s.conn()
        times = []
        for i in range(7):
            if i:
                self.assertEqual(self.post(s, sid, "pause")[0], 200)
            t0 = time.perf_counter()
            st, _, b = s.request("POST", "/v1/sandboxes/%s/resume" % sid, conn=conn)
            times.append((time.perf_counter() - t0) * 1000)
            self.assertEqual((st, b["state"]), (200, "running"), b)
        conn.close()
        p50 = percentile(times, 50)
        # Printed, not judged: a test beside other work cannot tell a slow
        # resume from a busy machine (10.08 ms against 10 at load 4-10);
        # the 10 ms target is bench/bench_pause.py's row "resume through
        # the API", measured the same way.
        print("resume through the API: p50 %.2f ms, max %.2f ms (%d rounds)" % (p50, max(times), len(times)))
        st, _, b = self.post(s, sid, "resume")  # idempotent
        self.assertEqual((st, b["state"]), (200, "running"), b)
        self.assertIs(self.frozen(sid), False)
        self.assertEqual(self.runc_status(sid), "running")
        # it runs again: CPU, exec, and the ticker's output on from the offset
        self.assert_spins(sid, "not running again after resume")
        st, _, r = s.exec(sid, cmd="echo ok")
        self.assertEqual((st, r["stdout"]), (200, "ok\n"), r)
        lines_before = data.count(b"\n")
        off, data = self.read_all(s, sid, tick, off, data)
        self.assertGreater(data.count(b"\n"), lines_before)
        self.assertEqual(s.request("DELETE", "/v1/sandboxes/" + sid)[0], 204)
        stop_clean(s)

    def gvisor(self):
        # gVisor's agent answers slower (ptrace platform): a ping timeout
        # still shorter than the pauses below, with room for that
        s = Supervisor(SUP, AGENT, state_dir=self.state, pool_size=0,
                       extra=["--agent-ping-interval", "0.2", "--agent-ping-timeout", "1.5",
                              "--pool", "gvisor:host=1"])
        self.addCleanup(s.cleanup)
        s.start()
        s.wait_ready()
        return s

    def test_gvisor_sandbox_pauses_too(self):
        # Under runsc the freezer holds the Sentry and its gofer, so the
        # sandbox's own processes stand as well: no CPU, 409 "paused". A
        # restart finds it paused: runsc, which asks the Sentry, would
        # hang on it frozen, so the start thaws it until its agent answers.
        s1 = self.gvisor()
        st, _, sb = s1.request("POST", "/v1/sandboxes", {"isolation": "gvisor", "timeout": 600})
        self.assertEqual((st, sb.get("isolation")), (201, "gvisor"), sb)
        sid = sb["id"]
        st, _, p = s1.request("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "while :; do :; done"})
        self.assertEqual(st, 201, p)
        self.assert_spins(sid, "the spinner did not spin")
        st, _, b = self.post(s1, sid, "pause")
        self.assertEqual((st, b["state"]), (200, "paused"), b)
        self.assert_frozen(s1, sid, 2.0, ask_runtime=False)
        self.assert_refused(s1, sid)
        s1.signal(signal.SIGKILL)
        s1.wait(30)
        s = self.gvisor()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            st, _, got = s.request("GET", "/v1/sandboxes/" + sid)
            if st == 200 and got.get("state") == "paused":
                break
            time.sleep(0.05)
        self.assertEqual((st, got.get("state")), (200, "paused"), (got, s.log()[:4000]))
        self.assert_frozen(s, sid, 2.0, ask_runtime=False)
        st, _, b = self.post(s, sid, "resume")
        self.assertEqual((st, b["state"]), (200, "running"), b)
        self.assert_spins(sid, "not running again after resume")
        st, _, r = s.exec(sid, cmd="echo ok")
        self.assertEqual((st, r["stdout"]), (200, "ok\n"), r)
        self.assertEqual(s.request("DELETE", "/v1/sandboxes/" + sid)[0], 204)
        stop_clean(s)

    def test_restart_keeps_it_paused(self):
        s1 = self.new()
        sid, tick = self.world(s1)
        self.assertEqual(self.post(s1, sid, "pause")[0], 200)
        s1.signal(signal.SIGKILL)
        s1.wait(30)
        s2 = self.new()
        deadline = time.monotonic() + 20
        got = None
        while time.monotonic() < deadline:
            st, _, got = s2.request("GET", "/v1/sandboxes/" + sid)
            if st == 200:
                break
            time.sleep(0.05)
        self.assertEqual(got["state"], "paused", got)
        self.assertIn("re-adopted", s2.log())
        self.assert_frozen(s2, sid, 1.0)
        self.assert_refused(s2, sid)
        st, _, b = self.post(s2, sid, "resume")
        self.assertEqual((st, b["state"]), (200, "running"), b)
        st, _, r = s2.exec(sid, cmd="echo ok")
        self.assertEqual((st, r["stdout"]), (200, "ok\n"), r)
        self.read_all(s2, sid, tick, 0, b"")
        self.assertEqual(s2.request("DELETE", "/v1/sandboxes/" + sid)[0], 204)
        stop_clean(s2)

    def test_paused_sandbox_still_expires(self):
        s = self.new()
        s.wait_ready()
        sid = s.create(timeout=3)["id"]
        st, _, b = self.post(s, sid, "pause")
        self.assertEqual(st, 200, b)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and s.request("GET", "/v1/sandboxes/" + sid)[0] != 404:
            time.sleep(0.1)
        self.assertEqual(s.request("GET", "/v1/sandboxes/" + sid)[0], 404)
        self.assertIsNone(self.runc_status(sid), "the expired paused sandbox's container is left")
        # and a DELETE of a paused one is as quick as of a running one
        sid = s.create(timeout=600)["id"]
        self.assertEqual(self.post(s, sid, "pause")[0], 200)
        t0 = time.monotonic()
        self.assertEqual(s.request("DELETE", "/v1/sandboxes/" + sid)[0], 204)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertIsNone(self.runc_status(sid))
        # unknown ids
        self.assertEqual(self.post(s, "nope", "pause")[0], 404)
        self.assertEqual(self.post(s, "nope", "resume")[0], 404)
        stop_clean(s)


if __name__ == "__main__":
    if not SUP or not AGENT:
        print("SBX_SUPERVISOR and SBX_AGENT must be set")
        sys.exit(2)
    if shutil.which(RUNTIME) is None:
        print("%s not installed" % RUNTIME)
        sys.exit(77)
    unittest.main(verbosity=2)
