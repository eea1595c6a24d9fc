"""The Python benches' figures as BENCHMARKS.md's tables have them: one
row per measure (its count, p50 and p99 in ms, its role: sbx, peer or
floor), and the machine's load average under the table (a figure taken at
load 20 is not one taken idle). Each row with a key is also written as a
result (emit): a JSON line appended to the file $SBX_BENCH_RESULTS names,
which bench/bench_run.py sets and bench/bench_report.py reads; unset,
nothing is written. Stdlib only.
"""
import json
import os
import time

HEADER = "| what | n | p50 ms | p99 ms | role |\n|---|---|---|---|---|"


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def emit(key, what, role, **figures):
    """One row as a result: key (what the report's table names), what (the
    row's words), role, and its figures (n, p50_ms, mbps, ...)."""
    path = os.environ.get("SBX_BENCH_RESULTS")
    if not path:
        return
    rec = dict(figures, key=key, what=what.strip(), role=role)
    with open(path, "a") as f:
        f.write(json.dumps(rec, sort_keys=True) + "\n")


def row(what, v, role, key=None):
    print("| %-44s | %6d | %8.3f | %8.3f | %s |" % (what, len(v), pct(v, 50), pct(v, 99), role))
    if key and v:
        emit(key, what, role, n=len(v), p50_ms=pct(v, 50), p99_ms=pct(v, 99))


def timed(fn, n):
    """fn called n times: each call's time in ms."""
    out = []
    for _ in range(n):
        t0 = time.monotonic()
        fn()
        out.append((time.monotonic() - t0) * 1000)
    return out


def load_average():
    with open("/proc/loadavg") as f:
        print("load average: %s" % f.read().split()[:3])


def table(rows, note=None):
    """rows: (what, values in ms, role[, key]), a false one left out; note:
    a line under the rows."""
    print(HEADER)
    for r in rows:
        if r:
            row(*r)
    if note:
        print(note)
    load_average()
