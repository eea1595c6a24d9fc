"""What a volume costs an acquire (issue 13), real runc:

  acquire from a warm pool (POST /v1/sandboxes, pool of 4) without a
  volume and with one (read-write, bound into the pooled container as it
  is handed out), in turns, in the same run; and POST /v1/volumes (its
  file system made: mkfs.ext4, mount) of a 2G volume.

  /usr/bin/python3 bench/bench_volumes.py --build-dir build/release [--acquires 50]

Stdlib only; it removes everything it made (tests/integration/sbx_harness).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from bench_table import row  # noqa: E402
from sbx_harness import Supervisor  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", default="build/release")
    ap.add_argument("--acquires", type=int, default=50)
    a = ap.parse_args()
    b = os.path.abspath(a.build_dir)
    s = Supervisor(os.path.join(b, "node-supervisor", "sandbox-supervisor"),
                   os.path.join(b, "guest-agent", "sandbox-agent"), pool_size=4)
    try:
        s.start()
        made, names = [], []
        for i in range(10):
            t0 = time.perf_counter()
            st, _, v = s.request("POST", "/v1/volumes", {"name": "v%d" % i, "size": "2G"})
            made.append((time.perf_counter() - t0) * 1000)
            assert st == 201, v
            names.append(v["name"])
        res = {"none": [], "one": []}
        for i in range(a.acquires):
            for k in ("none", "one"):
                s.wait_ready(n=4)
                body = {} if k == "none" else {"volumes": [{"name": "v0", "mount": "/workspace/v"}]}
                t0 = time.perf_counter()
                st, _, sb = s.request("POST", "/v1/sandboxes", body)
                res[k].append((time.perf_counter() - t0) * 1000)
                assert st == 201, sb
                s.request("DELETE", "/v1/sandboxes/" + sb["id"])
        print("| what | n | p50 ms | p99 ms | role |")
        print("|---|---|---|---|---|")
        row("acquire, pool of 4, no volume", res["none"], "peer")
        row("acquire, pool of 4, one volume (rw)", res["one"], "sbx")
        row("POST /v1/volumes, 2G (mkfs.ext4, mount)", made, "sbx")
        for n in names:
            s.request("DELETE", "/v1/volumes/" + n)
        print("load average after: %s" % open("/proc/loadavg").read().split()[:3])
    finally:
        s.cleanup()


if __name__ == "__main__":
    main()
