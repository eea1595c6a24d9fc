"""Snapshots and forks of a sandbox with a 100 MiB writable layer (100 files
of random bytes: nothing to compress), beside their peers on the same
folder in the same run: a snapshot (POST .../snapshots, the sandbox frozen
while the archive is written) beside `tar -C upper -cf - . | zstd`; a
restore (POST /v1/sandboxes {"snapshot"}: a cold create that unpacks the
layer first) beside `zstd -dc | tar -x` into an empty folder plus a plain
cold create; a fork of 10 beside `cp -a` of the same folder. Release
build, real runc.
  SBX_SUPERVISOR=... SBX_AGENT=... python3 bench/bench_snapshots.py
Env: SBX_SNAP_MIB (default 100), SBX_SNAP_ROUNDS (default 3), SBX_FORKS (10).
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
import sbx_harness as h  # noqa: E402

SUP, AGENT = os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"]
MIB = int(os.environ.get("SBX_SNAP_MIB", "100"))
ROUNDS = int(os.environ.get("SBX_SNAP_ROUNDS", "3"))
FORKS = int(os.environ.get("SBX_FORKS", "10"))


def timed(fn):
    t0 = time.monotonic()
    r = fn()
    return time.monotonic() - t0, r


def row(what, secs, role, mb=MIB):
    med = statistics.median(secs)
    rate = "%8.1f" % (mb / med) if mb else "        "
    print("| %-52s | %3d | %8.3f | %s | %s |" % (what, len(secs), med, rate, role))


def main():
    sup = h.Supervisor(SUP, AGENT, pool_size=0)
    tmp = tempfile.mkdtemp(prefix="sbx-bench-snap-")
    try:
        sup.start()
        sid = sup.create()["id"]
        st, _, r = sup.exec(sid, argv=["python3", "-c",
                                       "import os\nos.makedirs('/workspace/l')\n"
                                       "for i in range(%d):\n"
                                       "  open('/workspace/l/f%%d' %% i, 'wb').write(os.urandom(1 << 20))"
                                       % MIB], timeout=300)
        assert st == 200 and r["exit_code"] == 0, r
        upper = os.path.join(sup.state_dir, "sandboxes", sid, "disk", "upper")
        res = {k: [] for k in ("snap", "tarzstd", "restore", "untar", "cold", "fork", "cpa",
                               "frozen_snap", "frozen_fork", "copy")}
        for _ in range(ROUNDS):
            dt, (st, _, snap) = timed(lambda: sup.request(
                "POST", "/v1/sandboxes/%s/snapshots" % sid, {"name": "b"}, timeout=300))
            assert st == 201, snap
            res["snap"].append(dt)
            arch = os.path.join(tmp, "t.tar.zst")
            dt, _ = timed(lambda: subprocess.run("tar -C %s -cf - . | zstd -q -c > %s"
                                                 % (upper, arch), shell=True, check=True))
            res["tarzstd"].append(dt)
            dt, (st, _, nb) = timed(lambda: sup.request("POST", "/v1/sandboxes",
                                                        {"snapshot": snap["id"]}, timeout=300))
            assert st == 201, nb
            res["restore"].append(dt)
            out = os.path.join(tmp, "x")
            os.mkdir(out)
            dt, _ = timed(lambda: subprocess.run("zstd -q -dc %s | tar -C %s -xf -" % (arch, out),
                                                 shell=True, check=True))
            res["untar"].append(dt)
            shutil.rmtree(out)
            os.unlink(arch)
            dt, cold = timed(lambda: sup.create())
            res["cold"].append(dt)
            for i in (nb["id"], cold["id"]):
                sup.request("DELETE", "/v1/sandboxes/" + i)
            sup.request("DELETE", "/v1/snapshots/" + snap["id"])
            dt, (st, _, fk) = timed(lambda: sup.request(
                "POST", "/v1/sandboxes/%s/fork" % sid, {"count": FORKS}, timeout=300))
            assert st == 201, fk
            res["fork"].append(dt)
            for sb in fk["sandboxes"]:
                sup.request("DELETE", "/v1/sandboxes/" + sb["id"])
            dst = os.path.join(tmp, "cpa")
            dt, _ = timed(lambda: subprocess.run(["cp", "-a", upper + "/.", dst], check=True))
            res["cpa"].append(dt)
            shutil.rmtree(dst)
        with open(sup.log_path, errors="replace") as f:
            log = f.read()
        res["frozen_snap"] = [float(x) / 1e3 for x in re.findall(r"snapshot sn-\w+ of \S+: frozen ([\d.]+) ms", log)]
        for m in re.finditer(r"source frozen ([\d.]+) ms \(copy ([\d.]+) ms\)", log):
            res["frozen_fork"].append(float(m.group(1)) / 1e3)
            res["copy"].append(float(m.group(2)) / 1e3)
        print("load average: %s" % open("/proc/loadavg").read().split()[:3])
        print("| what (%d MiB layer) | n | median s | MB/s | role |" % MIB)
        print("|---|---|---|---|---|")
        row("snapshot (POST .../snapshots)", res["snap"], "sbx")
        row("  of which the sandbox frozen", res["frozen_snap"], "sbx")
        row("tar -C upper -cf - . | zstd", res["tarzstd"], "peer")
        row("restore (POST /v1/sandboxes {snapshot})", res["restore"], "sbx")
        row("zstd -dc | tar -x into an empty folder", res["untar"], "peer")
        row("cold create, no snapshot", res["cold"], "floor", 0)
        row("fork of %d (POST .../fork)" % FORKS, res["fork"], "sbx", 0)
        row("  of which the source frozen", res["frozen_fork"], "sbx", 0)
        row("  of which the layer copied once (cp -a)", res["copy"], "sbx")
        row("cp -a of the same folder", res["cpa"], "peer")
    finally:
        sup.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
