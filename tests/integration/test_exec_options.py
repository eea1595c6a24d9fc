"""Exec options through a real sandbox-supervisor, real runc containers (or
gVisor's, SBX_IT_ISOLATION=gvisor) and
the real agent: stdin (text and base64, larger than the protocol window),
user and the root policy, rlimits, max_output, rusage, clear 400/403 errors,
and 500 concurrent execs on one sandbox and across four with no fd or
zombie left in the agents. Everything made is removed at the end, also when
a test fails.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import base64
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import (GVISOR, RUNTIME, Supervisor, containers_under,  # noqa: E402
                         sandbox_procs, stop_clean)

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")


def agent_pid(state_dir, sid):
    for cid, _ in containers_under(state_dir):
        if sid in cid:
            out = subprocess.run([RUNTIME, "state", cid], capture_output=True, text=True)
            return json.loads(out.stdout)["pid"]
    raise AssertionError("no container for %s" % sid)


def proc_table():
    """{pid: (ppid, state)} of every process on the host."""
    t = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
        except OSError:
            continue
        rest = s[s.rindex(")") + 2:].split()
        t[int(d)] = (int(rest[1]), rest[0])
    return t


def descendants(root):
    t = proc_table()
    kids = {}
    for pid, (ppid, _) in t.items():
        kids.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for k in kids.get(p, []):
            out.append((k, t[k][1]))
            todo.append(k)
    return out


def fd_count(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


class ExecOptions(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(SUP, AGENT, pool_size=4, extra=["--max-execs", "600"])
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()
        cls.sb = cls.sup.create(timeout=900)

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    def exec(self, sid=None, **kw):
        st, _, body = self.sup.exec(sid or self.sb["id"], **kw)
        self.assertEqual(st, 200, body)
        return body

    def assert_error(self, body, status, code, words):
        st, hdrs, b = self.sup.exec(self.sb["id"], **body)
        self.assertEqual((st, b["error"]["code"]), (status, code), b)
        self.assertIn(words, b["error"]["message"])

    # ---- stdin ----
    def test_stdin_text(self):
        r = self.exec(cmd="cat; echo; cat", stdin="héllo\nworld")
        self.assertEqual(r["stdout"], "héllo\nworld\n")

    def test_stdin_empty_is_eof(self):
        r = self.exec(argv=["wc", "-c"], stdin="", timeout=10)
        self.assertEqual((r["stdout"].strip(), r["timed_out"]), ("0", False))

    def test_stdin_b64_larger_than_the_window(self):
        data = os.urandom(700 * 1024)  # beyond the 256 KiB protocol window
        r = self.exec(argv=["sha256sum"], stdin_b64=base64.b64encode(data).decode(), timeout=30)
        self.assertEqual(r["stdout"].split()[0], hashlib.sha256(data).hexdigest())

    def test_stdin_with_streaming(self):
        st, hdrs, raw = self.sup.request("POST", "/v1/sandboxes/%s/exec" % self.sb["id"],
                                         {"argv": ["tr", "a-z", "A-Z"], "stdin": "abc"},
                                         headers={"Accept": "application/x-ndjson"})
        self.assertEqual(st, 200)
        evs = [json.loads(l) for l in raw.splitlines()]
        out = b"".join(base64.b64decode(e["data"]) for e in evs if e["event"] == "stdout")
        self.assertEqual(out, b"ABC")
        self.assertEqual(evs[-1]["event"], "exit")

    # ---- user, limits, output cap, rusage ----
    def test_default_user_and_root_refused(self):
        self.assertEqual(self.exec(cmd="id -u; id -un")["stdout"], "1000\nsandbox\n")
        self.assertEqual(self.exec(argv=["id", "-u"], user="sandbox")["stdout"], "1000\n")
        for u in ("root", "0"):
            self.assert_error({"argv": ["id"], "user": u}, 403, "forbidden", "--allow-root")

    def test_rlimits(self):
        r = self.exec(cmd="ulimit -n; ulimit -t",
                      rlimits={"nofile": 77, "cpu": 9, "nproc": 500, "fsize": "unlimited"})
        self.assertEqual(r["stdout"], "77\n9\n")
        r = self.exec(cmd="exec head -c 100000 /dev/zero > /tmp/big", rlimits={"fsize": 4096})
        self.assertEqual(r["signal"], "XFSZ", r)

    def test_max_output_truncates_without_killing(self):
        r = self.exec(cmd="head -c 100000 /dev/zero; echo done >&2", max_output=10)
        self.assertTrue(r["truncated"])
        self.assertEqual((len(r["stdout"]), r["stderr"], r["exit_code"]), (10, "done\n", 0))
        r = self.exec(cmd="echo 12345", max_output=0)
        self.assertEqual((r["stdout"], r["truncated"]), ("", True))

    def test_rusage(self):
        r = self.exec(argv=["python3", "-c", "b = bytearray(64 << 20); sum(range(3000000))"])
        ru = r["rusage"]
        self.assertEqual(set(ru), {"max_rss_kb", "user_ms", "sys_ms"})
        self.assertGreater(ru["max_rss_kb"], 60 << 10)
        self.assertGreater(ru["user_ms"] + ru["sys_ms"], 10)

    def test_pty(self):
        r = self.exec(cmd="tty; stty size; test -t 0 && echo in-tty", pty={"cols": 132, "rows": 43})
        lines = r["stdout"].replace("\r", "").splitlines()
        self.assertTrue(lines[0].startswith("/dev/pts/"), r)
        self.assertEqual(lines[1:], ["43 132", "in-tty"], r)
        r = self.exec(cmd="tty", pty={})
        self.assertTrue(r["stdout"].startswith("/dev/pts/"), r)
        self.assertEqual(self.exec(cmd="tty || true")["stdout"], "not a tty\n")

    # ---- the whole tree ends ----
    def procs(self):
        probe = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done"
        return self.exec(cmd=probe)["stdout"]

    def test_timeout_kills_setsid_grandchildren(self):
        m1, m2 = "71.%d" % (os.getpid() % 100000), "72.%d" % (os.getpid() % 100000)
        # A double fork into a new session: re-parented away from the
        # command, in no process group of it.
        res = []
        t = threading.Thread(target=lambda: res.append(self.exec(
            cmd="(setsid sh -c 'sleep %s' </dev/null >/dev/null 2>&1 &) ; sleep %s" % (m1, m2),
            timeout=3)))
        t.start()
        deadline = time.monotonic() + 3
        while m1 not in self.procs():  # it did run, so its end below means something
            self.assertLess(time.monotonic(), deadline, "the grandchild never started")
            time.sleep(0.05)
        t.join(30)
        self.assertTrue(res and res[0]["timed_out"], res)
        deadline = time.monotonic() + 10
        while m1 in self.procs() or m2 in self.procs():
            self.assertLess(time.monotonic(), deadline, "a grandchild outlived the timeout")
            time.sleep(0.1)

    # ---- bad input ----
    def test_bad_input_is_400(self):
        cases = [
            ({"argv": ["cat"], "stdin_b64": "a$c="}, "invalid base64 at offset 1"),
            ({"argv": ["cat"], "stdin_b64": "abc"}, "not a multiple of 4"),
            ({"argv": ["cat"], "stdin": "x", "stdin_b64": "eA=="}, "at most one"),
            ({"argv": ["cat"], "stdin": 5}, "stdin"),
            ({"argv": ["true"], "timeout": -1}, "timeout"),
            ({"argv": ["true"] * 5000}, "argv"),
            ({"argv": ["true"], "rlimits": {"nofile": -1}}, "nofile"),
            ({"argv": ["true"], "rlimits": {"stack": 1}}, "unknown limit"),
            ({"argv": ["true"], "rlimits": []}, "rlimits"),
            ({"argv": ["true"], "max_output": -5}, "max_output"),
            ({"argv": ["true"], "max_output": 1 << 40}, "max_output"),
            ({"argv": ["true"], "user": ""}, "user"),
            ({"argv": ["true"], "user": "u" * 65}, "user"),
        ]
        for body, words in cases:
            with self.subTest(body=str(body)[:80]):
                self.assert_error(body, 400, "bad_request", words)

    def test_unknown_user_is_400(self):
        st, _, b = self.sup.exec(self.sb["id"], argv=["id"], user="nobody-here")
        self.assertEqual(st, 400, b)

    # ---- many at once ----
    def run_many(self, sids, n):
        results = [None] * n

        def one(i):
            c = self.sup.conn(120)
            try:
                results[i] = self.sup.exec(sids[i % len(sids)], conn=c,
                                           cmd="echo $((%d * 3)); echo e%d >&2" % (i, i))
            except Exception as e:  # noqa: BLE001 - reported below
                results[i] = e
            finally:
                c.close()
        threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        for i, r in enumerate(results):
            self.assertNotIsInstance(r, Exception, "exec %d: %r" % (i, r))
            st, _, body = r
            self.assertEqual(st, 200, (i, body))
            self.assertEqual((body["stdout"], body["stderr"], body["exit_code"]),
                             ("%d\n" % (i * 3), "e%d\n" % i, 0), i)

    def rest(self, sid, pid):
        """(the agent's open fds, the processes under it): seen from the
        host with runc; under gVisor the processes are read inside, and the
        agent's fds are gVisor's, not the host's (None)."""
        if GVISOR:
            return None, sandbox_procs(self.sup, sid)
        return fd_count(pid), descendants(pid)

    def settled(self, sids, pids, before):
        """Waits until every agent is back to its fds and has no process
        left under it; fails with what is left."""
        deadline = time.monotonic() + 15
        while True:
            now = {p: self.rest(sid, p) for sid, p in zip(sids, pids)}
            if all(now[p][0] == before[p][0] and not now[p][1] for p in pids):
                return
            if time.monotonic() > deadline:
                self.fail("agents not back to rest: before %r, now %r" % (before, now))
            time.sleep(0.1)

    def test_500_concurrent_on_one_and_across_four(self):
        sids = [self.sb["id"]] + [self.sup.create(timeout=900)["id"] for _ in range(3)]
        for sid in sids[1:]:
            self.addCleanup(self.sup.request, "DELETE", "/v1/sandboxes/" + sid)
        pids = sids if GVISOR else [agent_pid(self.sup.state_dir, sid) for sid in sids]
        for sid in sids:
            self.exec(sid, argv=["true"])
        before = {p: self.rest(sid, p) for sid, p in zip(sids, pids)}
        for p in pids:
            self.assertEqual(before[p][1], [], "processes under agent %s before" % p)
        # Under gVisor's ptrace platform an exec costs about 0.1 s of CPU:
        # 200 at once there keep the suite's time in bounds.
        n = 200 if GVISOR else 500
        t0 = time.monotonic()
        self.run_many(sids[:1], n)
        t1 = time.monotonic()
        self.settled(sids, pids, before)
        self.run_many(sids, n)
        t2 = time.monotonic()
        self.settled(sids, pids, before)
        print("\n%d concurrent execs: one sandbox %.2fs, four sandboxes %.2fs"
              % (n, t1 - t0, t2 - t1), file=sys.stderr)


class AllowRoot(unittest.TestCase):
    def test_root_with_allow_root(self):
        sup = Supervisor(SUP, AGENT, pool_size=1, extra=["--allow-root"])
        self.addCleanup(sup.cleanup)
        sup.start()
        sup.wait_ready()
        sb = sup.create(timeout=120)
        st, _, b = sup.exec(sb["id"], argv=["id", "-u"], user="root")
        self.assertEqual((st, b.get("stdout")), (200, "0\n"), b)
        st, _, b = sup.exec(sb["id"], argv=["id", "-u"])
        self.assertEqual((st, b.get("stdout")), (200, "1000\n"), b)
        stop_clean(sup)


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("SBX_SUPERVISOR and SBX_AGENT must be set")
    unittest.main(verbosity=2)
