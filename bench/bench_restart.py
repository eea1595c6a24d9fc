"""Figures of sandboxes surviving the supervisor (issue 13), real runc:

  acquire from a warm pool (POST /v1/sandboxes, pool of 4), this build
  (its catalog write before the answer) beside another build's supervisor
  (--before, e.g. main's, without a catalog), in turns, in the same run;
  restart: N handed-out sandboxes, SIGKILL (then a plain SIGTERM), a new
  supervisor on the same state folder, until every one is listed again and
  answers an exec; with --before, the same sandboxes then taken back after
  a SIGKILL by each build in turn, twice (until it listens).

  /usr/bin/python3 bench/bench_restart.py --build-dir build/release \
      [--before OTHER/sandbox-supervisor] [--n 50] [--acquires 50 (0: none)]

Stdlib only; it removes everything it made (tests/integration/sbx_harness).
"""
import argparse
import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import HEADER, emit, row  # noqa: E402
from sbx_harness import Supervisor, remove_everything_under  # noqa: E402


def acquire_ms(sup):
    sup.wait_ready(n=4)
    t0 = time.perf_counter()
    sb = sup.create()
    ms = (time.perf_counter() - t0) * 1000
    sup.request("DELETE", "/v1/sandboxes/" + sb["id"])
    return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build/release")
    ap.add_argument("--before")
    ap.add_argument("--n", type=int, default=50)
    ap.add_argument("--acquires", type=int, default=50)
    a = ap.parse_args()
    sup_bin = os.path.abspath(os.path.join(a.build_dir, "node-supervisor", "sandbox-supervisor"))
    agent = os.path.abspath(os.path.join(a.build_dir, "guest-agent", "sandbox-agent"))
    root = tempfile.mkdtemp(prefix="sbx-bench-restart-")
    sups = []
    try:
        def start(binary, name, pool):
            s = Supervisor(binary, agent, state_dir=os.path.join(root, name), pool_size=pool,
                           extra=["--max-sandboxes", str(a.n + 8)])
            sups.append(s)
            return s.start()
        print(HEADER)
        if a.acquires:
            ours = start(sup_bin, "ours", 4)
            before = start(a.before, "before", 4) if a.before else None
            mine, theirs = [], []
            for _ in range(a.acquires):
                mine.append(acquire_ms(ours))
                if before:
                    theirs.append(acquire_ms(before))
            row("acquire, pool of 4 (catalog write)", mine, "sbx", "restart.acquire")
            if before:
                row("acquire, pool of 4 (--before, no catalog)", theirs, "peer",
                    "restart.acquire_before")
                before.signal(signal.SIGINT)
                before.wait(120)
            ours.signal(signal.SIGINT)
            ours.wait(120)
        # restart with N handed-out sandboxes: killed, then stopped (SIGTERM
        # keeps them), each time a new supervisor until all answer
        s1 = start(sup_bin, "restart", 2)
        ids = [s1.create(timeout=3600)["id"] for _ in range(a.n)]
        s1.wait_ready(n=2)
        for how, sig in (("SIGKILL", signal.SIGKILL), ("SIGTERM", signal.SIGTERM)):
            t_stop = time.perf_counter()
            s1.signal(sig)
            s1.wait(120)
            t0 = time.perf_counter()
            s2 = start(sup_bin, "restart", 2)
            t_listen = (time.perf_counter() - t0) * 1000
            pending = set(ids)
            while pending:
                st, _, b = s2.request("GET", "/v1/sandboxes")
                pending -= {x["id"] for x in b["sandboxes"]}
                if time.perf_counter() - t0 > 120:
                    raise SystemExit("not all listed after 120 s: %d left" % len(pending))
            t_listed = (time.perf_counter() - t0) * 1000
            for sid in ids:
                st, _, r = s2.exec(sid, argv=["true"])
                assert st == 200, (st, r)
            t_exec = (time.perf_counter() - t0) * 1000
            what = "%s, restart with %d sandboxes:" % (how, a.n)
            for key, step, ms in (("stop", "stop", (t0 - t_stop) * 1000),
                                  ("listening", "listening", t_listen),
                                  ("listed", "all listed", t_listed),
                                  ("exec", "each exec'd once", t_exec)):
                print("| %s %-20s |      1 | %8.1f |          | sbx |" % (what, step, ms))
                emit("restart.%s.%s" % (how.lower(), key), "%s %s" % (what, step), "sbx",
                     n=1, p50_ms=ms, sandboxes=a.n)
            s1 = s2
        if a.before:
            # the same N sandboxes taken back by each binary in turn, each
            # time after a SIGKILL: the start's own part (the runtime asked
            # about every row) beside the other build's
            for rnd in range(2):
                for binary, role in ((a.before, "peer"), (sup_bin, "sbx")):
                    s1.signal(signal.SIGKILL)
                    s1.wait(120)
                    t0 = time.perf_counter()
                    s2 = start(binary, "restart", 2)
                    t_listen = (time.perf_counter() - t0) * 1000
                    st, _, b = s2.request("GET", "/v1/sandboxes")
                    assert {x["id"] for x in b["sandboxes"]} >= set(ids), "not all kept"
                    what = "SIGKILL, restart with %d sandboxes: listening (%s)" % (
                        a.n, "--before" if role == "peer" else "this build")
                    print("| %s | 1 | %8.1f | | %s |" % (what, t_listen, role))
                    emit("restart.listening_%s.%d" % ("before" if role == "peer" else "this", rnd),
                         what, role, n=1, p50_ms=t_listen, sandboxes=a.n)
                    s1 = s2
        s1.signal(signal.SIGINT)
        s1.wait(300)
    finally:
        for s in sups:
            s.cleanup()
        for name in ("ours", "before", "restart"):
            remove_everything_under(os.path.join(root, name))
        shutil.rmtree(root, True)


if __name__ == "__main__":
    main()
