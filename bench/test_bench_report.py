"""bench/bench_report.py on fixture results: the table's block is replaced
and the rest of the document kept byte for byte; each headline reads its
peer and floor from the same run and checks its goal; a bench without
results shows its rows as "not run" and a failed one as failed; a
document without the blocks gets them; no results at all leave it as it
is. Run by ctest (bench_report).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_report as br  # noqa: E402

HEAD = "# Benchmarks\n\n"
TAIL = ("\n\n## How to run\n\n`make bench` | kept as it is\n\n## Method\n\n"
        "| a table | of the method |\n|---|---|\n| kept | too |\n")


def doc_with(table_body, detail_body):
    return (HEAD + br.TABLE_BEGIN + "\n" + table_body + "\n" + br.TABLE_END + TAIL +
            br.DETAIL_BEGIN + "\n" + detail_body + "\n" + br.DETAIL_END + "\n")


def write_run(folder, name, rows, status=0, out="", start="2026-12-03 10:00", load=(0.2, 0.9),
              commit="abc1234"):
    meta = {"bench": name, "command": "cmd of " + name, "start": start, "end": start,
            "seconds": 60.0, "commit": commit, "load": list(load), "status": status,
            "skipped": False}
    with open(os.path.join(folder, name + ".run.json"), "w") as f:
        json.dump(meta, f)
    with open(os.path.join(folder, name + ".jsonl"), "w") as f:
        for key, figures in rows.items():
            f.write(json.dumps(dict(figures, key=key, what=key, role="x")) + "\n")
    with open(os.path.join(folder, name + ".out"), "w") as f:
        f.write(out)


def line_of(doc, figure):
    for line in doc.splitlines():
        if line.startswith("| " + figure + " |"):
            return [c.strip() for c in line.strip("|").split(" | ")]
    raise AssertionError("no row %r in\n%s" % (figure, doc))


class Report(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="bench-report-test-")
        self.results = os.path.join(self.dir, "results")
        os.mkdir(self.results)
        write_run(self.results, "sbx-bench", {
            "exec.api": {"n": 1000, "p50_ms": 1.22, "p99_ms": 1.78},
            "exec.runc": {"n": 200, "p50_ms": 13.9, "p99_ms": 36.9},
            "exec.spawn": {"n": 1000, "p50_ms": 0.53, "p99_ms": 0.71},
            "stream.sse": {"n": 5, "mbps": 1198.0},
            "stream.ceiling": {"n": 1, "mbps": 6603.0},
            "cold.plain": {"n": 30, "p50_ms": 30.6, "p99_ms": 48.2},
        }, out="| what | n |\n|---|---|\n| exec | 1000 |\nload average: 0.2\n")
        write_run(self.results, "pause", {"pause.api": {"n": 20, "p50_ms": 1.5}}, status=1)
        write_run(self.results, "sse-1gib", {"sse.lossless": {"n": 1, "mbps": 120.0}})
        with open(os.path.join(self.results, "sse-1gib.err"), "w") as f:
            f.write("streamed 1024 MiB through SSE in 8.9s: 120 MB/s\nOK\n")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def run_report(self, doc):
        path = os.path.join(self.dir, "BENCHMARKS.md")
        with open(path, "w") as f:
            f.write(doc)
        p = subprocess.run([sys.executable, os.path.join(HERE, "bench_report.py"),
                            "--results", self.results, "--doc", path],
                           capture_output=True, text=True)
        with open(path) as f:
            return p.returncode, p.stderr, f.read()

    def test_blocks_replaced_rest_kept(self):
        rc, err, doc = self.run_report(doc_with("| old | table |", "### old detail"))
        self.assertTrue(doc.startswith(HEAD + br.TABLE_BEGIN + "\n"), doc[:200])
        self.assertNotIn("| old | table |", doc)
        self.assertNotIn("### old detail", doc)
        # what lies between the blocks, and after them, is untouched
        mid = doc[doc.index(br.TABLE_END) + len(br.TABLE_END):doc.index(br.DETAIL_BEGIN)]
        self.assertEqual(mid, TAIL)
        self.assertTrue(doc.endswith(br.DETAIL_END + "\n"))
        self.assertEqual(doc.count(br.TABLE_BEGIN), 1)
        self.assertEqual(doc.count(br.DETAIL_BEGIN), 1)
        # once more from the same results: the same document
        rc2, _, again = self.run_report(doc)
        self.assertEqual(again, doc)
        self.assertEqual((rc, rc2), (1, 1), err)  # pause's run failed

    def test_figures_with_peer_floor_goal_from_the_run(self):
        _, _, doc = self.run_report(doc_with("", ""))
        row = line_of(doc, "Exec `true` through the API, p50")
        self.assertEqual(row[1:4], ["**1.22 ms**", "13.9 ms `runc exec`", "0.530 ms posix_spawn"])
        self.assertIn("≤ 2 ms", row[4])
        self.assertEqual(row[5], "**no**")  # 1.22 > 1.5 x 0.53
        self.assertEqual(row[6:], ["0.2-0.9", "2026-12-03, abc1234"])
        row = line_of(doc, "Command output through SSE (`head -c` of zeros)")
        self.assertEqual(row[1:4], ["**1198 MB/s**", "-", "6603 MB/s socketpair ceiling"])
        self.assertEqual(row[5], "yes")
        # a row the bench did not write (no gVisor here): said, not dropped
        self.assertEqual(line_of(doc, "gVisor: cold create, p50")[1], "not measured")

    def test_missing_bench_not_run_failed_bench_failed(self):
        _, err, doc = self.run_report(doc_with("", ""))
        for h in br.HEADLINES:
            if h.bench == "mcp":
                self.assertEqual(line_of(doc, h.figure.replace("|", r"\|"))[1], "not run")
        self.assertIn("### mcp: ", doc)
        self.assertIn("Not run: no results", doc)
        self.assertIn("not run: restart, reset", err)
        row = line_of(doc, "Pause through the API, p50")
        self.assertEqual(row[1], "**1.50 ms**")
        self.assertEqual(row[7], "2026-12-03, abc1234 (exit 1)")
        self.assertEqual(line_of(doc, "Resume through the API, p50")[1], "failed (exit 1)")
        self.assertIn("failed: pause", err)
        # every headline has a row, in order
        figures = [line.split(" | ")[0][2:] for line in doc.splitlines()
                   if line.startswith("| ") and not line.startswith("| figure")]
        self.assertEqual(figures[:len(br.HEADLINES)], [h.figure for h in br.HEADLINES])

    def test_detail_of_each_bench(self):
        _, _, doc = self.run_report(doc_with("", ""))
        detail = doc[doc.index(br.DETAIL_BEGIN):]
        self.assertIn("### sbx-bench: ", detail)
        self.assertIn("\n| what | n |\n|---|---|\n| exec | 1000 |\n", detail)
        self.assertIn("```text\nload average: 0.2\n```", detail)
        self.assertIn("`cmd of sbx-bench`", detail)
        for name, _ in br.BENCHES:
            self.assertIn("### %s: " % name, detail)
        # a test's figures and verdict are on its stderr
        self.assertIn("```text\nstreamed 1024 MiB through SSE in 8.9s: 120 MB/s\nOK\n```", detail)

    def test_document_without_blocks(self):
        _, _, doc = self.run_report(HEAD + "Words.\n")
        self.assertTrue(doc.startswith("# Benchmarks\n\n" + br.TABLE_BEGIN))
        self.assertIn(br.TABLE_END + "\n\nWords.\n", doc)
        self.assertTrue(doc.endswith(br.DETAIL_END + "\n"))

    def test_no_results_leaves_the_document(self):
        shutil.rmtree(self.results)
        os.mkdir(self.results)
        doc = doc_with("| the last | table |", "### its detail")
        rc, err, after = self.run_report(doc)
        self.assertEqual((rc, after), (2, doc))
        self.assertIn("no results", err)

    def test_headlines_name_known_benches_and_metrics(self):
        names = {n for n, _ in br.BENCHES}
        for h in br.HEADLINES:
            self.assertIn(h.bench, names, h.figure)
            for ref in (h.sbx, h.peer, h.floor):
                if ref:
                    self.assertIn(ref.metric, br.FORMATS, h.figure)


if __name__ == "__main__":
    unittest.main()
