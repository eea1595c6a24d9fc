"""Background processes through a real sandbox-supervisor, real runc
containers and the real agent: start/list/get, output as SSE with offsets
(resume after a disconnect without holes or duplicates, a gap event when the
ring overflowed, the end event with the status), signals by name reaching a
trap, exit status after the end, DELETE ending a double-forked setsid
grandchild too (checked from the host in /proc), a terminal that resize
reaches, and clear 400/404 answers for bad input. Everything made is removed
at the end, also when a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import base64
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import GVISOR, Supervisor, sandbox_procs, stop_clean  # noqa: E402
from test_exec_options import agent_pid, descendants  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Output:
    """GET .../output as SSE: yields (event, parsed JSON) as they arrive."""

    def __init__(self, sup, path, timeout=60):
        self.conn = sup.conn(timeout)
        self.conn.request("GET", path, headers={"Authorization": "Bearer " + sup.token,
                                                "Accept": "text/event-stream"})
        self.resp = self.conn.getresponse()
        self.buf = b""

    def close(self):
        self.conn.close()

    def events(self):
        while True:
            i = self.buf.find(b"\n\n")
            if i < 0:
                chunk = self.resp.read1(65536)
                if not chunk:
                    if self.buf:
                        raise AssertionError("stream ended inside an event: %r" % self.buf[:200])
                    return
                self.buf += chunk
                continue
            raw, self.buf = self.buf[:i], self.buf[i + 2:]
            ev, data = None, None
            for line in raw.split(b"\n"):
                if line.startswith(b"event: "):
                    ev = line[7:].decode()
                elif line.startswith(b"data: "):
                    data = json.loads(line[6:])
            yield ev, data


class ProcessHelpers:
    """One supervisor (flags: EXTRA) and sandbox per class, and the requests
    the tests share."""
    EXTRA = ()

    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(SUP, AGENT, pool_size=1, extra=list(cls.EXTRA))
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=900, env={"FOO": "from-create", "BAR": "b"})
        cls.base = "/v1/sandboxes/%s/processes" % cls.sb["id"]

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    # ---- helpers ----
    def procs(self):
        """[(pid, command line)] of the sandbox's processes but the agent:
        the host's processes below the agent with runc; read inside under
        gVisor, whose processes are not the host's."""
        if GVISOR:
            return sandbox_procs(self.sup, self.sb["id"])
        root = agent_pid(self.sup.state_dir, self.sb["id"])
        return [(pid, cmdline(pid)) for pid, _ in descendants(root)]

    def marked(self, marker):
        """(pid, command line) of the processes whose command line has marker."""
        return [(pid, cmd) for pid, cmd in self.procs() if marker in cmd]

    def marked_sleeps(self, marker):
        """The first argument of each marked sleep, sorted."""
        return sorted(cmd.split()[1] for _, cmd in self.marked(marker) if cmd.startswith("sleep "))

    def req(self, method, path, body=None, **kw):
        return self.sup.request(method, self.base + path, body, **kw)

    def start(self, **body):
        st, _, b = self.req("POST", "", body)
        self.assertEqual(st, 201, b)
        pid = b["pid"]
        # Never leave one running, also when the test fails.
        self.addCleanup(lambda: self.req("DELETE", "/%d" % pid))
        return b

    def get(self, pid):
        st, _, b = self.req("GET", "/%d" % pid)
        self.assertEqual(st, 200, b)
        return b

    def wait_exited(self, pid, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            d = self.get(pid)
            if d["state"] == "exited":
                return d
            time.sleep(0.05)
        raise AssertionError("process %d still running: %r" % (pid, d))

    def read(self, pid, offset=0, follow=False, stop_after=None):
        """(bytes, events) of one output request; stop_after n output events
        closes the connection early."""
        o = Output(self.sup, "%s/%d/output?offset=%d&follow=%d" % (self.base, pid, offset,
                                                                  1 if follow else 0))
        self.assertEqual(o.resp.status, 200)
        self.assertEqual(o.resp.getheader("Content-Type"), "text/event-stream")
        evs, n = [], 0
        try:
            for ev, d in o.events():
                evs.append((ev, d))
                if ev in ("stdout", "stderr"):
                    n += 1
                    if stop_after and n >= stop_after:
                        break
        finally:
            o.close()
        return evs

    def check_contiguous(self, evs, offset, streams=None):
        """Joined output bytes of evs, checking every event starts where the
        last one ended (gaps included); streams (a dict) also gets the bytes
        of each stream apart."""
        data = b""
        for ev, d in evs:
            self.assertNotEqual(ev, "output")
            if ev in ("stdout", "stderr"):
                self.assertEqual(d["offset"], offset, evs[:3])
                chunk = base64.b64decode(d["data"])
                data += chunk
                offset += len(chunk)
                if streams is not None:
                    streams[ev] = streams.get(ev, b"") + chunk
            elif ev == "gap":
                self.assertEqual(d["from"], offset)
                self.assertGreater(d["to"], d["from"])
                offset = d["to"]
        return data, offset

    def wait_none_marked(self, marker, timeout=10):
        deadline = time.monotonic() + timeout
        while self.marked(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.marked(marker), [])

    def wait_output(self, pid, needle, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            data, _ = self.check_contiguous(self.read(pid), 0)
            if needle in data:
                return data
            time.sleep(0.05)
        raise AssertionError("%r never appeared in the output of %d" % (needle, pid))



class Processes(ProcessHelpers, unittest.TestCase):
    def test_start_list_get_and_exit_status(self):
        p = self.start(cmd="echo hello; exit 3", tag="status-test")
        self.assertEqual(p["tag"], "status-test")
        self.assertIn(p["state"], ("running", "exited"))
        d = self.wait_exited(p["pid"])
        self.assertEqual(d["exit_code"], 3)
        self.assertIsNone(d["signal"])
        self.assertEqual(d["tag"], "status-test")
        self.assertGreaterEqual(d["ended_ms"], d["started_ms"])
        self.assertGreater(d["started_ms"], 1.6e12)
        self.assertEqual(d["argv"], ["/bin/sh", "-c", "echo hello; exit 3"])
        self.assertEqual(d["output"]["end"], 6)
        st, _, b = self.req("GET", "?tag=status-test")
        self.assertEqual(st, 200, b)
        self.assertEqual([x["pid"] for x in b["processes"]], [p["pid"]])
        self.assertEqual(b["processes"][0]["exit_code"], 3)
        st, _, b = self.req("GET", "")
        self.assertEqual(st, 200, b)
        self.assertIn(p["pid"], [x["pid"] for x in b["processes"]])
        evs = self.read(p["pid"])
        self.assertEqual(evs[-1][0], "end")
        self.assertEqual(evs[-1][1]["exit_code"], 3)
        self.assertEqual(evs[-1][1]["next_offset"], 6)
        self.assertEqual(self.check_contiguous(evs, 0)[0], b"hello\n")

    def test_stdout_and_stderr_apart(self):
        # Interleaved writes to both streams, each flushed: the events say
        # which stream, the offsets count one sequence for both.
        prog = ("import sys\n"
                "for i in range(200):\n"
                "    f = sys.stderr if i % 3 == 0 else sys.stdout\n"
                "    f.write('%s %03d\\n' % ('err' if f is sys.stderr else 'out', i)); f.flush()\n")
        p = self.start(argv=["python3", "-c", prog])
        self.assertEqual(self.wait_exited(p["pid"])["exit_code"], 0)
        evs = self.read(p["pid"])
        streams = {}
        data, end = self.check_contiguous(evs, 0, streams)
        want_out = b"".join(b"out %03d\n" % i for i in range(200) if i % 3)
        want_err = b"".join(b"err %03d\n" % i for i in range(200) if i % 3 == 0)
        self.assertEqual(streams.get("stdout"), want_out)
        self.assertEqual(streams.get("stderr"), want_err)
        self.assertEqual(end, len(want_out) + len(want_err))
        # Resuming in the middle (at an event's offset) keeps the streams
        # apart, and both go on where they were.
        out_evs = [(e, d) for e, d in evs if e in ("stdout", "stderr")]
        mid = out_evs[len(out_evs) // 2][1]["offset"]
        later, want_later = {}, {}
        rest, _ = self.check_contiguous(self.read(p["pid"], offset=mid), mid, later)
        self.check_contiguous([(e, d) for e, d in out_evs if d["offset"] >= mid], mid, want_later)
        self.assertEqual(rest, data[mid:])
        self.assertEqual(later, want_later)
        # A terminal is one stream: all of it is stdout.
        q = self.start(cmd="echo to-out; echo to-err >&2", pty={})
        self.wait_exited(q["pid"])
        evs = self.read(q["pid"])
        self.assertEqual({e for e, _ in evs} - {"end"}, {"stdout"}, evs)
        self.assertEqual(self.check_contiguous(evs, 0)[0], b"to-out\r\nto-err\r\n")

    def test_env_from_create_applies(self):
        # The sandbox's create-time env, overridden key by key by the
        # request's, as for POST /exec.
        p = self.start(cmd='echo "$FOO $BAR $NEW"', env={"BAR": "over", "NEW": "n"})
        self.wait_exited(p["pid"])
        self.assertEqual(self.check_contiguous(self.read(p["pid"]), 0)[0], b"from-create over n\n")
        st, _, b = self.sup.exec(self.sb["id"], cmd='echo "$FOO $BAR $NEW"', env={"BAR": "over", "NEW": "n"})
        self.assertEqual((st, b.get("stdout")), (200, "from-create over n\n"), b)

    def test_output_resume_after_disconnect(self):
        n = 4000
        prog = ("import sys, time\n"
                "for i in range(%d):\n"
                "    sys.stdout.write('line %%06d\\n' %% i); sys.stdout.flush()\n"
                "    if i %% 100 == 0: time.sleep(0.01)\n" % n)
        p = self.start(argv=["python3", "-c", prog], buffer=4 << 20)
        want = b"".join(b"line %06d\n" % i for i in range(n))
        # First reader: a few events, then it hangs up.
        evs = self.read(p["pid"], follow=True, stop_after=3)
        got, off = self.check_contiguous(evs, 0)
        self.assertGreater(off, 0)
        # Resume where it stopped, following to the end.
        evs = self.read(p["pid"], offset=off, follow=True)
        more, end = self.check_contiguous(evs, off)
        self.assertNotIn("gap", [e for e, _ in evs])
        self.assertEqual(got + more, want)
        self.assertEqual(evs[-1][0], "end")
        self.assertEqual(evs[-1][1]["state"], "exited")
        self.assertEqual(evs[-1][1]["exit_code"], 0)
        self.assertEqual(evs[-1][1]["next_offset"], len(want))
        # Without follow at the end: nothing but the end event.
        evs = self.read(p["pid"], offset=len(want))
        self.assertEqual([e for e, _ in evs], ["end"])

    def test_slow_reader_gets_every_byte(self):
        # 8 MiB in the ring, read by a client that starts reading late:
        # the supervisor holds the agent's credit while the connection is
        # backed up and still delivers every byte in order.
        size = 8 << 20
        p = self.start(argv=["python3", "-c",
                             "import sys; sys.stdout.buffer.write(bytes(range(256)) * %d)"
                             % (size // 256)], buffer=16 << 20)
        self.wait_exited(p["pid"])
        o = Output(self.sup, "%s/%d/output" % (self.base, p["pid"]))
        try:
            self.assertEqual(o.resp.status, 200)
            time.sleep(1.0)
            evs = list(o.events())
        finally:
            o.close()
        data, end = self.check_contiguous(evs, 0)
        self.assertEqual(end, size)
        self.assertEqual(data, bytes(range(256)) * (size // 256))
        self.assertEqual(evs[-1][0], "end")
        self.assertEqual(evs[-1][1]["next_offset"], size)

    def test_ring_overflow_is_a_gap(self):
        p = self.start(cmd="head -c 100000 /dev/zero | tr '\\0' x; echo", buffer=4096)
        self.wait_exited(p["pid"])
        evs = self.read(p["pid"])
        self.assertEqual(evs[0][0], "gap", evs[:2])
        self.assertEqual(evs[0][1]["from"], 0)
        data, end = self.check_contiguous(evs, 0)
        self.assertEqual(end, 100001)
        self.assertEqual(evs[0][1]["to"], 100001 - len(data))
        self.assertLessEqual(len(data), 4096)
        self.assertEqual(data, b"x" * (len(data) - 1) + b"\n")
        self.assertEqual(evs[-1][0], "end")

    def test_stdin_in_pieces_then_eof(self):
        prog = ("import sys\n"
                "for line in sys.stdin:\n"
                "    print('got', line.strip(), flush=True)\n"
                "print('eof', flush=True)\n")
        p = self.start(argv=["python3", "-c", prog], stdin=True)
        for piece in (b"a\n", b"b\nc", b"\n"):
            st, _, b = self.req("POST", "/%d/stdin" % p["pid"], piece)
            self.assertEqual(st, 200, b)
            self.assertEqual(b["written"], len(piece))
        self.wait_output(p["pid"], b"got c\n")
        self.assertEqual(self.get(p["pid"])["state"], "running")
        st, _, b = self.req("POST", "/%d/stdin?eof=1" % p["pid"], b"")
        self.assertEqual(st, 200, b)
        self.assertEqual(self.wait_exited(p["pid"])["exit_code"], 0)
        data, _ = self.check_contiguous(self.read(p["pid"]), 0)
        self.assertEqual(data, b"got a\ngot b\ngot c\neof\n")
        # Closed: more is refused.
        st, _, b = self.req("POST", "/%d/stdin" % p["pid"], b"x")
        self.assertEqual(st, 404, b)
        # A body larger than the agent's window goes within its credit.
        q = self.start(argv=["sh", "-c", "wc -c"], stdin=True)
        body = bytes(range(256)) * 3000
        st, _, b = self.req("POST", "/%d/stdin?eof=true" % q["pid"], body)
        self.assertEqual(st, 200, b)
        self.assertEqual(b["written"], len(body))
        self.wait_exited(q["pid"])
        data, _ = self.check_contiguous(self.read(q["pid"]), 0)
        self.assertEqual(data.strip(), str(len(body)).encode())
        # Started without stdin: 400.
        r = self.start(argv=["sleep", "1000"])
        st, _, b = self.req("POST", "/%d/stdin" % r["pid"], b"x")
        self.assertEqual(st, 400, b)
        st, _, b = self.req("POST", "/%d/stdin?eof=2" % r["pid"], b"x")
        self.assertEqual(st, 400, b)

    def test_signal_reaches_a_trap(self):
        p = self.start(cmd="trap 'echo got-int; exit 7' INT; echo ready; "
                           "while :; do sleep 0.05; done")
        self.wait_output(p["pid"], b"ready")
        st, _, b = self.req("POST", "/%d/signal" % p["pid"], {"signal": "INT"})
        self.assertEqual(st, 200, b)
        d = self.wait_exited(p["pid"])
        self.assertEqual(d["exit_code"], 7)
        data, _ = self.check_contiguous(self.read(p["pid"]), 0)
        self.assertEqual(data, b"ready\ngot-int\n")
        # SIG-prefixed names and numbers work too; the status names it.
        q = self.start(argv=["sleep", "1000"])
        st, _, b = self.req("POST", "/%d/signal" % q["pid"], {"signal": "SIGTERM"})
        self.assertEqual(st, 200, b)
        self.assertEqual(self.wait_exited(q["pid"])["signal"], "TERM")
        r = self.start(argv=["sleep", "1000"])
        st, _, b = self.req("POST", "/%d/signal" % r["pid"], {"signal": 10})
        self.assertEqual(st, 200, b)
        self.assertEqual(self.wait_exited(r["pid"])["signal"], "USR1")
        # A process that has exited: 404.
        st, _, b = self.req("POST", "/%d/signal" % r["pid"], {"signal": "TERM"})
        self.assertEqual(st, 404, b)

    def test_delete_kills_the_whole_tree(self):
        marker = "4242.%d" % (os.getpid() % 1000)
        p = self.start(cmd="(setsid sh -c 'sleep 1%s & exit' &); sleep 2%s" % (marker, marker))
        deadline = time.monotonic() + 30
        while len(self.marked_sleeps(marker)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        # The grandchild (its own session) and the child both run.
        self.assertEqual(self.marked_sleeps(marker), ["1" + marker, "2" + marker])
        st, _, b = self.req("DELETE", "/%d" % p["pid"])
        self.assertEqual(st, 204, b)
        self.wait_none_marked(marker)
        d = self.get(p["pid"])
        self.assertEqual(d["state"], "exited")
        self.assertEqual(d["signal"], "KILL")
        # Deleting it again: it has exited, nothing to wait for.
        st, _, b = self.req("DELETE", "/%d" % p["pid"])
        self.assertEqual(st, 204, b)

    def test_pty_and_resize(self):
        p = self.start(cmd="tty; while :; do stty size; sleep 0.05; done",
                       pty={"cols": 80, "rows": 24})
        self.assertTrue(self.get(p["pid"])["pty"])
        data = self.wait_output(p["pid"], b"24 80")
        self.assertTrue(data.startswith(b"/dev/pts/"), data[:40])
        st, _, b = self.req("POST", "/%d/resize" % p["pid"], {"cols": 132, "rows": 43})
        self.assertEqual(st, 200, b)
        self.wait_output(p["pid"], b"43 132")
        # Not a terminal: resize is refused.
        q = self.start(argv=["sleep", "1000"])
        st, _, b = self.req("POST", "/%d/resize" % q["pid"], {"cols": 10, "rows": 10})
        self.assertEqual(st, 400, b)

    def test_bad_input(self):
        q = self.start(argv=["sleep", "1000"])
        pid = q["pid"]
        cases = [
            ("GET", "/999999", None, 404),
            ("GET", "/abc", None, 400),
            ("GET", "/0", None, 404),
            ("DELETE", "/999999", None, 404),
            ("GET", "/999999/output", None, 404),
            ("POST", "/%d/signal" % pid, {"signal": "NOPE"}, 400),
            ("POST", "/%d/signal" % pid, {"signal": 0}, 400),
            ("POST", "/%d/signal" % pid, {"signal": 32}, 400),
            ("POST", "/%d/signal" % pid, {"sig": "TERM"}, 400),
            ("POST", "/%d/signal" % pid, "not json", 400),
            ("POST", "/999999/signal", {"signal": "TERM"}, 404),
            ("POST", "/%d/resize" % pid, {"cols": 0, "rows": 10}, 400),
            ("POST", "/%d/resize" % pid, {"cols": 10}, 400),
            ("GET", "/%d/output?offset=abc" % pid, None, 400),
            ("GET", "/%d/output?offset=-1" % pid, None, 400),
            ("GET", "/%d/output?offset=99999999" % pid, None, 400),
            ("GET", "/%d/output?follow=2" % pid, None, 400),
            ("GET", "/%d/output?bogus=1" % pid, None, 400),
            ("GET", "?bogus=1", None, 400),
            ("POST", "", {"argv": ["true"], "bogus": 1}, 400),
            ("POST", "", {"tag": "x"}, 400),
            ("POST", "", {"argv": ["true"], "tag": "x" * 257}, 400),
            ("POST", "", {"argv": ["true"], "buffer": 10}, 400),
            ("POST", "", {"argv": ["true"], "stdin": "text"}, 400),
            ("POST", "", {"argv": ["true"], "stdin": 1}, 400),
            ("POST", "/999999/stdin", "x", 404),
            ("POST", "", {"argv": ["true"], "max_output": 10}, 400),
            ("POST", "", {"argv": ["true"], "user": "root"}, 403),
            ("PUT", "/%d" % pid, None, 405),
        ]
        for method, path, body, want in cases:
            st, _, b = self.req(method, path, body)
            self.assertEqual(st, want, (method, path, b))
            self.assertIsInstance(b, dict, (method, path, b))
            self.assertIn("code", b["error"])
            self.assertTrue(b["error"]["message"])
        # Root is refused as POST /exec refuses it.
        for user in ("root", "0"):
            st, _, b = self.req("POST", "", {"argv": ["true"], "user": user})
            st2, _, b2 = self.sup.exec(self.sb["id"], argv=["true"], user=user)
            self.assertEqual((st, b["error"]["code"]), (403, "forbidden"), b)
            self.assertEqual((st2, b2["error"]), (st, b["error"]))
        # A program that cannot be executed starts and exits with 127.
        x = self.start(argv=["/no/such/binary"])
        self.assertEqual(self.wait_exited(x["pid"])["exit_code"], 127)
        st, _, b = self.sup.request("GET", "/v1/sandboxes/nosuchbox/processes")
        self.assertEqual(st, 404, b)
        # The process went on through all of that.
        self.assertEqual(self.get(pid)["state"], "running")


class RootProcesses(ProcessHelpers, unittest.TestCase):
    """A supervisor with --allow-root: background processes run as root when
    asked, and a root command that kills its own holder takes its whole tree
    down with it instead of escaping the kill."""
    EXTRA = ("--allow-root",)

    def test_root_when_allowed(self):
        p = self.start(cmd="id -u", user="root")
        self.assertEqual(self.wait_exited(p["pid"])["exit_code"], 0)
        self.assertEqual(self.check_contiguous(self.read(p["pid"]), 0)[0], b"0\n")
        q = self.start(cmd="id -u")
        self.wait_exited(q["pid"])
        self.assertEqual(self.check_contiguous(self.read(q["pid"]), 0)[0], b"1000\n")

    def test_killing_its_holder_escapes_nothing(self):
        marker = "4343.%d" % (os.getpid() % 1000)
        p = self.start(cmd="(setsid sh -c 'sleep 1%s & exit' &); sleep 3%s & sleep 1; kill -9 $PPID; sleep 2%s"
                       % (marker, marker, marker), user="root")
        deadline = time.monotonic() + 30
        seen = set()
        while time.monotonic() < deadline and not seen >= {"1" + marker, "3" + marker}:
            seen.update(self.marked_sleeps(marker))
            time.sleep(0.02)
        # Proof of a tree to escape with: the setsid grandchild and a child.
        self.assertGreaterEqual(seen, {"1" + marker, "3" + marker})
        d = self.wait_exited(p["pid"])
        self.assertEqual(d["signal"], "KILL")
        # Nothing of it survives its holder, not even the other session.
        self.wait_none_marked(marker)
        st, _, b = self.req("DELETE", "/%d" % p["pid"])
        self.assertEqual(st, 204, b)
        # The same through POST /exec: answered as killed long before its
        # timeout, with nothing left.
        t0 = time.monotonic()
        st, _, b = self.sup.exec(self.sb["id"], user="root", timeout=60,
                                 cmd="(setsid sh -c 'sleep 4%s & exit' &); sleep 1; kill -9 $PPID; sleep 5%s"
                                 % (marker, marker))
        self.assertEqual((st, b.get("signal"), b.get("timed_out")), (200, "KILL", False), b)
        self.assertLess(time.monotonic() - t0, 30)
        self.wait_none_marked(marker)
        # The sandbox goes on.
        st, _, b = self.sup.exec(self.sb["id"], argv=["true"])
        self.assertEqual(st, 200, b)


if __name__ == "__main__":
    unittest.main(verbosity=2)
