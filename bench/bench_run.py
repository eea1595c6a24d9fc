"""One step of `make bench`, run and recorded for bench/bench_report.py:

  bench/bench_run.py --out DIR NAME -- COMMAND [ARGS...]

runs COMMAND with SBX_BENCH_RESULTS=DIR/NAME.jsonl, where the bench appends
its rows (bench_table.emit, bench_results.c); copies its standard output to
DIR/NAME.out (the run's detail, below BENCHMARKS.md's table) and its
standard error to DIR/NAME.err, both also to the terminal; samples the load
average every 2 s; and at the end writes DIR/NAME.run.json: the bench, the
command, start and end, the tree's commit (and whether it had changes
besides BENCHMARKS.md), the load's range, the exit status. A unittest that
skipped its test is recorded as skipped. The tests `make bench` runs at full
size print their figures instead of writing rows: OUTPUT_ROWS turns those
lines into rows. Exits with COMMAND's status. Stdlib only.
"""
import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def _mib(kib):
    return round(int(kib) / 1024.0, 1)


# bench name -> (a regular expression over its output, a function of its
# match giving [(key, what, role, figures)])
OUTPUT_ROWS = {
    "files-4gib": (
        r"round trip (\d+) MiB: up (\d+) MB/s, down (\d+) MB/s; RSS KiB before/peak: "
        r"supervisor \d+/(\d+), agent \d+/(\d+)",
        lambda m: [("roundtrip.up", "PUT /files of %s MiB, hashed as it goes" % m[1], "sbx",
                    {"n": 1, "mbps": float(m[2])}),
                   ("roundtrip.down", "GET /files of %s MiB, hashed as it comes" % m[1], "sbx",
                    {"n": 1, "mbps": float(m[3])}),
                   ("roundtrip.rss", "peak RSS during the round trip", "sbx",
                    {"supervisor_mib": _mib(m[4]), "agent_mib": _mib(m[5]),
                     "mib": max(_mib(m[4]), _mib(m[5]))})]),
    "sse-1gib": (
        r"streamed (\d+) MiB through SSE in ([\d.]+)s: (\d+) MB/s",
        lambda m: [("sse.lossless", "%s MiB of output through SSE, sha256 checked" % m[1], "sbx",
                    {"n": 1, "s": float(m[2]), "mbps": float(m[3])})]),
    "snapshot-roundtrip-1gib": (
        r"snapshot of a (\d+) MiB file's layer: ([\d.]+) s, \d+ bytes[\s\S]*?restore into a "
        r"new sandbox: ([\d.]+) s",
        lambda m: [("snaprt.snapshot", "snapshot of a %s MiB file's layer" % m[1], "sbx",
                    {"n": 1, "s": float(m[2])}),
                   ("snaprt.restore", "its restore, byte-identical", "sbx",
                    {"n": 1, "s": float(m[3])})]),
}


def git(*args):
    out = subprocess.run(["git", "-C", SOURCE] + list(args), capture_output=True, text=True)
    return out.stdout.strip() if out.returncode == 0 else ""


def commit():
    """The tree's commit, "+changes" when files other than BENCHMARKS.md
    differ from it (the report rewrites that one)."""
    head = git("rev-parse", "--short=7", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!BENCHMARKS.md")
    return head + ("+changes" if changed else "")


class LoadSampler(threading.Thread):
    """The 1-minute load average every 2 s while the bench runs."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples = [os.getloadavg()[0]]
        self.done = threading.Event()

    def run(self):
        while not self.done.wait(2.0):
            self.samples.append(os.getloadavg()[0])

    def stop(self):
        self.done.set()
        self.join()
        self.samples.append(os.getloadavg()[0])


def tee(src, dst_file, term):
    """Copy src's lines into dst_file and to term as they come."""
    for line in iter(src.readline, b""):
        dst_file.write(line)
        dst_file.flush()
        term.write(line)
        term.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the results folder")
    ap.add_argument("name")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("no command")
    os.makedirs(a.out, exist_ok=True)
    stem = os.path.join(a.out, a.name)
    for ext in (".jsonl", ".out", ".err", ".run.json"):
        if os.path.exists(stem + ext):
            os.unlink(stem + ext)
    env = dict(os.environ, SBX_BENCH_RESULTS=os.path.abspath(stem + ".jsonl"))
    load = LoadSampler()
    t0 = time.time()
    load.start()
    with open(stem + ".out", "wb") as out, open(stem + ".err", "wb") as err:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        threads = [threading.Thread(target=tee, args=(p.stdout, out, sys.stdout.buffer)),
                   threading.Thread(target=tee, args=(p.stderr, err, sys.stderr.buffer))]
        for t in threads:
            t.start()
        status = p.wait()
        for t in threads:
            t.join()
    load.stop()
    t1 = time.time()
    with open(stem + ".out", errors="replace") as f:
        text = f.read()
    with open(stem + ".err", errors="replace") as f:
        text_err = f.read()
    skipped = status == 0 and re.search(r"^OK \(skipped=\d+\)$", text_err, re.M) is not None
    if a.name in OUTPUT_ROWS and status == 0:
        pattern, rows = OUTPUT_ROWS[a.name]
        m = re.search(pattern, text + "\n" + text_err)
        with open(stem + ".jsonl", "a") as f:
            for key, what, role, figures in (rows(m) if m else []):
                f.write(json.dumps(dict(figures, key=key, what=what, role=role),
                                   sort_keys=True) + "\n")
    run = {
        "bench": a.name,
        "command": shlex.join(cmd),
        "start": time.strftime("%Y-%m-%d %H:%M", time.localtime(t0)),
        "end": time.strftime("%Y-%m-%d %H:%M", time.localtime(t1)),
        "seconds": round(t1 - t0, 1),
        "commit": commit(),
        "load": [min(load.samples), max(load.samples)],
        "status": status,
        "skipped": skipped,
    }
    with open(stem + ".run.json.tmp", "w") as f:
        json.dump(run, f, indent=1, sort_keys=True)
        f.write("\n")
    os.rename(stem + ".run.json.tmp", stem + ".run.json")
    return status


if __name__ == "__main__":
    sys.exit(main())
