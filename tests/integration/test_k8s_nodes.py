"""The supervisor's link to the Kubernetes control plane, against a real
kube-apiserver + etcd (tests/k8s/apiserver.py, started on loopback for this
test and removed after): three supervisors as three nodes (three state
folders, --node-name n1..n3) authenticated as the DaemonSet's own
ServiceAccount (daemonset/rbac.yaml applied, a token from the TokenRequest
API, a kubeconfig in YAML), so that RBAC allows what they use and a
narrowing of it fails here.

- each node's Lease sbx-node-<node> appears in sbx-system, with its API URL
  and capacity (ready sandboxes per image, handed-out count) in its
  annotations, and is renewed (--lease-duration 8: every 2 s);
- each supervisor's node directory (GET /v1/nodes, read back from the Leases
  by a watch) lists the three with their URLs and capacity, and follows a
  capacity change;
- sandbox lifecycle Events (created, OOM, deleted, expired) appear as core/v1
  Events about the node's Lease;
- the API server stopped for 30 s: the supervisors keep answering their API
  without delay, queue their Events, and once it is back every Lease is
  renewed, the queued Events delivered and the directories live again;
- a kubeconfig that cannot be read, or whose token the server refuses, is a
  clear start error; a server that does not answer is retried, never a
  crash.

Env: SBX_SUPERVISOR, SBX_AGENT. Needs scripts/install-k8s's cache.
"""
import json
import os
import shutil
import socket
import sys
import tempfile
import time
import unittest

TOP = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(TOP, "tests", "k8s"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import apiserver  # noqa: E402
from sbx_harness import Supervisor, end_all, stop_clean  # noqa: E402
from sbx_leftovers import detach_below_cmd  # noqa: E402

NS = "sbx-system"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/%s/leases" % NS
LEASE_S = 8
POOLS = {"n1": 1, "n2": 2, "n3": 0}


def binaries():
    sup = os.environ.get("SBX_SUPERVISOR", os.path.join(TOP, "build", "node-supervisor",
                                                        "sandbox-supervisor"))
    agent = os.environ.get("SBX_AGENT", os.path.join(TOP, "build", "guest-agent",
                                                     "sandbox-agent"))
    return sup, agent


def wait_for(what, fn, timeout):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError("%s: not within %s s (last: %r)" % (what, timeout, last))


class ClusterTest(unittest.TestCase):
    """A control plane (cls.cp) and supervisors as its nodes (cls.sups,
    by node name) with a folder (cls.tmp): start_cluster() makes the
    first and the last, then make() the nodes; everything is ended
    whatever happened (it_k8s_nodes, it_k8s_relay)."""

    @classmethod
    def start_cluster(cls, prefix, make):
        cls.cp = apiserver.ControlPlane().start()
        cls.sups = {}
        cls.tmp = tempfile.mkdtemp(prefix=prefix)
        try:
            make()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        end_all(cls.sups.values(), [cls.cp], cls.tmp, clean=False)

    def directory(self, name):
        """GET /v1/nodes of node name's supervisor."""
        st, _, body = self.sups[name].request("GET", "/v1/nodes", timeout=5)
        self.assertEqual(st, 200, body)
        return body


class Nodes(ClusterTest):
    @classmethod
    def setUpClass(cls):
        def make():
            cls.kubeconfig, cls.sa_token = cls.cp.supervisor_kubeconfig(cls.tmp)
            sup, agent = binaries()
            for name, pool in POOLS.items():
                s = Supervisor(sup, agent, pool_size=pool, extra=[
                    "--node-name", name, "--kubeconfig", cls.kubeconfig,
                    "--lease-duration", str(LEASE_S), "--kube-queue", "64",
                    "--default-resources", "memory=256M"])
                cls.sups[name] = s.start()
        cls.start_cluster("sbx-k8s-nodes-", make)

    # ---- helpers ----
    def lease(self, node):
        st, body = self.cp.api("GET", "%s/sbx-node-%s" % (LEASES, node))
        return json.loads(body) if st == 200 else None

    def events(self):
        st, body = self.cp.api("GET", "/api/v1/namespaces/%s/events" % NS)
        self.assertEqual(st, 200, body)
        return json.loads(body)["items"]

    def event_for(self, reason, sid):
        for e in self.events():
            if e["reason"] == reason and sid in e["message"]:
                return e
        return None

    def capacity_ok(self, name, node_entry):
        want = POOLS[node_entry["name"]]
        return node_entry["ready"].get("host", 0) == want

    # ---- tests (in name order) ----
    def test_1_leases_appear_and_renew(self):
        for name, s in self.sups.items():
            l = wait_for("lease of " + name, lambda: self.lease(name), 15)
            ann = l["metadata"]["annotations"]
            self.assertEqual(ann["sbx.dev/url"], "http://127.0.0.1:%d" % s.port)
            self.assertEqual(ann["sbx.dev/node"], name)
            self.assertEqual(l["spec"]["holderIdentity"], name)
            self.assertEqual(l["spec"]["leaseDurationSeconds"], LEASE_S)
            self.assertEqual(l["metadata"]["labels"]["sbx.dev/role"], "node-lease")
            cap = json.loads(ann["sbx.dev/capacity"])
            self.assertIn("ready", cap)
            self.assertEqual(cap["leased"], 0)
        first = {n: self.lease(n)["spec"]["renewTime"] for n in self.sups}
        # renewed every LEASE_S/4 = 2 s
        for n in self.sups:
            wait_for("renewal of " + n, lambda: self.lease(n)["spec"]["renewTime"] > first[n], 6)
        print("leases renewed: " + ", ".join("%s %s" % (n, self.lease(n)["spec"]["renewTime"])
                                             for n in sorted(self.sups)))

    def test_2_directory_lists_every_node(self):
        for name, s in self.sups.items():
            s.wait_ready(n=POOLS[name])

        def complete(name):
            d = self.directory(name)
            nodes = {e["name"]: e for e in d["nodes"]}
            if set(nodes) != set(self.sups):
                return None
            for n, e in nodes.items():
                if (e["url"] != "http://127.0.0.1:%d" % self.sups[n].port or not e["live"]
                        or not self.capacity_ok(name, e)):
                    return None
            return d
        for name in self.sups:
            d = wait_for("directory of " + name, lambda: complete(name), 15)
            self.assertEqual(d["self"], name)
            self.assertTrue(d["kube"]["connected"])
            self.assertGreaterEqual(d["kube"]["relists"], 1)
        # a tenant that is not the admin does not read it
        st, _, body = self.sups["n1"].request("GET", "/v1/nodes", token="Bearer wrong")
        self.assertEqual(st, 401, body)

    def test_3_lifecycle_events_and_capacity(self):
        n1 = self.sups["n1"]
        sb = n1.create(image="host")
        # handed out: n1's lease says 1 leased, and n2's directory sees it
        def leased_seen():
            e = {x["name"]: x for x in self.directory("n2")["nodes"]}.get("n1")
            return e and e["leased"] == 1
        wait_for("n1's leased count in n2's directory", leased_seen, 10)
        # a command over the sandbox's memory (--default-resources memory=256M)
        st, _, r = n1.exec(sb["id"], argv=["python3", "-c", "x = b'y' * (768 << 20)"], timeout=60)
        self.assertEqual(st, 200, r)
        self.assertTrue(r["oom_killed"], r)
        st, _, body = n1.request("DELETE", "/v1/sandboxes/" + sb["id"])
        self.assertIn(st, (200, 204), body)
        short = n1.create(image="host", timeout=1)
        created = wait_for("SandboxCreated", lambda: self.event_for("SandboxCreated", sb["id"]), 10)
        self.assertEqual(created["involvedObject"]["kind"], "Lease")
        self.assertEqual(created["involvedObject"]["name"], "sbx-node-n1")
        self.assertEqual(created["type"], "Normal")
        self.assertEqual(created["source"]["host"], "n1")
        wait_for("SandboxDeleted", lambda: self.event_for("SandboxDeleted", sb["id"]), 10)
        oom = wait_for("SandboxOOM", lambda: self.event_for("SandboxOOM", sb["id"]), 10)
        self.assertEqual(oom["type"], "Warning")
        wait_for("SandboxExpired", lambda: self.event_for("SandboxExpired", short["id"]), 15)

    def test_4_api_server_away_30s(self):
        n2 = self.sups["n2"]
        before = {n: self.lease(n)["spec"]["renewTime"] for n in self.sups}
        self.cp.stop_apiserver()
        away = time.monotonic()
        try:
            # the supervisors' own API does not wait on the control plane
            t0 = time.monotonic()
            sb = n2.create(image="host")
            st, _, body = n2.request("DELETE", "/v1/sandboxes/" + sb["id"])
            self.assertIn(st, (200, 204), body)
            both = time.monotonic() - t0
            worst = 0.0
            while time.monotonic() - away < 30:
                for s in self.sups.values():
                    t = time.monotonic()
                    st, _, d = s.request("GET", "/v1/nodes", timeout=5)
                    worst = max(worst, time.monotonic() - t)
                    self.assertEqual(st, 200, d)
                time.sleep(1)
            print("while away: create + delete %.1f ms; worst GET /v1/nodes %.1f ms"
                  % (both * 1000, worst * 1000))
            # a deadline with a loaded machine's room (the worst of some 90
            # calls), still below the 3 s a call to the away API server
            # could take to fail (libcurl's connect timeout)
            self.assertLess(worst, 2.5)
            self.assertLess(both, 5)
            d = self.directory("n2")
            self.assertFalse(d["kube"]["connected"])
            self.assertGreaterEqual(d["kube"]["events_queued"], 2)  # created, deleted
            # every lease ran out meanwhile (8 s): none is offered
            self.assertFalse(any(e["live"] for e in d["nodes"]), d)
            for s in self.sups.values():
                self.assertTrue(s.alive(), s.log())
        finally:
            self.cp.start_apiserver()
        back = time.monotonic()
        for n in self.sups:
            wait_for("lease of %s renewed after the outage" % n,
                     lambda: self.lease(n)["spec"]["renewTime"] > before[n], 20)
        wait_for("queued SandboxCreated", lambda: self.event_for("SandboxCreated", sb["id"]), 20)
        wait_for("queued SandboxDeleted", lambda: self.event_for("SandboxDeleted", sb["id"]), 20)
        created = self.event_for("SandboxCreated", sb["id"])
        # when it happened, not when it was delivered
        self.assertLess(created["firstTimestamp"], self.lease("n2")["spec"]["renewTime"])
        for name in self.sups:
            wait_for("directory of %s live again" % name,
                     lambda: (lambda d: len(d["nodes"]) == 3 and all(e["live"] for e in d["nodes"])
                              and d["kube"]["connected"] and d["kube"]["events_queued"] == 0)(
                         self.directory(name)), 20)
        print("caught up %.1f s after the API server came back" % (time.monotonic() - back))
        d = self.directory("n1")
        self.assertGreaterEqual(d["kube"]["watch_resumes"], 1)

    def test_5_clean_stop(self):
        for s in self.sups.values():
            stop_clean(s)

    def test_6_refused_token_is_a_start_error(self):
        p = os.path.join(self.tmp, "kubeconfig-refused")
        self.cp.write_kubeconfig(p, "not-a-token-it-knows")
        sup, agent = binaries()
        s = Supervisor(sup, agent, pool_size=0, extra=["--kubeconfig", p])
        try:
            with self.assertRaises(RuntimeError):
                s.start(timeout=15)
            self.assertEqual(s.wait(10), 1)
            self.assertIn("refuses these credentials", s.log())
        finally:
            s.cleanup()

    def test_7_in_cluster(self):
        # What a pod sees: KUBERNETES_SERVICE_HOST/PORT, and the service
        # account's token, ca.crt and namespace in the folder the kubelet
        # mounts, given here in a mount namespace of the supervisor's own
        # (a tmpfs over /run, /var/run's target): the machine's /run is
        # untouched.
        sa = os.path.join(self.tmp, "sa")
        os.mkdir(sa)
        for name, text in (("token", self.sa_token), ("namespace", NS)):
            with open(os.path.join(sa, name), "w") as f:
                f.write(text)
        shutil.copy(self.cp.ca, os.path.join(sa, "ca.crt"))
        sup, agent = binaries()
        # Its namespace starts as a copy of every mount there is: other
        # tests' below /tmp (their sandboxes' disks) go, so that it holds
        # none of them, and those below /run (network namespaces), which
        # the tmpfs would hide from their cleanup.
        mount = (detach_below_cmd(["/run", "/tmp"], keep=[sa, sup, agent, self.tmp]) + " && "
                 "mount -t tmpfs -o size=1m sbx-test /run && "
                 "mkdir -p /run/secrets/kubernetes.io/serviceaccount && "
                 "cp %s/* /run/secrets/kubernetes.io/serviceaccount/ && exec \"$@\"" % sa)
        s = Supervisor(sup, agent, pool_size=0,
                       wrap=["unshare", "-m", "--propagation", "private", "sh", "-c", mount, "sh"],
                       extra=["--kube-in-cluster", "--node-name", "pod-node",
                              "--lease-duration", str(LEASE_S)])
        saved = dict(os.environ)
        os.environ["KUBERNETES_SERVICE_HOST"] = "127.0.0.1"
        os.environ["KUBERNETES_SERVICE_PORT"] = str(self.cp.port)
        try:
            s.start()
            l = wait_for("lease of pod-node", lambda: self.lease("pod-node"), 15)
            self.assertEqual(l["metadata"]["annotations"]["sbx.dev/url"],
                             "http://127.0.0.1:%d" % s.port)
            stop_clean(s)
        finally:
            os.environ.clear()
            os.environ.update(saved)
            s.cleanup()


class StartErrors(unittest.TestCase):
    def run_sup(self, extra, pool=0):
        sup, agent = binaries()
        return Supervisor(sup, agent, pool_size=pool, extra=extra)

    def test_unreadable_kubeconfig(self):
        s = self.run_sup(["--kubeconfig", "/nonexistent/kubeconfig"])
        try:
            with self.assertRaises(RuntimeError):
                s.start(timeout=15)
            self.assertEqual(s.wait(10), 1)
            self.assertIn("kubeconfig: /nonexistent/kubeconfig: No such file", s.log())
        finally:
            s.cleanup()

    def test_bad_yaml(self):
        d = tempfile.mkdtemp(prefix="sbx-k8s-")
        try:
            p = os.path.join(d, "kc")
            with open(p, "w") as f:
                f.write("clusters: [\n")
            s = self.run_sup(["--kubeconfig", p])
            try:
                with self.assertRaises(RuntimeError):
                    s.start(timeout=15)
                self.assertIn("YAML line", s.log())
            finally:
                s.cleanup()
        finally:
            shutil.rmtree(d)

    def test_unreachable_server_retried(self):
        # a port nobody listens on: refused at once, retried, never a crash
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        sock.close()
        d = tempfile.mkdtemp(prefix="sbx-k8s-")
        try:
            p = os.path.join(d, "kc")
            with open(p, "w") as f:
                json.dump({"current-context": "x",
                           "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                           "clusters": [{"name": "c", "cluster": {
                               "server": "https://127.0.0.1:%d" % port}}],
                           "users": [{"name": "u", "user": {"token": "t"}}]}, f)
            s = self.run_sup(["--kubeconfig", p, "--node-name", "lonely", "--lease-duration", "4"])
            try:
                s.start(timeout=15)
                time.sleep(3)
                st, _, body = s.request("GET", "/v1/nodes")
                self.assertEqual(st, 200, body)
                self.assertFalse(body["kube"]["connected"])
                self.assertEqual(body["nodes"], [])
                self.assertIn("does not answer", s.log())
                stop_clean(s)
            finally:
                s.cleanup()
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    apiserver.require_binaries()
    unittest.main()
