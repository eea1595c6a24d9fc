"""The Python benches' figures as BENCHMARKS.md's tables have them: one
row per measure (its count, p50 and p99 in ms, its role: sbx, peer or
floor), and the machine's load average under the table (a figure taken at
load 20 is not one taken idle). Stdlib only.
"""

HEADER = "| what | n | p50 ms | p99 ms | role |\n|---|---|---|---|---|"


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def row(what, v, role):
    print("| %-44s | %6d | %8.3f | %8.3f | %s |" % (what, len(v), pct(v, 50), pct(v, 99), role))


def load_average():
    with open("/proc/loadavg") as f:
        print("load average: %s" % f.read().split()[:3])


def table(rows, note=None):
    """rows: (what, values in ms, role), a false one left out; note: a line
    under the rows."""
    print(HEADER)
    for r in rows:
        if r:
            row(*r)
    if note:
        print(note)
    load_average()
