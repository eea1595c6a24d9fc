"""The harness's sweep of what a killed test left (sbx_harness.sweep_dead_runs).

A test process (a child here) starts a supervisor and a sandbox, then it
and its supervisor die of SIGKILL: no cleanup runs, the containers, overlay
mounts and loop devices stay. The next harness start (here, this process's)
removes exactly those and the run's folder, and nothing of two runs whose
owner (this process) lives: one with its supervisor running beside (its
sandbox still answers), one whose supervisor was killed as a restart test
kills it (no supervisor on its folder, yet not dead: its sandbox's
container, mounts and loop device stay for the restart).

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import select
import signal
import subprocess
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sbx_harness as h  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")

# The killed test: a supervisor with one sandbox handed out, then waiting.
CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from sbx_harness import Supervisor
s = Supervisor(os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"], pool_size=1).start()
sid = s.create()["id"]
print(json.dumps({"state": s.state_dir, "root": s.root, "sup": s.proc.pid, "id": sid}), flush=True)
time.sleep(300)
"""


def left(state_dir):
    """What of a run is on the machine: its containers, mounts, loop devices."""
    return (sorted(c[0] for c in h.containers_under(state_dir)), sorted(h.mounts_under(state_dir)),
            sorted(h.loops_under(state_dir)))


def wait_gone(pid, timeout=10):
    deadline = time.monotonic() + timeout
    while h.proc_start(pid) is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    return h.proc_start(pid) is None


class Sweep(unittest.TestCase):
    def sup(self, **kw):
        s = h.Supervisor(SUP, AGENT, **kw)
        self.addCleanup(s.cleanup)
        return s.start()

    def killed_test(self):
        """The child's run, both processes SIGKILLed: {state, root, sup, id}."""
        child = subprocess.Popen([sys.executable, "-c", CHILD, HERE], stdout=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL)
        self.addCleanup(child.wait)
        self.addCleanup(child.kill)
        r, _, _ = select.select([child.stdout], [], [], 60)
        self.assertTrue(r, "the child's supervisor did not start")
        run = json.loads(child.stdout.readline())
        child.stdout.close()
        # should this test fail, what the child made still goes
        self.addCleanup(h.remove_run, run["state"], run["root"])
        child.kill()
        child.wait()
        os.kill(run["sup"], signal.SIGKILL)
        self.assertTrue(wait_gone(run["sup"]))
        return run

    def test_sweep_takes_only_the_dead_run(self):
        beside = self.sup(pool_size=1)
        b_sid = beside.create()["id"]
        restarted = self.sup(pool_size=1)
        r_sid = restarted.create()["id"]
        restarted.proc.kill()        # as a restart test stops it
        restarted.proc.wait()
        dead = self.killed_test()

        gone = left(dead["state"])
        self.assertTrue(all(gone), gone)
        self.assertTrue(any(dead["id"] in c for c in gone[0]), gone)
        kept = {s.state_dir: left(s.state_dir) for s in (beside, restarted)}
        for k in kept.values():
            self.assertTrue(all(k), kept)
        self.assertTrue(os.path.exists(h.run_record(dead["state"])))

        t0 = time.monotonic()
        self.sup(pool_size=0)   # the next harness start sweeps
        took = time.monotonic() - t0

        self.assertEqual(left(dead["state"]), ([], [], []))
        self.assertFalse(os.path.exists(dead["root"]))
        self.assertFalse(os.path.exists(h.run_record(dead["state"])))
        for state, k in kept.items():
            self.assertEqual(left(state), k, state)
            self.assertTrue(os.path.exists(h.run_record(state)))
        st, _, b = beside.exec(b_sid, cmd="echo beside")
        self.assertEqual((st, b.get("stdout")), (200, "beside\n"), b)
        self.assertTrue(any(r_sid in c for c in kept[restarted.state_dir][0]))
        print("swept a killed test's run in %.2f s (the next start's)" % took)


if __name__ == "__main__":
    unittest.main(verbosity=2)
