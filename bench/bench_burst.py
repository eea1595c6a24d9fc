"""A burst of concurrent creates of one image (issue 33), real runc, in the
same run:

  peer: a fixed pool of 4 (the default): the burst past the pool is served
  as fast as the node makes sandboxes (its creates a second);
  sbx: the same pool sizing itself (--pool-max), after a warm-up burst of
  the same size and the pool's refill: the burst is served from ready
  sandboxes.

Each create's answer time (ms) and the time to the last answer (s).

  /usr/bin/python3 bench/bench_burst.py --build-dir build/release [--burst 100]

Stdlib only; it removes everything it made (tests/integration/sbx_harness).
"""
import argparse
import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import emit, table  # noqa: E402
from sbx_harness import Supervisor  # noqa: E402

POOL = 4


def burst(s, n):
    """n creates at once: (each one's ms, seconds to the last answer, ids)."""
    ms, ids, errors = [], [], []
    go = threading.Event()

    def one():
        go.wait()
        t0 = time.monotonic()
        st, _, body = s.request("POST", "/v1/sandboxes", {"timeout": 600}, timeout=300)
        if st == 201:
            ms.append((time.monotonic() - t0) * 1000)
            ids.append(body["id"])
        else:
            errors.append((st, body))
    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    go.set()
    for t in threads:
        t.join()
    took = time.monotonic() - t0
    assert not errors, errors[:3]
    return ms, took, ids


def delete_all(s, ids):
    for sid in ids:
        s.request("DELETE", "/v1/sandboxes/" + sid)


def host_pool(s):
    return s.pools()["host"]


def wait_pool(s, ok, timeout=600):
    deadline = time.monotonic() + timeout
    while not ok(host_pool(s)):
        assert time.monotonic() < deadline, host_pool(s)
        time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build/release")
    ap.add_argument("--burst", type=int, default=100)
    a = ap.parse_args()
    sup_bin = os.path.abspath(os.path.join(a.build_dir, "node-supervisor", "sandbox-supervisor"))
    agent = os.path.abspath(os.path.join(a.build_dir, "guest-agent", "sandbox-agent"))
    n = a.burst
    node = ["--max-sandboxes", str(3 * n)]
    figures = {}
    for sized in (False, True):
        extra = node + (["--pool-max", str(2 * n), "--pool-window", "120"] if sized else [])
        s = Supervisor(sup_bin, agent, pool_size=POOL, extra=extra)
        try:
            s.start()
            s.wait_ready()
            if sized:
                _, _, ids = burst(s, n)      # the warm-up: the same pattern
                delete_all(s, ids)
                wait_pool(s, lambda p: p["ready"] >= n and not p["creating"])
            ms, took, ids = burst(s, n)
            figures[sized] = (ms, took)
            delete_all(s, ids)
        finally:
            s.cleanup()
    fixed, sized = figures[False], figures[True]
    table([("create in a burst of %d, a fixed pool of %d" % (n, POOL), fixed[0], "peer", "burst.fixed.each"),
           ("create in a burst of %d, self-sizing, warmed" % n, sized[0], "sbx", "burst.sized.each")],
          "last answer: %.3f s self-sizing after a warm-up, %.3f s a fixed pool of %d "
          "(%.0f creates/s past the pool)" % (sized[1], fixed[1], POOL, (n - POOL) / fixed[1]))
    emit("burst.sized", "burst of %d, self-sizing pool after a warm-up: last answer" % n, "sbx",
         s=sized[1])
    emit("burst.fixed", "burst of %d, a fixed pool of %d: last answer" % (n, POOL), "peer",
         s=fixed[1], rps=(n - POOL) / fixed[1])


if __name__ == "__main__":
    main()
