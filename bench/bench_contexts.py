"""Code contexts on sbx/code-interpreter (images/build), release build, real
runc: the image's build (the Debian part's time as images/build recorded it
when it built it, its size packed and unpacked), its import at start, the
first context of a sandbox (the driver's server configured, a cold kernel),
a context beside a warm spare kernel, the first cell, `1+1` round trips in
a warm context beside a plain exec `true` in the same sandbox, and a cell
whose result is a ~1 MB PNG, timed until the client has the whole answer.
The machine's load average is printed with the figures.
  SBX_SUPERVISOR=... SBX_AGENT=... python3 bench/bench_contexts.py
(make bench runs it.) SBX_CTX_ROUNDS (default 200) round trips.
"""
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import sbx_harness as h  # noqa: E402
from bench_table import HEADER, emit, load_average, timed  # noqa: E402
from bench_table import row as table_row  # noqa: E402

SUP, AGENT = os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"]
ROUNDS = int(os.environ.get("SBX_CTX_ROUNDS", "200"))
IMAGE = "sbx/code-interpreter"
PNG_CELL = ("import numpy as np\nfrom PIL import Image\n"
            "Image.fromarray(np.random.default_rng(1).integers(0, 255, (580, 580, 3), dtype=np.uint8))")


def row(what, v, key, role="sbx"):
    table_row(what, v, role, key)


def main():
    tmp = tempfile.mkdtemp(prefix="sbx-bench-ctx-")
    b = subprocess.run([os.path.join(HERE, "..", "images", "build"), "code-interpreter", tmp],
                       check=True, capture_output=True, text=True, timeout=3600).stdout
    print(b.strip())
    fig = dict(kv.split("=", 1) for kv in b.split() if "=" in kv)
    unpacked = int(subprocess.run(["sh", "-c", "gzip -dc %s/sbx-code-interpreter/blobs/sha256/* 2>/dev/null"
                                   " | wc -c" % tmp], capture_output=True, text=True).stdout)
    print(HEADER)
    if fig.get("built_s", "unknown") != "unknown":
        emit("ctx.image.build", "sbx/code-interpreter: Debian part built (mmdebstrap, umoci)", "sbx",
             s=float(fig["built_s"]))
        print("sbx/code-interpreter: Debian part built in %s s (cached after)" % fig["built_s"])
    emit("ctx.image.size", "sbx/code-interpreter: packed (gzip layers)", "sbx",
         mib=int(fig["compressed_bytes"]) / 1048576.0)
    emit("ctx.image.unpacked", "sbx/code-interpreter: unpacked (layers' tar)", "sbx", mib=unpacked / 1048576.0)
    print("sbx/code-interpreter: %.1f MiB packed, %.1f MiB unpacked, %s packages" % (
        int(fig["compressed_bytes"]) / 1048576.0, unpacked / 1048576.0, fig.get("packages")))
    sup = h.Supervisor(SUP, AGENT, pool_size=0, extra=[
        "--import-image", "%s/sbx-code-interpreter" % tmp])
    try:
        t0 = time.monotonic()
        sup.start(timeout=600)
        emit("ctx.image.import", "sbx/code-interpreter: import at start", "sbx",
             s=time.monotonic() - t0)
        print("import at start: %.2f s" % (time.monotonic() - t0))
        sb = sup.create(image=IMAGE, resources={"memory": "2G"})
        base = "/v1/sandboxes/%s/contexts" % sb["id"]

        def create():
            st, _, c = sup.request("POST", base, {"language": "python"}, timeout=300)
            assert st == 200, c
            return c

        def run(ctx, code, conn=None):
            st, _, r = sup.request("POST", "%s/%s/run" % (base, ctx), {"code": code}, conn=conn,
                                   timeout=300)
            assert st == 200 and r["error"] is None, r
            return r

        t0 = time.monotonic()
        first = create()
        row("first context of a sandbox (cold kernel)", [(time.monotonic() - t0) * 1000],
            "ctx.first")
        t0 = time.monotonic()
        run(first["id"], "1+1")
        row("its first cell, `1+1`", [(time.monotonic() - t0) * 1000], "ctx.first_cell")
        # the agent keeps a spare kernel: wait until it is warm
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            st, _, lst = sup.request("GET", "/v1/sandboxes/%s/mcp" % sb["id"])
            srv = [s for s in lst.get("servers", []) if s.get("name") == "sbx-ctx-python"]
            if srv and srv[0].get("state") == "ready":
                break
            time.sleep(0.1)
        warm = []
        for _ in range(5):
            t0 = time.monotonic()
            c = create()
            warm.append((time.monotonic() - t0) * 1000)
            sup.request("DELETE", "%s/%s" % (base, c["id"]))
            time.sleep(3)  # the next spare warms
        row("a context beside a warm spare kernel", warm, "ctx.warm_create")
        conn = sup.conn(60)
        run(first["id"], "1+1", conn)
        row("`1+1` in a warm context, round trip", timed(lambda: run(first["id"], "1+1", conn), ROUNDS),
            "ctx.cell")

        def exec_true():
            st, _, r = sup.exec(sb["id"], conn=conn, argv=["true"])
            assert st == 200, r
        exec_true()
        row("exec `true` in the same sandbox", timed(exec_true, ROUNDS), "ctx.exec", "peer")
        r = run(first["id"], PNG_CELL)
        size = len(r["results"][0]["data"]["image/png"]) * 3 // 4
        print("the PNG: %d bytes (%d base64)" % (size, len(r["results"][0]["data"]["image/png"])))
        row("a %.1f MB PNG result to the client" % (size / 1e6),
            timed(lambda: run(first["id"], PNG_CELL, conn), 20), "ctx.png")
        conn.close()
        load_average()
    finally:
        h.end_clean(sup)
        subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
