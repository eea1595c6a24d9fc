"""The kubelet harness (tests/k8s/kubelet.py: what plays the kubelet for a
node in the k8s tests, never part of the product) against a real
kube-apiserver + etcd (tests/k8s/apiserver.py) and real runc: the pod
contract the Kubernetes backend is built to (node-supervisor/DESIGN.md,
"Kubernetes: sandbox pods"), checked from the API server and the host.

- the Node is registered Ready with allocatable cpu, memory and pods;
- the sandbox template (daemonset/templates/default.yaml, the image
  sbx/sandbox-base:latest made here: busybox + the agent layer), bound to
  the node: the pod turns Running and Ready with containerID runc://<id>;
  the agent's socket appears at <host-root>/run/sbx/agents/<uid>/agent.sock
  (hostPath + subPathExpr $(POD_UID)) and answers hello, ping and info
  (Debian's python3-msgpack decoding); its env holds POD_UID; the root
  filesystem is read-only while the emptyDirs are writable (and
  /dev/shm a 64 MiB tmpfs); the cgroup has the template's limits;
- deleting the pod: container gone, its folders and mounts gone (the
  socket's folder too), the pod object gone;
- exit codes as phases (0 Succeeded, 3 Failed), OnFailure restarts
  counted, an image the node does not have waits as ErrImageNeverPull;
- the API server stopped for a while: an exit during it is written once
  it is back, and a pod made after it is run (the watch resumed);
- SIGTERM: every container, mount and folder it made removed, exit 0.

Env: SBX_AGENT. Needs scripts/install-k8s's cache (make test installs it).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "k8s"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import agent_wire  # noqa: E402
import apiserver  # noqa: E402
import sandbox_image  # noqa: E402
from kubelet_node import Node  # noqa: E402
from sbx_harness import mounts_under  # noqa: E402
from test_k8s_nodes import wait_for  # noqa: E402

AGENT = os.environ.get("SBX_AGENT", os.path.join(TOP, "build", "guest-agent", "sandbox-agent"))
NS = "sbx-sandboxes"
NODE = "kt1"
IMAGE = "sbx/sandbox-base:latest"
PODS = "/api/v1/namespaces/%s/pods" % NS


class Kubelet(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        apiserver.require_binaries()
        cls.tmp = tempfile.mkdtemp(prefix="sbx-k8s-kubelet-")
        cls.cp = None
        cls.node = None
        try:
            cls.cp = apiserver.ControlPlane().start()
            t0 = time.monotonic()
            layout, tag = sandbox_image.build(os.path.join(cls.tmp, "image"), AGENT)
            print("sandbox image made in %.1f s" % (time.monotonic() - t0))
            p = cls.cp.kubectl("apply", "-f", os.path.join(TOP, "daemonset", "namespace.yaml"))
            assert p.returncode == 0, p.stderr
            p = cls.cp.kubectl("create", "--dry-run=client", "-o", "json", "-f",
                               os.path.join(TOP, "daemonset", "templates", "default.yaml"))
            assert p.returncode == 0, p.stderr
            cls.template = json.loads(p.stdout)
            cls.host_root = os.path.join(cls.tmp, "node-" + NODE)
            cls.agents = os.path.join(cls.host_root, "run", "sbx", "agents")
            os.makedirs(cls.agents)
            cls.node = Node(cls.cp.kubeconfig, NODE, cls.host_root, {IMAGE: (layout, tag)},
                            log_dir=cls.tmp)
            cls.node.start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.node is not None:
            cls.node.cleanup()
        if cls.cp is not None:
            cls.cp.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ---- helpers ----
    def api(self, method, path, body=None, ok=(200, 201)):
        st, raw = self.cp.api(method, path, body)
        self.assertIn(st, ok, raw[:500])
        return json.loads(raw) if raw else None

    def make_pod(self, mutate=None):
        pod = json.loads(json.dumps(self.template))
        pod["spec"]["nodeName"] = NODE
        if mutate:
            mutate(pod)
        return self.api("POST", PODS, pod)

    def pod(self, name):
        st, raw = self.cp.api("GET", "%s/%s" % (PODS, name))
        return json.loads(raw) if st == 200 else None

    def phase_of(self, name, phase):
        def f():
            p = self.pod(name)
            return p if p and p.get("status", {}).get("phase") == phase else None
        return f

    def delete_and_wait(self, pod, grace=None):
        path = "%s/%s" % (PODS, pod["metadata"]["name"])
        body = None if grace is None else {"gracePeriodSeconds": grace}
        self.api("DELETE", path, body, ok=(200, 202, 404))
        wait_for("pod %s gone" % pod["metadata"]["name"],
                 lambda: self.pod(pod["metadata"]["name"]) is None, 40)

    def wait_gone(self, pod):
        """The pod's container and folders gone from the node."""
        uid = pod["metadata"]["uid"]
        wait_for("pod %s's container and folders removed" % uid, lambda: (
            "sbxk-" + uid not in self.container_ids()
            and not os.path.exists(self.pod_dir(uid))
            and not os.path.exists(os.path.join(self.agents, uid))), 20)

    def runc(self, *args):
        return subprocess.run(["runc", "--root", self.node.runc_root] + list(args),
                              capture_output=True, text=True)

    def container_ids(self):
        p = self.runc("list", "-q")
        return p.stdout.split() if p.returncode == 0 else []

    def pod_dir(self, uid):
        return os.path.join(self.node.root, "pods", uid)

    def run_pod(self, mutate=None, phase="Running"):
        pod = self.make_pod(mutate)
        self.addCleanup(self.cp.api, "DELETE", "%s/%s" % (PODS, pod["metadata"]["name"]),
                        {"gracePeriodSeconds": 0})
        return wait_for("pod %s %s" % (pod["metadata"]["name"], phase),
                        self.phase_of(pod["metadata"]["name"], phase), 60)

    def command_pod(self, cmd, policy="Never"):
        def m(p):
            c = p["spec"]["containers"][0]
            c["command"] = ["/bin/sh", "-c", cmd]
            p["spec"]["restartPolicy"] = policy
        return m

    # ---- tests (in name order) ----
    def test_1_node_ready(self):
        n = self.api("GET", "/api/v1/nodes/" + NODE)
        ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        self.assertEqual(ready[0]["status"], "True", n["status"])
        alloc = n["status"]["allocatable"]
        self.assertEqual(alloc["cpu"], str(os.cpu_count()))
        self.assertEqual(alloc["pods"], "110")
        self.assertTrue(alloc["memory"].endswith("Ki"), alloc)

    def test_2_template_pod_runs_the_agent(self):
        pod = self.run_pod()
        uid, name = pod["metadata"]["uid"], pod["metadata"]["name"]
        conds = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        self.assertEqual(conds["Ready"], "True", pod["status"])
        (cs,) = pod["status"]["containerStatuses"]
        cid = "sbxk-" + uid
        self.assertEqual(cs["containerID"], "runc://" + cid)
        self.assertTrue(cs["started"] and cs["ready"] and "running" in cs["state"], cs)
        self.assertEqual(json.loads(self.runc("state", cid).stdout)["status"], "running")
        # The agent's socket on the node, where the supervisor looks.
        sock = os.path.join(self.agents, uid, "agent.sock")
        wait_for("the agent's socket", lambda: os.path.exists(sock), 20)
        c = agent_wire.Conn(sock)
        try:
            self.assertTrue(c.hello["agent"].startswith("sandbox-agent/"), c.hello)
            self.assertEqual(c.call("ping"), {})
            info = c.call("info")
            self.assertEqual(info["pid"], 1)
            self.assertEqual(info["hostname"], name)
        finally:
            c.close()
        pid = json.loads(self.runc("state", cid).stdout)["pid"]
        with open("/proc/%d/environ" % pid, "rb") as f:
            env = f.read().split(b"\0")
        self.assertIn(b"POD_UID=" + uid.encode(), env)
        # readOnlyRootFilesystem, with the emptyDirs writable.
        p = self.runc("exec", cid, "/bin/sh", "-c", "touch /probe")
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("Read-only file system", p.stderr + p.stdout)
        p = self.runc("exec", "--user", "1000:1000", cid, "/bin/sh", "-c",
                      "touch /workspace/w /tmp/t /home/sandbox/h /dev/shm/s && echo ok")
        self.assertEqual(p.stdout.strip(), "ok", p.stderr)
        ws = os.path.join(self.pod_dir(uid), "volumes", "kubernetes.io~empty-dir", "workspace")
        self.assertTrue(os.path.exists(os.path.join(ws, "w")))
        self.assertEqual(os.stat(ws).st_gid, 1000)  # fsGroup
        with open("/proc/%d/mountinfo" % pid) as f:
            shm = [l for l in f if l.split()[4] == "/dev/shm"]
        self.assertTrue(shm and " - tmpfs " in shm[-1] and "size=65536k" in shm[-1], shm)
        with open("/sys/fs/cgroup/memory/%s/memory.limit_in_bytes" % cid) as f:
            self.assertEqual(int(f.read()), 512 << 20)
        with open("/sys/fs/cgroup/cpu/%s/cpu.cfs_quota_us" % cid) as f:
            self.assertEqual(int(f.read()), 100000)
        # Deleted: container, folders, mounts and the object gone.
        self.delete_and_wait(pod)
        self.assertNotIn(cid, self.container_ids())
        self.assertFalse(os.path.exists(self.pod_dir(uid)))
        self.assertFalse(os.path.exists(os.path.join(self.agents, uid)))
        self.assertEqual([m for m in mounts_under(self.node.root) if uid in m], [])
        self.assertFalse(os.path.exists("/sys/fs/cgroup/memory/" + cid))

    def test_3_exit_codes_are_phases(self):
        ok = self.run_pod(self.command_pod("exit 0"), "Succeeded")
        bad = self.run_pod(self.command_pod("exit 3"), "Failed")
        t = bad["status"]["containerStatuses"][0]["state"]["terminated"]
        self.assertEqual((t["exitCode"], t["reason"]), (3, "Error"))
        t = ok["status"]["containerStatuses"][0]["state"]["terminated"]
        self.assertEqual((t["exitCode"], t["reason"]), (0, "Completed"))
        for p in (ok, bad):
            # A pod that ended goes from the API server at once (no grace):
            # its node cleans up after.
            self.delete_and_wait(p)
            self.wait_gone(p)

    def test_4_on_failure_restarts(self):
        pod = self.make_pod(self.command_pod("exit 1", "OnFailure"))
        self.addCleanup(self.cp.api, "DELETE", "%s/%s" % (PODS, pod["metadata"]["name"]),
                        {"gracePeriodSeconds": 0})

        def restarted():
            p = self.pod(pod["metadata"]["name"])
            cs = (p.get("status") or {}).get("containerStatuses") or [{}]
            return cs[0].get("restartCount", 0) >= 2
        wait_for("two restarts", restarted, 30)
        self.delete_and_wait(pod, grace=0)
        self.wait_gone(pod)

    def test_5_unknown_image_waits(self):
        def m(p):
            p["spec"]["containers"][0]["image"] = "registry.example/none:1"
        pod = self.make_pod(m)

        def waiting():
            p = self.pod(pod["metadata"]["name"])
            cs = (p.get("status") or {}).get("containerStatuses") or [{}]
            return cs[0].get("state", {}).get("waiting")
        w = wait_for("ErrImageNeverPull", waiting, 20)
        self.assertEqual(w["reason"], "ErrImageNeverPull", w)
        self.assertEqual(self.pod(pod["metadata"]["name"])["status"]["phase"], "Pending")
        self.delete_and_wait(pod)
        self.wait_gone(pod)

    def test_6_api_server_away(self):
        late = self.run_pod(self.command_pod("sleep 2; exit 0"))
        self.cp.stop_apiserver()
        try:
            time.sleep(4)  # the container exits while nobody can be told
        finally:
            self.cp.start_apiserver()
        wait_for("the exit written after the outage", self.phase_of(
            late["metadata"]["name"], "Succeeded"), 30)
        after = self.run_pod()
        self.assertEqual(after["status"]["containerStatuses"][0]["containerID"],
                         "runc://sbxk-" + after["metadata"]["uid"])
        self.delete_and_wait(after)
        self.delete_and_wait(late)

    def test_zz_stop_removes_everything(self):
        pod = self.run_pod()
        uid = pod["metadata"]["uid"]
        wait_for("socket", lambda: os.path.exists(os.path.join(self.agents, uid, "agent.sock")),
                 20)
        self.assertEqual(self.node.stop(), 0, self.node.log())
        self.assertEqual(mounts_under(self.node.host_root), [])
        self.assertFalse(os.path.exists(self.node.root))
        self.assertFalse(os.path.exists(os.path.join(self.agents, uid)))
        self.assertFalse(os.path.exists("/sys/fs/cgroup/memory/sbxk-" + uid))
        self.assertEqual(os.listdir(self.agents), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
