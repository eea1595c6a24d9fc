"""The supervisor distrusts the guest (issue 9): a real sandbox-supervisor
runs stand-in agents the test writes in place of sandbox-agent (--agent),
beside the real agent, and each stand-in misbehaves on request: silent
after the request, an answer trickled a byte at a time, a frame length over
the limit, random bytes, a flood ignoring credit, an answer for a stream
never opened, a second hello, a result of the wrong types (exec's, and a
file operation's, which the route finds); and a real
agent is stopped (SIGSTOP) in the middle of a stream. For each, the
client's exec with a 2 s timeout is answered within its deadline with the
documented status (504 agent_timeout, or 502 agent_error naming what the
agent did: never a 4xx), /healthz and the other sandboxes keep answering,
the sandbox fails with the reason in its view, the supervisor's memory
stays bounded, and the sandbox can be deleted. A stand-in that floods an
exec (credit ignored, or kept within it) meets the same deadline on every
path that has one (issue 28): a buffered exec, a streamed one read at full
speed, the OpenSandbox layer's command.

One supervisor, two images: "host" (its /usr is the host's, so the
stand-in is a python3 script with Debian's python3-msgpack) and a folder
image holding Debian's static busybox and a copy of the real agent. The
--agent is a shell script that runs the real agent where it finds one and
the stand-in elsewhere. Short deadlines through the flags keep the whole
file well under two minutes. Everything made is removed at the end, also
when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import shutil
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, containers_under, small_asan_quarantine, stop_clean  # noqa: E402
from test_exec_options import agent_pid  # noqa: E402
from test_exec_stream import Stream, rss_kb, sanitized  # noqa: E402
from standin_agent import LISTEN, PRELUDE, launcher  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")

GRACE = 1.0       # --agent-grace: an exec with "timeout": 2 is ours at 3 s
IDLE = 3.0        # --agent-idle-timeout
PING = 1.0        # --agent-ping-interval
PING_WAIT = 4.0   # --agent-ping-timeout: above 2 s + grace, so a silent agent's
                  # exec sees its own deadline (504) before the sandbox fails
FRAME = 1.0       # --agent-frame-timeout
MAX_WAITING = 4   # --agent-max-waiting
SLACK = 2.0       # a shared machine, a sanitizer build

# The stand-in agent: the protocol (PROTOCOL.md) in a few lines of Python.
# It answers ping and exec (echo) like an agent until an exec of
# ["misbehave", MODE] arrives, then does what MODE says on that stream.
STANDIN = PRELUDE + r'''
import random, time

HELLO = pack({"t": "hello", "v": 1, "max_frame": 1 << 20, "max_streams": 1024,
              "window": 1 << 20, "caps": ["exec"], "agent": "sandbox-agent/0.1.0-stand-in"})

def result(**kw):
    r = {"exit_code": 0, "signal": None, "timed_out": False, "duration_us": 1000}
    r.update(kw)
    return r

def misbehave(s, mode, sid, it):
    if mode == "trickle":
        for b in pack({"t": "end", "id": sid, "r": result()}):
            s.sendall(bytes([b]))
            time.sleep(0.3)
    elif mode == "too-long":
        s.sendall(struct.pack(">I", 0x7fffffff) + b"\x81\xa1t")
    elif mode == "random":
        s.sendall(random.Random(9).randbytes(4096))
    elif mode == "flood":
        chunk = pack({"t": "data", "id": sid, "ch": "stdout", "d": b"x" * 65536})
        while True:
            s.sendall(chunk)
    elif mode == "flood-credit":  # as fast as its credit allows, never an end
        chunk = pack({"t": "data", "id": sid, "ch": "stdout", "d": b"x" * 65536})
        credit = WINDOW[0]
        while True:
            while credit >= len(chunk) - 4:
                s.sendall(chunk)
                credit -= len(chunk) - 4
            f = next(it, None)
            if f is None:
                return
            if f.get("t") == "credit" and f.get("id") == sid:
                credit += f["n"]
            elif f.get("t") == "req" and f.get("op") == "ping":
                s.sendall(pack({"t": "end", "id": f["id"], "r": {}}))
    elif mode == "unknown-stream":
        s.sendall(pack({"t": "end", "id": 999, "r": {}}))
    elif mode == "second-hello":
        s.sendall(HELLO)
    elif mode == "wrong-types":
        s.sendall(pack({"t": "end", "id": sid, "r": result(exit_code="zero")}))
    for _ in it:  # silent: read everything, answer nothing
        pass

WINDOW = [1024]  # the credit the supervisor grants per stream (its hello)

def serve(s):
    s.sendall(HELLO)
    it = frames(s)
    for f in it:
        t, sid = f.get("t"), f.get("id")
        if t == "hello":
            WINDOW[0] = f["window"]
        elif t == "req" and f.get("op") == "ping":
            s.sendall(pack({"t": "end", "id": sid, "r": {}}))
        elif t == "req" and f.get("op") == "exec":
            a = f.get("a") or {}
            argv = a.get("argv") or (a.get("cmd") or "").split()
            if argv[:1] == ["misbehave"]:
                misbehave(s, argv[1], sid, it)
                return
            if argv[:1] == ["echo"]:
                out = (" ".join(argv[1:]) + "\n").encode()
                s.sendall(pack({"t": "data", "id": sid, "ch": "stdout", "d": out}))
            s.sendall(pack({"t": "end", "id": sid, "r": result()}))
        elif t == "req" and f.get("op") == "fs.stat":  # a stat of the wrong types
            s.sendall(pack({"t": "end", "id": sid, "r": {"type": "file", "size": "big"}}))
        elif t == "req":
            s.sendall(pack({"t": "err", "id": sid, "code": "unknown_op", "msg": "stand-in"}))
        elif t == "cancel":
            s.sendall(pack({"t": "err", "id": sid, "code": "cancelled"}))

''' + LISTEN

DISPATCH = launcher(STANDIN, real="/real-agent")


def make_image(root):
    """A folder image: static busybox and a copy of the real agent."""
    img = os.path.join(root, "img")
    os.makedirs(os.path.join(img, "bin"))
    shutil.copy2("/bin/busybox", os.path.join(img, "bin", "busybox"))
    for applet in ("sh", "echo", "sleep", "seq", "cat", "true"):
        os.symlink("busybox", os.path.join(img, "bin", applet))
    shutil.copy2(AGENT, os.path.join(img, "real-agent"))
    return img


class AgentDistrust(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists("/bin/busybox"):
            raise unittest.SkipTest("needs Debian's busybox-static (scripts/install-deps)")
        small_asan_quarantine(SUP)
        cls.sup = Supervisor(SUP, "/nonexistent", pool_size=2)
        cls.addClassCleanup(cls.sup.cleanup)
        cls.img = make_image(cls.sup.root)
        cls.sup.agent = os.path.join(cls.sup.root, "stand-in-agent")
        with open(cls.sup.agent, "w") as f:
            f.write(DISPATCH)
        os.chmod(cls.sup.agent, 0o755)
        cls.sup.extra += ["--pool-images", "host," + cls.img,
                          "--agent-grace", str(GRACE), "--agent-idle-timeout", str(IDLE),
                          "--agent-ping-interval", str(PING),
                          "--agent-ping-timeout", str(PING_WAIT),
                          "--agent-frame-timeout", str(FRAME),
                          "--agent-max-waiting", str(MAX_WAITING)]
        cls.sup.start()
        cls.sup.wait_ready("host")
        cls.sup.wait_ready(cls.img)
        # the real agent, for "other sandboxes keep answering"
        cls.other = cls.sup.create(image=cls.img, timeout=600)["id"]
        cls.rss0 = rss_kb(cls.sup.proc.pid)

    @classmethod
    def tearDownClass(cls):
        # Memory stays bounded over every misbehaviour (ASan's allocator
        # keeps more, so its bound is wider).
        grown = (rss_kb(cls.sup.proc.pid) - cls.rss0) / 1024
        bound = 32 if sanitized(SUP) else 16
        print("\nsupervisor RSS grew %.1f MiB over the whole file (bound %d)" % (grown, bound),
              file=sys.stderr)
        assert grown < bound, grown
        stop_clean(cls.sup)

    # ---- helpers ----

    def others_answer(self):
        """/healthz and a sandbox with the real agent answer at once."""
        t0 = time.monotonic()
        st, _, body = self.sup.request("GET", "/healthz", token=False, timeout=5)
        self.assertEqual((st, body), (200, {"status": "ok"}))
        st, _, r = self.sup.request("POST", "/v1/sandboxes/%s/exec" % self.other,
                                    {"argv": ["echo", "still", "here"]}, timeout=5)
        self.assertEqual((st, r.get("stdout")), (200, "still here\n"), r)
        self.assertLess(time.monotonic() - t0, 2)

    def view(self, sid):
        st, _, v = self.sup.request("GET", "/v1/sandboxes/" + sid)
        self.assertEqual(st, 200, v)
        return v

    def wait_failed(self, sid, within):
        deadline = time.monotonic() + within
        while True:
            v = self.view(sid)
            if v["state"] == "failed":
                return v
            self.assertLess(time.monotonic(), deadline, v)
            time.sleep(0.1)

    def delete(self, sid):
        st, _, body = self.sup.request("DELETE", "/v1/sandboxes/" + sid)
        self.assertEqual(st, 204, body)
        self.assertEqual([c for c, _ in containers_under(self.sup.state_dir) if c.endswith(sid)],
                         [])

    def misbehave(self, mode):
        """A fresh stand-in, told to misbehave on an exec with a 2 s timeout:
        (status, body, seconds)."""
        sid = self.sup.create(image="host", timeout=600)["id"]
        st, _, r = self.sup.exec(sid, argv=["echo", "fine"])
        self.assertEqual((st, r["stdout"]), (200, "fine\n"), r)  # behaves until told
        t0 = time.monotonic()
        st, _, body = self.sup.exec(sid, argv=["misbehave", mode], timeout=2)
        return sid, st, body, time.monotonic() - t0

    def expect_agent_error(self, mode, words):
        sid, st, body, secs = self.misbehave(mode)
        print("\n%s: %d in %.2f s: %s" % (mode, st, secs, body["error"]["message"]),
              file=sys.stderr)
        self.assertEqual((st, body["error"]["code"]), (502, "agent_error"), body)
        self.assertIn(words, body["error"]["message"])
        self.assertLess(secs, 2 + GRACE + SLACK)
        v = self.wait_failed(sid, 2)
        self.assertIn(words, v["reason"])
        # what the failed sandbox answers now, at once
        st, _, body = self.sup.exec(sid, argv=["echo", "x"], timeout=2)
        self.assertEqual((st, body["error"]["code"]), (502, "agent_error"), body)
        self.assertIn(words, body["error"]["message"])
        self.others_answer()
        self.delete(sid)

    # ---- protocol violations: 502 agent_error at once, the sandbox failed ----

    def test_frame_over_the_limit(self):
        # used to be the client's 413 too_large
        self.expect_agent_error("too-long", "exceeds max_frame")

    def test_random_bytes(self):
        self.expect_agent_error("random", "the agent broke the protocol")

    def test_answer_for_an_unknown_stream(self):
        self.expect_agent_error("unknown-stream", "never opened")

    def test_second_hello(self):
        self.expect_agent_error("second-hello", "second hello")

    def test_wrong_result_types(self):
        self.expect_agent_error("wrong-types", "exit_code")

    def test_wrong_types_in_a_file_answer(self):
        # found by the files route: the same 502, the sandbox blamed
        sid = self.sup.create(image="host", timeout=600)["id"]
        st, _, body = self.sup.request("GET", "/v1/sandboxes/%s/fs/stat?path=/workspace" % sid)
        self.assertEqual((st, body["error"]["code"]), (502, "agent_error"), body)
        self.assertIn("size missing or not a uint", body["error"]["message"])
        self.assertIn("size missing or not a uint", self.wait_failed(sid, 2)["reason"])
        self.others_answer()
        self.delete(sid)

    def test_trickled_answer(self):
        # the frame deadline (1 s) passes long before the answer could end
        self.expect_agent_error("trickle", "not complete 1000 ms after its first byte")

    def test_flood_ignoring_credit(self):
        # A streamed exec whose client reads nothing for a while: the
        # supervisor holds the agent's credit, the stand-in sends on.
        sid = self.sup.create(image="host", timeout=600)["id"]
        t0 = time.monotonic()
        s = Stream(self.sup, sid, {"argv": ["misbehave", "flood"], "timeout": 2})
        try:
            time.sleep(1)
            events = list(s.events())
        finally:
            s.close()
        self.assertLess(time.monotonic() - t0, 2 + GRACE + SLACK)
        self.assertEqual(events[0][0], "start")
        self.assertTrue(all(e == "stdout" for e, _ in events[1:-1]))
        last, data = events[-1]
        err = json.loads(data)["error"]
        self.assertEqual((last, err["code"]), ("error", "agent_error"), err)
        print("\nflood: %d events, then %s in %.2f s: %s"
              % (len(events), err["code"], time.monotonic() - t0, err["message"]), file=sys.stderr)
        self.assertIn("flow_control", err["message"])
        self.assertIn("flow_control", self.wait_failed(sid, 2)["reason"])
        self.others_answer()
        self.delete(sid)

    # ---- a flood meets the deadline on every path that has one ----
    # "flood" ignores its credit, "flood-credit" keeps within it; neither
    # ever ends. Whether a client reads fast, or never waits for the bytes
    # (a buffered exec), the call gets its timed-out answer at its timeout
    # plus grace (504), or the breach of the credit ends it (502).

    def peak_growth(self, fn):
        """fn()'s result, and how far the supervisor's RSS rose above its
        start while fn ran (MiB, sampled every 20 ms)."""
        pid = self.sup.proc.pid
        start = rss_kb(pid)
        peak = [start]
        done = threading.Event()

        def sample():
            while not done.is_set():
                peak[0] = max(peak[0], rss_kb(pid))
                done.wait(0.02)

        t = threading.Thread(target=sample)
        t.start()
        try:
            return fn(), (peak[0] - start) / 1024
        finally:
            done.set()
            t.join()

    def judge_flood(self, what, mode, code, msg, secs):
        print("\n%s, %s: %s in %.2f s: %s" % (what, mode, code, secs, msg), file=sys.stderr)
        if mode == "flood-credit":
            self.assertEqual(code, "agent_timeout", msg)
        elif code != "agent_timeout":  # the supervisor fell behind: the breach
            self.assertEqual(code, "agent_error", msg)
            self.assertIn("flow_control", msg)
        self.assertLess(secs, 2 + GRACE + SLACK)

    def after_flood(self, sid, mode):
        """The stand-in that ignores its credit floods on once its stream is
        cancelled, and breaks it within a window: the sandbox fails, the
        breach named. The one within its credit stands still."""
        if mode == "flood":
            self.assertIn("flow_control", self.wait_failed(sid, 2 + SLACK)["reason"])
        self.others_answer()
        self.delete(sid)

    def test_flood_buffered_exec(self):
        """Issue 28's regression: a buffered exec held until the client gave
        up. The clock stood and ran again around every frame, losing the
        part of a millisecond each time."""
        bound = 32 if sanitized(SUP) else 16
        for mode in ("flood", "flood-credit"):
            with self.subTest(mode=mode):
                sid = self.sup.create(image="host", timeout=600)["id"]
                t0 = time.monotonic()
                (st, _, r), grown = self.peak_growth(lambda: self.sup.exec(
                    sid, argv=["misbehave", mode], timeout=2, max_output=65536))
                secs = time.monotonic() - t0
                self.assertEqual(st, 504, r)
                self.judge_flood("buffered exec", mode, r["error"]["code"],
                                 r["error"]["message"], secs)
                self.assertGreaterEqual(secs, 2 + GRACE - 0.1)
                self.assertEqual((r["timed_out"], r["signal"], r["truncated"]),
                                 (True, "KILL", True), r["error"])
                self.assertEqual(r["stdout"], "x" * 65536)
                print("supervisor RSS rose %.1f MiB during the flood (bound %d)"
                      % (grown, bound), file=sys.stderr)
                self.assertLess(grown, bound)
                self.after_flood(sid, mode)

    def test_flood_streamed_exec_read_at_once(self):
        """A streamed exec (NDJSON) whose client reads as fast as it can:
        the bytes' cost comes back and goes out again without end."""
        for mode in ("flood", "flood-credit"):
            with self.subTest(mode=mode):
                sid = self.sup.create(image="host", timeout=600)["id"]
                t0 = time.monotonic()
                s = Stream(self.sup, sid, {"argv": ["misbehave", mode], "timeout": 2},
                           accept="application/x-ndjson", timeout=30)
                n, last = 0, None
                try:
                    for ev, o in s.events():
                        n += 1
                        last = (ev, o)
                finally:
                    s.close()
                secs = time.monotonic() - t0
                self.assertEqual(last[0], "error", last)
                err = last[1]["error"]
                self.assertGreater(n, 2)
                self.judge_flood("streamed exec (%d events)" % n, mode, err["code"],
                                 err["message"], secs)
                self.after_flood(sid, mode)

    def test_flood_opensandbox_command(self):
        """The OpenSandbox layer's foreground command, its stream read at once."""
        for mode in ("flood", "flood-credit"):
            with self.subTest(mode=mode):
                sid = self.sup.create(image="host", timeout=600)["id"]
                t0 = time.monotonic()
                c = self.sup.conn(30)
                try:
                    c.request("POST", "/opensandbox/execd/%s/command" % sid,
                              body=json.dumps({"command": "misbehave " + mode, "timeout": 2000}),
                              headers={"OPEN-SANDBOX-API-KEY": self.sup.token,
                                       "Accept": "text/event-stream"})
                    r = c.getresponse()
                    self.assertEqual(r.status, 200)
                    buf, n, last = b"", 0, None
                    while True:
                        got = r.read1(1 << 20)
                        if not got:
                            break
                        buf += got
                        while b"\n\n" in buf:
                            chunk, buf = buf.split(b"\n\n", 1)
                            n += 1
                            last = json.loads(chunk)
                finally:
                    c.close()
                secs = time.monotonic() - t0
                self.assertEqual(last["type"], "error", last)
                self.judge_flood("opensandbox command (%d events)" % n, mode,
                                 last["error"]["ename"], last["error"]["evalue"], secs)
                self.after_flood(sid, mode)

    # ---- an agent that stops answering ----

    def test_silent_agent(self):
        """The exec gets its timed-out result at 2 s + grace (504), a file
        call its idle deadline (504), requests beyond --agent-max-waiting a
        503 at once; the missed ping then fails the sandbox and what still
        waited gets 502."""
        sid = self.sup.create(image="host", timeout=600)["id"]
        res = {}

        def call(name, method, path, body=None):
            t0 = time.monotonic()
            res[name] = self.sup.request(method, path, body, timeout=30) + \
                (time.monotonic() - t0,)

        base = "/v1/sandboxes/" + sid
        threads = [threading.Thread(target=call, args=a) for a in (
            ("exec", "POST", base + "/exec", {"argv": ["misbehave", "silent"], "timeout": 2}),
            ("stat", "GET", base + "/fs/stat?path=/workspace"),
            ("wait1", "POST", base + "/exec", {"argv": ["echo", "no", "timeout"]}),
            ("wait2", "POST", base + "/exec", {"argv": ["echo", "no", "timeout"]}))]
        for t in threads:
            t.start()
            time.sleep(0.2)  # in this order: the first one silences the stand-in
        deadline = time.monotonic() + 2
        while True:  # all four reached the agent (a loaded machine takes a moment)
            v = self.view(sid)
            if v["agent"]["waiting"] == MAX_WAITING:
                break
            self.assertLess(time.monotonic(), deadline, v)
            time.sleep(0.05)
        self.assertEqual(v["state"], "running", v)
        t0 = time.monotonic()
        st, _, body = self.sup.exec(sid, argv=["echo", "one", "too", "many"])
        self.assertEqual((st, body["error"]["code"]), (503, "unavailable"), body)
        self.assertIn("requests wait on the agent", body["error"]["message"])
        self.assertLess(time.monotonic() - t0, 1)
        self.others_answer()
        for t in threads:
            t.join(30)
        st, _, r, secs = res["exec"]
        print("\nsilent: exec %d in %.2f s, fs/stat %d in %.2f s, waiting %d/%d in %.2f s"
              % (st, secs, res["stat"][0], res["stat"][3], res["wait1"][0], res["wait2"][0],
                 res["wait1"][3]), file=sys.stderr)
        self.assertEqual(st, 504, r)
        self.assertEqual(r["error"]["code"], "agent_timeout")
        self.assertEqual((r["timed_out"], r["signal"], r["exit_code"], r["kill_confirmed"]),
                         (True, "KILL", None, False), r)
        self.assertGreaterEqual(secs, 2 + GRACE - 0.1)
        self.assertLess(secs, 2 + GRACE + SLACK)
        st, _, r, secs = res["stat"]
        self.assertEqual((st, r["error"]["code"]), (504, "agent_timeout"), r)
        self.assertLess(secs, IDLE + SLACK)
        for w in ("wait1", "wait2"):
            st, _, r, secs = res[w]
            self.assertEqual((st, r["error"]["code"]), (502, "agent_error"), r)
            self.assertIn("did not answer a ping", r["error"]["message"])
            self.assertLess(secs, PING + PING_WAIT + SLACK)
        v = self.wait_failed(sid, 1)
        self.assertIn("did not answer a ping: nothing came from it for 4000 ms", v["reason"])
        self.assertEqual(v["agent"]["timeouts"], 2)
        self.others_answer()
        self.delete(sid)

    def test_real_agent_stopped_mid_stream(self):
        """SIGSTOP of a real agent while it streams: the stream ends with
        error agent_timeout at 2 s + grace, the ping then fails the sandbox,
        and DELETE removes it; a stopped pooled agent is replaced."""
        sid = self.sup.create(image=self.img, timeout=600)["id"]
        pid = agent_pid(self.sup.state_dir, sid)
        t0 = time.monotonic()
        s = Stream(self.sup, sid, {"cmd": "for i in $(seq 100); do echo $i; sleep 0.1; done",
                                   "timeout": 2})
        stopped = False
        events = []
        try:
            for ev, data in s.events():
                events.append((ev, data))
                if ev == "stdout" and not stopped:
                    os.kill(pid, signal.SIGSTOP)
                    stopped = True
        finally:
            s.close()
            if not stopped:
                os.kill(pid, signal.SIGSTOP)
        secs = time.monotonic() - t0
        last, data = events[-1]
        err = json.loads(data)["error"]
        print("\nstopped agent: %s %s after %.2f s" % (last, err["code"], secs), file=sys.stderr)
        self.assertEqual((last, err["code"]), ("error", "agent_timeout"), events[-3:])
        self.assertLess(secs, 2 + GRACE + SLACK)
        self.others_answer()
        v = self.wait_failed(sid, PING + PING_WAIT + SLACK)
        self.assertIn("did not answer a ping", v["reason"])
        self.delete(sid)  # runc kills a stopped process too

        # a pooled one: the ping finds it, the pool replaces it
        def pooled_real():
            for cid, _ in containers_under(self.sup.state_dir):
                if cid.endswith(self.other):
                    continue
                try:
                    p = agent_pid(self.sup.state_dir, cid[-15:])
                    with open("/proc/%d/cmdline" % p, "rb") as f:
                        if f.read().startswith(b"/real-agent"):
                            return cid, p
                except (OSError, ValueError, KeyError):
                    continue  # one being made or removed meanwhile
            raise AssertionError("no pooled sandbox of the folder image")

        self.sup.wait_ready(self.img)
        cid, p = pooled_real()
        os.kill(p, signal.SIGSTOP)
        deadline = time.monotonic() + PING + PING_WAIT + 15
        while cid in [c for c, _ in containers_under(self.sup.state_dir)] or \
                self.sup.pools()[self.img]["ready"] < 2:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)
        st, _, r = self.sup.exec(self.sup.create(image=self.img)["id"], argv=["echo", "new"])
        self.assertEqual((st, r["stdout"]), (200, "new\n"), r)


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)
