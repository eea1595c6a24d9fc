"""Snapshots of a 100 MiB writable layer (100 files of random bytes: nothing
to compress) kept in an object store beside the local store, in the same
run: two supervisors of their own state folders (node A with
--snapshot-store s3://... against s3rver on loopback, tests/s3/server.mjs;
node L with the state folder's store), one runc sandbox each with the same
layer. Rows: the snapshot (POST .../snapshots: archive, then the upload of
archive and manifest), the restore on the same node (download, sha256,
unpack, cold create) and on a second node B reading the same store, beside
the local store's snapshot and restore. Release build, real runc.
and the upload and download alone (sup-s3-tool put/get of as many random
bytes) as their floor.
  SBX_SUPERVISOR=... SBX_AGENT=... SBX_S3_TOOL=... python3 bench/bench_snapshots_s3.py
Env: SBX_SNAP_MIB (default 100), SBX_SNAP_ROUNDS (default 3).
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                                "integration"))
TOOL = os.environ["SBX_S3_TOOL"]
import sbx_harness as h  # noqa: E402
from s3_harness import BUCKET, CREDS, S3Server  # noqa: E402
from bench_table import emit  # noqa: E402

SUP, AGENT = os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"]
MIB = int(os.environ.get("SBX_SNAP_MIB", "100"))
ROUNDS = int(os.environ.get("SBX_SNAP_ROUNDS", "3"))
FILL = ("import os\nos.makedirs('/workspace/l')\nfor i in range(%d):\n"
        "  open('/workspace/l/f%%d' %% i, 'wb').write(os.urandom(1 << 20))" % MIB)


def timed(fn):
    t0 = time.monotonic()
    r = fn()
    return time.monotonic() - t0, r


def row(what, secs, role, key):
    med = statistics.median(secs)
    print("| %-50s | %3d | %8.3f | %8.1f | %s |" % (what, len(secs), med, MIB / med, role))
    emit("s3.%d.%s" % (MIB, key), "%s, %d MiB layer" % (what, MIB), role, n=len(secs), s=med,
         mbps=MIB / med)


def main():
    root = tempfile.mkdtemp(prefix="sbx-s3b-")
    srv = S3Server(os.path.join(root, "s3")).start()
    os.environ.update(CREDS)
    store = ["--snapshot-store", "s3://%s/bench" % BUCKET, "--s3-endpoint", srv.endpoint()]
    nodes = {}
    try:
        for name, extra in (("local", []), ("a", store), ("b", store)):
            nodes[name] = h.Supervisor(SUP, AGENT, state_dir=os.path.join(root, name),
                                       pool_size=0, extra=extra).start()
        res = {k: [] for k in ("snap_l", "restore_l", "snap_s3", "restore_a", "restore_b", "put",
                               "get")}
        blob = os.path.join(root, "blob")
        with open(blob, "wb") as f:
            f.write(os.urandom(MIB << 20))
        tool = [TOOL, "--endpoint", srv.endpoint(), "s3://%s/bench-floor" % BUCKET]
        srcs = {}
        for name in ("local", "a"):
            s = nodes[name]
            sid = s.create()["id"]
            st, _, r = s.exec(sid, argv=["python3", "-c", FILL], timeout=300)
            assert st == 200 and r["exit_code"] == 0, r
            srcs[name] = sid
        for _ in range(ROUNDS):
            dt, _ = timed(lambda: subprocess.run(tool + ["put", "x", blob], check=True))
            res["put"].append(dt)
            dt, _ = timed(lambda: subprocess.run(tool + ["get", "x", blob + ".back"], check=True))
            res["get"].append(dt)
            for name, snap_key, restores in (("local", "snap_l", (("local", "restore_l"),)),
                                             ("a", "snap_s3", (("a", "restore_a"),
                                                               ("b", "restore_b")))):
                s = nodes[name]
                dt, (st, _, snap) = timed(lambda: s.request(
                    "POST", "/v1/sandboxes/%s/snapshots" % srcs[name], {"name": "b"}, timeout=600))
                assert st == 201, snap
                res[snap_key].append(dt)
                for on, key in restores:
                    n = nodes[on]
                    dt, (st, _, nb) = timed(lambda: n.request(
                        "POST", "/v1/sandboxes", {"snapshot": snap["id"]}, timeout=600))
                    assert st == 201, nb
                    res[key].append(dt)
                    n.request("DELETE", "/v1/sandboxes/" + nb["id"], timeout=120)
                assert s.request("DELETE", "/v1/snapshots/" + snap["id"], timeout=120)[0] == 204
        print("| what (%d MiB layer) | n | median s | MB/s | role |" % MIB)
        print("|---|---|---|---|---|")
        row("snapshot, local store", res["snap_l"], "peer", "snapshot_local")
        row("snapshot, S3 store (s3rver, loopback)", res["snap_s3"], "sbx", "snapshot")
        row("sup-s3-tool put of the same bytes (upload alone)", res["put"], "floor", "put")
        row("restore, local store", res["restore_l"], "peer", "restore_local")
        row("restore, S3 store, same node", res["restore_a"], "sbx", "restore_same")
        row("restore, S3 store, another node", res["restore_b"], "sbx", "restore_other")
        row("sup-s3-tool get of the same bytes (download alone)", res["get"], "floor", "get")
    finally:
        for s in nodes.values():
            try:
                if s.alive():
                    h.stop_clean(s)
            finally:
                s.cleanup()
        srv.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
