"""Supervisor lifecycle with real runc: SIGINT (and SIGTERM with
--destroy-on-exit) removes every container and mount it made and exits 0,
a plain SIGTERM exits 0 leaving every sandbox to the next start; after a SIGKILL the next start removes what was
left and its catalog does not name (test_restart.py: what it names stays); an empty pool falls back to a cold create; a create that cannot be
had is a 503. Each test cleans up whatever happens.

Env: SBX_SUPERVISOR, SBX_AGENT.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import shutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sbx_harness import (RUNTIME, Supervisor, containers_under, mounts_under, remove_everything_under,
                         wait_runtime_calls)  # noqa: E402

SUP = os.environ.get("SBX_SUPERVISOR")
AGENT = os.environ.get("SBX_AGENT")


class SupervisorLifecycle(unittest.TestCase):
    def new(self, **kw):
        s = Supervisor(SUP, AGENT, **kw)
        self.addCleanup(s.cleanup)
        return s

    def test_sigint_removes_every_container_and_mount(self):
        self.removes_everything(signal.SIGINT)

    def test_sigterm_with_destroy_on_exit_removes_everything(self):
        self.removes_everything(signal.SIGTERM, ["--destroy-on-exit"])

    def own_state(self):
        """A state folder of the test's own, removed with all below it."""
        root = tempfile.mkdtemp(prefix="sbx-it-")
        state = os.path.join(root, "state")
        self.addCleanup(shutil.rmtree, root, True)
        self.addCleanup(remove_everything_under, state)
        return state

    def test_sigterm_leaves_every_sandbox_to_the_next_start(self):
        state = self.own_state()
        s1 = self.new(state_dir=state, pool_size=1).start()
        s1.wait_ready()
        sb = s1.create()
        s1.wait_ready()
        before = sorted(containers_under(state))
        s1.signal(signal.SIGTERM)
        self.assertEqual(s1.wait(60), 0, s1.log())
        self.assertIn("left to the next start", s1.log())
        # the containers run on with no supervisor
        self.assertEqual(sorted(containers_under(state)), before)
        self.assertTrue(all(st == "running" for _, st in before), before)
        s2 = self.new(state_dir=state, pool_size=1).start()
        deadline = time.monotonic() + 20
        while s2.request("GET", "/v1/sandboxes/" + sb["id"])[0] != 200:
            self.assertLess(time.monotonic(), deadline, s2.log())
            time.sleep(0.05)
        st, _, r = s2.exec(sb["id"], argv=["echo", "kept"])
        self.assertEqual((st, r["stdout"]), (200, "kept\n"), r)
        s2.signal(signal.SIGINT)
        self.assertEqual(s2.wait(60), 0, s2.log())
        self.assertEqual(containers_under(state), [])
        self.assertEqual(mounts_under(state), [])

    def removes_everything(self, sig, extra=()):
        s = self.new(pool_size=2, extra=list(extra)).start()
        s.wait_ready()
        a = s.create()
        s.create()
        st, _, r = s.exec(a["id"], argv=["echo", "x"])
        self.assertEqual((st, r["stdout"]), (200, "x\n"))
        s.wait_ready()  # the refills too
        self.assertEqual(len(containers_under(s.state_dir)), 4)
        s.signal(sig)
        rc = s.wait(60)
        self.assertEqual(rc, 0, s.log())
        self.assertEqual(containers_under(s.state_dir), [])
        self.assertEqual(mounts_under(s.state_dir), [])
        self.assertEqual(os.listdir(os.path.join(s.state_dir, "sandboxes")), [])
        self.assertNotRegex(s.log(), "Sanitizer|runtime error")

    def test_sigkill_leftovers_removed_by_next_start(self):
        state = self.own_state()
        s1 = self.new(state_dir=state, pool_size=2).start()
        s1.wait_ready()
        sb = s1.create()
        s1.wait_ready()
        s1.signal(signal.SIGKILL)
        s1.wait(30)
        wait_runtime_calls(state)
        left = [c for c, _ in containers_under(state)]
        self.assertEqual(len(left), 3, left)
        self.assertTrue(mounts_under(state))
        # Without the catalog that names them (test_restart.py keeps them
        # with it), all three are leftovers.
        for tail in ("", "-wal", "-shm"):
            if os.path.exists(os.path.join(state, "catalog.db" + tail)):
                os.unlink(os.path.join(state, "catalog.db" + tail))
        s2 = self.new(state_dir=state, pool_size=1).start()
        now = [c for c, _ in containers_under(state)]
        self.assertEqual(set(now) & set(left), set(), "leftovers survived the restart")
        self.assertFalse(any(sb["id"] in m for m in mounts_under(state)))
        self.assertEqual(s2.request("GET", "/v1/sandboxes/" + sb["id"])[0], 404)
        s2.wait_ready(n=1)
        s2.signal(signal.SIGINT)
        self.assertEqual(s2.wait(60), 0, s2.log())
        self.assertEqual(containers_under(state), [])
        self.assertEqual(mounts_under(state), [])

    def test_empty_pool_cold_create(self):
        s = self.new(pool_size=0).start()
        t0 = time.perf_counter()
        sb = s.create()
        cold_ms = (time.perf_counter() - t0) * 1000
        print("\ncold create through the API: %.1f ms" % cold_ms, file=sys.stderr)
        st, _, r = s.exec(sb["id"], cmd="echo cold")
        self.assertEqual((st, r["stdout"]), (200, "cold\n"))
        self.assertEqual(s.pools()["host"]["ready"], 0)
        s.signal(signal.SIGINT)
        self.assertEqual(s.wait(60), 0, s.log())
        self.assertEqual(containers_under(s.state_dir), [])

    def test_create_that_cannot_be_had_is_503(self):
        missing = "/nonexistent-sbx-rootfs-%d" % os.getpid()
        s = self.new(pool_size=0, extra=["--pool-images", "host," + missing,
                                         "--acquire-timeout", "20"]).start()
        st, _, body = s.request("POST", "/v1/sandboxes", {"image": missing})
        self.assertEqual(st, 503, body)
        self.assertEqual(body["error"]["code"], "unavailable")
        st, _, body = s.request("POST", "/v1/sandboxes", {"image": "/elsewhere"})
        self.assertEqual(st, 400, body)
        # The good image still works.
        self.assertEqual(s.exec(s.create(image="host")["id"], argv=["true"])[0], 200)
        s.signal(signal.SIGINT)
        self.assertEqual(s.wait(60), 0, s.log())
        self.assertEqual(containers_under(s.state_dir), [])

    def test_agent_death(self):
        s = self.new(pool_size=1).start()
        s.wait_ready()
        sb = s.create()
        s.wait_ready()

        def kill_agent(sid):
            cid = [c for c, _ in containers_under(s.state_dir) if c.endswith(sid)][0]
            st = json.loads(subprocess.run([RUNTIME, "state", cid], capture_output=True,
                                           text=True, check=True).stdout)
            os.kill(st["pid"], signal.SIGKILL)

        # A handed-out sandbox whose agent dies: failed, exec is a 502, DELETE works.
        kill_agent(sb["id"])
        deadline = time.monotonic() + 10
        while s.request("GET", "/v1/sandboxes/" + sb["id"])[2]["state"] != "failed":
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        st, _, body = s.exec(sb["id"], argv=["true"])
        self.assertEqual((st, body["error"]["code"]), (502, "agent_error"), body)
        self.assertEqual(s.request("DELETE", "/v1/sandboxes/" + sb["id"])[0], 204)
        self.assertEqual([c for c, _ in containers_under(s.state_dir) if c.endswith(sb["id"])], [])
        # A pooled one: replaced, and what is handed out works.
        pooled = [c for c, _ in containers_under(s.state_dir)]
        self.assertEqual(len(pooled), 1)
        kill_agent(pooled[0][-15:])
        deadline = time.monotonic() + 20
        while True:
            now = [c for c, _ in containers_under(s.state_dir)]
            if pooled[0] not in now and s.pools()["host"]["ready"] == 1:
                break
            self.assertLess(time.monotonic(), deadline, now)
            time.sleep(0.05)
        st, _, r = s.exec(s.create()["id"], argv=["echo", "ok"])
        self.assertEqual((st, r["stdout"]), (200, "ok\n"))
        s.signal(signal.SIGINT)
        self.assertEqual(s.wait(60), 0, s.log())
        self.assertEqual(containers_under(s.state_dir), [])

    def test_expiry_destroys_the_sandbox(self):
        s = self.new(pool_size=0).start()
        sb = s.create(timeout=1)
        self.assertEqual(len(containers_under(s.state_dir)), 1)
        deadline = time.monotonic() + 20
        while s.request("GET", "/v1/sandboxes/" + sb["id"])[0] != 404:
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.1)
        self.assertEqual(containers_under(s.state_dir), [])
        s.signal(signal.SIGINT)
        self.assertEqual(s.wait(60), 0, s.log())


if __name__ == "__main__":
    if not SUP or not AGENT:
        sys.exit("set SBX_SUPERVISOR and SBX_AGENT")
    unittest.main(verbosity=2)
