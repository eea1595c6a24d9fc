"""Reuse after reset (issue 15) beside destroy and create, real runc, in the
same run: rounds of create, a tenant's work (a background process, a
setsid daemon, a few files in /workspace, /tmp and /dev/shm), DELETE.

  sbx, --pool-reuse: the release until the sandbox is in its pool again
  (the agent's reset and the host's check; the supervisor's own figure,
  "reset and checked in N us" in its log), and how many sandboxes the
  pool had to make meanwhile;
  the peer, the same supervisor without it: the destroy (runc kill and
  delete, unmount, folder removed: "destroyed in N ms") and the create
  that refills the pool (queued until its agent answered, from the
  debug log's timestamps).

  /usr/bin/python3 bench/bench_reset.py --build-dir build/release [--rounds 10]

Stdlib only; it removes everything it made (tests/integration/sbx_harness).
"""
import argparse
import datetime
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import table  # noqa: E402
from sbx_harness import Supervisor  # noqa: E402

WORK = ("mkdir -p /workspace/.cache && for i in $(seq 20); do echo $i > /workspace/.cache/f$i; done; "
        "echo x > /tmp/x; echo y > /dev/shm/y; "
        "(setsid sleep 1000 </dev/null >/dev/null 2>&1 &) & nohup sleep 1001 >/dev/null 2>&1 & echo ok")


def full_log(s):
    """The whole log (Supervisor.log() is its tail)."""
    with open(s.log_path, errors="replace") as f:
        return f.read()


def wait_log(s, pattern, start, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = re.search(pattern, full_log(s)[start:])
        if m:
            return m
        time.sleep(0.02)
    raise AssertionError("no %r in the log:\n%s" % (pattern, full_log(s)[start:][-3000:]))


def stamp(line):
    return datetime.datetime.strptime(line[:23], "%Y-%m-%dT%H:%M:%S.%f")


def released(s, sid, reuse):
    """A tenant's work in sid, then DELETE: the release's ms as the
    supervisor logs it (reuse: the reset and the check; else the destroy)."""
    st, _, r = s.exec(sid, cmd=WORK)
    assert st == 200 and r["exit_code"] == 0, r
    st, _, p = s.request("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "sleep 1002"})
    assert st == 201, p
    start = len(full_log(s))
    assert s.request("DELETE", "/v1/sandboxes/%s" % sid)[0] == 204
    if reuse:
        m = wait_log(s, r"sandbox %s: (reset and checked in (\d+) us|not reused)" % sid, start)
        assert m.group(2), "not reused: %s" % full_log(s)[start:][-2000:]
        return int(m.group(2)) / 1000
    m = wait_log(s, r"sandbox %s: destroyed in (\d+) ms" % sid, start)
    return float(m.group(1))


def rounds(s, n, reuse):
    out = []
    for _ in range(n):
        s.wait_ready()
        out.append(released(s, s.create(timeout=3600)["id"], reuse))
    return out


def creates(log):
    """ms from each create queued until its agent was up (debug log)."""
    queued, ms = {}, []
    for line in log.splitlines():
        m = re.search(r"sandbox (\S+): create queued", line)
        if m:
            queued[m.group(1)] = stamp(line)
        m = re.search(r"sandbox (\S+): up \(agent", line)
        if m and m.group(1) in queued:
            ms.append((stamp(line) - queued.pop(m.group(1))).total_seconds() * 1000)
    return ms


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build/release")
    ap.add_argument("--rounds", type=int, default=10)
    a = ap.parse_args()
    sup_bin = os.path.abspath(os.path.join(a.build_dir, "node-supervisor", "sandbox-supervisor"))
    agent = os.path.abspath(os.path.join(a.build_dir, "guest-agent", "sandbox-agent"))
    figures = {}
    for reuse in (True, False):
        s = Supervisor(sup_bin, agent, pool_size=1,
                       extra=(["--pool-reuse"] if reuse else []) + ["--log-level", "debug"])
        try:
            s.start()
            s.wait_ready()
            made_before = len(creates(full_log(s)))
            ms = rounds(s, a.rounds, reuse)
            s.wait_ready()
            made = creates(full_log(s))
            figures[reuse] = (ms, made[made_before:])
        finally:
            s.cleanup()
    reset, made_r = figures[True]
    destroy, made_p = figures[False]
    table([("release until pooled again: reset + check", reset, "sbx (--pool-reuse)",
            "reset.release"),
           ("destroy: runc kill + delete, unmount, rm", destroy, "peer", "reset.destroy"),
           ("create: runc run until the agent answers", made_p, "peer", "reset.create")],
          "sandboxes made during the rounds: %d with --pool-reuse, %d without (%d rounds)"
          % (len(made_r), len(made_p), a.rounds))


if __name__ == "__main__":
    main()
