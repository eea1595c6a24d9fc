"""BENCHMARKS.md's table, from the results `make bench` leaves:

  bench/bench_report.py [--results DIR] [--doc BENCHMARKS.md]

DIR (default build/release/bench-results) holds what bench/bench_run.py
wrote for each bench: NAME.run.json (when, which commit, the load, the
exit status), NAME.jsonl (its rows) and NAME.out (its printed detail).
HEADLINES below names every headline figure once: the row of the bench
it comes from, the rows of its peer and floor in the same run, and its
goal. The script rewrites two blocks of the document between their
markers, the table at the top and each bench's detail further down, and
keeps everything else; a bench without results shows its rows as "not
run", a failed one as "failed". Exits 1 when a bench's run failed, 2
(the document untouched) when DIR holds no results at all.
Stdlib only.
"""
import argparse
import glob
import json
import os
import re
import sys

TABLE_BEGIN = "<!-- bench-table: written by bench/bench_report.py (make bench-report); edits are lost -->"
TABLE_END = "<!-- /bench-table -->"
DETAIL_BEGIN = "<!-- bench-detail: written by bench/bench_report.py (make bench-report); edits are lost -->"
DETAIL_END = "<!-- /bench-detail -->"

# Every step of make bench: its results' name, and what it measures.
BENCHES = [
    ("sbx-bench", "exec, acquire, cold create, streaming, files, limits, the HTTP edge, gVisor "
     "(`bench/sbx-bench`)"),
    ("restart", "a supervisor's restart with 50 sandboxes (`bench/bench_restart.py`)"),
    ("pause", "pause and resume (`bench/bench_pause.py`)"),
    ("reset", "reuse after reset (`bench/bench_reset.py`)"),
    ("burst", "100 concurrent creates, a fixed pool beside a self-sizing one (`bench/bench_burst.py`)"),
    ("k8s", "the Kubernetes backend (`bench/bench_k8s.py`)"),
    ("files-4gib", "a 4 GiB file up and back, sha256 and RSS checked "
     "(`tests/integration/test_files_upload.py`, SBX_UPLOAD_MB=4096)"),
    ("images", "pools of an image, cold creates, a 100 MB import (`bench/bench_images.py`)"),
    ("sse-1gib", "1 GiB of output through SSE, sha256 checked "
     "(`tests/integration/test_exec_stream.py`, SBX_IT_STREAM_MB=1024)"),
    ("mcp", "MCP beside supergateway and stdio (`bench/bench_mcp.py`)"),
    ("ports", "the port proxy beside the same server direct (`bench/bench_ports.py`)"),
    ("snapshots", "snapshots, restores and forks of a 100 MiB layer (`bench/bench_snapshots.py`)"),
    ("snapshots-s3", "snapshots through an S3 store (`bench/bench_snapshots_s3.py`)"),
    ("snapshots-1gib", "snapshots, restores and forks of a 1 GiB layer "
     "(`bench/bench_snapshots.py`, SBX_SNAP_MIB=1024)"),
    ("snapshot-roundtrip-1gib", "the snapshot round trip with a 1 GiB file, restored "
     "byte-identical (`tests/integration/test_snapshots.py`, SBX_SNAP_BIG_MIB=1024)"),
    ("relay", "exec relayed through another node (`bench/bench_relay.py`)"),
    ("tls", "exec, SSE, 1 GiB up and down over HTTPS beside plain HTTP; new TLS connections/s "
     "(`bench/bench_tls.py`)"),
    ("soak", "a mixed load under faults for SOAK_SECONDS (`make soak`; "
     "`tests/integration/test_soak.py`)"),
    ("contexts", "code contexts on sbx/code-interpreter: its build and size, a kernel's start, "
     "cells (`bench/bench_contexts.py`)"),
]


def _ms(v):
    return "%.3f ms" % v if v < 1 else "%.2f ms" % v if v < 10 else "%.1f ms" % v if v < 100 \
        else "%.0f ms" % v if v < 1000 else "%.2f s" % (v / 1000)


def _kib(v):
    return "%.1f KiB" % v if v < 10 else "%.0f KiB" % v if v < 1024 else "%.1f MiB" % (v / 1024)


# metric -> how a value of it reads
FORMATS = {
    "p50_ms": _ms,
    "mbps": lambda v: "%.0f MB/s" % v,
    "gbps": lambda v: "%.2f GB/s" % v,
    "rps": lambda v: "%.0f req/s" % v,
    "calls_s": lambda v: "%.0f calls/s" % v,
    "kib": _kib,
    "kib_each": lambda v: "%.2f KiB" % v,
    "mib": lambda v: "%.1f MiB" % v,
    "s": lambda v: "%.3f s" % v if v < 1 else "%.2f s" % v,
    "n": lambda v: "{:,}".format(int(v)),
}


class Ref:
    """A figure of a row: its key, the metric read, and for a peer or a
    floor the words that name it in the table."""

    def __init__(self, key, metric, label=""):
        self.key, self.metric, self.label = key, metric, label


class Goal:
    """A goal's words (with the issue that set it) and, where a figure can
    be checked, check(value, peer, floor) -> bool (peer, floor: None when
    not measured)."""

    def __init__(self, text, check=None):
        self.text, self.check = text, check


def at_most(x, text):
    return Goal(text, lambda v, p, f: v <= x)


def at_least(x, text):
    return Goal(text, lambda v, p, f: v >= x)


class Headline:
    def __init__(self, figure, bench, sbx, peer=None, floor=None, goal=None):
        self.figure, self.bench, self.sbx = figure, bench, sbx
        self.peer, self.floor, self.goal = peer, floor, goal


H = Headline


def snapshot_rows(bench, mib, size, fork_goal=None):
    """The snapshot, restore and fork rows of bench_snapshots.py at mib MiB."""
    k = "snap.%d." % mib
    return [H("Snapshot of a %s layer" % size, bench, Ref(k + "snapshot", "mbps"),
              Ref(k + "tarzstd", "mbps", "`tar | zstd`")),
            H("Restore of a %s layer" % size, bench, Ref(k + "restore", "mbps"),
              Ref(k + "untar", "mbps", "`zstd -d | tar -x`")),
            H("Fork of 10, 10 ready, %s layer" % size, bench, Ref(k + "fork_ready", "s"),
              Ref(k + "cpa", "s", "`cp -a`"), Ref(k + "pool_creates", "s", "10 pool creates"),
              fork_goal)]


# The headline figures, in the table's order. Goals: the newest issue's for
# that figure (its number after #); BENCHMARKS.md's Method says more.
HEADLINES = [
    H("Exec `true` through the API, p50", "sbx-bench", Ref("exec.api", "p50_ms"),
      Ref("exec.runc", "p50_ms", "`runc exec`"), Ref("exec.spawn", "p50_ms", "posix_spawn"),
      Goal("≤ 2 ms (#2) and ≤ 1.5× floor (#33)", lambda v, p, f: v <= 2 and f is not None
           and v <= 1.5 * f)),
    H("Exec `true` at the agent's socket (no HTTP), p50", "sbx-bench", Ref("exec.agent", "p50_ms"),
      Ref("exec.runc", "p50_ms", "`runc exec`"), Ref("exec.spawn", "p50_ms", "posix_spawn")),
    H("Acquire from a warm pool, p50", "sbx-bench", Ref("acquire.plain", "p50_ms"),
      goal=at_most(2, "≤ 2 ms (#2)")),
    H("Acquire with resources (cpus, memory, pids, disk), p50", "sbx-bench",
      Ref("acquire.resources", "p50_ms"), floor=Ref("acquire.plain", "p50_ms", "plain acquire"),
      goal=at_most(2, "≤ 2 ms (#8)")),
    H("Acquire with a network policy (4 rules), p50", "sbx-bench", Ref("acquire.policy", "p50_ms"),
      floor=Ref("acquire.plain", "p50_ms", "plain acquire"), goal=at_most(5, "≤ 5 ms (#12)")),
    H("Cold create until the agent answers, p50", "sbx-bench", Ref("cold.plain", "p50_ms"),
      goal=at_most(25, "≤ 25 ms (#33; #2: ≤ 100)")),
    H("Cold create with egress plumbing, p50", "sbx-bench", Ref("cold.uplink", "p50_ms"),
      floor=Ref("cold.plain", "p50_ms", "without"), goal=at_most(25, "≤ 25 ms (#33; #12: ≤ 100)")),
    H("Command output through SSE (`head -c` of zeros)", "sbx-bench", Ref("stream.sse", "mbps"),
      floor=Ref("stream.ceiling", "mbps", "socketpair ceiling"),
      goal=at_least(1000, "≥ 1 GB/s (#3)")),
    H("Upload `PUT /files`", "sbx-bench", Ref("files.up", "mbps"),
      Ref("files.up.runc", "mbps", "`runc exec cat >`"), goal=at_least(1000, "≥ 1 GB/s (#4)")),
    H("Download `GET /files` (page cache)", "sbx-bench", Ref("files.down", "mbps"),
      Ref("files.down.runc", "mbps", "`runc exec cat`"), goal=at_least(1000, "≥ 1 GB/s (#4)")),
    H("4 GiB round trip: up, sha256 checked", "files-4gib", Ref("roundtrip.up", "mbps")),
    H("4 GiB round trip: down, sha256 checked", "files-4gib", Ref("roundtrip.down", "mbps")),
    H("4 GiB round trip: peak RSS, supervisor or agent", "files-4gib", Ref("roundtrip.rss", "mib"),
      goal=at_most(64, "< 64 MiB each (#4)")),
    H("1 GiB of output through SSE into Python, sha256 checked", "sse-1gib",
      Ref("sse.lossless", "mbps"), goal=Goal("lossless (#3); MB/s is Python's base64")),
    H("A neighbour's exec beside a fork bomb, p50", "sbx-bench", Ref("bomb.busy", "p50_ms"),
      Ref("bomb.spin", "p50_ms", "beside a busy loop"), floor=Ref("bomb.idle", "p50_ms", "idle"),
      goal=Goal("≤ 2× idle (#8)", lambda v, p, f: f is not None and v <= 2 * f)),
    H("The fork bomb's DELETE", "sbx-bench", Ref("bomb.delete", "p50_ms"),
      goal=at_most(1000, "≤ 1 s (#8)")),
    H("HTTP edge: `GET /v1/sandboxes/{id}`, 64 keep-alive clients", "sbx-bench",
      Ref("edge.wrk", "rps"), Ref("before.edge.wrk", "rps", "BEFORE build"),
      goal=Goal("≥ the BEFORE build (#10)", lambda v, p, f: None if p is None else v >= p)),
    H("HTTP edge: supervisor RSS per idle keep-alive connection", "sbx-bench",
      Ref("edge.rss", "kib_each"), Ref("before.edge.rss", "kib_each", "BEFORE build")),
    H("HTTP edge: exec beside 10,000 idle connections, p50", "sbx-bench",
      Ref("edge.exec_busy", "p50_ms"), floor=Ref("edge.exec_idle", "p50_ms", "none held"),
      goal=Goal("≤ 1.5× none held (#10)", lambda v, p, f: f is not None and v <= 1.5 * f)),
    H("gVisor: exec `true` through the API, p50", "sbx-bench", Ref("gvisor.exec.api", "p50_ms"),
      Ref("gvisor.exec.runsc", "p50_ms", "`runsc exec`"), Ref("exec.api", "p50_ms", "runc's")),
    H("gVisor: cold create, p50", "sbx-bench", Ref("gvisor.cold.plain", "p50_ms"),
      floor=Ref("cold.plain", "p50_ms", "runc's")),
    H("gVisor: command output through SSE", "sbx-bench", Ref("gvisor.stream.sse", "mbps"),
      floor=Ref("stream.sse", "mbps", "runc's")),
    H("Pause through the API, p50", "pause", Ref("pause.api", "p50_ms"),
      Ref("pause.runc", "p50_ms", "`runc pause`"), Ref("pause.cgroup", "p50_ms", "cgroup.freeze")),
    H("Resume through the API, p50", "pause", Ref("resume.api", "p50_ms"),
      Ref("resume.runc", "p50_ms", "`runc resume`"), Ref("resume.cgroup", "p50_ms", "cgroup.freeze"),
      at_most(10, "≤ 10 ms (#13)")),
    H("Restart after SIGKILL with 50 sandboxes: listening", "restart",
      Ref("restart.sigkill.listening", "p50_ms")),
    H("Restart after SIGKILL with 50 sandboxes: listening, in turns with BEFORE", "restart",
      Ref("restart.listening_this.0", "p50_ms"),
      Ref("restart.listening_before.0", "p50_ms", "BEFORE build")),
    H("Restart after SIGKILL with 50 sandboxes: each answered an exec", "restart",
      Ref("restart.sigkill.exec", "p50_ms")),
    H("Burst of 100 creates, self-sizing pool after a warm-up: last answer", "burst",
      Ref("burst.sized", "s"), Ref("burst.fixed", "s", "a fixed pool of 4"),
      goal=at_most(0.5, "≤ 0.5 s (#33)")),
    H("Burst of 100 creates past a fixed pool of 4: creates a second", "burst",
      Ref("burst.fixed", "rps"), goal=at_least(100, "≥ 100/s on 2 cores (#33)")),
    H("Release with reset until pooled again, p50", "reset", Ref("reset.release", "p50_ms"),
      Ref("reset.destroy", "p50_ms", "destroy (then a create)")),
    H("Kubernetes: acquire from a pool of pods, p50", "k8s", Ref("k8s.acquire", "p50_ms"),
      Ref("k8s.acquire_local", "p50_ms", "local pool"), goal=at_most(2, "≤ 2 ms (#15)")),
    H("Kubernetes: a pod's reset until pooled again, p50", "k8s", Ref("k8s.reset", "p50_ms"),
      Ref("k8s.gone", "p50_ms", "pod deleted (then one made)"),
      Ref("k8s.reset_local", "p50_ms", "local reset")),
    H("Relay: exec on another node's sandbox, kept-alive, p50", "relay",
      Ref("relay.relayed_kept", "p50_ms"), Ref("relay.local_conn", "p50_ms", "local, a connection each"),
      Ref("relay.local_kept", "p50_ms", "local")),
    H("TLS: exec `true`, kept-alive, p50", "tls", Ref("tls.exec.tls", "p50_ms"),
      Ref("tls.exec.clear", "p50_ms", "plain HTTP")),
    H("TLS: command output through SSE", "tls", Ref("tls.sse.tls", "mbps"),
      Ref("tls.sse.clear", "mbps", "plain HTTP")),
    H("TLS: upload `PUT /files`, 1 GiB", "tls", Ref("tls.up.tls", "mbps"),
      Ref("tls.up.clear", "mbps", "plain HTTP")),
    H("TLS: download `GET /files`, 1 GiB", "tls", Ref("tls.down.tls", "mbps"),
      Ref("tls.down.clear", "mbps", "plain HTTP")),
    H("TLS: new connections with a full handshake", "tls", Ref("tls.handshake.sbx", "rps"),
      Ref("tls.handshake.s_server", "rps", "`openssl s_server`")),
    H("MCP: `tools/call` echo, one session, p50", "mcp", Ref("mcp.echo.sbx", "p50_ms"),
      Ref("mcp.echo.gw", "p50_ms", "supergateway"), Ref("mcp.echo.stdio", "p50_ms", "stdio"),
      Goal("≤ floor + 1 ms (#11)", lambda v, p, f: f is not None and v <= f + 1)),
    H("MCP: calls/s, 20 sessions side by side", "mcp", Ref("mcp.rate.sbx", "calls_s"),
      Ref("mcp.rate.gw", "calls_s", "supergateway"), Ref("mcp.rate.floor", "calls_s", "stdio"),
      Goal("≥ 4,000/s and ≥ 75% of stdio (#33)", lambda v, p, f: f is not None and v >= 4000
           and v >= 0.75 * f)),
    H("MCP: `initialize` with a spare ready, p50", "mcp", Ref("mcp.init.sbx", "p50_ms"),
      Ref("mcp.init.gw", "p50_ms", "supergateway"), goal=at_most(20, "≤ 20 ms (#11)")),
    H("MCP: memory per session beyond the server", "mcp", Ref("mcp.mem.sbx", "kib"),
      Ref("mcp.mem.gw", "kib", "supergateway"), goal=at_most(16, "≤ 16 KiB (#33; #11: ≤ 1 MiB)")),
    H("Port proxy: `GET` of 100 B, p50", "ports", Ref("ports.small.proxy", "p50_ms"),
      floor=Ref("ports.small.direct", "p50_ms", "direct"),
      goal=Goal("≤ direct + 1 ms (#12)", lambda v, p, f: f is not None and v <= f + 1)),
    H("Port proxy: `GET` of 1 GiB (median of rounds)", "ports", Ref("ports.big.proxy", "gbps"),
      Ref("ports.big.files", "gbps", "`GET /files`"), Ref("ports.big.direct", "gbps", "direct, warm"),
      at_least(1, "≥ 1 GB/s (#12)")),
] + snapshot_rows("snapshots", 100, "100 MiB", at_most(1, "≤ 1 s (#13)")) + \
    snapshot_rows("snapshots-1gib", 1024, "1 GiB") + [
    H("Snapshot round trip with a 1 GiB file: snapshot", "snapshot-roundtrip-1gib",
      Ref("snaprt.snapshot", "s"), goal=Goal("restored byte-identical (#13)")),
    H("Snapshot round trip with a 1 GiB file: restore", "snapshot-roundtrip-1gib",
      Ref("snaprt.restore", "s"), goal=Goal("restored byte-identical (#13)")),
    H("Snapshot of 100 MiB into S3 (s3rver, loopback)", "snapshots-s3", Ref("s3.100.snapshot", "s"),
      Ref("s3.100.snapshot_local", "s", "local store"), Ref("s3.100.put", "s", "upload alone")),
    H("Restore of 100 MiB from S3 on another node", "snapshots-s3", Ref("s3.100.restore_other", "s"),
      Ref("s3.100.restore_local", "s", "local store"), Ref("s3.100.get", "s", "download alone")),
    H("Code context: `1+1` round trip in a warm context, p50", "contexts", Ref("ctx.cell", "p50_ms"),
      Ref("ctx.exec", "p50_ms", "exec `true`"), goal=at_most(5, "≤ 5 ms (#29)")),
    H("Code context: ready beside a warm spare kernel, p50", "contexts", Ref("ctx.warm_create", "p50_ms"),
      goal=at_most(300, "≤ 300 ms from a pooled sandbox (#29)")),
    H("Code context: the first of a sandbox (cold kernel)", "contexts", Ref("ctx.first", "p50_ms")),
    H("Code context: a ~1 MB PNG result to the client, p50", "contexts", Ref("ctx.png", "p50_ms")),
    H("sbx/code-interpreter: its Debian part built (cached after)", "contexts", Ref("ctx.image.build", "s")),
    H("sbx/code-interpreter: size packed", "contexts", Ref("ctx.image.size", "mib"),
      floor=Ref("ctx.image.unpacked", "mib", "unpacked")),
    H("Images: acquire from a pool of a store image, p50", "images", Ref("images.acquire_tiny", "p50_ms"),
      Ref("images.acquire_host", "p50_ms", "host's pool"), goal=at_most(2, "≤ 2 ms (#14)")),
    H("Images: cold create of a store image (1 layer), p50", "images", Ref("images.cold_tiny", "p50_ms"),
      Ref("images.cold_host", "p50_ms", "host"), goal=at_most(25, "≤ 25 ms (#33; #14: ≤ 100)")),
    H("Images: import of a 100 MB oci-archive over HTTP, p50", "images", Ref("images.import", "p50_ms"),
      Ref("images.skopeo", "p50_ms", "`skopeo copy`")),
    H("Images: disk of 20 sandboxes of one image", "images", Ref("images.disk", "kib"),
      goal=Goal("one image + 20 writable layers (#14)")),
    H("Soak under faults: requests answered", "soak", Ref("soak.served", "n"),
      goal=Goal("each within its deadline or refused with the error shape (#28)")),
    H("Soak under faults: faults injected", "soak", Ref("soak.faults", "n")),
    H("Soak under faults: refusals (the error shape)", "soak", Ref("soak.errors", "n")),
    H("Soak under faults: the worst latency of an answer", "soak", Ref("soak.worst", "s")),
    H("Soak under faults: left on the machine, and problems found", "soak", Ref("soak.leaked", "n"),
      goal=Goal("nothing (#28)", lambda v, p, f: v == 0)),
]


class Run:
    """One recorded run of a bench: its run.json, rows by key, output."""

    def __init__(self, stem):
        with open(stem + ".run.json") as f:
            self.meta = json.load(f)
        self.bench = self.meta["bench"]
        self.rows = {}
        if os.path.exists(stem + ".jsonl"):
            with open(stem + ".jsonl") as f:
                for line in f:
                    if line.strip():
                        r = json.loads(line)
                        self.rows[r["key"]] = r
        self.out = self._read(stem + ".out")
        self.err = self._read(stem + ".err")

    @staticmethod
    def _read(path):
        if not os.path.exists(path):
            return ""
        with open(path, errors="replace") as f:
            return f.read()

    @property
    def failed(self):
        return self.meta.get("status", 0) != 0

    def when(self):
        """The run's date and commit, as the table's last column has them."""
        note = " (seeded)" if self.meta.get("source") else \
            " (exit %d)" % self.meta["status"] if self.failed else ""
        return "%s, %s%s" % (self.meta["start"][:10], self.meta["commit"], note)

    def load(self):
        if "load" not in self.meta:  # a seeded run whose section gave words only
            return self.meta.get("load_note", "?")
        lo, hi = ("%.1f" % x for x in self.meta["load"])
        lo, hi = (x[:-2] if x.endswith(".0") else x for x in (lo, hi))
        return lo if lo == hi else "%s-%s" % (lo, hi)


def load_results(folder):
    """bench -> its runs, oldest first."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "*.run.json"))):
        r = Run(path[:-len(".run.json")])
        runs.setdefault(r.bench, []).append(r)
    for v in runs.values():
        v.sort(key=lambda r: r.meta["start"])
    return runs


def value(run, ref):
    if ref is None or run is None:
        return None
    v = run.rows.get(ref.key, {}).get(ref.metric)
    return v if isinstance(v, (int, float)) else None


def show(run, ref):
    v = value(run, ref)
    if v is None:
        return "-"
    text = FORMATS[ref.metric](v)
    return "%s %s" % (text, ref.label) if ref.label else text


def cells(h, runs):
    """The table's cells for headline h: figure, sbx, peer, floor, goal,
    met, load, run."""
    goal = h.goal.text if h.goal else "-"
    mine = runs.get(h.bench, [])
    if not mine:
        return [h.figure, "not run", "-", "-", goal, "", "-", "-"]
    # the newest run that has the figure; the peer and floor from that run
    run = next((r for r in reversed(mine) if value(r, h.sbx) is not None), None)
    if run is None:
        last = mine[-1]
        why = "failed (exit %d)" % last.meta["status"] if last.failed else \
            "skipped" if last.meta.get("skipped") else "not measured"
        return [h.figure, why, "-", "-", goal, "", last.load(), last.when()]
    v = value(run, h.sbx)
    met = ""
    if h.goal and h.goal.check:
        ok = h.goal.check(v, value(run, h.peer), value(run, h.floor))
        met = "" if ok is None else "yes" if ok else "**no**"
    return [h.figure, "**%s**" % show(run, h.sbx), show(run, h.peer), show(run, h.floor), goal,
            met, run.load(), run.when()]


def table(runs):
    out = ["| figure | sbx | peer | floor | goal | met | load | date, commit |",
           "|---|---|---|---|---|---|---|---|"]
    for h in HEADLINES:
        out.append("| " + " | ".join(c.replace("|", r"\|") for c in cells(h, runs)) + " |")
    return "\n".join(out)


def markdown_of_output(text):
    """A bench's printed output as Markdown: its table lines as tables, the
    other lines as preformatted text."""
    out, plain = [], []

    def flush():
        if plain:
            out.extend(["", "```text"] + plain + ["```", ""])
            del plain[:]
    table_open = False
    for line in text.rstrip().splitlines():
        if line.startswith("|"):
            flush()
            if not table_open:
                out.append("")
            table_open = True
            out.append(line)
        elif line.strip():
            table_open = False
            plain.append(line)
        else:
            table_open = False
            flush()
    flush()
    return "\n".join(out).strip("\n")


def detail(runs):
    parts = ["## The last run of each bench"]
    for name, title in BENCHES:
        parts.append("### %s: %s" % (name, title))
        mine = runs.get(name, [])
        if not mine:
            parts.append("Not run: no results of it in this run of `make bench`.")
        for r in mine:
            m = r.meta
            status = "failed (exit %d)" % m["status"] if r.failed else \
                "skipped" if m.get("skipped") else "passed"
            when = m["start"] if m["end"] == m["start"] else "%s to %s" % (
                m["start"], m["end"][11:] if m["end"][:10] == m["start"][:10] else m["end"])
            head = "%s, at %s, load %s, %s" % (when, m["commit"], r.load(), status)
            if m.get("seconds"):
                head += ", %.0f s" % m["seconds"]
            parts.append(head + ":\n`%s`" % m["command"])
            if m.get("source"):
                parts.append("Seeded from BENCHMARKS.md's section \"%s\" (%s)." %
                             (m["source"], m.get("source_ref", "")))
            if r.out.strip():
                parts.append(markdown_of_output(r.out))
            # a test prints its figures and verdict on stderr
            if (r.failed or m.get("skipped") or not r.out.strip()) and r.err.strip():
                parts.append("```text\n%s\n```" % "\n".join(r.err.rstrip().splitlines()[-30:]))
    return "\n\n".join(parts)


def replace_block(doc, begin, end, body, at_top):
    """doc with the block between begin and end (the markers kept) holding
    body; a doc without the block gets it under its title (at_top) or at
    its end."""
    block = "%s\n%s\n%s" % (begin, body, end)
    i, j = doc.find(begin), doc.find(end)
    if i >= 0 and j > i:
        return doc[:i] + block + doc[j + len(end):]
    if at_top:
        m = re.match(r"(# [^\n]*\n)", doc)
        if m:
            return doc[:m.end()] + "\n" + block + "\n" + doc[m.end():]
        return block + "\n\n" + doc
    return doc.rstrip("\n") + "\n\n" + block + "\n"


def report(doc, runs):
    note = ("Each figure beside its peer and floor from the same run of the same bench; "
            "\"met\" checks the goal where it is a number. Load: the 1-minute load average "
            "during that bench's run (2 cores: above about 1.5 it is not an idle figure).")
    if any(r.meta.get("source") for v in runs.values() for r in v):
        note += (" Rows marked \"seeded\" were copied from the dated sections this file held "
                 "before its table (their date and commit are the run's); `make bench` in an "
                 "idle window replaces them.")
    doc = replace_block(doc, TABLE_BEGIN, TABLE_END, note + "\n\n" + table(runs), True)
    return replace_block(doc, DETAIL_BEGIN, DETAIL_END, detail(runs), False)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    top = os.path.dirname(here)
    ap.add_argument("--results", default=os.path.join(top, "build", "release", "bench-results"))
    ap.add_argument("--doc", default=os.path.join(top, "BENCHMARKS.md"))
    a = ap.parse_args()
    runs = load_results(a.results)
    if not runs:  # a table of "not run" would only hide the last one
        print("%s: no results (make bench writes them; RESULTS=bench/seed: the seeded ones); "
              "%s left as it is" % (a.results, a.doc), file=sys.stderr)
        return 2
    with open(a.doc) as f:
        doc = f.read()
    new = report(doc, runs)
    if new != doc:
        with open(a.doc + ".tmp", "w") as f:
            f.write(new)
        os.rename(a.doc + ".tmp", a.doc)
    missing = [n for n, _ in BENCHES if n not in runs]
    failed = [n for n, v in runs.items() if v[-1].failed]
    print("%s: %d benches' results from %s%s%s" % (
        a.doc, len(runs), a.results, "; not run: " + ", ".join(missing) if missing else "",
        "; failed: " + ", ".join(failed) if failed else ""), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
