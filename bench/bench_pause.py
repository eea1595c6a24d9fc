"""Figures of pause and resume (issue 13), real runc, one sandbox running a
CPU spinner, all in the same run:

  pause and resume through the API (POST .../pause, .../resume, one kept
  connection), this build;
  the floor: the freezer file the supervisor writes, written directly (the
  hybrid unified mount's cgroup.freeze; v1's freezer.state beside it);
  the peer: `runc pause` / `runc resume` of the same container.

  /usr/bin/python3 bench/bench_pause.py --build-dir build/release [--rounds 30]

Stdlib only; it removes everything it made (tests/integration/sbx_harness).
"""
import argparse
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_table import table  # noqa: E402
from sbx_harness import Supervisor, containers_under, state_tag  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def write(path, value):
    with open(path, "w") as f:
        f.write(value)


def read(path):
    with open(path) as f:
        return f.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build/release")
    ap.add_argument("--rounds", type=int, default=30)
    a = ap.parse_args()
    sup_bin = os.path.abspath(os.path.join(a.build_dir, "node-supervisor", "sandbox-supervisor"))
    agent = os.path.abspath(os.path.join(a.build_dir, "guest-agent", "sandbox-agent"))
    s = Supervisor(sup_bin, agent, pool_size=1)
    try:
        s.start()
        s.wait_ready()
        sid = s.create(timeout=3600)["id"]
        st, _, p = s.request("POST", "/v1/sandboxes/%s/processes" % sid, {"cmd": "while :; do :; done"})
        assert st == 201, p
        cid = "sbx-%s-%s" % (state_tag(s.state_dir), sid)
        rt = [r for c, _, r in containers_under(s.state_dir, with_runtime=True) if c == cid][0]
        v2 = "/sys/fs/cgroup/unified/sbx/%s/" % cid
        v1 = "/sys/fs/cgroup/freezer/sbx/%s/freezer.state" % cid
        conn = s.conn()
        api_p, api_r, f2_p, f2_r, f1_r, rc_p, rc_r = [], [], [], [], [], [], []

        def api(what):
            st, _, b = s.request("POST", "/v1/sandboxes/%s/%s" % (sid, what), conn=conn)
            assert st == 200, b

        def freeze2():
            write(v2 + "cgroup.freeze", "1")
            while "frozen 1" not in read(v2 + "cgroup.events"):
                pass

        def freeze1():
            write(v1, "FROZEN")
            while read(v1).strip() != "FROZEN":
                pass

        for _ in range(a.rounds):
            api_p.append(timed(lambda: api("pause")))
            time.sleep(0.02)
            api_r.append(timed(lambda: api("resume")))
            time.sleep(0.02)
            if os.path.exists(v2 + "cgroup.freeze"):
                f2_p.append(timed(freeze2))
                time.sleep(0.02)
                f2_r.append(timed(lambda: write(v2 + "cgroup.freeze", "0")))
                time.sleep(0.02)
            freeze1()
            time.sleep(0.02)
            f1_r.append(timed(lambda: write(v1, "THAWED")))
            time.sleep(0.02)
            rc_p.append(timed(lambda: subprocess.run(rt + ["pause", cid], check=True)))
            time.sleep(0.02)
            rc_r.append(timed(lambda: subprocess.run(rt + ["resume", cid], check=True)))
            time.sleep(0.02)
        conn.close()
        table([("pause through the API (freeze, catalog write)", api_p, "sbx", "pause.api"),
               ("resume through the API (thaw, catalog write)", api_r, "sbx", "resume.api"),
               f2_p and ("cgroup.freeze 1 until frozen, direct", f2_p, "floor", "pause.cgroup"),
               f2_p and ("cgroup.freeze 0, direct", f2_r, "floor", "resume.cgroup"),
               ("v1 freezer.state THAWED, direct", f1_r, "floor (v1)", "resume.cgroup_v1"),
               ("runc pause", rc_p, "peer", "pause.runc"),
               ("runc resume", rc_r, "peer", "resume.runc")])
    finally:
        s.cleanup()


if __name__ == "__main__":
    main()
