"""Limits per sandbox through a real sandbox-supervisor, real runc
containers and the real agent: the defaults and the ceiling (400 naming the
field), memory (a hog OOM-killed and reported as such, in an exec and in a
background process, the agent answering after), processes (3,000 forks stop
near `pids`), disk (a 1 GiB write stops near 512 MiB with ENOSPC, PUT /files
answers 507 and leaves the old file), CPU (four spinners held near their
0.5 CPU), a fork bomb beside a neighbour, and acquire with `resources`.
Everything made is removed at the end, also when a test fails (the harness
detaches the disks' loop devices too).

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import Supervisor, percentile, stop_clean  # noqa: E402
from test_exec_options import agent_pid  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")
MB = 1 << 20
GB = 1 << 30
HOG = "x = b'y' * (768 << 20)"
BOMB = ":(){ :|:& };:"
FORKS = r"""
import os
n = 0
try:
    for _ in range(3000):
        pid = os.fork()
        if pid == 0:
            os.execv("/bin/sleep", ["sleep", "300"])
        n += 1
except OSError as e:
    print("stopped", e.errno)
print(n)
"""


def have_cap_sys_resource():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return bool(int(line.split()[1], 16) & (1 << 24))
    return False


class Limits(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sup = Supervisor(SUP, AGENT, pool_size=2, extra=[
            "--default-resources", "cpus=1,memory=512M,pids=512,disk=1G",
            "--max-resources", "cpus=2,memory=2G,pids=4096,disk=2G"])
        cls.addClassCleanup(cls.sup.cleanup)
        cls.sup.start()
        cls.sup.wait_ready()

    @classmethod
    def tearDownClass(cls):
        stop_clean(cls.sup)

    # ---- helpers ----
    def make(self, **res):
        sb = self.sup.create(resources=res, timeout=900) if res else self.sup.create(timeout=900)
        self.addCleanup(self.delete, sb["id"])
        return sb["id"]

    def delete(self, sid):
        st, _, body = self.sup.request("DELETE", "/v1/sandboxes/%s" % sid)
        self.assertIn(st, (204, 404), body)

    def view(self, sid):
        st, _, body = self.sup.request("GET", "/v1/sandboxes/%s" % sid)
        self.assertEqual(st, 200, body)
        return body

    def run_(self, sid, **kw):
        st, _, body = self.sup.exec(sid, **kw)
        self.assertEqual(st, 200, body)
        return body

    def wait_pids(self, sid, cond, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            n = self.view(sid)["usage"]["pids"]
            if cond(n):
                return n
            time.sleep(0.02)
        raise AssertionError("pids of %s never met the condition (last %r)" % (sid, n))

    def exec_p50(self, sid, n=60):
        conn = self.sup.conn()
        times = []
        try:
            for _ in range(n):
                t0 = time.perf_counter()
                st, _, body = self.sup.exec(sid, conn=conn, argv=["true"])
                times.append((time.perf_counter() - t0) * 1000)
                self.assertEqual(st, 200, body)
                self.assertEqual(body["exit_code"], 0)
        finally:
            conn.close()
        return percentile(times, 50)

    # ---- tests ----
    def test_defaults_in_force_and_shown(self):
        sid = self.make()
        sb = self.view(sid)
        self.assertEqual(sb["resources"], {"cpus": 1, "memory": 512 * MB, "pids": 512, "disk": GB})
        u = sb["usage"]
        self.assertEqual(set(u), {"memory_bytes", "memory_peak_bytes", "cpu_seconds", "pids",
                                  "disk_bytes", "oom_kills"})
        self.assertGreater(u["memory_bytes"], 0)
        self.assertGreaterEqual(u["memory_peak_bytes"], u["memory_bytes"])
        self.assertGreaterEqual(u["pids"], 1)
        self.assertEqual(u["oom_kills"], 0)
        self.assertLess(u["disk_bytes"], MB)
        # the kernel's figures, as the sandbox sees them
        r = self.run_(sid, cmd="cat /sys/fs/cgroup/memory/memory.limit_in_bytes "
                               "/sys/fs/cgroup/pids/pids.max /sys/fs/cgroup/cpu/cpu.cfs_quota_us "
                               "2>/dev/null || cat /sys/fs/cgroup/memory.max /sys/fs/cgroup/pids.max "
                               "/sys/fs/cgroup/cpu.max; df -B1 --output=avail /workspace | tail -n 1")
        lines = r["stdout"].split("\n")
        self.assertEqual(lines[0], str(512 * MB), r)
        self.assertEqual(lines[1], "512", r)
        self.assertIn(lines[2], ("100000", "100000 100000"), r)
        self.assertTrue(GB - 2 * MB < int(lines[3]) <= GB, r)
        # lists show the limits, not the usage (read per sandbox on GET)
        st, _, body = self.sup.request("GET", "/v1/sandboxes")
        mine = [s for s in body["sandboxes"] if s["id"] == sid][0]
        self.assertEqual(mine["resources"]["pids"], 512)
        self.assertNotIn("usage", mine)

    def test_validation(self):
        ready = self.sup.pools()["host"]["ready"]
        cases = [
            ({"memory": "4G"}, "field \"resources.memory\": 4G is over this supervisor's ceiling of 2G"),
            ({"cpus": 3}, "field \"resources.cpus\": 3 is over this supervisor's ceiling of 2"),
            ({"pids": 5000}, "field \"resources.pids\": 5000 is over this supervisor's ceiling of 4096"),
            ({"disk": "3G"}, "field \"resources.disk\": 3G is over this supervisor's ceiling of 2G"),
            ({"cpus": 0}, "field \"resources.cpus\": 0 is under the floor of 0.01"),
            ({"memory": "1M"}, "field \"resources.memory\": 1M is under the floor of 32M"),
            ({"pids": 2}, "field \"resources.pids\": 2 is under the floor of 16"),
            ({"cpus": "1"}, "field \"resources.cpus\": want a number"),
            ({"memory": "lots"}, "'lots' is not a size"),
            ({"disk": [1]}, "field \"resources.disk\": want a size"),
            ({"gpu": 1}, "unknown key \"gpu\""),
            ([], "field \"resources\": want an object"),
        ]
        for res, msg in cases:
            st, _, body = self.sup.request("POST", "/v1/sandboxes", {"resources": res})
            self.assertEqual(st, 400, (res, body))
            self.assertEqual(body["error"]["code"], "bad_request")
            self.assertIn(msg, body["error"]["message"])
        # refused before anything was taken from the pool
        self.assertEqual(self.sup.pools()["host"]["ready"], ready)

    def test_memory_hog_is_oom_killed_and_reported(self):
        sid = self.make(memory="128M")
        r = self.run_(sid, argv=["python3", "-c", HOG], timeout=60)
        self.assertEqual(r["signal"], "KILL", r)
        self.assertTrue(r["oom_killed"], r)
        self.assertFalse(r["timed_out"])
        # through a shell: its child was killed, it says 137
        r = self.run_(sid, cmd='python3 -c "%s"' % HOG, timeout=60)
        self.assertEqual(r["exit_code"], 137, r)
        self.assertTrue(r["oom_killed"], r)
        # other kills are not OOM kills
        r = self.run_(sid, argv=["sleep", "10"], timeout=0.3)
        self.assertTrue(r["timed_out"])
        self.assertFalse(r["oom_killed"], r)
        self.assertFalse(self.run_(sid, argv=["true"])["oom_killed"])
        # a background process
        base = "/v1/sandboxes/%s/processes" % sid
        st, _, d = self.sup.request("POST", base, {"argv": ["python3", "-c", HOG]})
        self.assertEqual(st, 201, d)
        deadline = time.monotonic() + 60
        while d["state"] != "exited" and time.monotonic() < deadline:
            time.sleep(0.05)
            st, _, d = self.sup.request("GET", "%s/%d" % (base, d["pid"]))
        self.assertEqual(d["signal"], "KILL", d)
        self.assertTrue(d["oom_killed"], d)
        u = self.view(sid)["usage"]
        self.assertGreaterEqual(u["oom_kills"], 3)
        self.assertLessEqual(u["memory_peak_bytes"], 128 * MB)
        self.assertGreater(u["memory_peak_bytes"], 100 * MB)
        # the agent was never the victim and answers on; its commands are
        # the OOM killer's first choice
        self.assertEqual(self.run_(sid, cmd="cat /proc/self/oom_score_adj")["stdout"], "1000\n")
        # and run after the agent on the sandbox's CPU
        self.assertEqual(self.run_(sid, argv=["nice"])["stdout"], "10\n")
        with open("/proc/%d/stat" % agent_pid(self.sup.state_dir, sid)) as f:
            self.assertEqual(f.read().rsplit(")", 1)[1].split()[16], "0")  # its nice
        with open("/proc/%d/oom_score_adj" % agent_pid(self.sup.state_dir, sid)) as f:
            self.assertEqual(int(f.read()), -1000 if have_cap_sys_resource() else 0)

    def test_processes_stop_near_pids(self):
        sid = self.make(pids=256)
        r = self.run_(sid, argv=["python3", "-c", FORKS], timeout=120)
        out = r["stdout"].split()
        self.assertEqual(out[:2], ["stopped", "11"], r)  # EAGAIN
        n = int(out[-1])
        # the agent, the holder and python itself count too
        self.assertTrue(230 <= n <= 253, r)
        pids = self.view(sid)["usage"]["pids"]
        self.assertTrue(230 <= pids <= 256, pids)
        print("\n3000 forks with pids=256: %d made, %d processes in the sandbox" % (n, pids))

    def test_disk_fills_near_its_figure(self):
        sid = self.make(disk="512M")
        files = "/v1/sandboxes/%s/files?path=" % sid
        st, _, body = self.sup.request("PUT", files + "/workspace/keep.txt", b"old contents\n")
        self.assertIn(st, (200, 201), body)
        r = self.run_(sid, cmd="dd if=/dev/zero of=/workspace/big bs=1M count=1024", timeout=120)
        self.assertNotEqual(r["exit_code"], 0, r)
        self.assertIn("No space left on device", r["stderr"], r)
        st, _, stat = self.sup.request("GET", "/v1/sandboxes/%s/fs/stat?path=/workspace/big" % sid)
        self.assertTrue(500 * MB <= stat["size"] <= 512 * MB, stat)
        self.assertTrue(500 * MB <= self.view(sid)["usage"]["disk_bytes"] <= 513 * MB)
        # /tmp lives in the same layer (a few blocks ext4 held for dd's
        # writes may come back once it closed its file: write more than that)
        r = self.run_(sid, cmd="head -c 4M /dev/zero > /tmp/more")
        self.assertIn("No space left on device", r["stderr"], r)
        # an upload that cannot fit: 507, the old file as it was
        st, _, body = self.sup.request("PUT", files + "/workspace/keep.txt", os.urandom(4 * MB))
        self.assertEqual(st, 507, body)
        self.assertEqual(body["error"]["code"], "no_space")
        st, _, data = self.sup.request("GET", files + "/workspace/keep.txt")
        self.assertEqual((st, data), (200, b"old contents\n"))
        st, _, ls = self.sup.request("GET", "/v1/sandboxes/%s/fs/list?path=/workspace" % sid)
        self.assertEqual(sorted(e["name"] for e in ls["entries"]), ["big", "keep.txt"])

    def test_cpu_quota_holds_four_spinners(self):
        sid = self.make(cpus=0.5)
        base = "/v1/sandboxes/%s/processes" % sid
        st, _, d = self.sup.request("POST", base, {
            "cmd": "for i in 1 2 3 4; do (while :; do :; done) & done; wait"})
        self.assertEqual(st, 201, d)
        time.sleep(0.5)
        c0, t0 = self.view(sid)["usage"]["cpu_seconds"], time.monotonic()
        time.sleep(3)
        c1, t1 = self.view(sid)["usage"]["cpu_seconds"], time.monotonic()
        rate = (c1 - c0) / (t1 - t0)
        print("\n4 spinners with cpus=0.5: %.3f CPU-s/s" % rate)
        self.assertLessEqual(rate, 0.6)
        self.assertGreaterEqual(rate, 0.1)  # they did spin
        st, _, _ = self.sup.request("DELETE", "%s/%d" % (base, d["pid"]))
        self.assertIn(st, (202, 204))

    def test_fork_bomb_beside_a_neighbour(self):
        neighbour = self.make()
        bomb = self.make(pids=256)
        idle = self.exec_p50(neighbour, 10)
        st, _, d = self.sup.request("POST", "/v1/sandboxes/%s/processes" % bomb,
                                    {"argv": ["bash", "-c", BOMB]})
        self.assertEqual(st, 201, d)
        self.wait_pids(bomb, lambda n: n >= 200, 30)
        # The neighbour still answers beside the bomb held by `pids`. How
        # much slower it answers is printed, not judged: a ratio of
        # latencies moves with whatever else runs on the machine (the
        # clean-clone CI failed it that way); sbx-bench's rows "neighbour
        # exec `true`" idle, beside a spinner and beside a fork bomb are
        # the figures.
        busy = self.exec_p50(neighbour, 10)
        held = self.view(bomb)["usage"]["pids"]
        print("\nneighbour exec p50: idle %.3f ms, beside a fork bomb (cpus=1, pids=256, "
              "%d held) %.3f ms" % (idle, held, busy))
        self.assertLessEqual(held, 256)
        # The DELETE ends the bomb (its target, 1 s, is sbx-bench's row
        # "the fork bomb's DELETE"): here a deadline with a loaded
        # machine's room, against a kill that cannot keep up with forks.
        t0 = time.monotonic()
        st, _, body = self.sup.request("DELETE", "/v1/sandboxes/%s" % bomb)
        gone = time.monotonic() - t0
        self.assertEqual(st, 204, body)
        print("fork bomb's DELETE: %.3f s" % gone)
        self.assertLessEqual(gone, 15.0)
        # the exec timeout clears one too (the bomb's first shell waits, so
        # the exec is still running when its timeout comes: the whole tree
        # goes, what it forked included)
        bomb2 = self.make(pids=256)
        r = self.run_(bomb2, argv=["bash", "-c", BOMB + "; sleep 60"], timeout=2,
                      max_output=4096)
        self.assertTrue(r["timed_out"], r)
        t0 = time.monotonic()
        self.wait_pids(bomb2, lambda n: n == 1, 15.0)
        print("fork bomb's exec timeout: cleared %.3f s after the answer" % (time.monotonic() - t0))
        self.assertEqual(self.run_(bomb2, argv=["echo", "ok"])["stdout"], "ok\n")

    def test_acquire_with_resources(self):
        res = {"cpus": 0.5, "memory": "256M", "pids": 256, "disk": "512M"}
        times = []
        for _ in range(6):
            self.sup.wait_ready()
            t0 = time.perf_counter()
            sb = self.sup.create(resources=res, timeout=600)
            times.append((time.perf_counter() - t0) * 1000)
            self.addCleanup(self.delete, sb["id"])
            self.assertEqual(sb["resources"], {"cpus": 0.5, "memory": 256 * MB, "pids": 256,
                                               "disk": 512 * MB})
            r = self.run_(sb["id"], cmd="df -B1 --output=avail /tmp | tail -n 1")
            self.assertTrue(510 * MB < int(r["stdout"]) <= 512 * MB, r)
            self.delete(sb["id"])
        print("\nacquire with resources (pool of 2): p50 %.3f ms, max %.3f ms"
              % (percentile(times, 50), max(times)))


if __name__ == "__main__":
    unittest.main(verbosity=2)
