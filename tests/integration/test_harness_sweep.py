"""The harness's sweep of what a killed test left (sbx_harness.sweep_dead_runs).

A test process (a child here) starts a supervisor and a sandbox, the
network test's "internet" (a namespace, a link into it, its DNS and HTTP
servers), an s3rver, and stand-ins of a control plane's and a kubelet
harness's processes on their folders (their real start costs more than
this whole test; what is checked is their record and its sweep), then it
and its supervisor die of SIGKILL: no cleanup runs, the containers, overlay
mounts, loop devices, namespace, link, servers and folders stay. The next
harness start (here, this process's) removes exactly those and the runs'
folders, and nothing of the runs whose owner (this process) lives: one with
its supervisor running beside (its sandbox still answers), one whose
supervisor was killed as a restart test kills it (no supervisor on its
folder, yet not dead: its sandbox's container, mounts and loop device stay
for the restart), and a namespace and an s3rver of its own. The child
makes its things while this process makes its own. Gone means gone for
what the dead run named: its containers (by id), their agents (by pid and
start), a create its supervisor cut short (a stand-in `runc init` in a
container cgroup of the run's, no container listed: what the sweep finds
by cgroup, not by the runtime's list) and the cgroup, its loop devices (by
name), while a process of this test's, started in a namespace while the
dead run's disks were mounted, holds copies of those mounts (as an `ip
netns exec` server of a test beside does; this machine's mounts propagate
nothing); and its record only then: while a runtime call of its supervisor
still runs (a stand-in), the record and folder stay for the next sweep.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import fcntl
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
import sbx_leftovers as lo  # noqa: E402
from s3_harness import S3Server, require_s3rver  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")

# The killed test: a supervisor with one sandbox handed out, an internet,
# an s3rver, a control plane's folder and process (a stand-in: sleep) and
# a kubelet harness (a stand-in that says it is ready), then waiting.
CHILD = r"""
import json, os, sys, tempfile, time
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, os.path.join(sys.argv[1], "..", "k8s"))
from subprocess import DEVNULL, Popen
from sbx_harness import Supervisor, state_tag
from s3_harness import S3Server
from test_network import Internet
from apiserver import ControlPlane
from kubelet_node import Node
s = Supervisor(os.environ["SBX_SUPERVISOR"], os.environ["SBX_AGENT"], pool_size=1).start()
sid = s.create()["id"]
inet = Internet("k").start()
inet.link_to_host()
srv = S3Server(tempfile.mkdtemp(prefix="sbx-it-s3-")).start()
cp = ControlPlane()
cp.make_folder()
cp.spawn("etcd", ["sleep", "300"])
node = Node("none", "n1", os.path.join(tempfile.mkdtemp(prefix="sbx-it-node-"), "host"), {})
node.argv = [sys.executable, "-c", "import time; print('node n1 ready', flush=True); time.sleep(300)"]
node.start()
os.makedirs(node.root)
# a create its supervisor cut short (a runc run killed by its timeout): its
# `runc init` in the container's cgroup, no container listed; a stand-in
cut = Popen(["sleep", "300"], stdin=DEVNULL)
cg = next(d for d in ("/sys/fs/cgroup/pids/sbx", "/sys/fs/cgroup/sbx") if os.path.isdir(d))
cg = os.path.join(cg, "sbx-%s-cut" % state_tag(s.state_dir))
os.makedirs(cg)
with open(os.path.join(cg, "cgroup.procs"), "w") as f:
    f.write(str(cut.pid))
print(json.dumps({"state": s.state_dir, "root": s.root, "sup": s.proc.pid, "id": sid,
                  "netns": inet.ns, "link": inet.host_link, "inet": inet.dir,
                  "inet_pids": [p.pid for p in inet.procs], "s3": srv.folder, "s3_pid": srv.proc.pid,
                  "cp": cp.root, "node": node.root, "node_top": os.path.dirname(node.host_root),
                  "node_pid": node.proc.pid, "cut": cut.pid, "cut_cgroup": cg}), flush=True)
time.sleep(300)
"""


def left(state_dir):
    """What of a run is on the machine: its containers, mounts, loop devices."""
    return (sorted(c[0] for c in h.containers_under(state_dir)), sorted(h.mounts_under(state_dir)),
            sorted(h.loops_under(state_dir)))


def helpers_left(run):
    """What of the killed test's helpers is on the machine: their
    processes, the namespace, the link, their folders."""
    pids = run["inet_pids"] + [run["s3_pid"], run["node_pid"]]
    link = subprocess.run(["ip", "link", "show", run["link"]], capture_output=True)
    return {"procs": sorted(p for p in pids if h.proc_start(p) is not None),
            "netns": os.path.exists("/run/netns/" + run["netns"]), "link": link.returncode == 0,
            "folders": sorted(k for k in ("cp", "inet", "node", "s3") if os.path.exists(run[k]))}


def runs_things(state_dir):
    """A run's containers, their agents (host pids) and its loop devices."""
    cids = sorted(c[0] for c in h.containers_under(state_dir))
    agents = []
    for cid in cids:
        out = subprocess.run([h.RUNTIME, "state", cid], capture_output=True, text=True)
        if out.returncode == 0:
            pid = json.loads(out.stdout)["pid"]
            agents.append([pid, h.proc_start(pid)])
    return {"containers": cids, "agents": agents, "loops": h.loops_under(state_dir)}


def things_left(things, state_dir):
    """Which of runs_things' are still on the machine."""
    alive = [c for c in things["containers"]
             if subprocess.run([h.RUNTIME, "state", c], capture_output=True).returncode == 0]
    agents = [p for p, start in things["agents"] if h.proc_start(p) == start]
    agents += lo.cgroup_procs("/sbx/sbx-%s-" % h.state_tag(state_dir))
    loops = []
    for dev in things["loops"]:
        try:
            with open("/sys/block/%s/loop/backing_file" % os.path.basename(dev)) as f:
                if f.read().startswith(os.path.realpath(state_dir) + "/"):
                    loops.append(dev)
        except OSError:
            pass
    return {"containers": alive, "agents": agents, "loops": loops}


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

    def child(self):
        """The test to kill, started (it makes its things while this
        process makes its own)."""
        child = subprocess.Popen([sys.executable, "-c", CHILD, HERE], stdout=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL)
        self.addCleanup(child.wait)
        self.addCleanup(child.kill)
        return child

    def killed_test(self, child):
        """The child's run once made, the child and its supervisor
        SIGKILLed: {state, root, sup, id, ...}."""
        r, _, _ = select.select([child.stdout], [], [], 60)
        self.assertTrue(r, "the child's supervisor did not start")
        run = json.loads(child.stdout.readline())
        child.stdout.close()
        # should this test fail, what the child made still goes
        self.addCleanup(h.remove_run, run["state"], run["root"])
        self.addCleanup(lo.kill_cgroups, "sbx-%s-" % h.state_tag(run["state"]))
        for folder, top in ((run["inet"], None), (run["s3"], None), (run["cp"], None),
                            (run["node"], run["node_top"])):
            self.addCleanup(h.remove_run, folder, top)
        # Its records held (the lock a sweep takes on each) from before it
        # dies until this test sweeps: under ctest -j2 a harness start of a
        # test beside (it_k8s_nodes' control plane) sweeps dead runs too,
        # and took the dead s3rver before it was looked at.
        self.held = []
        for folder in (run["state"], run["inet"], run["s3"], run["cp"], run["node"]):
            fd = os.open(h.run_record(folder), os.O_RDONLY)
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.held.append(fd)
        self.addCleanup(self.let_sweep)
        child.kill()
        child.wait()
        os.kill(run["sup"], signal.SIGKILL)
        self.assertTrue(wait_gone(run["sup"]))
        return run

    def let_sweep(self):
        while self.held:
            os.close(self.held.pop())

    def test_sweep_takes_only_the_dead_run(self):
        require_s3rver()
        child = self.child()
        beside = self.sup(pool_size=1)
        b_sid = beside.create()["id"]
        restarted = self.sup(pool_size=1)
        r_sid = restarted.create()["id"]
        restarted.proc.kill()        # as a restart test stops it
        restarted.proc.wait()
        srv = S3Server(os.path.join(beside.root, "s3"))
        self.addCleanup(srv.stop)
        srv.start()
        # a namespace of this process's (no servers in it: what is judged
        # is its owner)
        ns, ns_dir = "sbxt%dlive" % os.getpid(), os.path.join(beside.root, "ns")
        self.addCleanup(h.remove_run, ns_dir)
        h.register_run(ns_dir, runc=(), netns=[ns])
        subprocess.run(["ip", "netns", "add", ns], check=True)
        dead = self.killed_test(child)
        # a process of this test in its namespace, started while the dead
        # run's disks are mounted: its mount namespace keeps copies of them
        holder = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "300"],
                                  stdin=subprocess.DEVNULL)
        self.addCleanup(holder.wait)
        self.addCleanup(holder.kill)
        deadline = time.monotonic() + 10
        while not any(mp for _, mp in lo.mounts_elsewhere(dead["state"])) \
                and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertTrue(lo.mounts_elsewhere(dead["state"]))
        things = runs_things(dead["state"])
        self.assertTrue(things["containers"] and things["loops"], things)
        self.assertEqual(len(things["agents"]), len(things["containers"]), things)
        things["agents"].append([dead["cut"], h.proc_start(dead["cut"])])
        self.assertIsNotNone(things["agents"][-1][1])

        gone = left(dead["state"])
        self.assertTrue(all(gone), gone)
        self.assertTrue(any(dead["id"] in c for c in gone[0]), gone)
        kept = {s.state_dir: left(s.state_dir) for s in (beside, restarted)}
        for k in kept.values():
            self.assertTrue(all(k), kept)
        self.assertTrue(os.path.exists(h.run_record(dead["state"])))
        helpers = helpers_left(dead)
        self.assertEqual(helpers["procs"], sorted(dead["inet_pids"] + [dead["s3_pid"], dead["node_pid"]]),
                         helpers)
        self.assertTrue(helpers["netns"] and helpers["link"], helpers)
        self.assertEqual(helpers["folders"], ["cp", "inet", "node", "s3"], helpers)

        # a runtime call of the killed supervisor's still running (a
        # stand-in naming its folder, as `runc run --bundle` does): it may
        # still make a container, so the run's record stays through this
        # sweep, and goes with the next one once the call is over
        call = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)", "--bundle",
                                 os.path.join(dead["state"], "sandboxes", "late", "bundle")],
                                stdin=subprocess.DEVNULL)
        self.addCleanup(call.wait)
        self.addCleanup(call.kill)
        wait, h.RUNTIME_CALL_WAIT_S = h.RUNTIME_CALL_WAIT_S, 0.5
        try:
            t0 = time.monotonic()
            self.let_sweep()
            self.sup(pool_size=0)   # the next harness start sweeps
            took = time.monotonic() - t0
        finally:
            h.RUNTIME_CALL_WAIT_S = wait
        self.assertTrue(os.path.exists(h.run_record(dead["state"])))
        self.assertTrue(os.path.exists(dead["root"]))
        self.assertEqual(things_left(things, dead["state"]),
                         {"containers": [], "agents": [], "loops": []})
        call.kill()
        call.wait()
        # The call over, the next sweep takes the run: this test's, or (its
        # records no longer held) a harness start of a test beside, which
        # runs the same sweep and may be halfway through it (its lock makes
        # ours pass the record by): the record is gone within the deadline.
        deadline, swept = time.monotonic() + 30, []
        while os.path.exists(h.run_record(dead["state"])):
            self.assertLess(time.monotonic(), deadline, "the dead run never swept: %r" % swept)
            swept += h.sweep_dead_runs()
            time.sleep(0.05)

        self.assertEqual(left(dead["state"]), ([], [], []))
        self.assertEqual(things_left(things, dead["state"]),
                         {"containers": [], "agents": [], "loops": []})
        self.assertEqual(lo.mounts_elsewhere(dead["state"]), [])
        self.assertFalse(os.path.exists(dead["cut_cgroup"]))
        self.assertIsNone(holder.poll())   # copies unmounted, the process untouched
        self.assertFalse(os.path.exists(dead["root"]))
        self.assertFalse(os.path.exists(h.run_record(dead["state"])))
        self.assertEqual(helpers_left(dead), {"procs": [], "netns": False, "link": False,
                                              "folders": []})
        self.assertFalse(os.path.exists(dead["node_top"]))
        for folder in (dead["inet"], dead["s3"], dead["cp"], dead["node"]):
            self.assertFalse(os.path.exists(h.run_record(folder)), folder)
        for state, k in kept.items():
            self.assertEqual(left(state), k, state)
            self.assertTrue(os.path.exists(h.run_record(state)))
        st, _, b = beside.exec(b_sid, cmd="echo beside")
        self.assertEqual((st, b.get("stdout")), (200, "beside\n"), b)
        self.assertTrue(any(r_sid in c for c in kept[restarted.state_dir][0]))
        # this process's namespace and s3rver
        self.assertTrue(os.path.exists("/run/netns/" + ns))
        self.assertTrue(os.path.exists(h.run_record(ns_dir)))
        self.assertIsNone(srv.proc.poll())
        self.assertTrue(os.path.exists(h.run_record(srv.folder)))
        print("swept a killed test's run in %.2f s (the next start's)" % took)


if __name__ == "__main__":
    unittest.main(verbosity=2)
