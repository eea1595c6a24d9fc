"""The supervisor's Kubernetes backend (--backend kubernetes), its own side,
against a real kube-apiserver + etcd (tests/k8s/apiserver.py): one
supervisor as node kp1, authenticated as the DaemonSet's ServiceAccount
(daemonset/rbac.yaml applied, so RBAC allows what it uses), its pool made
from the repository's daemonset/templates/default.yaml. In KubePool nothing
runs the pods (no kubelet: tests/k8s's harness and it_k8s_pods play one);
the test plays the agents' folder itself:

- the pool's pods are created in sbx-sandboxes, bound to the node
  (spec.nodeName), named after their sandbox ids, with the contract's labels
  and the template's container, volumes and security settings;
- what a pod cannot do answers 501 not_implemented with a JSON error
  (volumes, snapshots, images), limits above the template's 400, an
  unknown template 400;
- a socket in the agents' folder under a UID no pod of this supervisor has
  (a random one, and a pod made by someone else that carries the node's
  labels) is logged once and never dialled;
- a socket under our pod's UID whose listener is not the pod's agent (it
  does not see the pod's folder at the template's mount) is refused after
  SO_PEERCRED, before a byte of the protocol, and the pod deleted;
- a pod whose labels no longer say it is this node's is not served and is
  deleted, its socket never dialled;
- each pod deleted on doubt, and one that ended before its agent listened,
  has a Warning Event about it in sbx-sandboxes (IdentityMismatch,
  FailedStart), with the supervisor's words; repeats of a reason for the
  template are one Event with a count, as the kubelet coalesces them;
- a stop (SIGINT) deletes every pod of the node.

KubeAgents (node kp2) runs the real sandbox-agent as each pod's, the test
playing the kubelet (FakeKubelet): the positive path, from a ready pod to a
lease, a reset and check back into the pool, and a restart taking the
node's pods back. Each class starts its own API server; ctest runs them as
it_k8s_pool and it_k8s_pool_agents.

Env: SBX_SUPERVISOR, SBX_AGENT. Needs scripts/install-k8s's cache.
"""
import json
import os
import re
import shutil
import signal
import socket
import sys
import subprocess
import tempfile
import threading
import time
import unittest
import uuid

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "k8s"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apiserver  # noqa: E402
from sbx_harness import Supervisor, stop_clean  # noqa: E402
from sbx_leftovers import detach_below_cmd  # noqa: E402
from test_k8s_nodes import binaries, wait_for  # noqa: E402

NODE = "kp1"
NS = "sbx-sandboxes"
PODS = "/api/v1/namespaces/%s/pods" % NS
TEMPLATE = os.path.join(TOP, "daemonset", "templates", "default.yaml")
POOL = 2
# where a pod's agent gets its own cgroup: the pids controller's (v1 or a
# hybrid host), else the unified hierarchy
CGROUP = "/sys/fs/cgroup/pids" if os.path.isdir("/sys/fs/cgroup/pids") else "/sys/fs/cgroup"


class KubePool(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cp = apiserver.ControlPlane().start()
        cls.sup = None
        cls.tmp = tempfile.mkdtemp(prefix="sbx-k8s-pool-")
        try:
            kc, _ = cls.cp.supervisor_kubeconfig(cls.tmp)
            cls.agents = os.path.join(cls.tmp, "agents")
            os.mkdir(cls.agents)
            sup, agent = binaries()
            cls.sup = Supervisor(sup, agent, pool_size=POOL, extra=[
                "--node-name", NODE, "--kubeconfig", kc, "--backend", "kubernetes",
                "--pod-template", TEMPLATE, "--agent-dir", cls.agents,
                "--pod-ready-timeout", "120"]).start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if cls.sup:
            cls.sup.cleanup()
        cls.cp.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # ---- helpers ----
    def pods(self, live=True):
        st, body = self.cp.api("GET", PODS + "?labelSelector=sbx.dev%2Fnode%3D" + NODE)
        self.assertEqual(st, 200, body)
        items = json.loads(body)["items"]
        return [p for p in items if not live or not p["metadata"].get("deletionTimestamp")]

    def live_pods(self, n):
        return wait_for("%d live pods of %s" % (n, NODE),
                        lambda: (lambda v: v if len(v) >= n else None)(self.pods()), 30)

    def listen(self, uid):
        """A listening socket at <agents>/<uid>/agent.sock, as a kubelet
        would make the folder and a process in it would bind."""
        d = os.path.join(self.agents, uid)
        os.makedirs(d, exist_ok=True)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.path.join(d, "agent.sock"))
        s.listen(8)
        s.setblocking(False)
        self.addCleanup(shutil.rmtree, d, True)
        self.addCleanup(s.close)
        return s

    def never_dialled(self, s):
        with self.assertRaises(BlockingIOError):
            s.accept()

    def log_all(self):
        with open(self.sup.log_path, errors="replace") as f:
            return f.read()

    def log_count(self, pattern):
        return len(re.findall(pattern, self.log_all()))

    def events(self, reason):
        st, body = self.cp.api("GET", "/api/v1/namespaces/%s/events" % NS)
        self.assertEqual(st, 200, body)
        return [e for e in json.loads(body)["items"] if e["reason"] == reason]

    def event_about(self, reason, name, timeout=15):
        """The Event of reason whose message names pod name."""
        return wait_for("an Event %s naming pod %s" % (reason, name), lambda: next(
            (e for e in self.events(reason) if name in e["message"]), None), timeout)

    def gone(self, name):
        st, body = self.cp.api("GET", "%s/%s" % (PODS, name))
        return st == 404 or bool(json.loads(body)["metadata"].get("deletionTimestamp"))

    # ---- tests ----
    def test_1_pods_made(self):
        for pod in self.live_pods(POOL):
            meta, spec = pod["metadata"], pod["spec"]
            self.assertRegex(meta["name"], r"^sb-%s-[0-9a-f]{12}$" % NODE)
            self.assertEqual(meta["namespace"], NS)
            self.assertNotIn("generateName", meta)
            self.assertEqual(spec["nodeName"], NODE)
            labels = meta["labels"]
            self.assertEqual(labels["app.kubernetes.io/name"], "sbx-sandbox")
            self.assertEqual(labels["sbx.dev/node"], NODE)
            self.assertEqual(labels["sbx.dev/template"], "default")
            self.assertEqual(labels["sbx.dev/state"], "starting")
            c = spec["containers"][0]
            self.assertEqual(c["command"], ["/.sbx/sandbox-agent", "--listen",
                                            "unix:/run/sandbox/agent.sock"])
            self.assertTrue(c["securityContext"]["readOnlyRootFilesystem"])
            self.assertEqual(spec["securityContext"]["runAsUser"], 0)
            mounts = {m["name"]: m for m in c["volumeMounts"]}
            self.assertEqual(mounts["agent-socket"]["subPathExpr"], "$(POD_UID)")
            vols = {v["name"]: v for v in spec["volumes"]}
            self.assertEqual(vols["agent-socket"]["hostPath"]["path"], "/run/sbx/agents")
            self.assertEqual(spec["restartPolicy"], "Never")
        # the pool counts them as being made (nothing runs them here)
        st, _, body = self.sup.request("GET", "/v1/pools")
        self.assertEqual(st, 200, body)
        pools = {p["image"]: p for p in body["pools"]}
        self.assertEqual(pools["default"]["size"], POOL)
        self.assertEqual(pools["default"]["ready"], 0)

    def test_2_refusals(self):
        for method, path, body in (("POST", "/v1/volumes", {"name": "v"}),
                                   ("GET", "/v1/volumes", None),
                                   ("GET", "/v1/snapshots", None),
                                   ("POST", "/v1/images", b"x" * 100)):
            st, hdrs, got = self.sup.request(method, path, body)
            self.assertEqual(st, 501, (path, got))
            self.assertEqual(got["error"]["code"], "not_implemented", got)
            self.assertIn("--backend kubernetes", got["error"]["message"])
        # limits are the template's: more than its are refused
        st, _, got = self.sup.request("POST", "/v1/sandboxes",
                                      {"image": "default", "resources": {"memory": "2G"}})
        self.assertEqual(st, 400, got)
        self.assertIn("above 512M, the limit of template default", got["error"]["message"])
        # volumes at create
        st, _, got = self.sup.request("POST", "/v1/sandboxes",
                                      {"image": "default", "volumes": [{"name": "v", "mount": "/data"}]})
        self.assertEqual(st, 501, got)
        # an image that is no template of this node
        st, _, got = self.sup.request("POST", "/v1/sandboxes", {"image": "host"})
        self.assertEqual(st, 400, got)
        self.assertIn("default", got["error"]["message"])

    def test_3_foreign_socket(self):
        uid = str(uuid.uuid4())
        s = self.listen(uid)
        line = r"no pod this supervisor made or took back has UID %s" % uid
        wait_for("the foreign socket logged", lambda: self.log_count(line) == 1, 15)
        time.sleep(2.5)
        self.assertEqual(self.log_count(line), 1, "logged once")
        self.never_dialled(s)

    def test_4_pod_of_someone_else(self):
        # a pod with this node's labels, made by someone else: its UID was
        # never this supervisor's, so its socket is foreign
        name = "impostor-%s" % uuid.uuid4().hex[:8]
        st, body = self.cp.api("POST", PODS, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "sbx-sandbox",
                                                  "sbx.dev/node": NODE,
                                                  "sbx.dev/template": "default"}},
            "spec": {"nodeName": NODE, "restartPolicy": "Never",
                     "containers": [{"name": "sandbox", "image": "x"}]}})
        self.assertEqual(st, 201, body)
        uid = json.loads(body)["metadata"]["uid"]
        self.addCleanup(self.cp.api, "DELETE", "%s/%s" % (PODS, name), {"gracePeriodSeconds": 0})
        s = self.listen(uid)
        line = r"no pod this supervisor made or took back has UID %s" % uid
        wait_for("the impostor's socket logged", lambda: self.log_count(line) == 1, 15)
        self.never_dialled(s)
        self.assertFalse(self.gone(name), "someone else's pod is left alone")

    def test_5_listener_not_the_agent(self):
        pod = self.live_pods(1)[0]
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        s = self.listen(uid)
        wait_for("pod %s deleted" % name, lambda: self.gone(name), 15)
        wait_for("the refusal logged", lambda: "not the pod's agent" in self.log_all(), 10)
        # it was connected to, then dropped before a byte of the protocol
        conn, _ = s.accept()
        conn.settimeout(5)
        self.assertEqual(conn.recv(64), b"")
        conn.close()
        # the doubt is an Event about the pod, with the supervisor's words
        ev = self.event_about("IdentityMismatch", name)
        self.assertEqual((ev["type"], ev["count"]), ("Warning", 1), ev)
        self.assertEqual(ev["involvedObject"], {"apiVersion": "v1", "kind": "Pod", "namespace": NS,
                                                "name": name, "uid": uid}, ev)
        self.assertIn("not the pod's agent", ev["message"])
        self.assertEqual(ev["source"], {"component": "sandbox-supervisor", "host": NODE}, ev)

    def test_6_labels_changed(self):
        pod = self.live_pods(1)[0]
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        p = self.cp.kubectl("label", "pod", name, "-n", NS, "--overwrite", "sbx.dev/node=elsewhere")
        self.assertEqual(p.returncode, 0, p.stderr)
        s = self.listen(uid)
        wait_for("pod %s deleted" % name, lambda: self.gone(name), 15)
        wait_for("the refusal logged",
                 lambda: "does not carry this node's sandbox labels" in self.log_all(), 10)
        self.never_dialled(s)
        # test_5's doubt again for the template: the same Event, counted
        ev = self.event_about("IdentityMismatch", name)
        self.assertEqual(ev["count"], 2, ev)
        self.assertTrue(ev["message"].startswith("(combined from similar events): "), ev)
        self.assertIn("does not carry this node's sandbox labels", ev["message"])
        self.assertEqual(len(self.events("IdentityMismatch")), 1)

    def test_6b_pod_failed_to_start(self):
        # the pod's container ended before its agent listened (its status
        # written as a kubelet would): deleted, and an Event says why
        pod = self.live_pods(1)[0]
        name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        pod["status"] = {"phase": "Failed", "reason": "Error"}
        st, body = self.cp.api("PUT", "%s/%s/status" % (PODS, name), pod)
        self.assertEqual(st, 200, body)
        wait_for("pod %s deleted" % name, lambda: self.gone(name), 15)
        ev = self.event_about("FailedStart", name)
        self.assertEqual(ev["involvedObject"]["uid"], uid, ev)
        self.assertIn("ended (Failed) before its agent listened", ev["message"])

    def test_7_stop_deletes_pods(self):
        self.live_pods(POOL)
        names = [p["metadata"]["name"] for p in self.pods()]
        stop_clean(self.sup)
        for n in names:
            self.assertTrue(self.gone(n), n)
        self.assertEqual(self.pods(), [])


class FakeKubelet:
    """Just enough of a kubelet for one node, to run the supervisor's
    positive path here before tests/k8s's harness: each live pod of the
    node gets the real sandbox-agent, as its template asks
    (--listen unix:/run/sandbox/agent.sock), in namespaces of its own
    (mount, pid, network, IPC), in a pids cgroup of its own, with
    /run/sandbox the pod's folder <agents>/<uid> and a fresh tmpfs on each
    of the test template's emptyDir paths; a pod given a deletionTimestamp
    has its agent killed, its folder removed and is deleted (grace 0).
    Everything it makes is removed by stop(), also when a test failed."""

    def __init__(self, cp, node, agents, agent, empty_dirs):
        self.cp, self.node, self.agents, self.agent = cp, node, agents, agent
        self.empty_dirs = empty_dirs
        self.run = {}  # uid -> (Popen, cgroup folder)
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def _loop(self):
        while not self.done.is_set():
            try:
                self._once()
            except Exception as e:  # noqa: BLE001 - the test sees what did not run
                print("fake kubelet: %r" % e, file=sys.stderr)
            self.done.wait(0.2)

    def _once(self):
        st, body = self.cp.api("GET", PODS + "?labelSelector=sbx.dev%2Fnode%3D" + self.node)
        if st != 200:
            return
        seen = set()
        for pod in json.loads(body)["items"]:
            meta = pod["metadata"]
            uid = meta["uid"]
            seen.add(uid)
            if meta.get("deletionTimestamp"):
                self._kill(uid)
                self.cp.api("DELETE", "%s/%s" % (PODS, meta["name"]),
                            {"gracePeriodSeconds": 0, "preconditions": {"uid": uid}})
            elif uid not in self.run:
                self._spawn(uid)
        for uid in [u for u in self.run if u not in seen]:
            self._kill(uid)

    def _spawn(self, uid):
        d = os.path.join(self.agents, uid)
        os.makedirs(d, exist_ok=True)
        cg = os.path.join(CGROUP, "sbx-kp-%s" % uid)
        os.makedirs(cg, exist_ok=True)
        # The agent is copied into the private /run first: the build may
        # live below /tmp (the CI's clone does), which the /tmp emptyDir's
        # tmpfs then hides.
        mounts = ["mount -t tmpfs tmpfs /run", "mkdir /run/sandbox",
                  "cp %s /run/.sandbox-agent" % self.agent,
                  "mount --bind %s /run/sandbox" % d,
                  "{ [ ! -d /dev/mqueue ] || mount -t mqueue mqueue /dev/mqueue; }"]
        for path in self.empty_dirs:
            parent = os.path.dirname(path)
            if not os.path.isdir(path) and parent != "/":
                mounts += ["mount -t tmpfs tmpfs %s" % parent, "mkdir %s" % path]
            mounts.append("mount -t tmpfs tmpfs %s" % path)
        # The namespace starts as a copy of every mount there is, other
        # tests' sandboxes' disks below /tmp and network namespaces below
        # /run included; the tmpfs on top would hide them from their own
        # cleanup, which could then not unmount them (ctest -j2 beside
        # it_k8s_relay), so they go first.
        covered = ["/run"] + [p for p in self.empty_dirs if p != "/"]
        inner = " && ".join(["echo 0 > %s/cgroup.procs" % cg,
                             detach_below_cmd(covered, keep=[d, self.agent])] + mounts +
                            ["exec /run/.sandbox-agent --listen unix:/run/sandbox/agent.sock"])
        p = subprocess.Popen(["unshare", "--mount", "--pid", "--net", "--ipc", "--kill-child",
                              "--mount-proc", "--propagation", "private", "sh", "-c", inner],
                             start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL)
        self.run[uid] = (p, cg, d)

    def _kill(self, uid):
        p, cg, d = self.run.pop(uid, (None, None, None))
        if p is None:
            return
        try:
            with open(os.path.join(cg, "cgroup.procs")) as f:
                for pid in f.read().split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except ProcessLookupError:
                        pass
        except OSError:
            pass
        if p.poll() is None:
            p.kill()
        p.wait(10)
        for _ in range(50):
            try:
                os.rmdir(cg)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.1)
        shutil.rmtree(d, ignore_errors=True)

    def agent_pid(self, uid):
        with open(os.path.join(CGROUP, "sbx-kp-%s" % uid, "cgroup.procs")) as f:
            return [int(x) for x in f.read().split()]

    def stop(self):
        self.done.set()
        if self.thread.is_alive():
            self.thread.join(10)
        for uid in list(self.run):
            self._kill(uid)


class KubeAgents(unittest.TestCase):
    """The positive path with agents running (FakeKubelet): a pod's agent
    found, verified, connected; the pod labelled ready, then leased with its
    tenant, sandbox id and expiry; exec in it; released: reset by the
    agent, checked from the host, back in the pool as the same pod with the
    tenant's marks removed and nothing of the tenant left; a restart with
    SIGTERM takes the node's pods back (ready and leased) from the catalog;
    SIGINT deletes them."""
    NODE = "kp2"
    EMPTY = ["/tmp", "/srv", "/home/sandbox", "/dev/shm"]

    @classmethod
    def setUpClass(cls):
        cls.cp = apiserver.ControlPlane().start()
        cls.sup = cls.kubelet = None
        cls.tmp = tempfile.mkdtemp(prefix="sbx-k8s-agents-")
        try:
            cls.kc, _ = cls.cp.supervisor_kubeconfig(cls.tmp)
            # the default template with emptyDirs at paths this host has
            with open(TEMPLATE) as f:
                text = f.read()
            text = text.replace("mountPath: /workspace", "mountPath: /srv")
            text = text.replace("sbx.dev/template: default", "sbx.dev/template: kptest")
            cls.template = os.path.join(cls.tmp, "kptest.yaml")
            with open(cls.template, "w") as f:
                f.write(text)
            cls.agents = os.path.join(cls.tmp, "agents")
            os.mkdir(cls.agents)
            cls.state = os.path.join(cls.tmp, "state")
            sup, cls.agent_bin = binaries()
            cls.kubelet = FakeKubelet(cls.cp, cls.NODE, cls.agents, cls.agent_bin, cls.EMPTY).start()
            cls.sup = cls.supervisor().start()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def supervisor(cls):
        sup, agent = binaries()
        return Supervisor(sup, agent, state_dir=cls.state, pool_size=1, extra=[
            "--node-name", cls.NODE, "--kubeconfig", cls.kc, "--backend", "kubernetes",
            "--pod-template", cls.template, "--agent-dir", cls.agents,
            "--pod-ready-timeout", "30"])

    @classmethod
    def tearDownClass(cls):
        if cls.sup:
            cls.sup.cleanup()
        if cls.kubelet:
            cls.kubelet.stop()
        cls.cp.stop()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def pod(self, name):
        st, body = self.cp.api("GET", "%s/%s" % (PODS, name))
        return json.loads(body) if st == 200 else None

    def pool(self):
        st, _, body = self.sup.request("GET", "/v1/pools")
        self.assertEqual(st, 200, body)
        return {p["image"]: p for p in body["pools"]}["kptest"]

    def ready_pod(self):
        """The node's one ready pod, once its label says so."""
        def one():
            st, body = self.cp.api("GET", PODS + "?labelSelector=sbx.dev%2Fstate%3Dready,sbx.dev%2Fnode%3D"
                                   + self.NODE)
            items = json.loads(body)["items"] if st == 200 else []
            live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
            return live[0] if len(live) == 1 and self.pool()["ready"] == 1 else None
        return wait_for("a ready pod", one, 60)

    def test_1_lease_reset_reuse(self):
        pod = self.ready_pod()
        name = pod["metadata"]["name"]
        sb = self.sup.create(image="kptest", timeout=600)
        self.assertEqual(sb["id"], name, "the sandbox is the pod")
        labels = wait_for("leased labels", lambda: (lambda p: p["metadata"] if p and p["metadata"]["labels"].get(
            "sbx.dev/state") == "leased" else None)(self.pod(name)), 15)
        self.assertEqual(labels["labels"]["sbx.dev/tenant"], "default", labels)
        self.assertEqual(labels["annotations"]["sbx.dev/sandbox-id"], name)
        self.assertRegex(labels["annotations"]["sbx.dev/expires-at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        st, _, out = self.sup.exec(name, argv=["sh", "-c", "echo hi; echo secret > /tmp/x; "
                                                "touch /srv/.hidden /dev/shm/seg; (sleep 1000 &)"])
        self.assertEqual(st, 200, out)
        self.assertEqual(out["stdout"], "hi\n", out)
        st, _, body = self.sup.request("DELETE", "/v1/sandboxes/" + name)
        self.assertIn(st, (200, 204), body)
        # reset and checked: the same pod, ready again, the tenant's marks gone
        meta = wait_for("the pod ready again", lambda: (lambda p: p["metadata"] if p and p["metadata"][
            "labels"].get("sbx.dev/state") == "ready" else None)(self.pod(name)), 30)
        self.assertNotIn("sbx.dev/tenant", meta["labels"])
        self.assertNotIn("sbx.dev/sandbox-id", meta.get("annotations", {}))
        # the pool holds it again beside the one made when it was handed
        # out: created until it is the one given
        for _ in range(2):
            sb2 = self.sup.create(image="kptest", timeout=600)
            if sb2["id"] == name:
                break
        self.assertEqual(sb2["id"], name, "the same pod again")
        st, _, out = self.sup.exec(name, argv=["sh", "-c", "ls -A /tmp /srv /dev/shm; ps -e -o comm="])
        self.assertEqual(st, 200, out)
        self.assertNotIn("x", out["stdout"].split())
        self.assertNotIn(".hidden", out["stdout"])
        self.assertNotIn("seg", out["stdout"])
        self.assertNotIn("sleep", out["stdout"])
        self.__class__.leased = name

    def test_2_restart_takes_pods_back(self):
        leased = self.__class__.leased
        uid = self.pod(leased)["metadata"]["uid"]
        pid = self.kubelet.agent_pid(uid)
        self.sup.signal(signal.SIGTERM)
        self.assertEqual(self.sup.wait(60), 0, self.sup.log())
        self.sup.proc.stdout.close()  # its state folder is the next one's
        self.__class__.sup = self.supervisor().start()
        self.sup = self.__class__.sup
        wait_for("the leased sandbox listed again",
                 lambda: self.sup.request("GET", "/v1/sandboxes/" + leased)[0] == 200, 30)
        st, _, out = wait_for("exec after the restart", lambda: (lambda r: r if r[0] == 200 else None)(
            self.sup.exec(leased, argv=["echo", "back"])), 30)
        self.assertEqual(out["stdout"], "back\n", out)
        self.assertEqual(self.kubelet.agent_pid(uid), pid, "the same agent, not a new pod")
        with open(self.sup.log_path) as f:
            self.assertIn("taken back", f.read())

    def test_3_stop_deletes(self):
        names = [p["metadata"]["name"] for p in json.loads(self.cp.api(
            "GET", PODS + "?labelSelector=sbx.dev%2Fnode%3D" + self.NODE)[1])["items"]]
        self.assertTrue(names)
        stop_clean(self.sup)
        wait_for("the node's pods gone", lambda: all(self.pod(n) is None for n in names), 30)


if __name__ == "__main__":
    apiserver.require_binaries()
    unittest.main(verbosity=2)
