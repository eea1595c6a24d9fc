"""Snapshots and forks of a sandbox with a 100 MiB writable layer (100 files
of random bytes: nothing to compress), beside their peers on the same
folder in the same run: a snapshot (POST .../snapshots, the sandbox frozen
while the archive is written) beside `tar -C upper -cf - . | zstd`; a
restore (POST /v1/sandboxes {"snapshot"}: a cold create that unpacks the
layer first) beside `zstd -dc | tar -x` into an empty folder plus a plain
cold create; a fork of 10 with no sandbox ready (ten cold creates, each
then filled) beside `cp -a` of the same folder. Then a second supervisor
with a pool of 10 ready sandboxes: a fork of 10 into them beside its floor,
ten creates handed out of the same pool (POST /v1/sandboxes in turn), and
the one `cp -a` the fork makes. Release build, real runc.
  SBX_SUPERVISOR=... SBX_AGENT=... python3 bench/bench_snapshots.py
Env: SBX_SNAP_MIB (default 100; make bench runs it again at 1024 for the
1 GiB rows, one round), SBX_SNAP_ROUNDS (default 3), SBX_FORKS (10). The
supervisors' default disk is twice the layer (at least 512 MiB) so that a
restore and the source hold it.
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
from bench_table import emit  # noqa: E402

SUP, AGENT = os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"]
MIB = int(os.environ.get("SBX_SNAP_MIB", "100"))
ROUNDS = int(os.environ.get("SBX_SNAP_ROUNDS", "3"))
FORKS = int(os.environ.get("SBX_FORKS", "10"))
DISK = ["--default-resources", "disk=%dM" % max(512, 2 * MIB)]


def timed(fn):
    t0 = time.monotonic()
    r = fn()
    return time.monotonic() - t0, r


def row(what, secs, role, mb=MIB, key=None):
    """key: the result's, "snap.<MiB>.<key>" (none: printed only)."""
    if not secs:
        print("| %-52s |   0 |          |          | %s |" % (what, role))
        return
    med = statistics.median(secs)
    rate = "%8.1f" % (mb / med) if mb else "        "
    # a pipe in the words is not a cell's edge
    print("| %-52s | %3d | %8.3f | %s | %s |" % (what.replace(" | ", r" \| "), len(secs), med, rate,
                                                 role))
    if key:
        emit("snap.%d.%s" % (MIB, key), "%s, %d MiB layer" % (what, MIB), role, n=len(secs),
             s=med, **({"mbps": mb / med} if mb else {}))


def source(sup):
    """A sandbox whose writable layer holds MIB files of 1 MiB of random bytes."""
    sid = sup.create()["id"]
    # the HTTP wait as long as the command's (1 GiB of writes under load)
    st, _, r = sup.request("POST", "/v1/sandboxes/%s/exec" % sid, {
        "argv": ["python3", "-c", "import os\nos.makedirs('/workspace/l')\n"
                 "for i in range(%d):\n"
                 "  open('/workspace/l/f%%d' %% i, 'wb').write(os.urandom(1 << 20))" % MIB],
        "timeout": 900}, timeout=960)
    assert st == 200 and r["exit_code"] == 0, r
    return sid, os.path.join(sup.state_dir, "sandboxes", sid, "disk", "upper")


def fork_log(sup, res, frozen, copy, filled):
    with open(sup.log_path, errors="replace") as f:
        log = f.read()
    for m in re.finditer(r"(?:(\d+) filled, )?source frozen ([\d.]+) ms \(copy ([\d.]+) ms\)", log):
        res[filled].append(int(m.group(1) or 0))
        res[frozen].append(float(m.group(2)) / 1e3)
        res[copy].append(float(m.group(3)) / 1e3)
    return log


def fork(sup, sid):
    """Seconds a fork of FORKS took; the forks are deleted."""
    dt, (st, _, fk) = timed(lambda: sup.request(
        "POST", "/v1/sandboxes/%s/fork" % sid, {"count": FORKS}, timeout=300))
    assert st == 201, fk
    for sb in fk["sandboxes"]:
        sup.request("DELETE", "/v1/sandboxes/" + sb["id"])
    return dt


def pooled(res):
    """Fork of FORKS into a pool of FORKS ready sandboxes, beside FORKS plain
    creates out of the same pool."""
    sup = h.Supervisor(SUP, AGENT, pool_size=FORKS, extra=DISK)
    try:
        sup.start()
        sid, _ = source(sup)
        for _ in range(ROUNDS):
            sup.wait_ready(timeout=300)
            res["pfork"].append(fork(sup, sid))
            sup.wait_ready(timeout=300)
            dt, made = timed(lambda: [sup.create() for _ in range(FORKS)])
            res["acquire"].append(dt)
            for sb in made:
                sup.request("DELETE", "/v1/sandboxes/" + sb["id"])
        fork_log(sup, res, "pfrozen", "pcopy", "pfilled")
    finally:
        sup.cleanup()


def main():
    sup = h.Supervisor(SUP, AGENT, pool_size=0, extra=DISK)
    tmp = tempfile.mkdtemp(prefix="sbx-bench-snap-")
    res = {k: [] for k in ("snap", "tarzstd", "restore", "untar", "cold", "fork", "cpa",
                           "frozen_snap", "frozen_fork", "copy", "filled", "pfork", "acquire",
                           "pfrozen", "pcopy", "pfilled")}
    try:
        sup.start()
        sid, upper = source(sup)
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
            res["fork"].append(fork(sup, sid))
            dst = os.path.join(tmp, "cpa")
            dt, _ = timed(lambda: subprocess.run(["cp", "-a", upper + "/.", dst], check=True))
            res["cpa"].append(dt)
            shutil.rmtree(dst)
        log = fork_log(sup, res, "frozen_fork", "copy", "filled")
        res["frozen_snap"] = [float(x) / 1e3 for x in re.findall(r"snapshot sn-\w+ of \S+: frozen ([\d.]+) ms", log)]
        sup.cleanup()
        pooled(res)
        print("load average: %s" % open("/proc/loadavg").read().split()[:3])
        print("| what (%d MiB layer) | n | median s | MB/s | role |" % MIB)
        print("|---|---|---|---|---|")
        row("snapshot (POST .../snapshots)", res["snap"], "sbx", key="snapshot")
        row("  of which the sandbox frozen", res["frozen_snap"], "sbx", key="frozen")
        row("tar -C upper -cf - . | zstd", res["tarzstd"], "peer", key="tarzstd")
        row("restore (POST /v1/sandboxes {snapshot})", res["restore"], "sbx", key="restore")
        row("zstd -dc | tar -x into an empty folder", res["untar"], "peer", key="untar")
        row("cold create, no snapshot", res["cold"], "floor", 0, key="cold")
        row("fork of %d, none ready (POST .../fork)" % FORKS, res["fork"], "sbx", 0,
            key="fork_cold")
        row("  of which the source frozen", res["frozen_fork"], "sbx", 0)
        row("  of which the layer copied once (cp -a)", res["copy"], "sbx")
        print("|   forks filled (the rest made cold)                    | %3d | %8s |          | sbx |"
              % (len(res["filled"]), "/".join(map(str, res["filled"]))))
        row("cp -a of the same folder", res["cpa"], "peer", key="cpa")
        row("fork of %d, %d ready in the pool" % (FORKS, FORKS), res["pfork"], "sbx", 0,
            key="fork_ready")
        row("  of which the source frozen", res["pfrozen"], "sbx", 0)
        row("  of which the layer copied once (cp -a)", res["pcopy"], "sbx")
        print("|   forks filled (the rest made cold)                    | %3d | %8s |          | sbx |"
              % (len(res["pfilled"]), "/".join(map(str, res["pfilled"]))))
        row("%d creates out of that pool, in turn" % FORKS, res["acquire"], "floor", 0,
            key="pool_creates")
    finally:
        sup.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
